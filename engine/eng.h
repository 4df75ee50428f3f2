/* eng: the compression engine, the one narrow interface through which the filesystem hands
 * whole blocks to a compressor.
 *
 * A block job is at most one block of one file. The caller fills an array of jobs and calls
 * eng_compress, which returns when every job is done; jobs run in parallel on the engine's
 * threads. Each job's output is a raw LZ4 block (no size prefix). When the block does not
 * shrink (out_len >= len) the caller stores the input raw, as the LZ4 frame format allows.
 * Later backends (an accelerator card, its emulation) take over behind this same call. */
#ifndef FPGALZ4FS_ENG_H
#define FPGALZ4FS_ENG_H

#include <stddef.h>
#include <stdint.h>

typedef struct eng_ctx_s eng_ctx;

typedef enum {
    ENG_BACKEND_SW = 0,                /* liblz4 on a pool of host threads */
} eng_backend;

typedef struct {
    eng_backend backend;               /* which backend compresses */
    unsigned sw_threads;               /* software threads; 0 means one per online core */
} eng_config;

typedef struct {
    const uint8_t *src;                /* input bytes of one block */
    uint32_t len;                      /* input length, 1..block size */
    uint8_t *dst;                      /* output buffer of dst_cap bytes */
    uint32_t dst_cap;                  /* at least eng_bound(len) */
    uint32_t out_len;                  /* set by the engine: compressed length, or >= len when
                                          the block did not shrink (store it raw) */
} eng_job;

typedef struct {
    uint64_t blocks_sw;                /* block jobs compressed in software */
    uint64_t bricks_sw;                /* bricks (batches of up to 8 block jobs) compressed in software */
    uint64_t bytes_in;                 /* input bytes of all jobs */
    uint64_t bytes_out;                /* output bytes kept (compressed, or raw when larger) */
} eng_stats;

/* Output capacity a job of len bytes needs. */
uint32_t eng_bound(uint32_t len);

/* Opens an engine; on failure returns NULL and writes the reason into err. */
eng_ctx *eng_open(const eng_config *cfg, char *err, size_t err_cap);

/* Compresses every job; returns when all are done. Safe to call from many threads at once. */
void eng_compress(eng_ctx *eng, eng_job *jobs, size_t n_jobs);

/* A snapshot of the counters. */
void eng_get_stats(eng_ctx *eng, eng_stats *out);

/* Name of the backend in use ("sw"). */
const char *eng_backend_name(const eng_ctx *eng);

/* Stops the threads and frees everything; accepts NULL. */
void eng_close(eng_ctx *eng);

#endif
