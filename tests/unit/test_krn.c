/* Unit tests of the reference kernel: every output is a well-formed LZ4 block (checked
 * against the format's rules and by the stock decoder), blocks that do not shrink are
 * reported as such, writes stay inside each block's stride, the ratio stays close to
 * liblz4's level 1, and concurrent callers get identical results. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* cmocka hands every test a state pointer that most tests have no use for. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "krn_lz4.h"

#include <glob.h>
#include <lz4.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testdata.h"

#define KIB (1u << 10)
#define MIB (1u << 20)
#define SENTINEL 0xdeadbeefu
#define CANARY 0xa5u


/* Random literals and copies of every length class and of offsets on both sides of 64 KiB:
 * reaches the length extensions, far candidates that must be refused, and matches that run
 * into the end of the block. */
static void fill_mixed(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t s = seed | 1;
    size_t n = 0;
    while (n < len) {
        uint32_t kind = rng_next(&s) % 8;
        size_t run = kind == 0 ? 300 + rng_next(&s) % 3000 : rng_next(&s) % 40;
        for (size_t i = 0; i < run && n < len; i++)
            buf[n++] = (uint8_t)rng_next(&s);
        if (n == 0)
            continue;
        size_t off = 1 + (kind == 1 ? rng_next(&s) % 80000 : rng_next(&s) % 2000);
        if (off > n)
            off = n;
        size_t copy = kind == 2 ? 4 + rng_next(&s) % 5000 : 4 + rng_next(&s) % 30;
        for (size_t i = 0; i < copy && n < len; i++, n++)
            buf[n] = buf[n - off];
    }
}

static void fill_period(uint8_t *buf, size_t len, size_t period, uint64_t seed)
{
    fill_random(buf, period < len ? period : len, seed);
    for (size_t i = period; i < len; i++)
        buf[i] = buf[i - period];
}

static uint8_t *xmalloc(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* Walks the block by the format's rules, which are stricter than what decoders enforce:
 * literal-only last sequence of at least 5 bytes, last match starting 12 or more bytes
 * before the end, offsets 1..65535 within the decoded data, matches of at least 4.
 * Returns NULL when the block is well formed, else what is wrong. */
static const char *check_format(const uint8_t *blk, uint32_t n, uint32_t len)
{
    uint64_t pos = 0;
    uint32_t i = 0;
    for (;;) {
        if (i >= n)
            return "block ends without a last-literals sequence";
        uint8_t token = blk[i++];
        uint64_t lit = token >> 4;
        if (lit == 15) {
            uint8_t b;
            do {
                if (i >= n)
                    return "literal length runs past the end";
                b = blk[i++];
                lit += b;
            } while (b == 255);
        }
        if (lit > n - i)
            return "literals run past the end";
        i += (uint32_t)lit;
        pos += lit;
        if (i == n) {
            if (pos != len)
                return "decoded length differs";
            if (lit < 5 && len >= 5)
                return "fewer than 5 last literals";
            return NULL;
        }
        if (n - i < 2)
            return "offset runs past the end";
        uint32_t off = blk[i] | (uint32_t)blk[i + 1] << 8;
        i += 2;
        if (off == 0 || off > pos)
            return "offset outside the decoded data";
        uint64_t ml = (token & 15u) + 4u;
        if ((token & 15u) == 15) {
            uint8_t b;
            do {
                if (i >= n)
                    return "match length runs past the end";
                b = blk[i++];
                ml += b;
            } while (b == 255);
        }
        if (pos + 12 > len)
            return "a match starts in the last 12 bytes";
        pos += ml;
        if (pos + 5 > len)
            return "a match covers the last 5 bytes";
    }
}

/* One block's result: "store raw" (and nothing more to check) or a block that shrinks,
 * follows the format's rules and decodes to the input. */
static void check_block(const uint8_t *src, uint32_t len, const uint8_t *blk, uint32_t n)
{
    if (n >= len)
        return;
    const char *why = check_format(blk, n, len);
    if (why)
        fail_msg("malformed block (%u -> %u bytes): %s", len, n, why);
    uint8_t *back = xmalloc(len);
    int got = LZ4_decompress_safe((const char *)blk, (char *)back, (int)n, (int)len);
    assert_int_equal(got, (int)len);
    assert_memory_equal(back, src, len);
    free(back);
}

/* One-block run through the xilLz4Compress-shaped entry, with the stride exactly the
 * block's size rounded up to KiB; returns the reported size. */
static uint32_t run_one(const uint8_t *src, uint32_t len, uint8_t **out_p)
{
    uint32_t kb = (len + KIB - 1) / KIB;
    if (kb == 0)
        kb = 1;
    uint8_t *out = xmalloc((size_t)kb * KIB + 64);
    memset(out, CANARY, (size_t)kb * KIB + 64);
    uint32_t sizes[KRN_PARALLEL_BLOCKS], in_sizes[KRN_PARALLEL_BLOCKS] = {len};
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++)
        sizes[j] = SENTINEL;
    krn_lz4_compress(src, out, sizes, in_sizes, kb, len);
    for (unsigned j = 1; j < KRN_PARALLEL_BLOCKS; j++)
        assert_int_equal(sizes[j], SENTINEL);
    for (size_t i = (size_t)kb * KIB; i < (size_t)kb * KIB + 64; i++)
        assert_int_equal(out[i], CANARY);
    check_block(src, len, out, sizes[0]);
    *out_p = out;
    return sizes[0];
}

static void test_empty_run(void **state)
{
    uint8_t in[16] = {0}, out[2 * KIB];
    uint32_t sizes[KRN_PARALLEL_BLOCKS], in_sizes[KRN_PARALLEL_BLOCKS] = {0};
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++)
        sizes[j] = SENTINEL;
    memset(out, CANARY, sizeof(out));
    krn_lz4_compress(in, out, sizes, in_sizes, 1, 0);
    krn_lz4_compress(in, out, sizes, in_sizes, 0, 16);    /* no stride: nothing to do */
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++)
        assert_int_equal(sizes[j], SENTINEL);
    for (size_t i = 0; i < sizeof(out); i++)
        assert_int_equal(out[i], CANARY);
    assert_int_equal(krn_lz4_compress_block(in, 0, out, sizeof(out)), 0);
}

static void test_short_blocks_are_their_own_size(void **state)
{
    static const uint32_t lens[] = {1, 2, 12, 13, 100, KRN_MIN_BLOCK - 1};
    uint8_t zeros[KRN_MIN_BLOCK] = {0};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint8_t *out;
        assert_int_equal(run_one(zeros, lens[i], &out), lens[i]);
        free(out);
        uint8_t blk[KRN_MIN_BLOCK];
        assert_int_equal(krn_lz4_compress_block(zeros, lens[i], blk, sizeof(blk)), lens[i]);
    }
}

static void test_min_block(void **state)
{
    uint8_t src[KRN_MIN_BLOCK], *out;
    memset(src, 0, sizeof(src));
    uint32_t n = run_one(src, KRN_MIN_BLOCK, &out);
    assert_true(n < KRN_MIN_BLOCK / 4);
    free(out);

    fill_text(src, sizeof(src), 1);
    n = run_one(src, KRN_MIN_BLOCK, &out);
    assert_true(n < KRN_MIN_BLOCK);
    free(out);

    fill_random(src, sizeof(src), 2);
    assert_true(run_one(src, KRN_MIN_BLOCK, &out) >= KRN_MIN_BLOCK);
    free(out);
}

static void test_zeros(void **state)
{
    uint8_t *src = calloc(1, 4 * MIB), *out;
    assert_non_null(src);
    assert_true(run_one(src, MIB, &out) < MIB / 200);
    free(out);
    assert_true(run_one(src, 4 * MIB, &out) < 4 * MIB / 200);
    free(out);
    free(src);
}

static void test_random_does_not_shrink(void **state)
{
    static const uint32_t lens[] = {KRN_MIN_BLOCK, 1000, 64 * KIB, MIB, 4 * MIB};
    uint8_t *src = xmalloc(4 * MIB);
    fill_random(src, 4 * MIB, 3);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint8_t *out;
        assert_true(run_one(src, lens[i], &out) >= lens[i]);
        free(out);
    }
    free(src);
}

/* Exactly one block of each size the filesystem formats with but 256K, which 1M covers. */
static void test_one_block(void **state)
{
    static const uint32_t lens[] = {64 * KIB, MIB, 4 * MIB};
    uint8_t *src = xmalloc(4 * MIB);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint8_t *out;
        fill_text(src, lens[i], i + 10);
        assert_true(run_one(src, lens[i], &out) < lens[i] / 2);
        free(out);
        fill_mixed(src, lens[i], i + 20);
        assert_true(run_one(src, lens[i], &out) < lens[i]);
        free(out);
    }
    free(src);
}

static void test_periods(void **state)
{
    static const size_t periods[] = {1, 3, 7, 1000, 65535, 65536};
    uint8_t *src = xmalloc(MIB);
    for (size_t i = 0; i < sizeof(periods) / sizeof(periods[0]); i++) {
        uint8_t *out;
        fill_period(src, MIB, periods[i], i + 30);
        uint32_t n = run_one(src, MIB, &out);
        /* A period is random bytes once, then one long match; past the largest offset
         * (65535) there is nothing to refer to. */
        if (periods[i] <= 65535)
            assert_true(n < periods[i] + MIB / 50);
        else
            assert_true(n >= MIB);
        free(out);
    }
    free(src);
}

/* A full brick: 8 strides of 1 MiB, the last block short, each of a different kind. */
static void test_full_run(void **state)
{
    const uint32_t stride = MIB, last = MIB - 333333;
    const uint32_t input_size = 7 * stride + last;
    uint8_t *in = xmalloc((size_t)8 * stride);
    uint8_t *out = xmalloc((size_t)8 * stride + 4096);
    uint32_t sizes[KRN_PARALLEL_BLOCKS], in_sizes[KRN_PARALLEL_BLOCKS];
    memset(in, 0, (size_t)8 * stride);
    memset(out, CANARY, (size_t)8 * stride + 4096);
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++) {
        uint8_t *b = in + (size_t)j * stride;
        in_sizes[j] = j == 7 ? last : stride;
        sizes[j] = SENTINEL;
        switch (j % 4) {
        case 0: fill_text(b, in_sizes[j], j); break;
        case 1: fill_mixed(b, in_sizes[j], j); break;
        case 2: fill_random(b, in_sizes[j], j); break;
        default: fill_period(b, in_sizes[j], 7 + j, j); break;
        }
    }
    krn_lz4_compress(in, out, sizes, in_sizes, stride / KIB, input_size);
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++) {
        assert_int_not_equal(sizes[j], SENTINEL);
        assert_true(sizes[j] <= stride || sizes[j] == in_sizes[j]);
        if (j % 4 == 2)
            assert_true(sizes[j] >= in_sizes[j]);
        else
            assert_true(sizes[j] < in_sizes[j]);
        check_block(in + (size_t)j * stride, in_sizes[j], out + (size_t)j * stride, sizes[j]);
    }
    for (size_t i = (size_t)8 * stride; i < (size_t)8 * stride + 4096; i++)
        assert_int_equal(out[i], CANARY);
    free(in);
    free(out);
}

/* More input than 8 strides: the run still holds only 8 blocks. */
static void test_run_holds_eight_blocks(void **state)
{
    const uint32_t stride = 4 * KIB;
    uint8_t *in = xmalloc((size_t)10 * stride);
    uint8_t *out = xmalloc((size_t)10 * stride);
    uint32_t sizes[10], in_sizes[10];
    fill_text(in, (size_t)10 * stride, 5);
    for (unsigned j = 0; j < 10; j++) {
        in_sizes[j] = stride;
        sizes[j] = SENTINEL;
    }
    memset(out, CANARY, (size_t)10 * stride);
    krn_lz4_compress(in, out, sizes, in_sizes, stride / KIB, 10 * stride);
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++)
        check_block(in + (size_t)j * stride, stride, out + (size_t)j * stride, sizes[j]);
    assert_int_equal(sizes[8], SENTINEL);
    assert_int_equal(sizes[9], SENTINEL);
    for (size_t i = (size_t)8 * stride; i < (size_t)10 * stride; i++)
        assert_int_equal(out[i], CANARY);
    free(in);
    free(out);
}

/* A block length beyond its stride would read the next block's input: refused as raw. */
static void test_block_longer_than_stride(void **state)
{
    const uint32_t stride = 4 * KIB;
    uint8_t *in = calloc(2, stride), *out = xmalloc(2 * stride);
    assert_non_null(in);
    uint32_t sizes[2] = {SENTINEL, SENTINEL}, in_sizes[2] = {stride + 1, 100};
    memset(out, CANARY, 2 * stride);
    krn_lz4_compress(in, out, sizes, in_sizes, stride / KIB, 2 * stride);
    assert_int_equal(sizes[0], stride + 1);
    assert_int_equal(sizes[1], 100);
    for (size_t i = 0; i < 2 * stride; i++)
        assert_int_equal(out[i], CANARY);
    free(in);
    free(out);
}

/* Random input must not spill past any stride, whether run alone or as a full brick. */
static void test_stride_bound(void **state)
{
    const uint32_t stride = 64 * KIB, tail = 4096;
    uint8_t *in = xmalloc((size_t)8 * stride);
    uint8_t *out = xmalloc((size_t)8 * stride + tail);
    uint32_t sizes[KRN_PARALLEL_BLOCKS], in_sizes[KRN_PARALLEL_BLOCKS];
    fill_random(in, (size_t)8 * stride, 6);
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++)
        in_sizes[j] = stride - j * 1000;

    /* Each block alone in a run, with the canary right after its stride. */
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++) {
        memset(out, CANARY, (size_t)stride + tail);
        sizes[0] = SENTINEL;
        krn_lz4_compress(in + (size_t)j * stride, out, sizes, &in_sizes[j], stride / KIB,
                         in_sizes[j]);
        assert_true(sizes[0] >= in_sizes[j]);
        for (size_t i = stride; i < (size_t)stride + tail; i++)
            assert_int_equal(out[i], CANARY);
    }

    /* The whole brick, with the canary after the last stride. */
    memset(out, CANARY, (size_t)8 * stride + tail);
    krn_lz4_compress(in, out, sizes, in_sizes, stride / KIB, 7 * stride + in_sizes[7]);
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++)
        assert_true(sizes[j] >= in_sizes[j]);
    for (size_t i = (size_t)8 * stride; i < (size_t)8 * stride + tail; i++)
        assert_int_equal(out[i], CANARY);

    /* The single-block call with room beyond the input's length, and with less. */
    static const uint32_t caps[] = {0, 1, 100, 32 * KIB, 64 * KIB - 1, 64 * KIB, 70 * KIB};
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        memset(out, CANARY, (size_t)caps[c] + tail);
        assert_true(krn_lz4_compress_block(in, stride, out, caps[c]) >= stride);
        for (size_t i = caps[c]; i < (size_t)caps[c] + tail; i++)
            assert_int_equal(out[i], CANARY);
    }
    free(in);
    free(out);
}

/* Compressible input with too little room: "does not shrink", and not a byte past cap; with
 * exactly enough room, the same bytes as with plenty. */
static void test_tight_cap(void **state)
{
    static const uint32_t lens[] = {KRN_MIN_BLOCK, 5000, 64 * KIB, MIB};
    uint8_t *src = xmalloc(MIB), *full = xmalloc(MIB), *out = xmalloc(MIB + 64);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint32_t len = lens[i];
        fill_mixed(src, len, i + 40);
        uint32_t n = krn_lz4_compress_block(src, len, full, len);
        assert_true(n < len);
        check_block(src, len, full, n);

        memset(out, CANARY, (size_t)n + 64);
        assert_int_equal(krn_lz4_compress_block(src, len, out, n), n);
        assert_memory_equal(out, full, n);
        for (size_t k = n; k < (size_t)n + 64; k++)
            assert_int_equal(out[k], CANARY);

        for (uint32_t cap = n - 1; cap + 40 > n && cap > 0; cap -= 13) {
            memset(out, CANARY, (size_t)cap + 64);
            assert_true(krn_lz4_compress_block(src, len, out, cap) >= len);
            for (size_t k = cap; k < (size_t)cap + 64; k++)
                assert_int_equal(out[k], CANARY);
        }
    }
    free(src);
    free(full);
    free(out);
}

/* Many lengths and mixtures through the single-block call, each checked. */
static void test_many_shapes(void **state)
{
    uint64_t s = 77;
    uint8_t *src = xmalloc(200 * KIB), *out = xmalloc(200 * KIB);
    for (int round = 0; round < 400; round++) {
        uint32_t len = KRN_MIN_BLOCK + rng_next(&s) % (round < 300 ? 3000 : 200 * KIB - 200);
        switch (rng_next(&s) % 4) {
        case 0: fill_text(src, len, s); break;
        case 1: fill_period(src, len, 1 + rng_next(&s) % 50, s); break;
        default: fill_mixed(src, len, s); break;
        }
        uint32_t n = krn_lz4_compress_block(src, len, out, len);
        check_block(src, len, out, n);
    }
    free(src);
    free(out);
}

/* Concatenates the regular files a glob pattern names, up to max bytes; returns the length. */
static size_t load_files(const char *pattern, uint8_t *buf, size_t max)
{
    glob_t g;
    size_t n = 0;
    if (glob(pattern, 0, NULL, &g) != 0)
        return 0;
    for (size_t i = 0; i < g.gl_pathc && n < max; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        FILE *f = fopen(g.gl_pathv[i], "rb");
        if (!f)
            continue;
        n += fread(buf + n, 1, max - n, f);
        fclose(f);
    }
    globfree(&g);
    return n;
}

/* Sizes against LZ4_compress_default block by block, a block that does not shrink counting
 * as its own length on both sides (that is what gets stored). The whole set must be within
 * 5%; a single block may stray a little further, as two greedy parsers can pick different
 * matches early and pay for it differently. */
static void compare_ratio(const char *what, const uint8_t *src, size_t len, uint32_t bs)
{
    uint8_t *out = xmalloc(bs), *ref = xmalloc((size_t)LZ4_compressBound((int)bs));
    uint64_t sum_krn = 0, sum_lz4 = 0;
    for (size_t off = 0; off + bs <= len; off += bs) {
        uint32_t n = krn_lz4_compress_block(src + off, bs, out, bs);
        check_block(src + off, bs, out, n);
        int r = LZ4_compress_default((const char *)src + off, (char *)ref, (int)bs,
                                     LZ4_compressBound((int)bs));
        assert_true(r > 0);
        uint64_t k = n < bs ? n : bs, l = (uint32_t)r < bs ? (uint32_t)r : bs;
        if (k * 100 > l * 110)
            fail_msg("%s block at %zu of %u: %llu bytes, liblz4 %llu", what, off, bs,
                     (unsigned long long)k, (unsigned long long)l);
        sum_krn += k;
        sum_lz4 += l;
    }
    assert_true(sum_lz4 > 0);
    print_message("%s, %u KiB blocks: %llu bytes, liblz4 %llu (%.4fx)\n", what, bs / KIB,
                  (unsigned long long)sum_krn, (unsigned long long)sum_lz4,
                  (double)sum_krn / (double)sum_lz4);
    if (sum_krn * 100 > sum_lz4 * 105)
        fail_msg("%s: %llu bytes against liblz4's %llu", what, (unsigned long long)sum_krn,
                 (unsigned long long)sum_lz4);
    free(out);
    free(ref);
}

static void test_ratio_text(void **state)
{
    const size_t max = 8 * MIB;
    uint8_t *buf = xmalloc(max);
    fill_text(buf, max, 50);
    compare_ratio("generated text", buf, max, 64 * KIB);
    compare_ratio("generated text", buf, max, MIB);
    fill_mixed(buf, max, 51);
    compare_ratio("generated mixture", buf, max, 64 * KIB);
    compare_ratio("generated mixture", buf, max, MIB);
    size_t n = load_files("/usr/share/doc/*/copyright", buf, max);
    if (n >= MIB) {
        compare_ratio("copyright files", buf, n, 64 * KIB);
        compare_ratio("copyright files", buf, n, MIB);
    }
    free(buf);
}

static void test_ratio_binaries(void **state)
{
    const size_t max = 8 * MIB;
    uint8_t *buf = xmalloc(max);
    size_t n = load_files("/usr/bin/*", buf, max);
    if (n < 4 * MIB) {
        free(buf);
        skip();
        return;   /* cmocka's skip() is not declared noreturn: without this, an optimizing
                     build sees buf used after free on this path (-Werror=use-after-free) */
    }
    compare_ratio("/usr/bin", buf, n, 64 * KIB);
    compare_ratio("/usr/bin", buf, n, MIB);
    compare_ratio("/usr/bin", buf, n, 4 * MIB);
    free(buf);
}

typedef struct {
    const uint8_t *in;         /* the brick every thread compresses */
    const uint32_t *in_sizes;  /* its block lengths */
    uint32_t stride;           /* its stride in bytes */
    uint32_t input_size;       /* its total length */
    uint8_t *out;              /* this thread's output, 8 strides */
    uint32_t sizes[KRN_PARALLEL_BLOCKS];
} thread_arg;

static void *thread_run(void *p)
{
    thread_arg *a = p;
    for (int rep = 0; rep < 3; rep++)
        krn_lz4_compress(a->in, a->out, a->sizes, a->in_sizes, a->stride / KIB,
                         a->input_size);
    return NULL;
}

/* Compute-unit threads share the code and nothing else: same input, same bytes out. */
static void test_threads_agree(void **state)
{
    enum { THREADS = 6 };
    const uint32_t stride = 256 * KIB;
    uint8_t *in = xmalloc((size_t)8 * stride);
    uint32_t in_sizes[KRN_PARALLEL_BLOCKS];
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++) {
        in_sizes[j] = stride - j * 777;
        if (j == 5)
            fill_random(in + (size_t)j * stride, stride, j);
        else if (j % 2)
            fill_text(in + (size_t)j * stride, stride, j);
        else
            fill_mixed(in + (size_t)j * stride, stride, j);
    }
    const uint32_t input_size = 7 * stride + in_sizes[7];
    thread_arg want = {in, in_sizes, stride, input_size, xmalloc((size_t)8 * stride), {0}};
    thread_run(&want);

    pthread_t t[THREADS];
    thread_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = want;
        args[i].out = xmalloc((size_t)8 * stride);
        assert_int_equal(pthread_create(&t[i], NULL, thread_run, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++) {
            assert_int_equal(args[i].sizes[j], want.sizes[j]);
            if (want.sizes[j] < in_sizes[j])
                assert_memory_equal(args[i].out + (size_t)j * stride,
                                    want.out + (size_t)j * stride, want.sizes[j]);
        }
        free(args[i].out);
    }
    for (unsigned j = 0; j < KRN_PARALLEL_BLOCKS; j++)
        check_block(in + (size_t)j * stride, in_sizes[j], want.out + (size_t)j * stride,
                    want.sizes[j]);
    assert_true(want.sizes[5] >= in_sizes[5]);
    free(want.out);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_run),
        cmocka_unit_test(test_short_blocks_are_their_own_size),
        cmocka_unit_test(test_min_block),
        cmocka_unit_test(test_zeros),
        cmocka_unit_test(test_random_does_not_shrink),
        cmocka_unit_test(test_one_block),
        cmocka_unit_test(test_periods),
        cmocka_unit_test(test_full_run),
        cmocka_unit_test(test_run_holds_eight_blocks),
        cmocka_unit_test(test_block_longer_than_stride),
        cmocka_unit_test(test_stride_bound),
        cmocka_unit_test(test_tight_cap),
        cmocka_unit_test(test_many_shapes),
        cmocka_unit_test(test_ratio_text),
        cmocka_unit_test(test_ratio_binaries),
        cmocka_unit_test(test_threads_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
