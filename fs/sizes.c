/* Logical sizes of closed files by backing state (sizes.h). */
#include "sizes.h"

#include <pthread.h>
#include <stdlib.h>

struct sz_slot {
    dev_t dev;
    ino_t ino;
    off_t backing_size;
    struct timespec ctim;
    uint64_t size;                     /* the logical size; valid when ino != 0 */
};

struct sz_cache {
    pthread_mutex_t lock;
    unsigned mask;
    struct sz_slot slot[];
};

sz_cache *sz_new(unsigned entries)
{
    sz_cache *c = calloc(1, sizeof(*c) + (size_t)entries * sizeof(struct sz_slot));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->mask = entries - 1;
    return c;
}

void sz_free(sz_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static struct sz_slot *sz_slot_of(sz_cache *c, const struct stat *st)
{
    uint64_t h = (uint64_t)st->st_ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)st->st_dev;
    return &c->slot[(h ^ h >> 31) & c->mask];
}

static int sz_same(const struct sz_slot *s, const struct stat *st)
{
    return s->ino == st->st_ino && s->dev == st->st_dev && s->backing_size == st->st_size &&
           s->ctim.tv_sec == st->st_ctim.tv_sec && s->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

int sz_get(sz_cache *c, const struct stat *st, uint64_t *size)
{
    if (!c || st->st_ino == 0)
        return 0;
    pthread_mutex_lock(&c->lock);
    struct sz_slot *s = sz_slot_of(c, st);
    int hit = sz_same(s, st);
    if (hit)
        *size = s->size;
    pthread_mutex_unlock(&c->lock);
    return hit;
}

void sz_put(sz_cache *c, const struct stat *st, uint64_t size)
{
    if (!c || st->st_ino == 0)
        return;
    pthread_mutex_lock(&c->lock);
    *sz_slot_of(c, st) = (struct sz_slot){st->st_dev, st->st_ino, st->st_size, st->st_ctim,
                                          size};
    pthread_mutex_unlock(&c->lock);
}
