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
#include <lz4frame.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chk.h"
#include "eng.h"
#include "ffile.h"
#include "fmt.h"

#define BS (64u << 10)

typedef struct {
    eng_ctx *eng;
    ff_env *env;
    char path[64];
} fixture;

static fixture *fx_new(void)
{
    static char err[128];
    fixture *fx = calloc(1, sizeof(*fx));
    eng_config cfg = {.backend = ENG_BACKEND_SW, .sw_threads = 2};
    sb_super sb;
    assert_int_equal(sb_init(&sb, BS), SB_OK);
    ff_options opt = {0, 64u << 20};
    fx->eng = eng_open(&cfg, err, sizeof(err));
    assert_non_null(fx->eng);
    fx->env = ff_env_new(fx->eng, &sb, &opt, NULL);
    assert_non_null(fx->env);
    snprintf(fx->path, sizeof(fx->path), "/tmp/test_chk.XXXXXX");
    int fd = mkstemp(fx->path);
    assert_true(fd >= 0);
    close(fd);
    return fx;
}

static void fx_free(fixture *fx)
{
    unlink(fx->path);
    ff_env_free(fx->env);
    eng_close(fx->eng);
    free(fx);
}

static uint8_t *make_data(size_t n, int random, uint32_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    static const char words[] = "check repair frame seek table block marker wrapper ";
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = random ? (uint8_t)x : (uint8_t)words[(i + (x % 5 == 0)) % (sizeof(words) - 1)];
    }
    return p;
}

static void write_file(fixture *fx, const uint8_t *data, size_t n)
{
    ff_file *f;
    int fd = open(fx->path, O_RDWR | O_TRUNC);
    assert_int_equal(ff_create(fx->env, fd, "t", &f), 0);
    for (size_t off = 0; off < n; off += 100000)
        assert_int_equal(ff_write(f, data + off, n - off < 100000 ? n - off : 100000, (off_t)off), 0);
    assert_int_equal(ff_release(f), 0);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    rewind(fp);
    uint8_t *p = malloc(*n + 1);
    assert_int_equal(fread(p, 1, *n, fp), *n);
    fclose(fp);
    return p;
}

/* The whole backing file through liblz4's frame decoder (what lz4 -d does). */
static void check_lz4f(fixture *fx, const uint8_t *want, size_t n)
{
    size_t len, pos = 0, got = 0;
    uint8_t *in = slurp(fx->path, &len), *out = malloc(n + BS);
    LZ4F_dctx *d;
    assert_false(LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
    while (pos < len) {
        size_t src = len - pos, dst = n + BS - got;
        size_t r = LZ4F_decompress(d, out + got, &dst, in + pos, &src, NULL);
        assert_false(LZ4F_isError(r));
        pos += src, got += dst;
        if (src == 0 && dst == 0)
            break;
    }
    LZ4F_freeDecompressionContext(d);
    assert_int_equal(got, n);
    assert_memory_equal(out, want, n);
    free(in);
    free(out);
}

static void check_read(fixture *fx, const uint8_t *want, size_t n)
{
    ff_file *f;
    size_t got;
    uint8_t *buf = malloc(n + 16);
    assert_int_equal(ff_open(fx->env, open(fx->path, O_RDONLY), "t", &f), 0);
    assert_int_equal(ff_size(f), n);
    assert_int_equal(ff_read(f, buf, n + 16, 0, &got), 0);
    assert_int_equal(got, n);
    assert_memory_equal(buf, want, n);
    ff_release(f);
    free(buf);
}

static int lines;
static void count_line(void *ctx, const char *line) { lines++; }

/* chk_file on the fixture's file; checks that CHK_CHECK left every byte as it was. */
static chk_result run(fixture *fx, chk_mode mode)
{
    chk_result r;
    size_t n1, n2;
    uint8_t *before = slurp(fx->path, &n1);
    int fd = open(fx->path, mode == CHK_CHECK ? O_RDONLY : O_RDWR);
    assert_true(fd >= 0);
    lines = 0;
    assert_int_equal(chk_file(fd, mode, count_line, NULL, &r), 0);
    close(fd);
    uint8_t *after = slurp(fx->path, &n2);
    if (mode == CHK_CHECK || !r.fixed) {
        assert_int_equal(n1, n2);
        assert_memory_equal(before, after, n1);
    }
    assert_true(!r.found || lines > 0);            /* every finding is said */
    free(before);
    free(after);
    return r;
}

static void get_table(fixture *fx, fmt_trailer *t)
{
    struct stat st;
    int fd = open(fx->path, O_RDONLY);
    fstat(fd, &st);
    assert_int_equal(fmt_trailer_read(fd, (uint64_t)st.st_size, BS, t), FMT_OK);
    close(fd);
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

static void xor_byte(fixture *fx, uint64_t off)
{
    int fd = open(fx->path, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* damage one place, then: CHECK finds `want` and writes nothing, PREEN (or REPAIR) fixes it,
 * a second check is clean and the content reads and decodes as `data` (first `keep` bytes). */
static void repair_case(fixture *fx, const uint8_t *data, size_t keep, uint32_t want,
                        chk_mode mode)
{
    chk_result r = run(fx, CHK_CHECK);
    assert_int_equal(r.kind, CHK_OWN);
    assert_int_equal(r.found & want, want);
    assert_int_equal(r.found & CHK_P_UNREPAIRABLE, 0);
    assert_int_equal(r.fixed, 0);
    r = run(fx, mode);
    assert_int_equal(r.fixed & want, want);
    assert_int_equal(r.found & ~r.fixed, 0);
    r = run(fx, CHK_CHECK);
    assert_int_equal(r.found, 0);
    assert_int_equal(r.size, keep);
    check_read(fx, data, keep);
    check_lz4f(fx, data, keep);
}

static void test_clean_and_foreign(void **state)
{
    fixture *fx = fx_new();
    size_t n = 5 * BS + 321;
    uint8_t *d = make_data(n, 0, 1);
    write_file(fx, d, n);
    chk_result r = run(fx, CHK_REPAIR);
    assert_int_equal(r.kind, CHK_OWN);
    assert_int_equal(r.found, 0);
    assert_int_equal(r.size, n);
    assert_int_equal(r.n_blocks, 6);
    assert_int_equal(r.block_size, BS);
    FILE *fp = fopen(fx->path, "wb");         /* plain text: foreign, never touched */
    fwrite(d, 1, 5000, fp);
    fclose(fp);
    r = run(fx, CHK_REPAIR);
    assert_int_equal(r.kind, CHK_FOREIGN);
    assert_int_equal(r.found, 0);
    fp = fopen(fx->path, "wb");               /* shorter than a marker */
    fwrite(d, 1, 10, fp);
    fclose(fp);
    assert_int_equal(run(fx, CHK_REPAIR).kind, CHK_FOREIGN);
    free(d);
    fx_free(fx);
}

static void test_newer_untouched(void **state)
{
    fixture *fx = fx_new();
    uint8_t *d = make_data(BS, 0, 2);
    write_file(fx, d, BS);
    int fd = open(fx->path, O_RDWR);
    uint8_t v[4];
    fmt_put32(v, FMT_VERSION + 1);
    assert_int_equal(pwrite(fd, v, 4, 31), 4);
    assert_int_equal(ftruncate(fd, 200), 0);   /* torn as well: still nothing is written */
    close(fd);
    chk_result r = run(fx, CHK_REPAIR);
    assert_int_equal(r.kind, CHK_NEWER);
    assert_int_equal(r.fixed, 0);
    free(d);
    fx_free(fx);
}

static void test_bad_block_left_alone(void **state)
{
    fixture *fx = fx_new();
    size_t n = 4 * BS;
    uint8_t *d = make_data(n, 0, 3);
    write_file(fx, d, n);
    fmt_trailer t;
    get_table(fx, &t);
    xor_byte(fx, fmt_entry_off(&t.entries[2]) + 4 + 10);
    fmt_trailer_free(&t);
    for (chk_mode m = CHK_CHECK; m <= CHK_REPAIR; m++) {
        chk_result r = run(fx, m);             /* run() checks that no byte changed */
        assert_int_equal(r.found, CHK_P_BLOCK);
        assert_int_equal(r.fixed, 0);
        assert_int_equal(r.bad_blocks, 1);
    }
    free(d);
    fx_free(fx);
}

/* A bad block in a file without a table: the rebuilt table keeps it and what follows it. */
static void test_bad_block_without_table(void **state)
{
    fixture *fx = fx_new();
    size_t n = 20 * BS + 5;
    uint8_t *d = make_data(n, 0, 4);
    write_file(fx, d, n);
    fmt_trailer t;
    get_table(fx, &t);
    xor_byte(fx, fmt_entry_off(&t.entries[1]) + 4 + 10);
    xor_byte(fx, t.start + 20);
    fmt_trailer_free(&t);
    chk_result r = run(fx, CHK_PREEN);
    assert_int_equal(r.found, CHK_P_TABLE | CHK_P_BLOCK);
    assert_int_equal(r.fixed, CHK_P_TABLE);
    assert_int_equal(r.size, n);
    assert_int_equal(r.bad_blocks, 1);
    get_table(fx, &t);
    assert_int_equal(t.size, n);               /* nothing after the bad block was cut */
    fmt_trailer_free(&t);
    free(d);
    fx_free(fx);
}

static void test_frame_header(void **state)
{
    fixture *fx = fx_new();
    size_t n = 10 * BS + 77;
    uint8_t *d = make_data(n, 0, 5);
    write_file(fx, d, n);
    fmt_trailer t;
    get_table(fx, &t);
    assert_true(frame_first(&t, 1) < t.n_entries);
    xor_byte(fx, fmt_entry_off(&t.entries[frame_first(&t, 1)]) - FMT_FRAME_HEADER_LEN + 7);
    fmt_trailer_free(&t);
    repair_case(fx, d, n, CHK_P_HEADER, CHK_PREEN);
    free(d);
    fx_free(fx);
}

static void test_content_checksum_and_size_word(void **state)
{
    fixture *fx = fx_new();
    size_t n = 9 * BS;
    uint8_t *d = make_data(n, 0, 6);
    write_file(fx, d, n);
    fmt_trailer t;
    get_table(fx, &t);
    const fmt_entry *last0 = &t.entries[frame_first(&t, 1) - 1];   /* ends the first frame */
    xor_byte(fx, fmt_entry_off(last0) + fmt_block_len(last0->word) + 5);
    xor_byte(fx, fmt_entry_off(&t.entries[0]) + 1);
    fmt_trailer_free(&t);
    repair_case(fx, d, n, CHK_P_HEADER, CHK_PREEN);
    free(d);
    fx_free(fx);
}

static void test_seek_table(void **state)
{
    fixture *fx = fx_new();
    size_t n = 3 * BS + 1;
    uint8_t *d = make_data(n, 1, 7);           /* raw blocks */
    write_file(fx, d, n);
    fmt_trailer t;
    get_table(fx, &t);
    xor_byte(fx, t.start + 8 + 12 + 2);
    fmt_trailer_free(&t);
    repair_case(fx, d, n, CHK_P_TABLE, CHK_PREEN);
    free(d);
    fx_free(fx);
}

static void test_torn_tail(void **state)
{
    fixture *fx = fx_new();
    size_t n = 20 * BS + 9;
    uint8_t *d = make_data(n, 0, 8);
    write_file(fx, d, n);
    fmt_trailer t;
    get_table(fx, &t);
    uint32_t k = frame_first(&t, 2), keep_blocks = k;
    assert_true(k + 1 < t.n_entries);
    uint64_t cut = fmt_entry_off(&t.entries[k]) + 3;    /* inside the third frame */
    uint64_t frame16 = fmt_entry_off(&t.entries[k]) - FMT_FRAME_HEADER_LEN;
    fmt_trailer_free(&t);
    assert_int_equal(truncate(fx->path, (off_t)cut), 0);
    chk_result r = run(fx, CHK_CHECK);
    assert_int_equal(r.cut_bytes, cut - frame16);     /* the walk stops where that frame starts */
    repair_case(fx, d, (size_t)keep_blocks * BS, CHK_P_TABLE | CHK_P_TORN, CHK_PREEN);
    free(d);
    fx_free(fx);
}

static void test_marker_only(void **state)
{
    fixture *fx = fx_new();
    uint8_t *d = make_data(BS, 0, 9);
    write_file(fx, d, BS);
    assert_int_equal(truncate(fx->path, FMT_MARKER_LEN), 0);
    repair_case(fx, d, 0, CHK_P_TABLE, CHK_PREEN);
    free(d);
    fx_free(fx);
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

/* Writes, overwrites the middle (a commit that retires and reveals), then hides again what
 * that commit revealed: the state a crash after the commit point leaves. */
static void make_interrupted(fixture *fx, uint8_t *d, size_t n, fmt_trailer *t)
{
    write_file(fx, d, n);
    ff_file *f;
    memcpy(d + 3 * BS + 5, "CHANGED", 7);
    assert_int_equal(ff_open(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, "CHANGED", 7, 3 * BS + 5), 0);
    assert_int_equal(ff_release(f), 0);
    get_table(fx, t);
    assert_true(t->n_reveal > 0 && t->n_retire > 0);
    int fd = open(fx->path, O_RDWR);
    for (uint32_t i = 0; i < t->n_reveal; i++)
        assert_int_equal(fmt_write_skip_header(fd, t->reveal[i], FMT_SKIP_HIDDEN,
                                               frame_len(fd, t->reveal[i] + 8)), 0);
    close(fd);
}

static void test_interrupted_commit(void **state)
{
    fixture *fx = fx_new();
    size_t n = 12 * BS + 100;
    uint8_t *d = make_data(n, 0, 10);
    fmt_trailer t;
    make_interrupted(fx, d, n, &t);
    fmt_trailer_free(&t);
    repair_case(fx, d, n, CHK_P_INTENTS, CHK_PREEN);
    free(d);
    fx_free(fx);
}

/* A retired frame whose skippable header lies about its length derails the frame walk (and
 * lz4 -d); nothing says what the header was, so it is reported, not repaired. */
static void test_walk_disagrees(void **state)
{
    fixture *fx = fx_new();
    size_t n = 12 * BS + 100;
    uint8_t *d = make_data(n, 0, 11);
    write_file(fx, d, n);
    ff_file *f;
    assert_int_equal(ff_open(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, "x", 1, 2 * BS), 0);
    assert_int_equal(ff_release(f), 0);
    fmt_trailer t;
    get_table(fx, &t);
    assert_true(t.n_retire > 0);
    xor_byte(fx, t.retire[0].off + 5);
    fmt_trailer_free(&t);
    for (chk_mode m = CHK_CHECK; m <= CHK_REPAIR; m++) {
        chk_result r = run(fx, m);
        assert_int_equal(r.found, CHK_P_WALK);
        assert_int_equal(r.fixed, 0);
    }
    free(d);
    fx_free(fx);
}

static void test_marker(void **state)
{
    fixture *fx = fx_new();
    size_t n = 2 * BS + 3;
    uint8_t *d = make_data(n, 0, 12);
    write_file(fx, d, n);
    xor_byte(fx, 5);                           /* the BD byte of the empty frame */
    chk_result r = run(fx, CHK_PREEN);         /* shown as foreign: left to -y */
    assert_int_equal(r.kind, CHK_OWN);
    assert_int_equal(r.found, CHK_P_MARKER);
    assert_int_equal(r.fixed, 0);
    repair_case(fx, d, n, CHK_P_MARKER, CHK_REPAIR);
    free(d);
    fx_free(fx);
}

static void test_mtime_kept(void **state)
{
    fixture *fx = fx_new();
    size_t n = 2 * BS;
    uint8_t *d = make_data(n, 0, 13);
    write_file(fx, d, n);
    fmt_trailer t;
    get_table(fx, &t);
    assert_int_equal(truncate(fx->path, (off_t)t.start), 0);
    fmt_trailer_free(&t);
    struct timespec ts[2] = {{1000000000, 123}, {1100000000, 456789}};
    assert_int_equal(utimensat(AT_FDCWD, fx->path, ts, 0), 0);
    chk_result r = run(fx, CHK_PREEN);
    assert_int_equal(r.fixed, CHK_P_TABLE);
    struct stat st;
    assert_int_equal(stat(fx->path, &st), 0);
    assert_int_equal(st.st_mtim.tv_sec, 1100000000);
    assert_int_equal(st.st_mtim.tv_nsec, 456789);
    free(d);
    fx_free(fx);
}

static void test_stat_counts(void **state)
{
    fixture *fx = fx_new();
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
