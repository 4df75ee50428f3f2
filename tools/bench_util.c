/* bench_util: options, timing and the output files every mode writes. */
#include "bench.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int bn_usage_error(const char *usage, const char *what, const char *arg)
{
    fprintf(stderr, BN_NAME ": %s%s%s%s\n%s\n", what, arg ? " '" : "", arg ? arg : "",
            arg ? "'" : "", usage);
    return BN_EXIT_USAGE;
}

int bn_parse_num(const char *text, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

void *bn_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, BN_NAME ": out of memory (%zu bytes)\n", n);
        exit(BN_EXIT_FAIL);
    }
    return p;
}

double bn_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bn_have(const char *prog)
{
    const char *path = getenv("PATH");
    char dir[BN_PATH], full[BN_PATH + 256];
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(dir, sizeof(dir), "%.*s", (int)n, p);
        snprintf(full, sizeof(full), "%s/%s", n ? dir : ".", prog);
        if (access(full, X_OK) == 0)
            return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

int bn_mkdirs(const char *dir)
{
    char path[BN_PATH];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *s = path + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static int bn_dbl_cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, z = *(const double *)pb;
    return (a > z) - (a < z);
}

double bn_median(double *v, unsigned n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), bn_dbl_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bn_write_out(const char *dir, const char *name, const void *ctx,
                 void (*fill)(FILE *, const void *))
{
    char path[BN_PATH + 256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, BN_NAME ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    fill(f, ctx);
    if (fclose(f) != 0) {
        fprintf(stderr, BN_NAME ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    printf("wrote %s\n", path);
    return 0;
}

int bn_plot(const char *dir, const char *stem, const void *ctx,
            void (*fill)(FILE *, const void *, const char *))
{
    char gp[BN_PATH + 256], png[BN_PATH + 256];
    snprintf(gp, sizeof(gp), "%s/%s.gp", dir, stem);
    snprintf(png, sizeof(png), "%s/%s.png", dir, stem);
    if (!bn_have("gnuplot")) {
        printf("gnuplot is not installed: no %s (apt-get install gnuplot-nox to get it)\n", png);
        return 0;
    }
    FILE *f = fopen(gp, "w");
    if (!f) {
        fprintf(stderr, BN_NAME ": %s: %s\n", gp, strerror(errno));
        return -1;
    }
    fill(f, ctx, png);
    fclose(f);
    pid_t pid;
    int status = -1;
    char *argv[] = {"gnuplot", gp, NULL};
    if (posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ) == 0)
        waitpid(pid, &status, 0);
    if (status != 0) {
        fprintf(stderr, BN_NAME ": gnuplot %s failed; no plot\n", gp);
        return -1;
    }
    printf("wrote %s (script %s)\n", png, gp);
    return 0;
}

/* ---- small file helpers shared by the filesystem modes ---- */

void bn_path(char *out, const char *dir, const char *name)
{
    if (snprintf(out, BN_PATH, "%s/%s", dir, name) >= BN_PATH) {
        fprintf(stderr, BN_NAME ": path too long: %s/%s\n", dir, name);
        exit(BN_EXIT_FAIL);        /* the exit handler unmounts and cleans up */
    }
}

off_t bn_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

off_t bn_allocated(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (off_t)st.st_blocks * 512 : -1;
}

int bn_rm_rf(const char *path)
{
    char *argv[] = {"rm", "-rf", "--one-file-system", (char *)path, NULL};
    return bn_run(argv, NULL, NULL);
}

int bn_fail(const char *what, const char *path)
{
    fprintf(stderr, BN_NAME ": %s%s%s\n", what, path ? ": " : "", path ? path : "");
    return -1;
}

/* lz4's predefined block sizes: -B4 64K, -B5 256K, -B6 1M, -B7 4M; block checksums on and
 * the content checksum off, as the store's frames are. */
const char *bn_lz4_bsize(uint32_t block)
{
    return block == 64u * 1024u ? "-B4" : block == 256u * 1024u ? "-B5"
           : block == BN_MIB    ? "-B6" : "-B7";
}
