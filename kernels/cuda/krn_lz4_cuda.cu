/* The GPU LZ4 block compressor (see krn_lz4_cuda.h for the contract).
 *
 * A GPU needs thousands of independent work items, and a brick holds tens of blocks, so each
 * block is cut into sub-blocks of KRN_CUDA_SUB bytes and the work runs in four launches:
 *
 *   parse   one warp per sub-block finds greedy matches. The 32 lanes hash 32 consecutive
 *           positions at once against a per-warp hash table in shared memory, the first lane
 *           with a verified 4-byte match wins, is moved back over bytes that also match
 *           (liblz4's catch-up), and the warp extends it 128 bytes a step. Positions past
 *           the hit are not inserted (a re-scan would find itself there, as lanes of one
 *           step cannot see each other). Before parsing, the warp loads the table with the
 *           KRN_HISTORY bytes before its sub-block, so matches reach back across sub-block
 *           edges as liblz4's do (the whole block is one LZ4 block with a 64 KiB window;
 *           only a match may not run past its sub-block's end). Sequences go to scratch as (literals, match, offset).
 *   plan    one thread per block walks its sub-blocks in order: the literals after the last
 *           match of one sub-block run on into the next, so each sub-block's first literal
 *           run and output offset are known only here. It sizes the block, and a block that
 *           does not shrink is reported with its own length and never encoded.
 *   encode  one warp per sub-block writes its sequences, 32 at once (a warp scan places
 *           them), copying literals with the whole warp; the last sub-block of a block also
 *           writes the closing literal-only sequence.
 *   check   (krn_cuda_check) one warp per sub-block checks the sequences the encoder wrote
 *           for it against the input, the last also the closing literal run, while other
 *           CTAs of the same launch take XXH32 of each input and output; then one thread
 *           per block checks that the shares tile the block.
 *   drain   (krn_cuda_drain) copies the compressed bytes alone, 16 bytes a thread, to the
 *           host's buffers, so the way back carries a third of the input, not all of it.
 *
 * The hash table holds the low 16 bits of a position: a position 64 KiB or more back is
 * either re-read as a nearer one or rejected by the byte check, and every match is verified
 * byte for byte, so a stale or colliding entry costs ratio, never correctness. The LZ4 end
 * rules hold: no match starts in the last 12 bytes of a block, the last 5 are literals. */
#include "krn_lz4_cuda.h"

/* Ratio against speed, on the first 256 MiB of the Linux source tar (docs/BENCHMARKS.md):
 * 4096 entries (liblz4 level 1's table) with 48 KiB of history came within 5% of liblz4's
 * ratio at 1 MiB blocks (3.10 against 3.24; 32 KiB: 3.07); 8192 entries with 32 KiB
 * (3.11) need two warps' tables per 32 KiB CTA and ran 30% slower on an H200. */
#ifndef KRN_HLOG
#define KRN_HLOG 12u                   /* table entries: 1 << KRN_HLOG, 16 bits each */
#endif
#ifndef KRN_HISTORY
#define KRN_HISTORY 49152u             /* bytes before a sub-block loaded into its table */
#endif
#define KRN_WARPS (KRN_HLOG > 12u ? 2u : 4u)    /* warps per CTA: 32 KiB of tables */
#define KRN_HSIZE (1u << KRN_HLOG)
#define KRN_MINMATCH 4u
#define KRN_MFLIMIT 12u                /* a match starts at least this far before the end */
#define KRN_LASTLIT 5u                 /* the last bytes of a block are literals */
#define KRN_SEQ_CAP (KRN_CUDA_SUB / KRN_MINMATCH + 1u)
#define KRN_FULL 0xFFFFFFFFu

typedef struct {
    uint32_t n_seq;                    /* sequences found (each ends in a match) */
    uint32_t lit0;                     /* literals before the first match, from the start */
    uint32_t last_end;                 /* end of the last match, block-relative */
    uint32_t body;                     /* encoded bytes of the sequences, less the first one's
                                          literals and their length bytes (plan adds them) */
    uint32_t off;                      /* plan: where the first sequence is written */
    uint32_t anchor;                   /* plan: where the first sequence's literals begin */
    uint32_t pad[2];
} krn_sub;

typedef struct {
    uint32_t raw;                      /* did not shrink (or bad size): nothing is written */
    uint32_t fin_off;                  /* where the closing literal run is written */
    uint32_t fin_anchor;               /* where the closing literal run begins in the input */
    uint32_t fin_ok;                   /* check: the closing run decodes to the input's end */
} krn_blk;

/* ---- scratch layout ---- */

static __host__ __device__ uint32_t krn_subs_per_block(uint32_t stride)
{
    return (stride + KRN_CUDA_SUB - 1) / KRN_CUDA_SUB;
}

typedef struct {
    uint2 *seqs;
    krn_sub *subs;
    krn_blk *blks;
    uint2 *walks;                      /* check, per sub-block: (share decodes, input end) */
} krn_scratch;

static size_t krn_align(size_t n) { return (n + 255) & ~(size_t)255; }

static krn_scratch krn_carve(void *base, uint32_t max_blocks, uint32_t stride)
{
    size_t n_sub = (size_t)max_blocks * krn_subs_per_block(stride);
    uint8_t *p = (uint8_t *)base;
    krn_scratch s;
    s.seqs = (uint2 *)p;
    p += krn_align(n_sub * KRN_SEQ_CAP * sizeof(uint2));
    s.subs = (krn_sub *)p;
    p += krn_align(n_sub * sizeof(krn_sub));
    s.blks = (krn_blk *)p;
    p += krn_align((size_t)max_blocks * sizeof(krn_blk));
    s.walks = (uint2 *)p;
    return s;
}

extern "C" size_t krn_cuda_scratch_bytes(uint32_t max_blocks, uint32_t stride)
{
    size_t n_sub = (size_t)max_blocks * krn_subs_per_block(stride);
    return krn_align(n_sub * KRN_SEQ_CAP * sizeof(uint2)) + krn_align(n_sub * sizeof(krn_sub)) +
           krn_align((size_t)max_blocks * sizeof(krn_blk)) + krn_align(n_sub * sizeof(uint2));
}

/* ---- helpers ---- */

/* Four bytes at p, from two aligned words (the buffer is padded for the second). */
static __device__ __forceinline__ uint32_t krn_rd32(const uint8_t *b, uint32_t p)
{
    const uint32_t *w = (const uint32_t *)(b + (p & ~3u));
    return __funnelshift_r(__ldg(w), __ldg(w + 1), (p & 3u) * 8u);
}

static __device__ __forceinline__ uint32_t krn_hash(uint32_t v)
{
    return (v * 2654435761u) >> (32u - KRN_HLOG);
}

/* Extra length bytes of a literal run of l bytes, and of a match of m bytes. */
static __host__ __device__ __forceinline__ uint32_t krn_lext(uint32_t l)
{
    return l >= 15u ? (l - 15u) / 255u + 1u : 0u;
}

static __host__ __device__ __forceinline__ uint32_t krn_mext(uint32_t m)
{
    return m - KRN_MINMATCH >= 15u ? (m - KRN_MINMATCH - 15u) / 255u + 1u : 0u;
}

/* Writes the token's overflow: len - 15 as 255s and a final byte. Returns the next byte. */
static __device__ uint8_t *krn_put_len(uint8_t *o, uint32_t len)
{
    for (len -= 15u; len >= 255u; len -= 255u)
        *o++ = 255;
    *o++ = (uint8_t)len;
    return o;
}

/* ---- parse: one warp per sub-block ---- */

/* Loads the table with the positions before s that a liblz4 pass would have seen. */
static __device__ void krn_warm(uint16_t *tab, const uint8_t *b, uint32_t s, uint32_t lane)
{
    for (uint32_t i = lane; i < KRN_HSIZE; i += 32)
        tab[i] = 0;
    __syncwarp();
    for (uint32_t base = s > KRN_HISTORY ? s - KRN_HISTORY : 0; base < s; base += 32) {
        uint32_t q = base + lane;
        if (q < s)
            tab[krn_hash(krn_rd32(b, q))] = (uint16_t)q;
        __syncwarp();
    }
}

/* Length of the match at mp against mc, known to be at least ml, never past maxl. */
static __device__ uint32_t krn_extend(const uint8_t *b, uint32_t mp, uint32_t mc, uint32_t maxl,
                                      uint32_t ml, uint32_t lane)
{
    for (;;) {
        uint32_t i = ml + 4u * lane, same = 0;
        if (i < maxl) {
            uint32_t d = krn_rd32(b, mp + i) ^ krn_rd32(b, mc + i);
            same = d ? (uint32_t)__ffs((int)d) - 1u : 32u;
            same = min(same >> 3, maxl - i);
        }
        uint32_t short_lanes = __ballot_sync(KRN_FULL, same < 4u);
        if (short_lanes == 0) {
            ml += 128u;
            continue;
        }
        uint32_t f = (uint32_t)__ffs((int)short_lanes) - 1u;
        return ml + 4u * f + __shfl_sync(KRN_FULL, same, (int)f);
    }
}

__global__ void __launch_bounds__(KRN_WARPS * 32)
krn_parse(const uint8_t *in, const uint32_t *in_sizes, uint32_t n_blocks, uint32_t stride,
          krn_scratch sc)
{
    __shared__ uint16_t tabs[KRN_WARPS][KRN_HSIZE];
    uint32_t lane = threadIdx.x & 31u, nspb = krn_subs_per_block(stride);
    uint32_t gw = blockIdx.x * KRN_WARPS + (threadIdx.x >> 5);
    if (gw >= n_blocks * nspb)
        return;
    uint32_t j = gw / nspb, len = in_sizes[j], s = (gw % nspb) * KRN_CUDA_SUB;
    krn_sub *si = &sc.subs[gw];
    if (len == 0 || len > stride || s >= len || len < KRN_MFLIMIT + 1u) {
        if (lane == 0)
            si->n_seq = 0;
        return;
    }
    const uint8_t *b = in + (size_t)j * stride;
    uint16_t *tab = tabs[threadIdx.x >> 5];
    krn_warm(tab, b, s, lane);
    uint2 *sq = sc.seqs + (size_t)gw * KRN_SEQ_CAP;
    uint32_t e = min(s + KRN_CUDA_SUB, len), mlim = min(e, len - KRN_LASTLIT);
    uint32_t pmax = len - KRN_MFLIMIT;
    uint32_t cur = s, w = s, n = 0, body = 0, lit0 = 0;
    while (w + KRN_MINMATCH <= mlim && w <= pmax) {
        uint32_t p = w + lane, v = 0, h = 0, c = 0;
        int valid = p + KRN_MINMATCH <= mlim && p <= pmax, found = 0;
        if (valid) {
            v = krn_rd32(b, p);
            h = krn_hash(v);
            uint32_t d = (p - tab[h]) & 0xFFFFu;
            c = p - d;
            found = d != 0 && d <= p && krn_rd32(b, c) == v;
        }
        uint32_t m = __ballot_sync(KRN_FULL, found);
        uint32_t f = m ? (uint32_t)__ffs((int)m) - 1u : 31u;
        /* Positions past the match's start stay out of the table, as in liblz4: the scan
         * resumes at the match's end and must not find its own positions there. */
        __syncwarp();
        if (valid && lane <= f)
            tab[h] = (uint16_t)p;
        __syncwarp();
        if (m == 0) {
            w += 32;
            continue;
        }
        uint32_t mp = w + f, mc = __shfl_sync(KRN_FULL, c, (int)f), back = 0;
        while (mp - back > cur && mc > back && b[mp - back - 1] == b[mc - back - 1])
            back++;                    /* the match may start earlier than the hit */
        mp -= back, mc -= back;
        uint32_t ml = krn_extend(b, mp, mc, mlim - mp, KRN_MINMATCH + back, lane);
        uint32_t lits = mp - cur;
        if (lane == 0)
            sq[n] = make_uint2(lits | (ml << 16), mp - mc);
        if (n == 0)
            lit0 = lits;
        else
            body += lits + krn_lext(lits);
        body += 3u + krn_mext(ml);
        n++;
        cur = w = mp + ml;
    }
    if (lane == 0) {
        si->n_seq = n;
        si->lit0 = lit0;
        si->last_end = cur;
        si->body = body;
    }
}

/* ---- plan: one thread per block ---- */

__global__ void krn_plan(const uint32_t *in_sizes, uint32_t n_blocks, uint32_t stride,
                         krn_scratch sc, uint32_t *sizes)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_blocks)
        return;
    uint32_t len = in_sizes[j], nspb = krn_subs_per_block(stride);
    krn_blk *bl = &sc.blks[j];
    if (len == 0 || len > stride) {
        bl->raw = 1;
        sizes[j] = 0;
        return;
    }
    uint32_t anchor = 0, off = 0, n_sub = (len + KRN_CUDA_SUB - 1) / KRN_CUDA_SUB;
    for (uint32_t k = 0; k < n_sub; k++) {
        krn_sub *si = &sc.subs[(size_t)j * nspb + k];
        if (si->n_seq == 0)
            continue;
        uint32_t lits = k * KRN_CUDA_SUB + si->lit0 - anchor;
        si->anchor = anchor;
        si->off = off;
        off += lits + krn_lext(lits) + si->body;
        anchor = si->last_end;
    }
    uint32_t fin = len - anchor;
    bl->fin_off = off;
    bl->fin_anchor = anchor;
    off += 1u + krn_lext(fin) + fin;
    bl->raw = off >= len;
    sizes[j] = off >= len ? len : off;
}

/* ---- encode: one warp per sub-block ---- */

/* The warp copies n bytes (any alignment). */
static __device__ void krn_copy(uint8_t *dst, const uint8_t *src, uint32_t n, uint32_t lane)
{
    for (uint32_t x = lane; x < n; x += 32)
        dst[x] = src[x];
}

/* Inclusive warp scan. */
static __device__ uint32_t krn_scan(uint32_t v, uint32_t lane)
{
    for (uint32_t d = 1; d < 32; d <<= 1) {
        uint32_t t = __shfl_up_sync(KRN_FULL, v, d);
        if (lane >= d)
            v += t;
    }
    return v;
}

/* Sequence i of a sub-block starting at s, as parse recorded it (the first one's literals
 * run from where the sub-block before left off); all 0 past the last. */
static __device__ void krn_seq_at(const uint2 *sq, const krn_sub *si, uint32_t s, uint32_t i,
                                  uint32_t *lits, uint32_t *ml, uint32_t *off)
{
    *lits = *ml = *off = 0;
    if (i >= si->n_seq)
        return;
    uint2 q = sq[i];
    *lits = i == 0 ? s + si->lit0 - si->anchor : (q.x & 0xFFFFu);
    *ml = q.x >> 16;
    *off = q.y;
}

/* Writes the sub-block's sequences, 32 at a time: lane t places sequence g+t. */
static __device__ void krn_encode_seqs(const uint8_t *b, uint8_t *o, const uint2 *sq,
                                       const krn_sub *si, uint32_t s, uint32_t lane)
{
    uint32_t in_pos = si->anchor, out_pos = si->off;
    for (uint32_t g = 0; g < si->n_seq; g += 32) {
        uint32_t i = g + lane, lits, ml, offv;
        krn_seq_at(sq, si, s, i, &lits, &ml, &offv);
        uint32_t hl = 1u + krn_lext(lits);
        uint32_t adv = lits + ml, sz = ml ? hl + lits + 2u + krn_mext(ml) : 0;
        uint32_t adv_in = krn_scan(adv, lane), sz_in = krn_scan(sz, lane);
        uint32_t src = in_pos + adv_in - adv, dst = out_pos + sz_in - sz;
        if (ml) {
            uint8_t *t = o + dst;
            uint32_t ms = ml - KRN_MINMATCH;
            *t = (uint8_t)((min(lits, 15u) << 4) | min(ms, 15u));
            if (lits >= 15u)
                krn_put_len(t + 1, lits);
            t += hl + lits;
            t[0] = (uint8_t)offv;
            t[1] = (uint8_t)(offv >> 8);
            if (ms >= 15u)
                krn_put_len(t + 2, ms);
        }
        for (uint32_t t = 0; t < 32 && g + t < si->n_seq; t++) {
            uint32_t l = __shfl_sync(KRN_FULL, lits, (int)t);
            uint32_t from = __shfl_sync(KRN_FULL, src, (int)t);
            uint32_t to = __shfl_sync(KRN_FULL, dst + hl, (int)t);
            krn_copy(o + to, b + from, l, lane);
        }
        in_pos += __shfl_sync(KRN_FULL, adv_in, 31);
        out_pos += __shfl_sync(KRN_FULL, sz_in, 31);
    }
}

__global__ void __launch_bounds__(KRN_WARPS * 32)
krn_encode(const uint8_t *in, const uint32_t *in_sizes, uint8_t *out, uint32_t n_blocks,
           uint32_t stride, krn_scratch sc)
{
    uint32_t lane = threadIdx.x & 31u, nspb = krn_subs_per_block(stride);
    uint32_t gw = blockIdx.x * KRN_WARPS + (threadIdx.x >> 5);
    if (gw >= n_blocks * nspb)
        return;
    uint32_t j = gw / nspb, k = gw % nspb, len = in_sizes[j], s = k * KRN_CUDA_SUB;
    const krn_blk *bl = &sc.blks[j];
    if (bl->raw || s >= len)
        return;
    const uint8_t *b = in + (size_t)j * stride;
    uint8_t *o = out + (size_t)j * stride;
    const krn_sub *si = &sc.subs[gw];
    if (si->n_seq)
        krn_encode_seqs(b, o, sc.seqs + (size_t)gw * KRN_SEQ_CAP, si, s, lane);
    if (s + KRN_CUDA_SUB < len)
        return;
    uint32_t fin = len - bl->fin_anchor;
    uint8_t *t = o + bl->fin_off;
    if (lane == 0) {
        *t = (uint8_t)(min(fin, 15u) << 4);
        if (fin >= 15u)
            krn_put_len(t + 1, fin);
    }
    krn_copy(t + 1 + krn_lext(fin), b + bl->fin_anchor, fin, lane);
}

/* ---- check: the card's own verdict on what it wrote ----
 *
 * The host must not store a block that does not decode to its input. Decoding on the host
 * costs a core per 2 GB/s, a third of the card's rate on a 16-core host; here the check
 * needs no output buffer: while the bytes before a position decode to the input (true at
 * 0, and kept by each step checked), a literal must equal the input byte at its position
 * and a match byte the input byte off before it. The compressor's plan only says where each
 * warp starts; the verdict checks that the shares join up, so a wrong plan fails too. */

/* Whether the warp's n bytes at a equal those at b. */
static __device__ int krn_same(const uint8_t *a, const uint8_t *b, uint32_t n, uint32_t lane)
{
    int bad = 0;
    for (uint32_t x = lane; x < n; x += 32)
        bad |= __ldg(a + x) != __ldg(b + x);
    return !__any_sync(KRN_FULL, bad);
}

/* A length's 255-run after a nibble of 15, read from o at *op (before end); ~0u when the
 * block ends inside it. */
static __device__ uint32_t krn_run_len(const uint8_t *o, uint32_t *op, uint32_t end,
                                       uint32_t n)
{
    uint32_t x;
    do {
        if (*op >= end)
            return ~0u;
        x = __ldg(o + (*op)++);
        n += x;
    } while (x == 255u);
    return n;
}

/* The closing run at o[op, end): one sequence of literals alone, from input position ip to
 * the block's end (len). Every lane with the same values. */
static __device__ int krn_check_closing(const uint8_t *b, uint32_t len, const uint8_t *o,
                                        uint32_t op, uint32_t end, uint32_t ip, uint32_t lane)
{
    if (ip > len || op >= end)
        return 0;
    uint32_t l = __ldg(o + op++) >> 4;
    if (l == 15u && (l = krn_run_len(o, &op, end, l)) == ~0u)
        return 0;
    return l == len - ip && l == end - op && krn_same(o + op, b + ip, l, lane);
}

/* Whether the 255-run at o + p is the one a length of 15 + n is written with. */
static __device__ int krn_run_is(const uint8_t *o, uint32_t p, uint32_t n)
{
    for (; n >= 255u; n -= 255u, p++)
        if (__ldg(o + p) != 255u)
            return 0;
    return __ldg(o + p) == n;
}

/* Whether a lane's n bytes at a equal those at b; runs longer than KRN_LANE_RUN are left to
 * the warp (krn_check_long). */
#define KRN_LANE_RUN 48u
static __device__ int krn_lane_same(const uint8_t *a, const uint8_t *b, uint32_t n)
{
    int bad = 0;
    for (uint32_t x = 0; x < n && n <= KRN_LANE_RUN; x++)
        bad |= __ldg(a + x) != __ldg(b + x);
    return !bad;
}

/* The runs of the 32 lanes longer than KRN_LANE_RUN, compared by the whole warp. */
static __device__ int krn_check_long(const uint8_t *a, const uint8_t *b, uint32_t n,
                                     uint32_t lane)
{
    int ok = 1;
    for (uint32_t m = __ballot_sync(KRN_FULL, n > KRN_LANE_RUN); m; m &= m - 1) {
        int t = __ffs((int)m) - 1;
        const uint8_t *ta = (const uint8_t *)__shfl_sync(KRN_FULL, (unsigned long long)a, t);
        const uint8_t *tb = (const uint8_t *)__shfl_sync(KRN_FULL, (unsigned long long)b, t);
        ok &= krn_same(ta, tb, __shfl_sync(KRN_FULL, n, t), lane);
    }
    return ok;
}

/* A sub-block's share: the encoder's sequences (sq, as parse found them) are the claim, 32
 * checked at once, lane t sequence g + t, placed by the same scans that placed them. Lane t
 * checks that the bytes at its place are exactly the encoding of its sequence (token, length
 * runs, offset), that its literals are the input's bytes and its match copies bytes equal to
 * the input's, within the LZ4 block rules. Since each sequence then parses to exactly its
 * claim and the next begins where it ends, a decoder walks the same sequences. The share
 * must end at end in the output; *ip gets where it ends in the input. */
static __device__ int krn_check_share(const uint8_t *b, uint32_t len, const uint8_t *o,
                                      const uint2 *sq, const krn_sub *si, uint32_t s,
                                      uint32_t end, uint32_t *ip, uint32_t lane)
{
    uint32_t in_pos = si->anchor, out_pos = si->off;
    int ok = in_pos <= len && si->n_seq <= KRN_SEQ_CAP;
    for (uint32_t g = 0; g < si->n_seq && ok; g += 32) {
        uint32_t i = g + lane, lits, ml, off;
        krn_seq_at(sq, si, s, i, &lits, &ml, &off);
        uint32_t hl = 1u + krn_lext(lits), ms = ml - KRN_MINMATCH;
        uint32_t adv = lits + ml, sz = ml ? hl + lits + 2u + krn_mext(ml) : 0;
        uint32_t adv_in = krn_scan(adv, lane), sz_in = krn_scan(sz, lane);
        uint32_t src = in_pos + adv_in - adv, dst = out_pos + sz_in - sz, mp = src + lits;
        int good = 1;
        if (i < si->n_seq) {
            uint32_t t = dst + hl + lits;
            good = lits <= len && ml <= len && ml >= KRN_MINMATCH && dst + sz <= end &&
                   mp <= len && off > 0 &&
                   off <= 0xFFFFu && off <= mp && mp + KRN_MFLIMIT <= len &&
                   ml <= len - KRN_LASTLIT - mp &&
                   __ldg(o + dst) == ((min(lits, 15u) << 4) | min(ms, 15u)) &&
                   (lits < 15u || krn_run_is(o, dst + 1, lits - 15u)) &&
                   __ldg(o + t) == (off & 0xFFu) && __ldg(o + t + 1) == off >> 8 &&
                   (ms < 15u || krn_run_is(o, t + 2, ms - 15u)) &&
                   krn_lane_same(o + dst + hl, b + src, lits) &&
                   krn_lane_same(b + mp - off, b + mp, ml);
        }
        ok = __all_sync(KRN_FULL, good);
        if (!ok)
            break;
        ok &= krn_check_long(o + dst + hl, b + src, i < si->n_seq ? lits : 0, lane);
        ok &= krn_check_long(b + mp - off, b + mp, i < si->n_seq ? ml : 0, lane);
        in_pos += __shfl_sync(KRN_FULL, adv_in, 31);
        out_pos += __shfl_sync(KRN_FULL, sz_in, 31);
    }
    *ip = in_pos;
    return ok && out_pos == end;
}

static __device__ __forceinline__ int krn_compressed(uint32_t len, uint32_t size,
                                                     uint32_t stride)
{
    return len > 0 && len <= stride && size > 0 && size < len;
}

#define KRN_P1 2654435761u
#define KRN_P2 2246822519u
#define KRN_P3 3266489917u
#define KRN_P4 668265263u
#define KRN_P5 374761393u
#define KRN_SUM_STRIPES 256u           /* 16-byte stripes staged in shared memory at once */

static __device__ __forceinline__ uint32_t krn_rotl(uint32_t x, uint32_t r)
{
    return __funnelshift_l(x, x, r);
}

/* XXH32 with seed 0 of n bytes at p (16-byte aligned), by one CTA of at least 64 threads:
 * the warps after the first stage the next stripes in shared memory while lanes 0..3 of
 * warp 0 run the four accumulators over the current ones (the hash is serial within each,
 * about 0.4 ms for 1 MiB: hence its CTAs run beside the walk's, in the same launch). */
static __device__ uint32_t krn_xxh32(const uint8_t *p, uint32_t n)
{
    __shared__ uint32_t stage[2][KRN_SUM_STRIPES * 4];
    __shared__ uint32_t acc[4];
    uint32_t t = threadIdx.x, stripes = n / 16u;
    uint32_t chunks = (stripes + KRN_SUM_STRIPES - 1) / KRN_SUM_STRIPES;
    uint32_t v = t == 0 ? KRN_P1 + KRN_P2 : t == 1 ? KRN_P2 : t == 2 ? 0u : 0u - KRN_P1;
    const uint4 *src = (const uint4 *)p;
    for (uint32_t c = 0; c <= chunks; c++) {
        if (t >= 32 && c < chunks) {   /* stage chunk c */
            uint32_t first = c * KRN_SUM_STRIPES, cnt = min(KRN_SUM_STRIPES, stripes - first);
            uint4 *dst = (uint4 *)stage[c & 1];
            for (uint32_t i = t - 32; i < cnt; i += blockDim.x - 32)
                dst[i] = src[first + i];
        }
        if (t < 4 && c > 0) {          /* hash chunk c - 1 */
            uint32_t first = (c - 1) * KRN_SUM_STRIPES, cnt = min(KRN_SUM_STRIPES, stripes - first);
            const uint32_t *w = stage[(c - 1) & 1];
            for (uint32_t i = 0; i < cnt; i++)
                v = krn_rotl(v + w[4 * i + t] * KRN_P2, 13) * KRN_P1;
        }
        __syncthreads();
    }
    if (t < 4)
        acc[t] = v;
    __syncthreads();
    uint32_t h = stripes ? krn_rotl(acc[0], 1) + krn_rotl(acc[1], 7) + krn_rotl(acc[2], 12) +
                               krn_rotl(acc[3], 18)
                         : KRN_P5;
    h += n;
    const uint8_t *q = p + (size_t)stripes * 16u;
    uint32_t rem = n & 15u;
    for (; rem >= 4u; rem -= 4u, q += 4) {
        uint32_t w = q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        h = krn_rotl(h + w * KRN_P3, 17) * KRN_P4;
    }
    for (; rem > 0; rem--, q++)
        h = krn_rotl(h + *q * KRN_P5, 11) * KRN_P1;
    h ^= h >> 15;
    h *= KRN_P2;
    h ^= h >> 13;
    h *= KRN_P3;
    return h ^ (h >> 16);
}

/* One CTA's sums: c = 2j hashes block j's input, 2j + 1 its compressed bytes. */
static __device__ void krn_check_sums(const uint8_t *in, const uint32_t *in_sizes,
                                      const uint8_t *out, const uint32_t *sizes,
                                      krn_cuda_verdict *verdicts, uint32_t stride, uint32_t c)
{
    uint32_t j = c / 2, of_out = c % 2, len = in_sizes[j], size = sizes[j], h = 0;
    if (krn_compressed(len, size, stride))
        h = krn_xxh32((of_out ? out : in) + (size_t)j * stride, of_out ? size : len);
    uint32_t *sum = of_out ? &verdicts[j].out_sum : &verdicts[j].src_sum;
    if (threadIdx.x == 0)
        *sum = h;
}

/* CTAs up to walk_ctas walk the shares, one warp each; the 2 * n_blocks after them hash. */
__global__ void __launch_bounds__(KRN_WARPS * 32)
krn_check_walk(const uint8_t *in, const uint32_t *in_sizes, const uint8_t *out,
               const uint32_t *sizes, krn_cuda_verdict *verdicts, uint32_t n_blocks,
               uint32_t stride, krn_scratch sc, uint32_t walk_ctas)
{
    if (blockIdx.x >= walk_ctas) {
        krn_check_sums(in, in_sizes, out, sizes, verdicts, stride, blockIdx.x - walk_ctas);
        return;
    }
    uint32_t lane = threadIdx.x & 31u, nspb = krn_subs_per_block(stride);
    uint32_t gw = blockIdx.x * KRN_WARPS + (threadIdx.x >> 5);
    if (gw >= n_blocks * nspb)
        return;
    uint32_t j = gw / nspb, k = gw % nspb, len = in_sizes[j], size = sizes[j];
    uint32_t s = k * KRN_CUDA_SUB, n_sub = (len + KRN_CUDA_SUB - 1) / KRN_CUDA_SUB;
    if (!krn_compressed(len, size, stride) || s >= len)
        return;
    const uint8_t *b = in + (size_t)j * stride, *o = out + (size_t)j * stride;
    krn_blk *bl = &sc.blks[j];
    const krn_sub *si = &sc.subs[gw];
    if (si->n_seq) {
        uint32_t end = bl->fin_off, ip = 0;
        for (uint32_t q = k + 1; q < n_sub; q++)
            if (sc.subs[(size_t)j * nspb + q].n_seq) {
                end = sc.subs[(size_t)j * nspb + q].off;
                break;
            }
        int ok = end <= size && krn_check_share(b, len, o, sc.seqs + (size_t)gw * KRN_SEQ_CAP,
                                                si, s, end, &ip, lane);
        if (lane == 0)
            sc.walks[gw] = make_uint2((uint32_t)ok, ip);
    }
    if (k + 1 == n_sub) {
        int ok = krn_check_closing(b, len, o, bl->fin_off, size, bl->fin_anchor, lane);
        if (lane == 0)
            bl->fin_ok = (uint32_t)ok;
    }
}

/* One thread per block: the shares start at output 0, each starts in the input where the
 * one before ended (each ends in the output where the next starts, by construction). */
__global__ void krn_check_join(const uint32_t *in_sizes, const uint32_t *sizes,
                               krn_cuda_verdict *verdicts, uint32_t n_blocks, uint32_t stride,
                               krn_scratch sc)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_blocks)
        return;
    uint32_t len = in_sizes[j], size = sizes[j], nspb = krn_subs_per_block(stride);
    verdicts[j].decodes = 0;
    if (!krn_compressed(len, size, stride))
        return;
    uint32_t n_sub = (len + KRN_CUDA_SUB - 1) / KRN_CUDA_SUB, ip = 0, first = 1, ok = 1;
    for (uint32_t k = 0; k < n_sub && ok; k++) {
        const krn_sub *si = &sc.subs[(size_t)j * nspb + k];
        if (!si->n_seq)
            continue;
        uint2 w = sc.walks[(size_t)j * nspb + k];
        ok = w.x && si->anchor == ip && (!first || si->off == 0);
        ip = w.y, first = 0;
    }
    const krn_blk *bl = &sc.blks[j];
    ok = ok && bl->fin_ok && bl->fin_anchor == ip && (!first || bl->fin_off == 0);
    verdicts[j].decodes = ok;
}

extern "C" cudaError_t krn_cuda_check(const uint8_t *in, const uint32_t *in_sizes,
                                      const uint8_t *out, const uint32_t *sizes,
                                      krn_cuda_verdict *verdicts, uint32_t n_blocks,
                                      uint32_t stride, void *scratch, cudaStream_t stream)
{
    if (n_blocks == 0)
        return cudaSuccess;
    krn_scratch sc = krn_carve(scratch, n_blocks, stride);
    uint32_t warps = n_blocks * krn_subs_per_block(stride);
    uint32_t ctas = (warps + KRN_WARPS - 1) / KRN_WARPS;
    krn_check_walk<<<ctas + 2 * n_blocks, KRN_WARPS * 32u, 0, stream>>>(
        in, in_sizes, out, sizes, verdicts, n_blocks, stride, sc, ctas);
    krn_check_join<<<(n_blocks + 127) / 128, 128, 0, stream>>>(in_sizes, sizes, verdicts,
                                                               n_blocks, stride, sc);
    return cudaGetLastError();
}

__global__ void krn_spoil(uint8_t *out, const uint32_t *sizes, const uint32_t *in_sizes,
                          uint32_t n_blocks, uint32_t stride, uint32_t salt)
{
    for (uint32_t j = 0; j < n_blocks; j++)
        if (sizes[j] > 0 && sizes[j] < in_sizes[j]) {
            out[(size_t)j * stride + salt * 7919u % sizes[j]] ^= 0x20;
            return;
        }
}

extern "C" cudaError_t krn_cuda_spoil(uint8_t *out, const uint32_t *sizes,
                                      const uint32_t *in_sizes, uint32_t n_blocks,
                                      uint32_t stride, uint32_t salt, cudaStream_t stream)
{
    krn_spoil<<<1, 1, 0, stream>>>(out, sizes, in_sizes, n_blocks, stride, salt);
    return cudaGetLastError();
}

/* ---- drain: compressed bytes and sizes to the host ---- */

__global__ void krn_drain(const uint8_t *dev_out, const uint32_t *dev_sizes,
                          const uint32_t *in_sizes, const krn_cuda_verdict *dev_verdicts,
                          uint8_t *host_out, uint32_t *host_sizes,
                          krn_cuda_verdict *host_verdicts, uint32_t stride)
{
    uint32_t j = blockIdx.x, s = dev_sizes[j];
    if (s > 0 && s < in_sizes[j]) {
        const uint4 *src = (const uint4 *)(dev_out + (size_t)j * stride);
        uint4 *dst = (uint4 *)(host_out + (size_t)j * stride);
        for (uint32_t i = threadIdx.x; i < (s + 15u) / 16u; i += blockDim.x)
            dst[i] = src[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (host_verdicts)
            host_verdicts[j] = dev_verdicts[j];
        __threadfence_system();
        host_sizes[j] = s;
    }
}

extern "C" cudaError_t krn_cuda_compress(const uint8_t *in, const uint32_t *in_sizes,
                                         uint8_t *out, uint32_t *sizes, uint32_t n_blocks,
                                         uint32_t stride, void *scratch, cudaStream_t stream,
                                         int inject_bad_launch)
{
    if (n_blocks == 0)
        return cudaSuccess;
    krn_scratch sc = krn_carve(scratch, n_blocks, stride);
    uint32_t warps = n_blocks * krn_subs_per_block(stride);
    uint32_t ctas = (warps + KRN_WARPS - 1) / KRN_WARPS;
    /* An impossible block shape: a real launch error, for tests of the host's fallback. */
    uint32_t threads = inject_bad_launch ? 4096u : KRN_WARPS * 32u;
    krn_parse<<<ctas, threads, 0, stream>>>(in, in_sizes, n_blocks, stride, sc);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    krn_plan<<<(n_blocks + 127) / 128, 128, 0, stream>>>(in_sizes, n_blocks, stride, sc, sizes);
    krn_encode<<<ctas, KRN_WARPS * 32u, 0, stream>>>(in, in_sizes, out, n_blocks, stride, sc);
    return cudaGetLastError();
}

extern "C" cudaError_t krn_cuda_drain(const uint8_t *dev_out, const uint32_t *dev_sizes,
                                      const uint32_t *in_sizes,
                                      const krn_cuda_verdict *dev_verdicts, uint8_t *host_out,
                                      uint32_t *host_sizes, krn_cuda_verdict *host_verdicts,
                                      uint32_t n_blocks, uint32_t stride, cudaStream_t stream)
{
    if (n_blocks == 0)
        return cudaSuccess;
    krn_drain<<<n_blocks, 256, 0, stream>>>(dev_out, dev_sizes, in_sizes, dev_verdicts,
                                            host_out, host_sizes, host_verdicts, stride);
    return cudaGetLastError();
}
