/* Which handles of a regular file bypass the kernel's page cache (in_inode.direct_handles).
 *
 * The mount runs with the writeback cache: the kernel gathers small writes into pages and
 * sends them in large requests, which is what makes appends and databases cheap. A large
 * sequential writer pays for it: every byte is copied into the page cache and again out of
 * it, the kernel throttles the mount's dirty pages hard, and one flusher thread writes back
 * for every writer of the mount. So a handle that starts a file's content anew (created, or
 * opened write-only with O_TRUNC; not O_APPEND, the mark of a log whose small writes the
 * kernel should gather) while no other handle is open writes directly: each
 * write(2) is a request of its own that lands in the daemon's block buffers.
 *
 * Cached handles opened while a direct writer writes stay cached (a shared mapping needs
 * them), so the daemon has the kernel drop the pages each direct write covers while any
 * cached handle is open, after the write and not only before it (as newer kernels do
 * themselves): a page a reader caches in between would go stale. No other page can: a direct
 * handle starts with none (a new file, or O_TRUNC, which empties the kernel's cache too), and
 * being write-only it cannot be mapped. So every handle keeps the pages across opens, as
 * before direct handles existed: dropping them at the first cached open after a direct
 * handle would protect no page and would make cached handles behave differently. */
#include "ops_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

static int op_starts_anew(const struct fuse_file_info *fi, int created)
{
    return (fi->flags & O_ACCMODE) == O_WRONLY && !(fi->flags & O_APPEND) &&
           (created || (fi->flags & O_TRUNC));
}

void op_cache_open(struct op_fs *fs, struct in_inode *n, struct fuse_file_info *fi, int created)
{
    int direct = fs->direct_writes && n->open_count == 0 && op_starts_anew(fi, created);
    if (direct) {
        n->direct_handles++;
        fs->direct_opens++;
    }
    fi->direct_io = (unsigned)direct;
    /* The daemon is the only writer of the backing files: cached pages stay valid from one
     * open to the next. */
    fi->keep_cache = 1;
}

void op_cache_release(struct in_inode *n, int direct)
{
    if (direct && n->direct_handles > 0)
        n->direct_handles--;
}

void op_direct_written(struct op_fs *fs, fuse_ino_t ino, struct in_inode *n, off_t off,
                       size_t len)
{
    pthread_mutex_lock(&n->lock);
    int cached = n->open_count > n->direct_handles;
    pthread_mutex_unlock(&n->lock);
    if (cached && len > 0)
        fuse_lowlevel_notify_inval_inode(fs->se, ino, off, (off_t)len);
}

/* A write(2) through the page cache has the kernel clear the set-user-ID bit (and a
 * group-executable set-group-ID bit) of a file written by an unprivileged caller, unless the
 * daemon took that over (ops_io.c); a direct write, a truncation or an fallocate that the
 * kernel leaves to the filesystem comes with a request flag that libfuse 3.14 does not pass
 * on. So the daemon clears them for every caller but root (the holder of CAP_FSETID in
 * practice). */
mode_t op_kill_mask(mode_t mode)
{
    return S_ISUID | ((mode & S_IXGRP) ? S_ISGID : 0);
}

static int op_kill_bits(struct op_fs *fs, struct in_inode *n, ff_file *f)
{
    struct stat st;
    /* a writer's own descriptor answers the common case (no set-id bit) in one fstat */
    int rc = f ? ff_fstat(f, &st) : 0;
    if (rc < 0 || (f && !(st.st_mode & op_kill_mask(st.st_mode))))
        return rc;
    int fd = op_meta_fd(fs, n);
    if (fd < 0)
        return fd;
    rc = fstat(fd, &st) < 0 ? -errno : 0;
    mode_t kill = op_kill_mask(st.st_mode);
    if (rc == 0 && (st.st_mode & kill))
        rc = fchmod(fd, st.st_mode & 07777 & ~kill) < 0 ? -errno : 1;
    close(fd);
    return rc;
}

int op_kill_privs(struct op_fs *fs, fuse_req_t req, struct in_inode *n, ff_file *f,
                  enum op_kill_cause cause)
{
    /* the kernel clears the bits itself on a resize unless the daemon took that over */
    if (cause == OP_KILL_RESIZE && !atomic_load(&fs->killpriv))
        return 0;
    if (fuse_req_ctx(req)->uid == 0)
        return 0;
    return op_kill_bits(fs, n, f);
}

int op_kill_privs_notify(struct op_fs *fs, fuse_req_t req, fuse_ino_t ino, struct in_inode *n,
                         ff_file *f, enum op_kill_cause cause)
{
    int rc = op_kill_privs(fs, req, n, f, cause);
    if (rc == 1)
        fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
    return rc < 0 ? rc : 0;
}
