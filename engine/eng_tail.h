/* eng_tail: one block that grows at its end, compressed for the cost of what was added.
 *
 * A log appended a line at a time rewrites its last block at every close. Compressing that
 * block anew each time costs the whole block per line. An LZ4 block is a series of
 * sequences (literals, then a match reaching back at most 64 KiB); the last one holds
 * literals only. When the input grows at its end, the old block's sequences up to that last
 * one stay valid as they are; the added bytes are compressed with the old input as their
 * prefix (LZ4's linked-block mode), and the old last literals are merged into the new first
 * sequence. The result is one ordinary LZ4 block of the whole input, which any LZ4 decoder
 * reads; its two XXH32 checksums (of the input and of the block) are also carried forward.
 *
 * The state keeps its own copy of the input, so a caller's buffer may change or go away
 * between calls: whether a call continues the previous one is decided by comparing bytes,
 * never by trusting the caller. One state per block being grown; not thread-safe. */
#ifndef FPGALZ4FS_ENG_TAIL_H
#define FPGALZ4FS_ENG_TAIL_H

#include <stddef.h>
#include <stdint.h>

typedef struct eng_tail_s eng_tail;

typedef struct {
    uint8_t *comp;                     /* one raw LZ4 block of the whole input (valid until
                                          the next call or eng_tail_free), with the room
                                          asked at eng_tail_new before and after it; NULL
                                          after eng_tail_adopt until eng_tail_compress */
    uint32_t comp_len;                 /* its length; >= the input length: store raw */
    uint32_t comp_sum;                 /* XXH32 (seed 0) of comp[0, comp_len) */
    uint32_t raw_sum;                  /* XXH32 (seed 0) of the input */
    uint32_t reused;                   /* input bytes carried over without compressing them
                                          (0 when the block was compressed from scratch) */
    const uint8_t *piece;              /* when this call only compressed what was added
                                          (reused < the input length): that part alone as
                                          one raw LZ4 block linked to the input before it
                                          (its matches may reach back into it), valid until
                                          the next call; else NULL */
    uint32_t piece_len;                /* its length; >= the added length: store those raw */
} eng_tail_out;

/* A state for inputs of at most cap bytes (cap <= 64 MiB); NULL without memory. The block
 * it returns has lead bytes of room before it and trail bytes after it (each at most 64)
 * that the caller may write, so that a frame's header and end can be put around the block
 * where it lies instead of copying it: a log's block is hundreds of KiB rewritten at every
 * close. */
eng_tail *eng_tail_new(uint32_t cap, uint32_t lead, uint32_t trail);
void eng_tail_free(eng_tail *t);

/* Memory the state reserves (its buffers, mostly untouched until used). */
size_t eng_tail_footprint(uint32_t cap);

/* Compresses src[0, len) (1 <= len <= cap). When the previous call's input is a prefix of
 * src, only src[prev_len, len) is compressed, except that the whole is compressed again
 * from scratch when it has doubled (or grown by 64 KiB) since that was last done, and when
 * len = cap: the block then stays close to one compression's size. Returns 0, or -EINVAL
 * (len out of range) or -EIO (liblz4 failed; the state starts over at the next call). */
int eng_tail_compress(eng_tail *t, const uint8_t *src, uint32_t len, eng_tail_out *out);

/* Takes src[0, len) as the input without compressing it: the bytes are kept and hashed,
 * and their last 64 KiB (all that LZ4's matches reach back) become what the next
 * eng_tail_extend compresses against. For a caller that only appends links to a block
 * already stored (a log reopened after its compressor was let go): compressing the block
 * whole would cost about ten times as much. The block of the whole input is then unknown:
 * eng_tail_extend gives no out->comp (NULL, comp_len 0), and eng_tail_compress compresses
 * from scratch. -EINVAL when len is out of range. */
int eng_tail_adopt(eng_tail *t, const uint8_t *src, uint32_t len);

/* Appends added[0, n) to the input and compresses only them, as eng_tail_compress does when
 * its input grew (out->piece is set), without comparing the input: for a caller that knows
 * the block is the previous input followed by these bytes (a file's writer that tracks what
 * changed), since comparing costs the whole block. No fresh compression is made, however
 * far the input grew: the caller decides when (eng_tail_reset, then eng_tail_compress).
 * -EINVAL when there is no input yet or it would pass cap; -EIO as above. */
int eng_tail_extend(eng_tail *t, const uint8_t *added, uint32_t n, eng_tail_out *out);

/* The input of the last successful call (NULL, *len 0 if none). */
const uint8_t *eng_tail_input(const eng_tail *t, uint32_t *len);

/* Forgets the input: the next call compresses from scratch. */
void eng_tail_reset(eng_tail *t);

#endif
