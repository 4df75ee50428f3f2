#include "bcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BC_NONE UINT32_MAX
#define BC_PASSED 0u                   /* the clock of a block a sequential reader has passed */

typedef struct {
    uint64_t file_id;                  /* 0: slot empty (named by nothing) */
    uint64_t key;                      /* stored offset of the block in its file */
    uint32_t next;                     /* the next named slot of its hash bucket, or BC_NONE */
    uint64_t used;                     /* clock value of the last use, for LRU */
    uint32_t len;                      /* decoded length */
    uint32_t pins;                     /* replies still sending data (bc_pin): the bytes
                                          stay, and the slot is no victim, until unpinned */
    uint8_t *data;                     /* slot_size bytes */
} bc_slot;

struct bc_cache_s {
    pthread_mutex_t lock;              /* guards every slot and the clock */
    uint32_t slot_size;                /* bytes per slot (the store's block size) */
    uint32_t n_slots;
    uint64_t clock;                    /* advances on every use */
    bc_slot *slots;
    uint32_t *bucket;                  /* n_buckets chains of the named slots: a lookup costs
                                          a chain, not every slot (a 64K store has 2,048) */
    uint32_t n_buckets;                /* a power of two, at least n_slots */
};

bc_cache *bc_new(uint32_t slot_size, uint32_t n_slots)
{
    bc_cache *bc = calloc(1, sizeof(*bc));
    if (!bc)
        return NULL;
    for (bc->n_buckets = 1; bc->n_buckets < n_slots; bc->n_buckets *= 2)
        ;
    bc->slots = calloc(n_slots ? n_slots : 1, sizeof(*bc->slots));
    bc->bucket = malloc(bc->n_buckets * sizeof(*bc->bucket));
    if (!bc->slots || !bc->bucket) {
        free(bc->slots);
        free(bc->bucket);
        free(bc);
        return NULL;
    }
    for (uint32_t b = 0; b < bc->n_buckets; b++)
        bc->bucket[b] = BC_NONE;
    pthread_mutex_init(&bc->lock, NULL);
    bc->slot_size = slot_size;
    bc->n_slots = n_slots;
    return bc;
}

void bc_free(bc_cache *bc)
{
    if (!bc)
        return;
    for (uint32_t i = 0; i < bc->n_slots; i++)
        free(bc->slots[i].data);
    free(bc->slots);
    free(bc->bucket);
    pthread_mutex_destroy(&bc->lock);
    free(bc);
}

/* ---- the index: every named slot is on the chain of its (file, key)'s bucket ---- */

static uint32_t *bc_chain(bc_cache *bc, uint64_t file_id, uint64_t key)
{
    uint64_t h = (file_id * 0x9E3779B97F4A7C15ull) ^ (key * 0xC2B2AE3D27D4EB4Full);
    return &bc->bucket[(h ^ (h >> 29)) & (bc->n_buckets - 1)];
}

static bc_slot *bc_find(bc_cache *bc, uint64_t file_id, uint64_t key)
{
    for (uint32_t i = *bc_chain(bc, file_id, key); i != BC_NONE; i = bc->slots[i].next)
        if (bc->slots[i].file_id == file_id && bc->slots[i].key == key)
            return &bc->slots[i];
    return NULL;
}

/* Gives slot s the name (file_id, key), or no name with file_id 0; its chains follow. */
static void bc_name(bc_cache *bc, bc_slot *s, uint64_t file_id, uint64_t key)
{
    uint32_t idx = (uint32_t)(s - bc->slots);
    if (s->file_id) {
        uint32_t *at = bc_chain(bc, s->file_id, s->key);
        while (*at != idx)
            at = &bc->slots[*at].next;
        *at = s->next;
    }
    s->file_id = file_id, s->key = key, s->next = BC_NONE;
    if (file_id) {
        uint32_t *head = bc_chain(bc, file_id, key);
        s->next = *head;
        *head = idx;
    }
}

int bc_get(bc_cache *bc, uint64_t file_id, uint64_t key, void *dst, uint32_t off, uint32_t len)
{
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = bc_find(bc, file_id, key);
    int hit = s && off + len <= s->len;
    if (hit) {
        memcpy(dst, s->data + off, len);
        s->used = ++bc->clock;
    }
    pthread_mutex_unlock(&bc->lock);
    return hit;
}

/* A slot that holds a block a sequential reader has passed (bc_passed), else the least
 * recently used slot no reply is sending from, or NULL. Called with the lock. Passed blocks
 * go before empty slots are filled: a stream then cycles through a few slots whose memory is
 * already the process's, instead of touching fresh pages for every block it reads (a cold
 * `cat` of 1 GiB would otherwise fault in as much of the cache as it reads). */
static bc_slot *bc_victim(bc_cache *bc)
{
    bc_slot *s = NULL;
    for (uint32_t i = 0; i < bc->n_slots; i++) {
        bc_slot *c = &bc->slots[i];
        if (c->pins)
            continue;
        if (c->data && c->file_id && c->used == BC_PASSED)
            return c;
        if (!s || c->used < s->used)
            s = c;
    }
    return s;
}

void bc_passed(bc_cache *bc, uint64_t file_id, uint64_t key)
{
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = bc_find(bc, file_id, key);
    if (s)
        s->used = BC_PASSED;
    pthread_mutex_unlock(&bc->lock);
}

uint8_t *bc_claim(bc_cache *bc, uint32_t len, uint32_t *slot)
{
    if (len > bc->slot_size)
        return NULL;                   /* a file of a larger block size than the store's */
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = bc_victim(bc);
    if (s && !s->data)
        s->data = malloc(bc->slot_size);
    uint8_t *p = s ? s->data : NULL;
    if (p) {
        bc_name(bc, s, 0, 0);
        s->len = 0, s->pins = 1;
        *slot = (uint32_t)(s - bc->slots);
    }
    pthread_mutex_unlock(&bc->lock);
    return p;
}

void bc_publish(bc_cache *bc, uint32_t slot, uint64_t file_id, uint64_t key, uint32_t len)
{
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = &bc->slots[slot], *old = len > bc->slot_size ? s : bc_find(bc, file_id, key);
    if (old && old->pins == 0) {       /* decoded twice: the older copy goes */
        bc_name(bc, old, 0, 0);
        old->used = 0;
    }
    if (!old || old->pins == 0) {
        bc_name(bc, s, file_id, key);
        s->used = ++bc->clock, s->len = len, s->pins = 0;
    } else {
        s->pins = 0, s->used = 0;      /* an older copy is being sent: keep that one */
    }
    pthread_mutex_unlock(&bc->lock);
}

const uint8_t *bc_pin(bc_cache *bc, uint64_t file_id, uint64_t key, uint32_t off, uint32_t len,
                      uint32_t *slot)
{
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = bc_find(bc, file_id, key);
    const uint8_t *p = NULL;
    if (s && off + len <= s->len) {
        s->pins++, s->used = ++bc->clock;
        p = s->data + off;
        *slot = (uint32_t)(s - bc->slots);
    }
    pthread_mutex_unlock(&bc->lock);
    return p;
}

void bc_unpin(bc_cache *bc, uint32_t slot)
{
    pthread_mutex_lock(&bc->lock);
    bc->slots[slot].pins--;
    pthread_mutex_unlock(&bc->lock);
}

int bc_has(bc_cache *bc, uint64_t file_id, uint64_t key)
{
    pthread_mutex_lock(&bc->lock);
    int hit = bc_find(bc, file_id, key) != NULL;
    pthread_mutex_unlock(&bc->lock);
    return hit;
}

uint32_t bc_slots(const bc_cache *bc)
{
    return bc->n_slots;
}

void bc_forget_file(bc_cache *bc, uint64_t file_id)
{
    pthread_mutex_lock(&bc->lock);
    for (uint32_t i = 0; i < bc->n_slots; i++)
        if (bc->slots[i].file_id == file_id) { /* a pinned one keeps its bytes for its */
            bc_name(bc, &bc->slots[i], 0, 0);  /* reply, under no name */
            bc->slots[i].used = 0;
        }
    pthread_mutex_unlock(&bc->lock);
}

void bc_forget(bc_cache *bc, uint64_t file_id, uint64_t key)
{
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = bc_find(bc, file_id, key);
    if (s) {
        bc_name(bc, s, 0, 0);
        s->used = 0;
    }
    pthread_mutex_unlock(&bc->lock);
}

void bc_put(bc_cache *bc, uint64_t file_id, uint64_t key, const void *src, uint32_t len)
{
    uint32_t slot;
    bc_forget(bc, file_id, key);
    uint8_t *dst = bc_claim(bc, len, &slot);
    if (!dst)
        return;
    memcpy(dst, src, len);
    bc_publish(bc, slot, file_id, key, len);
}

uint8_t *bc_take(bc_cache *bc, uint64_t file_id, uint64_t key, uint32_t len)
{
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = bc_find(bc, file_id, key);
    uint8_t *p = s && s->pins == 0 && s->len == len ? s->data : NULL;
    if (p) {
        bc_name(bc, s, 0, 0);
        s->data = NULL, s->len = 0, s->used = 0;
    }
    pthread_mutex_unlock(&bc->lock);
    return p;
}

uint8_t *bc_adopt(bc_cache *bc, uint64_t file_id, uint64_t key, uint8_t *buf, uint32_t len)
{
    if (len > bc->slot_size)
        return buf;
    bc_forget(bc, file_id, key);
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = bc_victim(bc);
    uint8_t *out = buf;
    if (s) {
        out = s->data;
        bc_name(bc, s, file_id, key);
        s->data = buf, s->len = len, s->used = ++bc->clock;
    }
    pthread_mutex_unlock(&bc->lock);
    return out;
}
