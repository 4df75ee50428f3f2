/* plcheck: opens files of a store the way the daemon does (ff_open, with its repairs) and
 * writes out what they read as, for the power-loss test (tests/powerloss.py).
 *
 *   plcheck STORE OUTDIR FILE...
 *
 * For each FILE (a path relative to STORE), OUTDIR/N (N: its position in the list) gets
 * the file's whole logical content, and one line goes to stdout: "N ok SIZE" or "N error
 * WHAT: REASON" (the open or a read failed). Exit status 0 unless the store cannot be used. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng.h"
#include "ffile.h"
#include "sb.h"

/* Reads the whole file into OUTDIR/n; returns 0 or -errno, naming the step in *what. */
static int pl_dump(ff_file *f, int out, const char **what)
{
    uint64_t size = ff_size(f), off = 0;
    static char buf[1 << 20];
    while (off < size) {
        size_t want = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf), got = 0;
        int rc = ff_read(f, buf, want, (off_t)off, &got);
        if (rc < 0 || got != want) {
            *what = "read";
            return rc < 0 ? rc : -EIO;
        }
        if (write(out, buf, got) != (ssize_t)got) {
            *what = "write out";
            return -errno;
        }
        off += got;
    }
    return 0;
}

static void pl_file(ff_env *env, int store, const char *outdir, int n, const char *path)
{
    char name[4096];
    const char *what = "open";
    snprintf(name, sizeof(name), "%s/%d", outdir, n);
    int out = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fd = openat(store, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    int rc = out < 0 || fd < 0 ? -errno : 0;
    ff_file *f = NULL;
    if (rc == 0)
        rc = ff_open(env, fd, path, &f);   /* takes fd */
    else if (fd >= 0)
        close(fd);
    if (rc == 0)
        rc = pl_dump(f, out, &what);
    uint64_t size = f ? ff_size(f) : 0;
    if (f) {
        int rr = ff_release(f);
        if (rc == 0 && rr < 0)
            rc = rr, what = "release";
    }
    if (out >= 0)
        close(out);
    if (rc == 0)
        printf("%d ok %llu\n", n, (unsigned long long)size);
    else
        printf("%d error %s: %s\n", n, what, strerror(-rc));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: plcheck STORE OUTDIR FILE...\n");
        return 2;
    }
    int store = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    sb_super sb;
    if (store < 0 || sb_read(store, &sb) != SB_OK) {
        fprintf(stderr, "plcheck: %s: not a store\n", argv[1]);
        return 1;
    }
    char err[256] = "";
    eng_config ec = {.backend = ENG_BACKEND_SW, .sw_threads = 1, .block_size = sb.block_size};
    eng_ctx *eng = eng_open(&ec, err, sizeof(err));
    ff_options opt = {.read_only = 0, .mem_bytes = 64u << 20, .file_version = 0, .fd_max = 0,
                      .clean_ns = 0, .start_ns = UINT64_MAX};
    ff_env *env = eng ? ff_env_new(eng, &sb, &opt, NULL) : NULL;
    if (!env) {
        fprintf(stderr, "plcheck: cannot set up: %s\n", err);
        return 1;
    }
    for (int i = 3; i < argc; i++)
        pl_file(env, store, argv[2], i - 3, argv[i]);
    ff_env_free(env);
    eng_close(eng);
    close(store);
    return 0;
}
