/* What the files of the FUSE handlers share (ops.c, ops_xattr.c); nothing outside them
 * includes this. */
#ifndef FPGALZ4FS_OPS_INTERNAL_H
#define FPGALZ4FS_OPS_INTERNAL_H

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

/* ops_keep.c: what stays of a file after its last release (in_inode.retained) */
enum { OP_KEEP_NONE = 0, OP_KEEP_FAILED, OP_KEEP_WARM };
int op_close_file(struct op_fs *fs, struct in_inode *n, int *err);
void op_free_file(struct op_fs *fs, struct in_inode *n, int *err);
void op_warm_trim(struct op_fs *fs);
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
/* Before a write through a direct handle: the set-id bits such a write clears. */
int op_direct_kill_privs(struct op_fs *fs, fuse_req_t req, fuse_ino_t ino, struct in_inode *n);

/* ops_xattr.c */
unsigned op_xattr_bit(const char *name);   /* a remembered attribute's bit, or 0 */
void op_xattr_changed(struct in_inode *n); /* forget what n is known not to have */
/* 1 when n has the attribute name (a backing error counts as not having it). */
int op_xattr_has(struct op_fs *fs, struct in_inode *n, const char *name);
void op_fill_xattr(struct fuse_lowlevel_ops *ops);

#endif
