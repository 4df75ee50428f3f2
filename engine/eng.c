/* The engine's front: block jobs in, bricks out to the card or to the software pool.
 *
 * One dispatcher thread owns the card. It packs queued jobs (from any caller) into bricks,
 * fills a free buffer set and starts it, polls the sets in flight without blocking, checks
 * and collects the finished ones, and hands a brick to the software pool when every buffer
 * set is in flight, when the card failed, or while it backs off after a failure. With two or
 * more buffer sets per compute unit, the host fills brick k+1 and collects brick k-1 while
 * the card compresses brick k (docs/ARCHITECTURE.md has the timeline).
 *
 * Lock order: eng_ctx.lock, then the software pool's lock (never the other way round: pool
 * threads report through eng_finish, which takes eng_ctx.lock with the pool lock released). */
#include <errno.h>
#include <lz4.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_internal.h"

#define ENG_SENTINEL 0xFFFFFFFFu       /* written into the size array before each run */
#define ENG_SMALL_JOB 1024u            /* below this a card run costs more than it saves */
#define ENG_INLINE_SW 16384u           /* a software call this small is compressed by the
                                          caller: the pool's two thread switches would cost
                                          more than the compression (a small file's close) */
#define ENG_QUEUE_JOBS 1024u           /* jobs waiting for a brick */
#define ENG_POLL_NS 100000u            /* dispatcher poll period while runs are in flight */
#define ENG_FILL_LEAD_NS (2ull * ENG_POLL_NS) /* a waiting brick starts this much before the
                                          card is expected to run out of work, besides its
                                          own fill time: the dispatcher looks this often */
#define ENG_OFF_POLL_NS 10000000u      /* and while only written-off sets are out */
#define ENG_IDLE_WINDOW_NS 10000000ull /* the card's idle share is sampled this often */
#define ENG_IDLE_PAUSE_NS 20000000ull  /* an idle gap this long is a pause, not keeping up */
#define ENG_BACKOFF_MIN_NS 50000000ull
#define ENG_BACKOFF_MAX_NS 5000000000ull

/* A buffer set, as the dispatcher sees it. A run that timed out or whose start failed
 * cannot be cancelled, and the card may still read or write the set's buffers: the set is
 * written off, never refilled and never waited for, until the device says the run is over
 * (poll no longer ENG_RUN_RUNNING). */
typedef enum {
    ENG_SLOT_FREE = 0,                 /* may be filled and started */
    ENG_SLOT_RUNNING,                  /* a run of ours is in flight */
    ENG_SLOT_OFF,                      /* written off: the card may still hold the buffers */
} eng_slot_state;

typedef struct {
    eng_brick brick;                   /* the tasks of the run in flight */
    eng_slot_state state;
    uint64_t started_ns;
    uint64_t bytes;                    /* input bytes of the brick */
} eng_slot;

typedef struct {
    unsigned in_flight;                /* runs started and not yet collected */
    uint64_t last_done_ns;             /* when its latest run was collected */
    uint64_t idle_since_ns;            /* when in_flight last dropped to 0 */
    uint64_t idle_ns;                  /* idle time before idle_since_ns */
    uint64_t busy_until_ns;            /* when the runs started on it are expected to end,
                                          at the card's measured rate */
    eng_rate_window window;            /* its latest runs, for the best rate */
} eng_cu;

typedef struct {
    _Atomic uint64_t bricks_card, bricks_sw, blocks_card, blocks_sw, fallback_busy,
        fallback_error, fallback_small, bytes_in, bytes_out, sets_written_off, sets_recovered,
        verify_failed, blocks_direct, blocks_checked_on_card;
} eng_counters;

/* Host memory given back while a written-off run may still read it (a hung GPU's copy from
 * pinned memory): kept until no set is written off. */
typedef struct {
    struct eng_parked_buf {
        void *p;
        size_t bytes;
    } *buf;
    size_t n, cap;
} eng_parked;

struct eng_ctx_s {
    eng_config cfg;
    const eng_dev_ops *ops;            /* NULL: software only */
    eng_dev *dev;
    eng_plugin_handle plugin;          /* the shared object behind ops, for xrt and cuda */
    eng_sw_pool *sw;
    unsigned n_cus, n_sets, capacity;
    uint32_t stride;
    int card_checks;                   /* the card checks its own output (eng_bufset.checks) */

    pthread_mutex_t lock;              /* guards everything below */
    pthread_cond_t wake;               /* the dispatcher waits here for jobs */
    pthread_cond_t room;               /* callers wait here when the queue is full */
    eng_task *queue;                   /* fixed ring of jobs waiting for a brick */
    unsigned q_head, q_count;
    eng_slot *slots;                   /* n_cus * n_sets; only the dispatcher touches them */
    eng_cu *cus;
    unsigned slots_in_flight;          /* slots in ENG_SLOT_RUNNING */
    unsigned slots_off;                /* slots in ENG_SLOT_OFF */
    uint64_t q_bytes;                  /* input bytes of the queued jobs */
    uint64_t in_flight_bytes;          /* input bytes of the runs in flight */
    uint64_t card_ps_per_byte;         /* the card's measured rate (dispatcher only) */
    uint64_t card_best_ps;             /* its best run of late (eng_sched_best) */
    uint64_t start_ps_per_byte;        /* filling and starting a run, per input byte */
    uint64_t fill_ns;                  /* cfg.fill_us; 0: bricks start at once */
    uint64_t win_start_ns, win_idle_ns; /* the window the card's idle share is sampled over */
    uint32_t card_idle_ppm;            /* that share of late (dispatcher only) */
    uint64_t backoff_ns, backoff_until_ns;
    uint64_t episode_ns;               /* when the latest rest began: runs started before
                                          it failed in that episode */
    int stopping;
    pthread_t dispatcher;
    int dispatcher_started;
    eng_copy_team *copies;             /* the dispatcher's helpers for a brick's copies */
    eng_parked parked;                 /* host memory freed while a set was written off */

    eng_counters n;
};

uint64_t eng_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int eng_threads_start(pthread_t *th, unsigned *n, unsigned wanted, void *(*fn)(void *),
                      void *arg, const char *name)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    for (; *n < wanted && rc == 0; *n += rc == 0)
        if ((rc = pthread_create(&th[*n], NULL, fn, arg)) == 0)
            pthread_setname_np(th[*n], name);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

uint32_t eng_bound(uint32_t len)
{
    int b = LZ4_compressBound((int)len);
    return b > 0 ? (uint32_t)b : 0;
}

const char *eng_backend_option(eng_backend b)
{
    static const char *const names[] = {"sw", "emu", "xrt", "cuda"};
    return (unsigned)b < sizeof(names) / sizeof(names[0]) ? names[b] : "unknown";
}

void eng_backends_available(char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "sw emu");
    for (eng_backend b = ENG_BACKEND_XRT; b <= ENG_BACKEND_CUDA && len < cap; b++) {
        char err[256];
        eng_plugin_handle h;
        if (eng_plugin_load(eng_backend_option(b), &h, err, sizeof(err)) != 0)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, " %s", eng_backend_option(b));
        eng_plugin_unload(&h);
    }
}

int eng_probe(eng_backend b, const eng_config *cfg, char *why, size_t why_cap)
{
    if (b != ENG_BACKEND_XRT && b != ENG_BACKEND_CUDA) {
        snprintf(why, why_cap, "%s is not a card backend", eng_backend_option(b));
        return 0;
    }
    eng_plugin_handle h;
    if (eng_plugin_load(eng_backend_option(b), &h, why, why_cap) != 0)
        return 0;
    eng_config c = *cfg;
    int present = h.plugin->probe(&c, why, why_cap);
    eng_plugin_unload(&h);
    return present == 1;
}

const char *eng_backend_name(const eng_ctx *eng)
{
    if (!eng->ops)
        return "sw";
    return eng->ops->label ? eng->ops->label(eng->dev) : eng->ops->name;
}

static void eng_account(eng_ctx *eng, const eng_job *j)
{
    eng->n.bytes_in += j->len;
    eng->n.bytes_out += j->out_len < j->len ? j->out_len : j->len;
}

/* A ticket's continuation, outside the engine lock; its waiter wakes after it. */
static void eng_run_then(eng_ctx *eng, eng_ticket *c)
{
    c->then(c->then_arg);
    pthread_mutex_lock(&eng->lock);
    if (--c->pending == 0)
        pthread_cond_signal(&c->done);
    pthread_mutex_unlock(&eng->lock);
}

/* Tells each task's caller that it is done, and runs the continuation of a ticket whose
 * last job this was. Takes the engine lock. */
static void eng_finish(eng_ctx *eng, const eng_brick *b)
{
    for (uint32_t i = 0; i < b->n; i++)
        eng_account(eng, b->tasks[i].job);
    if (b->from_card) {                /* a share of a card run, counted when it was reaped */
        eng->n.blocks_card += b->n;    /* verify_failed of them then done again in software */
        eng->n.verify_failed += b->redone;
        eng->n.blocks_checked_on_card += b->tasks[0].card_checked ? b->n : 0;
    } else {
        eng->n.bricks_sw++;
        eng->n.blocks_sw += b->n;
    }
    eng_ticket *then[ENG_MAX_BRICK];
    uint32_t n_then = 0;
    pthread_mutex_lock(&eng->lock);
    for (uint32_t i = 0; i < b->n; i++) {
        eng_ticket *c = b->tasks[i].call;
        if (--c->pending == 0)
            pthread_cond_signal(&c->done);
        else if (c->pending == 1 && c->then)
            then[n_then++] = c;        /* only its continuation is left */
    }
    pthread_mutex_unlock(&eng->lock);
    for (uint32_t i = 0; i < n_then; i++)
        eng_run_then(eng, then[i]);
}

static void eng_sw_done(void *arg, eng_brick *b) { eng_finish(arg, b); }

/* ---- the card side (dispatcher thread only) ---- */

static eng_slot *eng_slot_at(eng_ctx *eng, unsigned cu, unsigned set)
{
    return &eng->slots[cu * eng->n_sets + set];
}

/* A free buffer set on the compute unit with the fewest runs in flight, or -1. */
static int eng_free_slot(eng_ctx *eng, unsigned *cu_out, unsigned *set_out)
{
    int found = 0;
    for (unsigned cu = 0; cu < eng->n_cus; cu++) {
        if (found && eng->cus[cu].in_flight >= eng->cus[*cu_out].in_flight)
            continue;
        for (unsigned set = 0; set < eng->n_sets; set++)
            if (eng_slot_at(eng, cu, set)->state == ENG_SLOT_FREE) {
                *cu_out = cu, *set_out = set, found = 1;
                break;
            }
    }
    return found ? 0 : -1;
}

/* Time with no run in flight until now, summed over compute units. Lock held. */
static uint64_t eng_idle_ns(const eng_ctx *eng, uint64_t now)
{
    uint64_t idle = 0;
    for (unsigned cu = 0; eng->ops && cu < eng->n_cus; cu++) {
        const eng_cu *c = &eng->cus[cu];
        idle += c->idle_ns + (c->in_flight ? 0 : now - c->idle_since_ns);
    }
    return idle;
}

/* A card that sat idle for a pause (nobody had work for it) starts its idle share afresh:
 * that pause says nothing of whether it keeps up with the work that ends it. */
static void eng_cu_busy(eng_ctx *eng, unsigned cu, int delta, uint64_t now)
{
    eng_cu *c = &eng->cus[cu];
    if (delta > 0 && c->in_flight++ == 0) {
        c->idle_ns += now - c->idle_since_ns;
        if (now - c->idle_since_ns > ENG_IDLE_PAUSE_NS) {
            eng->card_idle_ppm = 0;
            eng->win_start_ns = now, eng->win_idle_ns = eng_idle_ns(eng, now);
        }
    }
    if (delta < 0 && --c->in_flight == 0)
        c->idle_since_ns = now;
}

/* Follows the card's idle share, one window at a time. Dispatcher, lock held. */
static void eng_idle_sample(eng_ctx *eng, uint64_t now)
{
    if (now - eng->win_start_ns < ENG_IDLE_WINDOW_NS)
        return;
    uint64_t idle = eng_idle_ns(eng, now);
    eng->card_idle_ppm = eng_sched_idle_ppm(eng->card_idle_ppm, idle - eng->win_idle_ns,
                                            (now - eng->win_start_ns) * eng->n_cus);
    eng->win_start_ns = now, eng->win_idle_ns = idle;
}

/* Takes up to max queued jobs; returns their input bytes. Called with the lock held. */
static uint64_t eng_take_brick(eng_ctx *eng, eng_brick *b, unsigned max)
{
    uint64_t bytes = 0;
    b->n = 0, b->from_card = 0;
    while (eng->q_count > 0 && b->n < max) {
        b->tasks[b->n++] = eng->queue[eng->q_head];
        bytes += eng->queue[eng->q_head].job->len;
        eng->q_head = (eng->q_head + 1) % ENG_QUEUE_JOBS;
        eng->q_count--;
    }
    eng->q_bytes -= bytes;
    pthread_cond_broadcast(&eng->room);
    return bytes;
}

/* Copies the brick into the set's input buffer, but for the blocks the card reads where
 * they lie (src_host, on a card that can), plants the sentinel, starts the run. */
static int eng_fill_and_start(eng_ctx *eng, unsigned cu, unsigned set, const eng_brick *b)
{
    eng_bufset *bs = eng->ops->bufset(eng->dev, cu, set);
    eng_copy c[ENG_MAX_BRICK];
    const uint8_t *from[ENG_MAX_BRICK];
    uint32_t n = 0, direct = 0;
    size_t bytes = 0;
    for (uint32_t j = 0; j < b->n; j++) {
        const eng_job *job = b->tasks[j].job;
        from[j] = job->src_host && eng->ops->start_from ? job->src : NULL;
        if (!from[j]) {
            c[n++] = (eng_copy){bs->in + (size_t)j * eng->stride, job->src, job->len};
            bytes += job->len;
        }
        direct += from[j] != NULL;
        bs->in_sizes[j] = job->len;
        bs->sizes[j] = ENG_SENTINEL;
    }
    eng_copy_run(eng->copies, c, n, bytes);
    eng->n.blocks_direct += direct;
    uint32_t input = (b->n - 1) * eng->stride + bs->in_sizes[b->n - 1];
    if (direct)
        return eng->ops->start_from(eng->dev, cu, set, b->n, input, from);
    return eng->ops->start(eng->dev, cu, set, b->n, input);
}

/* The card's output is used only if every size is plausible: 0 or the sentinel for a
 * non-empty block, or a size past the stride, is a fault; a size from the block's length up
 * to the stride means the block did not shrink. */
static int eng_check_and_copy(eng_ctx *eng, eng_bufset *bs, eng_brick *b)
{
    for (uint32_t j = 0; j < b->n; j++) {
        uint32_t s = bs->sizes[j];
        if (s == 0 || s == ENG_SENTINEL || s > eng->stride)
            return -EIO;
    }
    eng_copy c[ENG_MAX_BRICK];
    uint32_t n = 0;
    size_t bytes = 0;
    for (uint32_t j = 0; j < b->n; j++) {
        eng_job *job = b->tasks[j].job;
        uint32_t s = bs->sizes[j];
        b->tasks[j].card_checked = bs->checks != NULL;
        if (bs->checks)
            b->tasks[j].card = bs->checks[j];
        job->out_len = s >= job->len ? job->len : s;
        if (s < job->len) {
            c[n++] = (eng_copy){job->dst, bs->out + (size_t)j * eng->stride, s};
            bytes += s;
        }
    }
    eng_copy_run(eng->copies, c, n, bytes);
    return 0;
}

/* A card's output is checked before anyone sees it, on the pool, a few blocks per thread: a
 * GPU's run is tens of blocks, too many for one thread to decode at the card's rate. */
#define ENG_VERIFY_SHARE 2u
static void eng_verify_on_pool(eng_ctx *eng, const eng_brick *run)
{
    for (uint32_t first = 0; first < run->n; first += ENG_VERIFY_SHARE) {
        eng_brick share = {.n = 0, .from_card = 1};
        for (uint32_t i = first; i < run->n && share.n < ENG_VERIFY_SHARE; i++)
            share.tasks[share.n++] = run->tasks[i];
        eng_sw_add(eng->sw, &share);
    }
}

/* A fault, an error or a time-out: the same input goes to software, the card rests. */
static void eng_fault(eng_ctx *eng, eng_slot *s, uint64_t now)
{
    /* A card that goes wrong fails every run it holds: runs started before the latest rest
     * began belong to that episode and must not lengthen the rest again, or one bad moment
     * with several sets in flight would rest the card for seconds. Nothing starts during a
     * rest, so a run started after it ran on a rested card: its fault is a new one. (Moving
     * the mark with every fault would let staggered hung runs discount each other forever.) */
    if (s->started_ns >= eng->episode_ns || eng->backoff_ns == 0) {
        eng->backoff_ns = eng->backoff_ns ? 2 * eng->backoff_ns : ENG_BACKOFF_MIN_NS;
        if (eng->backoff_ns > ENG_BACKOFF_MAX_NS)
            eng->backoff_ns = ENG_BACKOFF_MAX_NS;
        eng->backoff_until_ns = now + eng->backoff_ns;
        eng->episode_ns = now;
    }
    eng->n.fallback_error++;
    eng_sw_add(eng->sw, &s->brick);
}

/* The card's rate, from the time between a run's collection and the later of its start and
 * the collection before it on its compute unit: with several sets in flight, runs overlap,
 * and that gap is what each one cost the card. The average takes every run; the best takes
 * windows of runs, since a run collected right after another one (both ended while the
 * dispatcher was busy) has a gap near zero: alone it read 7-23 ps a byte on a card whose
 * kernel takes 40. Dispatcher thread only. */
static void eng_card_rate(eng_ctx *eng, unsigned cu, const eng_slot *s, uint64_t now)
{
    eng_cu *c = &eng->cus[cu];
    uint64_t from = s->started_ns > c->last_done_ns ? s->started_ns : c->last_done_ns;
    c->last_done_ns = now;
    if (s->bytes == 0)
        return;
    if (now > from)
        eng->card_ps_per_byte = eng_sched_ewma(eng->card_ps_per_byte,
                                               (now - from) * 1000 / s->bytes);
    uint64_t ps = eng_sched_window(&c->window, now > from ? now - from : 0, s->bytes);
    if (ps)
        eng->card_best_ps = eng_sched_best(eng->card_best_ps, ps);
}

/* Polls one set in flight; returns 1 if it is finished (one way or the other): done, or
 * failed (*fault set: its brick goes to software once the set is ended, eng_reap_all), and
 * written off (*off set) when it ran past card_timeout_ms. Never waits for the card. Called
 * with the lock released. */
static int eng_reap(eng_ctx *eng, unsigned cu, unsigned set, uint64_t now, int *off,
                    int *fault)
{
    eng_slot *s = eng_slot_at(eng, cu, set);
    eng_run_state st = eng->ops->poll(eng->dev, cu, set);
    *off = 0, *fault = 0;
    if (st == ENG_RUN_RUNNING && now - s->started_ns <= eng->cfg.card_timeout_ms * 1000000ull)
        return 0;
    if (st == ENG_RUN_RUNNING) {
        eng->ops->abandon(eng->dev, cu, set);
        *off = 1;
    }
    int ok = st == ENG_RUN_DONE && eng->ops->collect(eng->dev, cu, set) == 0 &&
             eng_check_and_copy(eng, eng->ops->bufset(eng->dev, cu, set), &s->brick) == 0;
    if (ok) {
        eng->backoff_ns = 0;
        eng->n.bricks_card++;
        eng_card_rate(eng, cu, s, now);
        eng_verify_on_pool(eng, &s->brick);
    } else {
        *fault = 1;
    }
    return 1;
}

/* Called with the lock held, after eng_slot_end: the failed run's brick goes to software
 * with the lock released (the pool may make this thread wait for room). Only after the set
 * is ended and counted (sets_written_off), since its callers may finish at once: a test
 * that read the counters after its call returned saw the set not yet written off. */
static void eng_fault_unlocked(eng_ctx *eng, eng_slot *s, uint64_t now)
{
    pthread_mutex_unlock(&eng->lock);
    eng_fault(eng, s, now);
    pthread_mutex_lock(&eng->lock);
}

/* Called with the lock held: a run of ours is over; the set is free again, or written off
 * while the card may still hold it. */
static void eng_slot_end(eng_ctx *eng, unsigned cu, eng_slot *s, int off, uint64_t now)
{
    s->state = off ? ENG_SLOT_OFF : ENG_SLOT_FREE;
    eng->slots_in_flight--;
    eng->in_flight_bytes -= s->bytes;
    eng->slots_off += off != 0;
    eng->n.sets_written_off += off != 0;
    eng_cu_busy(eng, cu, -1, now);
}

/* A written-off set comes back once the device says its run is over. Called with the lock
 * released; returns 1 when it came back. */
static int eng_revive(eng_ctx *eng, unsigned cu, unsigned set)
{
    return eng->ops->poll(eng->dev, cu, set) != ENG_RUN_RUNNING;
}

static void eng_unpark(eng_ctx *eng);

/* Collects every finished run and takes back written-off sets the card let go of. Called
 * and returns with the lock held. */
static int eng_reap_all(eng_ctx *eng)
{
    int progress = 0;
    for (unsigned cu = 0; cu < eng->n_cus; cu++)
        for (unsigned set = 0; set < eng->n_sets; set++) {
            eng_slot *s = eng_slot_at(eng, cu, set);
            eng_slot_state was = s->state;
            if (was == ENG_SLOT_FREE)
                continue;
            pthread_mutex_unlock(&eng->lock);
            uint64_t now = eng_now_ns();
            int off = 0, fault = 0;
            int done = was == ENG_SLOT_RUNNING ? eng_reap(eng, cu, set, now, &off, &fault)
                                               : eng_revive(eng, cu, set);
            pthread_mutex_lock(&eng->lock);
            if (done && was == ENG_SLOT_RUNNING) {
                eng_slot_end(eng, cu, s, off, now);
                progress = 1;
                if (fault)
                    eng_fault_unlocked(eng, s, now);
            } else if (done) {
                s->state = ENG_SLOT_FREE, eng->slots_off--, eng->n.sets_recovered++;
                progress = 1;
            }
        }
    if (eng->slots_off == 0 && eng->parked.n > 0)
        eng_unpark(eng);
    return progress;
}

/* How many pool threads may compress at once: all of them while the card rests; while it
 * works, half, so that its runs are verified as fast as they come back (a GPU's 13 GB/s
 * needs about six threads decoding at 2.2 GB/s each), or all but a quarter when the card
 * checked them itself and the pool only compares sums (which the frames need anyway). */
static unsigned eng_sw_room(const eng_ctx *eng, int resting)
{
    unsigned n = eng_sw_threads(eng->sw);
    if (resting || eng->slots_in_flight == 0)
        return n;
    return eng->card_checks ? n - n / 4 : (n + 1) / 2;
}

/* How many of the first max queued jobs software should take while the card is busy
 * (eng_sched.c). Called with the lock held. */
static unsigned eng_sw_share(eng_ctx *eng, unsigned max)
{
    uint32_t lens[ENG_SW_BRICK];
    unsigned n = 0;
    for (; n < max && n < eng->q_count; n++)
        lens[n] = eng->queue[(eng->q_head + n) % ENG_QUEUE_JOBS].job->len;
    eng_idle_sample(eng, eng_now_ns());
    eng_rates r = {eng->card_ps_per_byte, eng_sw_ps_per_byte(eng->sw), eng->card_idle_ppm};
    return eng_sched_sw_take(&r, lens, n, eng->q_bytes, eng->in_flight_bytes);
}

/* A deep queue is shared before the card takes it all: an idle pool thread takes from the
 * queue's tail the jobs it finishes before the card, at its best rate of late, would finish
 * everything else queued and in flight. Both then end together, which is how card and
 * software add up (a card that holds a whole batch in its buffer sets would otherwise leave
 * software nothing). Measured against the card's best run, not its average, so that a card
 * fed too slowly to be busy never looks slow enough to be helped. Only when the queue ends
 * in a batch of one call's (ENG_SPLIT_BATCH jobs): the bricks of many writers, each waiting
 * for its own, lose more than they gain when one of them goes to a pool thread 40 times
 * slower than the card, and the cores it takes were the writers' (8 writers through the
 * filesystem were 6 % slower when they were split too). Only for a card that
 * reads host memory in place, and jobs in such memory (the queue's first): where the host
 * copies every brick in, the cores software takes are the card's, and on a GPU host the
 * two together fell to 0.92-0.98x the card alone (docs/BENCHMARKS.md). Returns 1 when a
 * brick went to the pool. Called and returns with the lock held. */
static int eng_sw_split(eng_ctx *eng)
{
    if (eng_sched_tail_batch(eng->queue, ENG_QUEUE_JOBS, eng->q_head, eng->q_count,
                             ENG_SPLIT_BATCH) < ENG_SPLIT_BATCH)
        return 0;
    uint32_t lens[ENG_SW_BRICK];
    unsigned n = eng->q_count < ENG_SW_BRICK ? eng->q_count : ENG_SW_BRICK;
    for (unsigned i = 0; i < n; i++)   /* from the tail back */
        lens[i] = eng->queue[(eng->q_head + eng->q_count - 1 - i) % ENG_QUEUE_JOBS].job->len;
    eng_rates r = {eng->card_best_ps, eng_sw_ps_per_byte(eng->sw), eng->card_idle_ppm};
    unsigned k = eng_sched_sw_split(&r, lens, n, eng->q_bytes, eng->in_flight_bytes);
    if (k == 0)
        return 0;
    eng_brick b = {.n = k};
    uint64_t bytes = 0;
    for (unsigned i = 0; i < k; i++) {
        b.tasks[i] = eng->queue[(eng->q_head + eng->q_count - k + i) % ENG_QUEUE_JOBS];
        bytes += b.tasks[i].job->len;
    }
    if (!eng_sw_try_add(eng->sw, &b, eng_sw_room(eng, 0)))
        return 0;
    eng->q_count -= k, eng->q_bytes -= bytes;
    eng->n.fallback_busy++;
    pthread_cond_broadcast(&eng->room);
    return 1;
}

/* A run of bytes starts on compute unit cu: when the card will have finished what that unit
 * holds, at its measured rate (it takes a unit's runs one after the other). Lock held. */
static void eng_cu_plan(eng_ctx *eng, unsigned cu, uint64_t bytes, uint64_t now)
{
    eng_cu *c = &eng->cus[cu];
    uint64_t from = c->busy_until_ns > now ? c->busy_until_ns : now;
    c->busy_until_ns = from + bytes * eng->card_ps_per_byte / 1000;
}

/* How long the queued jobs wait for more before they start as a brick (eng_sched.c). Before
 * the card's rate is known, or while stopping, nothing waits. Lock held. */
static uint64_t eng_fill_wait(const eng_ctx *eng, uint64_t now)
{
    if (!eng->fill_ns || eng->stopping || eng->card_ps_per_byte == 0 || eng->q_count == 0)
        return 0;
    uint64_t free_ns = UINT64_MAX;
    for (unsigned cu = 0; cu < eng->n_cus; cu++) {
        const eng_cu *c = &eng->cus[cu];
        if (c->in_flight == 0)
            return 0;
        free_ns = c->busy_until_ns < free_ns ? c->busy_until_ns : free_ns;
    }
    eng_fill f = {.now_ns = now,
                  .head_ns = eng->queue[eng->q_head].queued_ns,
                  .fill_ns = eng->fill_ns,
                  .card_free_ns = free_ns,
                  .start_ns = eng->q_bytes * eng->start_ps_per_byte / 1000 + ENG_FILL_LEAD_NS,
                  .queued = eng->q_count,
                  .capacity = eng->capacity};
    return eng_sched_fill_wait(&f);
}

/* Sends one brick somewhere if it can; 0 when both the card and the pool are full, or when
 * the jobs are better left for the card. Called and returns with the lock held. */
static int eng_dispatch_one(eng_ctx *eng)
{
    unsigned cu = 0, set = 0;
    uint64_t now = eng_now_ns();
    int resting = now < eng->backoff_until_ns;
    eng_brick b;
    if (!resting && !eng->cfg.card_only && eng_host_direct(eng) &&
        eng->queue[eng->q_head].job->src_host && eng_sw_split(eng))
        return 1;
    if (!resting && eng_free_slot(eng, &cu, &set) == 0) {
        if (eng_fill_wait(eng, now) > 0)
            return 0;                  /* more jobs may join before the card needs them */
        eng_slot *s = eng_slot_at(eng, cu, set);
        s->bytes = eng_take_brick(eng, &s->brick, eng->capacity);
        s->state = ENG_SLOT_RUNNING, s->started_ns = now, eng->slots_in_flight++;
        eng->in_flight_bytes += s->bytes;
        eng_cu_busy(eng, cu, +1, now);
        eng_cu_plan(eng, cu, s->bytes, now);
        pthread_mutex_unlock(&eng->lock);
        int rc = eng_fill_and_start(eng, cu, set, &s->brick);
        uint64_t took = eng_now_ns() - now;
        pthread_mutex_lock(&eng->lock);
        if (s->bytes)
            eng->start_ps_per_byte = eng_sched_ewma(eng->start_ps_per_byte,
                                                    took * 1000 / s->bytes);
        if (rc < 0) {                  /* work it queued may still run on the card */
            eng_slot_end(eng, cu, s, 1, now);
            eng_fault_unlocked(eng, s, now);
        }
        return 1;
    }
    if (eng->cfg.card_only && !resting)
        return 0;
    /* A card's brick may be tens of MiB: software takes a pool thread's share at a time,
     * and while the card works, only what that thread finishes before the card would. */
    unsigned max = eng->capacity < ENG_SW_BRICK ? eng->capacity : ENG_SW_BRICK;
    if (!resting && eng->slots_in_flight > 0)
        max = eng_sw_share(eng, max);
    if (max == 0)
        return 0;                      /* the card's next free set takes them */
    uint64_t taken = eng_take_brick(eng, &b, max);
    if (eng_sw_try_add(eng->sw, &b, eng_sw_room(eng, resting))) {
        if (resting)
            eng->n.fallback_error++;
        else
            eng->n.fallback_busy++;
        return 1;
    }
    /* Put the jobs back in front: they wait for whichever frees first. */
    eng->q_head = (eng->q_head + ENG_QUEUE_JOBS - b.n) % ENG_QUEUE_JOBS;
    eng->q_count += b.n;
    eng->q_bytes += taken;
    return 0;
}

static void eng_nap(eng_ctx *eng, uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec += (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    pthread_cond_timedwait(&eng->wake, &eng->lock, &ts);
}

static void *eng_dispatcher(void *arg)
{
    eng_ctx *eng = arg;
    pthread_mutex_lock(&eng->lock);
    while (!eng->stopping || eng->q_count > 0 || eng->slots_in_flight > 0) {
        int progress = eng_reap_all(eng);
        while (eng->q_count > 0 && eng_dispatch_one(eng))
            progress = 1;
        if (progress)
            continue;
        if (eng->slots_in_flight > 0 || eng->q_count > 0)
            eng_nap(eng, ENG_POLL_NS);
        else if (eng->slots_off > 0 && !eng->stopping)
            eng_nap(eng, ENG_OFF_POLL_NS);
        else if (!eng->stopping)
            pthread_cond_wait(&eng->wake, &eng->lock);
    }
    pthread_mutex_unlock(&eng->lock);
    return NULL;
}

/* ---- callers ---- */

/* Without a card: bricks go to the pool (sw_threads is the real number of compressing
 * threads; a caller waits for room rather than compress on its own thread). */
static void eng_compress_sw(eng_ctx *eng, eng_job *jobs, size_t n_jobs, eng_ticket *call)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n_jobs && total <= ENG_INLINE_SW; i++)
        total += jobs[i].len;
    if (total <= ENG_INLINE_SW && n_jobs <= eng->capacity) {
        eng_brick b = {.n = 0};
        for (size_t i = 0; i < n_jobs; i++) {
            eng_sw_compress_job(&jobs[i]);
            b.tasks[b.n++] = (eng_task){.job = &jobs[i], .call = call};
        }
        eng_finish(eng, &b);
        return;
    }
    for (size_t first = 0; first < n_jobs; first += eng->capacity) {
        eng_brick b = {.n = 0};
        for (size_t i = first; i < n_jobs && b.n < eng->capacity; i++)
            b.tasks[b.n++] = (eng_task){.job = &jobs[i], .call = call};
        eng_sw_add(eng->sw, &b);
    }
}

/* With a card: jobs too small for a run are compressed right here; the others queue for
 * the dispatcher, which may pack them with other callers' jobs. */
static void eng_compress_card(eng_ctx *eng, eng_job *jobs, size_t n_jobs, eng_ticket *call)
{
    for (size_t i = 0; i < n_jobs; i++) {
        eng_job *j = &jobs[i];
        if (j->len >= ENG_SMALL_JOB && j->len <= eng->stride)
            continue;
        eng_brick b = {.tasks = {{.job = j, .call = call}}, .n = 1};
        eng_sw_compress_job(j);
        eng->n.fallback_small++;
        eng_finish(eng, &b);
    }
    pthread_mutex_lock(&eng->lock);
    uint64_t now = eng_now_ns();
    for (size_t i = 0; i < n_jobs; i++) {
        if (jobs[i].len < ENG_SMALL_JOB || jobs[i].len > eng->stride)
            continue;
        while (eng->q_count == ENG_QUEUE_JOBS)
            pthread_cond_wait(&eng->room, &eng->lock);
        eng->queue[(eng->q_head + eng->q_count++) % ENG_QUEUE_JOBS] =
            (eng_task){.job = &jobs[i], .call = call, .queued_ns = now};
        eng->q_bytes += jobs[i].len;
        pthread_cond_signal(&eng->wake);
    }
    pthread_mutex_unlock(&eng->lock);
}

void eng_submit_then(eng_ctx *eng, eng_job *jobs, size_t n_jobs, eng_ticket *t, eng_then_fn then,
                     void *arg)
{
    t->then = then, t->then_arg = arg;
    t->pending = n_jobs + (then != NULL);
    for (size_t i = 0; i < n_jobs; i++)
        jobs[i].sums_done = 0;         /* whatever a reused job said, these are not done */
    pthread_cond_init(&t->done, NULL);
    if (n_jobs == 0) {
        if (then)
            eng_run_then(eng, t);
        return;
    }
    if (eng->ops)
        eng_compress_card(eng, jobs, n_jobs, t);
    else
        eng_compress_sw(eng, jobs, n_jobs, t);
}

void eng_submit(eng_ctx *eng, eng_job *jobs, size_t n_jobs, eng_ticket *t)
{
    eng_submit_then(eng, jobs, n_jobs, t, NULL, NULL);
}

void eng_wait(eng_ctx *eng, eng_ticket *t)
{
    pthread_mutex_lock(&eng->lock);
    while (t->pending > 0)
        pthread_cond_wait(&t->done, &eng->lock);
    pthread_mutex_unlock(&eng->lock);
    pthread_cond_destroy(&t->done);
}

void eng_compress(eng_ctx *eng, eng_job *jobs, size_t n_jobs)
{
    eng_ticket t;
    eng_submit(eng, jobs, n_jobs, &t);
    eng_wait(eng, &t);
}

void eng_get_stats(eng_ctx *eng, eng_stats *o)
{
    o->bricks_card = eng->n.bricks_card, o->bricks_sw = eng->n.bricks_sw;
    o->blocks_card = eng->n.blocks_card, o->blocks_sw = eng->n.blocks_sw;
    o->fallback_busy = eng->n.fallback_busy, o->fallback_error = eng->n.fallback_error;
    o->fallback_small = eng->n.fallback_small;
    o->bytes_in = eng->n.bytes_in, o->bytes_out = eng->n.bytes_out;
    o->verify_failed = eng->n.verify_failed;
    o->blocks_checked_on_card = eng->n.blocks_checked_on_card;
    o->blocks_direct = eng->n.blocks_direct;
    pthread_mutex_lock(&eng->lock);   /* sets and parked memory change together */
    o->sets_written_off = eng->n.sets_written_off, o->sets_recovered = eng->n.sets_recovered;
    o->card_idle_us = eng_idle_ns(eng, eng_now_ns()) / 1000;
    o->host_parked = eng->parked.n;
    o->card_ps_per_byte = eng->card_ps_per_byte, o->card_best_ps = eng->card_best_ps;
    o->jobs_queued = eng->q_count;
    pthread_mutex_unlock(&eng->lock);
    o->sw_ps_per_byte = eng->sw ? eng_sw_ps_per_byte(eng->sw) : 0;
}

/* ---- memory a card reads where it lies ---- */

int eng_host_direct(const eng_ctx *eng)
{
    return eng->ops && eng->ops->host_alloc && eng->ops->start_from;
}

/* Whole pages: a DMA engine reads and pins memory a page at a time. */
#define ENG_HOST_PAGE 4096u

static size_t eng_host_round(size_t bytes)
{
    if (bytes > SIZE_MAX - ENG_HOST_PAGE)
        return 0;
    return (bytes + ENG_HOST_PAGE - 1) / ENG_HOST_PAGE * ENG_HOST_PAGE;
}

void *eng_host_alloc(eng_ctx *eng, size_t bytes)
{
    size_t total = eng_host_round(bytes ? bytes : 1);
    if (!total)
        return NULL;
    return eng_host_direct(eng) ? eng->ops->host_alloc(eng->dev, total)
                                : aligned_alloc(ENG_HOST_PAGE, total);
}

/* Called with the lock held: keeps p until no set is written off. Without memory to note
 * it, p is kept for good: never free what a card may still read. */
static void eng_park(eng_parked *k, void *p, size_t bytes)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 16;
        struct eng_parked_buf *nb = realloc(k->buf, cap * sizeof(*nb));
        if (!nb)
            return;
        k->buf = nb, k->cap = cap;
    }
    k->buf[k->n++] = (struct eng_parked_buf){p, bytes};
}

void eng_host_free(eng_ctx *eng, void *p, size_t bytes)
{
    if (!p)
        return;
    if (!eng_host_direct(eng)) {
        free(p);
        return;
    }
    size_t total = eng_host_round(bytes ? bytes : 1);
    pthread_mutex_lock(&eng->lock);
    int held = eng->slots_off > 0;
    if (held)
        eng_park(&eng->parked, p, total);
    pthread_mutex_unlock(&eng->lock);
    if (!held)
        eng->ops->host_free(eng->dev, p, total);
}

/* Called with the lock held, no set written off: gives the parked memory back, with the
 * lock released for the device's calls. */
static void eng_unpark(eng_ctx *eng)
{
    eng_parked k = eng->parked;
    eng->parked = (eng_parked){0};
    pthread_mutex_unlock(&eng->lock);
    for (size_t i = 0; i < k.n; i++)
        eng->ops->host_free(eng->dev, k.buf[i].p, k.buf[i].bytes);
    free(k.buf);
    pthread_mutex_lock(&eng->lock);
}

/* ---- open and close ---- */

/* A GPU gets four buffer sets: its runs are short next to the host's copies and checks
 * around them, and with two the card waited between runs (docs/BENCHMARKS.md: 8 writers
 * 4-17 % faster with four, the engine alone 10.6 GB/s against 7.8). */
static void eng_defaults(eng_config *c)
{
    if (!c->bufsets)
        c->bufsets = c->backend == ENG_BACKEND_CUDA ? 4 : 2;
    if (!c->card_timeout_ms)
        c->card_timeout_ms = 5000;
    if (!c->block_size)
        c->block_size = 1u << 20;
    if (c->emu_card_mbps <= 0)
        c->emu_card_mbps = 200;
    if (c->emu_pcie_mbps <= 0)
        c->emu_pcie_mbps = 10000;
    if (!c->fill_us)
        c->fill_us = ENG_FILL_US_DEFAULT;
}

static int eng_open_card(eng_ctx *eng, char *err, size_t err_cap)
{
    /* The kernel takes its stride in KiB (block_size_in_kb). */
    if (eng->stride % 1024 || eng->stride < 1024 || eng->stride > (64u << 20)) {
        snprintf(err, err_cap, "block size %u: a card needs a whole number of KiB up to 64 MiB",
                 eng->stride);
        return -1;
    }
    if (eng->cfg.backend == ENG_BACKEND_EMU) {
        eng->ops = &eng_emu_ops;
    } else {
        if (eng_plugin_load(eng_backend_option(eng->cfg.backend), &eng->plugin, err,
                            err_cap) != 0)
            return -1;
        eng->ops = eng->plugin.plugin->ops;
    }
    eng->dev = eng->ops->open(&eng->cfg, eng->cfg.block_size, err, err_cap);
    if (!eng->dev)
        return -1;
    eng->n_cus = eng->ops->n_cus(eng->dev);
    eng->n_sets = eng->ops->n_sets(eng->dev);
    eng->capacity = eng->ops->capacity(eng->dev);
    if (eng->capacity > ENG_MAX_BRICK)
        eng->capacity = ENG_MAX_BRICK;
    eng->card_checks = eng->ops->bufset(eng->dev, 0, 0)->checks != NULL;
    eng->queue = calloc(ENG_QUEUE_JOBS, sizeof(*eng->queue));
    eng->slots = calloc((size_t)eng->n_cus * eng->n_sets, sizeof(*eng->slots));
    eng->cus = calloc(eng->n_cus, sizeof(*eng->cus));
    if (!eng->queue || !eng->slots || !eng->cus) {
        snprintf(err, err_cap, "cannot allocate the card's queues: %s", strerror(ENOMEM));
        return -1;
    }
    for (unsigned cu = 0; cu < eng->n_cus; cu++)
        eng->cus[cu].idle_since_ns = eng_now_ns();
    if ((uint64_t)eng->capacity * eng->stride > (4u << 20))   /* bricks worth sharing */
        eng->copies = eng_copy_open();
    int rc = pthread_create(&eng->dispatcher, NULL, eng_dispatcher, eng);
    if (rc == 0)
        pthread_setname_np(eng->dispatcher, "eng-dispatch");
    if (rc != 0) {
        snprintf(err, err_cap, "cannot start the card dispatcher: %s", strerror(rc));
        return -1;
    }
    eng->dispatcher_started = 1;
    return 0;
}

eng_ctx *eng_open(const eng_config *cfg, char *err, size_t err_cap)
{
    eng_ctx *eng = calloc(1, sizeof(*eng));
    if (!eng) {
        snprintf(err, err_cap, "cannot allocate the engine: %s", strerror(ENOMEM));
        return NULL;
    }
    if (cfg)
        eng->cfg = *cfg;
    eng_defaults(&eng->cfg);
    eng->stride = eng->cfg.block_size;
    eng->fill_ns = eng->cfg.fill_us == ENG_FILL_NEVER ? 0 : eng->cfg.fill_us * 1000ull;
    eng->capacity = ENG_SW_BRICK;      /* the software pool's brick: one xilLz4Compress run */
    pthread_mutex_init(&eng->lock, NULL);
    pthread_cond_init(&eng->wake, NULL);
    pthread_cond_init(&eng->room, NULL);
    eng->sw = eng_sw_open(eng->cfg.sw_threads, eng_sw_done, eng, err, err_cap);
    int rc = eng->sw ? 0 : -1;
    if (rc == 0 && eng->cfg.backend >= ENG_BACKEND_EMU && eng->cfg.backend <= ENG_BACKEND_CUDA)
        rc = eng_open_card(eng, err, err_cap);
    else if (rc == 0 && eng->cfg.backend != ENG_BACKEND_SW)
        rc = (snprintf(err, err_cap, "unknown compression backend %d", (int)eng->cfg.backend), -1);
    if (rc != 0) {
        eng_close(eng);
        return NULL;
    }
    return eng;
}

/* Parked memory goes back if the card has let go of every written-off set by now (one last
 * reap: no run is in flight once the dispatcher stopped); if not, it stays with the process,
 * whose exit takes it back once the card's work is torn down. */
static void eng_close_parked(eng_ctx *eng)
{
    pthread_mutex_lock(&eng->lock);
    if (eng->parked.n > 0)
        eng_reap_all(eng);
    pthread_mutex_unlock(&eng->lock);
    free(eng->parked.buf);
}

void eng_close(eng_ctx *eng)
{
    if (!eng)
        return;
    if (eng->dispatcher_started) {
        pthread_mutex_lock(&eng->lock);
        eng->stopping = 1;
        pthread_cond_signal(&eng->wake);
        pthread_mutex_unlock(&eng->lock);
        pthread_join(eng->dispatcher, NULL);
    }
    eng_copy_close(eng->copies);
    eng_close_parked(eng);
    if (eng->dev)
        eng->ops->close(eng->dev);
    eng_plugin_unload(&eng->plugin);
    eng_sw_close(eng->sw);
    free(eng->queue);
    free(eng->slots);
    free(eng->cus);
    pthread_cond_destroy(&eng->wake);
    pthread_cond_destroy(&eng->room);
    pthread_mutex_destroy(&eng->lock);
    free(eng);
}
