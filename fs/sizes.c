/* Logical sizes of closed files by backing state, and the file that keeps them from one
 * mount to the next (sizes.h). */
#include "sizes.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "fmt.h"

struct sz_slot {
    dev_t dev;
    ino_t ino;
    off_t backing_size;
    struct timespec ctim;
    uint64_t size;                     /* the logical size; valid when ino != 0 */
    uint64_t used;                     /* when last put or found, in c->clock ticks */
};

/* Set-associative: a file's state goes in one of SZ_WAYS slots of its set, the least
 * recently used one when all are taken. A direct-mapped table made a tenth of a 2,000-file
 * tree evict each other for good, each lookup of one reading its footer again. */
#define SZ_WAYS 4u

struct sz_cache {
    pthread_mutex_t lock;
    unsigned sets_mask;
    uint64_t clock;
    struct sz_slot slot[];
};

sz_cache *sz_new(unsigned entries)
{
    if (entries < SZ_WAYS)
        entries = SZ_WAYS;
    sz_cache *c = calloc(1, sizeof(*c) + (size_t)entries * sizeof(struct sz_slot));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->sets_mask = entries / SZ_WAYS - 1;
    return c;
}

void sz_free(sz_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static struct sz_slot *sz_set_of(sz_cache *c, const struct stat *st)
{
    uint64_t h = (uint64_t)st->st_ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)st->st_dev;
    return &c->slot[((h ^ h >> 31) & c->sets_mask) * SZ_WAYS];
}

static int sz_same_file(const struct sz_slot *s, const struct stat *st)
{
    return s->ino == st->st_ino && s->dev == st->st_dev;
}

static int sz_same(const struct sz_slot *s, const struct stat *st)
{
    return sz_same_file(s, st) && s->backing_size == st->st_size &&
           s->ctim.tv_sec == st->st_ctim.tv_sec && s->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

int sz_get(sz_cache *c, const struct stat *st, uint64_t *size)
{
    if (!c || st->st_ino == 0)
        return 0;
    int hit = 0;
    pthread_mutex_lock(&c->lock);
    struct sz_slot *set = sz_set_of(c, st);
    for (unsigned i = 0; i < SZ_WAYS && !hit; i++)
        if (sz_same(&set[i], st)) {
            hit = 1;
            *size = set[i].size;
            set[i].used = ++c->clock;
        }
    pthread_mutex_unlock(&c->lock);
    return hit;
}

/* The file's own slot if it has one (its older state), else the least recently used. */
static struct sz_slot *sz_victim(struct sz_slot *set, const struct stat *st)
{
    struct sz_slot *v = &set[0];
    for (unsigned i = 0; i < SZ_WAYS; i++) {
        if (sz_same_file(&set[i], st))
            return &set[i];
        if (set[i].used < v->used)
            v = &set[i];
    }
    return v;
}

void sz_put(sz_cache *c, const struct stat *st, uint64_t size)
{
    if (!c || st->st_ino == 0)
        return;
    pthread_mutex_lock(&c->lock);
    *sz_victim(sz_set_of(c, st), st) = (struct sz_slot){
        st->st_dev, st->st_ino, st->st_size, st->st_ctim, size, ++c->clock};
    pthread_mutex_unlock(&c->lock);
}

/* ---- the sizes file (docs/FORMAT.md 1.6) ---- */

static const char sz_magic[8] = {'F', 'P', 'L', 'Z', 'S', 'I', 'Z', 'E'};

const char *sz_error_name(sz_error e)
{
    static const char *const names[] = {
        [SZ_OK] = "ok", [SZ_ERR_MISSING] = "missing",
        [SZ_ERR_NOT_REGULAR] = "not a regular file", [SZ_ERR_LENGTH] = "wrong length",
        [SZ_ERR_MAGIC] = "wrong magic", [SZ_ERR_VERSION] = "a version this build does not read",
        [SZ_ERR_CHECKSUM] = "checksum mismatch", [SZ_ERR_ENTRY] = "an impossible entry",
        [SZ_ERR_IO] = "I/O error", [SZ_ERR_NOMEM] = "out of memory",
    };
    return (unsigned)e < sizeof(names) / sizeof(names[0]) ? names[e] : "unknown";
}

static uint64_t sz_file_len(uint64_t n)
{
    return SZ_HEAD + n * SZ_ENTRY + 8;
}

/* One entry: inode, backing size, ctime (s, ns), 4 bytes of zeros, logical size. */
static int sz_entry_ok(const uint8_t *p)
{
    return fmt_get64(p) != 0 && fmt_get64(p + 8) <= INT64_MAX &&
           fmt_get64(p + 16) <= INT64_MAX && fmt_get32(p + 24) < 1000000000u &&
           fmt_get32(p + 28) == 0 && fmt_get64(p + 32) <= INT64_MAX;
}

sz_error sz_parse(const uint8_t *buf, size_t len, uint64_t *count)
{
    if (len < sz_file_len(0) || len > sz_file_len(SZ_FILE_MAX_ENTRIES))
        return SZ_ERR_LENGTH;
    if (memcmp(buf, sz_magic, sizeof(sz_magic)) != 0)
        return SZ_ERR_MAGIC;
    if (fmt_get32(buf + 8) != SZ_FILE_VERSION || fmt_get32(buf + 12) != SZ_ENTRY)
        return SZ_ERR_VERSION;
    uint64_t n = fmt_get64(buf + 16);
    if (n > SZ_FILE_MAX_ENTRIES || sz_file_len(n) != len)
        return SZ_ERR_LENGTH;
    if (XXH64(buf, len - 8, 0) != fmt_get64(buf + len - 8))
        return SZ_ERR_CHECKSUM;
    for (uint64_t i = 0; i < n; i++)
        if (!sz_entry_ok(buf + SZ_HEAD + i * SZ_ENTRY))
            return SZ_ERR_ENTRY;
    *count = n;
    return SZ_OK;
}

sz_error sz_import(sz_cache *c, const uint8_t *buf, size_t len, dev_t dev, uint64_t *count)
{
    uint64_t n = 0;
    sz_error e = sz_parse(buf, len, &n);
    if (e != SZ_OK)
        return e;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *p = buf + SZ_HEAD + i * SZ_ENTRY;
        struct stat st = {0};
        st.st_dev = dev, st.st_ino = (ino_t)fmt_get64(p);
        st.st_size = (off_t)fmt_get64(p + 8);
        st.st_ctim.tv_sec = (time_t)fmt_get64(p + 16);
        st.st_ctim.tv_nsec = (long)fmt_get32(p + 24);
        sz_put(c, &st, fmt_get64(p + 32));
    }
    *count = n;
    return SZ_OK;
}

static int sz_older(const void *a, const void *b)
{
    const struct sz_slot *x = *(const struct sz_slot *const *)a;
    const struct sz_slot *y = *(const struct sz_slot *const *)b;
    return x->used < y->used ? -1 : x->used > y->used;
}

/* The slots of device dev in use, oldest use first, into a malloc'd array. */
static const struct sz_slot **sz_slots_by_use(sz_cache *c, dev_t dev, uint64_t *n)
{
    uint64_t all = ((uint64_t)c->sets_mask + 1) * SZ_WAYS, k = 0;
    const struct sz_slot **v = malloc((size_t)all * sizeof(*v));
    if (!v)
        return NULL;
    for (uint64_t i = 0; i < all; i++)
        if (c->slot[i].ino != 0 && c->slot[i].dev == dev && c->slot[i].ctim.tv_sec >= 0)
            v[k++] = &c->slot[i];
    qsort(v, (size_t)k, sizeof(*v), sz_older);
    *n = k;
    return v;
}

sz_error sz_export(sz_cache *c, dev_t dev, uint8_t **buf, size_t *len)
{
    uint64_t n = 0;
    pthread_mutex_lock(&c->lock);
    const struct sz_slot **v = sz_slots_by_use(c, dev, &n);
    uint8_t *out = v ? malloc((size_t)sz_file_len(n)) : NULL;
    if (out) {
        memcpy(out, sz_magic, sizeof(sz_magic));
        fmt_put32(out + 8, SZ_FILE_VERSION), fmt_put32(out + 12, SZ_ENTRY);
        fmt_put64(out + 16, n);
        for (uint64_t i = 0; i < n; i++) {
            uint8_t *p = out + SZ_HEAD + i * SZ_ENTRY;
            fmt_put64(p, (uint64_t)v[i]->ino), fmt_put64(p + 8, (uint64_t)v[i]->backing_size);
            fmt_put64(p + 16, (uint64_t)v[i]->ctim.tv_sec);
            fmt_put32(p + 24, (uint32_t)v[i]->ctim.tv_nsec), fmt_put32(p + 28, 0);
            fmt_put64(p + 32, v[i]->size);
        }
        fmt_put64(out + sz_file_len(n) - 8, XXH64(out, (size_t)sz_file_len(n) - 8, 0));
    }
    pthread_mutex_unlock(&c->lock);
    free(v);
    if (!out)
        return SZ_ERR_NOMEM;
    *buf = out, *len = (size_t)sz_file_len(n);
    return SZ_OK;
}

/* Anyone who can write the top of the store could put a symlink, a FIFO or a device there:
 * only a regular file is opened (a name swapped after that check is never followed, never
 * blocks and is refused by the check of the open descriptor), no larger than the most
 * entries. */
static sz_error sz_read_file(int dirfd, uint8_t **buf, size_t *len)
{
    struct stat st;
    if (fstatat(dirfd, SZ_FILE_NAME, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? SZ_ERR_MISSING : SZ_ERR_IO;
    if (!S_ISREG(st.st_mode))
        return SZ_ERR_NOT_REGULAR;
    int fd = openat(dirfd, SZ_FILE_NAME,
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SZ_ERR_MISSING : errno == ELOOP ? SZ_ERR_NOT_REGULAR
                                                                 : SZ_ERR_IO;
    sz_error e = SZ_OK;
    uint8_t *b = NULL;
    if (fstat(fd, &st) != 0)
        e = SZ_ERR_IO;
    else if (!S_ISREG(st.st_mode))
        e = SZ_ERR_NOT_REGULAR;
    else if ((uint64_t)st.st_size > sz_file_len(SZ_FILE_MAX_ENTRIES) ||
             (uint64_t)st.st_size < sz_file_len(0))
        e = SZ_ERR_LENGTH;
    else if (!(b = malloc((size_t)st.st_size)))
        e = SZ_ERR_NOMEM;
    else if (pread(fd, b, (size_t)st.st_size, 0) != (ssize_t)st.st_size)
        e = SZ_ERR_IO;
    close(fd);
    if (e != SZ_OK) {
        free(b);
        return e;
    }
    *buf = b, *len = (size_t)st.st_size;
    return SZ_OK;
}

sz_error sz_load(sz_cache *c, int dirfd, dev_t dev, uint64_t *count)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    *count = 0;
    sz_error e = sz_read_file(dirfd, &buf, &len);
    if (e == SZ_OK)
        e = sz_import(c, buf, len, dev, count);
    free(buf);
    return e;
}

sz_error sz_save(sz_cache *c, int dirfd, dev_t dev, uint64_t *count)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    sz_error e = sz_export(c, dev, &buf, &len);
    if (e != SZ_OK)
        return e;
    *count = fmt_get64(buf + 16);
    if (unlinkat(dirfd, SZ_TMP_NAME, 0) != 0 && errno != ENOENT)
        e = SZ_ERR_IO;
    int fd = e == SZ_OK ? openat(dirfd, SZ_TMP_NAME,
                                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
                        : -1;
    if (fd < 0 || fmt_pwrite_all(fd, buf, len, 0) != 0 || fsync(fd) != 0)
        e = SZ_ERR_IO;
    int saved = errno;
    if (fd >= 0 && close(fd) != 0 && e == SZ_OK)
        e = SZ_ERR_IO, saved = errno;
    if (e == SZ_OK && renameat(dirfd, SZ_TMP_NAME, dirfd, SZ_FILE_NAME) != 0)
        e = SZ_ERR_IO, saved = errno;
    if (e != SZ_OK && fd >= 0)
        unlinkat(dirfd, SZ_TMP_NAME, 0);
    free(buf);
    errno = saved;
    return e;
}
