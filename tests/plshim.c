/* plshim: a preloaded recorder of what a process makes durable, for the power-loss test
 * (tests/integration/t_powerloss.sh, tests/powerloss.py).
 *
 * Loaded into the daemon with LD_PRELOAD, it wraps the calls that change backing files
 * (pwrite, pwritev, ftruncate, fallocate) and those that make them durable (fsync, fdatasync). Each
 * successful call on a file under $PLSHIM_ROOT is appended to $PLSHIM_LOG once it has
 * returned, with the file's path relative to the root, a sequence number and the monotonic
 * time; writes carry their bytes. The log is what a disk was asked to do, in the order the
 * calls finished: the test builds from it the states a power loss may leave (everything
 * before a file's last sync, any subset of its later changes, torn writes) and opens each.
 *
 * Record: "PLOG" u32 type, u64 seq, u64 t_ns, u64 off, u64 len, u32 mode, u32 path_len,
 * path, then len bytes for a write (little-endian, as the host). Types: 1 write, 2 truncate
 * (off = new length), 3 fallocate (mode, off, len), 4 sync. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { PL_WRITE = 1, PL_TRUNC = 2, PL_FALLOC = 3, PL_SYNC = 4 };

static pthread_mutex_t pl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pl_once = PTHREAD_ONCE_INIT;
static int pl_fd = -1;
static char pl_root[PATH_MAX];
static size_t pl_root_len;
static uint64_t pl_seq;

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);

static void pl_init(void)
{
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_ftruncate = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
    real_fallocate = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, "fallocate");
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    real_pwritev = (ssize_t(*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
    const char *log = getenv("PLSHIM_LOG"), *root = getenv("PLSHIM_ROOT");
    if (!log || !root || !realpath(root, pl_root))
        return;
    pl_root_len = strlen(pl_root);
    pl_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

/* The path of fd relative to the root, or 0 when fd is not a file under it. */
static size_t pl_path(int fd, char *out, size_t cap)
{
    char proc[64], full[PATH_MAX];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, full, sizeof(full) - 1);
    if (n <= 0 || (size_t)n <= pl_root_len + 1 || strncmp(full, pl_root, pl_root_len) != 0 ||
        full[pl_root_len] != '/')
        return 0;
    full[n] = '\0';
    size_t len = (size_t)n - pl_root_len - 1;
    if (len >= cap)
        return 0;
    memcpy(out, full + pl_root_len + 1, len + 1);
    return len;
}

static void pl_put(uint8_t **p, const void *v, size_t n)
{
    memcpy(*p, v, n);
    *p += n;
}

static void pl_record(int fd, uint32_t type, uint64_t off, uint64_t len, uint32_t mode,
                      const void *data)
{
    char path[PATH_MAX];
    size_t plen = pl_fd >= 0 ? pl_path(fd, path, sizeof(path)) : 0;
    if (plen == 0)
        return;
    struct timespec ts;
    uint32_t plen32 = (uint32_t)plen;
    size_t dlen = type == PL_WRITE ? (size_t)len : 0, n = 48 + plen + dlen;
    uint8_t *rec = malloc(n), *p = rec;
    if (!rec)
        abort();                       /* a record lost would make every state wrong */
    pthread_mutex_lock(&pl_lock);
    /* timed under the lock: the log's order is its times' order, and every record is
     * timed before the call it records returns to the daemon */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t seq = pl_seq++;
    pl_put(&p, "PLOG", 4), pl_put(&p, &type, 4), pl_put(&p, &seq, 8), pl_put(&p, &t, 8);
    pl_put(&p, &off, 8), pl_put(&p, &len, 8), pl_put(&p, &mode, 4), pl_put(&p, &plen32, 4);
    pl_put(&p, path, plen);
    if (dlen)
        pl_put(&p, data, dlen);
    for (size_t done = 0; done < n;) {
        ssize_t w = real_write(pl_fd, rec + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            abort();
        done += (size_t)w;
    }
    pthread_mutex_unlock(&pl_lock);
    free(rec);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    pthread_once(&pl_once, pl_init);
    ssize_t r = real_pwrite(fd, buf, n, off);
    if (r > 0) {
        int saved = errno;
        pl_record(fd, PL_WRITE, (uint64_t)off, (uint64_t)r, 0, buf);
        errno = saved;
    }
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { return pwrite(fd, buf, n, off); }

/* One record for the whole call: what it wrote is one write to the disk. */
ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    pthread_once(&pl_once, pl_init);
    ssize_t r = real_pwritev(fd, iov, n, off);
    if (r > 0) {
        int saved = errno;
        uint8_t *buf = malloc((size_t)r);
        if (!buf)
            abort();
        size_t done = 0;
        for (int k = 0; k < n && done < (size_t)r; k++) {
            size_t m = iov[k].iov_len < (size_t)r - done ? iov[k].iov_len : (size_t)r - done;
            memcpy(buf + done, iov[k].iov_base, m);
            done += m;
        }
        pl_record(fd, PL_WRITE, (uint64_t)off, (uint64_t)r, 0, buf);
        free(buf);
        errno = saved;
    }
    return r;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
    return pwritev(fd, iov, n, off);
}

int ftruncate(int fd, off_t len)
{
    pthread_once(&pl_once, pl_init);
    int r = real_ftruncate(fd, len);
    if (r == 0)
        pl_record(fd, PL_TRUNC, (uint64_t)len, 0, 0, NULL);
    return r;
}

int ftruncate64(int fd, off_t len) { return ftruncate(fd, len); }

int fallocate(int fd, int mode, off_t off, off_t len)
{
    pthread_once(&pl_once, pl_init);
    int r = real_fallocate(fd, mode, off, len);
    if (r == 0)
        pl_record(fd, PL_FALLOC, (uint64_t)off, (uint64_t)len, (uint32_t)mode, NULL);
    return r;
}

int fallocate64(int fd, int mode, off_t off, off_t len) { return fallocate(fd, mode, off, len); }

int fsync(int fd)
{
    pthread_once(&pl_once, pl_init);
    int r = real_fsync(fd);
    if (r == 0)
        pl_record(fd, PL_SYNC, 0, 0, 0, NULL);
    return r;
}

int fdatasync(int fd)
{
    pthread_once(&pl_once, pl_init);
    int r = real_fdatasync(fd);
    if (r == 0)
        pl_record(fd, PL_SYNC, 0, 0, 0, NULL);
    return r;
}
