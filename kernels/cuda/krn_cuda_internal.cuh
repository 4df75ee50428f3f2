/* Inside the GPU compressor: what kernels/cuda/krn_lz4_cuda.cu (compress, drain) and
 * kernels/cuda/krn_check_cuda.cu (the GPU's check of its own output) share: the scratch a
 * brick's launches pass between them, and the LZ4 sequence arithmetic both need. */
#ifndef KRN_CUDA_INTERNAL_CUH
#define KRN_CUDA_INTERNAL_CUH

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

static __host__ __device__ __forceinline__ uint32_t krn_subs_per_block(uint32_t stride)
{
    return (stride + KRN_CUDA_SUB - 1) / KRN_CUDA_SUB;
}

typedef struct {
    uint2 *seqs;
    krn_sub *subs;
    krn_blk *blks;
    uint2 *walks;                      /* check, per sub-block: (share decodes, input end) */
} krn_scratch;

static inline size_t krn_align(size_t n) { return (n + 255) & ~(size_t)255; }

static inline krn_scratch krn_carve(void *base, uint32_t max_blocks, uint32_t stride)
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


/* Extra length bytes of a literal run of l bytes, and of a match of m bytes. */
static __host__ __device__ __forceinline__ uint32_t krn_lext(uint32_t l)
{
    return l >= 15u ? (l - 15u) / 255u + 1u : 0u;
}

static __host__ __device__ __forceinline__ uint32_t krn_mext(uint32_t m)
{
    return m - KRN_MINMATCH >= 15u ? (m - KRN_MINMATCH - 15u) / 255u + 1u : 0u;
}

/* Inclusive warp scan. */
static __device__ __forceinline__ uint32_t krn_scan(uint32_t v, uint32_t lane)
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
static __device__ __forceinline__ void krn_seq_at(const uint2 *sq, const krn_sub *si, uint32_t s,
                                                  uint32_t i, uint32_t *lits, uint32_t *ml,
                                                  uint32_t *off)
{
    *lits = *ml = *off = 0;
    if (i >= si->n_seq)
        return;
    uint2 q = sq[i];
    *lits = i == 0 ? s + si->lit0 - si->anchor : (q.x & 0xFFFFu);
    *ml = q.x >> 16;
    *off = q.y;
}

#endif
