/* Unit tests of chk: files written by the real writer (ff_create, ff_write, ff_release on the
 * software engine) are damaged in one place each; chk_file must find exactly that, write
 * nothing when only checking, repair what it says it repairs (after which the file reads back
 * and decodes with liblz4's frame decoder), and never touch a bad block. Also the stat
 * figures, the walk over a store and the names of conversion temporaries. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chk.h"
/* These tests take version 1 files apart: the fixture makes version 1 files. */
#define FX_FILE_VERSION 1
#include "fixture.h"

#define BS (64u << 10)

static uint8_t *make_data(size_t n, int random, uint32_t seed)
{
    return fx_make_data(n, random, seed, "check repair frame seek table block marker wrapper ",
                        5);
}

static void write_file(fixture *fx, const uint8_t *data, size_t n)
{
    fx_write(fx, data, n, 100000);
}

/* One test's file: n bytes of data written by the real writer, and its table as written. */
typedef struct {
    fixture *fx;
    uint8_t *data;
    size_t n;
    fmt_trailer t;
} chk_case;

static void case_open(chk_case *c, size_t n, int random, uint32_t seed)
{
    c->fx = fx_new(BS, "test_chk");
    c->n = n;
    c->data = make_data(n, random, seed);
    write_file(c->fx, c->data, n);
    fx_read_table(c->fx, &c->t);
}

static void case_close(chk_case *c)
{
    fmt_trailer_free(&c->t);
    free(c->data);
    fx_free(c->fx);
}

static int lines;
static void count_line(void *ctx, const char *line) { lines++; }

/* chk_file on the fixture's file; checks that CHK_CHECK left every byte as it was. */
static chk_result run(fixture *fx, chk_mode mode)
{
    chk_result r;
    size_t n1, n2;
    uint8_t *before = fx_slurp(fx->path, &n1);
    int fd = open(fx->path, mode == CHK_CHECK ? O_RDONLY : O_RDWR);
    assert_true(fd >= 0);
    lines = 0;
    assert_int_equal(chk_file(fd, NULL, mode, UINT64_MAX, count_line, NULL, &r), 0);
    close(fd);
    uint8_t *after = fx_slurp(fx->path, &n2);
    if (mode == CHK_CHECK || !r.fixed) {
        assert_int_equal(n1, n2);
        assert_memory_equal(before, after, n1);
    }
    assert_true(!r.found || lines > 0);            /* every finding is said */
    free(before);
    free(after);
    return r;
}

/* First block of the k-th frame (blocks of one frame lie back to back), or n_entries. */
static uint32_t frame_first(const fmt_trailer *t, uint32_t k)
{
    uint32_t i = 0;
    for (uint32_t seen = 0; i < t->n_entries; i++) {
        const fmt_entry *p = i ? &t->entries[i - 1] : NULL;
        if (!p || fmt_entry_off(p) + fmt_block_len(p->word) != fmt_entry_off(&t->entries[i]))
            if (seen++ == k)
                break;
    }
    return i;
}

/* damage one place, then: CHECK finds `want` and writes nothing, PREEN (or REPAIR) fixes it,
 * a second check is clean and the content reads and decodes as the case's data (its first
 * `keep` bytes). */
static void repair_case(chk_case *c, size_t keep, uint32_t want, chk_mode mode)
{
    chk_result r = run(c->fx, CHK_CHECK);
    assert_int_equal(r.kind, CHK_OWN);
    assert_int_equal(r.found & want, want);
    assert_int_equal(r.found & CHK_P_UNREPAIRABLE, 0);
    assert_int_equal(r.fixed, 0);
    r = run(c->fx, mode);
    assert_int_equal(r.fixed & want, want);
    assert_int_equal(r.found & ~r.fixed, 0);
    r = run(c->fx, CHK_CHECK);
    assert_int_equal(r.found, 0);
    assert_int_equal(r.size, keep);
    fx_check_read(c->fx, O_RDONLY, c->data, keep);
    fx_check_lz4f(c->fx, c->data, keep);
}

/* Damage that no mode may touch: every mode finds `found`, fixes nothing and writes nothing
 * (run() checks the bytes). */
static void left_alone(fixture *fx, uint32_t found, uint32_t bad_blocks)
{
    for (chk_mode m = CHK_CHECK; m <= CHK_REPAIR; m++) {
        chk_result r = run(fx, m);
        assert_int_equal(r.found, found);
        assert_int_equal(r.fixed, 0);
        assert_int_equal(r.bad_blocks, bad_blocks);
    }
}

/* Overwrites the file with the first n bytes of data, as a plain file. */
static void write_plain(fixture *fx, const uint8_t *data, size_t n)
{
    FILE *fp = fopen(fx->path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

/* The first byte of the block of table entry i. */
static uint64_t block_at(const chk_case *c, uint32_t i)
{
    return fmt_entry_off(&c->t.entries[i]) + 4;
}

static void test_clean_and_foreign(void **state)
{
    chk_case c;
    case_open(&c, 5 * BS + 321, 0, 1);
    chk_result r = run(c.fx, CHK_REPAIR);
    assert_int_equal(r.kind, CHK_OWN);
    assert_int_equal(r.found, 0);
    assert_int_equal(r.size, c.n);
    assert_int_equal(r.n_blocks, 6);
    assert_int_equal(r.block_size, BS);
    write_plain(c.fx, c.data, 5000);           /* plain text: foreign, never touched */
    r = run(c.fx, CHK_REPAIR);
    assert_int_equal(r.kind, CHK_FOREIGN);
    assert_int_equal(r.found, 0);
    write_plain(c.fx, c.data, 10);             /* shorter than a marker */
    assert_int_equal(run(c.fx, CHK_REPAIR).kind, CHK_FOREIGN);
    case_close(&c);
}

static void test_newer_untouched(void **state)
{
    chk_case c;
    case_open(&c, BS, 0, 2);
    int fd = open(c.fx->path, O_RDWR);
    uint8_t v[4];
    fmt_put32(v, FMT_VERSION + 1);
    assert_int_equal(pwrite(fd, v, 4, 31), 4);
    assert_int_equal(ftruncate(fd, 200), 0);   /* torn as well: still nothing is written */
    close(fd);
    chk_result r = run(c.fx, CHK_REPAIR);
    assert_int_equal(r.kind, CHK_NEWER);
    assert_int_equal(r.fixed, 0);
    case_close(&c);
}

static void test_bad_block_left_alone(void **state)
{
    chk_case c;
    case_open(&c, 4 * BS, 0, 3);
    fx_flip_byte(c.fx, block_at(&c, 2) + 10);
    left_alone(c.fx, CHK_P_BLOCK, 1);
    case_close(&c);
}

/* A bad block in a file without a table: the rebuilt table keeps it and what follows it. */
static void test_bad_block_without_table(void **state)
{
    chk_case c;
    case_open(&c, 20 * BS + 5, 0, 4);
    fx_flip_byte(c.fx, block_at(&c, 1) + 10);
    fx_flip_byte(c.fx, c.t.start + 20);
    chk_result r = run(c.fx, CHK_PREEN);
    assert_int_equal(r.found, CHK_P_TABLE | CHK_P_BLOCK);
    assert_int_equal(r.fixed, CHK_P_TABLE);
    assert_int_equal(r.size, c.n);
    assert_int_equal(r.bad_blocks, 1);
    fmt_trailer t;
    fx_read_table(c.fx, &t);
    assert_int_equal(t.size, c.n);             /* nothing after the bad block was cut */
    fmt_trailer_free(&t);
    case_close(&c);
}

static void test_frame_header(void **state)
{
    chk_case c;
    case_open(&c, 10 * BS + 77, 0, 5);
    uint32_t k = frame_first(&c.t, 1);
    assert_true(k < c.t.n_entries);
    fx_flip_byte(c.fx, fmt_entry_off(&c.t.entries[k]) - FMT_FRAME_HEADER_LEN + 7);
    repair_case(&c, c.n, CHK_P_HEADER, CHK_PREEN);
    case_close(&c);
}

static void test_content_checksum_and_size_word(void **state)
{
    chk_case c;
    case_open(&c, 9 * BS, 0, 6);
    const fmt_entry *last0 = &c.t.entries[frame_first(&c.t, 1) - 1];   /* ends the first frame */
    fx_flip_byte(c.fx, fmt_entry_off(last0) + fmt_block_len(last0->word) + 5);
    fx_flip_byte(c.fx, fmt_entry_off(&c.t.entries[0]) + 1);
    repair_case(&c, c.n, CHK_P_HEADER, CHK_PREEN);
    case_close(&c);
}

static void test_seek_table(void **state)
{
    chk_case c;
    case_open(&c, 3 * BS + 1, 1, 7);           /* raw blocks */
    fx_flip_byte(c.fx, c.t.start + 8 + 12 + 2);
    repair_case(&c, c.n, CHK_P_TABLE, CHK_PREEN);
    case_close(&c);
}

static void test_torn_tail(void **state)
{
    chk_case c;
    case_open(&c, 20 * BS + 9, 0, 8);
    uint32_t k = frame_first(&c.t, 2);
    assert_true(k + 1 < c.t.n_entries);
    uint64_t cut = fmt_entry_off(&c.t.entries[k]) + 3;    /* inside the third frame */
    uint64_t frame16 = fmt_entry_off(&c.t.entries[k]) - FMT_FRAME_HEADER_LEN;
    assert_int_equal(truncate(c.fx->path, (off_t)cut), 0);
    chk_result r = run(c.fx, CHK_CHECK);
    assert_int_equal(r.cut_bytes, cut - frame16);     /* the walk stops where that frame starts */
    repair_case(&c, (size_t)k * BS, CHK_P_TABLE | CHK_P_TORN, CHK_PREEN);
    case_close(&c);
}

static void test_marker_only(void **state)
{
    chk_case c;
    case_open(&c, BS, 0, 9);
    assert_int_equal(truncate(c.fx->path, FMT_MARKER_LEN), 0);
    repair_case(&c, 0, CHK_P_TABLE, CHK_PREEN);
    case_close(&c);
}

/* The length of the data frame at pos (header, blocks, EndMark, content checksum). */
static uint32_t frame_len(int fd, uint64_t pos)
{
    uint64_t p = pos + FMT_FRAME_HEADER_LEN;
    uint8_t w[4];
    for (;;) {
        assert_int_equal(pread(fd, w, 4, (off_t)p), 4);
        if (fmt_get32(w) == 0)
            return (uint32_t)(p + FMT_FRAME_END_LEN - pos);
        p += fmt_block_len(fmt_get32(w));
    }
}

/* Overwrites len bytes at off through the writer (a commit that retires and reveals), in the
 * case's data too, and reads the table again. */
static void overwrite(chk_case *c, const char *bytes, size_t len, uint64_t off)
{
    ff_file *f;
    memcpy(c->data + off, bytes, len);
    assert_int_equal(ff_open(c->fx->env, open(c->fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, bytes, len, (off_t)off), 0);
    assert_int_equal(ff_release(f), 0);
    fmt_trailer_free(&c->t);
    fx_read_table(c->fx, &c->t);
}

static void test_interrupted_commit(void **state)
{
    chk_case c;
    case_open(&c, 12 * BS + 100, 0, 10);
    overwrite(&c, "CHANGED", 7, 3 * BS + 5);
    assert_true(c.t.n_reveal > 0 && c.t.n_retire > 0);
    /* hide again what the commit revealed: the state a crash after the commit point leaves */
    int fd = open(c.fx->path, O_RDWR);
    for (uint32_t i = 0; i < c.t.n_reveal; i++)
        assert_int_equal(fmt_write_skip_header(fd, c.t.reveal[i], FMT_SKIP_HIDDEN,
                                               frame_len(fd, c.t.reveal[i] + 8)), 0);
    close(fd);
    repair_case(&c, c.n, CHK_P_INTENTS, CHK_PREEN);
    case_close(&c);
}

/* A retired frame whose skippable header lies about its length derails the frame walk (and
 * lz4 -d); nothing says what the header was, so it is reported, not repaired. */
static void test_walk_disagrees(void **state)
{
    chk_case c;
    case_open(&c, 12 * BS + 100, 0, 11);
    overwrite(&c, "x", 1, 2 * BS);
    assert_true(c.t.n_retire > 0);
    fx_flip_byte(c.fx, c.t.retire[0].off + 5);
    left_alone(c.fx, CHK_P_WALK, 0);
    case_close(&c);
}

static void test_marker(void **state)
{
    chk_case c;
    case_open(&c, 2 * BS + 3, 0, 12);
    fx_flip_byte(c.fx, 5);                     /* the BD byte of the empty frame */
    chk_result r = run(c.fx, CHK_PREEN);       /* shown as foreign: left to -y */
    assert_int_equal(r.kind, CHK_OWN);
    assert_int_equal(r.found, CHK_P_MARKER);
    assert_int_equal(r.fixed, 0);
    repair_case(&c, c.n, CHK_P_MARKER, CHK_REPAIR);
    case_close(&c);
}

static void test_mtime_kept(void **state)
{
    chk_case c;
    case_open(&c, 2 * BS, 0, 13);
    assert_int_equal(truncate(c.fx->path, (off_t)c.t.start), 0);
    struct timespec ts[2] = {{1000000000, 123}, {1100000000, 456789}};
    assert_int_equal(utimensat(AT_FDCWD, c.fx->path, ts, 0), 0);
    chk_result r = run(c.fx, CHK_PREEN);
    assert_int_equal(r.fixed, CHK_P_TABLE);
    struct stat st;
    assert_int_equal(stat(c.fx->path, &st), 0);
    assert_int_equal(st.st_mtim.tv_sec, 1100000000);
    assert_int_equal(st.st_mtim.tv_nsec, 456789);
    case_close(&c);
}

static void test_stat_counts(void **state)
{
    fixture *fx = fx_new(BS, "test_chk");
    size_t n = 3 * BS;
    uint8_t *d = make_data(n, 1, 14);
    ff_file *f;
    int fd = open(fx->path, O_RDWR | O_TRUNC);
    assert_int_equal(ff_create(fx->env, fd, "t", &f), 0);
    assert_int_equal(ff_write(f, d, n, 0), 0);             /* 3 raw blocks */
    assert_int_equal(ff_truncate(f, (off_t)(6 * BS + 10)), 0);   /* 3 zero blocks, 1 partial */
    assert_int_equal(ff_release(f), 0);
    chk_stat s;
    fd = open(fx->path, O_RDONLY);
    assert_int_equal(chk_stat_file(fd, &s), 0);
    close(fd);
    struct stat st;
    stat(fx->path, &st);
    assert_int_equal(s.kind, CHK_OWN);
    assert_int_equal(s.logical, 6 * BS + 10);
    assert_int_equal(s.apparent, st.st_size);
    assert_int_equal(s.disk, (uint64_t)st.st_blocks * 512);
    assert_int_equal(s.blocks, 7);
    assert_int_equal(s.raw_blocks, 4);          /* 10 zero bytes do not shrink either */
    assert_int_equal(s.zero_blocks, 4);
    assert_int_equal(s.torn, 0);
    free(d);
    fx_free(fx);
}

typedef struct {
    char seen[16][64];
    int n;
} walk_log;

static int walk_collect(void *ctx, int dirfd, const char *name, const char *rel,
                        const struct stat *st)
{
    walk_log *w = ctx;
    assert_non_null(st);
    assert_true(w->n < 16);
    snprintf(w->seen[w->n++], 64, "%s", rel);
    struct stat again;
    assert_int_equal(fstatat(dirfd, name, &again, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(again.st_ino, st->st_ino);
    return 0;
}

static void test_walk(void **state)
{
    char dir[] = "/tmp/test_chk_walk.XXXXXX", p[128];
    assert_non_null(mkdtemp(dir));
    const char *files[] = {".fpgalz4fs", ".fpgalz4fs.tmp", "b", "a/x", "a/y/z"};
    snprintf(p, sizeof(p), "%s/a", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/a/y", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    for (size_t i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        close(open(p, O_CREAT | O_WRONLY, 0644));
    }
    snprintf(p, sizeof(p), "%s/link", dir);
    assert_int_equal(symlink("b", p), 0);
    walk_log w = {.n = 0};
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_int_equal(chk_walk(fd, walk_collect, &w), 0);
    close(fd);
    assert_int_equal(w.n, 3);                  /* not the superblock, its temporary, the link */
    assert_string_equal(w.seen[0], "a/x");
    assert_string_equal(w.seen[1], "a/y/z");
    assert_string_equal(w.seen[2], "b");
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_convert_names(void **state)
{
    char name[64];
    chk_convert_name(0x1a2b, name, sizeof(name));
    assert_string_equal(name, ".fpgalz4fs-convert.1a2b.tmp");
    assert_true(chk_is_convert_name(name));
    chk_convert_name(UINT64_MAX, name, sizeof(name));
    assert_true(chk_is_convert_name(name));
    assert_false(chk_is_convert_name(".fpgalz4fs-convert..tmp"));
    assert_false(chk_is_convert_name(".fpgalz4fs-convert.12G.tmp"));
    assert_false(chk_is_convert_name(".fpgalz4fs-convert.12.tmpx"));
    assert_false(chk_is_convert_name("fpgalz4fs-convert.12.tmp"));
    assert_false(chk_is_convert_name(".fpgalz4fs-convert.11112222333344445.tmp"));
    assert_false(chk_is_convert_name(".fpgalz4fs"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_and_foreign),
        cmocka_unit_test(test_newer_untouched),
        cmocka_unit_test(test_bad_block_left_alone),
        cmocka_unit_test(test_bad_block_without_table),
        cmocka_unit_test(test_frame_header),
        cmocka_unit_test(test_content_checksum_and_size_word),
        cmocka_unit_test(test_seek_table),
        cmocka_unit_test(test_torn_tail),
        cmocka_unit_test(test_marker_only),
        cmocka_unit_test(test_interrupted_commit),
        cmocka_unit_test(test_walk_disagrees),
        cmocka_unit_test(test_marker),
        cmocka_unit_test(test_mtime_kept),
        cmocka_unit_test(test_stat_counts),
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_convert_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
