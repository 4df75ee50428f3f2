/* Read-ahead: a sequential reader's next stored blocks are decoded into the block cache by
 * helper threads while the reader copies out the ones it asked for. The kernel keeps one
 * read request of a file in flight, so without this one `cat` decodes on one core, and
 * every request waits for its decode.
 *
 * A job names a file, a block and its entry as it stood when queued. Its life:
 *
 *   AH_FREE -> AH_QUEUED -> AH_TAKEN -> AH_DECODING -> AH_FREE
 *
 * A helper takes a queued job, then the file's io lock shared, as a reader does (or drops
 * the job when a writer holds it); only then may it touch the backing descriptor. Whatever
 * destroys stored bytes or reuses their offsets holds that lock exclusive and calls
 * ff_ahead_cancel first: queued jobs of the file go, taken ones are marked and dropped by
 * their helper once it has the lock, and none can be decoding. So a helper never decodes a
 * frame that was retired, rewritten in place or closed, and never puts bytes into the cache
 * under an offset that names other bytes now. A reader that wants a block a helper is
 * decoding waits for it instead of decoding it twice; a queued one it takes back and decodes
 * itself. A file whose block size is larger than the store's (the cache's slots) is not read
 * ahead.
 *
 * Locks: the queue's lock (a->lock) is taken under a file's lock or io lock, and the cache's
 * lock under it (bc_has); a helper holds none of them while it decodes. */
#include "ff_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define AH_JOBS 64u                    /* jobs queued or running over the whole mount */
#define AH_WINDOW_BYTES (8u << 20)     /* how far ahead of a sequential reader */
#define AH_MAX_THREADS 8u

enum { AH_FREE = 0, AH_QUEUED, AH_TAKEN, AH_DECODING };

typedef struct {
    int state;                         /* AH_* */
    int cancelled;                     /* AH_TAKEN: the bytes it names may be gone */
    ff_file *f;
    uint64_t i, off;                   /* the block and its stored entry */
    uint32_t word, len;
    uint64_t seq;                      /* queue order */
} ah_job;

struct ff_ahead_s {
    ff_env *env;
    pthread_mutex_t lock;              /* every job, seq, stop */
    pthread_cond_t work;               /* a job was queued, or stop */
    pthread_cond_t done;               /* a job went back to AH_FREE */
    ah_job jobs[AH_JOBS];
    uint64_t seq;
    int stop;
    unsigned n_threads;
    pthread_t threads[AH_MAX_THREADS];
};

static ah_job *ah_next_queued(ff_ahead *a)
{
    ah_job *best = NULL;
    for (unsigned k = 0; k < AH_JOBS; k++)
        if (a->jobs[k].state == AH_QUEUED && (!best || a->jobs[k].seq < best->seq))
            best = &a->jobs[k];
    return best;
}

/* Decodes one taken job into the cache, unless it was cancelled meanwhile. */
static void ah_run(ff_ahead *a, ah_job *j)
{
    ff_file *f = j->f;
    /* a writer holding the lock exclusive (a commit, a sync under it) would keep this
     * helper from every other file's jobs: such a job is dropped, its reader decodes it */
    int locked = pthread_rwlock_tryrdlock(&f->io) == 0;
    pthread_mutex_lock(&a->lock);
    int go = locked && !j->cancelled;
    j->state = go ? AH_DECODING : j->state;
    pthread_mutex_unlock(&a->lock);
    uint32_t slot;
    uint8_t *buf = go ? bc_claim(a->env->cache, j->len, &slot) : NULL;
    /* a failure is the reader's to report: it decodes the block again itself */
    if (buf && ff_decode_quiet(f, j->i, j->off, j->word, buf, j->len) == 0) {
        bc_publish(a->env->cache, slot, f->id, j->off, j->len);
        a->env->n.readahead_blocks++;
    } else if (buf) {
        bc_unpin(a->env->cache, slot);
    }
    if (locked)
        pthread_rwlock_unlock(&f->io);
    pthread_mutex_lock(&a->lock);
    *j = (ah_job){0};
    pthread_cond_broadcast(&a->done);
    pthread_mutex_unlock(&a->lock);
}

static void *ah_main(void *arg)
{
    ff_ahead *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        ah_job *j = NULL;
        while (!a->stop && !(j = ah_next_queued(a)))
            pthread_cond_wait(&a->work, &a->lock);
        if (a->stop)
            break;
        j->state = AH_TAKEN;
        pthread_mutex_unlock(&a->lock);
        ah_run(a, j);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

ff_ahead *ff_ahead_new(ff_env *env, unsigned threads)
{
    ff_ahead *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->env = env;
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->work, NULL);
    pthread_cond_init(&a->done, NULL);
    if (threads > AH_MAX_THREADS)
        threads = AH_MAX_THREADS;
    while (a->n_threads < threads &&
           pthread_create(&a->threads[a->n_threads], NULL, ah_main, a) == 0)
        pthread_setname_np(a->threads[a->n_threads++], "fs-readahead");
    return a;
}

void ff_ahead_free(ff_ahead *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    a->stop = 1;
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->lock);
    for (unsigned k = 0; k < a->n_threads; k++)
        pthread_join(a->threads[k], NULL);
    pthread_cond_destroy(&a->done);
    pthread_cond_destroy(&a->work);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* Blocks a sequential reader is ahead by: a few MiB, never more than a quarter of the
 * cache, so that read-ahead does not evict what it decoded before it is read. */
static uint64_t ah_window(const ff_file *f)
{
    uint64_t w = AH_WINDOW_BYTES / f->bs, cap = bc_slots(f->env->cache) / 4;
    if (w > cap)
        w = cap;
    return w < 2 ? (cap >= 2 ? 2 : cap) : w;
}

static int ah_wanted(const ff_file *f, uint64_t b)
{
    const ff_blk *k = &f->blk[b];
    return b < f->n_blocks && b < f->n_stored && k->state == FF_CLEAN &&
           f->bs <= f->env->sb.block_size &&   /* a larger block fits no cache slot */
           !(k->off & FMT_ENTRY_ZERO) && !bc_has(f->env->cache, f->id, k->off);
}

/* Called with a->lock held: 0 when every job is in use. */
static int ah_queue_one(ff_ahead *a, ff_file *f, uint64_t b)
{
    for (unsigned k = 0; k < AH_JOBS; k++)
        if (a->jobs[k].state != AH_FREE && a->jobs[k].f == f && a->jobs[k].i == b &&
            !a->jobs[k].cancelled)
            return 1;                  /* queued by an earlier read, not decoded yet */
    for (unsigned k = 0; k < AH_JOBS; k++) {
        ah_job *j = &a->jobs[k];
        if (j->state != AH_FREE)
            continue;
        *j = (ah_job){AH_QUEUED, 0, f, b, f->blk[b].off, f->blk[b].word,
                      (uint32_t)ff_blen(f, b), a->seq++};
        return 1;
    }
    return 0;
}

void ff_ahead_plan(ff_file *f, uint64_t first, uint64_t last)
{
    ff_ahead *a = f->env->ahead;
    /* Sequential: this read starts near where an earlier one ended. The kernel's read-ahead
     * windows need not start on a block, so one request ends in the block where the next
     * begins, and two requests in flight may arrive swapped. A first read (a program that
     * looks at a file's header) does not start read-ahead. */
    uint64_t w = ah_window(f);
    int sequential = f->ra_next && first + w >= f->ra_next && first <= f->ra_next + 1;
    if (sequential && first > 0 && first - 1 < f->n_blocks)
        bc_passed(f->env->cache, f->id, f->blk[first - 1].off);
    f->ra_next = sequential && f->ra_next > last + 1 ? f->ra_next : last + 1;
    if (!a || !a->n_threads || f->foreign || !sequential)
        return;
    uint64_t to = last + 1 + w, from = last + 1;
    if (f->ra_upto > from && f->ra_upto <= to)
        from = f->ra_upto;             /* the window so far was queued by earlier reads */
    if (to > f->n_stored)
        to = f->n_stored;
    int queued = 0;
    pthread_mutex_lock(&a->lock);
    for (; from < to; from++) {
        if (ah_wanted(f, from) && !ah_queue_one(a, f, from))
            break;                     /* every job in use: try again at the next read */
        queued = 1;
    }
    if (queued)
        pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->lock);
    f->ra_upto = from;
}

int ff_ahead_claim(ff_file *f, uint64_t off)
{
    ff_ahead *a = f->env->ahead;
    if (!a)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&a->lock);
    for (unsigned k = 0; k < AH_JOBS; k++) {
        ah_job *j = &a->jobs[k];
        if (j->f != f || j->off != off || j->cancelled)
            continue;
        rc = j->state == AH_DECODING ? 1 : -1;
        if (j->state == AH_QUEUED)
            *j = (ah_job){0};
        else if (j->state == AH_TAKEN)
            j->cancelled = 1;          /* its helper may wait for the lock this reader holds */
        else
            while (j->state == AH_DECODING && j->f == f && j->off == off)
                pthread_cond_wait(&a->done, &a->lock);
        break;
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

/* Called with a->lock held: f's queued jobs go, the others are marked for their helpers. */
static void ah_cancel_locked(ff_ahead *a, const ff_file *f)
{
    for (unsigned k = 0; k < AH_JOBS; k++) {
        ah_job *j = &a->jobs[k];
        if (j->f == f && j->state == AH_QUEUED)
            *j = (ah_job){0};
        else if (j->f == f)
            j->cancelled = 1;
    }
}

void ff_ahead_cancel(ff_file *f)
{
    ff_ahead *a = f->env->ahead;
    f->ra_upto = 0;
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    ah_cancel_locked(a, f);
    pthread_mutex_unlock(&a->lock);
}

void ff_ahead_forget(ff_file *f)
{
    ff_ahead *a = f->env->ahead;
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    ah_cancel_locked(a, f);
    for (unsigned k = 0; k < AH_JOBS; k++)
        while (a->jobs[k].f == f)
            pthread_cond_wait(&a->done, &a->lock);
    pthread_mutex_unlock(&a->lock);
}
