/* dr: directory listings through the mount (opendir, readdir, fsyncdir, releasedir), with a
 * bound on the backing streams they hold.
 *
 * Each opendir handle lists with a stream of its own, so that concurrent listings of one
 * directory do not share a position. Streams held between requests are counted: past
 * dr_bound.max, a listing closes its stream after each reply and opens it again (by file
 * handle, then seekdir to where it stopped) at its next readdir, so that a user who holds
 * thousands of directories open cannot use up the daemon's descriptors (docs/SECURITY.md).
 * Directory offsets are the backing filesystem's telldir cookies, which stay valid across
 * streams of one directory. */
#ifndef FPGALZ4FS_DIRS_H
#define FPGALZ4FS_DIRS_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "inode.h"

/* Shared by every listing of one mount. */
typedef struct {
    atomic_uint held;                  /* streams held between requests */
    unsigned max;                      /* 0: no bound */
    atomic_ulong reopens;              /* streams opened again to continue a listing */
} dr_bound;

typedef struct dr_dir dr_dir;

/* What a listing with attributes (READDIRPLUS) asks of the daemon: the lookup of one name in
 * the directory, which counts as one of the kernel's lookups as a LOOKUP reply does, and its
 * undoing for an entry that did not fit in the reply. */
typedef struct {
    int (*lookup)(void *ctx, int dirfd, const char *name, struct fuse_entry_param *e);
    void (*forget)(void *ctx, fuse_ino_t ino);
    void *ctx;
} dr_plus;

/* Opens a listing of directory n (pinned until dr_close); read_only: no atime change. */
int dr_open(in_table *tab, struct in_inode *n, int read_only, dr_bound *b, dr_dir **out);
/* Fills buf (size bytes) with entries from offset off, as FUSE's readdir reply, or with
 * plus (not NULL) as its readdirplus reply: each entry with its attributes, so that a listing
 * like ls -l or du needs no LOOKUP per name. An entry whose lookup fails (it went away) is
 * sent without them, which the kernel takes as "not looked up". */
int dr_fill(dr_dir *d, fuse_req_t req, char *buf, size_t size, off_t off, const dr_plus *plus,
            size_t *used);
int dr_fsync(dr_dir *d, int datasync);

/* The same with no handle, where the kernel skipped OPENDIR (FUSE_CAP_NO_OPENDIR_SUPPORT): a
 * stream of n opened for this one request, at offset off, and closed before it returns, so
 * that a listing holds nothing between requests. */
int dr_fill_once(in_table *tab, struct in_inode *n, int read_only, dr_bound *b,
                 fuse_req_t req, char *buf, size_t size, off_t off, const dr_plus *plus,
                 size_t *used);
int dr_fsync_once(in_table *tab, struct in_inode *n, int datasync);
void dr_close(dr_dir *d);

#endif
