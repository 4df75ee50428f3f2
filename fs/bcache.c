#include "bcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t file_id;                  /* 0: slot empty */
    uint64_t key;                      /* stored offset of the block in its file */
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
};

bc_cache *bc_new(uint32_t slot_size, uint32_t n_slots)
{
    bc_cache *bc = calloc(1, sizeof(*bc));
    if (!bc || !(bc->slots = calloc(n_slots, sizeof(*bc->slots)))) {
        free(bc);
        return NULL;
    }
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
    pthread_mutex_destroy(&bc->lock);
    free(bc);
}

static bc_slot *bc_find(bc_cache *bc, uint64_t file_id, uint64_t key)
{
    for (uint32_t i = 0; i < bc->n_slots; i++)
        if (bc->slots[i].file_id == file_id && bc->slots[i].key == key)
            return &bc->slots[i];
    return NULL;
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

uint8_t *bc_claim(bc_cache *bc, uint32_t len, uint32_t *slot)
{
    if (len > bc->slot_size)
        return NULL;                   /* a file of a larger block size than the store's */
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = NULL;
    for (uint32_t i = 0; i < bc->n_slots; i++)
        if (!bc->slots[i].pins && (!s || bc->slots[i].used < s->used))
            s = &bc->slots[i];
    if (s && !s->data)
        s->data = malloc(bc->slot_size);
    uint8_t *p = s ? s->data : NULL;
    if (p) {
        *s = (bc_slot){0, 0, s->used, 0, 1, s->data};
        *slot = (uint32_t)(s - bc->slots);
    }
    pthread_mutex_unlock(&bc->lock);
    return p;
}

void bc_publish(bc_cache *bc, uint32_t slot, uint64_t file_id, uint64_t key, uint32_t len)
{
    pthread_mutex_lock(&bc->lock);
    bc_slot *s = &bc->slots[slot], *old = len > bc->slot_size ? s : bc_find(bc, file_id, key);
    if (old && old->pins == 0)         /* decoded twice: the older copy goes */
        old->file_id = 0, old->used = 0;
    if (!old || old->pins == 0)
        *s = (bc_slot){file_id, key, ++bc->clock, len, 0, s->data};
    else
        s->pins = 0, s->used = 0;      /* an older copy is being sent: keep that one */
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
        if (bc->slots[i].file_id == file_id)   /* a pinned one keeps its bytes for its */
            bc->slots[i].file_id = 0, bc->slots[i].used = 0;   /* reply, under no name */
    pthread_mutex_unlock(&bc->lock);
}
