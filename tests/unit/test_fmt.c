/* Unit tests of the on-disk format and the per-file state: round trips at every block size
 * and edge sizes, stored-raw blocks, checksums, torn and rebuilt seek tables, own and foreign
 * files, and that every file decodes with liblz4's own frame decoder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <pthread.h>
#include <stdatomic.h>
#include <lz4frame.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* These tests take version 1 files apart: the fixture makes version 1 files. */
#define FX_FILE_VERSION 1
#include "fixture.h"

#define FMT_TEST_TAG "test_fmt"

static int fx_fd(fixture *fx) { return open(fx->path, O_RDWR); }

/* Text-like data that compresses, or random data that does not. */
static uint8_t *make_data(size_t n, int random, uint32_t seed)
{
    return fx_make_data(n, random, seed,
                        "lorem ipsum dolor sit amet brick block frame seek table ", 3);
}

static void check_content(fixture *fx, const uint8_t *want, size_t n)
{
    fx_check_read(fx, O_RDWR, want, n);
    fx_check_lz4f(fx, want, n);
    fx_check_lz4_tool(fx->path, want, n);
}

static void test_roundtrip_sizes(void **state)
{
    static const uint32_t sizes[] = {64u << 10, 256u << 10, 1u << 20, 4u << 20};
    for (size_t s = 0; s < 4; s++) {
        fixture *fx = fx_new(sizes[s], FMT_TEST_TAG);
        size_t bs = sizes[s], lens[] = {0, 1, bs - 1, bs, bs + 1, 5 * bs + 7};
        for (size_t k = 0; k < sizeof(lens) / sizeof(*lens); k++) {
            uint8_t *d = make_data(lens[k], 0, (uint32_t)k);
            fx_write(fx, d, lens[k], 100000);
            check_content(fx, d, lens[k]);
            free(d);
        }
        fx_free(fx);
    }
}

static void test_raw_blocks(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t n = 3 * fx->bs + 5;
    uint8_t *d = make_data(n, 1, 7);
    fx_write(fx, d, n, n);
    fmt_trailer t;
    fx_read_table(fx, &t);
    assert_int_equal(t.n_entries, 4);
    for (uint32_t i = 0; i < t.n_entries; i++)
        assert_true(t.entries[i].word & FMT_RAW_BIT);
    fmt_trailer_free(&t);
    check_content(fx, d, n);
    free(d);
    fx_free(fx);
}

static void test_corrupt_block(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t n = 3 * fx->bs;
    uint8_t *d = make_data(n, 0, 3), buf[100];
    fx_write(fx, d, n, n);
    fmt_trailer t;
    fx_read_table(fx, &t);
    fx_flip_byte(fx, fmt_entry_off(&t.entries[1]) + 4 + fmt_word_size(t.entries[1].word) / 2);
    fmt_trailer_free(&t);
    ff_file *f;
    size_t got;
    assert_int_equal(ff_open(fx->env, fx_fd(fx), "t", &f), 0);
    assert_int_equal(ff_read(f, buf, sizeof(buf), (off_t)fx->bs + 10, &got), -EIO);
    assert_int_equal(ff_read(f, buf, sizeof(buf), 10, &got), 0);
    assert_memory_equal(buf, d + 10, sizeof(buf));
    assert_int_equal(ff_read(f, buf, sizeof(buf), 2 * (off_t)fx->bs, &got), 0);
    assert_memory_equal(buf, d + 2 * fx->bs, sizeof(buf));
    ff_release(f);
    free(d);
    fx_free(fx);
}

/* damage: 0 cut the seek table off, 1 flip a byte in it, 2 append a torn hidden commit */
static void torn_case(int damage)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t n = 4 * fx->bs + 99;
    uint8_t *d = make_data(n, 0, 11);
    fx_write(fx, d, n, 50000);
    fmt_trailer t;
    fx_read_table(fx, &t);
    int fd = fx_fd(fx);
    if (damage == 0)
        assert_int_equal(ftruncate(fd, (off_t)t.start), 0);
    else if (damage == 1)
        fx_flip_byte(fx, t.start + 12);
    else {
        struct stat st;
        uint8_t junk[300];
        memset(junk, 0x5A, sizeof(junk));
        fmt_put32(junk, FMT_SKIP_HIDDEN);
        fmt_put32(junk + 4, 5000);               /* claims more than was written */
        fstat(fd, &st);
        assert_int_equal(pwrite(fd, junk, sizeof(junk), st.st_size), (ssize_t)sizeof(junk));
    }
    close(fd);
    fmt_trailer_free(&t);
    check_content(fx, d, n);                     /* open repaired it */
    fx_read_table(fx, &t);                          /* and the table is back */
    assert_int_equal(t.size, n);
    fmt_trailer_free(&t);
    free(d);
    fx_free(fx);
}

static void test_seek_table_cut(void **state) { torn_case(0); }
static void test_seek_table_damaged(void **state) { torn_case(1); }
static void test_torn_commit_rolled_back(void **state) { torn_case(2); }

static void test_foreign_files(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t n = 200000, got;
    uint8_t *d = make_data(n, 0, 5);
    size_t cap = LZ4F_compressFrameBound(n, NULL);
    uint8_t *lz = malloc(cap), *buf = malloc(cap);
    size_t lzn = LZ4F_compressFrame(lz, cap, d, n, NULL);
    assert_false(LZ4F_isError(lzn));
    const uint8_t *contents[] = {d, lz};
    size_t lens[] = {n, lzn};
    for (int k = 0; k < 2; k++) {
        int fd = open(fx->path, O_RDWR | O_TRUNC);
        assert_int_equal(write(fd, contents[k], lens[k]), (ssize_t)lens[k]);
        ff_file *f;
        assert_int_equal(ff_open(fx->env, fd, "t", &f), 0);
        assert_true(ff_is_foreign(f));
        assert_int_equal(ff_size(f), lens[k]);
        assert_int_equal(ff_read(f, buf, cap, 0, &got), 0);
        assert_int_equal(got, lens[k]);
        assert_memory_equal(buf, contents[k], lens[k]);
        ff_release(f);
    }
    fx_write(fx, d, n, n);
    ff_file *f;
    assert_int_equal(ff_open(fx->env, fx_fd(fx), "t", &f), 0);
    assert_false(ff_is_foreign(f));
    ff_release(f);
    free(lz), free(buf), free(d);
    fx_free(fx);
}

static void test_newer_version_refused(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    uint8_t *d = make_data(1000, 0, 1);
    fx_write(fx, d, 1000, 1000);
    int fd = fx_fd(fx);
    uint8_t v[4];
    fmt_put32(v, FMT_VERSION + 1);
    assert_int_equal(pwrite(fd, v, 4, FMT_EMPTY_FRAME_LEN + 12), 4);
    ff_file *f;
    assert_int_equal(ff_open(fx->env, fd, "t", &f), -EPROTO);
    free(d);
    fx_free(fx);
}

/* Appends with a flush after each, overwrites, truncates and holes, checked against a copy
 * kept in memory and against liblz4's decoder after every commit. */
static void test_modify_in_place(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t cap = 12 * fx->bs, n = 0;
    uint8_t *want = calloc(1, cap), *piece = make_data(cap, 0, 9);
    fx_write(fx, want, 0, 1);
    ff_file *f;
    for (int round = 0; round < 60; round++) {
        assert_int_equal(ff_open(fx->env, fx_fd(fx), "t", &f), 0);
        size_t len = 1 + (size_t)(round * 7919) % 30000;
        size_t off = round % 5 == 4 && n > len ? (size_t)(round * 104729) % (n - len) : n;
        if (round % 13 == 12) {                  /* shrink, then grow with a hole */
            size_t cut = n / 3;
            assert_int_equal(ff_truncate(f, (off_t)cut), 0);
            memset(want + cut, 0, cap - cut);
            n = cut;
            off = n + 70000 < cap - len ? n + 70000 : n;
        }
        assert_int_equal(ff_write(f, piece + off, len, (off_t)off), 0);
        memcpy(want + off, piece + off, len);
        n = off + len > n ? off + len : n;
        assert_int_equal(ff_flush(f, round & 1), 0);
        assert_int_equal(ff_release(f), 0);
        check_content(fx, want, n);
    }
    assert_int_equal(ff_open(fx->env, fx_fd(fx), "t", &f), 0);
    assert_int_equal(ff_truncate(f, 10 * (off_t)fx->bs), 0);
    assert_int_equal(ff_lseek(f, 0, SEEK_DATA), 0);
    assert_true(ff_lseek(f, 0, SEEK_HOLE) <= 10 * (off_t)fx->bs);
    assert_int_equal(ff_lseek(f, 9 * (off_t)fx->bs + 1, SEEK_HOLE), 9 * (off_t)fx->bs + 1);
    assert_int_equal(ff_lseek(f, 10 * (off_t)fx->bs, SEEK_DATA), -ENXIO);
    ff_release(f);
    free(want), free(piece);
    fx_free(fx);
}

/* A long sequential write commits every few blocks without a seek table; until the file is
 * flushed another reader sees the old state, and afterwards there is one table, not many. */
static void test_streaming_commits(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t n = 40 * fx->bs + 123;
    uint8_t *d = make_data(n, 0, 21);
    ff_file *f;
    uint64_t size;
    int own;
    int fd = open(fx->path, O_RDWR | O_TRUNC);
    assert_int_equal(ff_create(fx->env, fd, "t", &f), 0);
    for (size_t off = 0; off < n; off += 32768)
        assert_int_equal(ff_write(f, d + off, n - off < 32768 ? n - off : 32768, (off_t)off), 0);
    fd = fx_fd(fx);
    /* no table at EOF: a closed file like this would be torn, and only the repair of an
     * open can tell its size (1); the frames the walk sees are hidden, so it guesses 0 */
    assert_int_equal(ff_stat_size(fx->env, fd, &size, &own), 1);
    close(fd);
    assert_int_equal(size, 0);                    /* hidden frames are not the file yet */
    assert_int_equal(ff_release(f), 0);
    check_content(fx, d, n);
    struct stat st;
    stat(fx->path, &st);
    fmt_trailer t;
    fx_read_table(fx, &t);
    /* one table of 41 entries plus one small table from creation */
    assert_true((uint64_t)st.st_size < t.start + 2 * fmt_trailer_len(41, 8, 0));
    fmt_trailer_free(&t);
    free(d);
    fx_free(fx);
}

/* A streaming writer that goes back to change an early block (a header patched after the
 * data, as archivers and muxers do) while its later bricks are still in the engine: the
 * change must survive the bricks' completion and reach the file. */
static void test_rewrite_behind_streaming_bricks(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t n = 48 * fx->bs + 777;
    uint8_t *d = make_data(n, 0, 41);
    ff_file *f;
    int fd = open(fx->path, O_RDWR | O_TRUNC);
    assert_int_equal(ff_create(fx->env, fd, "t", &f), 0);
    size_t off = 0;
    for (int round = 0; off < n; round++) {
        size_t chunk = fx->bs;
        for (int k = 0; k < 8 && off < n; k++, off += chunk)
            assert_int_equal(ff_write(f, d + off, n - off < chunk ? n - off : chunk,
                                      (off_t)off), 0);
        if (round == 0)
            continue;                  /* the first brick is still in the engine */
        /* patch a stored block: the first one, or the one just before the brick in flight */
        size_t at = round % 2 ? 100 : off - 9 * fx->bs + 5;
        memset(d + at, 'A' + round, 50);
        assert_int_equal(ff_write(f, d + at, 50, (off_t)at), 0);
    }
    assert_int_equal(ff_release(f), 0);
    check_content(fx, d, n);
    free(d);
    fx_free(fx);
}

/* Readers decode stored blocks without the file's lock while a writer retires the frames
 * they came from (overwrites) and starts the file over (truncate to 0, which reuses the
 * offsets): every block read is one whole version, never EIO, never a mix or stale bytes.
 * Each version fills every block with one byte value; blocks are read in parts, so both
 * the direct decode and the decoded-block cache are in play. */
typedef struct {
    ff_file *f;
    uint32_t bs, n_blocks;
    atomic_int stop, bad;
    atomic_uint reads;
} rw_race;

static void *rw_reader(void *p)
{
    rw_race *r = p;
    uint8_t *buf = malloc(r->bs);
    while (!atomic_load(&r->stop) && !r->bad) {
        for (uint32_t i = 0; i < r->n_blocks && !r->bad; i++) {
            size_t got = 0, part = (r->reads % 3) * (r->bs / 4);
            int rc = ff_read(r->f, buf, r->bs - part, (off_t)((uint64_t)i * r->bs + part), &got);
            r->reads++;
            if (rc != 0) {
                fprintf(stderr, "read of block %u: %s\n", i, strerror(-rc));
                r->bad = 1;
            }
            for (size_t k = 1; k < got && !r->bad; k++)
                if (buf[k] != buf[0] || buf[0] < 'A' || buf[0] > 'Z') {
                    fprintf(stderr, "block %u holds a mix at %zu: %02x %02x\n", i, k, buf[0],
                            buf[k]);
                    r->bad = 1;
                }
        }
    }
    free(buf);
    return NULL;
}

static void test_reads_race_retire_and_restart(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    rw_race r = {.bs = fx->bs, .n_blocks = 6};
    size_t n = (size_t)r.n_blocks * r.bs;
    uint8_t *v = malloc(n);
    int fd = open(fx->path, O_RDWR | O_TRUNC);
    assert_int_equal(ff_create(fx->env, fd, "t", &r.f), 0);
    memset(v, 'A', n);
    assert_int_equal(ff_write(r.f, v, n, 0), 0);
    assert_int_equal(ff_flush(r.f, 0), 0);
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&t[k], NULL, rw_reader, &r), 0);
    /* at least 300 commits, and on until the readers have done 3000 reads */
    int round = 0;
    for (; (round < 300 || atomic_load(&r.reads) < 3000) && round < 100000 && !r.bad; round++) {
        uint8_t c = (uint8_t)('A' + round % 26);
        memset(v, c, n);
        if (round % 3 == 0) {
            /* the whole file again: every block size the reader sees stays whole */
            assert_int_equal(ff_truncate(r.f, 0), 0);
            assert_int_equal(ff_write(r.f, v, n, 0), 0);
        } else {
            uint32_t i = (uint32_t)round % r.n_blocks;    /* one block over: a retire */
            assert_int_equal(ff_write(r.f, v, r.bs, (off_t)((uint64_t)i * r.bs)), 0);
        }
        assert_int_equal(ff_flush(r.f, 0), 0);
    }
    atomic_store(&r.stop, 1);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    print_message("    %u reads during %d commits\n", atomic_load(&r.reads), round);
    assert_int_equal(r.bad, 0);
    assert_int_equal(ff_release(r.f), 0);
    free(v);
    fx_free(fx);
}

/* Truncating to nothing (what `cp` over a file does) leaves no old frame behind. */
static void test_truncate_to_zero_starts_over(void **state)
{
    fixture *fx = fx_new(64u << 10, FMT_TEST_TAG);
    size_t n = 20 * fx->bs + 5;
    uint8_t *d = make_data(n, 0, 33), *e = make_data(n, 0, 34);
    fx_write(fx, d, n, n);
    ff_file *f;
    assert_int_equal(ff_open(fx->env, fx_fd(fx), "t", &f), 0);
    assert_int_equal(ff_truncate(f, 0), 0);
    assert_int_equal(ff_write(f, e, n, 0), 0);
    assert_int_equal(ff_release(f), 0);
    check_content(fx, e, n);
    struct stat st;
    stat(fx->path, &st);
    fmt_trailer t;
    fx_read_table(fx, &t);
    uint64_t live = 0;
    for (uint32_t i = 0; i < t.n_entries; i++)
        live += fmt_block_len(t.entries[i].word);
    assert_true((uint64_t)st.st_size < live + live / 4);   /* not two copies of the file */
    fmt_trailer_free(&t);
    free(d), free(e);
    fx_free(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_sizes),
        cmocka_unit_test(test_raw_blocks),
        cmocka_unit_test(test_corrupt_block),
        cmocka_unit_test(test_seek_table_cut),
        cmocka_unit_test(test_seek_table_damaged),
        cmocka_unit_test(test_torn_commit_rolled_back),
        cmocka_unit_test(test_foreign_files),
        cmocka_unit_test(test_newer_version_refused),
        cmocka_unit_test(test_modify_in_place),
        cmocka_unit_test(test_streaming_commits),
        cmocka_unit_test(test_rewrite_behind_streaming_bricks),
        cmocka_unit_test(test_truncate_to_zero_starts_over),
        cmocka_unit_test(test_reads_race_retire_and_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
