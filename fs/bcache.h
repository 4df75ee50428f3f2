/* bc: a bounded cache of decoded blocks shared by every file of a mount, so that reads of
 * parts of a block (the kernel asks for 4 KiB..1 MiB at a time) decode each block once.
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
void bc_put(bc_cache *bc, uint64_t file_id, uint64_t key, const void *src, uint32_t len);
void bc_forget_file(bc_cache *bc, uint64_t file_id);

#endif
