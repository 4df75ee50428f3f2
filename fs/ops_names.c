/* Names: objects made, removed, renamed and linked (FUSE mknod, mkdir, symlink, unlink,
 * rmdir, rename, link). */
#include "ops_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cred.h"

/* Objects are made by the daemon's user; one made for another caller (allow_other) is
 * handed over to the caller. A set-group-ID directory gives its own group, as the backing
 * filesystem already did. chown clears set-ID bits, which the caller asked for, so they
 * are put back. */
int op_give_to_caller(struct op_fs *fs, fuse_req_t req, int dirfd, const char *name,
                      mode_t mode)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    uid_t uid = ctx->uid == fs->uid ? (uid_t)-1 : ctx->uid;
    gid_t gid = ctx->gid == fs->gid ? (gid_t)-1 : ctx->gid;
    struct stat dst;
    if (gid != (gid_t)-1 && fstat(dirfd, &dst) == 0 && (dst.st_mode & S_ISGID))
        gid = (gid_t)-1;
    if (uid == (uid_t)-1 && gid == (gid_t)-1)
        return 0;
    if (fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (!S_ISLNK(mode) && !S_ISDIR(mode) && (mode & (S_ISUID | S_ISGID)))
        return op_err(fchmodat(dirfd, name, mode & 07777, 0));
    return 0;
}

/* The permission bits a new object is made with. With ACLs on, the kernel leaves the umask
 * to the daemon (DONT_MASK): POSIX.1e applies it only where the parent has no default ACL;
 * where it has one, the backing filesystem applies that instead. Without ACLs the kernel has
 * applied the umask already. */
mode_t op_create_mode(struct op_fs *fs, fuse_req_t req, fuse_ino_t parent, mode_t mode)
{
    if (!fs->acl || op_xattr_has(fs, in_get(fs->tab, parent), "system.posix_acl_default"))
        return mode;
    return mode & ~(fuse_req_ctx(req)->umask & 0777);
}

/* What mknod, mkdir and symlink make. */
struct op_new {
    mode_t mode;                       /* type and permission bits (umask applied) */
    dev_t rdev;                        /* device number of a node */
    const char *link;                  /* target of a symlink */
};

/* A regular file made by mknod is an empty own file, like one made by create. */
static int op_make_file(struct op_fs *fs, int dirfd, const char *name, mode_t mode)
{
    int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC,
                    mode & 07777);
    if (fd < 0)
        return -errno;
    ff_file *f;
    int err = ff_create(fs->env, fd, NULL, &f);
    if (!err)
        err = ff_release(f);
    return err;
}

static int op_make(struct op_fs *fs, int dirfd, const char *name, const struct op_new *nw)
{
    switch (nw->mode & S_IFMT) {
    case S_IFDIR:
        return op_err(mkdirat(dirfd, name, nw->mode & 07777));
    case S_IFLNK:
        return op_err(symlinkat(nw->link, dirfd, name));
    case S_IFREG:
        return op_make_file(fs, dirfd, name, nw->mode);
    default:
        return op_err(mknodat(dirfd, name, nw->mode, nw->rdev));
    }
}

static int op_new_entry(struct op_fs *fs, fuse_req_t req, fuse_ino_t parent, const char *name,
                        const struct op_new *nw, struct fuse_entry_param *e)
{
    if (op_is_store_name(fs, parent, name))
        return -EPERM;
    in_dirfd d;
    int dirfd = op_dir_get(fs, parent, &d);
    if (dirfd < 0)
        return dirfd;
    uid_t was = op_charge_caller(fs, req);
    int err = op_make(fs, dirfd, name, nw);
    cr_restore(was);
    if (!err) {
        err = op_give_to_caller(fs, req, dirfd, name, nw->mode);
        if (!err)
            err = op_entry(fs, dirfd, name, e);
        if (err)
            unlinkat(dirfd, name, S_ISDIR(nw->mode) ? AT_REMOVEDIR : 0);
    }
    in_dir_put(fs->tab, &d);
    return err;
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
    struct op_fs *fs = op_fs(req);
    struct op_new nw = {.mode = op_create_mode(fs, req, parent, mode), .rdev = rdev};
    struct fuse_entry_param e;
    int err = op_new_entry(fs, req, parent, name, &nw, &e);
    op_reply_entry(req, op_log(fs, "mknod", in_get(fs->tab, parent), name, err), &e);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct op_fs *fs = op_fs(req);
    struct op_new nw = {.mode = S_IFDIR | op_create_mode(fs, req, parent, mode & 07777)};
    struct fuse_entry_param e;
    int err = op_new_entry(fs, req, parent, name, &nw, &e);
    op_reply_entry(req, op_log(fs, "mkdir", in_get(fs->tab, parent), name, err), &e);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    struct op_fs *fs = op_fs(req);
    struct op_new nw = {.mode = S_IFLNK | 0777, .link = link};
    struct fuse_entry_param e;
    int err = op_new_entry(fs, req, parent, name, &nw, &e);
    op_reply_entry(req, op_log(fs, "symlink", in_get(fs->tab, parent), name, err), &e);
}

/* Before a name that may be the last of an open file goes, the file's descriptor is made
 * to stay: once the name is gone nothing could reopen it (ff_hold_fd). Returns the inode,
 * pinned, when it has a state (op_done_victim after the removal), else NULL. */
static struct in_inode *op_hold_victim(struct op_fs *fs, int dirfd, const char *name)
{
    struct stat st;
    /* no descriptor held by any file: none to keep, none whose space a kept state holds */
    if (!fs->env || ff_env_fds(fs->env) == 0 ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_nlink > 1)
        return NULL;
    struct in_inode *n = in_find_pin(fs->tab, st.st_dev, st.st_ino);
    if (!n)
        return NULL;
    pthread_mutex_lock(&n->lock);
    int has = n->file != NULL;
    if (has)
        ff_hold_fd(n->file);
    pthread_mutex_unlock(&n->lock);
    if (!has)
        in_unpin(fs->tab, n);
    return has ? n : NULL;
}

/* After the removal: a kept state of a file no name reaches goes at once (ops_keep.c). */
static void op_done_victim(struct op_fs *fs, struct in_inode *n, int err)
{
    if (!n)
        return;
    if (!err)
        op_drop_removed(fs, n);
    in_unpin(fs->tab, n);
}

static int op_remove(struct op_fs *fs, fuse_ino_t parent, const char *name, int flags)
{
    if (op_is_store_name(fs, parent, name))
        return -ENOENT;
    in_dirfd d;
    int dirfd = op_dir_get(fs, parent, &d);
    if (dirfd < 0)
        return dirfd;
    struct in_inode *victim = flags & AT_REMOVEDIR ? NULL : op_hold_victim(fs, dirfd, name);
    int err = op_err(unlinkat(dirfd, name, flags));
    in_dir_put(fs->tab, &d);
    op_done_victim(fs, victim, err);
    return err;
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct op_fs *fs = op_fs(req);
    int err = op_remove(fs, parent, name, 0);
    fuse_reply_err(req, -op_log(fs, "unlink", in_get(fs->tab, parent), name, err));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct op_fs *fs = op_fs(req);
    int err = op_remove(fs, parent, name, AT_REMOVEDIR);
    fuse_reply_err(req, -op_log(fs, "rmdir", in_get(fs->tab, parent), name, err));
}

static int op_rename_names(struct op_fs *fs, fuse_ino_t parent, const char *name,
                           fuse_ino_t newparent, const char *newname, unsigned flags)
{
    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
        return -EINVAL;
    if (op_is_store_name(fs, parent, name) || op_is_store_name(fs, newparent, newname))
        return -EPERM;
    in_dirfd df, dt;
    int from = op_dir_get(fs, parent, &df);
    if (from < 0)
        return from;
    int to = op_dir_get(fs, newparent, &dt);
    if (to < 0) {
        in_dir_put(fs->tab, &df);
        return to;
    }
    struct in_inode *victim = flags & RENAME_EXCHANGE ? NULL : op_hold_victim(fs, to, newname);
    int err = op_err(renameat2(from, name, to, newname, flags));
    in_dir_put(fs->tab, &dt);
    in_dir_put(fs->tab, &df);
    op_done_victim(fs, victim, err);
    return err;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
    struct op_fs *fs = op_fs(req);
    uid_t was = op_charge_caller(fs, req);
    int err = op_rename_names(fs, parent, name, newparent, newname, flags);
    cr_restore(was);
    char verb[300];
    snprintf(verb, sizeof(verb), "rename to %s from", newname);
    fuse_reply_err(req, -op_log(fs, verb, in_get(fs->tab, parent), name, err));
}

static int op_link_name(struct op_fs *fs, fuse_ino_t ino, fuse_ino_t newparent,
                        const char *newname, struct fuse_entry_param *e)
{
    if (op_is_store_name(fs, newparent, newname))
        return -EPERM;
    int fd = op_meta_fd(fs, in_get(fs->tab, ino));
    if (fd < 0)
        return fd;
    in_dirfd d;
    int dirfd = op_dir_get(fs, newparent, &d);
    int err = dirfd;
    if (dirfd >= 0) {
        err = op_err(linkat(fd, "", dirfd, newname, AT_EMPTY_PATH));
        if (!err)
            err = op_entry(fs, dirfd, newname, e);
        in_dir_put(fs->tab, &d);
    }
    close(fd);
    return err;
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    struct op_fs *fs = op_fs(req);
    struct fuse_entry_param e;
    uid_t was = op_charge_caller(fs, req);
    int err = op_link_name(fs, ino, newparent, newname, &e);
    cr_restore(was);
    op_reply_entry(req, op_log(fs, "link", in_get(fs->tab, newparent), newname, err), &e);
}

void op_fill_names(struct fuse_lowlevel_ops *ops)
{
    ops->mknod = op_mknod;
    ops->mkdir = op_mkdir;
    ops->unlink = op_unlink;
    ops->rmdir = op_rmdir;
    ops->symlink = op_symlink;
    ops->rename = op_rename;
    ops->link = op_link;
}
