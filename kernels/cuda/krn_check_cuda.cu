/* The GPU's check of what the compressor wrote (krn_lz4_cuda.h, krn_cuda_check). */
#include "krn_cuda_internal.cuh"

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

