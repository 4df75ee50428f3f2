#include "ops_internal.h"
#include "cred.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "sb.h"


struct op_fs *op_fs(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* A regular file's handle is its inode's shared ff_file, tagged in its low bits (free: the
 * state is malloc'ed) with what flush and release requests do not carry: whether the handle
 * was opened for writing, and whether it bypasses the page cache (ops_direct.c). */
#define OP_FH_WRITES 1u
#define OP_FH_DIRECT 2u

static ff_file *op_file(const struct fuse_file_info *fi)
{
    return (ff_file *)(uintptr_t)(fi->fh & ~(uint64_t)(OP_FH_WRITES | OP_FH_DIRECT));
}

static int op_handle_writes(const struct fuse_file_info *fi)
{
    return (fi->fh & OP_FH_WRITES) != 0;
}

static int op_handle_direct(const struct fuse_file_info *fi)
{
    return (fi->fh & OP_FH_DIRECT) != 0;
}

static int op_is_root(struct op_fs *fs, fuse_ino_t parent)
{
    return in_get(fs->tab, parent) == in_root(fs->tab);
}

/* Names beginning with ".fpgalz4fs" at the top of the store are the store's, not the
 * users': the superblock, and the temporaries that mkfpgalz4fs and fsck (run by root) write
 * there. In the root they neither exist (lookup, unlink, readdir) nor may be made (create,
 * mknod, mkdir, symlink, link, rename: EPERM), so that no user of the mount can plant a
 * symlink under such a name and have root's tools write through it. */
static int op_is_store_name(struct op_fs *fs, fuse_ino_t parent, const char *name)
{
    return op_is_root(fs, parent) && sb_is_reserved_name(name);
}

/* ------------------------------------------------------------------------------------- */
/* Errors and the log */

/* Answers to questions (does it exist, is it empty) are no faults and leave no line. */
static int op_trivial(int err)
{
    switch (err) {
    case ENOENT: case EEXIST: case ENOTEMPTY: case ENODATA: case ERANGE: case ENOTDIR:
    case EISDIR: case ENAMETOOLONG: case EINTR: case ELOOP: case ENOSYS:
        return 1;
    default:
        return 0;
    }
}

static void op_fd_path(int fd, char *buf, size_t cap)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, buf, cap - 1);
    if (n < 0)
        snprintf(buf, cap, "(descriptor %d)", fd);
    else
        buf[n] = '\0';
}

/* A descriptor for metadata calls on n. An open file's own descriptor is duplicated: it
 * still reaches a file unlinked while open, which the backing filesystem no longer reopens
 * by handle. */
int op_meta_fd(struct op_fs *fs, struct in_inode *n)
{
    if (S_ISREG(n->type)) {
        int is_open = 0, fd = -1;
        pthread_mutex_lock(&n->lock);
        if (n->file) {
            is_open = 1;
            fd = ff_dup_fd(n->file);
        }
        pthread_mutex_unlock(&n->lock);
        if (is_open)
            return fd;
    }
    return in_open(fs->tab, n, O_PATH);
}

static void op_inode_path(struct op_fs *fs, struct in_inode *n, char *buf, size_t cap)
{
    int fd = op_meta_fd(fs, n);
    if (fd < 0) {
        snprintf(buf, cap, "%s (inode %ju)", fs->backing, (uintmax_t)n->key.ino);
        return;
    }
    op_fd_path(fd, buf, cap);
    close(fd);
}

/* Logs a non-trivial error of operation what on n (or on name inside n); returns err. */
int op_log(struct op_fs *fs, const char *what, struct in_inode *n, const char *name,
           int err)
{
    if (err >= 0 || op_trivial(-err))
        return err;
    char path[PATH_MAX];
    op_inode_path(fs, n, path, sizeof(path));
    int soft = err == -EPERM || err == -EACCES || err == -EROFS;
    lg_printf(fs->log, soft ? LG_WARN : LG_ERR, "%s %s%s%s: %s", what, path, name ? "/" : "",
              name ? name : "", strerror(-err));
    return err;
}

/* Entries, directories, symlinks and attributes a request makes take its caller's blocks,
 * as on a local filesystem: a user stops at the backing filesystem's reserve and quota
 * (cred.h). Root's requests, and those of a daemon that is not root, are the daemon's. */
uid_t op_charge_caller(struct op_fs *fs, fuse_req_t req)
{
    uid_t uid = fuse_req_ctx(req)->uid;
    return fs->charge && uid != 0 ? cr_charge(uid) : CR_NONE;
}

int op_err(int rc)
{
    return rc < 0 ? -errno : 0;
}

static void op_reply_entry(fuse_req_t req, int err, const struct fuse_entry_param *e)
{
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_entry(req, e);
}

static void op_reply_attr(fuse_req_t req, struct op_fs *fs, int err, const struct stat *st)
{
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_attr(req, st, fs->timeout);
}

/* ------------------------------------------------------------------------------------- */
/* Attributes */

/* Opens the backing regular file for ff_open: read-write whatever the handle's flags, since
 * with the writeback cache the kernel reads through write-only handles and does O_APPEND
 * itself; read-only when the mount or the backing file allows no more. */
static int op_open_backing(struct op_fs *fs, struct in_inode *n, ff_file **out)
{
    int flags = fs->read_only ? O_RDONLY | O_NOATIME : O_RDWR;
    int fd = in_open(fs->tab, n, flags);
    if (fd == -EPERM && fs->read_only)
        fd = in_open(fs->tab, n, flags = O_RDONLY);
    if ((fd == -EACCES || fd == -EROFS) && !fs->read_only)
        fd = in_open(fs->tab, n, flags = O_RDONLY);
    if (fd < 0)
        return fd;
    int err = ff_open(fs->env, fd, NULL, out);
    if (!err)
        ff_set_reopen_arg(*out, n, flags);
    return err;
}

/* How a file whose idle descriptor was closed gets it back (ff_set_reopen_arg). */
static int op_reopen(void *ctx, void *arg, int flags)
{
    struct op_fs *fs = ctx;
    return in_open(fs->tab, arg, flags);
}

void op_bind_reopen(struct op_fs *fs)
{
    ff_env_set_reopen(fs->env, op_reopen, fs);
}

/* A closed file whose size only its repair can tell (ff_stat_size): opened and released as
 * an open(2) would, so that the size stat shows is the one reads will find (what the repair
 * cut is gone before anyone sees it). st gets the backing attributes after the repair. Called
 * with n->lock held, n->file NULL. */
static int op_repaired_size(struct op_fs *fs, struct in_inode *n, struct stat *st,
                            uint64_t *size)
{
    ff_file *f;
    int err = op_open_backing(fs, n, &f);
    if (err)
        return err;
    struct stat now;
    err = ff_release_stat(f, &now, size);
    if (now.st_ino) {
        st->st_size = now.st_size, st->st_ctim = now.st_ctim;
        st->st_mtim = now.st_mtim, st->st_blocks = now.st_blocks;
    }
    return err;
}

/* The logical size of a closed regular file, read from its seek table only when the backing
 * file changed since the last time (commits always change st_size or st_ctim). Called with
 * n->lock held. */
/* The logical size from the backing file's footer or table, or from its repair. */
static int op_read_size(struct op_fs *fs, struct in_inode *n, struct stat *st, uint64_t *size)
{
    /* O_NOATIME: a stat must not look like a read of the backing file. */
    int fd = in_open(fs->tab, n, O_RDONLY | O_NOATIME);
    if (fd == -EPERM)
        fd = in_open(fs->tab, n, O_RDONLY);
    if (fd < 0)
        return fd;
    int own;
    int err = ff_stat_size(fs->env, fd, size, &own);
    close(fd);
    if (err > 0)                       /* torn, or maybe caught by a power loss */
        err = op_repaired_size(fs, n, st, size);
    return err;
}

static int op_closed_size(struct op_fs *fs, struct in_inode *n, struct stat *st)
{
    if (n->size_valid && n->size_key == st->st_size &&
        n->size_ctim.tv_sec == st->st_ctim.tv_sec && n->size_ctim.tv_nsec == st->st_ctim.tv_nsec) {
        st->st_size = (off_t)n->size;
        return 0;
    }
    uint64_t size;
    if (!sz_get(fs->sizes, st, &size)) {
        int err = op_read_size(fs, n, st, &size);
        if (err)
            return err;
        sz_put(fs->sizes, st, size);
    }
    n->size_valid = 1;
    n->size_key = st->st_size;
    n->size_ctim = st->st_ctim;
    n->size = size;
    st->st_size = (off_t)size;
    return 0;
}

/* Turns the backing attributes of n into the ones applications see: regular files show
 * their logical size (and, while open, their logical mtime) and the store's block size as
 * the preferred I/O size (cp and cat then move whole blocks per call: a direct writer's
 * request per block, not per 128 KiB); st_blocks stays the space really used and st_ino the
 * backing one, by which cp -a and tar find hard links. */
static int op_logical_attr(struct op_fs *fs, struct in_inode *n, struct stat *st)
{
    if (!S_ISREG(n->type))
        return 0;
    st->st_blksize = fs->blksize;
    int err = 0;
    pthread_mutex_lock(&n->lock);
    if (n->file) {
        st->st_size = (off_t)ff_size(n->file);
        ff_get_mtime(n->file, &st->st_mtim);
    } else {
        err = op_closed_size(fs, n, st);
    }
    pthread_mutex_unlock(&n->lock);
    return err;
}

/* An open file answers from its own descriptor and state: no descriptor to open or dup. 1
 * when the file is not open. */
static int op_stat_open(struct op_fs *fs, struct in_inode *n, struct stat *st)
{
    pthread_mutex_lock(&n->lock);
    ff_file *f = n->file;
    int err = f ? ff_fstat(f, st) : 1;
    if (err == 0)
        st->st_blksize = fs->blksize;
    if (err == 0 && !ff_is_foreign(f)) {
        st->st_size = (off_t)ff_size(f);
        ff_get_mtime(f, &st->st_mtim);
    }
    pthread_mutex_unlock(&n->lock);
    return err;
}

/* A directory's attributes through its cached descriptor (the parent of every new name is
 * asked for them under default_permissions). */
static int op_stat_dir(struct op_fs *fs, struct in_inode *n, struct stat *st)
{
    in_dirfd d;
    int err = in_dir_get(fs->tab, n, &d);
    if (err)
        return err;
    err = op_err(fstat(d.fd, st));
    in_dir_put(fs->tab, &d);
    return err;
}

static int op_stat(struct op_fs *fs, struct in_inode *n, struct stat *st)
{
    if (S_ISDIR(n->type))
        return op_stat_dir(fs, n, st);
    int err = S_ISREG(n->type) ? op_stat_open(fs, n, st) : 1;
    if (err <= 0)
        return err;
    int fd = op_meta_fd(fs, n);
    if (fd < 0)
        return fd;
    err = op_err(fstat(fd, st));
    close(fd);
    return err ? err : op_logical_attr(fs, n, st);
}

static void op_forget_one(struct op_fs *fs, struct in_inode *n, uint64_t count);

/* Looks name up in dirfd and fills an entry reply, adding one lookup reference. */
static int op_entry(struct op_fs *fs, int dirfd, const char *name, struct fuse_entry_param *e)
{
    struct in_inode *n;
    memset(e, 0, sizeof(*e));
    int err = in_lookup_at(fs->tab, dirfd, name, &e->attr, &n);
    if (err)
        return err;
    err = op_logical_attr(fs, n, &e->attr);
    if (err) {
        op_forget_one(fs, n, 1);
        return err;
    }
    e->ino = in_nodeid(fs->tab, n);
    e->attr_timeout = fs->timeout;
    e->entry_timeout = fs->timeout;
    return 0;
}

/* The parent directory of a request, borrowed from the inode table's cache (in_dir_get):
 * its descriptor or -errno; given back with in_dir_put, never closed. */
static int op_dir_get(struct op_fs *fs, fuse_ino_t ino, in_dirfd *d)
{
    int err = in_dir_get(fs->tab, in_get(fs->tab, ino), d);
    return err ? err : d->fd;
}

/* ------------------------------------------------------------------------------------- */
/* Lifecycle */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    /* The writeback cache lets the kernel gather small writes into large ones, which is
     * what block compression wants; it makes the kernel own size and mtime while it holds
     * dirty pages. Splice would only add a copy: data is decoded in memory anyway. The
     * kernel clears set-id bits itself when the daemon does not claim to (KILLPRIV), and
     * the daemon is the only writer of the backing files, so the page cache never needs
     * invalidating because an mtime moved (AUTO_INVAL_DATA). POSIX ACLs are the backing
     * filesystem's (it keeps mode and mask in step and applies default ACLs at create); the
     * kernel must know of them to enforce them, or an entry that denies a user would show in
     * getfacl and be ignored by the permission checks. */
    if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    struct op_fs *fs = userdata;
    if (fs->acl && (conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
        conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
    else if (fs->acl) {
        fs->acl = 0;                   /* ACLs the kernel would not enforce: refused */
        lg_printf(fs->log, LG_WARN, "the kernel cannot enforce POSIX ACLs here: mounted noacl");
    }
    conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
                    FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_AUTO_INVAL_DATA);
    if (!(conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT))
        fs->dir_handles = 1;
    conn->max_write = 1u << 20;
    conn->max_readahead = 1u << 20;
    conn->time_gran = 1;
}

static void op_release_at_exit(struct in_inode *n, void *arg)
{
    struct op_fs *fs = arg;
    int err = 0;
    n->open_count = 0;
    op_free_file(fs, n, &err);
    if (err)
        lg_printf(fs->log, LG_ERR, "unmount: committing inode %ju failed: %s",
                  (uintmax_t)n->key.ino, strerror(-err));
}

/* Files still open here lost their release to the unmount: commit them now, so that
 * everything written is at rest in the backing files. */
static void op_destroy(void *userdata)
{
    struct op_fs *fs = userdata;
    char text[OP_STATS_MAX];
    in_for_each_open(fs->tab, op_release_at_exit, fs);
    size_t len = op_stats_text(fs, text, sizeof(text));
    for (size_t i = 0; i < len; i++)
        if (text[i] == '\n')
            text[i] = ' ';
    while (len > 0 && text[len - 1] == ' ')
        text[--len] = '\0';
    lg_printf(fs->log, LG_INFO, "unmount: %s", text);
}

/* ------------------------------------------------------------------------------------- */
/* Names */

static int op_lookup_name(struct op_fs *fs, fuse_ino_t parent, const char *name,
                          struct fuse_entry_param *e)
{
    if (op_is_store_name(fs, parent, name))
        return -ENOENT;
    in_dirfd d;
    int dirfd = op_dir_get(fs, parent, &d);
    if (dirfd < 0)
        return dirfd;
    int err = op_entry(fs, dirfd, name, e);
    in_dir_put(fs->tab, &d);
    return err;
}

/* A missing name is answered with a negative entry that the kernel caches for the entry
 * timeout: the daemon is the only writer of the backing directory, and the kernel drops
 * the negative entry itself when a name is created through the mount. */
static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct op_fs *fs = op_fs(req);
    struct fuse_entry_param e;
    int err = op_lookup_name(fs, parent, name, &e);
    if (err == -ENOENT) {
        memset(&e, 0, sizeof(e));
        e.entry_timeout = fs->timeout;
        err = 0;
    }
    op_reply_entry(req, op_log(fs, "lookup", in_get(fs->tab, parent), name, err), &e);
}

/* Once the kernel forgets an inode it holds none of its pages or its size any more: a file
 * retained after a failed commit gets its last try, and its data go with the inode. */
static void op_forget_one(struct op_fs *fs, struct in_inode *n, uint64_t count)
{
    if (!op_keeps_any(fs)) {
        in_forget(fs->tab, n, count);
        return;
    }
    in_pin(fs->tab, n);
    if (in_forget(fs->tab, n, count) == 0)
        op_end_retention(fs, n);
    in_unpin(fs->tab, n);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct op_fs *fs = op_fs(req);
    op_forget_one(fs, in_get(fs->tab, ino), nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct op_fs *fs = op_fs(req);
    for (size_t i = 0; i < count; i++)
        op_forget_one(fs, in_get(fs->tab, forgets[i].ino), forgets[i].nlookup);
    fuse_reply_none(req);
}

/* Objects are made by the daemon's user; one made for another caller (allow_other) is
 * handed over to the caller. A set-group-ID directory gives its own group, as the backing
 * filesystem already did. chown clears set-ID bits, which the caller asked for, so they
 * are put back. */
static int op_give_to_caller(struct op_fs *fs, fuse_req_t req, int dirfd, const char *name,
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
static mode_t op_create_mode(struct op_fs *fs, fuse_req_t req, fuse_ino_t parent, mode_t mode)
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

/* ------------------------------------------------------------------------------------- */
/* Attributes of one inode */

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    struct stat st;
    int err = op_stat(fs, n, &st);
    op_reply_attr(req, fs, op_log(fs, "getattr", n, NULL, err), &st);
}

/* A change of metadata made through some descriptor of the inode; o_path: it is an O_PATH
 * descriptor, which takes no fchmod. */
struct op_meta {
    int (*fn)(int fd, int o_path, void *arg);
    void *arg;
    int o_path;
};

static int op_meta_call(int fd, void *arg)
{
    struct op_meta *m = arg;
    return m->fn(fd, m->o_path, m->arg);
}

/* Runs the change on a descriptor of n: an open file's own (under its lock, no duplicate
 * made and closed: tar and cp -p change owner and mode of each file they still hold open),
 * else a temporary O_PATH one. */
static int op_meta_change(struct op_fs *fs, struct in_inode *n, struct op_meta *m)
{
    if (S_ISREG(n->type)) {
        pthread_mutex_lock(&n->lock);
        int err = n->file ? ff_with_fd(n->file, op_meta_call, m) : 1;
        pthread_mutex_unlock(&n->lock);
        if (err <= 0)
            return err;
    }
    int fd = in_open(fs->tab, n, O_PATH);
    if (fd < 0)
        return fd;
    m->o_path = 1;
    int err = op_meta_call(fd, m);
    close(fd);
    return err;
}

struct op_owner {
    uid_t uid;
    gid_t gid;
};

static int op_chown_fd(int fd, int o_path, void *arg)
{
    (void)o_path;
    const struct op_owner *o = arg;
    return op_err(fchownat(fd, "", o->uid, o->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
}

/* An O_PATH descriptor's /proc link reaches the object itself. */
static int op_chmod_fd(int fd, int o_path, void *arg)
{
    mode_t mode = *(const mode_t *)arg & 07777;
    if (!o_path)
        return op_err(fchmod(fd, mode));
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return op_err(chmod(proc, mode));
}

static int op_chown(struct op_fs *fs, struct in_inode *n, uid_t uid, gid_t gid)
{
    struct op_owner o = {uid, gid};
    struct op_meta m = {op_chown_fd, &o, 0};
    op_xattr_changed(n);
    int err = op_meta_change(fs, n, &m);
    pthread_mutex_lock(&n->lock);
    if (!err && n->file && uid != (uid_t)-1)
        ff_set_owner(n->file, uid);    /* its later writes are the new owner's */
    pthread_mutex_unlock(&n->lock);
    return err;
}

static int op_chmod(struct op_fs *fs, struct in_inode *n, mode_t mode)
{
    struct op_meta m = {op_chmod_fd, &mode, 0};
    op_xattr_changed(n);               /* a chmod rewrites an access ACL */
    return op_meta_change(fs, n, &m);
}

/* Truncation of a file nobody has open goes through a temporary open state, under the
 * inode lock so that an open at the same time waits for it. */
static int op_truncate_closed(struct op_fs *fs, struct in_inode *n, off_t size)
{
    ff_file *f;
    if (fs->read_only)
        return -EROFS;
    int err = op_open_backing(fs, n, &f);
    if (err)
        return err;
    err = ff_truncate(f, size);
    struct stat st;
    uint64_t logical = 0;
    int rerr = ff_release_stat(f, &st, &logical);
    n->size_valid = 0;
    if (!err && !rerr)
        sz_put(fs->sizes, &st, logical);   /* replaces the state before the truncate */
    return err ? err : rerr;
}

static int op_truncate(struct op_fs *fs, struct in_inode *n, off_t size,
                       struct fuse_file_info *fi)
{
    if (!S_ISREG(n->type))
        return S_ISDIR(n->type) ? -EISDIR : -EINVAL;
    if (fi)
        return ff_truncate(op_file(fi), size);
    pthread_mutex_lock(&n->lock);
    int err = n->file ? ff_truncate(n->file, size) : op_truncate_closed(fs, n, size);
    if (!err && n->file && n->open_count == 0)
        err = ff_flush(n->file, 0);    /* a kept state has no release left to commit it */
    if (err && n->file && n->open_count == 0)
        op_drop_warm(fs, n);
    pthread_mutex_unlock(&n->lock);
    return err;
}

static void op_times(const struct stat *attr, int to_set, struct timespec tv[2])
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    tv[0].tv_sec = 0;
    tv[0].tv_nsec = UTIME_OMIT;
    tv[1] = tv[0];
    if (to_set & FUSE_SET_ATTR_ATIME_NOW)
        tv[0] = now;
    else if (to_set & FUSE_SET_ATTR_ATIME)
        tv[0] = attr->st_atim;
    if (to_set & FUSE_SET_ATTR_MTIME_NOW)
        tv[1] = now;
    else if (to_set & FUSE_SET_ATTR_MTIME)
        tv[1] = attr->st_mtim;
}

static int op_utimens_fd(int fd, const struct timespec tv[2])
{
    if (utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    if (errno != EINVAL)
        return -errno;
    /* Kernels before 5.8 take no AT_EMPTY_PATH here; the /proc link works for all but
     * symlinks. */
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return op_err(utimensat(AT_FDCWD, proc, tv, 0));
}

/* An open file restores its logical mtime onto the backing file after every commit, so it
 * learns the new one first; the inode lock keeps an open from reading the old one between
 * the two. */
static int op_utimens(struct op_fs *fs, struct in_inode *n, const struct stat *attr, int to_set)
{
    struct timespec tv[2];
    op_times(attr, to_set, tv);
    if (S_ISREG(n->type)) {
        pthread_mutex_lock(&n->lock);
        int err = n->file ? ff_set_times(n->file, tv) : 1;
        pthread_mutex_unlock(&n->lock);
        if (err <= 0)
            return err;
    }
    int fd = op_meta_fd(fs, n);
    if (fd < 0)
        return fd;
    int reg = S_ISREG(n->type);
    if (reg)
        pthread_mutex_lock(&n->lock);
    if (reg && n->file && tv[1].tv_nsec != UTIME_OMIT)
        ff_set_mtime(n->file, &tv[1]);   /* opened since the check above */
    int err = op_utimens_fd(fd, tv);
    if (reg)
        pthread_mutex_unlock(&n->lock);
    close(fd);
    return err;
}

/* chown before chmod (chown clears set-ID bits that a chmod in the same call sets), the
 * size before the times (a truncation sets the mtime to now). */
static int op_setattr_inode(struct op_fs *fs, struct in_inode *n, const struct stat *attr,
                            int to_set, struct fuse_file_info *fi)
{
    int err = 0;
    if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
        err = op_chown(fs, n, (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1,
                       (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1);
    if (!err && (to_set & FUSE_SET_ATTR_MODE))
        err = op_chmod(fs, n, attr->st_mode);
    if (!err && (to_set & FUSE_SET_ATTR_SIZE))
        err = op_truncate(fs, n, attr->st_size, fi);
    if (!err && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                           FUSE_SET_ATTR_MTIME_NOW)))
        err = op_utimens(fs, n, attr, to_set);
    return err;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    struct stat st;
    int err = op_setattr_inode(fs, n, attr, to_set, fi);
    if (!err)
        err = op_stat(fs, n, &st);
    /* The kernel flushes the times of a file it evicts after an unlink; nobody waits for
     * that answer, so a file already gone is no fault worth a line. */
    const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                      FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
    if (!(err == -ESTALE && !(to_set & ~times)))
        err = op_log(fs, "setattr", n, NULL, err);
    op_reply_attr(req, fs, err, &st);
}

static int op_readlink_inode(struct op_fs *fs, struct in_inode *n, char *buf, size_t cap)
{
    int fd = op_meta_fd(fs, n);
    if (fd < 0)
        return fd;
    ssize_t len = readlinkat(fd, "", buf, cap - 1);
    int err = len < 0 ? -errno : 0;
    close(fd);
    if (!err && (size_t)len >= cap - 1)
        err = -ENAMETOOLONG;
    if (!err)
        buf[len] = '\0';
    return err;
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    char buf[PATH_MAX + 1];
    int err = op_log(fs, "readlink", n, NULL, op_readlink_inode(fs, n, buf, sizeof(buf)));
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_readlink(req, buf);
}

/* ------------------------------------------------------------------------------------- */
/* Regular files */

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
    int err = op_log(fs, "open", n, NULL, op_open_inode(fs, n, fi));
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
static int op_create_existing(struct op_fs *fs, int dirfd, const char *name,
                              struct fuse_entry_param *e, struct fuse_file_info *fi)
{
    int err = op_entry(fs, dirfd, name, e);
    if (err)
        return err;
    struct in_inode *n = in_get(fs->tab, e->ino);
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
        return op_create_existing(fs, dirfd, name, e, fi);
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
    int err = direct ? op_direct_kill_privs(fs, req, ino, n) : 0;
    err = op_log(fs, "write", n, NULL, err ? err : ff_write(op_file(fi), buf, size, off));
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
    int err = ff_fallocate(op_file(fi), mode, offset, length);
    if (err != -EOPNOTSUPP)
        err = op_log(fs, "fallocate", in_get(fs->tab, ino), NULL, err);
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

/* ------------------------------------------------------------------------------------- */
/* Directories */

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

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct op_fs *fs = op_fs(req);
    struct statvfs sv;
    int err = op_log(fs, "statfs", in_root(fs->tab), NULL, op_err(fstatvfs(fs->root_fd, &sv)));
    if (err)
        fuse_reply_err(req, -err);
    else
        fuse_reply_statfs(req, &sv);
}

void op_fill(struct fuse_lowlevel_ops *ops)
{
    memset(ops, 0, sizeof(*ops));
    ops->init = op_init;
    ops->destroy = op_destroy;
    ops->lookup = op_lookup;
    ops->forget = op_forget;
    ops->forget_multi = op_forget_multi;
    ops->getattr = op_getattr;
    ops->setattr = op_setattr;
    ops->readlink = op_readlink;
    ops->mknod = op_mknod;
    ops->mkdir = op_mkdir;
    ops->unlink = op_unlink;
    ops->rmdir = op_rmdir;
    ops->symlink = op_symlink;
    ops->rename = op_rename;
    ops->link = op_link;
    ops->open = op_open;
    ops->read = op_read;
    ops->write = op_write;
    ops->flush = op_flush;
    ops->release = op_release;
    ops->fsync = op_fsync;
    ops->opendir = op_opendir;
    ops->readdir = op_readdir;
    ops->readdirplus = op_readdirplus;
    ops->releasedir = op_releasedir;
    ops->fsyncdir = op_fsyncdir;
    ops->statfs = op_statfs;
    op_fill_xattr(ops);
    ops->create = op_create;
    ops->fallocate = op_fallocate;
    ops->lseek = op_lseek;
}
