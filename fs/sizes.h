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

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct sz_cache sz_cache;

sz_cache *sz_new(unsigned entries);        /* a power of two; NULL when out of memory */
void sz_free(sz_cache *c);
int sz_get(sz_cache *c, const struct stat *st, uint64_t *size);   /* 1: found */
void sz_put(sz_cache *c, const struct stat *st, uint64_t size);

/* The sizes file (.fpgalz4fs-sizes at the top of the store, docs/FORMAT.md 1.6): the cache
 * as an unmount that leaves the store clean left it, so that the next mount reads no footer
 * of a file that has not changed since. Every entry keeps its state as the key: a file that
 * changed since (its ctime moved) misses, whatever the file says. The name starts with the
 * superblock's, so mounts (of every build) hide it and fsck passes it by. */
#define SZ_FILE_NAME ".fpgalz4fs-sizes"
#define SZ_TMP_NAME SZ_FILE_NAME ".tmp"
#define SZ_FILE_VERSION 1u
#define SZ_HEAD 24u                        /* magic, version, entry length, count */
#define SZ_ENTRY 40u
#define SZ_FILE_MAX_ENTRIES (1u << 22)

typedef enum {
    SZ_OK = 0,
    SZ_ERR_MISSING,      /* no sizes file: nothing to read */
    SZ_ERR_NOT_REGULAR,  /* a symlink, a FIFO, a device... : never read */
    SZ_ERR_LENGTH,       /* shorter than a header, longer than the most entries, or not
                            the length its count says */
    SZ_ERR_MAGIC,
    SZ_ERR_VERSION,      /* a version or entry length this build does not read */
    SZ_ERR_CHECKSUM,
    SZ_ERR_ENTRY,        /* an entry no state can have (inode 0, nanoseconds >= 10^9, ...) */
    SZ_ERR_IO,           /* errno says why */
    SZ_ERR_NOMEM,
} sz_error;

const char *sz_error_name(sz_error e);
/* Checks a whole file image; *count: its entries. Nothing is trusted unless all of it is
 * valid. */
sz_error sz_parse(const uint8_t *buf, size_t len, uint64_t *count);
/* The entries of a valid image into c, as states of device dev, in the file's order (oldest
 * use first: when the file holds more than c, the most recently used stay). */
sz_error sz_import(sz_cache *c, const uint8_t *buf, size_t len, dev_t dev, uint64_t *count);
/* The image of c's entries of device dev, oldest use first; *buf is malloc'd. */
sz_error sz_export(sz_cache *c, dev_t dev, uint8_t **buf, size_t *len);
/* The file in the directory dirfd: read (SZ_ERR_MISSING when there is none), or written
 * (temporary file, fsync, rename; the caller syncs the directory). */
sz_error sz_load(sz_cache *c, int dirfd, dev_t dev, uint64_t *count);
sz_error sz_save(sz_cache *c, int dirfd, dev_t dev, uint64_t *count);

#endif
