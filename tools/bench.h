/* bench: the pieces of fpgalz4fs-bench shared by its modes (prefix bn_).
 *
 * bench_util.c: options, timing, output files, the plot; bench_proc.c: child processes,
 * mounts and the clean-up that runs even on a signal; bench_corpus.c: the corpora;
 * bench_engine.c: the `engine` mode; bench_fs.c: the filesystem modes and `all`. */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#define BN_NAME "fpgalz4fs-bench"
#define BN_LINUX_TAR "/usr/src/linux-source-6.1.tar.xz"
#define BN_MIB (1024u * 1024u)
#define BN_MB 1e6                      /* rate unit: MB = 10^6 bytes, as emu_card_mbps */
#define BN_MAX_ROUNDS 100u
#define BN_PATH 4096

enum { BN_EXIT_OK = 0, BN_EXIT_FAIL = 1, BN_EXIT_USAGE = 2, BN_CONTINUE = -1 };

/* ---- bench_util.c ---- */

int bn_usage_error(const char *usage, const char *what, const char *arg);
/* strtod with the whole string consumed and lo <= value <= hi; 0 or -1. */
int bn_parse_num(const char *text, double lo, double hi, double *out);
void *bn_alloc(size_t n);              /* exits on failure: the driver has nothing to save */
double bn_clock(clockid_t id);
int bn_have(const char *prog);         /* PROG on PATH, found without a shell */
int bn_mkdirs(const char *dir);
/* Median of v[0..n) (sorts v); mean of the middle two for an even n. */
double bn_median(double *v, unsigned n);
/* DIR/NAME written by fill(f, ctx); prints "wrote PATH". */
int bn_write_out(const char *dir, const char *name, const void *ctx,
                 void (*fill)(FILE *, const void *));
/* DIR/STEM.gp written by fill(f, ctx, png path), then gnuplot makes DIR/STEM.png. Says so
 * and returns 0 when gnuplot is missing (the plot is optional), -1 when gnuplot fails. */
int bn_plot(const char *dir, const char *stem, const void *ctx,
            void (*fill)(FILE *, const void *, const char *));

/* ---- bench_proc.c ---- */

/* Runs argv (PATH search) with stdin from /dev/null and stdout into out (NULL: /dev/null),
 * stderr inherited; *secs (may be NULL) gets its wall time. Returns its exit status,
 * 128+signal, or -1 when it could not start. */
int bn_run(char *const argv[], const char *out, double *secs);
int bn_sh(const char *cmd);            /* /bin/sh -c CMD (preparation only, never timed) */

typedef struct {
    char backing[BN_PATH], mnt[BN_PATH], log[BN_PATH];
    pid_t pid;                         /* the daemon, run in the foreground (-f) */
} bn_mount;

/* Starts DAEMON BACKING MNT -f -o OPTS,log=LOG and returns once the mount is up. */
int bn_mount_up(bn_mount *m, const char *daemon, const char *opts);
/* fusermount3 -u, then waits for the daemon to exit (it commits everything first). */
int bn_mount_down(bn_mount *m);
/* Peak and current RSS of the daemon (VmHWM, VmRSS of /proc/PID/status), KiB; -1 if none. */
long bn_vm_kib(pid_t pid, const char *key);

/* A fresh ext4 in a sparse image file, loop-mounted (root only): a filesystem with no
 * history, so rounds that create many inodes do not pay for the ones deleted before. */
typedef struct {
    char img[BN_PATH], dir[BN_PATH];
    volatile sig_atomic_t up;          /* may be mounted: the clean-up unmounts it */
} bn_loop;

/* Makes IMG (bytes, sparse), mkfs.ext4 with at least `inodes` inodes, mounts it on DIR
 * (made when missing) and registers it for clean-up. 0, or -1 with nothing left behind. */
int bn_loop_up(bn_loop *l, unsigned long long bytes, unsigned long inodes);
/* umount (lazily when busy, then -1), then removes IMG. */
int bn_loop_down(bn_loop *l);

/* What must go even when the run dies: mounts (FUSE first, then the loop filesystems under
 * them, lazily) are unmounted and the work directory removed at exit and on
 * SIGINT/SIGTERM/SIGHUP/SIGPIPE. */
void bn_cleanup_init(void);
void bn_cleanup_mount(bn_mount *m);    /* registers (bn_mount_up does it) */
void bn_cleanup_loop(bn_loop *l);      /* registers (bn_loop_up does it) */
void bn_cleanup_workdir(const char *dir);
void bn_cleanup_now(void);

/* ---- bench_corpus.c ---- */

typedef struct {
    uint8_t *data;
    size_t len;
    char what[512];                    /* which corpus, for the reader of the table */
} bn_corpus;

typedef struct {
    const char *file;                  /* NULL: the Linux tar when there, else generated */
    int synthetic;                     /* generate even when the Linux tar is there */
    size_t mib;
    int mib_given;                     /* mib also caps FILE */
} bn_corpus_req;

int bn_corpus_load(const bn_corpus_req *r, bn_corpus *c);
/* Writes the generated text corpus (mib MiB) to PATH. */
int bn_corpus_write_generated(const char *path, size_t mib);
/* A tree of n small generated files (sizes 200 B..64 KiB, 50 per directory) under DIR. */
int bn_tree_generate(const char *dir, unsigned n);

/* ---- bench_engine.c ---- */

/* The engine targets, for the summary of `all` (1-call variant). */
typedef struct {
    int valid;
    double card_model_mbps;
    double overlap_pct, nooverlap_pct;  /* bufsets=2, bufsets=1: % of the modelled rate */
    double mixed1_mbps, card_mbps, sw1_mbps; /* card+sw vs either alone, 1 pool thread */
} bn_engine_summary;

int bn_engine_main(int argc, char **argv);
int bn_engine_run(int argc, char **argv, bn_engine_summary *sum);

/* ---- bench_fs.c ---- */

int bn_fs_main(int argc, char **argv);  /* argv[0]: write, read, small, random, size, rss,
                                           fs or all */

#endif
