/* ff: the open state of one regular file of the store, shared by every handle of it.
 *
 * An own file (one that starts with the fpgalz4fs marker) is kept as LZ4 frames with a
 * trailing seek table (docs/FORMAT.md). Writes land in whole decoded blocks held in memory
 * (dirty blocks); a commit compresses them through the engine, appends them as new frames
 * at the end of the backing file, writes a new seek table and then retires the frames they
 * replace. Reads decode only the blocks they touch. A foreign file (anything without the
 * marker) passes through byte for byte.
 *
 * Every function returns 0 or a negative errno. Every ff_file call is thread-safe: a
 * mutex per file serialises them. */
#ifndef FPGALZ4FS_FFILE_H
#define FPGALZ4FS_FFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "eng.h"
#include "log.h"
#include "sb.h"

typedef struct ff_env_s ff_env;
typedef struct ff_file_s ff_file;

typedef struct {
    int read_only;                     /* -o ro: never write to the backing file, repairs too */
    uint64_t mem_bytes;                /* mem_mb: decoded-block cache plus dirty blocks */
    uint32_t file_version;             /* format of new files: 0 for the newest (3); 1 keeps
                                          the version 1 writer testable on its own, 2 makes
                                          files that version 2 builds read (no hole runs) */
    uint64_t fd_max;                   /* backing descriptors open files may hold before
                                          idle ones are closed (ff_set_reopen_arg); 0: no
                                          bound */
    uint64_t clean_ns, start_ns;       /* a version 2 file whose backing ctime (ns since
                                          the epoch) lies strictly between them was last
                                          changed after the store was last left clean and
                                          before this mount: its blocks written after its
                                          last sync are checked at open (fmt2_check_fresh).
                                          0, 0: never; 0, UINT64_MAX: always (tools) */
    int charge_owner;                  /* write as the backing file's owner (cred.h): the
                                          daemon, running as root with capabilities cut */
    unsigned ahead_threads;            /* threads that decode ahead of sequential readers;
                                          0: none (reads decode only what they ask for) */
} ff_options;

/* Shared by all files of one mount. The engine and log stay owned by the caller. */
ff_env *ff_env_new(eng_ctx *eng, const sb_super *sb, const ff_options *opt, lg_log *log);
void ff_env_free(ff_env *env);

/* Opens the state for a backing descriptor (O_RDWR, or O_RDONLY under ro); takes ownership of
 * fd. A torn own file is repaired here (mtime kept, a line in the log) unless read-only.
 * name is only used in log lines; NULL: the backing path, looked up when a line needs it. */
int ff_open(ff_env *env, int fd, const char *name, ff_file **out);

/* Turns a new, empty backing file into an empty own file (marker + empty seek table), then
 * opens it as ff_open does. */
int ff_create(ff_env *env, int fd, const char *name, ff_file **out);
/* The same, giving the backing file's attributes right after (a create answers with them). */
int ff_create_stat(ff_env *env, int fd, const char *name, ff_file **out, struct stat *st);

/* Commits and frees; returns the commit's error (the state is freed either way). */
int ff_release(ff_file *f);
/* ff_release, and what the backing file and its logical size are after the last write
 * (st->st_ino 0 when that could not be read). */
int ff_release_stat(ff_file *f, struct stat *st, uint64_t *size);
/* Frees without committing, for a file that no name reaches any more (unlinked, its last
 * handle gone): nothing can read its data again, and writing them would only take space. */
void ff_discard(ff_file *f);

int ff_read(ff_file *f, void *buf, size_t len, off_t off, size_t *got);
/* A read as the pieces of its reply, so that cached blocks and holes are sent without a
 * copy: each piece lies in buf (len bytes, only partly written), in the mount's cache of
 * decoded blocks, or in a block of zeros. The cache keeps the pieces' bytes until
 * ff_reply_done, which must follow every call, failed or not. ff_reply_done does not touch
 * the file: once the reply is sent, its handle may be released and the file freed. */
typedef struct {
    struct iovec *iov;                 /* the pieces in order, n of them, len bytes in all */
    unsigned n;
    size_t len;
    struct bc_cache_s *cache;          /* the mount's cache, which holds the pins */
    uint32_t *pins;                    /* cache slots held for the pieces */
    unsigned n_pins;
} ff_reply;
int ff_read_reply(ff_file *f, void *buf, size_t len, off_t off, ff_reply *r);
void ff_reply_done(ff_reply *r);
int ff_write(ff_file *f, const void *buf, size_t len, off_t off);
/* A WRITE payload that the kernel put straight into block buffers (ops_io.c): byte p of it
 * lies at buf[p / bs] + p % bs, n buffers of bs bytes (the store's block size) from
 * ff_land_get. ff_write_landed writes it as ff_write does, except that each whole block it
 * covers at a block boundary takes its buffer as the block's own instead of a copy
 * (counter writes_landed): buf[k] then holds the block's old buffer or NULL, and the caller
 * gets a new one before the next payload lands. */
typedef struct {
    uint8_t **buf;
    uint8_t *host;                     /* buf[k] is the card's to read in place */
    uint32_t bs;
    unsigned n;
} ff_landing;
int ff_write_landed(ff_file *f, ff_landing *l, size_t len, off_t off);
uint8_t *ff_land_get(ff_env *env, uint8_t *host);
void ff_land_put(ff_env *env, uint8_t *buf, uint8_t host);
int ff_truncate(ff_file *f, off_t size);
/* How durable a commit is made: not at all (close, flush), its data (fdatasync), or its
 * data and attributes (fsync), in the one sync the commit makes. */
enum { FF_DURABLE_NONE = 0, FF_DURABLE_DATA = 1, FF_DURABLE_ALL = 2 };
/* Makes every write so far part of the backing file, as durable as asked (FF_DURABLE_*). */
int ff_flush(ff_file *f, int durable);
/* ff_flush at the last close of a file whose state stays for its next open: it also leaves
 * what only an open file may keep (a footer pair larger than a file at rest may end with). */
int ff_flush_last(ff_file *f);
/* mode as fallocate(2): 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE,
 * FALLOC_FL_ZERO_RANGE; others give -EOPNOTSUPP. */
int ff_fallocate(ff_file *f, int mode, off_t off, off_t len);
/* SEEK_DATA / SEEK_HOLE over logical offsets; returns the offset or a negative errno. */
off_t ff_lseek(ff_file *f, off_t off, int whence);

uint64_t ff_size(ff_file *f);           /* logical size */
int ff_is_foreign(const ff_file *f);
/* The memory an open state holds for its own: itself and its block table (not the block
 * buffers and compressors, which mem_mb bounds elsewhere). Under the file's lock, or while
 * nothing else can use the state (its last handle released). */
uint64_t ff_state_bytes(const ff_file *f);
/* The logical modification time (writes set it to now; setattr sets it explicitly). It is
 * restored onto the backing file after each commit, since commits write the file. */
void ff_get_mtime(ff_file *f, struct timespec *out);
void ff_set_mtime(ff_file *f, const struct timespec *ts);

/* Bounded descriptors. Past opt.fd_max, the least recently used idle files (nothing
 * unstored, nothing being read) close their backing descriptor and get it back from fn
 * when next used; fn(ctx, arg, flags) returns a new descriptor or -errno. Only files given
 * an arg are ever closed; a file whose last name is gone keeps its descriptor (nothing
 * could reopen it), and so does one given to ff_hold_fd: call it before removing what
 * may be a file's last name. */
typedef int (*ff_reopen_fn)(void *ctx, void *arg, int flags);
void ff_env_set_reopen(ff_env *env, ff_reopen_fn fn, void *ctx);
void ff_set_reopen_arg(ff_file *f, void *arg, int flags);
int ff_hold_fd(ff_file *f);
uint64_t ff_env_fds(ff_env *env);      /* descriptors open files hold now */
/* The backing file, for metadata: a duplicate descriptor the caller closes, or fstat and
 * fsync done here. */
int ff_dup_fd(ff_file *f);
int ff_fstat(ff_file *f, struct stat *st);
/* Runs fn on the backing file's descriptor under the file's lock (it is not closed or
 * reopened meanwhile): a change of owner or mode without a duplicate to make and close.
 * Returns fn's result or the -errno of a failed reopen. */
int ff_with_fd(ff_file *f, int (*fn)(int fd, void *arg), void *arg);
void ff_set_owner(ff_file *f, uid_t uid);
/* atime and mtime (UTIME_OMIT keeps one) of the open file, logical and backing, in one call:
 * the kernel's writeback cache sends them at every close of a written file. */
int ff_set_times(ff_file *f, const struct timespec tv[2]);   /* after a chown of the open file */

/* Logical size of a backing file that is not open, read-only (no repair): own files give
 * the seek table's size (or a scan's when the table is torn); foreign files their size.
 * *own is set to 1 for an own file. Returns 1 when only the repair an open makes can tell
 * the size (a torn file; a version 2 file the clean mark says a power loss may have caught,
 * with blocks written after its last sync): *size is then a guess, and the caller should
 * open the file (ff_open) and take its size. */
int ff_stat_size(ff_env *env, int fd, uint64_t *size, int *own);

/* Counters for user.fpgalz4fs.stats. */
typedef struct {
    uint64_t commits;                  /* commits that wrote something */
    uint64_t blocks_written;           /* blocks written by commits */
    uint64_t blocks_copied;            /* blocks moved (not recompressed) by tail rewrites */
    uint64_t blocks_decoded;           /* blocks decoded by reads */
    uint64_t cache_hits;               /* reads served from the decoded-block cache */
    uint64_t repairs;                  /* torn files repaired */
    uint64_t corrupt_blocks;           /* checksum or decode failures seen by reads */
    uint64_t fds_open;                 /* backing descriptors open files hold now */
    uint64_t fd_closes, fd_reopens;    /* idle descriptors closed, and opened again */
    uint64_t tail_blocks;              /* last blocks compressed by the tail compressor */
    uint64_t tail_bytes_kept;          /* of their bytes, those carried over, not compressed */
    uint64_t readahead_blocks;         /* blocks decoded ahead of a sequential reader */
    uint64_t pair_commits;             /* durable commits through the footer pair: one sync */
    uint64_t blocks_ahead;             /* blocks of streaming bricks written by the thread
                                          that compressed them, or behind a brick their
                                          writer wrote, not by their writer's commit */
    uint64_t writes_landed;            /* blocks whose WRITE payload became their buffer */
    uint64_t page_records;             /* changes committed as records behind a frame */
    uint64_t record_commits;           /* commits whose every change went as records */
    uint64_t records_folded;           /* blocks whose records a release made a new frame */
    uint64_t records_folded_early;     /* blocks whose slots a records commit left low on
                                          room, folded by a later one */
    uint64_t chain_links;              /* commits that appended to a last block as a link of
                                          its chained frame (version 5) */
    uint64_t chain_primed;             /* of those, links whose block the tail compressor
                                          compressed first (a writer's first after an open) */
    uint64_t tail_taken;               /* tail compressors a file took from the least
                                          recently used one, their memory being spent */
} ff_stats;
void ff_env_stats(ff_env *env, ff_stats *out);

#endif
