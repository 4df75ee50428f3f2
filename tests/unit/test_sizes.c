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

/* Two files in one slot: the later replaces the earlier, which is then a miss, never the
 * other's size. */
static void test_collision_replaces(void **state)
{
    (void)state;
    sz_cache *c = sz_new(1);
    struct stat a = st_of(1, 10, 1, 1), b = st_of(2, 20, 2, 2);
    uint64_t size = 0;
    sz_put(c, &a, 111);
    sz_put(c, &b, 222);
    assert_int_equal(sz_get(c, &a, &size), 0);
    assert_int_equal(sz_get(c, &b, &size), 1);
    assert_int_equal(size, 222);
    sz_free(c);
    assert_int_equal(sz_get(NULL, &a, &size), 0);   /* no cache: always a miss */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_is_the_key),
        cmocka_unit_test(test_collision_replaces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
