/* The GPU LZ4 block compressor (see krn_lz4_cuda.h for the contract; the check of its
 * output is in krn_check_cuda.cu).
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
#include "krn_cuda_internal.cuh"

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
