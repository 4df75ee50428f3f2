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
    uint64_t used;                     /* when last put or found, in c->clock ticks */
};

/* Set-associative: a file's state goes in one of SZ_WAYS slots of its set, the least
 * recently used one when all are taken. A direct-mapped table made a tenth of a 2,000-file
 * tree evict each other for good, each lookup of one reading its footer again. */
#define SZ_WAYS 4u

struct sz_cache {
    pthread_mutex_t lock;
    unsigned sets_mask;
    uint64_t clock;
    struct sz_slot slot[];
};

sz_cache *sz_new(unsigned entries)
{
    if (entries < SZ_WAYS)
        entries = SZ_WAYS;
    sz_cache *c = calloc(1, sizeof(*c) + (size_t)entries * sizeof(struct sz_slot));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->sets_mask = entries / SZ_WAYS - 1;
    return c;
}

void sz_free(sz_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static struct sz_slot *sz_set_of(sz_cache *c, const struct stat *st)
{
    uint64_t h = (uint64_t)st->st_ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)st->st_dev;
    return &c->slot[((h ^ h >> 31) & c->sets_mask) * SZ_WAYS];
}

static int sz_same_file(const struct sz_slot *s, const struct stat *st)
{
    return s->ino == st->st_ino && s->dev == st->st_dev;
}

static int sz_same(const struct sz_slot *s, const struct stat *st)
{
    return sz_same_file(s, st) && s->backing_size == st->st_size &&
           s->ctim.tv_sec == st->st_ctim.tv_sec && s->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

int sz_get(sz_cache *c, const struct stat *st, uint64_t *size)
{
    if (!c || st->st_ino == 0)
        return 0;
    int hit = 0;
    pthread_mutex_lock(&c->lock);
    struct sz_slot *set = sz_set_of(c, st);
    for (unsigned i = 0; i < SZ_WAYS && !hit; i++)
        if (sz_same(&set[i], st)) {
            hit = 1;
            *size = set[i].size;
            set[i].used = ++c->clock;
        }
    pthread_mutex_unlock(&c->lock);
    return hit;
}

/* The file's own slot if it has one (its older state), else the least recently used. */
static struct sz_slot *sz_victim(struct sz_slot *set, const struct stat *st)
{
    struct sz_slot *v = &set[0];
    for (unsigned i = 0; i < SZ_WAYS; i++) {
        if (sz_same_file(&set[i], st))
            return &set[i];
        if (set[i].used < v->used)
            v = &set[i];
    }
    return v;
}

void sz_put(sz_cache *c, const struct stat *st, uint64_t size)
{
    if (!c || st->st_ino == 0)
        return;
    pthread_mutex_lock(&c->lock);
    *sz_victim(sz_set_of(c, st), st) = (struct sz_slot){
        st->st_dev, st->st_ino, st->st_size, st->st_ctim, size, ++c->clock};
    pthread_mutex_unlock(&c->lock);
}
