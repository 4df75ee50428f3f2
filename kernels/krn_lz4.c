/* Reference LZ4 block compressor, written from the block format's definition
 * (lz4 doc/lz4_Block_format.md) in the shape of an HLS kernel: one fixed-size hash table per
 * call on the stack, no allocation, no globals, every loop bounded by the block length, and
 * the output bounded by the caller's stride. Greedy parsing, as liblz4's level 1 does, so
 * the ratio the emulated card reports is close to what the software path gets. */
#include "krn_lz4.h"

#include <stddef.h>
#include <string.h>

/* Format constants (lz4_Block_format.md, "End of block conditions" and "Sequence"). */
#define KRN_MIN_MATCH 4u        /* shortest match the format can encode */
#define KRN_LAST_LITERALS 5u    /* the last 5 bytes of a block are always literals */
#define KRN_MF_LIMIT 12u        /* the last match starts at least 12 bytes before the end */
#define KRN_MAX_OFFSET 65535u   /* offsets are 2 bytes and 0 is invalid */
#define KRN_RUN_MASK 15u        /* a 4-bit token field of 15 means "length continues" */

/* 2^13 u32 entries (32 KiB) stays in L1 on current x86 cores and is still twice liblz4's
 * table for large blocks, which keeps the ratio at or above level 1's. On the FPGA it maps
 * to one BRAM bank per engine. */
#ifndef KRN_HASH_LOG
#define KRN_HASH_LOG 13u
#endif
#define KRN_HASH_SIZE (1u << KRN_HASH_LOG)

/* After 2^KRN_SKIP_LOG failed probes in a row the search step grows by one byte, so data
 * without matches is skipped over in about sqrt(len) probes instead of len. */
#define KRN_SKIP_LOG 6u

/* Odd 64-bit constant (2^64 / golden ratio): multiplying by it spreads every input bit into
 * the high bits that index the table. */
#define KRN_HASH_MUL 0x9E3779B97F4A7C15ull

typedef struct krn_state {
    uint32_t table[KRN_HASH_SIZE];  /* position in the block last seen for each 5-byte hash */
} krn_state;

/* Little-endian loads through memcpy: no alignment or aliasing assumptions, and the same
 * hashes and match lengths on a big-endian host. */
static inline uint64_t krn_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t krn_load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

/* Hashes the first 5 bytes of v: one byte more than the minimum match, so hash hits are
 * mostly real matches of 5 or more, which costs little ratio and saves failed compares. */
static inline uint32_t krn_hash5(uint64_t v)
{
    return (uint32_t)(((v << 24) * KRN_HASH_MUL) >> (64u - KRN_HASH_LOG));
}

/* Index of the lowest set bit, over 8 gives the number of equal leading bytes. */
static inline uint32_t krn_ctz64(uint64_t x)
{
#if defined(__GNUC__)
    return (uint32_t)__builtin_ctzll(x);
#else
    uint32_t n = 0;
    while (!(x & 1u)) {
        x >>= 1;
        n++;
    }
    return n;
#endif
}

/* Length of the common prefix of a and b, stopping at a_end; b lies before a, so the
 * bound on a bounds both reads. Eight bytes per step: long runs are the common case. */
static inline uint32_t krn_common(const uint8_t *a, const uint8_t *b, const uint8_t *a_end)
{
    const uint8_t *start = a;
    while (a + 8 <= a_end) {
        uint64_t diff = krn_load64(a) ^ krn_load64(b);
        if (diff)
            return (uint32_t)(a - start) + krn_ctz64(diff) / 8u;
        a += 8;
        b += 8;
    }
    while (a < a_end && *a == *b) {
        a++;
        b++;
    }
    return (uint32_t)(a - start);
}

/* Bytes a length needs beyond its 4-bit token field. */
static inline uint32_t krn_ext_size(uint32_t n)
{
    return n >= KRN_RUN_MASK ? (n - KRN_RUN_MASK) / 255u + 1u : 0u;
}

/* Writes the extension bytes of a length whose token field says 15. */
static inline uint8_t *krn_put_ext(uint8_t *op, uint32_t n)
{
    uint32_t rest = n - KRN_RUN_MASK;
    uint32_t full = rest / 255u;
    memset(op, 255, full);
    op += full;
    *op++ = (uint8_t)(rest - full * 255u);
    return op;
}

/* Emits a sequence's literal half (token, length extension, literals) and hands back the
 * token so the match half can be added; the caller has already checked the room. */
static inline uint8_t *krn_put_literals(uint8_t *op, const uint8_t *lit, uint32_t n,
                                        uint8_t **token)
{
    *token = op++;
    if (n >= KRN_RUN_MASK) {
        **token = (uint8_t)(KRN_RUN_MASK << 4);
        op = krn_put_ext(op, n);
    } else {
        **token = (uint8_t)(n << 4);
    }
    memcpy(op, lit, n);
    return op + n;
}

/* Compresses in[0..len) into at most olim bytes of out; returns the length written, or len
 * as soon as it is clear the result cannot fit (that is "does not shrink" to the host).
 * Requires len >= KRN_MF_LIMIT + 1 so the search window below is not empty. */
static uint32_t krn_compress(krn_state *st, const uint8_t *in, uint32_t len, uint8_t *out,
                             uint32_t olim)
{
    const uint32_t search_end = len - KRN_MF_LIMIT;     /* last position a match may start */
    const uint8_t *match_end = in + len - KRN_LAST_LITERALS;
    uint32_t ip = 0, anchor = 0, op = 0;

    memset(st->table, 0, sizeof(st->table));
    st->table[krn_hash5(krn_load64(in))] = 0;
    ip = 1;

    for (;;) {
        uint32_t ref;
        uint32_t probes = 1u << KRN_SKIP_LOG;

        /* Greedy search: the first candidate whose 4 bytes agree is taken. ip only grows, so
         * with the step bounded by the probe count this loop ends within len iterations. */
        for (;;) {
            if (ip > search_end)
                goto last_literals;
            uint64_t v = krn_load64(in + ip);
            uint32_t h = krn_hash5(v);
            ref = st->table[h];
            st->table[h] = ip;
            /* Every table entry is an earlier position (or 0 from the reset), so ref < ip. */
            if (ip - ref <= KRN_MAX_OFFSET && (uint32_t)v == krn_load32(in + ref))
                break;
            ip += probes++ >> KRN_SKIP_LOG;
        }

        /* A match found by hashing may have begun earlier: grow it back over literals. */
        while (ip > anchor && ref > 0 && in[ip - 1] == in[ref - 1]) {
            ip--;
            ref--;
        }
        uint32_t ml = KRN_MIN_MATCH +
                      krn_common(in + ip + KRN_MIN_MATCH, in + ref + KRN_MIN_MATCH, match_end);
        uint32_t lit = ip - anchor;
        uint32_t mcode = ml - KRN_MIN_MATCH;

        /* The sequence plus the shortest possible tail (a token and 5 literals) must fit;
         * 64-bit sums because a 4 GiB block's lengths would wrap. */
        uint64_t need = 1u + (uint64_t)krn_ext_size(lit) + lit + 2u + krn_ext_size(mcode);
        if ((uint64_t)op + need + 1u + KRN_LAST_LITERALS > olim)
            return len;

        uint8_t *token;
        uint8_t *o = krn_put_literals(out + op, in + anchor, lit, &token);
        uint32_t off = ip - ref;
        *o++ = (uint8_t)(off & 0xffu);
        *o++ = (uint8_t)(off >> 8);
        if (mcode >= KRN_RUN_MASK) {
            *token |= (uint8_t)KRN_RUN_MASK;
            o = krn_put_ext(o, mcode);
        } else {
            *token |= (uint8_t)mcode;
        }
        op = (uint32_t)(o - out);

        ip += ml;
        anchor = ip;
        if (ip > search_end)
            break;
        /* The positions inside the match were never hashed; the one just before its end is
         * the likeliest start of the next repeat, and one insert costs little. */
        st->table[krn_hash5(krn_load64(in + ip - 2))] = ip - 2;
    }

last_literals:;
    uint32_t lit = len - anchor;
    if ((uint64_t)op + 1u + krn_ext_size(lit) + lit > olim)
        return len;
    uint8_t *token;
    uint8_t *o = krn_put_literals(out + op, in + anchor, lit, &token);
    return (uint32_t)(o - out);
}

uint32_t krn_lz4_compress_block(const uint8_t *in, uint32_t len, uint8_t *out, uint32_t cap)
{
    /* Short blocks gain nothing worth a sequence's overhead; the card reports them as is. */
    if (len < KRN_MIN_BLOCK || in == NULL || out == NULL)
        return len;
    /* Output of len bytes or more would be stored raw anyway: stop as soon as it gets there,
     * which also keeps every write inside the caller's room. */
    uint32_t olim = cap < len - 1u ? cap : len - 1u;
    krn_state st;
    return krn_compress(&st, in, len, out, olim);
}

void krn_lz4_compress(const uint8_t *in, uint8_t *out, uint32_t *compressed_size,
                      const uint32_t *in_block_size, uint32_t block_size_in_kb,
                      uint32_t input_size)
{
    uint64_t stride = (uint64_t)block_size_in_kb * 1024u;
    if (stride == 0 || input_size == 0)
        return;
    uint64_t blocks = ((uint64_t)input_size + stride - 1u) / stride;
    if (blocks > KRN_PARALLEL_BLOCKS)
        blocks = KRN_PARALLEL_BLOCKS;
    uint32_t cap = stride > UINT32_MAX ? UINT32_MAX : (uint32_t)stride;

    /* On the card the 8 engines run these at once; they share nothing, so order is free. */
    for (uint32_t j = 0; j < (uint32_t)blocks; j++) {
        uint32_t len = in_block_size[j];
        /* A block longer than its stride would overlap the next one's input: never read it,
         * and let the host store it from its own copy. */
        if (len > cap) {
            compressed_size[j] = len;
            continue;
        }
        compressed_size[j] = krn_lz4_compress_block(in + (size_t)j * stride, len,
                                                    out + (size_t)j * stride, cap);
    }
}
