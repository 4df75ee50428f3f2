#include "eng.h"

#include <errno.h>
#include <lz4.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENG_BRICK_JOBS 8u              /* jobs per brick: what one xilLz4Compress run takes */
#define ENG_RING_PER_THREAD 8u         /* queued bricks per thread before callers go inline */
#define ENG_RING_MIN 64u
#define ENG_MAX_THREADS 1024u

/* One eng_compress call in progress; lives on the caller's stack. */
typedef struct {
    size_t pending;                    /* its bricks queued and not yet finished (under lock) */
    pthread_cond_t done;               /* signalled when pending reaches 0 */
} eng_call;

typedef struct {
    eng_job *jobs;
    size_t n_jobs;
    eng_call *call;
} eng_brick;

struct eng_ctx_s {
    eng_backend backend;
    pthread_t *threads;
    unsigned threads_wanted;
    unsigned n_threads;                /* started so far; eng_close joins exactly these */

    pthread_mutex_t lock;              /* guards the ring, stopping and every eng_call */
    pthread_cond_t work;               /* workers wait here for bricks */
    eng_brick *ring;                   /* fixed at open: the compress path never allocates */
    size_t ring_cap, ring_head, ring_count;
    int stopping;

    atomic_uint_fast64_t blocks_sw, bricks_sw, bytes_in, bytes_out;
};

uint32_t eng_bound(uint32_t len)
{
    int b = LZ4_compressBound((int)len);
    return b > 0 ? (uint32_t)b : 0;
}

/* A block that does not shrink is reported as len: the caller stores it raw. */
static void eng_compress_job(eng_job *job)
{
    int out = 0;
    if (job->len > 0 && job->len <= LZ4_MAX_INPUT_SIZE)
        out = LZ4_compress_default((const char *)job->src, (char *)job->dst, (int)job->len,
                                   (int)(job->dst_cap > INT32_MAX ? INT32_MAX : job->dst_cap));
    job->out_len = (out <= 0 || (uint32_t)out >= job->len) ? job->len : (uint32_t)out;
}

/* Counters are summed per brick so that concurrent bricks touch the shared lines rarely. */
static void eng_run_brick(eng_ctx *eng, const eng_brick *b)
{
    uint64_t in = 0, out = 0;
    for (size_t i = 0; i < b->n_jobs; i++) {
        eng_compress_job(&b->jobs[i]);
        in += b->jobs[i].len;
        out += b->jobs[i].out_len < b->jobs[i].len ? b->jobs[i].out_len : b->jobs[i].len;
    }
    atomic_fetch_add_explicit(&eng->blocks_sw, b->n_jobs, memory_order_relaxed);
    atomic_fetch_add_explicit(&eng->bricks_sw, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&eng->bytes_in, in, memory_order_relaxed);
    atomic_fetch_add_explicit(&eng->bytes_out, out, memory_order_relaxed);
}

/* Called with the lock held. */
static eng_brick eng_ring_pop(eng_ctx *eng)
{
    eng_brick b = eng->ring[eng->ring_head];
    eng->ring_head = (eng->ring_head + 1) % eng->ring_cap;
    eng->ring_count--;
    return b;
}

/* Called with the lock held; 0 when the ring is full. */
static int eng_ring_push(eng_ctx *eng, const eng_brick *b)
{
    if (eng->ring_count == eng->ring_cap)
        return 0;
    eng->ring[(eng->ring_head + eng->ring_count) % eng->ring_cap] = *b;
    eng->ring_count++;
    return 1;
}

/* Pops one brick, runs it without the lock, and tells its caller. Called and returns with the
 * lock held. The signal is sent under the lock, so the caller cannot see pending == 0 and
 * destroy its condition variable before the signal is over. */
static void eng_work_one(eng_ctx *eng)
{
    eng_brick b = eng_ring_pop(eng);
    pthread_mutex_unlock(&eng->lock);
    eng_run_brick(eng, &b);
    pthread_mutex_lock(&eng->lock);
    if (--b.call->pending == 0)
        pthread_cond_signal(&b.call->done);
}

static void *eng_worker(void *arg)
{
    eng_ctx *eng = arg;
    pthread_mutex_lock(&eng->lock);
    while (!eng->stopping) {
        if (eng->ring_count > 0)
            eng_work_one(eng);
        else
            pthread_cond_wait(&eng->work, &eng->lock);
    }
    pthread_mutex_unlock(&eng->lock);
    return NULL;
}

static eng_brick eng_brick_at(eng_job *jobs, size_t n_jobs, size_t first, eng_call *call)
{
    size_t left = n_jobs - first;
    eng_brick b = {jobs + first, left < ENG_BRICK_JOBS ? left : ENG_BRICK_JOBS, call};
    return b;
}

/* Queues every brick but the first, which this thread keeps for itself; a brick that finds
 * the ring full is run right here. Called with the lock held. */
static void eng_queue_bricks(eng_ctx *eng, eng_job *jobs, size_t n_jobs, eng_call *call)
{
    for (size_t first = ENG_BRICK_JOBS; first < n_jobs; first += ENG_BRICK_JOBS) {
        eng_brick b = eng_brick_at(jobs, n_jobs, first, call);
        if (eng_ring_push(eng, &b)) {
            call->pending++;
            pthread_cond_signal(&eng->work);
            continue;
        }
        pthread_mutex_unlock(&eng->lock);
        eng_run_brick(eng, &b);
        pthread_mutex_lock(&eng->lock);
    }
}

void eng_compress(eng_ctx *eng, eng_job *jobs, size_t n_jobs)
{
    if (n_jobs == 0)
        return;
    eng_brick mine = eng_brick_at(jobs, n_jobs, 0, NULL);
    if (n_jobs <= ENG_BRICK_JOBS) {   /* one brick: nothing to share, no lock, no switch */
        eng_run_brick(eng, &mine);
        return;
    }
    eng_call call = {.pending = 0};
    pthread_cond_init(&call.done, NULL);
    pthread_mutex_lock(&eng->lock);
    eng_queue_bricks(eng, jobs, n_jobs, &call);
    pthread_mutex_unlock(&eng->lock);
    eng_run_brick(eng, &mine);
    /* Helping with whatever is queued (ours or another caller's) beats sleeping. */
    pthread_mutex_lock(&eng->lock);
    while (call.pending > 0) {
        if (eng->ring_count > 0)
            eng_work_one(eng);
        else
            pthread_cond_wait(&call.done, &eng->lock);
    }
    pthread_mutex_unlock(&eng->lock);
    pthread_cond_destroy(&call.done);
}

static unsigned eng_thread_count(unsigned wanted)
{
    if (wanted == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        wanted = cores > 0 ? (unsigned)cores : 1u;
    }
    return wanted > ENG_MAX_THREADS ? ENG_MAX_THREADS : wanted;
}

/* Workers block every signal so that the daemon's handlers run on its own threads. */
static int eng_start_threads(eng_ctx *eng, char *err, size_t err_cap)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    for (; eng->n_threads < eng->threads_wanted; eng->n_threads++) {
        rc = pthread_create(&eng->threads[eng->n_threads], NULL, eng_worker, eng);
        if (rc != 0)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        snprintf(err, err_cap, "cannot start software compression threads: %s", strerror(rc));
    return rc == 0 ? 0 : -1;
}

static eng_ctx *eng_alloc(unsigned threads)
{
    eng_ctx *eng = calloc(1, sizeof(*eng));
    if (!eng)
        return NULL;
    eng->threads_wanted = threads;
    eng->ring_cap = threads * ENG_RING_PER_THREAD;
    if (eng->ring_cap < ENG_RING_MIN)
        eng->ring_cap = ENG_RING_MIN;
    eng->threads = calloc(threads, sizeof(*eng->threads));
    eng->ring = calloc(eng->ring_cap, sizeof(*eng->ring));
    if (!eng->threads || !eng->ring) {
        free(eng->threads);
        free(eng->ring);
        free(eng);
        return NULL;
    }
    pthread_mutex_init(&eng->lock, NULL);
    pthread_cond_init(&eng->work, NULL);
    return eng;
}

eng_ctx *eng_open(const eng_config *cfg, char *err, size_t err_cap)
{
    eng_config defaults = {.backend = ENG_BACKEND_SW, .sw_threads = 0};
    if (!cfg)
        cfg = &defaults;
    if (cfg->backend != ENG_BACKEND_SW) {
        snprintf(err, err_cap, "unknown compression backend %d", (int)cfg->backend);
        return NULL;
    }
    eng_ctx *eng = eng_alloc(eng_thread_count(cfg->sw_threads));
    if (!eng) {
        snprintf(err, err_cap, "cannot allocate the engine: %s", strerror(ENOMEM));
        return NULL;
    }
    eng->backend = cfg->backend;
    if (eng_start_threads(eng, err, err_cap) != 0) {
        eng_close(eng);
        return NULL;
    }
    return eng;
}

void eng_get_stats(eng_ctx *eng, eng_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->blocks_sw = atomic_load_explicit(&eng->blocks_sw, memory_order_relaxed);
    out->bricks_sw = atomic_load_explicit(&eng->bricks_sw, memory_order_relaxed);
    out->bytes_in = atomic_load_explicit(&eng->bytes_in, memory_order_relaxed);
    out->bytes_out = atomic_load_explicit(&eng->bytes_out, memory_order_relaxed);
}

const char *eng_backend_name(const eng_ctx *eng)
{
    (void)eng;   /* one backend so far */
    return "sw";
}

void eng_close(eng_ctx *eng)
{
    if (!eng)
        return;
    pthread_mutex_lock(&eng->lock);
    eng->stopping = 1;
    pthread_cond_broadcast(&eng->work);
    pthread_mutex_unlock(&eng->lock);
    for (unsigned i = 0; i < eng->n_threads; i++)
        pthread_join(eng->threads[i], NULL);
    pthread_cond_destroy(&eng->work);
    pthread_mutex_destroy(&eng->lock);
    free(eng->threads);
    free(eng->ring);
    free(eng);
}
