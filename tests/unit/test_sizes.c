/* sz: logical sizes remembered by backing state (fs/sizes.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "fmt.h"
#include "sb.h"
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


/* ---- the sizes file (FORMAT.md 1.6) ---- */

/* A cache of three files of device 7 and one of device 8, used in the order 3, 1, 2. */
static sz_cache *three_files(struct stat f[3])
{
    sz_cache *c = sz_new(64);
    assert_non_null(c);
    for (int i = 0; i < 3; i++)
        f[i] = st_of((ino_t)(100 + i), 4096 * (i + 1), 1700000000 + i, 999999999 - i);
    struct stat other = st_of(100, 4096, 1700000000, 999999999);
    other.st_dev = 8;
    sz_put(c, &other, 5);
    sz_put(c, &f[2], 30), sz_put(c, &f[0], 10), sz_put(c, &f[1], (uint64_t)1 << 40);
    return c;
}

/* What is written reads back: the device's entries only, oldest use first, under the device
 * of the mount that reads them. */
static void test_file_round_trip(void **state)
{
    (void)state;
    struct stat f[3];
    sz_cache *c = three_files(f);
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t n = 0, size = 0;
    assert_int_equal(sz_export(c, 7, &buf, &len), SZ_OK);
    assert_int_equal(len, SZ_HEAD + 3 * SZ_ENTRY + 8);
    assert_memory_equal(buf, "FPLZSIZE", 8);
    assert_int_equal(fmt_get64(buf + SZ_HEAD), 102);     /* file 3 was used first */
    assert_int_equal(fmt_get64(buf + SZ_HEAD + 2 * SZ_ENTRY + 32), (uint64_t)1 << 40);
    assert_int_equal(sz_parse(buf, len, &n), SZ_OK);
    assert_int_equal(n, 3);
    sz_cache *d = sz_new(64);
    assert_int_equal(sz_import(d, buf, len, 9, &n), SZ_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sz_get(d, &f[i], &size), 0);    /* device 7: not this mount's */
        f[i].st_dev = 9;
        assert_int_equal(sz_get(d, &f[i], &size), 1);
        assert_int_equal(size, i == 0 ? 10 : i == 1 ? (uint64_t)1 << 40 : 30);
    }
    free(buf);
    sz_free(c);
    sz_free(d);
}

/* Any damage makes the whole file unused: every single flipped bit, every cut. */
static void test_file_damage(void **state)
{
    (void)state;
    struct stat f[3];
    sz_cache *c = three_files(f);
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t n = 0;
    assert_int_equal(sz_export(c, 7, &buf, &len), SZ_OK);
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            assert_int_not_equal(sz_parse(buf, len, &n), SZ_OK);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    for (size_t cut = 0; cut < len; cut++)
        assert_int_not_equal(sz_parse(buf, cut, &n), SZ_OK);
    assert_int_equal(sz_parse(buf, 10, &n), SZ_ERR_LENGTH);
    buf[0] = 'X';
    assert_int_equal(sz_parse(buf, len, &n), SZ_ERR_MAGIC);
    buf[0] = 'F';
    fmt_put32(buf + 8, 2);
    assert_int_equal(sz_parse(buf, len, &n), SZ_ERR_VERSION);
    fmt_put32(buf + 8, 1);
    fmt_put64(buf + 16, 4);                               /* one more than there are */
    assert_int_equal(sz_parse(buf, len, &n), SZ_ERR_LENGTH);
    fmt_put64(buf + 16, 3);
    free(buf);
    sz_free(c);
}

/* Entries no state can have fail the file even with a good checksum. */
static void test_file_impossible_entry(void **state)
{
    (void)state;
    struct stat f[3];
    sz_cache *c = three_files(f);
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t n = 0;
    assert_int_equal(sz_export(c, 7, &buf, &len), SZ_OK);
    const struct { size_t at; int width; uint64_t v; } bad[] = {
        {0, 8, 0},                        /* inode 0 */
        {8, 8, (uint64_t)1 << 63},        /* a negative backing size */
        {24, 4, 1000000000},              /* nanoseconds */
        {28, 4, 1},                       /* the zeros */
        {32, 8, UINT64_MAX},              /* a logical size past any file */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t *copy = malloc(len);
        memcpy(copy, buf, len);
        uint8_t *e = copy + SZ_HEAD + SZ_ENTRY + bad[i].at;
        if (bad[i].width == 8)
            fmt_put64(e, bad[i].v);
        else
            fmt_put32(e, (uint32_t)bad[i].v);
        fmt_put64(copy + len - 8, XXH64(copy, len - 8, 0));
        assert_int_equal(sz_parse(copy, len, &n), SZ_ERR_ENTRY);
        free(copy);
    }
    free(buf);
    sz_free(c);
}

/* More entries than the reading cache holds: the most recently used ones stay. */
static void test_file_keeps_most_recent(void **state)
{
    (void)state;
    sz_cache *c = sz_new(64);
    struct stat f[8];
    uint64_t n = 0, size = 0;
    for (int i = 0; i < 8; i++) {
        f[i] = st_of((ino_t)(i + 1), 10, 5, 0);
        sz_put(c, &f[i], (uint64_t)i);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sz_export(c, 7, &buf, &len), SZ_OK);
    sz_cache *small = sz_new(4);                          /* one set of 4 */
    assert_int_equal(sz_import(small, buf, len, 7, &n), SZ_OK);
    assert_int_equal(n, 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(sz_get(small, &f[i], &size), i >= 4);
    free(buf);
    sz_free(c);
    sz_free(small);
}

/* Through a directory: written by rename, read back; none is "missing"; a symlink or a FIFO
 * in its place is never followed or opened for long; the names are the store's own. */
static void test_file_in_directory(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sizes.XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    struct stat f[3];
    sz_cache *c = three_files(f);
    sz_cache *d = sz_new(64);
    uint64_t n = 0, size = 0;
    assert_int_equal(sz_load(d, dfd, 7, &n), SZ_ERR_MISSING);
    assert_int_equal(sz_save(c, dfd, 7, &n), SZ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(faccessat(dfd, SZ_TMP_NAME, F_OK, 0), -1);
    assert_int_equal(sz_load(d, dfd, 7, &n), SZ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(sz_get(d, &f[1], &size), 1);
    assert_int_equal(unlinkat(dfd, SZ_FILE_NAME, 0), 0);
    assert_int_equal(symlinkat("/etc/hostname", dfd, SZ_FILE_NAME), 0);
    assert_int_equal(sz_load(d, dfd, 7, &n), SZ_ERR_NOT_REGULAR);
    assert_int_equal(sz_save(c, dfd, 7, &n), SZ_OK);    /* replaces the link itself */
    struct stat st;
    assert_int_equal(fstatat(dfd, SZ_FILE_NAME, &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(unlinkat(dfd, SZ_FILE_NAME, 0), 0);
    assert_int_equal(mkfifoat(dfd, SZ_FILE_NAME, 0600), 0);
    assert_int_equal(sz_load(d, dfd, 7, &n), SZ_ERR_NOT_REGULAR);
    assert_int_equal(unlinkat(dfd, SZ_FILE_NAME, 0), 0);
    assert_true(sb_is_reserved_name(SZ_FILE_NAME) && sb_is_reserved_name(SZ_TMP_NAME));
    close(dfd);
    assert_int_equal(rmdir(dir), 0);
    sz_free(c);
    sz_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_is_the_key),
        cmocka_unit_test(test_full_set_drops_least_recent),
        cmocka_unit_test(test_new_state_replaces_own),
        cmocka_unit_test(test_tree_fits),
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_file_damage),
        cmocka_unit_test(test_file_impossible_entry),
        cmocka_unit_test(test_file_keeps_most_recent),
        cmocka_unit_test(test_file_in_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
