/* eng: the compression engine, the one narrow interface through which the filesystem hands
 * whole blocks to a compressor.
 *
 * A block job is at most one block of one file. Callers (many threads at once) pass arrays
 * of jobs to eng_compress, which returns when every job is done. Inside, jobs from all
 * callers are packed into bricks (the unit one card run compresses: 8 blocks for the FPGA
 * kernel) and sent to an accelerator card through N buffer sets per compute unit, so that
 * filling and collecting overlap the card's compute; when every buffer set is in flight, a
 * brick goes to the software pool instead of waiting, and so does anything the card failed
 * or that is too small to be worth a card run. Every block a card compressed is checked on
 * the pool before its caller sees it (decoded and compared with its input, or, for a card
 * that checks its own output, the card's verdict and sums compared with the input's and
 * output's sums there): a wrong one is compressed again in software (verify_failed), never
 * returned. Each job's output is a raw LZ4 block (no size prefix); when the block does not
 * shrink (out_len >= len) the caller stores it raw. */
#ifndef FPGALZ4FS_ENG_H
#define FPGALZ4FS_ENG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eng_ctx_s eng_ctx;

typedef enum {
    ENG_BACKEND_SW = 0,                /* liblz4 on a pool of host threads, no card */
    ENG_BACKEND_EMU,                   /* emulated card: a model of the FPGA kernel */
    ENG_BACKEND_XRT,                   /* an Alveo card through XRT (plugin fpgalz4fs-xrt.so) */
    ENG_BACKEND_CUDA,                  /* an NVIDIA GPU through CUDA (plugin fpgalz4fs-cuda.so) */
} eng_backend;

typedef struct {
    eng_backend backend;               /* which card (or none) */
    unsigned sw_threads;               /* software threads; 0 means one per online core */
    unsigned cus;                      /* compute units to use; 0 means all (emu: 1) */
    unsigned bufsets;                  /* buffer sets per compute unit; 0 means 2 (CUDA: 4) */
    unsigned card_timeout_ms;          /* a run older than this is a fault; 0 means 5000 */
    uint32_t block_size;               /* the stride of the card's buffers; 0 means 1 MiB */
    double emu_card_mbps;              /* emulated kernel rate, MB/s; 0 means 200 */
    double emu_pcie_mbps;              /* emulated PCIe rate each way, MB/s; 0 means 10000 */
    double emu_error_rate;             /* fraction of emulated runs that fail */
    double emu_hang_rate;              /* fraction of emulated runs that never complete */
    double emu_corrupt_rate;           /* fraction of emulated runs that complete with one
                                          wrong byte in a compressed block (a silent bug) */
    uint64_t emu_seed;                 /* fault injection is repeatable for one seed */
    uint64_t emu_vanish_after;         /* emulated card: every run after this many errors
                                          (a card pulled out); 0 means never */
    int emu_card_check;                /* emulated card: a model of a card that checks its own
                                          output (as the CUDA backend's GPU does), so that the
                                          pool compares sums instead of decoding */
    int card_only;                     /* bricks wait for the card instead of falling back
                                          when it is busy (to measure the card alone) */
    unsigned fill_us;                  /* while the card is busy, a brick short of its
                                          capacity waits up to this long for more jobs, and
                                          starts when the card is about to run out of work
                                          (seed 003: fewer, fuller runs); 0 means
                                          ENG_FILL_US_DEFAULT, ENG_FILL_NEVER starts it at
                                          once */
    const char *xclbin;                /* XRT: the xclbin to load (absolute path) */
    unsigned device;                   /* XRT, CUDA: the device index */
    int xrt_kernel_model;              /* XRT under the noop shim: run the reference kernel
                                          over the buffers when a run completes */
} eng_config;

#define ENG_FILL_US_DEFAULT 2000u
#define ENG_FILL_NEVER 0xFFFFFFFFu

typedef struct {
    const uint8_t *src;                /* input bytes of one block */
    uint32_t len;                      /* input length, 1..block size */
    uint8_t *dst;                      /* output buffer of dst_cap bytes */
    uint32_t dst_cap;                  /* at least eng_bound(len) */
    uint32_t out_len;                  /* set by the engine: compressed length, or >= len when
                                          the block did not shrink (store it raw) */
    int want_sums;                     /* the caller also wants the XXH32 checksums an LZ4
                                          frame carries, computed on the compressing thread */
    int sums_done;                     /* set by the engine when it computed them (software
                                          always does when asked; a card's output may not) */
    uint32_t src_sum;                  /* XXH32(src, len, 0) */
    int src_host;                      /* src lies in memory from eng_host_alloc of this
                                          engine: a card reads it where it is, with no copy
                                          into its own buffers first */
    uint32_t out_sum;                  /* XXH32(dst, out_len, 0), when out_len < len */
} eng_job;

typedef struct {
    uint64_t bricks_card;              /* card runs whose output was used */
    uint64_t bricks_sw;                /* bricks compressed in software */
    uint64_t blocks_card;              /* block jobs compressed by the card (verify_failed of
                                          them compressed again in software) */
    uint64_t blocks_sw;                /* block jobs compressed in software */
    uint64_t fallback_busy;            /* bricks sent to software: every buffer set in flight */
    uint64_t fallback_error;           /* bricks sent to software: card fault, time-out or
                                          back-off after one */
    uint64_t fallback_small;           /* block jobs too small for a card run */
    uint64_t sets_written_off;         /* buffer sets put out of use: their run timed out or
                                          failed to start and the card may still hold them */
    uint64_t sets_recovered;           /* of those, back in use once the card let go */
    uint64_t card_idle_us;             /* summed over compute units: time with no run */
    uint64_t bytes_in;                 /* input bytes of all jobs */
    uint64_t bytes_out;                /* output bytes kept (compressed, or raw when larger) */
    uint64_t verify_failed;            /* blocks a card compressed whose output did not decode
                                          to their input: compressed again in software */
    uint64_t blocks_direct;            /* block jobs a card read where they lay (src_host), not
                                          copied into its buffers first */
    uint64_t blocks_checked_on_card;   /* block jobs of a card that checked its own output
                                          (the pool compared sums instead of decoding) */
    uint64_t host_parked;              /* now: buffers of eng_host_free held back while a
                                          written-off run may still read them */
    uint64_t card_ps_per_byte;         /* now: what the scheduler takes the card's rate to
                                          be, picoseconds per input byte (0: not measured) */
    uint64_t card_best_ps;             /* its best run of late, the same unit */
    uint64_t jobs_queued;              /* now: block jobs submitted and not yet in a brick
                                          (waiting for a free set, or to fill one) */
    uint64_t sw_ps_per_byte;           /* one pool thread's rate, the same unit */
} eng_stats;

/* Run by eng_submit_then's ticket once its last job is done, on the thread that finished it
 * (a pool thread, or the submitting thread when the engine compressed the jobs inline). */
typedef void (*eng_then_fn)(void *arg);

/* The caller's handle on jobs submitted with eng_submit; lives as long as they do. */
typedef struct {
    size_t pending;                    /* jobs not finished yet, plus one for a continuation
                                          not yet run (under the engine's lock) */
    pthread_cond_t done;               /* signalled when pending reaches 0 */
    eng_then_fn then;                  /* the continuation, or NULL */
    void *then_arg;
} eng_ticket;

/* Output capacity a job of len bytes needs. */
uint32_t eng_bound(uint32_t len);

/* Opens an engine; on failure returns NULL and writes the reason into err. */
eng_ctx *eng_open(const eng_config *cfg, char *err, size_t err_cap);

/* Compresses every job; returns when all are done. Safe to call from many threads at once. */
void eng_compress(eng_ctx *eng, eng_job *jobs, size_t n_jobs);

/* The same in two halves, so that a writer can fill its next blocks while these compress:
 * eng_submit returns once the jobs are queued (it may compress some itself when every
 * thread is busy); eng_wait returns when all of them are done. The jobs, their buffers and
 * the ticket must stay untouched until eng_wait returns. */
void eng_submit(eng_ctx *eng, eng_job *jobs, size_t n_jobs, eng_ticket *t);
/* eng_submit, and then(arg) once every job is done, before eng_wait returns: a caller's
 * work on the results (writing them out) runs where they were made, while the caller goes
 * on. then must not wait for this engine. */
void eng_submit_then(eng_ctx *eng, eng_job *jobs, size_t n_jobs, eng_ticket *t, eng_then_fn then,
                     void *arg);
void eng_wait(eng_ctx *eng, eng_ticket *t);

/* Memory for block sources that a card reads where it lies (seed 004's zero-copy host
 * buffers): pinned and mapped for the card's DMA with CUDA; ordinary page-aligned memory
 * with the other backends, which then copy as before. Jobs whose src lies in it say so with
 * src_host. NULL when there is no memory; eng_host_free accepts NULL. Memory from it
 * must be given back before eng_close. Registering memory
 * with a card is slow (milliseconds per MiB): callers keep such buffers and reuse them.
 * While a written-off run may still be reading (sets_written_off > sets_recovered),
 * eng_host_free holds the memory back (host_parked) and gives it up once the card let go;
 * eng_close leaves it to the process's exit if the card never does. */
void *eng_host_alloc(eng_ctx *eng, size_t bytes);
void eng_host_free(eng_ctx *eng, void *p, size_t bytes);     /* bytes as allocated */
/* 1 when eng_host_alloc's memory spares copies (a card reads it directly), else 0. */
int eng_host_direct(const eng_ctx *eng);

/* A snapshot of the counters. */
void eng_get_stats(eng_ctx *eng, eng_stats *out);

/* Name of the backend in use: "sw", "emu" for the emulated card, "xrt", "cuda", or a name
 * with "model" in it when a card's kernel is modelled in software. */
const char *eng_backend_name(const eng_ctx *eng);

/* The option name of a backend: "sw", "emu", "xrt", "cuda". */
const char *eng_backend_option(eng_backend b);

/* Writes the names of the backends this host can open, space separated ("sw emu xrt"):
 * sw and emu always, a plugin's backend when its shared object loads. */
void eng_backends_available(char *buf, size_t cap);

/* Whether a real device of a plugin backend is present and usable with cfg (for
 * engine=auto): 1 if so; 0 if not, with the reason in why. Never opens the device for use. */
int eng_probe(eng_backend b, const eng_config *cfg, char *why, size_t why_cap);

/* Waits for runs in flight, stops the threads and frees everything; accepts NULL. */
void eng_close(eng_ctx *eng);

#endif
