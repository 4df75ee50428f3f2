/* The GPU LZ4 block compressor: many independent blocks per launch, each block split into
 * sub-blocks whose matches are found in parallel (one warp each), then sized and encoded into
 * one valid LZ4 block per input block.
 *
 * The contract is xilLz4Compress's (kernels/krn_lz4.h) for a brick of up to any number of
 * blocks: block j is read from in + j*stride and its raw LZ4 block (no size prefix) written at
 * out + j*stride; sizes[j] gets its length, or in_sizes[j] when it does not shrink (then
 * nothing is written for it and the host stores it raw), or 0 when in_sizes[j] is 0 or larger
 * than the stride (a fault the host must catch). Plain C interface, so the host side of the
 * plugin is C. */
#ifndef KRN_LZ4_CUDA_H
#define KRN_LZ4_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KRN_CUDA_SUB 16384u            /* sub-block: the unit one warp parses */
#define KRN_CUDA_PAD 64u               /* bytes after an input buffer that kernels may read */

/* Device scratch a brick of up to max_blocks blocks of stride bytes needs. */
size_t krn_cuda_scratch_bytes(uint32_t max_blocks, uint32_t stride);

/* Enqueues the whole compression of n_blocks blocks on stream: in, in_sizes and scratch are
 * device memory; out and sizes may be device memory or mapped host memory (the last kernel
 * writes them with wide stores and makes them visible to the host when the stream reaches
 * its next event). in must have KRN_CUDA_PAD readable bytes past n_blocks*stride.
 * inject_bad_launch makes the first launch invalid, for tests of the host's error path.
 * Returns the launch error (cudaSuccess when everything was enqueued). */
cudaError_t krn_cuda_compress(const uint8_t *in, const uint32_t *in_sizes, uint8_t *out,
                              uint32_t *sizes, uint32_t n_blocks, uint32_t stride,
                              void *scratch, cudaStream_t stream, int inject_bad_launch);

/* What the card's own check found for one block (the layout of the engine's eng_card_check):
 * for a block that shrank, decodes is 1 when its compressed bytes decode to exactly its
 * input, and the sums are the XXH32 (seed 0) of the input and of the compressed bytes as
 * they lie on the GPU; all 0 for a block stored raw. */
typedef struct {
    uint32_t decodes, src_sum, out_sum, pad;
} krn_cuda_verdict;

/* Enqueues the check of what krn_cuda_compress left in out and sizes (same stream, same
 * scratch, same arguments): each compressed block is walked against its input, one warp per
 * sub-block's share of its sequences, as a decoder would run it but comparing instead of
 * writing (a literal with the input byte it stands for, a match's bytes with the input
 * bytes it copies), with the LZ4 block rules a decoder enforces; the shares must tile the
 * block's output and input exactly, which is checked per block without trusting the
 * compressor's plan. Then the XXH32 of each input and output. verdicts is device memory. */
cudaError_t krn_cuda_check(const uint8_t *in, const uint32_t *in_sizes, const uint8_t *out,
                           const uint32_t *sizes, krn_cuda_verdict *verdicts, uint32_t n_blocks,
                           uint32_t stride, void *scratch, cudaStream_t stream);

/* Tests only: flips one byte of the first compressed block in out (a compressor's bug), at
 * a place that salt picks. */
cudaError_t krn_cuda_spoil(uint8_t *out, const uint32_t *sizes, const uint32_t *in_sizes,
                           uint32_t n_blocks, uint32_t stride, uint32_t salt,
                           cudaStream_t stream);

/* Enqueues the copy of each compressed block (sizes[j] bytes when below in_sizes[j]) from
 * dev_out to host_out at the same offset, then of the verdicts (when host_verdicts is not
 * NULL) and the sizes to host_verdicts and host_sizes: the way back carries the compressed
 * bytes alone. The host buffers are mapped pinned memory (their device addresses); out
 * blocks are 16-byte aligned (stride a multiple of 16). */
cudaError_t krn_cuda_drain(const uint8_t *dev_out, const uint32_t *dev_sizes,
                           const uint32_t *in_sizes, const krn_cuda_verdict *dev_verdicts,
                           uint8_t *host_out, uint32_t *host_sizes,
                           krn_cuda_verdict *host_verdicts, uint32_t n_blocks, uint32_t stride,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
