/* Unit tests of eng_tail, the incremental compressor of a growing block: after every
 * append the block decodes with the stock LZ4 decoder to exactly the input, both checksums
 * are those of the bytes, only the added bytes are compressed, the ratio stays close to a
 * one-shot compression, and an input that is not a continuation starts over. An adopted
 * input (eng_tail_adopt: not compressed) takes extensions whose pieces decode with it as
 * their dictionary and compress as well as after a compression of it, gives no block until
 * a compression from scratch, and then the right one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "eng_tail.h"

#include <errno.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "testdata.h"

/* The block of out decodes to src[0, len), and its checksums are right. */
static void check_block(const eng_tail_out *out, const uint8_t *src, uint32_t len)
{
    assert_int_equal(out->raw_sum, XXH32(src, len, 0));
    assert_int_equal(out->comp_sum, XXH32(out->comp, out->comp_len, 0));
    uint8_t *back = malloc(len + 1);
    assert_non_null(back);
    int n = LZ4_decompress_safe((const char *)out->comp, (char *)back, (int)out->comp_len,
                                (int)len);
    assert_int_equal(n, (int)len);
    assert_memory_equal(back, src, len);
    free(back);
}

/* The piece of a call that added src[from, len): one LZ4 block that decodes to those bytes
 * with src[0, from) before it as its dictionary (or, not smaller, those bytes stored raw). */
static void check_piece(const eng_tail_out *out, const uint8_t *src, uint32_t from, uint32_t len)
{
    assert_non_null(out->piece);
    if (out->piece_len >= len - from)
        return;                        /* stored raw by the caller */
    uint8_t *back = malloc(len);
    memcpy(back, src, from);
    int n = LZ4_decompress_safe_usingDict((const char *)out->piece, (char *)back + from,
                                          (int)out->piece_len, (int)(len - from),
                                          (const char *)back, (int)from);
    assert_int_equal(n, (int)(len - from));
    assert_memory_equal(back + from, src + from, len - from);
    free(back);
}

/* Appends of step(rng) bytes up to cap; each result is checked; returns the last size. */
static uint32_t grow_and_check(uint32_t cap, const uint8_t *src, uint64_t seed, uint32_t max_step)
{
    eng_tail *t = eng_tail_new(cap, 0, 0);
    assert_non_null(t);
    eng_tail_out out;
    uint64_t s = seed | 1;
    uint32_t len = 0, comp_len = 0;
    uint64_t compressed = 0;
    while (len < cap) {
        uint32_t step = 1 + rng_next(&s) % max_step;
        uint32_t next = step > cap - len ? cap : len + step;
        assert_int_equal(eng_tail_compress(t, src, next, &out), 0);
        assert_true(out.reused == len || out.reused == 0);
        check_block(&out, src, next);
        if (out.reused)
            check_piece(&out, src, len, next);
        else
            assert_null(out.piece);
        compressed += next - out.reused;
        len = next;
        comp_len = out.comp_len;
    }
    /* the cost stays linear: about two compressions per byte, not one per append */
    assert_true(compressed <= 4 * (uint64_t)cap + (64u << 10) * 2);
    /* the same input again: nothing to compress, the same block */
    assert_int_equal(eng_tail_compress(t, src, len, &out), 0);
    assert_int_equal(out.reused, len);
    assert_int_equal(out.comp_len, comp_len);
    check_block(&out, src, len);
    eng_tail_free(t);
    return comp_len;
}

static void test_log_lines(void **state)
{
    const uint32_t cap = 256u << 10;
    uint8_t *src = malloc(cap);
    fill_text(src, cap, 7);
    uint32_t inc = grow_and_check(cap, src, 3, 200);
    int once = LZ4_compressBound((int)cap);
    char *one = malloc((size_t)once);
    once = LZ4_compress_default((const char *)src, one, (int)cap, once);
    /* a full block is compressed from scratch once more: one compression's size */
    assert_true(inc <= (uint32_t)once + (uint32_t)once / 100);
    free(one);
    free(src);
}

static void test_mixed_steps(void **state)
{
    const uint32_t cap = 64u << 10;
    uint8_t *src = malloc(cap);
    fill_text(src, cap, 11);
    fill_random(src + 20000, 5000, 5);     /* an incompressible stretch inside */
    for (uint64_t seed = 1; seed < 40; seed++)
        grow_and_check(cap, src, seed, seed < 10 ? 60 : 9000);
    free(src);
}

static void test_incompressible(void **state)
{
    const uint32_t cap = 256u << 10;
    uint8_t *src = malloc(cap);
    fill_random(src, cap, 9);
    uint32_t comp = grow_and_check(cap, src, 5, 4000);
    assert_true(comp >= cap);              /* the caller stores it raw */
    free(src);
}

/* A change before the end, a shorter input, or other bytes: compressed from scratch. */
static void test_not_a_continuation(void **state)
{
    const uint32_t cap = 64u << 10;
    uint8_t *a = malloc(cap), *b = malloc(cap);
    fill_text(a, cap, 1);
    memcpy(b, a, cap);
    b[100] ^= 1;
    eng_tail *t = eng_tail_new(cap, 0, 0);
    eng_tail_out out;
    assert_int_equal(eng_tail_compress(t, a, 5000, &out), 0);
    assert_int_equal(out.reused, 0);
    assert_int_equal(eng_tail_compress(t, b, 6000, &out), 0);
    assert_int_equal(out.reused, 0);
    check_block(&out, b, 6000);
    assert_int_equal(eng_tail_compress(t, b, 3000, &out), 0);
    assert_int_equal(out.reused, 0);
    check_block(&out, b, 3000);
    assert_int_equal(eng_tail_compress(t, b, 3100, &out), 0);
    assert_int_equal(out.reused, 3000);
    check_block(&out, b, 3100);
    uint32_t len;
    assert_ptr_not_equal(eng_tail_input(t, &len), NULL);
    assert_int_equal(len, 3100);
    eng_tail_reset(t);
    assert_null(eng_tail_input(t, &len));
    assert_int_equal(eng_tail_compress(t, b, 3200, &out), 0);
    assert_int_equal(out.reused, 0);
    check_block(&out, b, 3200);
    assert_int_equal(eng_tail_compress(t, b, 0, &out), -EINVAL);
    assert_int_equal(eng_tail_compress(t, b, cap + 1, &out), -EINVAL);
    eng_tail_free(t);
    eng_tail_free(NULL);
    assert_null(eng_tail_new(0, 0, 0));
    assert_null(eng_tail_new(cap, 65, 0));
    assert_null(eng_tail_new(cap, 0, 65));
    free(a);
    free(b);
}

/* The room asked before and after the block: writing it, round after round of appends,
 * leaves every block the state makes, and its continuation, right. */
static void test_room_around_block(void **state)
{
    const uint32_t cap = 256u << 10;
    uint8_t *src = malloc(cap);
    fill_text(src, cap, 7);
    eng_tail *t = eng_tail_new(cap, 19, 12);
    eng_tail_out out;
    uint32_t len = 0, kept = 0;
    for (int round = 0; round < 200 && len < cap; round++) {
        len += 37 + (uint32_t)round % 900;
        len = len > cap ? cap : len;
        assert_int_equal(eng_tail_compress(t, src, len, &out), 0);
        check_block(&out, src, len);
        memset(out.comp - 19, 0xEE, 19);           /* a frame's header and end, as a */
        memset(out.comp + out.comp_len, 0xDD, 12); /* caller writes them there */
        kept += out.reused > 0;
    }
    assert_true(kept > 100);                       /* appends did continue the block */
    eng_tail_free(t);
    free(src);
}

/* eng_tail_extend: the caller vouches for the input, nothing is compared, no fresh
 * compression is made however far it grows; each piece decodes with what came before it,
 * and the whole block and its checksums stay right. Bad calls are refused. */
static void test_extend(void **state)
{
    (void)state;
    const uint32_t cap = 256u << 10;
    uint8_t *src = malloc(cap);
    fill_text(src, cap, 9);
    eng_tail *t = eng_tail_new(cap, 0, 0);
    assert_non_null(t);
    eng_tail_out out;
    assert_int_equal(eng_tail_extend(t, src, 10, &out), -EINVAL);     /* no input yet */
    assert_int_equal(eng_tail_compress(t, src, 1000, &out), 0);
    uint64_t s = 5;
    uint32_t len = 1000;
    while (len < cap - 300) {
        uint32_t step = 1 + rng_next(&s) % 300;
        assert_int_equal(eng_tail_extend(t, src + len, step, &out), 0);
        assert_int_equal(out.reused, len);
        check_piece(&out, src, len, len + step);
        len += step;
        check_block(&out, src, len);
    }
    assert_int_equal(eng_tail_extend(t, src, cap, &out), -EINVAL);    /* past cap */
    assert_int_equal(eng_tail_extend(t, src, 0, &out), -EINVAL);
    uint32_t in_len;
    assert_ptr_not_equal(eng_tail_input(t, &in_len), NULL);
    assert_int_equal(in_len, len);
    eng_tail_free(t);
    free(src);
}

/* The same extensions after the input was compressed and after it was adopted: the pieces
 * decode, the sums are those of the bytes, the pieces are as small (the adopted input's
 * last 64 KiB are their dictionary), and no block is claimed until one is made. */
static uint64_t extend_all(eng_tail *t, const uint8_t *src, uint32_t len, uint32_t cap,
                           uint32_t *first)
{
    eng_tail_out out;
    uint64_t s = 11, pieces = 0;
    *first = 0;
    while (len < cap - 200) {
        uint32_t step = 20 + rng_next(&s) % 180;
        assert_int_equal(eng_tail_extend(t, src + len, step, &out), 0);
        check_piece(&out, src, len, len + step);
        len += step;
        assert_int_equal(out.raw_sum, XXH32(src, len, 0));
        if (out.comp)
            check_block(&out, src, len);
        pieces += out.piece_len;
        *first = *first ? *first : out.piece_len;
    }
    return pieces;
}

static void test_adopt(void **state)
{
    (void)state;
    const uint32_t cap = 512u << 10, start = 300u << 10;
    uint8_t *src = malloc(cap);
    fill_text(src, cap, 4);
    eng_tail *a = eng_tail_new(cap, 0, 0), *b = eng_tail_new(cap, 0, 0);
    assert_non_null(a);
    assert_non_null(b);
    eng_tail_out out;
    assert_int_equal(eng_tail_adopt(b, src, 0), -EINVAL);
    assert_int_equal(eng_tail_adopt(b, src, cap + 1), -EINVAL);
    assert_int_equal(eng_tail_compress(a, src, start, &out), 0);
    assert_int_equal(eng_tail_adopt(b, src, start), 0);
    uint32_t in_len;
    assert_ptr_not_equal(eng_tail_input(b, &in_len), NULL);
    assert_int_equal(in_len, start);
    uint32_t fa, fb;
    uint64_t pa = extend_all(a, src, start, cap, &fa), pb = extend_all(b, src, start, cap, &fb);
    assert_true(pb <= pa + pa / 50);
    assert_true(fb <= fa + 8);                             /* matches into the input */
    assert_int_equal(eng_tail_extend(b, src + cap - 200, 10, &out), 0);
    assert_null(out.comp);                                 /* adopted: no block yet */
    assert_int_equal(out.comp_len, 0);
    eng_tail_input(b, &in_len);
    uint8_t *now = malloc(in_len);
    memcpy(now, eng_tail_input(b, &in_len), in_len);
    assert_int_equal(eng_tail_compress(b, now, in_len, &out), 0);  /* made from scratch */
    assert_int_equal(out.reused, 0);
    check_block(&out, now, in_len);
    eng_tail_free(a);
    eng_tail_free(b);
    free(now);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_lines),
        cmocka_unit_test(test_extend),
        cmocka_unit_test(test_adopt),
        cmocka_unit_test(test_room_around_block),
        cmocka_unit_test(test_mixed_steps),
        cmocka_unit_test(test_incompressible),
        cmocka_unit_test(test_not_a_continuation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
