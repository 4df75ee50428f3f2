/* Directory listings: opendir, readdir(plus), releasedir, fsyncdir (the streams: dirs.c). */
#include "ops_internal.h"

#include <errno.h>
#include <stdlib.h>

/* Where the kernel can do without it, an OPENDIR is refused with ENOSYS, which the kernel
 * takes as a success that needs no reply next time: a listing then costs no OPENDIR and no
 * RELEASEDIR, and each READDIR opens its own stream (dr_fill_once). The kernel caches such
 * listings as it would with cache_readdir. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    if (!fs->dir_handles) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    struct in_inode *n = in_get(fs->tab, ino);
    dr_dir *d = NULL;
    int err = op_log(fs, "opendir", n, NULL, dr_open(fs->tab, n, fs->read_only, &fs->dirs, &d));
    fi->fh = (uintptr_t)d;
    /* Listings stay valid until this mount changes the directory, which the kernel sees. */
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_open(req, fi);
}

static int op_plus_lookup(void *ctx, int dirfd, const char *name, struct fuse_entry_param *e)
{
    return op_entry(ctx, dirfd, name, e);
}

static void op_plus_forget(void *ctx, fuse_ino_t ino)
{
    struct op_fs *fs = ctx;
    op_forget_one(fs, in_get(fs->tab, ino), 1);
}

static void op_list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi, int plus)
{
    struct op_fs *fs = op_fs(req);
    dr_dir *d = (dr_dir *)(uintptr_t)fi->fh;
    dr_plus p = {op_plus_lookup, op_plus_forget, fs};
    char *buf = malloc(size ? size : 1);
    size_t used = 0;
    int err = !buf ? -ENOMEM
              : d  ? dr_fill(d, req, buf, size, off, plus ? &p : NULL, &used)
                   : dr_fill_once(fs->tab, in_get(fs->tab, ino), fs->read_only, &fs->dirs, req,
                                  buf, size, off, plus ? &p : NULL, &used);
    err = op_log(fs, plus ? "readdirplus" : "readdir", in_get(fs->tab, ino), NULL, err);
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    op_list(req, ino, size, off, fi, 0);
}

/* ls -l, du, find with stat: every entry comes with its attributes, one request for many
 * names instead of a LOOKUP each (the kernel asks for it where it helps). */
static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    op_list(req, ino, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (fi->fh)
        dr_close((dr_dir *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    dr_dir *d = (dr_dir *)(uintptr_t)fi->fh;
    int err = d ? dr_fsync(d, datasync) : dr_fsync_once(fs->tab, in_get(fs->tab, ino), datasync);
    fuse_reply_err(req, -op_log(fs, "fsyncdir", in_get(fs->tab, ino), NULL, err));
}

void op_fill_dir(struct fuse_lowlevel_ops *ops)
{
    ops->opendir = op_opendir;
    ops->readdir = op_readdir;
    ops->readdirplus = op_readdirplus;
    ops->releasedir = op_releasedir;
    ops->fsyncdir = op_fsyncdir;
}
