/* The software pool: host threads compressing bricks with liblz4. */
#include <errno.h>
#include <lz4.h>
#include <xxhash.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_internal.h"

#define ENG_SW_MAX_THREADS 1024u
#define ENG_SW_RING_PER_THREAD 4u      /* room for callers that must wait (eng_sw_add) */

struct eng_sw_pool_s {
    pthread_mutex_t lock;              /* guards the ring and stopping */
    pthread_cond_t work;               /* workers wait for bricks */
    pthread_cond_t room;               /* eng_sw_add waits for space */
    eng_brick *ring;                   /* fixed at open: no allocation per brick */
    unsigned cap, head, count;
    unsigned busy;                     /* bricks being compressed or verified right now */
    unsigned compressing;              /* bricks to compress, queued or running */
    int stopping;
    eng_sw_done_fn done;
    void *done_arg;
    pthread_t *threads;
    unsigned n_threads;
    _Atomic uint64_t ns, bytes;        /* time and input of the bricks compressed so far */
};

/* The checksums an LZ4 frame carries, for a job whose output is final. */
static void eng_sw_sums(eng_job *job)
{
    job->src_sum = XXH32(job->src, job->len, 0);
    job->out_sum = job->out_len < job->len ? XXH32(job->dst, job->out_len, 0) : 0;
    job->sums_done = 1;
}

void eng_sw_compress_job(eng_job *job)
{
    int out = 0;
    if (job->len > 0 && job->len <= LZ4_MAX_INPUT_SIZE)
        out = LZ4_compress_default((const char *)job->src, (char *)job->dst, (int)job->len,
                                   (int)(job->dst_cap > INT32_MAX ? INT32_MAX : job->dst_cap));
    job->out_len = (out <= 0 || (uint32_t)out >= job->len) ? job->len : (uint32_t)out;
    if (job->want_sums)
        eng_sw_sums(job);
}

/* Whether a card's output of job decodes to exactly its input, byte for byte (stronger
 * than comparing the decoded bytes' XXH32 with the input's, and it hashes nothing twice);
 * the sums a frame carries are then computed here, as software would. */
static int eng_sw_card_output_good(eng_job *job, uint8_t *scratch)
{
    int got = LZ4_decompress_safe((const char *)job->dst, (char *)scratch, (int)job->out_len,
                                  (int)job->len);
    if (got != (int)job->len || memcmp(scratch, job->src, job->len) != 0)
        return 0;
    if (job->want_sums)
        eng_sw_sums(job);
    return 1;
}

/* Whether the card's own check of job holds here: it found the block decodes to the input
 * it read, and the input and output the host holds hash to what the card hashed (so neither
 * changed on the way). The sums are the frame's, so they cost nothing extra. */
static int eng_sw_card_check_holds(eng_job *job, const eng_card_check *c)
{
    if (!c->decodes)
        return 0;
    uint32_t src_sum = XXH32(job->src, job->len, 0), out_sum = XXH32(job->dst, job->out_len, 0);
    if (src_sum != c->src_sum || out_sum != c->out_sum)
        return 0;
    job->src_sum = src_sum, job->out_sum = out_sum, job->sums_done = 1;
    return 1;
}

int eng_sw_verify_task(eng_task *t, uint8_t **scratch, uint32_t *scratch_cap)
{
    eng_job *job = t->job;
    if (job->out_len >= job->len) {    /* stored raw: the input itself, nothing to check */
        if (job->want_sums)            /* but its frame's checksum, made here as for any */
            eng_sw_sums(job);
        return 0;
    }
    if (t->card_checked) {
        if (eng_sw_card_check_holds(job, &t->card))
            return 0;
        eng_sw_compress_job(job);
        return 1;
    }
    if (*scratch_cap < job->len) {
        uint8_t *grown = realloc(*scratch, job->len);
        if (grown)
            *scratch = grown, *scratch_cap = job->len;
    }
    int checked = *scratch_cap >= job->len;
    if (checked && eng_sw_card_output_good(job, *scratch))
        return 0;
    eng_sw_compress_job(job);
    return checked;
}

/* A card's brick: every block checked, the wrong ones compressed again. */
static void eng_sw_verify_brick(eng_brick *b, uint8_t **scratch, uint32_t *scratch_cap)
{
    b->redone = 0;
    for (uint32_t i = 0; i < b->n; i++)
        b->redone += (uint32_t)eng_sw_verify_task(&b->tasks[i], scratch, scratch_cap);
}

/* Compresses a brick and measures how fast one thread does it (eng_sched.c uses that). */
static void eng_sw_compress_brick(eng_sw_pool *p, const eng_brick *b)
{
    uint64_t t0 = eng_now_ns(), bytes = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        eng_sw_compress_job(b->tasks[i].job);
        bytes += b->tasks[i].job->len;
    }
    p->ns += eng_now_ns() - t0;
    p->bytes += bytes;
}

uint64_t eng_sw_ps_per_byte(const eng_sw_pool *p)
{
    uint64_t bytes = p->bytes;
    return bytes ? p->ns * 1000 / bytes : 0;
}

static void *eng_sw_worker(void *arg)
{
    uint8_t *scratch = NULL;           /* where a card's blocks are decoded to be checked */
    uint32_t scratch_cap = 0;
    eng_sw_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->count == 0 && !p->stopping)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->count == 0)
            break;
        eng_brick b = p->ring[p->head];
        p->head = (p->head + 1) % p->cap;
        p->count--, p->busy++;
        pthread_cond_signal(&p->room);
        pthread_mutex_unlock(&p->lock);
        if (b.from_card)
            eng_sw_verify_brick(&b, &scratch, &scratch_cap);
        else
            eng_sw_compress_brick(p, &b);
        /* done may run a caller's continuation (eng_submit_then): writing out what was
         * made is not compressing, and the pool's room must not count it as such */
        pthread_mutex_lock(&p->lock);
        p->compressing -= !b.from_card;
        pthread_mutex_unlock(&p->lock);
        p->done(p->done_arg, &b);
        pthread_mutex_lock(&p->lock);
        p->busy--;
    }
    pthread_mutex_unlock(&p->lock);
    free(scratch);
    return NULL;
}

/* A card's brick to verify goes in front: its check is short and everything its callers
 * wait for, while a brick to compress takes a thread for tens of milliseconds. */
static void eng_sw_push(eng_sw_pool *p, const eng_brick *b)
{
    if (b->from_card) {
        p->head = (p->head + p->cap - 1) % p->cap;
        p->ring[p->head] = *b;
    } else {
        p->ring[(p->head + p->count) % p->cap] = *b;
        p->compressing++;
    }
    p->count++;
    pthread_cond_signal(&p->work);
}

int eng_sw_try_add(eng_sw_pool *p, const eng_brick *b, unsigned most)
{
    pthread_mutex_lock(&p->lock);
    int ok = p->count + p->busy < p->n_threads && p->compressing < most;
    if (ok)
        eng_sw_push(p, b);
    pthread_mutex_unlock(&p->lock);
    return ok;
}

void eng_sw_add(eng_sw_pool *p, const eng_brick *b)
{
    pthread_mutex_lock(&p->lock);
    while (p->count == p->cap)
        pthread_cond_wait(&p->room, &p->lock);
    eng_sw_push(p, b);
    pthread_mutex_unlock(&p->lock);
}

unsigned eng_sw_threads(const eng_sw_pool *p) { return p->n_threads; }


eng_sw_pool *eng_sw_open(unsigned threads, eng_sw_done_fn done, void *arg, char *err,
                         size_t err_cap)
{
    if (threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores > 0 ? (unsigned)cores : 1u;
    }
    if (threads > ENG_SW_MAX_THREADS)
        threads = ENG_SW_MAX_THREADS;
    eng_sw_pool *p = calloc(1, sizeof(*p));
    if (p) {
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->work, NULL);
        pthread_cond_init(&p->room, NULL);
        p->cap = threads * ENG_SW_RING_PER_THREAD;
        p->ring = calloc(p->cap, sizeof(*p->ring));
        p->threads = calloc(threads, sizeof(*p->threads));
    }
    if (!p || !p->ring || !p->threads) {
        snprintf(err, err_cap, "cannot allocate the software pool: %s", strerror(ENOMEM));
        eng_sw_close(p);
        return NULL;
    }
    p->done = done, p->done_arg = arg;
    int rc = eng_threads_start(p->threads, &p->n_threads, threads, eng_sw_worker, p,
                               "eng-lz4");
    if (rc != 0) {
        snprintf(err, err_cap, "cannot start software compression threads: %s", strerror(rc));
        eng_sw_close(p);
        return NULL;
    }
    return p;
}

void eng_sw_close(eng_sw_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->room);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p->ring);
    free(p);
}
