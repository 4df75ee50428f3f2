/* The device-side reference kernel: the behaviour of the Vitis `xilLz4Compress` kernel in
 * portable C, written the way an HLS kernel is (no allocation, no global state, bounded loops),
 * so the emulated card and the tests see exactly what a real card would hand back.
 * Every function is reentrant: several compute-unit threads may call it at once. */
#ifndef KRN_LZ4_H
#define KRN_LZ4_H

#include <stdint.h>

#define KRN_PARALLEL_BLOCKS 8u     /* blocks per run, as the FPGA kernel's 8 engines */
#define KRN_MIN_BLOCK 128u         /* blocks shorter than this are reported as their own size */

/* The xilLz4Compress contract, in portable C written the way an HLS kernel is: block j of
 * the run is read from in + j*block_size and its raw LZ4 block (no size prefix) written at
 * out + j*block_size; compressed_size[j] gets its length. A block that does not shrink (or is
 * shorter than KRN_MIN_BLOCK) is reported with compressed_size[j] >= in_block_size[j] and its
 * output is undefined: the host stores it raw. The run holds ceil(input_size / block_size)
 * blocks (at most KRN_PARALLEL_BLOCKS); in_block_size[j] is each block's length. */
void krn_lz4_compress(const uint8_t *in, uint8_t *out, uint32_t *compressed_size,
                      const uint32_t *in_block_size, uint32_t block_size_in_kb,
                      uint32_t input_size);

/* Same, for one block, for hosts that call it block by block; returns the compressed length or
 * a value >= len when it does not shrink. out has room for cap bytes (never written past). */
uint32_t krn_lz4_compress_block(const uint8_t *in, uint32_t len, uint8_t *out, uint32_t cap);

#endif
