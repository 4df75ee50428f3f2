/* race: many threads read, write, truncate, rename, reopen and fsync the same and different
 * files of a directory at once (a mount), checked against a model.
 *
 *   race --dir DIR [--model MODEL_DIR] [--seconds S] [--threads N] [--seed S] [--inject-fault]
 *
 * Private files (two per thread) are checked byte for byte after every read. Shared files
 * hold fixed-size records at fixed slots; each record names its slot, its writer and a
 * sequence number and ends in a checksum, so that:
 *   - a read of a slot under that slot's lock gives exactly the model's record (or zeros or
 *     nothing when the model has none there);
 *   - a read without any lock, racing with writers and truncates, gives only whole valid
 *     records of the right slot, or zeros (a mix that persists under the lock is a failure;
 *     one that goes away is counted: the page cache does not make reads atomic with writes);
 *   - the size under every slot lock is exactly the model's (last truncate, then extends).
 * When the threads stop, every file is checked through DIR, and with --model the final
 * content is written to MODEL_DIR under the files' current names, for a comparison after a
 * remount (diff -r MODEL_DIR DIR).
 *
 * --inject-fault overwrites one byte of a shared record behind the model's back, so the run
 * must fail: it shows that the checker can. Exit status: 0 pass, 1 a check failed, 2 usage
 * or set-up error. A failure prints "race: FAIL ..." with the thread, operation and file. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define RC_REC 1024u                   /* a shared record: smaller than a page on purpose */
#define RC_SLOTS 256u                  /* shared file: up to 256 KiB, several 64K blocks */
#define RC_SHARED 2u
#define RC_PRIVATE 2u                  /* private files per thread */
#define RC_PMAX (200u << 10)           /* private files stay under this size */
#define RC_MAX_THREADS 64u
#define RC_MAGIC 0x45434152u           /* "RACE" */

enum { OP_SWRITE, OP_SREAD_LOCKED, OP_SREAD_FREE, OP_STRUNC, OP_SFSYNC, OP_SREOPEN, OP_SRENAME,
       OP_SSIZE, OP_PWRITE, OP_PREAD, OP_PTRUNC, OP_PFSYNC, OP_PREOPEN, OP_PRENAME, OP_COUNT };
static const char *const rc_op_names[OP_COUNT] = {
    "shared-write", "shared-read-locked", "shared-read-unlocked", "shared-truncate",
    "shared-fsync", "shared-reopen", "shared-rename", "shared-size", "private-write",
    "private-read", "private-truncate", "private-fsync", "private-reopen", "private-rename"};

typedef struct {
    uint32_t writer, seq;              /* seq 0: no record (zeros or past the end) */
} rc_slot;

typedef struct {
    pthread_rwlock_t all_lock;         /* shared: per-slot work; exclusive: truncate, size */
    pthread_mutex_t slot_lock[RC_SLOTS];
    rc_slot slot[RC_SLOTS];            /* each under its slot_lock (and all_lock shared) */
    pthread_mutex_t size_lock;
    uint64_t size;                     /* model size: under size_lock */
    pthread_rwlock_t name_lock;        /* writers: rename; readers: open by name */
    char name[64];                     /* current name, under name_lock */
    unsigned gen;                      /* renames so far, under name_lock */
} rc_shared;

typedef struct rc_ctx_s rc_ctx;

typedef struct {
    char name[64];
    int fd;
    uint8_t *model;                    /* RC_PMAX bytes */
    uint64_t size;
    unsigned gen;
} rc_private;

typedef struct {
    rc_ctx *ctx;
    unsigned id;
    uint64_t rng;
    int shared_fd[RC_SHARED];
    rc_private priv[RC_PRIVATE];
    uint64_t ops[OP_COUNT];
    uint64_t torn_unlocked;            /* unlocked reads that mixed records, then settled */
    uint8_t buf[RC_PMAX], rec[RC_REC];
} rc_thread;

struct rc_ctx_s {
    const char *dir, *model_dir;
    double seconds;
    unsigned n_threads;
    uint64_t seed;
    int inject;
    _Atomic int failed, stop;
    _Atomic uint32_t next_seq;
    rc_shared shared[RC_SHARED];
    rc_thread *threads;
};

static void rc_fail(rc_thread *t, int op, const char *file, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void rc_fail(rc_thread *t, int op, const char *file, uint64_t off, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (atomic_exchange(&t->ctx->failed, 1) == 0)
        fprintf(stderr, "race: FAIL seed=%" PRIu64 " thread=%u op=%s file=%s offset=%" PRIu64
                ": %s\n", t->ctx->seed, t->id, op >= 0 ? rc_op_names[op] : "final", file, off, msg);
    t->ctx->stop = 1;
}

static uint64_t rc_rand(rc_thread *t)
{
    t->rng ^= t->rng << 13, t->rng ^= t->rng >> 7, t->rng ^= t->rng << 17;
    return t->rng;
}

static uint64_t rc_below(rc_thread *t, uint64_t n) { return n ? rc_rand(t) % n : 0; }

static double rc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void rc_path(const rc_ctx *c, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", c->dir, name);
}

static int rc_open(const rc_ctx *c, const char *name, int flags)
{
    char path[4096];
    rc_path(c, name, path, sizeof(path));
    return open(path, flags | O_RDWR | O_CLOEXEC, 0644);
}

/* pread/pwrite until done or EOF; returns bytes moved or -errno. */
static ssize_t rc_pio(int fd, void *buf, size_t len, uint64_t off, int write_it)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write_it ? pwrite(fd, (char *)buf + done, len - done, (off_t)(off + done))
                             : pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* ------------------------------------------------------------------ shared records */

static void rc_record(uint8_t *rec, uint32_t slot, uint32_t writer, uint32_t seq)
{
    uint32_t head[4] = {RC_MAGIC, slot, writer, seq}, x = seq * 2654435761u ^ slot;
    memcpy(rec, head, sizeof(head));
    for (size_t i = sizeof(head); i < RC_REC - 4; i++)
        rec[i] = (uint8_t)((x = x * 1664525u + 1013904223u) >> 24);
    uint32_t sum = XXH32(rec, RC_REC - 4, 0);
    memcpy(rec + RC_REC - 4, &sum, 4);
}

static int rc_is_zero(const uint8_t *p, size_t n)
{
    return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* 1 when rec is a whole record for slot: magic, slot, checksum. */
static int rc_record_valid(const uint8_t *rec, uint32_t slot)
{
    uint32_t head[4], sum;
    memcpy(head, rec, sizeof(head));
    memcpy(&sum, rec + RC_REC - 4, 4);
    return head[0] == RC_MAGIC && head[1] == slot && XXH32(rec, RC_REC - 4, 0) == sum;
}

/* Holding every slot at once: one exclusive lock rather than 256 mutexes (ThreadSanitizer
 * follows at most 64 locks held by one thread). */
static void rc_lock_all(rc_shared *s) { pthread_rwlock_wrlock(&s->all_lock); }
static void rc_unlock_all(rc_shared *s) { pthread_rwlock_unlock(&s->all_lock); }

/* The shared file's name as it is now, for a message: a rename may change it at any time. */
static const char *rc_sname(rc_shared *s, char buf[64])
{
    pthread_rwlock_rdlock(&s->name_lock);
    snprintf(buf, 64, "%s", s->name);
    pthread_rwlock_unlock(&s->name_lock);
    return buf;
}

static void rc_lock_slot(rc_shared *s, uint32_t slot)
{
    pthread_rwlock_rdlock(&s->all_lock);
    pthread_mutex_lock(&s->slot_lock[slot]);
}

static void rc_unlock_slot(rc_shared *s, uint32_t slot)
{
    pthread_mutex_unlock(&s->slot_lock[slot]);
    pthread_rwlock_unlock(&s->all_lock);
}

static void rc_shared_write(rc_thread *t, unsigned k, int fd)
{
    rc_shared *s = &t->ctx->shared[k];
    char nb[64];
    uint32_t slot = (uint32_t)rc_below(t, RC_SLOTS), seq = ++t->ctx->next_seq;
    rc_record(t->rec, slot, t->id, seq);
    rc_lock_slot(s, slot);
    ssize_t n = rc_pio(fd, t->rec, RC_REC, (uint64_t)slot * RC_REC, 1);
    if (n == RC_REC) {
        s->slot[slot] = (rc_slot){t->id, seq};
        pthread_mutex_lock(&s->size_lock);
        if (s->size < (uint64_t)(slot + 1) * RC_REC)
            s->size = (uint64_t)(slot + 1) * RC_REC;
        pthread_mutex_unlock(&s->size_lock);
    }
    rc_unlock_slot(s, slot);
    if (n != RC_REC)
        rc_fail(t, OP_SWRITE, rc_sname(s, nb), (uint64_t)slot * RC_REC, "pwrite gave %zd", n);
}

/* Under the slot's lock: exactly the model's record, or zeros / nothing when it has none. */
static int rc_check_slot_locked(rc_thread *t, unsigned k, int fd, uint32_t slot, int op)
{
    rc_shared *s = &t->ctx->shared[k];
    char nb[64];
    uint8_t got[RC_REC];
    ssize_t n = rc_pio(fd, got, RC_REC, (uint64_t)slot * RC_REC, 0);
    rc_slot m = s->slot[slot];
    if (m.seq) {
        rc_record(t->rec, slot, m.writer, m.seq);
        if (n != RC_REC || memcmp(got, t->rec, RC_REC) != 0) {
            rc_fail(t, op, rc_sname(s, nb), (uint64_t)slot * RC_REC,
                    "want record writer=%u seq=%u, read %zd bytes%s", m.writer, m.seq, n,
                    n == RC_REC ? " that differ" : "");
            return -1;
        }
    } else if (n < 0 || (n != 0 && n != RC_REC) || !rc_is_zero(got, (size_t)n)) {
        rc_fail(t, op, rc_sname(s, nb), (uint64_t)slot * RC_REC, "want zeros or nothing, read %zd "
                "bytes%s", n, n > 0 ? " not all zero" : "");
        return -1;
    }
    return 0;
}

static void rc_shared_read_locked(rc_thread *t, unsigned k, int fd)
{
    rc_shared *s = &t->ctx->shared[k];
    uint32_t slot = (uint32_t)rc_below(t, RC_SLOTS);
    rc_lock_slot(s, slot);
    rc_check_slot_locked(t, k, fd, slot, OP_SREAD_LOCKED);
    rc_unlock_slot(s, slot);
}

/* Several slots read at once with no lock: each whole record valid for its slot or zeros. */
static void rc_shared_read_free(rc_thread *t, unsigned k, int fd)
{
    rc_shared *s = &t->ctx->shared[k];
    char nb[64];
    uint32_t first = (uint32_t)rc_below(t, RC_SLOTS), count = 1 + (uint32_t)rc_below(t, 8);
    if (first + count > RC_SLOTS)
        count = RC_SLOTS - first;
    ssize_t n = rc_pio(fd, t->buf, (size_t)count * RC_REC, (uint64_t)first * RC_REC, 0);
    if (n < 0) {
        rc_fail(t, OP_SREAD_FREE, rc_sname(s, nb), (uint64_t)first * RC_REC, "pread: %s",
                strerror((int)-n));
        return;
    }
    for (uint32_t i = 0; i < (uint32_t)n / RC_REC; i++) {
        const uint8_t *r = t->buf + (size_t)i * RC_REC;
        if (rc_record_valid(r, first + i) || rc_is_zero(r, RC_REC))
            continue;
        rc_lock_slot(s, first + i);
        int rc = rc_check_slot_locked(t, k, fd, first + i, OP_SREAD_FREE);
        rc_unlock_slot(s, first + i);
        if (rc < 0)
            return;
        t->torn_unlocked++;
    }
}

/* Under every slot lock: the size is exactly the model's. */
static int rc_check_size_locked(rc_thread *t, unsigned k, int fd, int op)
{
    rc_shared *s = &t->ctx->shared[k];
    char nb[64];
    struct stat st;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != s->size) {
        rc_fail(t, op, rc_sname(s, nb), 0, "size %lld, model %" PRIu64, (long long)st.st_size,
                s->size);
        return -1;
    }
    return 0;
}

static void rc_shared_truncate(rc_thread *t, unsigned k, int fd)
{
    rc_shared *s = &t->ctx->shared[k];
    char nb[64];
    uint64_t slots = rc_below(t, RC_SLOTS + 1);
    rc_lock_all(s);
    if (ftruncate(fd, (off_t)(slots * RC_REC)) < 0) {
        rc_fail(t, OP_STRUNC, rc_sname(s, nb), slots * RC_REC, "ftruncate: %s", strerror(errno));
    } else {
        for (uint64_t i = slots; i < RC_SLOTS; i++)
            s->slot[i] = (rc_slot){0, 0};
        s->size = slots * RC_REC;              /* every writer is held: no size_lock needed */
        rc_check_size_locked(t, k, fd, OP_STRUNC);
    }
    rc_unlock_all(s);
}

static void rc_shared_size(rc_thread *t, unsigned k, int fd)
{
    rc_shared *s = &t->ctx->shared[k];
    rc_lock_all(s);
    rc_check_size_locked(t, k, fd, OP_SSIZE);
    rc_unlock_all(s);
}

static void rc_shared_reopen(rc_thread *t, unsigned k)
{
    rc_shared *s = &t->ctx->shared[k];
    close(t->shared_fd[k]);
    pthread_rwlock_rdlock(&s->name_lock);
    t->shared_fd[k] = rc_open(t->ctx, s->name, 0);
    if (t->shared_fd[k] < 0)
        rc_fail(t, OP_SREOPEN, s->name, 0, "open: %s", strerror(errno));
    pthread_rwlock_unlock(&s->name_lock);
}

static void rc_shared_rename(rc_thread *t, unsigned k)
{
    rc_shared *s = &t->ctx->shared[k];
    char from[4096], to[4096], name[64];
    pthread_rwlock_wrlock(&s->name_lock);
    snprintf(name, sizeof(name), "shared-%u.%u", k, s->gen + 1);
    rc_path(t->ctx, s->name, from, sizeof(from));
    rc_path(t->ctx, name, to, sizeof(to));
    if (rename(from, to) < 0) {
        rc_fail(t, OP_SRENAME, s->name, 0, "rename to %s: %s", name, strerror(errno));
    } else {
        snprintf(s->name, sizeof(s->name), "%s", name);
        s->gen++;
    }
    pthread_rwlock_unlock(&s->name_lock);
}

/* Writes one byte into a record without telling the model, then reads the slot as every
 * locked read does: the run must fail. */
static void rc_inject(rc_thread *t)
{
    rc_shared *s = &t->ctx->shared[0];
    char nb[64];
    uint8_t bad = 0xA5;
    rc_lock_all(s);
    for (uint32_t i = 0; i < RC_SLOTS; i++)
        if (s->slot[i].seq) {
            if (rc_pio(t->shared_fd[0], &bad, 1, (uint64_t)i * RC_REC + 100, 1) != 1)
                rc_fail(t, OP_SWRITE, rc_sname(s, nb), 0, "injection failed");
            fprintf(stderr, "race: injected a fault into %s slot %u\n", rc_sname(s, nb), i);
            rc_check_slot_locked(t, 0, t->shared_fd[0], i, OP_SREAD_LOCKED);
            t->ctx->inject = 2;
            break;
        }
    rc_unlock_all(s);
}

static void rc_shared_op(rc_thread *t)
{
    unsigned k = (unsigned)rc_below(t, RC_SHARED), r = (unsigned)rc_below(t, 100);
    int fd = t->shared_fd[k], op;
    if (r < 40) op = OP_SWRITE, rc_shared_write(t, k, fd);
    else if (r < 60) op = OP_SREAD_LOCKED, rc_shared_read_locked(t, k, fd);
    else if (r < 80) op = OP_SREAD_FREE, rc_shared_read_free(t, k, fd);
    else if (r < 85) op = OP_STRUNC, rc_shared_truncate(t, k, fd);
    else if (r < 90) {
        op = OP_SFSYNC;
        if ((r & 1 ? fsync(fd) : fdatasync(fd)) < 0)
            rc_fail(t, op, t->ctx->shared[k].name, 0, "fsync: %s", strerror(errno));
    } else if (r < 94) op = OP_SREOPEN, rc_shared_reopen(t, k);
    else if (r < 97) op = OP_SRENAME, rc_shared_rename(t, k);
    else op = OP_SSIZE, rc_shared_size(t, k, fd);
    t->ops[op]++;
}

/* ------------------------------------------------------------------ private files */

static void rc_fill(rc_thread *t, uint8_t *p, size_t n)
{
    /* half compressible runs, half noise: both paths of the engine */
    uint64_t x = rc_rand(t);
    int noisy = (int)(x & 1);
    for (size_t i = 0; i < n; i++)
        p[i] = noisy ? (uint8_t)((x = x * 6364136223846793005ull + 1) >> 56)
                     : (uint8_t)('a' + (i / 64 + x) % 26);
}

static int rc_private_compare(rc_thread *t, rc_private *p, uint64_t off, uint64_t len, int op)
{
    uint64_t want = off >= p->size ? 0 : (p->size - off < len ? p->size - off : len);
    ssize_t n = rc_pio(p->fd, t->buf, (size_t)len, off, 0);
    if (n < 0 || (uint64_t)n != want || memcmp(t->buf, p->model + off, (size_t)want) != 0) {
        uint64_t at = 0;
        while (n > 0 && at < (uint64_t)n && at < want && t->buf[at] == p->model[off + at])
            at++;
        rc_fail(t, op, p->name, off + at, "read %zd bytes of %" PRIu64 " (size %" PRIu64
                "), first difference at this offset", n, want, p->size);
        return -1;
    }
    return 0;
}

static void rc_private_write(rc_thread *t, rc_private *p)
{
    uint64_t off = rc_below(t, RC_PMAX - 1), len = 1 + rc_below(t, 20000);
    if (off + len > RC_PMAX)
        len = RC_PMAX - off;
    rc_fill(t, t->buf, (size_t)len);
    ssize_t n = rc_pio(p->fd, t->buf, (size_t)len, off, 1);
    if (n != (ssize_t)len) {
        rc_fail(t, OP_PWRITE, p->name, off, "pwrite gave %zd", n);
        return;
    }
    if (off > p->size)
        memset(p->model + p->size, 0, (size_t)(off - p->size));
    memcpy(p->model + off, t->buf, (size_t)len);
    if (off + len > p->size)
        p->size = off + len;
}

static void rc_private_truncate(rc_thread *t, rc_private *p)
{
    uint64_t size = rc_below(t, RC_PMAX + 1);
    if (ftruncate(p->fd, (off_t)size) < 0) {
        rc_fail(t, OP_PTRUNC, p->name, size, "ftruncate: %s", strerror(errno));
        return;
    }
    if (size > p->size)
        memset(p->model + p->size, 0, (size_t)(size - p->size));
    p->size = size;
}

static void rc_private_reopen(rc_thread *t, rc_private *p)
{
    close(p->fd);
    int trunc = rc_below(t, 8) == 0;
    p->fd = rc_open(t->ctx, p->name, trunc ? O_TRUNC : 0);
    if (p->fd < 0) {
        rc_fail(t, OP_PREOPEN, p->name, 0, "open: %s", strerror(errno));
        return;
    }
    if (trunc)
        p->size = 0;
    rc_private_compare(t, p, 0, RC_PMAX, OP_PREOPEN);
}

static void rc_private_rename(rc_thread *t, rc_private *p, unsigned k)
{
    char from[4096], to[4096], name[64];
    snprintf(name, sizeof(name), "p%u-%u.%u", t->id, k, ++p->gen);
    rc_path(t->ctx, p->name, from, sizeof(from));
    rc_path(t->ctx, name, to, sizeof(to));
    if (rename(from, to) < 0)
        rc_fail(t, OP_PRENAME, p->name, 0, "rename to %s: %s", name, strerror(errno));
    else
        snprintf(p->name, sizeof(p->name), "%s", name);
}

static void rc_private_op(rc_thread *t)
{
    unsigned k = (unsigned)rc_below(t, RC_PRIVATE), r = (unsigned)rc_below(t, 100);
    rc_private *p = &t->priv[k];
    int op;
    if (r < 40) op = OP_PWRITE, rc_private_write(t, p);
    else if (r < 70) {
        op = OP_PREAD;
        uint64_t off = rc_below(t, RC_PMAX);
        rc_private_compare(t, p, off, 1 + rc_below(t, RC_PMAX - off), op);
    } else if (r < 80) op = OP_PTRUNC, rc_private_truncate(t, p);
    else if (r < 88) {
        op = OP_PFSYNC;
        if (fsync(p->fd) < 0)
            rc_fail(t, op, p->name, 0, "fsync: %s", strerror(errno));
    } else if (r < 96) op = OP_PREOPEN, rc_private_reopen(t, p);
    else op = OP_PRENAME, rc_private_rename(t, p, k);
    t->ops[op]++;
}

/* ------------------------------------------------------------------ threads, set-up */

static void *rc_thread_main(void *arg)
{
    rc_thread *t = arg;
    rc_ctx *c = t->ctx;
    double end = rc_now() + c->seconds;
    uint64_t i = 0;
    while (!c->stop && !c->failed) {
        if (t->id == 0 && c->inject == 1 && i >= 200)   /* only thread 0 reads it */
            rc_inject(t);
        if (rc_below(t, 2))
            rc_shared_op(t);
        else
            rc_private_op(t);
        if ((++i & 63) == 0 && rc_now() >= end)
            break;
    }
    return NULL;
}

static int rc_setup_thread(rc_ctx *c, rc_thread *t, unsigned id)
{
    t->ctx = c, t->id = id;
    t->rng = (c->seed + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(id + 1) * 0xBF58476D1CE4E5B9ull;
    for (unsigned k = 0; k < RC_SHARED; k++)
        if ((t->shared_fd[k] = rc_open(c, c->shared[k].name, 0)) < 0)
            return -1;
    for (unsigned k = 0; k < RC_PRIVATE; k++) {
        rc_private *p = &t->priv[k];
        snprintf(p->name, sizeof(p->name), "p%u-%u", id, k);
        p->model = calloc(1, RC_PMAX);
        if (!p->model || (p->fd = rc_open(c, p->name, O_CREAT | O_TRUNC)) < 0)
            return -1;
    }
    return 0;
}

static int rc_setup(rc_ctx *c)
{
    for (unsigned k = 0; k < RC_SHARED; k++) {
        rc_shared *s = &c->shared[k];
        for (unsigned i = 0; i < RC_SLOTS; i++)
            pthread_mutex_init(&s->slot_lock[i], NULL);
        pthread_mutex_init(&s->size_lock, NULL);
        pthread_rwlockattr_t attr;       /* truncates must not starve behind readers */
        pthread_rwlockattr_init(&attr);
        pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&s->all_lock, &attr);
        pthread_rwlockattr_destroy(&attr);
        pthread_rwlock_init(&s->name_lock, NULL);
        snprintf(s->name, sizeof(s->name), "shared-%u", k);
        int fd = rc_open(c, s->name, O_CREAT | O_TRUNC);
        if (fd < 0)
            return -1;
        close(fd);
    }
    c->threads = calloc(c->n_threads, sizeof(*c->threads));
    if (!c->threads)
        return -1;
    for (unsigned i = 0; i < c->n_threads; i++)
        if (rc_setup_thread(c, &c->threads[i], i) < 0)
            return -1;
    return 0;
}

/* The final content of a shared file, from its model. */
static uint8_t *rc_shared_content(rc_shared *s)
{
    uint8_t *buf = calloc(1, (size_t)RC_SLOTS * RC_REC);
    if (!buf)
        return NULL;
    for (uint32_t i = 0; i < RC_SLOTS; i++)
        if (s->slot[i].seq)
            rc_record(buf + (size_t)i * RC_REC, i, s->slot[i].writer, s->slot[i].seq);
    return buf;
}

/* Reads name through the directory in a fresh descriptor and compares with want. */
static int rc_final_check(rc_ctx *c, const char *name, const uint8_t *want, uint64_t size)
{
    int fd = rc_open(c, name, 0);
    struct stat st;
    uint8_t *got = malloc(size + 1);
    ssize_t n = fd < 0 || !got ? -1 : rc_pio(fd, got, (size_t)size + 1, 0, 0);
    int ok = n == (ssize_t)size && memcmp(got, want, (size_t)size) == 0 &&
             fstat(fd, &st) == 0 && (uint64_t)st.st_size == size;
    if (!ok && atomic_exchange(&c->failed, 1) == 0)
        fprintf(stderr, "race: FAIL seed=%" PRIu64 " op=final file=%s: read %zd bytes, want "
                "%" PRIu64 " as modelled\n", c->seed, name, n, size);
    free(got);
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

static int rc_save_model(const rc_ctx *c, const char *name, const uint8_t *buf, uint64_t size)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", c->model_dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && rc_pio(fd, (void *)buf, (size_t)size, 0, 1) == (ssize_t)size;
    if (fd >= 0)
        close(fd);
    if (!ok)
        fprintf(stderr, "race: cannot write %s: %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

/* After every thread stopped and closed its files: each file as modelled. */
static int rc_finish(rc_ctx *c)
{
    int rc = 0;
    for (unsigned k = 0; k < RC_SHARED; k++) {
        uint8_t *buf = rc_shared_content(&c->shared[k]);
        if (!buf || rc_final_check(c, c->shared[k].name, buf, c->shared[k].size) < 0 ||
            (c->model_dir && rc_save_model(c, c->shared[k].name, buf, c->shared[k].size) < 0))
            rc = -1;
        free(buf);
    }
    for (unsigned i = 0; i < c->n_threads; i++)
        for (unsigned k = 0; k < RC_PRIVATE; k++) {
            rc_private *p = &c->threads[i].priv[k];
            if (rc_final_check(c, p->name, p->model, p->size) < 0 ||
                (c->model_dir && rc_save_model(c, p->name, p->model, p->size) < 0))
                rc = -1;
        }
    return rc;
}

static void rc_report(const rc_ctx *c, double secs)
{
    uint64_t total = 0, torn = 0, per[OP_COUNT] = {0};
    for (unsigned i = 0; i < c->n_threads; i++) {
        for (int op = 0; op < OP_COUNT; op++)
            per[op] += c->threads[i].ops[op], total += c->threads[i].ops[op];
        torn += c->threads[i].torn_unlocked;
    }
    printf("race: %u threads, %.1f s, %" PRIu64 " operations (%.0f/s), seed %" PRIu64 "\n",
           c->n_threads, secs, total, total / (secs > 0 ? secs : 1), c->seed);
    for (int op = 0; op < OP_COUNT; op++)
        printf("race:   %-22s %" PRIu64 "\n", rc_op_names[op], per[op]);
    printf("race:   unlocked reads that saw a write in progress, then settled: %" PRIu64 "\n", torn);
}

static int rc_args(rc_ctx *c, int argc, char **argv)
{
    c->seconds = 10, c->n_threads = 8, c->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--inject-fault")) { c->inject = 1; continue; }
        if (!v)
            return -1;
        if (!strcmp(a, "--dir")) c->dir = v;
        else if (!strcmp(a, "--model")) c->model_dir = v;
        else if (!strcmp(a, "--seconds")) c->seconds = atof(v);
        else if (!strcmp(a, "--threads")) c->n_threads = (unsigned)atoi(v);
        else if (!strcmp(a, "--seed")) c->seed = strtoull(v, NULL, 10);
        else return -1;
        i++;
    }
    return c->dir && c->n_threads >= 1 && c->n_threads <= RC_MAX_THREADS && c->seconds > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    static rc_ctx ctx;                 /* large (slot locks and models): not on the stack */
    rc_ctx *c = &ctx;
    if (rc_args(c, argc, argv) < 0) {
        fprintf(stderr, "usage: race --dir DIR [--model MODEL_DIR] [--seconds S] [--threads N] "
                        "[--seed S] [--inject-fault]\n");
        return 2;
    }
    if (rc_setup(c) < 0) {
        fprintf(stderr, "race: set-up in %s failed: %s\n", c->dir, strerror(errno));
        return 2;
    }
    pthread_t tid[RC_MAX_THREADS];
    double t0 = rc_now();
    unsigned started = 0;
    for (; started < c->n_threads; started++)
        if (pthread_create(&tid[started], NULL, rc_thread_main, &c->threads[started]) != 0)
            break;
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    double secs = rc_now() - t0;
    for (unsigned i = 0; i < c->n_threads; i++) {
        for (unsigned k = 0; k < RC_SHARED; k++)
            close(c->threads[i].shared_fd[k]);
        for (unsigned k = 0; k < RC_PRIVATE; k++)
            close(c->threads[i].priv[k].fd);
    }
    if (started < c->n_threads) {
        fprintf(stderr, "race: could not start the threads\n");
        return 2;
    }
    if (!c->failed)
        rc_finish(c);
    rc_report(c, secs);
    if (c->failed)
        return 1;
    printf("race: PASS\n");
    return 0;
}
