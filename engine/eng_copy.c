/* The copies of a card's bricks: a GPU brick is tens of MiB, more than one core copies at
 * the card's rate. A team of helper threads, started once, shares each large copy with the
 * one thread that asks (the dispatcher): starting threads for every brick cost about as
 * much as a tenth of the card's time per brick. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "eng_internal.h"

#define ENG_COPY_PARTS 8u              /* the caller and up to 7 helpers */
#define ENG_COPY_ALONE (4u << 20)      /* below this many bytes the caller copies alone */

typedef struct {
    const eng_copy *c;
    uint32_t n;
} eng_copy_part;

struct eng_copy_team_s {
    pthread_mutex_t lock;
    pthread_cond_t work;               /* helpers wait here for a round */
    pthread_cond_t done;               /* the caller waits here for the helpers' parts */
    eng_copy_part part[ENG_COPY_PARTS];
    uint32_t parts;                    /* parts of this round, the caller's included */
    uint32_t next;                     /* the next part a helper takes (1..parts-1) */
    uint32_t pending;                  /* helpers' parts not finished */
    int stopping;
    pthread_t threads[ENG_COPY_PARTS - 1];
    unsigned n_threads;
};

static void eng_copy_part_run(const eng_copy_part *p)
{
    for (uint32_t i = 0; i < p->n; i++)
        memcpy(p->c[i].dst, p->c[i].src, p->c[i].len);
}

static void *eng_copy_helper(void *arg)
{
    eng_copy_team *t = arg;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (t->next >= t->parts && !t->stopping)
            pthread_cond_wait(&t->work, &t->lock);
        if (t->stopping)
            break;
        eng_copy_part p = t->part[t->next++];
        pthread_mutex_unlock(&t->lock);
        eng_copy_part_run(&p);
        pthread_mutex_lock(&t->lock);
        if (--t->pending == 0)
            pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

eng_copy_team *eng_copy_open(void)
{
    eng_copy_team *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->work, NULL);
    pthread_cond_init(&t->done, NULL);
    eng_threads_start(t->threads, &t->n_threads, ENG_COPY_PARTS - 1, eng_copy_helper, t,
                      "eng-copy");
    return t;                          /* with fewer helpers, or none, the caller copies more */
}

void eng_copy_close(eng_copy_team *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    t->stopping = 1;
    pthread_cond_broadcast(&t->work);
    pthread_mutex_unlock(&t->lock);
    for (unsigned i = 0; i < t->n_threads; i++)
        pthread_join(t->threads[i], NULL);
    pthread_cond_destroy(&t->work);
    pthread_cond_destroy(&t->done);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

void eng_copy_run(eng_copy_team *t, const eng_copy *c, uint32_t n, size_t bytes)
{
    uint32_t k = !t || bytes < ENG_COPY_ALONE ? 1 : t->n_threads + 1;
    k = k < n ? k : (n ? n : 1);
    if (k == 1) {
        eng_copy_part_run(&(eng_copy_part){c, n});
        return;
    }
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < k; i++)
        t->part[i] = (eng_copy_part){c + (size_t)n * i / k, n * (i + 1) / k - n * i / k};
    eng_copy_part own = t->part[0];
    t->parts = k, t->next = 1, t->pending = k - 1;
    pthread_cond_broadcast(&t->work);
    pthread_mutex_unlock(&t->lock);
    eng_copy_part_run(&own);
    pthread_mutex_lock(&t->lock);
    while (t->pending > 0)
        pthread_cond_wait(&t->done, &t->lock);
    t->parts = t->next = 0;
    pthread_mutex_unlock(&t->lock);
}
