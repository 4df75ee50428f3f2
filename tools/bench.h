/* bench: the pieces of fpgalz4fs-bench shared by its modes (prefix bn_).
 *
 * bench_util.c: options, timing, output files, the plot; bench_proc.c: child processes,
 * mounts and the clean-up that runs even on a signal; bench_corpus.c: the corpora;
 * bench_engine.c: the `engine` mode; bench_fs.c: the filesystem modes and `all`;
 * bench_wl.c: the workloads; bench_par.c: the `parallel` mode; bench_pt.c: building the
 * passthrough_ll rival. */
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
/* OUT (BN_PATH bytes) = DIR/NAME; exits when it does not fit (the exit handler cleans up). */
void bn_path(char *out, const char *dir, const char *name);
off_t bn_size(const char *path);       /* st_size, or -1 */
off_t bn_allocated(const char *path);  /* st_blocks * 512, or -1 */
int bn_rm_rf(const char *path);        /* rm -rf --one-file-system */
int bn_fail(const char *what, const char *path);   /* prints "WHAT: PATH"; -1 */
/* lz4's -B option for a store block size (-B4 64K, -B5 256K, -B6 1M, -B7 4M). */
const char *bn_lz4_bsize(uint32_t block);

/* One rival of one row, its rounds. */
typedef struct {
    const char *row, *rival, *unit;
    double secs[BN_MAX_ROUNDS], rate[BN_MAX_ROUNDS];
    unsigned n;
    double median;                     /* of the rates */
    const char *skip;                  /* why the row was not measured */
} bn_series;

/* One target with its verdict, for fs.md, targets.csv and the plot. */
typedef struct {
    const char *name;                  /* the SPEC.md target */
    double measured, required;
    int at_most;                       /* measured must be <= required (else >=) */
    const char *unit;
    const char *skip;                  /* not measured, and why */
    const char *tag;                   /* short name for the plot */
} bn_target;

#define BN_MAX_TARGETS 96

/* ---- bench_proc.c ---- */

/* fpgalz4fs and mkfpgalz4fs beside this program, into DAEMON and MKFS (BN_PATH bytes each);
 * -1 with a message when either is missing. */
int bn_find_binaries(char *daemon, char *mkfs);

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
/* Starts a libfuse example, PROG MNT -f -o OPTS (no BACKING argument, no log= option; its
 * stderr goes to m->log), and returns once the mount is up. */
int bn_mount_up_rival(bn_mount *m, const char *prog, const char *opts);
/* fusermount3 -u, then waits for the daemon to exit (it commits everything first). */
int bn_mount_down(bn_mount *m);
/* Peak and current RSS of the daemon (VmHWM, VmRSS of /proc/PID/status), KiB; -1 if none. */
long bn_vm_kib(pid_t pid, const char *key);
/* write_bytes of /proc/PID/io (bytes this process made the kernel write to storage); -1. */
long long bn_io_write_bytes(pid_t pid);

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

/* ---- bench_par.c: the `parallel` mode ---- */

int bn_par_main(int argc, char **argv);

/* ---- bench_pt.c ---- */

/* Compiles libfuse's passthrough_ll (SRC, or libfuse3-dev's example when NULL) into
 * WORK/passthrough_ll, whose path goes into BIN, and the source's into USED (BN_PATH bytes
 * each); NULL, or why it cannot be a rival. */
const char *bn_pt_build(const char *work, const char *src, char *bin, char *used);

/* ---- bench_corpus.c ---- */

/* PATH gets the first MIB MiB of the Linux source tar, or generated text when SYNTHETIC or
 * without the tar; WHAT (CAP bytes) says which, for the reports. */
int bn_make_source(const char *path, size_t mib, int synthetic, char *what, size_t cap);

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

/* ---- bench_tree.c ---- */

/* The metadata commands of the workloads part, on a tree of small files. */
enum { BN_TREE_CP, BN_TREE_TAR, BN_TREE_STAT, BN_TREE_DU, BN_TREE_LS, BN_TREE_GIT, BN_TREE_RM };
/* Writes a tree of files small text files (40 a directory) to dir and its tar to tar. */
int bn_tree_make(const char *dir, const char *tar, unsigned files);
/* Times op (BN_TREE_*) in dir: cp -r and tar -x make dir/t from src or tar; the others first
 * copy src to dir/t (git status: and commit it), empty the kernel's caches, then run. 0, or
 * the command's exit status. */
int bn_tree_run(int op, const char *src, const char *tar, const char *dir, double *secs);

/* ---- bench_wl.c ---- */

/* The workloads part: SQLite, appends, fio, edits, holes and the daemon's write_bytes on
 * fpgalz4fs (the store's block size and 64K), passthrough_ll and plain ext4. */
typedef struct {
    const char *work, *daemon, *mkfs;  /* the run's work directory; the binaries */
    const char *big;                   /* the large file: the write_bytes row's data */
    off_t big_len;
    const char *pt_src;                /* passthrough_ll.c; NULL: libfuse3-dev's example */
    uint32_t block;                    /* the main store's block size */
    unsigned rounds, ops, edits, file_mib, fio_secs, hole_gb;
    unsigned tree_files;               /* files in the metadata rows' tree */
    const char *rows;                  /* comma-separated row tags to run; NULL: all */
    const char *fs_opts;               /* more -o options for fpgalz4fs (--fs-opts); NULL */
} bn_wl_cfg;

typedef struct bn_wl bn_wl;

/* Runs every workload; *out is set even on failure (free it). 0, or -1 when the part could
 * not start; a workload that failed on a rival is recorded and counted by bn_wl_failures. */
/* Whether every comma-separated tag of rows names a workloads row (--wl-rows). */
int bn_wl_rows_valid(const char *rows);
int bn_wl_run(const bn_wl_cfg *c, bn_wl **out);
int bn_wl_failures(const bn_wl *w);
size_t bn_wl_targets(const bn_wl *w, bn_target *t, size_t cap);
void bn_wl_report(FILE *f, const bn_wl *w);   /* the sections of fs.md */
void bn_wl_csv(FILE *f, const bn_wl *w);      /* the rows of fs.csv, no header */

/* ---- bench_fs.c ---- */

int bn_fs_main(int argc, char **argv);  /* argv[0]: write, read, small, random, size, rss,
                                           workloads, fs or all */

#endif
