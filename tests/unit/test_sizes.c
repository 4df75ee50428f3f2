/* sz: logical sizes remembered by backing state (fs/sizes.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sizes.h"

static struct stat st_of(ino_t ino, off_t size, time_t ctime_s, long ctime_ns)
{
    struct stat st = {0};
    st.st_dev = 7, st.st_ino = ino, st.st_size = size;
    st.st_ctim.tv_sec = ctime_s, st.st_ctim.tv_nsec = ctime_ns;
    return st;
}

/* A size comes back only for the very state it was stored for. */
static void test_state_is_the_key(void **state)
{
    (void)state;
    sz_cache *c = sz_new(64);
    assert_non_null(c);
    struct stat a = st_of(12, 4096, 100, 5);
    uint64_t size = 0;
    assert_int_equal(sz_get(c, &a, &size), 0);
    sz_put(c, &a, 123456);
    assert_int_equal(sz_get(c, &a, &size), 1);
    assert_int_equal(size, 123456);
    struct stat changed[] = {st_of(12, 4096, 100, 6), st_of(12, 4096, 101, 5),
                             st_of(12, 8192, 100, 5), st_of(13, 4096, 100, 5)};
    for (size_t i = 0; i < sizeof(changed) / sizeof(changed[0]); i++)
        assert_int_equal(sz_get(c, &changed[i], &size), 0);
    changed[0].st_dev = 8;
    a.st_dev = 8;
    assert_int_equal(sz_get(c, &a, &size), 0);      /* another device */
    sz_free(c);
}

/* More files than a set holds (a cache of 4 entries is one set): the least recently used
 * goes, and a miss is a miss, never another file's size. */
static void test_full_set_drops_least_recent(void **state)
{
    (void)state;
    sz_cache *c = sz_new(4);
    struct stat f[5];
    uint64_t size = 0;
    for (int i = 0; i < 5; i++)
        f[i] = st_of((ino_t)(i + 1), 10 * (i + 1), i, i);
    for (int i = 0; i < 4; i++)
        sz_put(c, &f[i], 100u + (unsigned)i);
    assert_int_equal(sz_get(c, &f[0], &size), 1);   /* file 1 used again: file 2 is oldest */
    sz_put(c, &f[4], 104);
    assert_int_equal(sz_get(c, &f[1], &size), 0);
    for (int i = 0; i < 5; i++) {
        if (i == 1)
            continue;
        assert_int_equal(sz_get(c, &f[i], &size), 1);
        assert_int_equal(size, 100u + (unsigned)i);
    }
    sz_free(c);
    assert_int_equal(sz_get(NULL, &f[0], &size), 0);   /* no cache: always a miss */
}

/* A file's new state takes its own old slot, not another file's: the set keeps the others. */
static void test_new_state_replaces_own(void **state)
{
    (void)state;
    sz_cache *c = sz_new(4);
    struct stat f[4];
    uint64_t size = 0;
    for (int i = 0; i < 4; i++) {
        f[i] = st_of((ino_t)(i + 1), 10, i, 0);
        sz_put(c, &f[i], 1u + (unsigned)i);
    }
    struct stat again = st_of(1, 20, 50, 0);      /* file 1 rewritten: size and ctime moved */
    for (int k = 0; k < 8; k++)
        sz_put(c, &again, 77);
    assert_int_equal(sz_get(c, &f[0], &size), 0);   /* the old state is gone */
    assert_int_equal(sz_get(c, &again, &size), 1);
    assert_int_equal(size, 77);
    for (int i = 1; i < 4; i++)
        assert_int_equal(sz_get(c, &f[i], &size), 1);
    sz_free(c);
}

/* The tree that a direct-mapped table lost a tenth of: 2,000 files in 16,384 entries all
 * stay. */
static void test_tree_fits(void **state)
{
    (void)state;
    sz_cache *c = sz_new(16384);
    uint64_t size = 0;
    for (ino_t i = 0; i < 2000; i++) {
        struct stat st = st_of(1000 + i * 7, 4096, 1, 0);
        sz_put(c, &st, i);
    }
    unsigned hits = 0;
    for (ino_t i = 0; i < 2000; i++) {
        struct stat st = st_of(1000 + i * 7, 4096, 1, 0);
        hits += (unsigned)sz_get(c, &st, &size);
    }
    assert_true(hits >= 1995);
    sz_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_is_the_key),
        cmocka_unit_test(test_full_set_drops_least_recent),
        cmocka_unit_test(test_new_state_replaces_own),
        cmocka_unit_test(test_tree_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
