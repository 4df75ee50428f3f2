/* Unit tests of format version 2 (fs/fmt2*.c, fs/ff_slots.c, fs/ff_pair.c, fs/ff_load2.c):
 * frames, footer and journal round trips and every rejection rule; slots, padding and hole
 * runs written on a temporary file and walked back by fmt2_scan; the footer pair's recovery
 * (both journals, a newer one lost, an older one gone, no usable pair, a footer naming no
 * journal); and files written through the ff_* API that decode with the stock lz4 tool,
 * stay sparse for holes, grow by at most a block when rewritten in place, and reopen
 * prefix-consistent (and repaired) when cut or caught between journal and slot; the footer
 * a synced commit settles never trusting a block memory keeps fresh; what says a file whose
 * marker a power loss took is a version 2 file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "chk.h"
#include "ff_internal.h"
#include "fixture.h"
#include "fmt2.h"

#define BS (64u << 10)
#define G fmt2_geo_of(FMT_VERSION_2, BS)  /* where its files' slots lie */
#define TAG "test_fmt2"

static uint8_t *make_data(size_t n, int random, uint32_t seed)
{
    return fx_make_data(n, random, seed, "slot frame padding hole journal footer commit ", 7);
}

static int tmp_file(char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/%s.XXXXXX", TAG);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    return fd;
}

static uint64_t file_len(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return (uint64_t)st.st_size;
}

/* A whole frame of len bytes of data, compressed when LZ4 shrinks it. */
static size_t encode(uint8_t *out, const uint8_t *raw, uint32_t len)
{
    int cap = LZ4_compressBound((int)len);
    uint8_t *comp = malloc((size_t)cap);
    int clen = LZ4_compress_default((const char *)raw, (char *)comp, (int)len, cap);
    assert_true(clen > 0);
    size_t n = fmt2_frame_encode(out, BS, raw, len, comp, (uint32_t)clen);
    free(comp);
    return n;
}

/* ---- frames ---- */

static void frame_roundtrip(const uint8_t *raw, uint32_t len, int want_raw)
{
    uint8_t *fr = malloc(len + FMT2_FRAME_OVERHEAD), *dec = malloc(len);
    size_t n = encode(fr, raw, len);
    uint32_t got_len, word, flen;
    assert_int_equal(fmt2_frame_parse(fr, n, BS, 1, &got_len, &word, &flen), FMT_OK);
    assert_int_equal(got_len, len);
    assert_int_equal(flen, n);
    assert_int_equal(!!(word & FMT_RAW_BIT), want_raw);
    assert_int_equal(n, FMT_FRAME_HEADER_LEN + fmt_block_len(word) + FMT_FRAME_END_LEN);
    assert_int_equal(fmt_block_decode(word, fr + FMT_FRAME_HEADER_LEN + 4, dec, len), FMT_OK);
    assert_memory_equal(dec, raw, len);
    free(fr);
    free(dec);
}

static void test_frame_roundtrip(void **state)
{
    uint8_t *text = make_data(BS, 0, 1), *rnd = make_data(BS, 1, 2);
    frame_roundtrip(text, BS, 0);
    frame_roundtrip(text, 1000, 0);
    frame_roundtrip(rnd, BS, 1);
    frame_roundtrip(rnd, 1, 1);
    /* no compressed form given: raw */
    uint8_t *fr = malloc(BS + FMT2_FRAME_OVERHEAD);
    size_t n = fmt2_frame_encode(fr, BS, text, BS, NULL, 0);
    assert_int_equal(n, BS + FMT2_FRAME_OVERHEAD);
    uint32_t len, word, flen;
    assert_int_equal(fmt2_frame_parse(fr, n, BS, 1, &len, &word, &flen), FMT_OK);
    assert_true(word & FMT_RAW_BIT);
    free(fr);
    free(text);
    free(rnd);
}

/* A frame made around a compressed block where it lies is the frame the encoder makes. */
static void test_frame_wrap(void **state)
{
    uint8_t *text = make_data(BS, 0, 3);
    const uint32_t lens[] = {BS, 1000, 300};
    for (size_t k = 0; k < sizeof(lens) / sizeof(*lens); k++) {
        uint32_t len = lens[k];
        int cap = LZ4_compressBound((int)len);
        uint8_t *room = malloc(FMT2_FRAME_LEAD + (size_t)cap + FMT2_FRAME_TRAIL);
        uint8_t *comp = room + FMT2_FRAME_LEAD, *want = malloc(len + FMT2_FRAME_OVERHEAD);
        memset(room, 0xA5, FMT2_FRAME_LEAD + (size_t)cap + FMT2_FRAME_TRAIL);
        int clen = LZ4_compress_default((const char *)text, (char *)comp, (int)len, cap);
        assert_true(clen > 0 && (uint32_t)clen < len);
        size_t n = fmt2_frame_encode(want, BS, text, len, comp, (uint32_t)clen);
        uint8_t *fr = fmt2_frame_wrap(comp, BS, len, (uint32_t)clen,
                                      XXH32(comp, (size_t)clen, 0), XXH32(text, len, 0));
        assert_ptr_equal(fr, room);
        assert_int_equal(n, FMT2_FRAME_OVERHEAD + (uint32_t)clen);
        assert_memory_equal(fr, want, n);
        free(room);
        free(want);
    }
    free(text);
}

static void test_frame_rejections(void **state)
{
    uint8_t *text = make_data(BS, 0, 3), *fr = malloc(BS + FMT2_FRAME_OVERHEAD);
    uint8_t *bad = malloc(BS + FMT2_FRAME_OVERHEAD);
    size_t n = encode(fr, text, BS);
    uint32_t len, word, flen;
    /* cut anywhere */
    for (size_t cut = 0; cut < n; cut += cut < 40 ? 1 : 997)
        assert_int_equal(fmt2_frame_parse(fr, cut, BS, 0, &len, &word, &flen), FMT_ERR_CORRUPT);
    assert_int_equal(fmt2_frame_parse(fr, n - 1, BS, 0, &len, &word, &flen), FMT_ERR_CORRUPT);
    /* another block size */
    assert_int_equal(fmt2_frame_parse(fr, n, 256u << 10, 0, &len, &word, &flen),
                     FMT_ERR_CORRUPT);
    /* every header byte (magic, FLG, BD, content size, header checksum) */
    for (size_t at = 0; at < FMT_FRAME_HEADER_LEN; at++) {
        memcpy(bad, fr, n);
        bad[at] ^= 0x21;
        assert_int_equal(fmt2_frame_parse(bad, n, BS, 0, &len, &word, &flen), FMT_ERR_CORRUPT);
    }
    /* size word: zero, larger than the block, raw with another size than the header's */
    memcpy(bad, fr, n);
    fmt_put32(bad + FMT_FRAME_HEADER_LEN, 0);
    assert_int_equal(fmt2_frame_parse(bad, n, BS, 0, &len, &word, &flen), FMT_ERR_CORRUPT);
    fmt_put32(bad + FMT_FRAME_HEADER_LEN, BS + 1);
    assert_int_equal(fmt2_frame_parse(bad, n, BS, 0, &len, &word, &flen), FMT_ERR_CORRUPT);
    fmt_put32(bad + FMT_FRAME_HEADER_LEN, 100 | FMT_RAW_BIT);
    assert_int_equal(fmt2_frame_parse(bad, n, BS, 0, &len, &word, &flen), FMT_ERR_CORRUPT);
    /* EndMark not zero */
    memcpy(bad, fr, n);
    bad[n - 8] = 1;
    assert_int_equal(fmt2_frame_parse(bad, n, BS, 0, &len, &word, &flen), FMT_ERR_CORRUPT);
    /* a data byte: only verify sees it; the lengths are still given */
    memcpy(bad, fr, n);
    bad[FMT_FRAME_HEADER_LEN + 4 + 10] ^= 0x40;
    assert_int_equal(fmt2_frame_parse(bad, n, BS, 0, &len, &word, &flen), FMT_OK);
    len = flen = 0;
    assert_int_equal(fmt2_frame_parse(bad, n, BS, 1, &len, &word, &flen), FMT_ERR_CHECKSUM);
    assert_int_equal(len, BS);
    assert_int_equal(flen, n);
    /* the block checksum itself */
    memcpy(bad, fr, n);
    bad[n - 9] ^= 0x01;
    assert_int_equal(fmt2_frame_parse(bad, n, BS, 1, &len, &word, &flen), FMT_ERR_CHECKSUM);
    free(bad);
    free(fr);
    free(text);
}

/* ---- footer ---- */

static fmt_error footer_try(const fmt2_footer *ft, uint64_t flen)
{
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    assert_int_equal(ftruncate(fd, (off_t)(flen - FMT2_FOOTER_LEN)), 0);
    assert_int_equal(fmt2_footer_write(fd, flen - FMT2_FOOTER_LEN, ft), 0);
    assert_int_equal(file_len(fd), flen);
    fmt2_footer got;
    fmt_error err = fmt2_footer_read(fd, flen, G, &got);
    if (err == FMT_OK) {
        assert_int_equal(got.size, ft->size);
        assert_int_equal(got.n_blocks, (ft->size + BS - 1) / BS);
        assert_int_equal(got.tail, ft->tail);
        assert_int_equal(got.j_off, ft->j_off);
        assert_int_equal(got.j_len, ft->j_len);
        assert_int_equal(got.seq, ft->seq);
        assert_int_equal(got.fresh, ft->fresh);
    }
    close(fd);
    unlink(path);
    return err;
}

static void test_footer(void **state)
{
    /* 4 blocks, the last 100 bytes; a journal of 100 bytes after the slots */
    uint64_t size = 3ull * BS + 100, tail = fmt2_slot_off(G, 3) + 200;
    fmt2_footer ok = {size, 4, tail, tail, 100, 0x1122334455667788ull, 2, 0};
    uint64_t flen = tail + 100 + FMT2_FOOTER_LEN;
    assert_int_equal(footer_try(&ok, flen), FMT_OK);
    fmt2_footer t = ok;
    t.j_off = t.j_len = 0;
    assert_int_equal(footer_try(&t, flen), FMT_OK);               /* room left: fine */
    t.fresh = 4;
    assert_int_equal(footer_try(&t, tail + FMT2_FOOTER_LEN), FMT_OK);
    fmt2_footer empty = {0, 0, FMT_MARKER_LEN, 0, 0, 0, 0, 0};
    assert_int_equal(footer_try(&empty, FMT_MARKER_LEN + FMT2_FOOTER_LEN), FMT_OK);
    /* the largest size */
    fmt2_footer big = {FMT2_MAX_SIZE, FMT2_MAX_SIZE / BS,
                       fmt2_slot_off(G, FMT2_MAX_SIZE / BS - 1) + FMT2_FRAME_OVERHEAD, 0, 0, 1,
                       0, 0};
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    uint64_t bigf = big.tail + FMT2_FOOTER_LEN;
    assert_int_equal(fmt2_footer_write(fd, big.tail, &big), 0);
    fmt2_footer got;
    assert_int_equal(fmt2_footer_read(fd, bigf, G, &got), FMT_OK);
    big.size++;                                                  /* one more byte: refused */
    big.tail = fmt2_slot_off(G, FMT2_MAX_SIZE / BS) + FMT2_FRAME_OVERHEAD;
    bigf = big.tail + FMT2_FOOTER_LEN;
    assert_int_equal(fmt2_footer_write(fd, big.tail, &big), 0);
    assert_int_equal(fmt2_footer_read(fd, bigf, G, &got), FMT_ERR_NO_TRAILER);
    close(fd);
    unlink(path);

    /* fresh beyond the blocks */
    t = ok, t.fresh = 5;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    /* tail: before the last slot's smallest frame, past the last slot, past the footer */
    t = ok, t.tail = fmt2_slot_off(G, 3) + FMT2_FRAME_OVERHEAD - 1, t.j_off = t.tail;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    t.tail = t.j_off = fmt2_slot_off(G, 3) + FMT2_FRAME_OVERHEAD;
    assert_int_equal(footer_try(&t, flen), FMT_OK);
    t.tail = fmt2_slot_off(G, 4) + 1, t.j_off = t.j_len = 0;
    assert_int_equal(footer_try(&t, t.tail + FMT2_FOOTER_LEN + 10), FMT_ERR_NO_TRAILER);
    t.tail = fmt2_slot_off(G, 4);
    assert_int_equal(footer_try(&t, t.tail + FMT2_FOOTER_LEN), FMT_OK);
    t = ok, t.j_off = t.j_len = 0;
    assert_int_equal(footer_try(&t, tail + FMT2_FOOTER_LEN - 1), FMT_ERR_NO_TRAILER);
    t = empty, t.tail = FMT_MARKER_LEN + 1;
    assert_int_equal(footer_try(&t, FMT_MARKER_LEN + 1 + FMT2_FOOTER_LEN), FMT_ERR_NO_TRAILER);
    /* journal: before the tail, too short, past the footer, a length without an offset */
    t = ok, t.j_off = tail - 1;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    t = ok, t.j_len = FMT2_J_HEAD + 3;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    t = ok, t.j_len = 101;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    t = ok, t.j_off = tail + 1;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    t = ok, t.j_len = UINT64_MAX;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    t = ok, t.j_off = 0;
    assert_int_equal(footer_try(&t, flen), FMT_ERR_NO_TRAILER);
    /* a file too short for marker and footer */
    fd = tmp_file(path, sizeof(path));
    assert_int_equal(fmt2_footer_read(fd, FMT_MARKER_LEN + FMT2_FOOTER_LEN - 1, G, &got),
                     FMT_ERR_NO_TRAILER);
    /* bytes: magic, payload length, a field without its checksum, version, checksum */
    uint8_t b[FMT2_FOOTER_LEN], c[FMT2_FOOTER_LEN];
    fmt2_footer_encode(&ok, b);
    static const size_t at[] = {0, 3, 4, 8, 15, 16, 24, 32, 40, 48, 55, 56, 60, 63};
    for (size_t k = 0; k < sizeof(at) / sizeof(*at); k++) {
        memcpy(c, b, sizeof(b));
        c[at[k]] ^= 0x04;
        assert_int_equal(ftruncate(fd, 0), 0);
        assert_int_equal(fmt_pwrite_all(fd, c, sizeof(c), flen - FMT2_FOOTER_LEN), 0);
        assert_int_equal(fmt2_footer_read(fd, flen, G, &got), FMT_ERR_NO_TRAILER);
    }
    /* the version field with a checksum that matches: still refused */
    memcpy(c, b, sizeof(b));
    fmt_put32(c + 56, 3);
    fmt_put32(c + 60, XXH32(c + 8, 52, 0));
    assert_int_equal(fmt_pwrite_all(fd, c, sizeof(c), flen - FMT2_FOOTER_LEN), 0);
    assert_int_equal(fmt2_footer_read(fd, flen, G, &got), FMT_ERR_NO_TRAILER);
    assert_int_equal(fmt_pwrite_all(fd, b, sizeof(b), flen - FMT2_FOOTER_LEN), 0);
    assert_int_equal(fmt2_footer_read(fd, flen, G, &got), FMT_OK);
    close(fd);
    unlink(path);
}

/* ---- journal ---- */

typedef struct {
    uint8_t *f1, *f4;                  /* frames of block 1 (whole) and block 4 (500 bytes) */
    size_t l1, l4;
    fmt2_jentry e[3];                  /* 1: frame, 3: a hole, 4: frame; file of 5 blocks */
} jcase;

static void jcase_new(jcase *j)
{
    uint8_t *d = make_data(BS, 0, 5);
    j->f1 = malloc(BS + FMT2_FRAME_OVERHEAD), j->f4 = malloc(BS + FMT2_FRAME_OVERHEAD);
    j->l1 = encode(j->f1, d, BS);
    j->l4 = encode(j->f4, d + 7, 500);
    j->e[0] = (fmt2_jentry){1, BS, (uint32_t)j->l1, j->f1};
    j->e[1] = (fmt2_jentry){3, BS, 0, NULL};
    j->e[2] = (fmt2_jentry){4, 500, (uint32_t)j->l4, j->f4};
    free(d);
}

static void jcase_free(jcase *j)
{
    free(j->f1);
    free(j->f4);
}

/* Encodes e, writes it at off of a temporary file (after `before` junk bytes) and reads it. */
static fmt_error journal_try(const fmt2_jentry *e, uint32_t n, uint64_t seq, uint64_t want_seq,
                             uint64_t n_blocks, ssize_t flip, size_t keep,
                             const fmt2_jentry *want, uint32_t *n_out)
{
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    size_t len = fmt2_journal_len(e, n), off = 4096 + 3;
    uint8_t *b = calloc(1, len);
    fmt2_journal_encode(e, n, seq, b);
    if (flip >= 0)
        b[flip] ^= 0x10;
    if (keep < len)
        memset(b + keep, 0, len - keep);   /* torn: the rest never reached the disk */
    assert_int_equal(fmt_pwrite_all(fd, b, len, off), 0);
    uint8_t *buf = (uint8_t *)1;
    fmt2_jentry *got = (fmt2_jentry *)1;
    uint32_t got_n = 99;
    fmt_error err = fmt2_journal_read(fd, off, len, want_seq, BS, n_blocks, &buf, &got, &got_n);
    if (err == FMT_OK) {
        assert_int_equal(got_n, n);
        for (uint32_t k = 0; want && k < n; k++) {
            assert_int_equal(got[k].block, want[k].block);
            assert_int_equal(got[k].len, want[k].len);
            assert_int_equal(got[k].frame_len, want[k].frame_len);
            if (want[k].frame)
                assert_memory_equal(got[k].frame, want[k].frame, want[k].frame_len);
            else
                assert_null(got[k].frame);
        }
        *n_out = got_n;
    } else {
        assert_null(buf);
        assert_null(got);
        assert_int_equal(got_n, 0);
    }
    free(buf);
    free(got);
    free(b);
    close(fd);
    unlink(path);
    return err;
}

/* The journal written in pieces, its frames where they lie, is the journal encoded whole:
 * with frames and holes, with holes only, with nothing. */
static void journal_iov_equals(const fmt2_jentry *e, uint32_t n, uint64_t seq)
{
    size_t len = fmt2_journal_len(e, n);
    uint8_t *whole = malloc(len), *head = malloc(FMT2_J_HEAD + (size_t)n * FMT2_J_ENTRY + 1);
    uint8_t *joined = malloc(len), sum[4], *at = joined;
    struct iovec v[8];
    fmt2_journal_encode(e, n, seq, whole);
    int nv = fmt2_journal_iov(e, n, seq, head, sum, v);
    int frames = 0;
    for (uint32_t k = 0; k < n; k++)
        frames += e[k].frame_len > 0;
    assert_int_equal(nv, frames + 2);
    for (int k = 0; k < nv; k++)
        memcpy(at, v[k].iov_base, v[k].iov_len), at += v[k].iov_len;
    assert_int_equal((size_t)(at - joined), len);
    assert_memory_equal(joined, whole, len);
    free(whole);
    free(head);
    free(joined);
}

static void test_journal_iov(void **state)
{
    jcase j;
    jcase_new(&j);
    journal_iov_equals(j.e, 3, 42);
    journal_iov_equals(&j.e[1], 1, 7);
    journal_iov_equals(NULL, 0, 0);
    jcase_free(&j);
}

/* A journal of many frames is more pieces than one pwritev takes (IOV_MAX): written in
 * turns, every byte where it belongs. */
static void test_pwritev_many(void **state)
{
    enum { N = 2500 };
    struct iovec *v = malloc(N * sizeof(*v));
    uint8_t *want = malloc(N * 3), got[N * 3];
    for (int k = 0; k < N; k++) {
        want[3 * k] = (uint8_t)k, want[3 * k + 1] = (uint8_t)(k >> 8), want[3 * k + 2] = 0x5A;
        v[k] = (struct iovec){want + 3 * k, 3};
    }
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    assert_int_equal(fmt_pwritev_all(fd, v, N, 100), 0);
    assert_int_equal(file_len(fd), 100 + N * 3);
    assert_int_equal(pread(fd, got, sizeof(got), 100), (ssize_t)sizeof(got));
    assert_memory_equal(got, want, sizeof(got));
    close(fd);
    unlink(path);
    free(v);
    free(want);
}

static void test_journal(void **state)
{
    jcase j;
    jcase_new(&j);
    uint32_t n;
    size_t len = fmt2_journal_len(j.e, 3);
    assert_int_equal(len, FMT2_J_HEAD + 3 * FMT2_J_ENTRY + 4 + j.l1 + j.l4);
    assert_int_equal(journal_try(j.e, 3, 42, 42, 5, -1, SIZE_MAX, j.e, &n), FMT_OK);
    assert_int_equal(journal_try(j.e, 0, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_OK);
    assert_int_equal(n, 0);
    assert_int_equal(journal_try(&j.e[1], 1, 7, 7, 4, -1, SIZE_MAX, &j.e[1], &n), FMT_OK);
    /* another commit's journal */
    assert_int_equal(journal_try(j.e, 3, 42, 41, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    assert_int_equal(journal_try(j.e, 3, 42, 43, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    /* a block past the file */
    assert_int_equal(journal_try(j.e, 3, 42, 42, 4, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    /* torn at several points */
    const size_t keeps[] = {0, 8, FMT2_J_HEAD, FMT2_J_HEAD + 20, 200, len / 2, len - 4};
    for (size_t k = 0; k < sizeof(keeps) / sizeof(*keeps); k++)
        assert_int_equal(journal_try(j.e, 3, 42, 42, 5, -1, keeps[k], NULL, &n),
                         FMT_ERR_NO_TRAILER);
    assert_int_equal(journal_try(j.e, 3, 42, 42, 5, -1, len - 1, NULL, &n), FMT_ERR_NO_TRAILER);
    /* one bit anywhere: header, entries, frames, checksum */
    for (size_t at = 0; at < len; at += at < 80 ? 1 : 251)
        assert_int_equal(journal_try(j.e, 3, 42, 42, 5, (ssize_t)at, SIZE_MAX, NULL, &n),
                         FMT_ERR_NO_TRAILER);
    assert_int_equal(journal_try(j.e, 3, 42, 42, 5, (ssize_t)len - 1, SIZE_MAX, NULL, &n),
                     FMT_ERR_NO_TRAILER);
    /* blocks out of order, twice the same block */
    fmt2_jentry u[3] = {j.e[1], j.e[0], j.e[2]};
    assert_int_equal(journal_try(u, 3, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    u[0] = j.e[0], u[1] = j.e[0];
    assert_int_equal(journal_try(u, 2, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    /* an entry whose length is not its frame's, zero, or past the block size */
    u[0] = j.e[2], u[0].len = 501;
    assert_int_equal(journal_try(u, 1, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    u[0] = j.e[1], u[0].len = 0;
    assert_int_equal(journal_try(u, 1, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    u[0].len = BS + 1;
    assert_int_equal(journal_try(u, 1, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    /* an entry whose frame is not a frame (a checksum that matches: the encoder's) */
    uint8_t junk[64];
    memset(junk, 0x5a, sizeof(junk));
    u[0] = (fmt2_jentry){2, 10, sizeof(junk), junk};
    assert_int_equal(journal_try(u, 1, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    /* a frame shorter than its entry says: the frame parses, its length differs */
    u[0] = j.e[2], u[0].frame_len = (uint32_t)j.l4 + 4;
    uint8_t *longer = calloc(1, j.l4 + 4);
    memcpy(longer, j.f4, j.l4);
    u[0].frame = longer;
    assert_int_equal(journal_try(u, 1, 42, 42, 5, -1, SIZE_MAX, NULL, &n), FMT_ERR_NO_TRAILER);
    free(longer);
    /* read with a length that is not the journal's, or absurd */
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    uint8_t *b = malloc(len), *buf;
    fmt2_jentry *e;
    fmt2_journal_encode(j.e, 3, 9, b);
    assert_int_equal(fmt_pwrite_all(fd, b, len, 0), 0);
    assert_int_equal(fmt_pwrite_all(fd, b, len, len), 0);
    assert_int_equal(fmt2_journal_read(fd, 0, len, 9, BS, 5, &buf, &e, &n), FMT_OK);
    free(buf);
    free(e);
    assert_int_equal(fmt2_journal_read(fd, 0, len + 8, 9, BS, 5, &buf, &e, &n),
                     FMT_ERR_NO_TRAILER);
    assert_int_equal(fmt2_journal_read(fd, 0, len - 8, 9, BS, 5, &buf, &e, &n),
                     FMT_ERR_NO_TRAILER);
    assert_int_equal(fmt2_journal_read(fd, 0, FMT2_J_HEAD + 3, 9, BS, 5, &buf, &e, &n),
                     FMT_ERR_NO_TRAILER);
    assert_int_equal(fmt2_journal_read(fd, 0, 1ull << 40, 9, BS, 5, &buf, &e, &n),
                     FMT_ERR_NO_TRAILER);
    free(b);
    close(fd);
    unlink(path);
    jcase_free(&j);
}

/* ---- slots, padding, holes, the walk ---- */

#define SC_FULL 3u                     /* blocks 0..2: data */
#define SC_HOLES 3u                    /* blocks 3..5: a hole run */
#define SC_LAST 1000u                  /* block 6: 1000 bytes */
#define SC_N (SC_FULL + SC_HOLES + 1)

typedef struct {
    char path[64];
    int fd;
    uint8_t *data;                     /* the logical content */
    uint64_t size, flen[SC_N], end;    /* frame lengths, end of the last frame */
} scase;

static void marker(int fd)
{
    fmt_marker m = {FMT_VERSION, BS, {1, 2, 3}, 0};
    uint8_t b[FMT_MARKER_LEN];
    fmt_marker_encode(&m, b);
    assert_int_equal(fmt_pwrite_all(fd, b, sizeof(b), 0), 0);
}

/* Marker, three blocks of data, a run of three holes, a partial last block; no footer. */
static void scase_new(scase *c)
{
    c->fd = tmp_file(c->path, sizeof(c->path));
    c->size = (SC_N - 1) * (uint64_t)BS + SC_LAST;
    c->data = calloc(1, c->size);
    marker(c->fd);
    uint8_t *fr = malloc(BS + FMT2_FRAME_OVERHEAD);
    for (uint32_t i = 0; i < SC_N; i++) {
        if (i >= SC_FULL && i < SC_FULL + SC_HOLES) {
            c->flen[i] = BS + FMT2_FRAME_OVERHEAD;
            continue;
        }
        uint32_t len = i + 1 < SC_N ? BS : SC_LAST;
        uint8_t *d = make_data(len, i == 1, 100 + i);   /* block 1 does not compress */
        memcpy(c->data + (uint64_t)i * BS, d, len);
        c->flen[i] = encode(fr, d, len);
        uint64_t end = i + 1 < SC_N ? fmt2_slot_off(G, i + 1) : fmt2_slot_off(G, i) + c->flen[i];
        assert_int_equal(
            fmt2_write_slot(c->fd, G, i, fr, (uint32_t)c->flen[i], len, 0, end, NULL), 0);
        free(d);
    }
    assert_int_equal(fmt2_write_hole_run(c->fd, G, SC_FULL, SC_FULL + SC_HOLES,
                                         fmt2_zero_sum(BS), 0,
                                         fmt2_slot_off(G, SC_FULL + SC_HOLES)), 0);
    c->end = fmt2_slot_off(G, SC_N - 1) + c->flen[SC_N - 1];
    assert_int_equal(file_len(c->fd), c->end);
    free(fr);
}

static void scase_free(scase *c)
{
    close(c->fd);
    unlink(c->path);
    free(c->data);
}

static void scan_expect(int fd, int verify, uint64_t n, uint64_t size, uint64_t end,
                        uint64_t bad)
{
    fmt2_scan_result r;
    assert_int_equal(fmt2_scan(fd, file_len(fd), G, verify, &r), FMT_OK);
    assert_int_equal(r.n_blocks, n);
    assert_int_equal(r.size, size);
    assert_int_equal(r.valid_end, end);
    assert_int_equal(r.bad_blocks, bad);
}

static void test_scan(void **state)
{
    scase c;
    scase_new(&c);
    scan_expect(c.fd, 0, SC_N, c.size, c.end, 0);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 0);
    /* every slot but the last is padded exactly to the next one */
    for (uint32_t i = 0; i + 1 < SC_N; i++) {
        uint8_t h[8];
        assert_int_equal(fmt_pread_all(c.fd, h, 8, fmt2_slot_off(G, i) + c.flen[i]), 0);
        assert_int_equal(fmt_get32(h), FMT_SKIP_PAD);
        assert_int_equal(fmt_get32(h + 4), fmt2_slot_len(G) - c.flen[i] - 8);
    }
    /* the holes' frames parse and verify (their data read as zeros) */
    uint8_t *slot = malloc(fmt2_slot_len(G));
    for (uint32_t i = SC_FULL; i < SC_FULL + SC_HOLES; i++) {
        uint32_t len, word, flen;
        assert_int_equal(fmt_pread_all(c.fd, slot, fmt2_slot_len(G), fmt2_slot_off(G, i)), 0);
        assert_int_equal(fmt2_frame_parse(slot, fmt2_slot_len(G), BS, 1, &len, &word, &flen),
                         FMT_OK);
        assert_int_equal(word, BS | FMT_RAW_BIT);
        assert_int_equal(flen, BS + FMT2_FRAME_OVERHEAD);
    }
    free(slot);
    /* a footer after the last frame: the walk stops before it */
    fmt2_footer ft = {c.size, SC_N, c.end, 0, 0, 1, SC_N, 0};
    assert_int_equal(fmt2_footer_write(c.fd, c.end, &ft), 0);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 0);
    fmt2_footer got;
    assert_int_equal(fmt2_footer_read(c.fd, file_len(c.fd), G, &got), FMT_OK);
    /* a file of the marker alone, or less */
    char p2[64];
    int fd = tmp_file(p2, sizeof(p2));
    marker(fd);
    scan_expect(fd, 1, 0, 0, FMT_MARKER_LEN, 0);
    assert_int_equal(ftruncate(fd, 10), 0);
    scan_expect(fd, 1, 0, 0, FMT_MARKER_LEN, 0);
    close(fd);
    unlink(p2);
    scase_free(&c);
}

/* The stock decoder reads slots, padding and holes as the content. */
static void test_scan_file_decodes(void **state)
{
    scase c;
    scase_new(&c);
    fmt2_footer ft = {c.size, SC_N, c.end, 0, 0, 1, SC_N, 0};
    assert_int_equal(fmt2_footer_write(c.fd, c.end, &ft), 0);
    size_t len;
    uint8_t *dec = fx_lz4f_decode(c.path, &len);
    assert_int_equal(len, c.size);
    assert_memory_equal(dec, c.data, c.size);
    free(dec);
    scase_free(&c);
}

static void test_scan_missing_padding(void **state)
{
    scase c;
    scase_new(&c);
    uint8_t z[8] = {0};
    assert_int_equal(fmt_pwrite_all(c.fd, z, 8, fmt2_slot_off(G, 1) + c.flen[1]), 0);
    scan_expect(c.fd, 1, 2, 2ull * BS, fmt2_slot_off(G, 1) + c.flen[1], 0);
    scan_expect(c.fd, 0, 2, 2ull * BS, fmt2_slot_off(G, 1) + c.flen[1], 0);
    scase_free(&c);
    /* padding that does not reach the next slot exactly */
    scase_new(&c);
    uint8_t h[8];
    fmt_put32(h, FMT_SKIP_PAD);
    fmt_put32(h + 4, (uint32_t)(fmt2_slot_len(G) - c.flen[0] - 8 - 1));
    assert_int_equal(fmt_pwrite_all(c.fd, h, 8, fmt2_slot_off(G, 0) + c.flen[0]), 0);
    scan_expect(c.fd, 1, 1, BS, fmt2_slot_off(G, 0) + c.flen[0], 0);
    scase_free(&c);
    /* in a hole run: the padding after hole 4 */
    scase_new(&c);
    assert_int_equal(fmt_pwrite_all(c.fd, z, 8, fmt2_slot_off(G, 4) + c.flen[4]), 0);
    scan_expect(c.fd, 1, 5, 5ull * BS, fmt2_slot_off(G, 4) + c.flen[4], 0);
    scase_free(&c);
}

/* A power loss kept a slot write up to a sector boundary between the block checksum and the
 * content checksum (here: zeros where the old, punched bytes were). The block checksum holds
 * and reads through the mount would work, but lz4 -d fails: the verifying walk and the check
 * of unsynced blocks take the frame for torn. */
static void zero_content_sum(scase *c, uint32_t i)
{
    uint8_t z[4] = {0};
    assert_int_equal(fmt_pwrite_all(c->fd, z, 4, fmt2_slot_off(G, i) + c->flen[i] - 4), 0);
}

static void test_scan_torn_content_sum(void **state)
{
    scase c;
    scase_new(&c);
    zero_content_sum(&c, SC_N - 1);                /* the last block, compressed */
    scan_expect(c.fd, 0, SC_N, c.size, c.end, 0);  /* not verifying: nothing is decoded */
    scan_expect(c.fd, 1, SC_N - 1, (SC_N - 1) * (uint64_t)BS,
                fmt2_slot_off(G, SC_N - 2) + c.flen[SC_N - 2], 0);
    scase_free(&c);
    /* a raw block in the middle, followed by good ones: kept, counted bad (it reads as EIO) */
    scase_new(&c);
    zero_content_sum(&c, 1);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 1);
    scase_free(&c);
    /* behind a footer that says the last block was not synced */
    scase_new(&c);
    fmt2_footer ft = {c.size, SC_N, c.end, 0, 0, 1, SC_N - 1, 0};
    assert_int_equal(fmt2_footer_write(c.fd, c.end, &ft), 0);
    zero_content_sum(&c, SC_N - 1);
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, 0, 0, 1, &r), FMT_OK);
    assert_int_equal(r.ft.n_blocks, SC_N);
    assert_int_equal(fmt2_check_fresh(c.fd, G, 0, 0, &r), FMT_OK);
    assert_int_equal(r.ft.n_blocks, SC_N - 1);
    assert_int_equal(r.ft.size, (SC_N - 1) * (uint64_t)BS);
    assert_int_equal(r.ft.tail, fmt2_slot_off(G, SC_N - 2) + c.flen[SC_N - 2]);
    fmt2_recovery_free(&r);
    scase_free(&c);
}

/* The blocks from the hole run on appended after the last sync, and the padding behind the
 * block before them lost (a power loss kept the old footer there, which the append wrote
 * over in a write of its own): that block is whole and synced, so nothing is cut; its
 * padding is written back, for lz4 -d (FORMAT.md 11.4 step 4). */
static void test_fresh_padding_lost(void **state)
{
    (void)state;
    scase c;
    scase_new(&c);
    fmt2_footer ft = {c.size, SC_N, c.end, 0, 0, 1, SC_FULL, 0};
    assert_int_equal(fmt2_footer_write(c.fd, c.end, &ft), 0);
    uint64_t pad_at = fmt2_slot_off(G, SC_FULL - 1) + c.flen[SC_FULL - 1];
    fmt2_footer old = {SC_FULL * (uint64_t)BS, SC_FULL, pad_at, 0, 0, 0, SC_FULL, 0};
    uint8_t b[FMT2_FOOTER_LEN], pad[8];
    fmt2_footer_encode(&old, b);
    assert_int_equal(fmt_pwrite_all(c.fd, b, sizeof(b), pad_at), 0);
    for (int write = 0; write <= 1; write++) {
        fmt2_recovery r;
        assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, write, 0, 1, &r), FMT_OK);
        assert_int_equal(fmt2_check_fresh(c.fd, G, write, 0, &r), FMT_OK);
        assert_int_equal(r.pad_fixed, SC_FULL);          /* block SC_FULL - 1, plus one */
        assert_int_equal(r.unsynced_cut, 0);
        assert_int_equal(r.ft.n_blocks, SC_N);
        fmt2_recovery_free(&r);
        assert_int_equal(fmt_pread_all(c.fd, pad, sizeof(pad), pad_at), 0);
        assert_int_equal(fmt_get32(pad), write ? FMT_SKIP_PAD : fmt_get32(b));
    }
    assert_int_equal(fmt_get32(pad + 4), fmt2_slot_off(G, SC_FULL) - pad_at - 8);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 0);
    scase_free(&c);
}

/* A valid footer whose journal does not read back (FORMAT.md 10 step 4, 11.4 step 2): the
 * commit that wrote them synced nothing, so the footer's size and tail may be of slots it
 * never wrote. Here it claims a last block longer than the slot holds, and its journal is
 * junk: the file is what the walk finds, reading or writing. */
static void test_damaged_journal_walks(void **state)
{
    (void)state;
    for (int write = 0; write <= 1; write++) {
        scase c;
        scase_new(&c);
        uint8_t junk[100];
        memset(junk, 0x5a, sizeof(junk));
        uint64_t at = fmt2_slot_off(G, SC_N);
        assert_int_equal(fmt_pwrite_all(c.fd, junk, sizeof(junk), at), 0);
        fmt2_footer ft = {SC_N * (uint64_t)BS, SC_N, at, at, sizeof(junk), 7, SC_N, 0};
        assert_int_equal(fmt2_footer_write(c.fd, at + sizeof(junk), &ft), 0);
        fmt2_footer back;              /* the footer itself is valid */
        assert_int_equal(fmt2_footer_read(c.fd, file_len(c.fd), G, &back), FMT_OK);
        fmt2_recovery r;
        assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, write, 0, 1, &r), FMT_OK);
        assert_true(r.journal_bad);
        assert_int_equal(r.ft.n_blocks, SC_N);
        assert_int_equal(r.ft.size, c.size);
        assert_int_equal(r.ft.tail, c.end);
        assert_int_equal(r.ft.j_len, 0);
        fmt2_recovery_free(&r);
        if (write)                     /* repaired: the walk's footer ends the file */
            assert_int_equal(file_len(c.fd), c.end + FMT2_FOOTER_LEN);
        scase_free(&c);
    }
}

static void flip(int fd, uint64_t off)
{
    uint8_t b;
    assert_int_equal(fmt_pread_all(fd, &b, 1, off), 0);
    b ^= 0x40;
    assert_int_equal(fmt_pwrite_all(fd, &b, 1, off), 0);
}

/* ---- the footer pair (FORMAT.md 9.10, 11.6) ---- */

typedef struct {
    scase c;
    uint8_t *want;                     /* the content after both commits */
    uint8_t *fa1, *fa2, *fb1;          /* commit A: blocks 1 and 2; commit B: block 1 again */
    uint64_t la1, la2, lb1;
    uint64_t ja, jla, jb, jlb, eof;    /* where the journals lie; the pair's end */
} pcase;

static uint8_t *pcase_frame(pcase *p, uint32_t block, uint32_t seed, uint64_t *len)
{
    uint8_t *d = make_data(BS, 0, seed), *fr = malloc(BS + FMT2_FRAME_OVERHEAD);
    *len = encode(fr, d, BS);
    memcpy(p->want + (uint64_t)block * BS, d, BS);
    free(d);
    return fr;
}

static void pcase_journal(pcase *p, const fmt2_jentry *e, uint32_t n, uint64_t seq,
                          uint64_t at, uint64_t *len)
{
    *len = fmt2_journal_len(e, n);
    uint8_t *b = malloc(*len);
    fmt2_journal_encode(e, n, seq, b);
    assert_int_equal(fmt_pwrite_all(p->c.fd, b, *len, at), 0);
    free(b);
}

/* The slots as before both commits; journal A (seq 5: blocks 1 and 2) and journal B (seq 6:
 * block 1) in the area behind them; their footers in places pa and 1 - pa. */
static void pcase_new(pcase *p, int pa)
{
    scase_new(&p->c);
    p->want = malloc(p->c.size);
    memcpy(p->want, p->c.data, p->c.size);
    p->fa1 = pcase_frame(p, 1, 501, &p->la1);
    p->fa2 = pcase_frame(p, 2, 502, &p->la2);
    p->fb1 = pcase_frame(p, 1, 503, &p->lb1);
    fmt2_jentry a[2] = {{1, BS, (uint32_t)p->la1, p->fa1}, {2, BS, (uint32_t)p->la2, p->fa2}};
    fmt2_jentry b[1] = {{1, BS, (uint32_t)p->lb1, p->fb1}};
    p->ja = fmt2_slot_off(G, SC_N);
    pcase_journal(p, a, 2, 5, p->ja, &p->jla);
    p->jb = p->ja + p->jla;
    pcase_journal(p, b, 1, 6, p->jb, &p->jlb);
    p->eof = (p->jb + p->jlb + 4096 + FMT2_PAIR_LEN - 1) / FMT2_PAIR_LEN * FMT2_PAIR_LEN +
             FMT2_PAIR_LEN;
    fmt2_footer fa = {p->c.size, SC_N, p->c.end, p->ja, p->jla, 5, SC_N, 1};
    fmt2_footer fb = {p->c.size, SC_N, p->c.end, p->jb, p->jlb, 6, SC_N, 1};
    assert_int_equal(fmt2_place_write(p->c.fd, p->eof, pa, &fa), 0);
    assert_int_equal(fmt2_place_write(p->c.fd, p->eof, 1 - pa, &fb), 0);
    assert_int_equal(file_len(p->c.fd), p->eof);
}

static void pcase_free(pcase *p)
{
    free(p->want);
    free(p->fa1);
    free(p->fa2);
    free(p->fb1);
    scase_free(&p->c);
}

/* After a recovery that wrote: one footer right behind the slots, and lz4 -d gives want. */
static void pcase_expect_settled(pcase *p, const fmt2_recovery *r, uint64_t seq)
{
    assert_true(r->settled);
    assert_int_equal(file_len(p->c.fd), p->c.end + FMT2_FOOTER_LEN);
    fmt2_footer ft;
    assert_int_equal(fmt2_footer_read(p->c.fd, file_len(p->c.fd), G, &ft), FMT_OK);
    assert_int_equal(ft.seq, seq);
    assert_int_equal(ft.j_len, 0);
    assert_false(ft.paired);
    size_t len;
    uint8_t *dec = fx_lz4f_decode(p->c.path, &len);
    assert_int_equal(len, p->c.size);
    assert_memory_equal(dec, p->want, p->c.size);
    free(dec);
}

static void test_pair_both_journals(void **state)
{
    for (int pa = 0; pa < 2; pa++) {   /* the newer footer in either place */
        pcase p;
        pcase_new(&p, pa);
        fmt2_recovery r;
        assert_int_equal(fmt2_recover(p.c.fd, p.eof, G, 0, 0, 1, &r), FMT_OK);
        assert_true(r.paired);
        assert_false(r.torn);
        assert_int_equal(r.pair_journals, 2);
        assert_int_equal(r.ft.seq, 6);
        assert_int_equal(r.replayed, 3);          /* A's two blocks, then B's one */
        assert_int_equal(r.jn, 2);                /* a reader takes block 1 from B, 2 from A */
        assert_int_equal(r.je[0].block, 1);
        assert_int_equal(r.jat[0], p.jb + FMT2_J_HEAD + FMT2_J_ENTRY);
        assert_int_equal(r.je[1].block, 2);
        assert_int_equal(r.jat[1], p.ja + FMT2_J_HEAD + 2 * FMT2_J_ENTRY + p.la1);
        assert_int_equal(file_len(p.c.fd), p.eof);        /* nothing written */
        fmt2_recovery_free(&r);
        assert_int_equal(fmt2_recover(p.c.fd, p.eof, G, 1, 0, 1, &r), FMT_OK);
        pcase_expect_settled(&p, &r, 7);
        fmt2_recovery_free(&r);
        pcase_free(&p);
    }
}

/* The newer commit's journal did not reach the disk: the older footer is the state. */
static void test_pair_newer_lost(void **state)
{
    pcase p;
    pcase_new(&p, 0);
    flip(p.c.fd, p.jb + FMT2_J_HEAD + FMT2_J_ENTRY + 40);
    uint8_t *d = make_data(BS, 0, 501);          /* block 1 is A's */
    memcpy(p.want + BS, d, BS);
    free(d);
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(p.c.fd, p.eof, G, 1, 0, 1, &r), FMT_OK);
    assert_true(r.paired);
    assert_int_equal(r.pair_journals, 1);
    assert_int_equal(r.replayed, 2);
    pcase_expect_settled(&p, &r, 6);
    fmt2_recovery_free(&r);
    pcase_free(&p);
}

/* The older journal overwritten (its commit's slots were synced by the newer one): only
 * the newer is replayed. */
static void test_pair_older_gone(void **state)
{
    pcase p;
    pcase_new(&p, 1);
    flip(p.c.fd, p.ja + 30);
    memcpy(p.want + 2 * (uint64_t)BS, p.c.data + 2 * (uint64_t)BS, BS);   /* block 2 as it was */
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(p.c.fd, p.eof, G, 1, 0, 1, &r), FMT_OK);
    assert_int_equal(r.pair_journals, 1);
    assert_int_equal(r.replayed, 1);
    pcase_expect_settled(&p, &r, 7);
    fmt2_recovery_free(&r);
    pcase_free(&p);
}

/* No usable pair: both journals damaged, a cleared or torn place, or a length that is not
 * a multiple of the pair's: the slots are walked, as for a missing footer. */
static void test_pair_unusable(void **state)
{
    for (int k = 0; k < 3; k++) {
        pcase p;
        pcase_new(&p, 0);
        uint64_t len = p.eof;
        if (k == 0) {
            flip(p.c.fd, p.ja + 30);
            flip(p.c.fd, p.jb + 30);
        } else if (k == 1) {
            assert_int_equal(fmt2_place_write(p.c.fd, p.eof, 0, NULL), 0);
            flip(p.c.fd, fmt2_place_off(p.eof, 1) + 20);
        } else {
            len = p.eof + 1;
            assert_int_equal(ftruncate(p.c.fd, (off_t)len), 0);
        }
        fmt2_recovery r;
        assert_int_equal(fmt2_recover(p.c.fd, len, G, 0, 0, 1, &r), FMT_OK);
        assert_false(r.paired);
        assert_true(r.torn);
        assert_int_equal(r.ft.n_blocks, SC_N);
        assert_int_equal(r.jn, 0);
        fmt2_recovery_free(&r);
        pcase_free(&p);
    }
}

/* A durable commit that only appended lays the pair out with a footer that names no journal
 * (FORMAT.md 11.6): it is the state as it is, and a newer footer whose journal did not reach
 * the disk falls back to it. */
static void test_pair_no_journal(void **state)
{
    pcase p;
    pcase_new(&p, 0);
    memcpy(p.want, p.c.data, p.c.size);
    fmt2_footer bare = {p.c.size, SC_N, p.c.end, 0, 0, 4, SC_N, 1};
    assert_int_equal(fmt2_place_write(p.c.fd, p.eof, 0, &bare), 0);
    flip(p.c.fd, p.jb + 30);           /* the newer footer's journal did not reach the disk */
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(p.c.fd, p.eof, G, 0, 0, 1, &r), FMT_OK);
    assert_true(r.paired);
    assert_int_equal(r.ft.seq, 4);
    assert_int_equal(r.ft.j_len, 0);
    assert_int_equal(r.replayed, 0);
    assert_int_equal(r.jn, 0);
    fmt2_recovery_free(&r);
    assert_int_equal(fmt2_recover(p.c.fd, p.eof, G, 1, 0, 1, &r), FMT_OK);
    pcase_expect_settled(&p, &r, 5);
    fmt2_recovery_free(&r);
    pcase_free(&p);
}

/* A version 2 reader's rule is unchanged: a paired footer is no footer to it, and a footer
 * of version 2 ending the file wins over the places. */
static void test_pair_versions(void **state)
{
    pcase p;
    pcase_new(&p, 0);
    fmt2_footer ft;
    assert_int_equal(fmt2_footer_read(p.c.fd, p.eof, G, &ft), FMT_ERR_NO_TRAILER);
    fmt2_footer pl[2];
    int n;
    assert_int_equal(fmt2_pair_read(p.c.fd, p.eof, G, pl, &n), FMT_OK);
    assert_int_equal(n, 2);
    assert_true(pl[0].seq == 5 && pl[1].seq == 6 && pl[0].paired && pl[1].paired);
    fmt2_footer v2 = {p.c.size, SC_N, p.c.end, 0, 0, 8, SC_N, 0};
    uint8_t b[FMT2_FOOTER_LEN];
    fmt2_footer_encode(&v2, b);
    assert_int_equal(fmt_pwrite_all(p.c.fd, b, sizeof(b), fmt2_place_off(p.eof, 1)), 0);
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(p.c.fd, p.eof, G, 0, 0, 1, &r), FMT_OK);
    assert_false(r.paired);
    assert_int_equal(r.ft.seq, 8);
    assert_int_equal(r.replayed, 0);
    fmt2_recovery_free(&r);
    pcase_free(&p);
}

static void test_scan_bad_blocks(void **state)
{
    scase c;
    /* a bad block with a good one after it: kept, counted; only a verifying walk sees it */
    scase_new(&c);
    flip(c.fd, fmt2_slot_off(G, 1) + FMT_FRAME_HEADER_LEN + 4 + 100);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 1);
    scan_expect(c.fd, 0, SC_N, c.size, c.end, 0);
    flip(c.fd, fmt2_slot_off(G, 2) + FMT_FRAME_HEADER_LEN + 4 + 5);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 2);
    scase_free(&c);
    /* a bad last block is a torn tail: dropped */
    scase_new(&c);
    flip(c.fd, fmt2_slot_off(G, SC_N - 1) + FMT_FRAME_HEADER_LEN + 4 + 3);
    scan_expect(c.fd, 1, SC_N - 1, (SC_N - 1) * (uint64_t)BS,
                fmt2_slot_off(G, SC_N - 2) + c.flen[SC_N - 2], 0);
    scan_expect(c.fd, 0, SC_N, c.size, c.end, 0);
    scase_free(&c);
    /* a bad block whose next slot holds nothing: dropped with what follows */
    scase_new(&c);
    flip(c.fd, fmt2_slot_off(G, 0) + FMT_FRAME_HEADER_LEN + 4 + 3);
    uint8_t z[4] = {0};
    assert_int_equal(fmt_pwrite_all(c.fd, z, 4, fmt2_slot_off(G, 1)), 0);
    scan_expect(c.fd, 1, 0, 0, FMT_MARKER_LEN, 0);
    scase_free(&c);
    /* the last file cut in its last frame: that block is gone */
    scase_new(&c);
    assert_int_equal(ftruncate(c.fd, (off_t)(c.end - 1)), 0);
    scan_expect(c.fd, 1, SC_N - 1, (SC_N - 1) * (uint64_t)BS,
                fmt2_slot_off(G, SC_N - 2) + c.flen[SC_N - 2], 0);
    scase_free(&c);
}

/* A hole written over a block whose punch a power loss lost: its head and end over the old
 * data. The walk of a recovery that writes punches them (a bad block before); one that does
 * not write leaves it a bad block (FORMAT.md 11.4 step 1a). */
static void test_recover_lost_punch(void **state)
{
    scase c;
    scase_new(&c);
    assert_int_equal(fmt2_write_hole_run(c.fd, G, 1, 2, fmt2_zero_sum(BS), 0, fmt2_slot_off(G, 2)), 0);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 1);
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, 0, 0, 1, &r), FMT_OK);
    assert_int_equal(r.bad_blocks, 1);
    fmt2_recovery_free(&r);
    assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, 1, 0, 1, &r), FMT_OK);
    assert_int_equal(r.bad_blocks, 0);
    assert_int_equal(r.ft.n_blocks, SC_N);
    assert_int_equal(r.ft.size, c.size);
    fmt2_recovery_free(&r);
    scan_expect(c.fd, 1, SC_N, c.size, c.end, 0);
    uint8_t *got = malloc(BS), *zeros = calloc(1, BS);
    assert_int_equal(fmt_pread_all(c.fd, got, BS, fmt2_slot_off(G, 1) + FMT2_HOLE_HEAD), 0);
    assert_memory_equal(got, zeros, BS);
    free(got);
    free(zeros);
    scase_free(&c);
    (void)state;
}

/* A footer of n blocks, size bytes, ending the slots at end; then the stock decoder must
 * read the whole file as size zero bytes. */
static void decodes_to_zeros(int fd, const char *path, uint64_t n, uint64_t size, uint64_t end)
{
    fmt2_footer ft = {size, n, end, 0, 0, 1, n, 0};
    assert_int_equal(fmt2_footer_write(fd, end, &ft), 0);
    size_t len;
    uint8_t *dec = fx_lz4f_decode(path, &len), *zeros = calloc(1, size);
    assert_int_equal(len, size);
    assert_memory_equal(dec, zeros, len);
    free(zeros);
    free(dec);
}

/* Holes take (almost) no room in the backing file: a run of 64 holes, whose slots held data
 * before (zero_end), allocates a few pages per block at most. */
static void test_holes_sparse(void **state)
{
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    const uint64_t n = 64;
    marker(fd);
    uint8_t *junk = make_data(1 << 20, 1, 9);
    for (uint64_t off = FMT_MARKER_LEN; off < fmt2_slot_off(G, n); off += 1 << 20)
        assert_int_equal(fmt_pwrite_all(fd, junk, 1 << 20, off), 0);
    uint64_t zero_end = fmt2_slot_off(G, n) + (1 << 20) - 1;
    assert_int_equal(fmt2_zero(fd, fmt2_slot_off(G, 0), zero_end - fmt2_slot_off(G, 0)), 0);
    assert_int_equal(fmt2_write_hole_run(fd, G, 0, n - 1, fmt2_zero_sum(BS), 0, fmt2_slot_off(G, n - 1)), 0);
    assert_int_equal(fmt2_write_slot(fd, G, n - 1, NULL, 0, 777, fmt2_zero_sum(777),
                                     fmt2_slot_off(G, n - 1) + 777 + FMT2_FRAME_OVERHEAD, NULL), 0);
    uint64_t end = fmt2_slot_off(G, n - 1) + 777 + FMT2_FRAME_OVERHEAD;
    assert_int_equal(ftruncate(fd, (off_t)end), 0);
    fsync(fd);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true((uint64_t)st.st_blocks * 512 <= n * 8192);
    scan_expect(fd, 1, n, (n - 1) * BS + 777, end, 0);
    /* every hole reads as zeros through the stock decoder */
    decodes_to_zeros(fd, path, n, (n - 1) * BS + 777, end);
    free(junk);
    close(fd);
    unlink(path);
}

/* A slot rewritten in place with the footer that follows it: in the frame's own write when
 * the frame reaches the slot's end, else after the padding, at the end; either way the
 * bytes are those of separate writes. */
static void rewrite_with_footer(uint32_t gap)
{
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    marker(fd);
    uint8_t *a = make_data(1000, 0, 3), *b = make_data(3000, 0, 4);
    uint8_t *fa = malloc(1000 + FMT2_FRAME_OVERHEAD), *fb = malloc(3000 + FMT2_FRAME_OVERHEAD);
    size_t la = encode(fa, a, 1000), lb = encode(fb, b, 3000);
    uint64_t at = fmt2_slot_off(G, 0);
    assert_int_equal(fmt2_write_slot(fd, G, 0, fa, (uint32_t)la, 1000, 0, at + la, NULL), 0);
    fmt2_footer ft = {3000, 1, at + lb + gap, 0, 0, 7, 1, 0}, got;
    uint8_t enc[FMT2_FOOTER_LEN], back[FMT2_FOOTER_LEN];
    fmt2_footer_encode(&ft, enc);
    assert_int_equal(fmt2_rewrite_slot(fd, G, 0, fb, (uint32_t)lb, 3000, at + lb + gap, 0, enc), 0);
    assert_int_equal(file_len(fd), at + lb + gap + FMT2_FOOTER_LEN);
    size_t first = gap ? 8 : FMT2_FOOTER_LEN;
    assert_int_equal(pread(fd, back, first, (off_t)(at + lb)), (ssize_t)first);
    if (gap) {                         /* the padding header, then the footer at the end */
        assert_int_equal(fmt_get32(back), FMT_SKIP_PAD);
        assert_int_equal(fmt_get32(back + 4), gap - 8);
        assert_int_equal(pread(fd, back, FMT2_FOOTER_LEN, (off_t)(at + lb + gap)), FMT2_FOOTER_LEN);
    }
    assert_memory_equal(back, enc, FMT2_FOOTER_LEN);
    assert_int_equal(fmt2_footer_read(fd, file_len(fd), G, &got), FMT_OK);
    assert_int_equal(got.size, 3000);
    assert_int_equal(got.tail, at + lb + gap);
    scan_expect(fd, 1, 1, 3000, at + lb, 0);
    free(a), free(b), free(fa), free(fb);
    close(fd);
    unlink(path);
}

static void test_rewrite_slot_footer(void **state)
{
    (void)state;
    rewrite_with_footer(0);
    rewrite_with_footer(100);
}

/* A file of n blocks, all holes, written with hole runs (version 3): runs of 64, 64 and
 * n - 129 blocks, then the partial last block as a hole of its own. Returns its length. */
static uint64_t runs_file(int fd, uint64_t n, uint32_t last)
{
    marker(fd);
    assert_int_equal(fmt2_write_hole_run(fd, G, 0, n - 1, fmt2_zero_sum(BS), 1, fmt2_slot_off(G, n - 1)), 0);
    uint64_t end = fmt2_slot_off(G, n - 1) + last + FMT2_FRAME_OVERHEAD;
    assert_int_equal(fmt2_write_slot(fd, G, n - 1, NULL, 0, last, fmt2_zero_sum(last), end,
                                     NULL), 0);
    assert_int_equal(ftruncate(fd, (off_t)end), 0);
    return end;
}

/* Hole runs: a page or two per group of 64 blocks, not one per block; the stock decoder
 * reads zeros; every block finds its run, and a block that has a frame of its own none. */
static void test_hole_runs(void **state)
{
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    const uint64_t n = 150, g = fmt2_run_group(BS);
    uint64_t end = runs_file(fd, n, 777);
    fsync(fd);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true((uint64_t)st.st_blocks * 512 <= 12 * 4096);  /* 3 runs, the last hole */
    scan_expect(fd, 1, n, (n - 1) * BS + 777, end, 0);
    assert_int_equal(fmt2_run_zero_sum(BS, (uint32_t)g), fmt2_zero_sum(FMT2_RUN_SPAN));
    assert_int_equal(fmt2_run_zero_sum(BS, 5), fmt2_zero_sum(5 * BS));
    const uint64_t at[] = {0, 1, 63, 64, 100, 127, 128, 148};
    const uint64_t head[] = {0, 0, 0, 64, 64, 64, 128, 128};
    for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
        uint64_t a = 99;
        uint32_t m = 0;
        assert_int_equal(fmt2_run_find(fd, G, at[k], &a, &m), FMT_OK);
        assert_int_equal(a, head[k]);
        assert_int_equal(m, head[k] == 128 ? n - 1 - 128 : g);
    }
    uint64_t a;
    uint32_t m;
    assert_int_equal(fmt2_run_find(fd, G, n - 1, &a, &m), FMT_ERR_CORRUPT);
    /* where the holes are: a run at once, the last block as a single hole */
    assert_int_equal(fmt2_slot_hole(fd, G, 100, BS, fmt2_zero_sum(BS), &a, &m), 1);
    assert_int_equal(a, 64);
    assert_int_equal(m, g);
    assert_int_equal(fmt2_slot_hole(fd, G, n - 1, 777, fmt2_zero_sum(777), &a, &m), 1);
    assert_int_equal(a, n - 1);
    assert_int_equal(m, 1);
    assert_int_equal(fmt2_slot_hole(fd, G, n - 1, 777, fmt2_zero_sum(778), &a, &m), 0);
    decodes_to_zeros(fd, path, n, (n - 1) * BS + 777, end);
    close(fd);
    unlink(path);
}

/* A damaged run is no run: its blocks find none, and a walk keeps no run as its last
 * blocks (a run never holds the last block), so it ends before the runs that precede. */
static void test_hole_runs_damaged(void **state)
{
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    const uint64_t n = 150;
    uint64_t end = runs_file(fd, n, 777), a;
    uint32_t m;
    /* the second run's EndMark: its block checksum and content checksum stay */
    uint64_t tail = fmt2_slot_off(G, 64) + FMT2_FRAME_OVERHEAD + 64ull * BS - 8;
    assert_int_equal(fmt_pwrite_all(fd, "\1", 1, tail), 0);
    assert_int_equal(fmt2_run_find(fd, G, 70, &a, &m), FMT_ERR_CORRUPT);
    assert_int_equal(fmt2_run_find(fd, G, 10, &a, &m), FMT_OK);
    scan_expect(fd, 0, 0, 0, FMT_MARKER_LEN, 0);
    /* a run's data that do not read as zeros fail the verifying walk only */
    assert_int_equal(fmt_pwrite_all(fd, "\0", 1, tail), 0);
    scan_expect(fd, 1, n, (n - 1) * BS + 777, end, 0);
    assert_int_equal(fmt_pwrite_all(fd, "x", 1, fmt2_slot_off(G, 70) + 1000), 0);
    scan_expect(fd, 0, n, (n - 1) * BS + 777, end, 0);
    scan_expect(fd, 1, 0, 0, FMT_MARKER_LEN, 0);
    close(fd);
    unlink(path);
}

/* ---- through the ff_* API ---- */

static uint64_t path_len(const char *path, uint64_t *alloc)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if (alloc)
        *alloc = (uint64_t)st.st_blocks * 512;
    return (uint64_t)st.st_size;
}

static void save(const char *path, const uint8_t *b, size_t n)
{
    int fd = open(path, O_RDWR | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(fmt_pwrite_all(fd, b, n, 0), 0);
    close(fd);
}

/* 3 MiB of data, a 2 MiB hole (truncate up, then write past it), 2 MiB of data, a trailing
 * hole to 7 MiB + 12345 (truncate up). */
#define E_SIZE ((7u << 20) + 12345u)

static uint8_t *e2e_write(fixture *fx)
{
    uint8_t *d = make_data(E_SIZE, 0, 77);
    memset(d + (3u << 20), 0, 2u << 20);
    memset(d + (7u << 20), 0, 12345);
    ff_file *f;
    assert_int_equal(ff_create(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    for (size_t off = 0; off < (3u << 20); off += 1u << 20)
        assert_int_equal(ff_write(f, d + off, 1u << 20, (off_t)off), 0);
    assert_int_equal(ff_truncate(f, 5 << 20), 0);
    assert_int_equal(ff_write(f, d + (5u << 20), 2u << 20, 5 << 20), 0);
    assert_int_equal(ff_truncate(f, E_SIZE), 0);
    assert_int_equal(ff_size(f), E_SIZE);
    assert_int_equal(ff_release(f), 0);
    return d;
}

static void test_ff_roundtrip(void **state)
{
    fixture *fx = fx_new(BS, TAG);
    uint8_t *d = e2e_write(fx);
    /* a version 7 file (version 2 with hole runs, page records, a chained last frame and
     * full blocks' frames on their slots' pages) with a valid footer after the slots */
    int fd = open(fx->path, O_RDONLY);
    uint8_t head[FMT_MARKER_LEN];
    fmt_marker m;
    assert_int_equal(fmt_pread_all(fd, head, sizeof(head), 0), 0);
    assert_int_equal(fmt_marker_decode(head, sizeof(head), &m), FMT_OK);
    assert_int_equal(m.version, FMT_VERSION_7);
    fmt2_geo g = fmt2_geo_of(m.version, BS);
    fmt2_footer ft;
    uint64_t alloc, len = path_len(fx->path, &alloc);
    assert_int_equal(fmt2_footer_read(fd, len, g, &ft), FMT_OK);
    assert_int_equal(ft.size, E_SIZE);
    assert_int_equal(ft.j_len, 0);
    assert_int_equal(ft.tail + FMT2_FOOTER_LEN, len);
    /* the full blocks of text after the first start on their slots' pages (9.3.1) */
    uint64_t paged = 0;
    for (uint64_t i = 1; i + 1 < ft.n_blocks; i++) {
        uint64_t at;
        assert_int_equal(fmt2_frame_at(fd, g, i, &at), 0);
        assert_true(at == fmt2_slot_off(g, i) || at == fmt2_slot_page(g, i));
        paged += at % FMT2_PAGE == 0 && at != fmt2_slot_off(g, i);
    }
    assert_true(paged >= 10);
    fmt2_scan_result sr;
    assert_int_equal(fmt2_scan(fd, len, g, 1, &sr), FMT_OK);
    assert_int_equal(sr.n_blocks, ft.n_blocks);
    assert_int_equal(sr.size, E_SIZE);
    assert_int_equal(sr.valid_end, ft.tail);
    close(fd);
    /* 5 MiB of text compresses well and the 2 MiB of holes take no room */
    assert_true(alloc < (3u << 20));
    fx_check_lz4_tool(fx->path, d, E_SIZE);
    fx_check_lz4f(fx, d, E_SIZE);
    fx_check_read(fx, O_RDONLY, d, E_SIZE);
    fx_check_read(fx, O_RDWR, d, E_SIZE);
    assert_int_equal(path_len(fx->path, NULL), len);   /* nothing to repair: untouched */
    uint64_t size;
    int own;
    fd = open(fx->path, O_RDONLY);
    assert_int_equal(ff_stat_size(fx->env, fd, &size, &own), 0);
    assert_int_equal(size, E_SIZE);
    assert_true(own);
    close(fd);
    free(d);
    fx_free(fx);
}

/* The e2e file at 1 MiB blocks (blocks 3 and 4 holes), written as version `version`,
 * its marker then zeroed as by a power loss: where its slots start, that it reads back
 * (lz4 -d too), and which version fmt2_lost_marker finds it to be. */
static void check_page_slots(uint32_t version)
{
    fixture *fx = fx_new(1u << 20, TAG);
    fx->env->opt.file_version = version;
    uint8_t *d = e2e_write(fx);
    fmt2_geo g = fmt2_geo_of(version, 1u << 20);
    assert_int_equal(g.extra, version >= FMT_VERSION_6 ? 4096 : FMT2_SLOT_EXTRA);
    int fd = open(fx->path, O_RDWR);
    uint64_t len = path_len(fx->path, NULL);
    fmt2_footer ft;
    assert_int_equal(fmt2_footer_read(fd, len, g, &ft), FMT_OK);
    assert_int_equal(ft.n_blocks, 8);
    for (uint64_t i = 0; i < ft.n_blocks; i++) {     /* holes 3 and 4 lie in two groups */
        uint8_t h[4];
        uint64_t at = fmt2_slot_off(g, i);
        assert_int_equal(fmt_pread_all(fd, h, sizeof(h), at), 0);
        assert_int_equal(fmt_get32(h), FMT_LZ4_MAGIC);
        if (version >= FMT_VERSION_6 && i)
            assert_int_equal(at % 4096, 0);
    }
    fmt2_scan_result sr;
    assert_int_equal(fmt2_scan(fd, len, g, 1, &sr), FMT_OK);
    assert_int_equal(sr.size, E_SIZE);
    fx_check_lz4_tool(fx->path, d, E_SIZE);
    fx_check_read(fx, O_RDONLY, d, E_SIZE);
    uint8_t zeros[FMT_MARKER_LEN] = {0};
    assert_int_equal(fmt_pwrite_all(fd, zeros, sizeof(zeros), 0), 0);
    uint32_t found = 0;
    assert_int_equal(fmt2_lost_marker(fd, zeros, len, 1u << 20, &found), 1u << 20);
    assert_int_equal(found, version >= FMT_VERSION_6 ? FMT_VERSION : FMT_VERSION_5);
    /* in a store of 64 KiB blocks (one converted or reformatted), whose footer bounds a
     * 1 MiB file's footer also fits: the last slot's head says which */
    found = 0;
    assert_int_equal(fmt2_lost_marker(fd, zeros, len, 64u << 10, &found), 1u << 20);
    assert_int_equal(found, version >= FMT_VERSION_6 ? FMT_VERSION : FMT_VERSION_5);
    close(fd);
    fx_check_read(fx, O_RDWR, d, E_SIZE);             /* the open puts the marker back */
    fd = open(fx->path, O_RDONLY);
    fmt_marker m;
    uint8_t head[FMT_MARKER_LEN];
    assert_int_equal(fmt_pread_all(fd, head, sizeof(head), 0), 0);
    assert_int_equal(fmt_marker_decode(head, sizeof(head), &m), FMT_OK);
    assert_int_equal(m.version, version >= FMT_VERSION_6 ? FMT_VERSION : FMT_VERSION_5);
    close(fd);
    fx_check_lz4_tool(fx->path, d, E_SIZE);
    free(d);
    fx_free(fx);
}

static void chk_quiet(void *ctx, const char *line);

/* Where slot i's frame starts in the file at path (FORMAT.md 9.3.1). */
static uint64_t frame_at_path(const char *path, fmt2_geo g, uint64_t i)
{
    uint64_t at;
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fmt2_frame_at(fd, g, i, &at), 0);
    close(fd);
    return at;
}

/* Version 7 (FORMAT.md 9.3.1): a full block's frame lies on its slot's page when it fits,
 * at the slot's start when it does not (random bytes) or is a hole, and the padding before
 * it follows every move, in commits in place with and without a sync: lz4 -d, the reads and
 * fsck agree after each; then the footer is lost and the walk takes every block back. */
static void test_page_frames(void **state)
{
    (void)state;
    fixture *fx = fx_new(BS, TAG);
    const size_t n = 8 * (size_t)BS;
    fmt2_geo g = fmt2_geo_of(FMT_VERSION_7, BS);
    uint8_t *d = make_data(n, 0, 5), *rnd = make_data(2 * (size_t)BS, 1, 6);
    ff_file *f;
    assert_int_equal(ff_create(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, d, n, 0), 0);
    assert_int_equal(ff_flush(f, 1), 0);
    for (uint64_t i = 1; i + 1 < n / BS; i++)
        assert_int_equal(frame_at_path(fx->path, g, i), fmt2_slot_page(g, i));
    /* blocks 3 (alone) and 5-6 (together): random, text, zeros, text */
    for (int round = 0; round < 4; round++) {
        uint8_t *text = make_data(3 * (size_t)BS, 0, 10 + (uint32_t)round);
        for (int k = 0; k < 3; k++) {
            uint8_t *dst = d + (k == 0 ? 3 : 4 + k) * (size_t)BS;
            if (round == 0)
                memcpy(dst, rnd + (k ? BS : 0), BS);
            else if (round == 2)
                memset(dst, 0, BS);
            else
                memcpy(dst, text + (size_t)k * BS, BS);
        }
        free(text);
        assert_int_equal(ff_write(f, d + 3 * (size_t)BS, BS, 3 * (off_t)BS), 0);
        assert_int_equal(ff_write(f, d + 5 * (size_t)BS, 2 * (size_t)BS, 5 * (off_t)BS), 0);
        assert_int_equal(ff_flush(f, round & 1), 0);
        int paged = round & 1;
        for (uint64_t i = 3; i <= 6; i += i == 3 ? 2 : 1)
            assert_int_equal(frame_at_path(fx->path, g, i),
                             paged ? fmt2_slot_page(g, i) : fmt2_slot_off(g, i));
        fx_check_lz4_tool(fx->path, d, n);
    }
    assert_int_equal(ff_release(f), 0);
    fx_check_lz4_tool(fx->path, d, n);
    fx_check_read(fx, O_RDONLY, d, n);
    chk_result r;
    int lines = 0, fd = open(fx->path, O_RDONLY);
    assert_int_equal(chk_file(fd, NULL, CHK_CHECK, 0, chk_quiet, &lines, &r), 0);
    close(fd);
    assert_int_equal(r.kind, CHK_OWN);
    assert_int_equal(r.found, 0);
    assert_int_equal(lines, 0);
    /* the footer lost: the walk finds every block, on its page or not */
    uint64_t len = path_len(fx->path, NULL);
    uint8_t zeros[FMT2_FOOTER_LEN] = {0};
    fd = open(fx->path, O_RDWR);
    assert_int_equal(fmt_pwrite_all(fd, zeros, sizeof(zeros), len - sizeof(zeros)), 0);
    fmt2_scan_result sr;
    assert_int_equal(fmt2_scan(fd, len, g, 1, &sr), FMT_OK);
    assert_int_equal(sr.n_blocks, n / BS);
    assert_int_equal(sr.size, n);
    close(fd);
    fx_check_read(fx, O_RDWR, d, n);
    fx_check_lz4_tool(fx->path, d, n);
    free(rnd);
    free(d);
    fx_free(fx);
}

/* Version 6 puts the slots of 1 MiB blocks on page boundaries; version 5 files of 1 MiB
 * blocks keep theirs, and a lost marker is put back as the version whose spacing the file
 * shows. */
static void test_page_slots(void **state)
{
    (void)state;
    check_page_slots(FMT_VERSION_6);
    check_page_slots(FMT_VERSION_5);
}

/* Rewriting 10 bytes in place costs one block's slot, not a copy of the file. */
static void test_ff_small_rewrite(void **state)
{
    fixture *fx = fx_new(BS, TAG);
    uint8_t *d = e2e_write(fx);
    uint64_t before = path_len(fx->path, NULL);
    ff_file *f;
    assert_int_equal(ff_open(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    for (int k = 0; k < 20; k++) {
        uint64_t at = (1u << 20) + 333 + (uint64_t)k * 7 * BS / 3;
        memcpy(d + at, "0123456789", 10);
        assert_int_equal(ff_write(f, "0123456789", 10, (off_t)at), 0);
        assert_int_equal(ff_flush(f, k & 1), 0);
        assert_true(path_len(fx->path, NULL) <= before + BS + (64u << 10));
    }
    /* and in a hole */
    memcpy(d + (4u << 20), "hole", 4);
    assert_int_equal(ff_write(f, "hole", 4, 4 << 20), 0);
    assert_int_equal(ff_flush(f, 1), 0);
    assert_true(path_len(fx->path, NULL) <= before + BS + (64u << 10));
    assert_int_equal(ff_release(f), 0);
    assert_true(path_len(fx->path, NULL) <= before + BS + (64u << 10));
    fx_check_lz4_tool(fx->path, d, E_SIZE);
    fx_check_read(fx, O_RDONLY, d, E_SIZE);
    fx_check_read(fx, O_RDWR, d, E_SIZE);
    free(d);
    fx_free(fx);
}

/* A second environment on the fixture's engine whose log goes to a file. */
typedef struct {
    ff_env *env;
    lg_log *log;
    char path[64];
} logged;

static void logged_new(logged *l, fixture *fx)
{
    sb_super sb;
    ff_options opt = {.mem_bytes = 64u << 20};
    assert_int_equal(sb_init(&sb, fx->bs), SB_OK);
    int fd = tmp_file(l->path, sizeof(l->path));
    close(fd);
    l->log = lg_open(l->path, 0, TAG);
    assert_non_null(l->log);
    l->env = ff_env_new(fx->eng, &sb, &opt, l->log);
    assert_non_null(l->env);
}

static void logged_free(logged *l)
{
    ff_env_free(l->env);
    lg_close(l->log);
    unlink(l->path);
}

static int log_has(const logged *l, const char *what)
{
    size_t n;
    uint8_t *b = fx_slurp(l->path, &n);
    b[n] = 0;
    int has = strstr((char *)b, what) != NULL;
    free(b);
    return has;
}

static uint64_t repairs(ff_env *env)
{
    ff_stats s;
    ff_env_stats(env, &s);
    return s.repairs;
}

/* Opens (read-write, repairing) and reads: every block is the one of `a` or of `b` (the
 * states before and after a commit), never anything else, and nothing past either. Returns
 * the size read. Afterwards the file has a valid footer and opens without a repair. */
static uint64_t check_consistent(fixture *fx, logged *l, const uint8_t *a, uint64_t na,
                                 const uint8_t *b, uint64_t nb)
{
    ff_file *f;
    assert_int_equal(ff_open(l->env, open(fx->path, O_RDWR), "t", &f), 0);
    uint64_t size = ff_size(f), max = na > nb ? na : nb;
    assert_true(size <= max);
    uint8_t *got = malloc(size + 1);
    size_t g;
    assert_int_equal(ff_read(f, got, size + 1, 0, &g), 0);
    assert_int_equal(g, size);
    for (uint64_t off = 0; off < size; off += BS) {
        uint64_t n = size - off < BS ? size - off : BS;
        int is_a = off + n <= na && memcmp(got + off, a + off, n) == 0;
        int is_b = off + n <= nb && memcmp(got + off, b + off, n) == 0;
        if (!is_a && !is_b)
            fail_msg("block %llu of a file of %llu bytes is neither state",
                     (unsigned long long)(off / BS), (unsigned long long)size);
    }
    assert_int_equal(ff_release(f), 0);
    free(got);
    int fd = open(fx->path, O_RDONLY);
    fmt2_footer ft;
    assert_int_equal(fmt2_footer_read(fd, path_len(fx->path, NULL), G, &ft), FMT_OK);
    assert_int_equal(ft.size, size);
    close(fd);
    uint64_t r = repairs(l->env);
    assert_int_equal(ff_open(l->env, open(fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_size(f), size);
    assert_int_equal(ff_release(f), 0);
    assert_int_equal(repairs(l->env), r);
    return size;
}

/* Cut at many lengths (a torn footer, journal or slot): the open repairs it (a log line,
 * a footer rewritten) and reads a prefix of the content, never garbage. */
static void test_ff_torn(void **state)
{
    fixture *fx = fx_new(BS, TAG);
    logged l;
    logged_new(&l, fx);
    uint8_t *d = e2e_write(fx);
    /* a small in-place rewrite whose journal stays at rest */
    ff_file *f;
    uint8_t *d2 = malloc(E_SIZE);
    memcpy(d2, d, E_SIZE);
    memcpy(d2 + (2u << 20) + 5, "0123456789", 10);
    assert_int_equal(ff_open(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, "0123456789", 10, (2 << 20) + 5), 0);
    assert_int_equal(ff_flush(f, 1), 0);
    assert_int_equal(ff_release(f), 0);
    size_t n;
    uint8_t *whole = fx_slurp(fx->path, &n);
    const uint64_t cuts[] = {1, 8, 32, 63, 64, 65, 100, 200, 1000, 5000, 70000, 300000,
                             n / 2, n - FMT_MARKER_LEN - 1, n - FMT_MARKER_LEN};
    for (size_t k = 0; k < sizeof(cuts) / sizeof(*cuts); k++) {
        if (cuts[k] > n - FMT_MARKER_LEN)
            continue;
        save(fx->path, whole, n - cuts[k]);
        uint64_t r = repairs(l.env);
        uint64_t size = check_consistent(fx, &l, d2, E_SIZE, d2, E_SIZE);
        assert_true(size <= E_SIZE);
        assert_int_equal(repairs(l.env), r + 1);
        assert_true(log_has(&l, "repaired a torn file"));
    }
    /* the marker alone: an empty file */
    save(fx->path, whole, FMT_MARKER_LEN);
    assert_int_equal(check_consistent(fx, &l, d2, E_SIZE, d2, E_SIZE), 0);
    free(whole);
    free(d2);
    free(d);
    logged_free(&l);
    fx_free(fx);
}

/* The file at path still holds exactly the n bytes of before. */
static void assert_unchanged(const char *path, const uint8_t *before, size_t n)
{
    size_t n2;
    uint8_t *after = fx_slurp(path, &n2);
    assert_int_equal(n2, n);
    assert_memory_equal(after, before, n);
    free(after);
}

/* Reads a file of E_SIZE bytes through a read-only environment and compares it with want;
 * the file is not written. */
static void check_read_only(fixture *fx, const uint8_t *want)
{
    sb_super sb;
    ff_options ro = {.read_only = 1, .mem_bytes = 64u << 20};
    assert_int_equal(sb_init(&sb, BS), SB_OK);
    ff_env *env = ff_env_new(fx->eng, &sb, &ro, NULL);
    ff_file *g;
    uint8_t *buf = malloc(E_SIZE);
    size_t got, n1;
    uint8_t *before = fx_slurp(fx->path, &n1);
    assert_int_equal(ff_open(env, open(fx->path, O_RDONLY), "t", &g), 0);
    assert_int_equal(ff_read(g, buf, E_SIZE, 0, &got), 0);
    assert_int_equal(got, E_SIZE);
    assert_memory_equal(buf, want, E_SIZE);
    assert_int_equal(ff_release(g), 0);
    assert_unchanged(fx->path, before, n1);
    free(before);
    free(buf);
    ff_env_free(env);
}

/* A block rewritten by a durable commit (its journal kept, the slot holding the same frame),
 * then changed by a page record behind that frame, the footer still naming the journal:
 * a read-only open reads the block from the journal's copy and the records from its slot,
 * behind the slot's frame wherever it lies (version 7: on the slot's page, FORMAT.md 9.3.1,
 * 10 step 6). */
static void test_ro_journal_records(void **state)
{
    (void)state;
    fixture *fx = fx_new(BS, TAG);
    uint8_t *d = e2e_write(fx);
    uint64_t at = (1u << 20) + 2 * BS + 17, blk = at / BS;
    uint8_t chg[BS / 2];
    for (size_t k = 0; k < sizeof(chg); k++)
        chg[k] = (uint8_t)('a' + k % 7);
    memcpy(d + at, chg, sizeof(chg));
    ff_file *f;
    assert_int_equal(ff_open(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, chg, sizeof(chg), (off_t)at), 0);
    assert_int_equal(ff_flush(f, 1), 0);            /* a frame, through a journal */
    size_t n1, n2;
    uint8_t *one = fx_slurp(fx->path, &n1);
    memcpy(d + at + 100, "RECORDED", 8);
    assert_int_equal(ff_write(f, "RECORDED", 8, (off_t)(at + 100)), 0);
    assert_int_equal(ff_flush(f, 1), 0);            /* a page record behind that frame */
    uint8_t *two = fx_slurp(fx->path, &n2);
    assert_int_equal(ff_release(f), 0);
    fmt2_geo g = fmt2_geo_of(FMT_VERSION_7, BS);
    fmt2_footer ft;
    uint64_t pos;
    save(fx->path, one, n1);
    int fd = open(fx->path, O_RDONLY);
    assert_int_equal(fmt2_footer_find(fd, n1, g, &ft), FMT_OK);
    assert_int_equal(fmt2_frame_at(fd, g, blk, &pos), 0);
    close(fd);
    assert_true(ft.j_len > 0);                      /* the first commit's journal */
    assert_int_equal(pos, fmt2_slot_page(g, blk));  /* the frame lies on its page */
    /* the slots and marker of the second commit, the journal and footer of the first */
    assert_true(n2 >= ft.tail);
    memcpy(one, two, ft.tail);
    save(fx->path, one, n1);
    check_read_only(fx, d);
    free(one);
    free(two);
    free(d);
    fx_free(fx);
}

/* A commit caught after its journal and footer, before its slot: the open rewrites the slot
 * from the journal (a log line); cut as well, the blocks are the old ones or the new ones. */
static void test_ff_interrupted_commit(void **state)
{
    fixture *fx = fx_new(BS, TAG);
    logged l;
    logged_new(&l, fx);
    uint8_t *d = e2e_write(fx);
    size_t n_old, n_new;
    uint8_t *old = fx_slurp(fx->path, &n_old);
    uint8_t *d2 = malloc(E_SIZE);
    memcpy(d2, d, E_SIZE);
    uint64_t at = (1u << 20) + 2 * BS + 17;
    /* wider than a page record takes (a quarter of a block): a new frame, through the
     * journal */
    uint8_t chg[BS / 2];
    for (size_t k = 0; k < sizeof(chg); k++)
        chg[k] = (uint8_t)('A' + k % 10);
    memcpy(d2 + at, chg, sizeof(chg));
    ff_file *f;
    assert_int_equal(ff_open(fx->env, open(fx->path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, chg, sizeof(chg), (off_t)at), 0);
    /* durable: the journal stays named by the footer while the file is open (an unsynced
     * commit settles it at once, leaving nothing to interrupt); the release drops it */
    assert_int_equal(ff_flush(f, 1), 0);
    uint8_t *now = fx_slurp(fx->path, &n_new);
    assert_int_equal(ff_release(f), 0);
    size_t n_rest;
    free(fx_slurp(fx->path, &n_rest));
    int fd = open(fx->path, O_RDONLY);
    fmt2_footer ft;
    assert_int_equal(fmt2_footer_read(fd, n_rest, G, &ft), FMT_OK);
    close(fd);
    assert_int_equal(ft.j_len, 0);
    assert_true(n_rest < n_new);
    /* the state of the open file, with its journal, as a crash would have left it: the
     * durable rewrite in place went through the footer pair (FORMAT.md 11.6) */
    save(fx->path, now, n_new);
    fd = open(fx->path, O_RDONLY);
    assert_int_equal(fmt2_footer_read(fd, n_new, G, &ft), FMT_ERR_NO_TRAILER);
    assert_int_equal(fmt2_footer_find(fd, n_new, G, &ft), FMT_OK);
    close(fd);
    assert_true(ft.paired);
    assert_true(ft.j_len > 0);
    /* put the old slot back */
    uint64_t blk = at / BS, s = fmt2_slot_off(G, blk);
    memcpy(now + s, old + s, fmt2_slot_len(G));
    save(fx->path, now, n_new);
    assert_int_equal(check_consistent(fx, &l, d2, E_SIZE, d2, E_SIZE), E_SIZE);
    assert_true(log_has(&l, "finished an interrupted commit"));
    fx_check_read(fx, O_RDONLY, d2, E_SIZE);
    /* the same, on a read-only mount: read from the journal, nothing written */
    save(fx->path, now, n_new);
    check_read_only(fx, d2);
    /* and cut: the footer gone, the old slot is what the walk finds */
    for (uint64_t cut = 1; cut < 200; cut += 37) {
        save(fx->path, now, n_new - cut);
        check_consistent(fx, &l, d, E_SIZE, d2, E_SIZE);
    }
    free(now);
    free(old);
    free(d2);
    free(d);
    logged_free(&l);
    fx_free(fx);
}

static void chk_quiet(void *ctx, const char *line) { (*(int *)ctx)++; }

/* fsck's checker on a clean version 2 file: nothing to find, nothing to write. FAILS at the
 * time of writing: fs/chk.c checks every own file by the version 1 rules (see the report of
 * the commit that added this test). */
static void test_chk_clean_v2(void **state)
{
    fixture *fx = fx_new(BS, TAG);
    uint8_t *d = e2e_write(fx);
    size_t n1;
    uint8_t *before = fx_slurp(fx->path, &n1);
    for (int mode = CHK_CHECK; mode <= CHK_PREEN; mode++) {
        chk_result r;
        int lines = 0, fd = open(fx->path, mode == CHK_CHECK ? O_RDONLY : O_RDWR);
        assert_int_equal(chk_file(fd, NULL, (chk_mode)mode, 0, chk_quiet, &lines, &r), 0);
        close(fd);
        assert_int_equal(r.kind, CHK_OWN);
        assert_int_equal(r.found, 0);
        assert_int_equal(r.fixed, 0);
        assert_int_equal(lines, 0);
        assert_unchanged(fx->path, before, n1);
    }
    free(before);
    free(d);
    fx_free(fx);
}

/* The footer at rest never trusts a block memory would rewrite without a synced journal
 * (FORMAT.md 11.1 step 6.7): a commit that syncs only because its journal holds a promised
 * block, and settles (a journal over bs / 2), keeps the unpromised last block fresh. */
static void test_ff_settle_fresh(void **state)
{
    fixture *fx = fx_new(BS, TAG);
    uint8_t *d = make_data(3 * BS + 100, 1, 91);   /* incompressible: a large journal */
    ff_file *f;
    fmt2_footer ft;
    int fd = open(fx->path, O_RDWR);
    assert_int_equal(ff_create(fx->env, fd, "t", &f), 0);
    assert_int_equal(ff_write(f, d, 3 * BS, 0), 0);
    assert_int_equal(ff_flush(f, 1), 0);           /* fsync: blocks 0-2 promised */
    assert_int_equal(ff_write(f, d + 3 * BS, 50, 3 * BS), 0);
    assert_int_equal(ff_flush(f, 0), 0);           /* close: block 3 fresh */
    assert_int_equal(fmt2_footer_read(fd, path_len(fx->path, NULL), G, &ft), FMT_OK);
    assert_int_equal(ft.n_blocks, 4);
    assert_int_equal(ft.fresh, 3);
    /* block 1 (promised) rewritten whole and block 3 grown: the journal is synced, then
     * settled; block 3 stays one the next commit rewrites without a sync */
    d[BS + 7] ^= 0xff;
    assert_int_equal(ff_write(f, d + BS, BS, BS), 0);
    assert_int_equal(ff_write(f, d + 3 * BS + 50, 50, 3 * BS + 50), 0);
    assert_int_equal(ff_flush(f, 0), 0);
    assert_int_equal(fmt2_footer_read(fd, path_len(fx->path, NULL), G, &ft), FMT_OK);
    assert_int_equal(ft.j_len, 0);
    assert_int_equal(ft.fresh, 3);
    assert_int_equal(ff_release(f), 0);
    fx_check_read(fx, O_RDONLY, d, 3 * BS + 100);
    free(d);
    fx_free(fx);
    (void)state;
}

/* ---- a file whose marker a power loss took (fmt2_lost_marker) ---- */

/* What fmt2_lost_marker makes of a file of zeros holding item (n bytes) at `at`, the file
 * ending after keep of them (a torn write), then len_pad more zero bytes. */
static uint32_t lost_with(const uint8_t *item, size_t n, uint64_t at, size_t keep,
                          uint64_t len_pad)
{
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    uint8_t head[FMT_MARKER_LEN] = {0};
    assert_true(keep <= n);
    assert_int_equal(ftruncate(fd, (off_t)(at + keep + len_pad)), 0);
    assert_int_equal(fmt_pwrite_all(fd, item, keep, at), 0);
    uint32_t version = 0;
    uint32_t bs = fmt2_lost_marker(fd, head, file_len(fd), BS, &version);
    assert_int_equal(version, bs ? FMT_VERSION : 0);     /* 64 KiB: one slot spacing */
    close(fd);
    unlink(path);
    return bs;
}

static void test_lost_marker(void **state)
{
    jcase j;
    jcase_new(&j);
    size_t len = fmt2_journal_len(j.e, 3);
    uint8_t *jb = malloc(len), ft[FMT2_FOOTER_LEN];
    fmt2_journal_encode(j.e, 3, 9, jb);
    fmt2_footer f = {10, 1, 100, 0, 0, 3, 0, 0};
    fmt2_footer_encode(&f, ft);
    uint64_t s1 = fmt2_slot_off(G, 1), s7 = fmt2_slot_off(G, 7);
    /* a footer pair's journal at a slot start, torn at the first sector boundary after it
     * (slot 7 begins 5 bytes before one) */
    assert_int_equal(lost_with(jb, len, s1, 512 - s1 % 512, 0), BS);
    assert_int_equal(lost_with(jb, len, s7, 512 - s7 % 512, 0), BS);
    assert_int_equal(512 - s7 % 512, 5);
    /* a journal at a tail anywhere, torn: its head, whole or down to magic and size */
    assert_int_equal(lost_with(jb, len, 1022, 1536 - 1022, 0), BS);
    assert_int_equal(lost_with(jb, len, 1536 - 10, 10, 0), BS);
    assert_int_equal(lost_with(jb, len, 1536 - 8, 8, 0), BS);
    /* a footer torn the same way */
    assert_int_equal(lost_with(ft, sizeof(ft), 1536 - 40, 40, 0), BS);
    /* the whole journal, wherever the file ends */
    assert_int_equal(lost_with(jb, len, 1022, len, 3), BS);
    /* slot heads: a frame's, a hole run's (BD 4 MiB), five bytes of one at a sector's end;
     * at slot 20 too, when it is among the last slots of the file */
    uint8_t h[FMT2_HOLE_HEAD];
    fmt2_run_head(h, BS, 3);
    assert_int_equal(lost_with(h, sizeof(h), s1, sizeof(h), 0), BS);
    assert_int_equal(lost_with(j.f1, j.l1, s1, 6, 0), BS);
    assert_int_equal(lost_with(h, sizeof(h), s7, 5, 0), BS);
    assert_int_equal(lost_with(h, sizeof(h), s7, 5, 1), 0);
    assert_int_equal(lost_with(h, sizeof(h), fmt2_slot_off(G, 20), sizeof(h), 100), BS);
    /* a hole's end and the padding header that reaches the next slot (the write between two
     * holes), and the same padding ending elsewhere */
    uint8_t end[FMT2_HOLE_TAIL + 8];
    uint32_t zs = fmt2_zero_sum(BS);
    fmt_put32(end, zs), fmt_put32(end + 4, 0), fmt_put32(end + 8, zs);
    fmt_put32(end + 12, FMT_SKIP_PAD), fmt_put32(end + 16, 25);
    uint64_t s13 = fmt2_slot_off(G, 13);
    assert_int_equal(lost_with(end, sizeof(end), s13 - 45, sizeof(end), 0), BS);
    assert_int_equal(lost_with(end, sizeof(end), s13 - 44, sizeof(end), 0), 0);
    /* the end of a hole of 44,672 bytes that is the last block (no padding after it), and
     * the same 12 bytes one byte further on (the checksum is of another length) */
    zs = fmt2_zero_sum(44672);
    fmt_put32(end, zs), fmt_put32(end + 8, zs);
    uint64_t hole_end = fmt2_slot_off(G, 2) + FMT2_HOLE_HEAD + 44672;
    assert_int_equal(lost_with(end, FMT2_HOLE_TAIL, hole_end, FMT2_HOLE_TAIL, 0), BS);
    assert_int_equal(lost_with(end, FMT2_HOLE_TAIL, hole_end + 1, FMT2_HOLE_TAIL, 0), 0);
    /* what is not told from a foreign file: less than magic and size (FORMAT.md 14, item 7);
     * an end off a sector boundary, which no torn write leaves; a head whose flags or entry
     * count are not a journal's */
    assert_int_equal(lost_with(jb, len, 1536 - 7, 7, 0), 0);
    assert_int_equal(lost_with(jb, len, 1536 - 100, 100, 1), 0);
    uint8_t bad[64];
    memcpy(bad, jb, sizeof(bad));
    bad[20] = 1;                       /* flags */
    assert_int_equal(lost_with(bad, sizeof(bad), 1536 - 64, 64, 0), 0);
    memcpy(bad, jb, sizeof(bad));
    fmt_put32(bad + 16, (uint32_t)len); /* entries past the journal's length */
    assert_int_equal(lost_with(bad, sizeof(bad), 1536 - 64, 64, 0), 0);
    /* a foreign file that begins with 59 zero bytes */
    uint8_t *junk = make_data(4096, 1, 77);
    assert_int_equal(lost_with(junk, 4096, FMT_MARKER_LEN, 4096, 4096 - FMT_MARKER_LEN), 0);
    free(junk);
    free(jb);
    jcase_free(&j);
    (void)state;
}

/* ---- page records (version 4) ---- */

/* Three records after a frame's padding header: applied in order, over each other. */
static void test_rec_chain(void **state)
{
    (void)state;
    uint8_t *blk = make_data(BS, 0, 3), *want = malloc(BS), *area = calloc(1, 3 * BS);
    memcpy(want, blk, BS);
    uint8_t *rnd = make_data(5000, 1, 4), *txt = make_data(9000, 0, 5);
    uint32_t bsum = 0x12345678, sum, used = 0;
    used += fmt2_rec_encode(area + used, bsum, 1, 100, txt, 9000, &sum);
    uint32_t first = sum;
    used += fmt2_rec_encode(area + used, sum, 2, 4000, rnd, 5000, &sum);
    assert_true(fmt_get32(area + used - FMT2_REC_OVERHEAD - 5000 + 20) & FMT_RAW_BIT);
    used += fmt2_rec_encode(area + used, sum, 2, BS - 10, txt, 10, &sum);
    memcpy(want + 100, txt, 9000);
    memcpy(want + 4000, rnd, 5000);
    memcpy(want + BS - 10, txt, 10);
    fmt2_rec_state st;
    assert_int_equal(fmt2_rec_apply(area, 3 * BS, bsum, 2, blk, BS, &st), FMT_OK);
    assert_int_equal(st.count, 3);
    assert_int_equal(st.used, used);
    assert_int_equal(st.chain, sum);
    assert_memory_equal(blk, want, BS);
    /* the first record compressed text: it is shorter than its bytes */
    assert_true(fmt_get32(area + 20) < 9000);
    /* a commit whose group the marker does not name yet (cut short): its records do not
     * count, and the chain ends before them */
    assert_int_equal(fmt2_rec_apply(area, 3 * BS, bsum, 1, NULL, BS, &st), FMT_OK);
    assert_int_equal(st.count, 1);
    assert_int_equal(st.chain, first);
    /* groups count modulo 2^31: 1 follows 2^31 - 1 */
    assert_true(fmt2_rec_group_ok(2, 3) && !fmt2_rec_group_ok(3, 2));
    assert_true(fmt2_rec_group_ok(FMT2_REC_GROUP_MASK, 1));
    assert_false(fmt2_rec_group_ok(1, FMT2_REC_GROUP_MASK));
    /* bound to another frame: nothing */
    assert_int_equal(fmt2_rec_apply(area, 3 * BS, bsum + 1, 2, NULL, BS, &st), FMT_OK);
    assert_int_equal(st.count, 0);
    assert_int_equal(st.used, 0);
    assert_int_equal(st.chain, bsum + 1);
    /* a torn second record ends the chain after the first; the third never counts */
    uint32_t r1 = (uint32_t)(FMT2_REC_OVERHEAD + fmt_word_size(fmt_get32(area + 20)));
    area[r1 + 30] ^= 1;
    memcpy(blk, want, BS);
    assert_int_equal(fmt2_rec_apply(area, 3 * BS, bsum, 2, NULL, BS, &st), FMT_OK);
    assert_int_equal(st.count, 1);
    assert_int_equal(st.used, r1);
    assert_int_equal(st.chain, first);
    /* a record cut by the end of what was read does not count */
    area[r1 + 30] ^= 1;
    assert_int_equal(fmt2_rec_apply(area, used - 1, bsum, 2, NULL, BS, &st), FMT_OK);
    assert_int_equal(st.count, 2);
    /* a record that reaches past the block, however well its checksum reads */
    uint8_t bad[64];
    fmt2_rec_encode(bad, bsum, 1, BS - 10, txt, 10, &sum);
    assert_int_equal(fmt2_rec_apply(bad, sizeof(bad), bsum, 1, NULL, BS, &st), FMT_OK);
    assert_int_equal(st.count, 1);
    assert_int_equal(fmt2_rec_apply(bad, sizeof(bad), bsum, 1, NULL, BS - 1, &st), FMT_OK);
    assert_int_equal(st.count, 0);
    /* a whole record whose data do not decode: damage, not the chain's end */
    uint8_t *cz = malloc(FMT2_REC_OVERHEAD + LZ4_compressBound(9000));
    size_t n = fmt2_rec_encode(cz, bsum, 1, 0, txt, 9000, &sum);
    uint32_t d = fmt_word_size(fmt_get32(cz + 20));
    memset(cz + FMT2_REC_HEAD, 0xFF, d);
    fmt_put32(cz + FMT2_REC_HEAD + d, XXH32(cz, FMT2_REC_HEAD + d, 0));
    assert_int_equal(fmt2_rec_apply(cz, n, bsum, 1, blk, BS, &st), FMT_ERR_CORRUPT);
    free(cz);
    free(blk), free(want), free(area), free(rnd), free(txt);
}

/* Records read from a slot on disk; a new write of the same frame kills them. */
static void test_rec_slot(void **state)
{
    (void)state;
    char path[64];
    int fd = tmp_file(path, sizeof(path));
    marker(fd);
    uint8_t *raw = make_data(BS, 0, 9), *comp = malloc(LZ4_compressBound(BS));
    int cl = LZ4_compress_default((const char *)raw, (char *)comp, BS, LZ4_compressBound(BS));
    uint8_t *fr = malloc(BS + FMT2_FRAME_OVERHEAD);
    size_t flen = fmt2_frame_encode(fr, BS, raw, BS, comp, (uint32_t)cl);
    uint64_t end = fmt2_slot_off(G, 0) + flen;
    for (uint32_t i = 0; i < 2; i++)
        assert_int_equal(fmt2_write_slot(fd, G, i, fr, (uint32_t)flen, BS, 0,
                                         fmt2_slot_off(G, i + 1), NULL), 0);
    uint32_t bsum = fmt_get32(fr + flen - FMT2_FRAME_TRAIL), sum;
    fmt2_rec_state st;
    uint8_t *dst = malloc(BS);
    assert_int_equal(fmt2_rec_load(fd, end, UINT64_MAX, NULL, 0, bsum, 1, NULL, BS, &st), FMT_OK);
    assert_int_equal(st.room, fmt2_slot_len(G) - flen - 8);
    assert_int_equal(st.count, 0);
    uint8_t rec[128];
    size_t n = fmt2_rec_encode(rec, bsum, 1, 7, (const uint8_t *)"changed", 7, &sum);
    assert_int_equal(fmt_pwrite_all(fd, rec, n, end + 8), 0);
    n = fmt2_rec_encode(rec, sum, 1, 9, (const uint8_t *)"again", 5, &sum);
    /* not right behind the first: not part of the chain */
    assert_int_equal(fmt_pwrite_all(fd, rec, n, end + 8 + 40), 0);
    memcpy(dst, raw, BS);
    assert_int_equal(fmt2_rec_load(fd, end, UINT64_MAX, NULL, 0, bsum, 1, dst, BS, &st), FMT_OK);
    assert_int_equal(st.count, 1);
    assert_memory_equal(dst + 7, "changed", 7);
    assert_memory_equal(dst + 14, raw + 14, BS - 14);
    /* the slot written again with the same frame: its records are gone */
    assert_int_equal(fmt2_write_slot(fd, G, 0, fr, (uint32_t)flen, BS, 0,
                                     fmt2_slot_off(G, 1), NULL), 0);
    assert_int_equal(fmt2_rec_load(fd, end, UINT64_MAX, NULL, 0, bsum, 1, NULL, BS, &st), FMT_OK);
    assert_int_equal(st.count, 0);
    free(raw), free(comp), free(fr), free(dst);
    close(fd);
    unlink(path);
}

/* A walk that repairs a file ending with a last slot padded to the next slot: records there
 * of a group the marker names keep the footer behind the padding (tail = slot_off(n));
 * records of a later group, which count for nobody, do not (FORMAT.md 10.1, 11.7). */
static void test_rec_walk_keeps_last(void **state)
{
    (void)state;
    uint8_t *raw = make_data(BS, 0, 9), *comp = malloc(LZ4_compressBound(BS));
    int cl = LZ4_compress_default((const char *)raw, (char *)comp, BS, LZ4_compressBound(BS));
    uint8_t *fr = malloc(BS + FMT2_FRAME_OVERHEAD);
    size_t flen = fmt2_frame_encode(fr, BS, raw, BS, comp, (uint32_t)cl);
    uint32_t bsum = fmt_get32(fr + flen - FMT2_FRAME_TRAIL), sum;
    for (uint32_t group = 1; group <= 2; group++) {
        char path[64];
        int fd = tmp_file(path, sizeof(path));
        uint8_t m[FMT_MARKER_LEN], uuid[16] = {1, 2, 3};
        fmt2_marker_encode(FMT_VERSION_4, BS, fmt2_rec_flags(1, 1), uuid, m);
        assert_int_equal(fmt_pwrite_all(fd, m, sizeof(m), 0), 0);
        for (uint32_t i = 0; i < 2; i++)      /* the last padded to where a third would go */
            assert_int_equal(fmt2_write_slot(fd, G, i, fr, (uint32_t)flen, BS, 0,
                                             fmt2_slot_off(G, i + 1), NULL), 0);
        uint64_t end = fmt2_slot_off(G, 1) + flen;
        uint8_t rec[128];
        size_t n = fmt2_rec_encode(rec, bsum, group, 7, (const uint8_t *)"changed", 7, &sum);
        assert_int_equal(fmt_pwrite_all(fd, rec, n, end + 8), 0);
        fmt2_recovery r;
        assert_int_equal(fmt2_recover(fd, file_len(fd), G, 1, 0, 1, &r), FMT_OK);
        assert_int_equal(r.ft.n_blocks, 2);
        assert_int_equal(r.ft.tail, group == 1 ? fmt2_slot_off(G, 2) : end);
        fmt2_recovery_free(&r);
        fmt2_rec_state st;
        assert_int_equal(fmt2_rec_load(fd, end, UINT64_MAX, NULL, 0, bsum, 1, NULL, BS, &st), FMT_OK);
        assert_int_equal(st.count, group == 1 ? 1 : 0);
        close(fd);
        unlink(path);
    }
    free(raw), free(comp), free(fr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_roundtrip),
        cmocka_unit_test(test_frame_wrap),
        cmocka_unit_test(test_frame_rejections),
        cmocka_unit_test(test_footer),
        cmocka_unit_test(test_journal),
        cmocka_unit_test(test_journal_iov),
        cmocka_unit_test(test_pwritev_many),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_scan_file_decodes),
        cmocka_unit_test(test_scan_missing_padding),
        cmocka_unit_test(test_scan_torn_content_sum),
        cmocka_unit_test(test_fresh_padding_lost),
        cmocka_unit_test(test_damaged_journal_walks),
        cmocka_unit_test(test_scan_bad_blocks),
        cmocka_unit_test(test_recover_lost_punch),
        cmocka_unit_test(test_holes_sparse),
        cmocka_unit_test(test_hole_runs),
        cmocka_unit_test(test_rewrite_slot_footer),
        cmocka_unit_test(test_hole_runs_damaged),
        cmocka_unit_test(test_pair_both_journals),
        cmocka_unit_test(test_pair_newer_lost),
        cmocka_unit_test(test_pair_older_gone),
        cmocka_unit_test(test_pair_unusable),
        cmocka_unit_test(test_pair_no_journal),
        cmocka_unit_test(test_pair_versions),
        cmocka_unit_test(test_ff_roundtrip),
        cmocka_unit_test(test_page_slots),
        cmocka_unit_test(test_page_frames),
        cmocka_unit_test(test_ro_journal_records),
        cmocka_unit_test(test_ff_small_rewrite),
        cmocka_unit_test(test_ff_torn),
        cmocka_unit_test(test_ff_interrupted_commit),
        cmocka_unit_test(test_chk_clean_v2),
        cmocka_unit_test(test_ff_settle_fresh),
        cmocka_unit_test(test_lost_marker),
        cmocka_unit_test(test_rec_chain),
        cmocka_unit_test(test_rec_slot),
        cmocka_unit_test(test_rec_walk_keeps_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
