/* Inside the engine: bricks, the software pool and the device interface that every card
 * backend (emulated, XRT, CUDA) implements, one file each. */
#ifndef FPGALZ4FS_ENG_INTERNAL_H
#define FPGALZ4FS_ENG_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "eng.h"

#define ENG_MAX_BRICK 512u             /* the largest brick capacity any backend may ask (a
                                          GPU wants tens of MiB: 512 blocks of 64 KiB) */
#define ENG_SW_BRICK 8u                /* a software brick: one pool thread's share */

/* What a card that checks its own output says of one block of a run (eng_bufset.checks). */
typedef struct {
    uint32_t decodes;                  /* 1: the card walked the compressed block against its
                                          input and found that it decodes to exactly it */
    uint32_t src_sum;                  /* XXH32 of the input as the card read it */
    uint32_t out_sum;                  /* XXH32 of the compressed block as the card wrote it */
    uint32_t pad;
} eng_card_check;

typedef struct {
    eng_job *job;                      /* the caller's job */
    eng_ticket *call;                  /* whom to tell when it is done */
    uint64_t queued_ns;                /* when it joined the dispatcher's queue */
    int card_checked;                  /* a card's block with the card's own check in card */
    eng_card_check card;
} eng_task;

/* Up to a brick's capacity of tasks, from one caller or several. */
typedef struct {
    eng_task tasks[ENG_MAX_BRICK];
    uint32_t n;
    uint32_t from_card;                /* a card compressed it: the pool verifies every block
                                          instead of compressing it */
    uint32_t redone;                   /* set by the pool: blocks of the card that did not
                                          decode to their input, compressed again */
} eng_brick;

/* ---- copies of a card's bricks (eng_copy.c) ---- */

typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    size_t len;
} eng_copy;

typedef struct eng_copy_team_s eng_copy_team;
/* Starts the helpers (fewer, or none, if threads cannot start: the caller then copies more). */
eng_copy_team *eng_copy_open(void);
void eng_copy_close(eng_copy_team *t);
/* Does the n copies of bytes in all, shared with the helpers when large. One caller at a
 * time; t may be NULL (the caller copies alone). */
void eng_copy_run(eng_copy_team *t, const eng_copy *c, uint32_t n, size_t bytes);

/* ---- scheduling (eng_sched.c) ---- */

/* Measured rates, in picoseconds per input byte; 0: not measured yet. */
typedef struct {
    uint64_t card_ps_per_byte;         /* the card's pipeline, runs back to back */
    uint64_t sw_ps_per_byte;           /* one pool thread */
    uint32_t card_idle_ppm;            /* the card's recent share of time with no run in
                                          flight, parts per million */
} eng_rates;

/* Above this recent idle share the card keeps up with what it is given, and software takes
 * none of its work (eng_sched.c says why). */
#define ENG_SCHED_IDLE_PPM 20000u

/* How many of the first n queued jobs (lengths lens) one software thread should take while
 * the card is busy: those it finishes before the card would finish the rest of the queue
 * (queued bytes, these included) and the runs in flight (in_flight bytes); none while the
 * card has been idle more than ENG_SCHED_IDLE_PPM of late; 0: leave them to the card. */
unsigned eng_sched_sw_take(const eng_rates *r, const uint32_t *lens, unsigned n,
                           uint64_t queued, uint64_t in_flight);
uint64_t eng_sched_ewma(uint64_t old, uint64_t sample);

/* A deep queue is split only when at least this many jobs at its tail are one call's: a
 * batch handed over at once, not the bricks of many writers (8 blocks each, at most 32 of a
 * writer in the engine). */
#define ENG_SPLIT_BATCH 64u
/* How many of the last jobs of a ring of ring_len tasks (count of them from head), up to
 * most, came in the same call as the last one. */
unsigned eng_sched_tail_batch(const eng_task *ring, unsigned ring_len, unsigned head,
                              unsigned count, unsigned most);
/* One pool thread's rate before it is measured: 400 MB/s, LZ4 level 1 on a server core. */
#define ENG_SCHED_SW_PRIOR_PS 2500u
/* How many of the n jobs at a deep queue's tail an idle software thread takes before the
 * card takes the rest (a card that reads host memory in place, eng.c says why): those it
 * finishes before the card, at the rate r gives (its best run of late), would finish the
 * rest queued and in flight. No idle-share rule (eng_sched.c says why). Unmeasured software
 * is taken at the prior above. */
unsigned eng_sched_sw_split(const eng_rates *r, const uint32_t *lens, unsigned n,
                            uint64_t queued, uint64_t in_flight);
/* The card's best rate of late: the lowest sample, but drifting up by 1/64 a sample so
 * that a card that became slower (shared, throttled) shows within a few dozen samples. */
uint64_t eng_sched_best(uint64_t best, uint64_t sample);
/* A compute unit's runs, taken together for the best rate: one run's cost is the time from
 * the later of its start and the collection before it to its own collection, and a run that
 * ended while the one before it was being collected costs next to nothing, its time counted
 * in that earlier run's. Over a few runs the costs add up to the time the unit was busy. */
#define ENG_RATE_RUNS 8u
typedef struct {
    uint64_t ns, bytes;
    unsigned runs;
} eng_rate_window;
/* Adds one run of bytes that cost ns; returns the window's picoseconds a byte when this run
 * closed it (ENG_RATE_RUNS runs), and 0 while it is open. */
uint64_t eng_sched_window(eng_rate_window *w, uint64_t ns, uint64_t bytes);
/* The idle share after a window of span_ns in which the card was idle idle_ns (summed over
 * compute units, span likewise): half the old share, half this window's. */
uint32_t eng_sched_idle_ppm(uint32_t old, uint64_t idle_ns, uint64_t span_ns);

/* What decides whether a brick short of its capacity starts now (eng_sched_fill_wait). */
typedef struct {
    uint64_t now_ns;
    uint64_t head_ns;                  /* when the oldest queued job was queued */
    uint64_t fill_ns;                  /* the longest a job waits for more to join it */
    uint64_t card_free_ns;             /* when the card is expected to have finished the runs
                                          it holds; 0: a compute unit holds none */
    uint64_t start_ns;                 /* what filling and starting the brick takes */
    unsigned queued, capacity;         /* jobs queued, and how many a brick takes */
} eng_fill;

/* How long, from now, the queued jobs should wait for more before they start as a brick: 0
 * for a full brick, a card with an idle compute unit, or fill_ns 0; otherwise until the
 * earlier of the oldest job's bound and the moment the brick must start so that the card
 * does not run out of work (a run started earlier would only queue behind the card's
 * others, with fewer blocks; seed 003's fewer dispatches). */
uint64_t eng_sched_fill_wait(const eng_fill *f);

/* ---- software pool (eng_sw.c): POOL_add / POOL_tryAdd in zstd's manner ---- */

typedef struct eng_sw_pool_s eng_sw_pool;
/* done(arg, brick) runs on the pool thread once a brick is compressed (or verified). */
typedef void (*eng_sw_done_fn)(void *arg, eng_brick *b);

eng_sw_pool *eng_sw_open(unsigned threads, eng_sw_done_fn done, void *arg, char *err,
                         size_t err_cap);
/* Queues a brick if a thread can take it soon and fewer than most bricks to compress are
 * queued or running; 0 when the pool is saturated. */
int eng_sw_try_add(eng_sw_pool *p, const eng_brick *b, unsigned most);
/* Queues a brick, waiting for room. */
void eng_sw_add(eng_sw_pool *p, const eng_brick *b);
unsigned eng_sw_threads(const eng_sw_pool *p);
/* One pool thread's measured rate over the bricks it compressed, ps per byte; 0: none yet. */
uint64_t eng_sw_ps_per_byte(const eng_sw_pool *p);
void eng_sw_close(eng_sw_pool *p);
/* Compresses one job with liblz4 (also used inline for jobs too small for anything else). */
void eng_sw_compress_job(eng_job *job);
/* Checks a card's output of a task's job against its input: when the card checked it
 * itself (t->card_checked), by the card's verdict and by hashing the input and the output
 * here and comparing with the card's sums (which tells the bytes the host holds are the ones
 * the card checked); else by decoding it into *scratch (grown to the job's length). A wrong
 * one, or one that could not be checked, is compressed again. Returns 1 when the card's
 * output was wrong. */
int eng_sw_verify_task(eng_task *t, uint8_t **scratch, uint32_t *scratch_cap);

/* ---- the device interface ---- */

typedef enum {
    ENG_RUN_IDLE = 0,                  /* nothing started on this buffer set */
    ENG_RUN_RUNNING,                   /* started, not complete: the card is busy with it */
    ENG_RUN_DONE,                      /* complete; outputs may be collected (and checked) */
    ENG_RUN_ERROR,                     /* the card reported an error */
} eng_run_state;

/* One buffer set of one compute unit, as the host sees it: the kernel's six arguments, and
 * for a card that checks its own output, what it found. */
typedef struct {
    uint8_t *in;                       /* capacity * stride bytes: block j at j * stride */
    uint8_t *out;                      /* capacity * stride bytes, same layout */
    uint32_t *sizes;                   /* compressed_size[capacity] */
    uint32_t *in_sizes;                /* in_block_size[capacity] */
    eng_card_check *checks;            /* capacity entries, or NULL: the card checks nothing
                                          and the pool decodes every compressed block */
} eng_bufset;

typedef struct eng_dev_s eng_dev;

typedef struct {
    const char *name;                  /* "emu", "xrt", "cuda" */
    /* Opens the device for bricks of blocks of at most stride bytes. */
    eng_dev *(*open)(const eng_config *cfg, uint32_t stride, char *err, size_t err_cap);
    unsigned (*n_cus)(const eng_dev *d);
    unsigned (*n_sets)(const eng_dev *d);           /* buffer sets per compute unit */
    unsigned (*capacity)(const eng_dev *d);         /* blocks per brick */
    eng_bufset *(*bufset)(eng_dev *d, unsigned cu, unsigned set);
    /* Sends the filled input and starts the kernel; 0 or -errno. Never blocks on the card. */
    int (*start)(eng_dev *d, unsigned cu, unsigned set, uint32_t n_blocks, uint32_t input_size);
    /* The run's state, without blocking: the busy test. After a failed start it says
     * ENG_RUN_RUNNING for as long as work that start queued may still touch the set. */
    eng_run_state (*poll)(eng_dev *d, unsigned cu, unsigned set);
    /* Brings a complete run's outputs back to host memory; 0 or -errno. */
    int (*collect)(eng_dev *d, unsigned cu, unsigned set);
    /* Gives up a run that timed out, without waiting for it: never blocks. The engine
     * writes the set off, and neither refills nor collects it, until poll no longer says
     * ENG_RUN_RUNNING (the same after a failed start). */
    void (*abandon)(eng_dev *d, unsigned cu, unsigned set);
    void (*close)(eng_dev *d);
    /* Optional: the name the counters show for this open device ("xrt-model" when a kernel
     * is modelled); NULL means name. */
    const char *(*label)(const eng_dev *d);
    /* Optional, all three or none: host memory the card reads where it lies (page-aligned;
     * NULL when there is none), its release, and a start that takes block j from src[j]
     * when src[j] is not NULL (memory from host_alloc, left untouched until the run is
     * over) and from the set's input buffer otherwise. The sizes are in the set's in_sizes
     * as for start. Without them the engine copies every block into the set. */
    void *(*host_alloc)(eng_dev *d, size_t bytes);
    void (*host_free)(eng_dev *d, void *p, size_t bytes);
    int (*start_from)(eng_dev *d, unsigned cu, unsigned set, uint32_t n_blocks,
                      uint32_t input_size, const uint8_t *const *src);
} eng_dev_ops;

extern const eng_dev_ops eng_emu_ops;

/* ---- plugins (eng_plugin.c): card backends in shared objects, opened with dlopen ---- */

/* A plugin fpgalz4fs-NAME.so exports one symbol, ENG_PLUGIN_SYMBOL, of this type. It is
 * self-contained: it uses the types of this header and nothing else of the engine, so that
 * it can be loaded by any program linked with the engine. The engine checks abi first. */
#define ENG_PLUGIN_ABI 3u
#define ENG_PLUGIN_SYMBOL "fpgalz4fs_plugin"

typedef struct {
    uint32_t abi;                      /* ENG_PLUGIN_ABI */
    uint32_t config_size;              /* sizeof(eng_config) it was built with */
    const char *name;                  /* "xrt", "cuda": the file is fpgalz4fs-NAME.so */
    const eng_dev_ops *ops;
    /* 1 when a real device is present and usable with cfg, else 0 with the reason. Must
     * return, never crash, on a host without the runtime or the device. */
    int (*probe)(const eng_config *cfg, char *why, size_t why_cap);
} eng_plugin;

typedef struct {
    void *dl;                          /* dlopen handle */
    const eng_plugin *plugin;
} eng_plugin_handle;

/* Loads fpgalz4fs-NAME.so from the plugin directory: $FPGALZ4FS_PLUGIN_DIR when set, else
 * the directory of the running program (a build tree), else the installed one. */
int eng_plugin_load(const char *name, eng_plugin_handle *h, char *err, size_t err_cap);
void eng_plugin_unload(eng_plugin_handle *h);

/* Monotonic clock in nanoseconds. */
uint64_t eng_now_ns(void);

/* Starts threads running fn(arg) into th[*n..wanted), *n counting those started, with
 * every signal blocked in them so that the daemon's handlers run on its own threads.
 * Named name (at most 15 characters) in top -H and perf. Returns 0, or pthread_create's
 * error for the first that did not start. */
int eng_threads_start(pthread_t *th, unsigned *n, unsigned wanted, void *(*fn)(void *),
                      void *arg, const char *name);

#endif
