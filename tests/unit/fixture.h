/* The fixture the format and check tests share: a software engine, the per-file state on top
 * of it and one temporary backing file, written and read through the real writer (ff_create,
 * ff_write, ff_release) as the daemon does. Include after cmocka.h. */
#ifndef FPGALZ4FS_FIXTURE_H
#define FPGALZ4FS_FIXTURE_H

#include <fcntl.h>
#include <lz4frame.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng.h"
#include "ffile.h"
#include "fmt.h"

typedef struct {
    eng_ctx *eng;
    ff_env *env;
    char path[64];
    uint32_t bs;
} fixture;

#ifndef FX_FILE_VERSION
#define FX_FILE_VERSION 0              /* format of the files the fixture makes: the newest */
#endif

/* A store of block size bs and an empty file /tmp/TAG.XXXXXX. */
static inline fixture *fx_new(uint32_t bs, const char *tag)
{
    static char err[128];
    fixture *fx = calloc(1, sizeof(*fx));
    eng_config cfg = {.backend = ENG_BACKEND_SW, .sw_threads = 2};
    sb_super sb;
    assert_int_equal(sb_init(&sb, bs), SB_OK);
    ff_options opt = {.mem_bytes = 64u << 20, .file_version = FX_FILE_VERSION};
    fx->eng = eng_open(&cfg, err, sizeof(err));
    assert_non_null(fx->eng);
    fx->env = ff_env_new(fx->eng, &sb, &opt, NULL);
    assert_non_null(fx->env);
    snprintf(fx->path, sizeof(fx->path), "/tmp/%s.XXXXXX", tag);
    int fd = mkstemp(fx->path);
    assert_true(fd >= 0);
    close(fd);
    fx->bs = bs;
    return fx;
}

static inline void fx_free(fixture *fx)
{
    unlink(fx->path);
    ff_env_free(fx->env);
    eng_close(fx->eng);
    free(fx);
}

/* Text-like data drawn from words (every `every`-th position shifts by one, so it does not
 * repeat exactly), or random data that does not compress. */
static inline uint8_t *fx_make_data(size_t n, int random, uint32_t seed, const char *words,
                                    unsigned every)
{
    uint8_t *p = malloc(n ? n : 1);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t nw = strlen(words);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = random ? (uint8_t)x : (uint8_t)words[(i + (x % every == 0)) % nw];
    }
    return p;
}

/* Writes the whole file anew, chunk bytes per ff_write. */
static inline void fx_write(fixture *fx, const uint8_t *data, size_t n, size_t chunk)
{
    ff_file *f;
    int fd = open(fx->path, O_RDWR | O_TRUNC);
    assert_int_equal(ff_create(fx->env, fd, "t", &f), 0);
    for (size_t off = 0; off < n; off += chunk)
        assert_int_equal(ff_write(f, data + off, n - off < chunk ? n - off : chunk, (off_t)off), 0);
    assert_int_equal(ff_release(f), 0);
}

/* The file, opened with flags (O_RDWR lets the open repair what it repairs), reads back
 * through the per-file state as want. */
static inline void fx_check_read(fixture *fx, int flags, const uint8_t *want, size_t n)
{
    ff_file *f;
    size_t got;
    uint8_t *buf = malloc(n + 16);
    assert_int_equal(ff_open(fx->env, open(fx->path, flags), "t", &f), 0);
    assert_int_equal(ff_size(f), n);
    assert_int_equal(ff_read(f, buf, n + 16, 0, &got), 0);
    assert_int_equal(got, n);
    assert_memory_equal(buf, want, n);
    assert_int_equal(ff_release(f), 0);
    free(buf);
}

static inline uint8_t *fx_slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    rewind(fp);
    uint8_t *p = malloc(*n + 1);
    assert_int_equal(fread(p, 1, *n, fp), *n);
    fclose(fp);
    return p;
}

/* The whole backing file through liblz4's frame decoder (what lz4 -d does), which skips the
 * skippable frames. */
static inline uint8_t *fx_lz4f_decode(const char *path, size_t *out_len)
{
    size_t n, cap = 1 << 20, len = 0, pos = 0;
    uint8_t *in = fx_slurp(path, &n), *out = malloc(cap);
    LZ4F_dctx *d;
    assert_false(LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)));
    while (pos < n) {
        if (cap - len < (1 << 20))
            out = realloc(out, cap *= 2);
        size_t src = n - pos, dst = cap - len;
        size_t r = LZ4F_decompress(d, out + len, &dst, in + pos, &src, NULL);
        assert_false(LZ4F_isError(r));
        pos += src, len += dst;
        if (src == 0 && dst == 0)
            break;
    }
    LZ4F_freeDecompressionContext(d);
    free(in);
    *out_len = len;
    return out;
}

static inline void fx_check_lz4f(fixture *fx, const uint8_t *want, size_t n)
{
    size_t len;
    uint8_t *dec = fx_lz4f_decode(fx->path, &len);
    assert_int_equal(len, n);
    assert_memory_equal(dec, want, n);
    free(dec);
}

static inline void fx_read_table(fixture *fx, fmt_trailer *t)
{
    struct stat st;
    int fd = open(fx->path, O_RDONLY);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(fmt_trailer_read(fd, (uint64_t)st.st_size, fx->bs, t), FMT_OK);
    close(fd);
}

/* Damages the byte at off (one bit flipped). */
static inline void fx_flip_byte(fixture *fx, uint64_t off)
{
    int fd = open(fx->path, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* The stock command line tool is what users have: it must decode every file at rest too
 * (its 1.9.4 version loses bytes after frames that lack a content checksum). */
static inline void fx_check_lz4_tool(const char *path, const uint8_t *want, size_t n)
{
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "lz4 -d -c -q %s", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    uint8_t *got = malloc(n + 1);
    size_t g = fread(got, 1, n + 1, p);
    assert_int_equal(pclose(p), 0);
    assert_int_equal(g, n);
    assert_memory_equal(got, want, n);
    free(got);
}

#endif
