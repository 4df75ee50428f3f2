/* What the files of the FUSE handlers share (ops.c: lifecycle, lookups, attributes;
 * ops_names.c, ops_file.c, ops_dir.c, ops_xattr.c, ops_keep.c, ops_direct.c); nothing
 * outside them includes this. */
#ifndef FPGALZ4FS_OPS_INTERNAL_H
#define FPGALZ4FS_OPS_INTERNAL_H

#include <stdint.h>

#include "ops.h"

#define OP_STATS_MAX 2048              /* user.fpgalz4fs.stats, as text */

struct op_fs *op_fs(fuse_req_t req);
/* A descriptor for metadata calls on n (an open file's own, duplicated); close it. */
int op_meta_fd(struct op_fs *fs, struct in_inode *n);
/* Logs a non-trivial error of operation what on n (or on name inside n); returns err. */
int op_log(struct op_fs *fs, const char *what, struct in_inode *n, const char *name, int err);
/* The calling thread's fsuid for what a request makes (cred.h); cr_restore after. */
uid_t op_charge_caller(struct op_fs *fs, fuse_req_t req);
int op_err(int rc);                    /* -errno after a failed call, else 0 */
void op_reply_entry(fuse_req_t req, int err, const struct fuse_entry_param *e);

/* A regular file's handle is its inode's shared ff_file, tagged in its low bits (free: the
 * state is malloc'ed) with what flush and release requests do not carry: whether the handle
 * was opened for writing, and whether it bypasses the page cache (ops_direct.c). */
#define OP_FH_WRITES 1u
#define OP_FH_DIRECT 2u

static inline ff_file *op_file(const struct fuse_file_info *fi)
{
    return (ff_file *)(uintptr_t)(fi->fh & ~(uint64_t)(OP_FH_WRITES | OP_FH_DIRECT));
}

static inline int op_handle_writes(const struct fuse_file_info *fi)
{
    return (fi->fh & OP_FH_WRITES) != 0;
}

static inline int op_handle_direct(const struct fuse_file_info *fi)
{
    return (fi->fh & OP_FH_DIRECT) != 0;
}

/* ops.c: names and inodes */
/* 1 for a name of the store's own at the top of the store (hidden, never made). */
int op_is_store_name(struct op_fs *fs, fuse_ino_t parent, const char *name);
/* The entry of name in dirfd, with one more lookup of its inode (op_forget_one undoes it). */
int op_entry(struct op_fs *fs, int dirfd, const char *name, struct fuse_entry_param *e);
void op_forget_one(struct op_fs *fs, struct in_inode *n, uint64_t count);
/* The parent directory of a request (in_dir_get): its descriptor or -errno. */
int op_dir_get(struct op_fs *fs, fuse_ino_t ino, in_dirfd *d);
/* The open state of regular file n, made or loaded from its backing file. */
int op_open_backing(struct op_fs *fs, struct in_inode *n, ff_file **out);

/* ops_names.c */
/* The mode an object made under parent gets (the umask applies where it has no default ACL). */
mode_t op_create_mode(struct op_fs *fs, fuse_req_t req, fuse_ino_t parent, mode_t mode);
/* Hands an object the daemon made for another caller over to that caller. */
int op_give_to_caller(struct op_fs *fs, fuse_req_t req, int dirfd, const char *name, mode_t mode);
void op_fill_names(struct fuse_lowlevel_ops *ops);

/* ops_file.c, ops_dir.c */
void op_fill_file(struct fuse_lowlevel_ops *ops);
void op_fill_dir(struct fuse_lowlevel_ops *ops);

/* ops_keep.c: what stays of a file after its last release (in_inode.retained) */
enum { OP_KEEP_NONE = 0, OP_KEEP_FAILED, OP_KEEP_WARM };
int op_close_file(struct op_fs *fs, struct in_inode *n, int *err);
void op_free_file(struct op_fs *fs, struct in_inode *n, int *err);
void op_warm_trim(struct op_fs *fs);
unsigned op_warm_count(struct op_fs *fs);    /* files kept for their next open */
void op_unwarm(struct op_fs *fs, struct in_inode *n);
void op_drop_warm(struct op_fs *fs, struct in_inode *n);
void op_end_retention(struct op_fs *fs, struct in_inode *n);
void op_drop_removed(struct op_fs *fs, struct in_inode *n);
int op_keeps_any(struct op_fs *fs);

/* ops_direct.c: page cache or direct handles (in_inode.direct_handles); under n->lock. Sets
 * fi->direct_io and fi->keep_cache for a handle about to open (created: by this create). */
void op_cache_open(struct op_fs *fs, struct in_inode *n, struct fuse_file_info *fi, int created);
void op_cache_release(struct in_inode *n, int direct);
/* After a write through a direct handle (no daemon lock held: the kernel may need another
 * request answered to drop a page): the pages it covered, if any cached handle is open. */
void op_direct_written(struct op_fs *fs, fuse_ino_t ino, struct in_inode *n, off_t off,
                       size_t len);
/* Clears the set-id bits that a write, truncation or fallocate by the caller of req clears
 * (the set-user-ID bit, and the set-group-ID bit of a group-executable file: op_kill_mask),
 * for every caller but root; 1 when it cleared one (the kernel's cached mode is then stale),
 * 0, or -errno. A write (other than the page cache's write-back) always asks; a resize
 * (truncation, O_TRUNC open, fallocate) only where the kernel left it to the daemon
 * (ops_io.c). f: the file's open state when the caller holds one, else NULL. */
enum op_kill_cause { OP_KILL_WRITE, OP_KILL_RESIZE };
mode_t op_kill_mask(mode_t mode);
int op_kill_privs(struct op_fs *fs, fuse_req_t req, struct in_inode *n, ff_file *f,
                  enum op_kill_cause cause);
/* The same, and the kernel forgets the attributes it cached when a bit went. */
int op_kill_privs_notify(struct op_fs *fs, fuse_req_t req, fuse_ino_t ino, struct in_inode *n,
                         ff_file *f, enum op_kill_cause cause);

/* ops_xattr.c */
unsigned op_xattr_bit(const char *name);   /* a remembered attribute's bit, or 0 */
void op_xattr_changed(struct in_inode *n); /* forget what n is known not to have */
/* 1 when n has the attribute name (a backing error counts as not having it). */
int op_xattr_has(struct op_fs *fs, struct in_inode *n, const char *name);
void op_fill_xattr(struct fuse_lowlevel_ops *ops);

#endif
