#include "ops_internal.h"
#include "cred.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sb.h"

struct op_fs *op_fs(fuse_req_t req)
{
    return fuse_req_userdata(req);
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
int op_is_store_name(struct op_fs *fs, fuse_ino_t parent, const char *name)
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

void op_reply_entry(fuse_req_t req, int err, const struct fuse_entry_param *e)
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
int op_open_backing(struct op_fs *fs, struct in_inode *n, ff_file **out)
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
        fs->size_reads++;
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

/* Looks name up in dirfd and fills an entry reply, adding one lookup reference. */
int op_entry(struct op_fs *fs, int dirfd, const char *name, struct fuse_entry_param *e)
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
int op_dir_get(struct op_fs *fs, fuse_ino_t ino, in_dirfd *d)
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
    conn->max_write = OP_MAX_WRITE;
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
void op_forget_one(struct op_fs *fs, struct in_inode *n, uint64_t count)
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
    /* a truncation by another caller than root clears the set-id bits where the kernel
     * left that to the daemon (ops_io.c); the reply carries the new mode */
    if (!err && (to_set & FUSE_SET_ATTR_SIZE)) {
        int killed = op_kill_privs(fs, req, n, NULL, OP_KILL_RESIZE);
        err = killed < 0 ? killed : 0;
    }
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
    ops->statfs = op_statfs;
    op_fill_names(ops);
    op_fill_file(ops);
    op_fill_dir(ops);
    op_fill_xattr(ops);
}
