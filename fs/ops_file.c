/* Regular files: open, create, read, write, flush, fsync, release, fallocate, lseek. */
#include "ops_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cred.h"

/* One ff_file per inode, shared by every handle (fi->fh points at it): several handles of a
 * file, in one process or several, see one consistent file. The pin keeps the inode alive
 * until the last release even if the kernel forgets it first. */
static int op_writable(const struct fuse_file_info *fi)
{
    return (fi->flags & O_ACCMODE) != O_RDONLY;
}

static uint64_t op_fh(ff_file *f, const struct fuse_file_info *fi)
{
    return (uintptr_t)f | (op_writable(fi) ? OP_FH_WRITES : 0u) |
           (fi->direct_io ? OP_FH_DIRECT : 0u);
}

static int op_open_inode(struct op_fs *fs, struct in_inode *n, struct fuse_file_info *fi)
{
    if (!S_ISREG(n->type))
        return S_ISDIR(n->type) ? -EISDIR : -EINVAL;
    in_pin(fs->tab, n);
    pthread_mutex_lock(&n->lock);
    int err = n->file ? 0 : op_open_backing(fs, n, &n->file);
    if (!err && (fi->flags & O_TRUNC))
        err = ff_truncate(n->file, 0);
    if (!err) {
        op_unwarm(fs, n);
        op_cache_open(fs, n, fi, 0);
        n->open_count++;
        n->writers += op_writable(fi);
        fi->fh = op_fh(n->file, fi);
    } else if (n->file && n->open_count == 0 && !n->retained) {
        ff_release(n->file);
        n->file = NULL;
    }
    pthread_mutex_unlock(&n->lock);
    if (err)
        in_unpin(fs->tab, n);
    return err;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    /* an open that truncates (FUSE_CAP_ATOMIC_O_TRUNC) clears the set-id bits as a
     * truncation does, where the kernel left that to the daemon */
    int err = (fi->flags & O_TRUNC)
                  ? op_kill_privs_notify(fs, req, ino, n, NULL, OP_KILL_RESIZE) : 0;
    if (!err)
        err = op_open_inode(fs, n, fi);
    err = op_log(fs, "open", n, NULL, err);
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_open(req, fi);
}

/* Installs a freshly created file's state in its inode; e->attr comes holding the backing
 * file's attributes (ff_create_stat). */
static int op_install_new(struct op_fs *fs, ff_file *f, int fd, struct fuse_entry_param *e,
                          struct fuse_file_info *fi)
{
    struct in_inode *n;
    struct stat st = e->attr;
    memset(e, 0, sizeof(*e));
    e->attr = st;
    int err = in_lookup_stated(fs->tab, fd, &e->attr, &n);
    if (err) {
        ff_release(f);
        return err;
    }
    in_pin(fs->tab, n);
    pthread_mutex_lock(&n->lock);
    if (n->file) {
        ff_release(f);                 /* cannot happen for a name made with O_EXCL */
    } else {
        n->file = f;
        ff_set_reopen_arg(f, n, O_RDWR);
    }
    op_cache_open(fs, n, fi, 1);
    n->open_count++;
    n->writers += op_writable(fi);
    n->xattr_none = op_xattr_bit("security.capability");   /* nothing gives a new file one */
    e->attr.st_size = (off_t)ff_size(n->file);
    e->attr.st_blksize = fs->blksize;
    ff_get_mtime(n->file, &e->attr.st_mtim);
    fi->fh = op_fh(n->file, fi);
    pthread_mutex_unlock(&n->lock);
    e->ino = in_nodeid(fs->tab, n);
    e->attr_timeout = fs->timeout;
    e->entry_timeout = fs->timeout;
    return 0;
}

/* A name that already exists (create without O_EXCL racing another creator) is opened as
 * it is, never turned into a new empty file. */
static int op_create_existing(struct op_fs *fs, fuse_req_t req, int dirfd, const char *name,
                              struct fuse_entry_param *e, struct fuse_file_info *fi)
{
    int err = op_entry(fs, dirfd, name, e);
    if (err)
        return err;
    struct in_inode *n = in_get(fs->tab, e->ino);
    if ((fi->flags & O_TRUNC) && op_kill_privs(fs, req, n, NULL, OP_KILL_RESIZE) == 1)
        e->attr.st_mode &= ~op_kill_mask(e->attr.st_mode);
    err = op_open_inode(fs, n, fi);
    if (err) {
        op_forget_one(fs, n, 1);
        return err;
    }
    if (fi->flags & O_TRUNC)
        e->attr.st_size = 0;
    return 0;
}

static int op_create_file(struct op_fs *fs, fuse_req_t req, int dirfd, const char *name,
                          mode_t mode, struct fuse_entry_param *e, struct fuse_file_info *fi)
{
    int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC,
                    mode & 07777);
    if (fd < 0 && errno == EEXIST && !(fi->flags & O_EXCL))
        return op_create_existing(fs, req, dirfd, name, e, fi);
    if (fd < 0)
        return -errno;
    int err = op_give_to_caller(fs, req, dirfd, name, mode);
    if (err) {
        close(fd);
        unlinkat(dirfd, name, 0);
        return err;
    }
    ff_file *f;
    err = ff_create_stat(fs->env, fd, NULL, &f, &e->attr);
    if (!err)                          /* fd stays f's until ff_set_reopen_arg */
        err = op_install_new(fs, f, fd, e, fi);
    if (err)
        unlinkat(dirfd, name, 0);
    return err;
}

static int op_create_name(struct op_fs *fs, fuse_req_t req, fuse_ino_t parent,
                          const char *name, mode_t mode, struct fuse_entry_param *e,
                          struct fuse_file_info *fi)
{
    if (op_is_store_name(fs, parent, name))
        return -EPERM;
    in_dirfd d;
    int dirfd = op_dir_get(fs, parent, &d);
    if (dirfd < 0)
        return dirfd;
    int err = op_create_file(fs, req, dirfd, name, op_create_mode(fs, req, parent, mode), e, fi);
    in_dir_put(fs->tab, &d);
    return err;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct fuse_entry_param e;
    uid_t was = op_charge_caller(fs, req);
    int err = op_create_name(fs, req, parent, name, mode, &e, fi);
    cr_restore(was);
    err = op_log(fs, "create", in_get(fs->tab, parent), name, err);
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_create(req, &e, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    char *buf = malloc(size ? size : 1);     /* only the pieces decoded or dirty touch it */
    ff_reply r = {0};
    int err = buf ? ff_read_reply(op_file(fi), buf, size, off, &r) : -ENOMEM;
    err = op_log(fs, "read", in_get(fs->tab, ino), NULL, err);
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_iov(req, r.iov, (int)r.n);
    ff_reply_done(&r);                 /* the file may be gone: its handle was answered */
    free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    int direct = op_handle_direct(fi);
    /* every write but the page cache's write-back: direct handles, O_DIRECT, and the
     * kernel's write-through of a set-id file when the daemon took that over (ops_io.c) */
    int err = fi->writepage ? 0
                            : op_kill_privs_notify(fs, req, ino, n, op_file(fi), OP_KILL_WRITE);
    ff_landing *land = op_io_landed(fs, buf);  /* the payload lies in block buffers */
    if (!err)
        err = land ? ff_write_landed(op_file(fi), land, size, off)
                   : ff_write(op_file(fi), buf, size, off);
    err = op_log(fs, "write", n, NULL, err);
    if (!err && direct)
        op_direct_written(fs, ino, n, off, size);
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_write(req, size);
}

/* Every close(2) of a handle: its error is what close returns, so data acknowledged by
 * close is in the backing file. A read-only handle wrote nothing (the kernel writes back a
 * writer's pages before that writer's own flush), so its close does not report a commit of
 * someone else's data. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    int err = op_handle_writes(fi) ? ff_flush(op_file(fi), 0) : 0;
    err = op_log(fs, "flush", in_get(fs->tab, ino), NULL, err);
    fuse_reply_err(req, -err);
}

static int op_fsync_file(ff_file *f, int datasync)
{
    return ff_flush(f, datasync ? FF_DURABLE_DATA : FF_DURABLE_ALL);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    int err = op_log(fs, "fsync", in_get(fs->tab, ino), NULL, op_fsync_file(op_file(fi), datasync));
    fuse_reply_err(req, -err);
}

/* The last handle's release commits and frees the shared state, under the inode lock so
 * that a new open waits for the commit instead of opening a second state. */
static int op_release_inode(struct op_fs *fs, struct in_inode *n, int writable, int direct)
{
    int err = 0, kept = 0;
    pthread_mutex_lock(&n->lock);
    op_cache_release(n, direct);
    if (n->open_count > 0)
        n->open_count--;
    if (writable && n->writers > 0)
        n->writers--;
    if (n->open_count == 0 && n->file)
        kept = op_close_file(fs, n, &err);
    pthread_mutex_unlock(&n->lock);
    if (!kept)
        in_unpin(fs->tab, n);
    op_warm_trim(fs);
    return err;
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    /* The kernel ignores release errors; the log keeps them. */
    op_log(fs, "release", n, NULL,
           op_release_inode(fs, n, op_writable(fi), op_handle_direct(fi)));
    fuse_reply_err(req, 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                         struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    int err = op_kill_privs_notify(fs, req, ino, n, op_file(fi), OP_KILL_RESIZE);
    if (!err)
        err = ff_fallocate(op_file(fi), mode, offset, length);
    if (err != -EOPNOTSUPP)
        err = op_log(fs, "fallocate", n, NULL, err);
    fuse_reply_err(req, -err);
}

/* The kernel sends SEEK_DATA and SEEK_HOLE without writing back its dirty pages first, so
 * the file's state would not know of data written but still cached. Invalidating the
 * inode's pages makes the kernel write the dirty ones back (to other threads of this
 * daemon) before it drops them; clean pages are lost too, so this is done only while some
 * handle can have dirtied pages. */
static void op_write_back(struct op_fs *fs, struct in_inode *n)
{
    pthread_mutex_lock(&n->lock);
    int writers = n->writers;
    pthread_mutex_unlock(&n->lock);
    if (writers && fs->se)
        fuse_lowlevel_notify_inval_inode(fs->se, in_nodeid(fs->tab, n), 0, 0);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    op_write_back(fs, n);
    off_t res = ff_lseek(op_file(fi), off, whence);
    /* ENXIO is the answer "no data (or hole) past off", not a fault. */
    if (res < 0 && res != -ENXIO)
        op_log(fs, "lseek", n, NULL, (int)res);
    if (res < 0)
        fuse_reply_err(req, (int)-res);
    else
        fuse_reply_lseek(req, res);
}

void op_fill_file(struct fuse_lowlevel_ops *ops)
{
    ops->open = op_open;
    ops->read = op_read;
    ops->write = op_write;
    ops->flush = op_flush;
    ops->release = op_release;
    ops->fsync = op_fsync;
    ops->create = op_create;
    ops->fallocate = op_fallocate;
    ops->lseek = op_lseek;
}
