/* sz: the logical sizes of closed regular files, remembered by their backing state.
 *
 * A file's logical size lives in its footer (or seek table), so answering a lookup means
 * opening the backing file and reading it. The inode's own cache (in_inode.size) dies with
 * the kernel's forget; this one outlives it, so that after the kernel dropped its caches
 * (memory pressure, drop_caches, a tree walked twice) a lookup reads no footer again. A
 * state is (st_dev, st_ino, st_size, st_ctim): any change to the backing file moves its
 * ctime, so a stale size is never returned. Bounded: the least recently used goes. */
#ifndef FPGALZ4FS_SIZES_H
#define FPGALZ4FS_SIZES_H

#include <stdint.h>
#include <sys/stat.h>

typedef struct sz_cache sz_cache;

sz_cache *sz_new(unsigned entries);        /* a power of two; NULL when out of memory */
void sz_free(sz_cache *c);
int sz_get(sz_cache *c, const struct stat *st, uint64_t *size);   /* 1: found */
void sz_put(sz_cache *c, const struct stat *st, uint64_t size);

#endif
