/* bc: a bounded cache of decoded blocks shared by every file of a mount, so that reads of
 * parts of a block (the kernel asks for 4 KiB..1 MiB at a time) decode each block once, and
 * blocks decoded ahead of a reader wait for it (ff_ahead.c).
 * Its size is fixed at creation (part of mem_mb); entries are evicted least recently used. */
#ifndef FPGALZ4FS_BCACHE_H
#define FPGALZ4FS_BCACHE_H

#include <stdint.h>

typedef struct bc_cache_s bc_cache;

bc_cache *bc_new(uint32_t slot_size, uint32_t n_slots);
void bc_free(bc_cache *bc);                       /* accepts NULL */
/* Copies [off, off+len) of a cached block into dst; 1 on a hit, 0 on a miss. A block is
 * named by its file and the offset it is stored at, which changes whenever it is rewritten. */
int bc_get(bc_cache *bc, uint64_t file_id, uint64_t key, void *dst, uint32_t off, uint32_t len);
int bc_has(bc_cache *bc, uint64_t file_id, uint64_t key);        /* 1 if cached */
/* As bc_get, but without copying: returns the cached bytes [off, off+len) and pins their
 * slot (*slot) until bc_unpin, so that a reply can be sent from them; NULL on a miss. */
const uint8_t *bc_pin(bc_cache *bc, uint64_t file_id, uint64_t key, uint32_t off, uint32_t len,
                      uint32_t *slot);
void bc_unpin(bc_cache *bc, uint32_t slot);
/* Decoding straight into the cache: bc_claim takes the least recently used slot out of use
 * (pinned, named by nothing) and returns its buffer of slot_size bytes, NULL when every slot
 * is pinned or len does not fit (a file keeps the block size it was written with, which may
 * be larger than the store's); bc_publish names it, or bc_unpin gives it back unnamed after
 * a failed decode. */
uint8_t *bc_claim(bc_cache *bc, uint32_t len, uint32_t *slot);
void bc_publish(bc_cache *bc, uint32_t slot, uint64_t file_id, uint64_t key, uint32_t len);
uint32_t bc_slots(const bc_cache *bc);
/* A sequential reader has read the block (file_id, key) to its end: the kernel's page cache
 * serves it from now on, so its slot is the next to reuse, before any other. */
void bc_passed(bc_cache *bc, uint64_t file_id, uint64_t key);
void bc_forget_file(bc_cache *bc, uint64_t file_id);
/* Drops one name (a pinned slot keeps its bytes for its reply, under no name). */
void bc_forget(bc_cache *bc, uint64_t file_id, uint64_t key);
/* Caches a copy of len bytes as (file_id, key) in place of any older copy; nothing when
 * every slot is pinned or len does not fit. */
void bc_put(bc_cache *bc, uint64_t file_id, uint64_t key, const void *src, uint32_t len);
/* Buffers that change hands instead of bytes (a writer's block buffer of slot_size bytes
 * from malloc): bc_take hands the cached block (file_id, key) over when it is exactly len
 * bytes and no reply is sending it, its slot left empty and nameless (bc_claim allocates
 * anew), NULL otherwise; the caller frees the buffer or gives it to bc_adopt. bc_adopt caches
 * buf, of which len bytes count, as (file_id, key) in place of any older copy, and returns
 * the buffer the cache lets go of (NULL when its slot had none), or buf itself when every
 * slot is pinned or len does not fit. */
uint8_t *bc_take(bc_cache *bc, uint64_t file_id, uint64_t key, uint32_t len);
uint8_t *bc_adopt(bc_cache *bc, uint64_t file_id, uint64_t key, uint8_t *buf, uint32_t len);

#endif
