/* Shared pieces of the fuzz harnesses (see fuzz_util.h). */
#include "fuzz_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fmt.h"

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: invariant failed: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

int fz_memfile(const uint8_t *data, size_t len)
{
    int fd = memfd_create("fpgalz4fs-fuzz", MFD_CLOEXEC);
    FZ_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
    FZ_CHECK(len == 0 || fmt_pwrite_all(fd, data, len, 0) == 0, "write of %zu bytes", len);
    return fd;
}

/* The harnesses run for the life of the process; the environment is freed by its exit. */
fz_env *fz_env_get(void)
{
    static fz_env env;
    if (env.rw)
        return &env;
    char err[256] = "";
    eng_config cfg = {.backend = ENG_BACKEND_SW, .sw_threads = 1, .block_size = 64u << 10};
    sb_super sb;
    FZ_CHECK(sb_init(&sb, 64u << 10) == SB_OK, "sb_init");
    env.eng = eng_open(&cfg, err, sizeof(err));
    FZ_CHECK(env.eng != NULL, "eng_open: %s", err);
    env.log = lg_open("/dev/null", 0, "fpgalz4fs-fuzz");
    FZ_CHECK(env.log != NULL, "lg_open");
    ff_options rw = {.read_only = 0, .mem_bytes = 64u << 20};
    ff_options ro = {.read_only = 1, .mem_bytes = 64u << 20};
    env.rw = ff_env_new(env.eng, &sb, &rw, env.log);
    env.ro = ff_env_new(env.eng, &sb, &ro, env.log);
    FZ_CHECK(env.rw && env.ro, "ff_env_new");
    return &env;
}

#define FZ_PIECE (64u << 10)
#define FZ_PROBE 512u
#define FZ_MAX_PROBES 1024u

/* Reads [off, off+want) into dst; a short read counts as EIO (it stops at a damaged block). */
static int fz_read_piece(ff_file *f, uint8_t *dst, uint64_t want, uint64_t off)
{
    size_t got = 0;
    int rc = ff_read(f, dst, (size_t)want, (off_t)off, &got);
    FZ_CHECK(rc <= 0, "ff_read returned %d", rc);
    FZ_CHECK(got <= want, "ff_read gave %zu bytes of %llu", got, (unsigned long long)want);
    if (rc == 0 && got < want)
        rc = -EIO;
    if (rc < 0)
        memset(dst + got, 0xEE, (size_t)(want - got));
    return rc;
}

uint8_t *fz_read_all(ff_file *f, uint64_t size, uint64_t cap, size_t *len, int *first_err)
{
    uint64_t n = size < cap ? size : cap;
    uint8_t *buf = malloc(n ? n : 1), probe[FZ_PROBE];
    FZ_CHECK(buf != NULL, "malloc %llu", (unsigned long long)n);
    *first_err = 0;
    for (uint64_t off = 0; off < n; off += FZ_PIECE) {
        uint64_t want = n - off < FZ_PIECE ? n - off : FZ_PIECE;
        int rc = fz_read_piece(f, buf + off, want, off);
        if (rc < 0 && *first_err == 0)
            *first_err = rc;
    }
    /* Past cap only probes: a crafted table may claim terabytes of holes. */
    uint64_t stride = size > n ? (size - n) / FZ_MAX_PROBES + 1 : 1;
    for (uint64_t off = n; off < size; off += stride) {
        uint64_t want = size - off < FZ_PROBE ? size - off : FZ_PROBE;
        int rc = fz_read_piece(f, probe, want, off);
        if (rc < 0 && *first_err == 0)
            *first_err = rc;
    }
    *len = (size_t)n;
    return buf;
}
