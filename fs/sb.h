/* sb: the store's superblock, DIR/.fpgalz4fs.
 *
 * The superblock names the format version, block size, UUID and creation time of a store.
 * It is a short text file (key=value lines) ending in an XXH32 checksum line, so that a
 * person can read it and a torn or edited copy is detected. docs/FORMAT.md has the layout.
 * The file also carries the store lock: one daemon (or fsck) per store, taken with flock. */
#ifndef FPGALZ4FS_SB_H
#define FPGALZ4FS_SB_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SB_FILE_NAME ".fpgalz4fs"
#define SB_TMP_NAME SB_FILE_NAME ".tmp"   /* the superblock's temporary during sb_write */
#define SB_FORMAT_VERSION 7u           /* the newest format this build reads and writes */
#define SB_MAX_TEXT 1024               /* the superblock file is never larger than this */

typedef struct {
    uint32_t format_version;           /* on-disk format version of the store */
    uint32_t block_size;               /* logical bytes per block: 64K, 256K, 1M or 4M */
    uint8_t uuid[16];                  /* store identity, copied into every file's marker */
    int64_t created;                   /* creation time, seconds since the epoch (UTC) */
} sb_super;

typedef enum {
    SB_OK = 0,
    SB_ERR_MISSING,                    /* no superblock: the directory is not a store */
    SB_ERR_IO,                         /* a system call failed; errno is kept */
    SB_ERR_CORRUPT,                    /* unparseable text or checksum mismatch */
    SB_ERR_NEWER,                      /* a format version newer than SB_FORMAT_VERSION */
    SB_ERR_BLOCK_SIZE,                 /* a block size other than the four allowed */
    SB_ERR_LOCKED,                     /* another daemon or tool holds the store */
    SB_ERR_NOT_REGULAR,                /* .fpgalz4fs is a symlink or not a regular file */
} sb_error;

/* A name for an error, for messages. */
const char *sb_error_name(sb_error e);

/* True when size is one of 64K, 256K, 1M, 4M. */
int sb_block_size_valid(uint32_t size);

/* "64K", "256K", "1M" or "4M"; "?" for any other size. */
const char *sb_block_size_name(uint32_t size);

/* Parses "64K", "256K", "1M", "4M" (also plain byte counts); 0 when not one of those. */
uint32_t sb_parse_block_size(const char *text);

/* Text form <-> struct. sb_format returns the length written (< cap) or 0 if cap is short.
 * sb_parse fills *sb on SB_OK; on SB_ERR_NEWER it sets only sb->format_version (the newer
 * version, for the error message). */
size_t sb_format(const sb_super *sb, char *out, size_t cap);
sb_error sb_parse(const char *text, size_t len, sb_super *sb);

/* True for a name that belongs to the store when it is at the top of the backing directory:
 * every name beginning with ".fpgalz4fs" (the superblock, its temporary, the conversion
 * temporaries and any name a later version may need). The daemon hides these names at the
 * root of the mount and lets nobody make them, so that no user can plant a symlink where a
 * tool run by root will write (docs/SECURITY.md). */
int sb_is_reserved_name(const char *name);

/* Reads DIR/.fpgalz4fs through the directory descriptor dirfd. The superblock must be a
 * regular file: a symlink (never followed) or anything else gives SB_ERR_NOT_REGULAR. */
sb_error sb_read(int dirfd, sb_super *sb);

/* Writes the superblock crash-safely (temporary file, fsync, rename, fsync of the directory).
 * A leftover temporary is removed first and the new one made with O_EXCL | O_NOFOLLOW, so
 * that a symlink planted in its place is never written through; an existing superblock that
 * is not a regular file gives SB_ERR_NOT_REGULAR and nothing is written. */
sb_error sb_write(int dirfd, const sb_super *sb);

/* Fills a new superblock: current version, the block size, a random UUID, the current time. */
sb_error sb_init(sb_super *sb, uint32_t block_size);

/* Takes the store lock (non-blocking). Returns SB_OK and a descriptor to keep open for as
 * long as the store is held, or SB_ERR_LOCKED when another process holds it;
 * SB_ERR_NOT_REGULAR when the superblock is a symlink or not a regular file. */
sb_error sb_lock(int dirfd, int *lock_fd);

/* The store's clean mark (.fpgalz4fs-clean, docs/FORMAT.md 1.4): whether every change made
 * through a mount up to a time (ns since the epoch) is on the disk whole. "clean T": every
 * change before T is; "dirty L": a mount is running or ended without unmounting (a power
 * loss may have kept part of what it wrote), and only changes before L are known whole.
 * Read: *ns is T or L (0 when there is no mark, or it cannot be read: nothing is known
 * whole), *clean 1 for "clean". Written like the superblock (temporary, fsync, rename,
 * fsync of the directory); a mark that is a symlink or not a regular file is refused. */
#define SB_CLEAN_NAME SB_FILE_NAME "-clean"
#define SB_CLEAN_TMP_NAME SB_CLEAN_NAME ".tmp"
sb_error sb_mark_read(int dirfd, uint64_t *ns, int *clean);
/* The mark's text: 0 and *ns, *clean set when it is one line "clean T\n" or "dirty T\n" (T at
 * most 19 decimal digits), else -1 and nothing set. */
int sb_mark_parse(const char *text, size_t len, uint64_t *ns, int *clean);
sb_error sb_mark_write(int dirfd, uint64_t ns, int clean);
/* A time in the mark's unit (ns since the epoch): a file's ctime, the clock. */
static inline uint64_t sb_ns(struct timespec ts)
{
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* UUID as 36 characters plus NUL. */
void sb_uuid_text(const uint8_t uuid[16], char out[37]);

#endif
