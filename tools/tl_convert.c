/* Rewriting a backing file in place through the daemon's writer (tl_convert.h). */
#include "tl_convert.h"

#include "chk.h"
#include "fmt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#define TL_CHUNK (1u << 20)            /* bytes read from the source at a time */
#define TL_OUT_MEM (256ull << 20)      /* the writer's memory budget: a mount's default mem_mb */
#define TL_IN_MEM (16ull << 20)        /* the reader's: it reads each block once */

int tl_conv_open(tl_conv *c, const sb_super *sb, char *err, size_t cap)
{
    eng_config cfg = {.backend = ENG_BACKEND_SW, .block_size = sb->block_size};
    memset(c, 0, sizeof(*c));
    c->eng = eng_open(&cfg, err, cap);
    if (!c->eng)
        return -1;
    ff_options out = {.read_only = 0, .mem_bytes = TL_OUT_MEM, .file_version = 0, .fd_max = 0};
    ff_options in = {.read_only = 1, .mem_bytes = TL_IN_MEM, .file_version = 0, .fd_max = 0};
    c->out_env = ff_env_new(c->eng, sb, &out, NULL);
    c->in_env = ff_env_new(c->eng, sb, &in, NULL);
    c->buf = malloc(TL_CHUNK);
    if (!c->out_env || !c->in_env || !c->buf) {
        tl_conv_close(c);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    return 0;
}

void tl_conv_close(tl_conv *c)
{
    free(c->buf);
    ff_env_free(c->in_env);
    ff_env_free(c->out_env);
    if (c->eng)
        eng_close(c->eng);
    memset(c, 0, sizeof(*c));
}

int tl_file_version(int fd, uint64_t size)
{
    uint8_t h[FMT_MARKER_LEN];
    fmt_marker m;
    if (size < FMT_MARKER_LEN)
        return 0;
    int rc = fmt_pread_all(fd, h, sizeof(h), 0);
    if (rc < 0)
        return rc;
    fmt_error e = fmt_marker_decode(h, sizeof(h), &m);
    return e == FMT_OK || e == FMT_ERR_NEWER ? (int)m.version : 0;
}

int tl_conv_remove_stale(int dirfd, const char *name)
{
    if (!chk_is_convert_name(name))
        return 0;
    return unlinkat(dirfd, name, 0) == 0 ? 1 : -errno;
}

/* ---- the source ---- */

typedef struct {
    int fd;
    ff_file *f;                        /* TL_SRC_OWN */
} tl_src;

static off_t tl_src_seek(tl_src *s, uint64_t off, int whence)
{
    if (s->f) {
        off_t r = ff_lseek(s->f, (off_t)off, whence);
        if (r < 0)
            errno = (int)-r;
        return r < 0 ? -1 : r;
    }
    return lseek(s->fd, (off_t)off, whence);
}

static ssize_t tl_src_read(tl_src *s, void *buf, size_t len, uint64_t off)
{
    if (s->f) {
        size_t got = 0;
        int rc = ff_read(s->f, buf, len, (off_t)off, &got);
        if (rc < 0)
            errno = -rc;
        return rc < 0 ? -1 : (ssize_t)got;
    }
    ssize_t n;
    while ((n = pread(s->fd, buf, len, (off_t)off)) < 0 && errno == EINTR)
        ;
    return n;
}

static void tl_progress(tl_conv *c, uint64_t bytes)
{
    if (c->progress && bytes)
        c->progress(c->progress_ctx, bytes);
}

/* Copies the logical content of the source into f, skipping holes (they become holes of the
 * new file: the writer stores them as zero blocks). */
static int tl_copy(tl_conv *c, tl_src *s, ff_file *f, uint64_t size)
{
    uint64_t off = 0;
    while (off < size) {
        off_t data = tl_src_seek(s, off, SEEK_DATA), hole;
        if (data < 0 && errno == ENXIO)
            break;
        if (data < 0)
            data = (off_t)off, hole = (off_t)size;          /* no SEEK_DATA: all data */
        else if ((hole = tl_src_seek(s, (uint64_t)data, SEEK_HOLE)) < 0)
            hole = (off_t)size;
        if ((uint64_t)hole > size)
            hole = (off_t)size;
        tl_progress(c, (uint64_t)data > off ? (uint64_t)data - off : 0);
        for (uint64_t pos = (uint64_t)data; pos < (uint64_t)hole;) {
            size_t want = (uint64_t)hole - pos < TL_CHUNK ? (size_t)((uint64_t)hole - pos) : TL_CHUNK;
            ssize_t n = tl_src_read(s, c->buf, want, pos);
            if (n <= 0)
                return n < 0 ? -errno : -EIO;              /* shrank under us */
            int rc = ff_write(f, c->buf, (size_t)n, (off_t)pos);
            if (rc < 0)
                return rc;
            pos += (uint64_t)n;
            tl_progress(c, (uint64_t)n);
        }
        off = (uint64_t)hole > off ? (uint64_t)hole : off + 1;
    }
    tl_progress(c, size > off ? size - off : 0);
    return ff_size(f) < size ? ff_truncate(f, (off_t)size) : 0;
}

/* ---- metadata ---- */

static int tl_copy_xattrs(int src, int dst)
{
    ssize_t n = flistxattr(src, NULL, 0);
    if (n <= 0)
        return n < 0 && errno != ENOTSUP ? -errno : 0;
    char *names = malloc((size_t)n);
    int rc = names ? 0 : -ENOMEM;
    if (rc == 0 && (n = flistxattr(src, names, (size_t)n)) < 0)
        rc = -errno;
    for (char *p = names; rc == 0 && p < names + (n > 0 ? n : 0); p += strlen(p) + 1) {
        ssize_t len = fgetxattr(src, p, NULL, 0);
        void *val = len >= 0 ? malloc(len ? (size_t)len : 1) : NULL;
        if (len < 0 || !val)
            rc = len < 0 ? -errno : -ENOMEM;
        else if ((len = fgetxattr(src, p, val, (size_t)len)) < 0 ||
                 fsetxattr(dst, p, val, (size_t)len, 0) < 0)
            rc = -errno;
        free(val);
    }
    free(names);
    return rc;
}

/* Owner first (it clears set-id bits), then extended attributes (ACLs among them), the mode,
 * the times (nothing writes the file after them) and a sync, before the rename. */
static int tl_copy_meta(int src, int dst, const struct stat *st)
{
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (fchown(dst, st->st_uid, st->st_gid) < 0)
        return -errno;
    int rc = tl_copy_xattrs(src, dst);
    if (rc == 0 && fchmod(dst, st->st_mode & 07777) < 0)
        rc = -errno;
    if (rc == 0 && futimens(dst, ts) < 0)
        rc = -errno;
    if (rc == 0 && fsync(dst) < 0)
        rc = -errno;
    return rc;
}

static int tl_same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* ---- one file ---- */

/* Writes the content of s into the temporary tmp, then src's metadata; -errno on failure.
 * Whatever has the temporary's name (a leftover the survey did not remove because it is no
 * regular file, such as a symlink someone planted to make root write elsewhere) is unlinked,
 * which never follows it, and the temporary is made afresh with O_EXCL | O_NOFOLLOW. */
static int tl_write_tmp(tl_conv *c, int dirfd, const char *tmp, const char *rel, tl_src *s,
                        uint64_t size, int src, const struct stat *st, uint64_t *stored)
{
    if (unlinkat(dirfd, tmp, 0) < 0 && errno != ENOENT)
        return -errno;
    int out = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return -errno;
    int keep = dup(out), rc;
    ff_file *f = NULL;
    if (keep < 0) {
        rc = -errno;
        close(out);
        return rc;
    }
    rc = ff_create(c->out_env, out, rel, &f);                  /* owns out from here */
    if (rc == 0) {
        rc = tl_copy(c, s, f, size);
        int rc2 = ff_release(f);
        rc = rc < 0 ? rc : rc2;
    }
    struct stat now, done;
    if (rc == 0)
        rc = tl_copy_meta(src, keep, st);
    if (rc == 0 && fstat(src, &now) == 0 && !tl_same_file(st, &now))
        rc = -EBUSY;
    if (rc == 0 && fstat(keep, &done) == 0)
        *stored = (uint64_t)done.st_blocks * 512;
    close(keep);
    return rc;
}

/* Opens the source as kind says and writes the temporary from it. */
static int tl_convert_into(tl_conv *c, int dirfd, const char *tmp, const char *rel, int src,
                           const struct stat *st, tl_src_kind kind, uint64_t *stored)
{
    tl_src s = {.fd = src, .f = NULL};
    if (kind == TL_SRC_PLAIN)
        return tl_write_tmp(c, dirfd, tmp, rel, &s, (uint64_t)st->st_size, src, st, stored);
    int in = dup(src), rc;
    if (in < 0)
        return -errno;
    if ((rc = ff_open(c->in_env, in, rel, &s.f)) < 0)          /* owns in from here */
        return rc;
    if (ff_is_foreign(s.f))
        rc = -EINVAL;                                           /* not an own file after all */
    else
        rc = tl_write_tmp(c, dirfd, tmp, rel, &s, ff_size(s.f), src, st, stored);
    ff_discard(s.f);                   /* opened read-only and never written: nothing to commit */
    return rc;
}

int tl_convert(tl_conv *c, int dirfd, const char *name, const char *rel, int src,
               const struct stat *st, tl_src_kind kind, uint64_t *stored)
{
    char tmp[64];
    /* the directory's times go back too: a conversion is not a change of its entries */
    struct stat dir_st;
    int dir_times = fstat(dirfd, &dir_st) == 0;
    chk_convert_name((uint64_t)st->st_ino, tmp, sizeof(tmp));
    int rc = tl_convert_into(c, dirfd, tmp, rel, src, st, kind, stored);
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(dirfd, tmp, 0);
    if (dir_times) {
        struct timespec ts[2] = {dir_st.st_atim, dir_st.st_mtim};
        (void)futimens(dirfd, ts);
    }
    if (rc == 0)
        (void)fsync(dirfd);
    return rc;
}
