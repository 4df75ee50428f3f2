/* Directory listings with bounded streams (dirs.h). */
#include "dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sb.h"

/* A stream is OPEN (held between requests, counted in the bound) or PARKED (closed; the
 * next readdir opens it again at offset). */
enum { DR_PARKED = 0, DR_OPEN };

struct dr_dir {
    pthread_mutex_t lock;              /* readdir and fsyncdir of one handle may overlap */
    in_table *tab;
    struct in_inode *n;
    dr_bound *b;
    int flags;                         /* open(2) flags of the stream's descriptor */
    int state;                         /* DR_OPEN or DR_PARKED */
    DIR *dp;                           /* while DR_OPEN */
    struct dirent *pending;            /* read but not yet sent: the last reply was full */
    off_t offset;                      /* position the kernel asks for to continue */
    int in_root;                       /* the listing hides the store's reserved names */
};

static int dr_stream(dr_dir *d)
{
    int fd = in_open(d->tab, d->n, d->flags);
    if (fd == -EPERM && (d->flags & O_NOATIME))
        fd = in_open(d->tab, d->n, d->flags &= ~O_NOATIME);
    /* A handle that names nothing any more: the directory was removed behind the mount. */
    if (fd == -ESTALE)
        return -ENOENT;
    if (fd < 0)
        return fd;
    d->dp = fdopendir(fd);
    if (!d->dp) {
        int err = -errno;
        close(fd);
        return err;
    }
    d->state = DR_OPEN;
    d->pending = NULL;
    atomic_fetch_add(&d->b->held, 1);
    return 0;
}

static void dr_park(dr_dir *d)
{
    closedir(d->dp);
    d->dp = NULL;
    d->pending = NULL;                 /* read again after the seekdir */
    d->state = DR_PARKED;
    atomic_fetch_sub(&d->b->held, 1);
}

/* Called with d->lock: the stream open and at offset off. */
static int dr_ready(dr_dir *d, off_t off)
{
    if (d->state == DR_PARKED) {
        int err = dr_stream(d);
        if (err)
            return err;
        atomic_fetch_add(&d->b->reopens, 1);
        d->offset = -1;                /* forces the seekdir below */
    }
    if (off != d->offset) {
        seekdir(d->dp, off);
        d->pending = NULL;
        d->offset = off;
    }
    return 0;
}

/* A listing of n, parked: no stream yet, and none counted. */
static dr_dir dr_init(in_table *tab, struct in_inode *n, int read_only, dr_bound *b)
{
    /* Under ro not even a directory's atime changes in the backing directory. */
    return (dr_dir){.tab = tab, .n = n, .b = b, .in_root = n == in_root(tab),
                    .state = DR_PARKED,
                    .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (read_only ? O_NOATIME : 0)};
}

int dr_open(in_table *tab, struct in_inode *n, int read_only, dr_bound *b, dr_dir **out)
{
    dr_dir *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    *d = dr_init(tab, n, read_only, b);
    int err = dr_stream(d);
    if (err) {
        free(d);
        return err;
    }
    if (b->max && atomic_load(&b->held) > b->max)
        dr_park(d);                    /* opened to report errors now; listed later */
    pthread_mutex_init(&d->lock, NULL);
    in_pin(tab, n);
    *out = d;
    return 0;
}

static int dr_is_dot(const char *name)
{
    return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/* The entry with its attributes; a lookup that fit nowhere is undone. */
static size_t dr_add_plus(dr_dir *d, fuse_req_t req, char *buf, size_t rem,
                          const struct dirent *de, const dr_plus *plus)
{
    struct fuse_entry_param e = {0};
    if (dr_is_dot(de->d_name) || plus->lookup(plus->ctx, dirfd(d->dp), de->d_name, &e) != 0)
        e = (struct fuse_entry_param){.attr = {.st_ino = de->d_ino,
                                               .st_mode = DTTOIF(de->d_type)}};
    size_t need = fuse_add_direntry_plus(req, buf, rem, de->d_name, &e, de->d_off);
    if (need > rem && e.ino)
        plus->forget(plus->ctx, e.ino);
    return need;
}

/* Adds d->pending to buf unless it is hidden; 0 when it did not fit. */
static int dr_add(dr_dir *d, fuse_req_t req, char *buf, size_t size, size_t *pos,
                  const dr_plus *plus)
{
    struct dirent *de = d->pending;
    if (!(d->in_root && sb_is_reserved_name(de->d_name))) {
        struct stat st = {.st_ino = de->d_ino, .st_mode = DTTOIF(de->d_type)};
        size_t need = plus ? dr_add_plus(d, req, buf + *pos, size - *pos, de, plus)
                           : fuse_add_direntry(req, buf + *pos, size - *pos, de->d_name, &st,
                                               de->d_off);
        if (need > size - *pos)
            return 0;
        *pos += need;
    }
    d->pending = NULL;
    d->offset = de->d_off;
    return 1;
}

static int dr_fill_locked(dr_dir *d, fuse_req_t req, char *buf, size_t size, size_t *pos,
                          const dr_plus *plus)
{
    for (;;) {
        if (!d->pending) {
            errno = 0;
            d->pending = readdir(d->dp);
            if (!d->pending)
                return errno && *pos == 0 ? -errno : 0;
        }
        if (!dr_add(d, req, buf, size, pos, plus))
            return 0;
    }
}

int dr_fill(dr_dir *d, fuse_req_t req, char *buf, size_t size, off_t off, const dr_plus *plus,
            size_t *used)
{
    *used = 0;
    pthread_mutex_lock(&d->lock);
    int err = dr_ready(d, off);
    if (!err)
        err = dr_fill_locked(d, req, buf, size, used, plus);
    if (d->state == DR_OPEN && d->b->max && atomic_load(&d->b->held) > d->b->max)
        dr_park(d);
    pthread_mutex_unlock(&d->lock);
    return err;
}

/* A stream for this request alone. A new stream is at offset 0 already (dr_init), so
 * dr_ready seeks only for a listing that goes on. */
int dr_fill_once(in_table *tab, struct in_inode *n, int read_only, dr_bound *b,
                 fuse_req_t req, char *buf, size_t size, off_t off, const dr_plus *plus,
                 size_t *used)
{
    dr_dir d = dr_init(tab, n, read_only, b);
    *used = 0;
    int err = dr_stream(&d);
    /* Removed behind the mount while the kernel held it open: it lists as empty, as a
     * removed directory does in the backing filesystem (and as a stream held would). */
    if (err == -ENOENT)
        return 0;
    if (err)
        return err;
    err = dr_ready(&d, off);
    if (!err)
        err = dr_fill_locked(&d, req, buf, size, used, plus);
    dr_park(&d);
    return err;
}

/* Called with d->lock, or on a listing no other thread sees. */
static int dr_fsync_locked(dr_dir *d, int datasync)
{
    int fd = d->state == DR_OPEN ? dirfd(d->dp) : in_open(d->tab, d->n, d->flags);
    int err = fd < 0 ? fd : (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
    if (fd >= 0 && d->state != DR_OPEN)
        close(fd);
    return err;
}

int dr_fsync_once(in_table *tab, struct in_inode *n, int datasync)
{
    dr_dir d = dr_init(tab, n, 0, NULL);
    return dr_fsync_locked(&d, datasync);
}

int dr_fsync(dr_dir *d, int datasync)
{
    pthread_mutex_lock(&d->lock);
    int err = dr_fsync_locked(d, datasync);
    pthread_mutex_unlock(&d->lock);
    return err;
}

void dr_close(dr_dir *d)
{
    if (d->state == DR_OPEN)
        dr_park(d);
    in_unpin(d->tab, d->n);
    pthread_mutex_destroy(&d->lock);
    free(d);
}
