/* bench_fs: the filesystem modes. fpgalz4fs and its rivals run side by side in one run, on
 * the same data, several rounds each, and the table quotes medians and their ratios: on a
 * shared, noisy host the ratios between rows are what carry over.
 *
 * Every source and backing file sits in the page cache (they are read once before each
 * timed command), so the rows measure CPU and FUSE, not the disk. Every timed output is
 * checked outside the timed region (the mount's copy against the source, the backing file
 * through `lz4 -d`), so a fast but wrong filesystem never scores. */
#include "bench.h"
#include "sb.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define BN_FS_USAGE                                                                        \
    "usage: " BN_NAME " all|fs|write|read|small|random|size|rss|workloads [--results DIR] " \
    "[--rounds N] [--quick] [--mb N] [--block 64K|256K|1M|4M] [--synthetic] [--tree DIR] " \
    "[--tree-files N] [--workdir DIR] [--fio-secs S] [--fio-mb N] [--writers N] "         \
    "[--writer-mb N] [--mem-mb N] [--overhead-mb N] [--engine-mb N] [--wl-ops N] "        \
    "[--wl-edits N] [--wl-mb N] [--hole-gb N] [--wl-tree N] [--wl-rows LIST] "            \
    "[--fs-opts OPTS] [--passthrough-src FILE]"

#define BN_LINUX_TOP "linux-source-6.1"
#define BN_IO_CHUNK (128u * 1024u)

enum {
    BN_P_WRITE = 1, BN_P_READ = 2, BN_P_SMALL = 4, BN_P_RANDOM = 8, BN_P_SIZE = 16,
    BN_P_RSS = 32, BN_P_ENGINE = 64, BN_P_WL = 128, BN_P_FS = 63, BN_P_ALL = 255,
};

typedef struct {
    unsigned parts;
    const char *mode;
    const char *results;
    unsigned rounds, wl_rounds;        /* wl_rounds: the workloads part's */
    int quick;
    size_t mib;                        /* the large file */
    uint32_t block;
    int synthetic;                     /* generated data even when the Linux tar is there */
    const char *tree;                  /* a tree to copy instead of the Linux or generated one */
    unsigned tree_files;               /* generated tree */
    const char *workdir;
    unsigned fio_secs, fio_mib;
    unsigned writers, writer_mib, mem_mb, overhead_mb;
    size_t engine_mib;
    unsigned wl_ops, wl_edits, wl_mib, hole_gb, wl_tree;
    const char *wl_rows;
    const char *fs_opts;
    const char *pt_src;
} bn_fopts;

/* One rival of one row, its rounds. */
enum {
    BN_S_W_MNT, BN_S_W_LZ4, BN_S_W_PLAIN, BN_S_R_MNT, BN_S_R_LZ4, BN_S_R_FOREIGN, BN_S_R_PLAIN,
    BN_S_C_MNT, BN_S_C_PLAIN, BN_S_RW_MNT, BN_S_RW_PLAIN, BN_S_RR_MNT, BN_S_RR_PLAIN,
    BN_S_W100, BN_N_SERIES,
};

static const struct { const char *row, *rival, *unit; } bn_labels[BN_N_SERIES] = {
    [BN_S_W_MNT] = {"write", "cp into the mount", "MB/s"},
    [BN_S_W_LZ4] = {"write", "lz4 -1 into the backing fs", "MB/s"},
    [BN_S_W_PLAIN] = {"write", "cp into a plain directory", "MB/s"},
    [BN_S_R_MNT] = {"read", "cat from the mount, daemon cache cold", "MB/s"},
    [BN_S_R_LZ4] = {"read", "lz4 -d of the backing file", "MB/s"},
    [BN_S_R_FOREIGN] = {"read", "cat of the same bytes as a foreign file in the mount", "MB/s"},
    [BN_S_R_PLAIN] = {"read", "cat of a plain copy", "MB/s"},
    [BN_S_C_MNT] = {"small files", "cp -r into the mount", "files/s"},
    [BN_S_C_PLAIN] = {"small files", "cp -r into a plain directory", "files/s"},
    [BN_S_RW_MNT] = {"random 4K writes", "fio randwrite in the mount", "IOPS"},
    [BN_S_RW_PLAIN] = {"random 4K writes", "fio randwrite in a plain directory", "IOPS"},
    [BN_S_RR_MNT] = {"random 4K reads", "fio randread in the mount", "IOPS"},
    [BN_S_RR_PLAIN] = {"random 4K reads", "fio randread in a plain directory", "IOPS"},
    [BN_S_W100] = {"concurrent writers", "N processes writing N files into the mount", "MB/s"},
};

typedef struct {
    bn_fopts o;
    char cmdline[1024];
    char work[BN_PATH], src[BN_PATH], big[BN_PATH], tree[BN_PATH], plain[BN_PATH];
    char lz4dir[BN_PATH], daemon[BN_PATH], mkfs[BN_PATH];
    char big_what[512], tree_what[512];
    off_t big_len;
    unsigned long tree_files;
    unsigned long long tree_bytes;
    bn_mount m;
    bn_mount sm;                       /* small files: a store on a fresh ext4 */
    bn_loop fresh;                     /* that ext4, or the plain rival's, one at a time */
    char small_setup[512];             /* where the small-files rivals wrote, for fs.md */
    bn_series s[BN_N_SERIES];
    int stored_ok;                     /* a backing file written by the mount exists */
    off_t stored, lz4_size;            /* allocated (st_blocks * 512): a store's slots are
                                          sparse, so its apparent size says little */
    off_t stored_apparent, lz4_apparent;
    long rss_write_kib, rss_idle_kib, rss_writers_kib;
    const char *rss_skip;
    bn_engine_summary eng;
    bn_wl *wl;                         /* the workloads part, when it ran */
    double load[2];
    double t_start;
} bn_fs;

/* ---- options ---- */

static void bn_fs_help(void)
{
    printf(BN_FS_USAGE "\n"
           "Runs fpgalz4fs and its rivals side by side (daemon and mkfpgalz4fs from the\n"
           "directory of this program), several rounds each, and prints the medians, their\n"
           "ratios and each target of SPEC.md \"Performance\" (met / not met). Writes\n"
           "DIR/fs.md, DIR/fs.csv (every round), DIR/targets.csv and DIR/fs.png (gnuplot);\n"
           "`all` also runs the engine mode (DIR/engine.*). As root, with mkfs.ext4 and loop\n"
           "mounts, each small-files round of each rival copies onto a fresh ext4 (an image\n"
           "in the work directory); otherwise onto the work directory's filesystem.\n\n"
           "  --results DIR     where the results go (default ./bench-results)\n"
           "  --rounds N        timed rounds per rival (default 3)\n"
           "  --quick           small data, 1 round, short fio: a smoke test, not a measure\n"
           "  --mb N            the large file, MiB (default 256; quick 8)\n"
           "  --block SIZE      store block size (default 1M); lz4 -1 uses the same\n"
           "  --synthetic       generated data even when " BN_LINUX_TAR " exists\n"
           "  --tree DIR        copy DIR in the small-files row (default: the Linux tree,\n"
           "                    else a generated tree)\n"
           "  --tree-files N    files of the generated tree (default 20000; quick 300)\n"
           "  --workdir DIR     temporary files go under DIR (default $TMPDIR or /tmp)\n"
           "  --fio-secs S      seconds per fio run (default 5; quick 1)\n"
           "  --fio-mb N        size of the fio file, MiB (default 128; quick 8)\n"
           "  --writers N       concurrent writers of the memory row (default 100)\n"
           "  --writer-mb N     MiB each writer writes (default 4; quick 1)\n"
           "  --mem-mb N        mem_mb of the memory row's mount (default 64)\n"
           "  --overhead-mb N   fixed overhead allowed above mem_mb (default 64)\n"
           "  --engine-mb N     corpus of the engine part of `all` (default 256; quick 8)\n"
           "\nworkloads (also in `all`): SQLite one-row transactions (journal_mode DELETE and\n"
           "WAL), `>>` appends, fsync'd appends, fio 4K random writes (without fsync and with\n"
           "--fsync=32), small edits, a hole and the daemon's write_bytes for a 10-byte\n"
           "overwrite of the --mb file, on fpgalz4fs (engine=sw; --block and 64K), libfuse's\n"
           "passthrough_ll (compiled from libfuse3-dev's example) as it comes and mounted\n"
           "with fpgalz4fs's kernel settings (-o writeback,xattr,default_permissions: the\n"
           "requests the kernel sends fpgalz4fs, the floor of FUSE for them) and plain ext4;\n"
           "as root each run on a fresh ext4 (loop). Rounds: --rounds, else 2 (quick 1).\n"
           "  --wl-ops N        transactions and appends per run (default 2000; quick 50)\n"
           "  --wl-edits N      10-byte edits per run (default 100; quick 10)\n"
           "  --wl-mb N         the fio and edits file, MiB (default 32; quick 4)\n"
           "  --hole-gb N       size of the hole, GiB (default 100; quick 1)\n"
           "  --wl-tree N       files in the metadata rows' tree: cp -r, tar -x, find | xargs\n"
           "                    stat, du -s, ls -lR, git status, rm -r (default 2000, under\n"
           "                    passthrough_ll's one descriptor per inode; quick 100)\n"
           "  --wl-rows LIST    only these rows, comma-separated (default all): sqlite-delete,\n"
           "                    sqlite-wal, append, append-log, fsync-append,\n"
           "                    fsync-append-log, fio, fio-fsync32, edits, tree-cp, tree-tar,\n"
           "                    tree-stat, tree-du, tree-ls, tree-git, tree-rm, holes,\n"
           "                    write-bytes\n"
           "  --fs-opts OPTS    more -o options for every fpgalz4fs mount, e.g. noacl\n"
           "  --passthrough-src FILE  passthrough_ll.c (default: libfuse3-dev's example)\n");
}

static int bn_fs_uint(const char *arg, double lo, double hi, unsigned *out, const char *what)
{
    double v;
    if (bn_parse_num(arg, lo, hi, &v) || v != (double)(unsigned)v)
        return bn_usage_error(BN_FS_USAGE, what, arg);
    *out = (unsigned)v;
    return BN_CONTINUE;
}

static int bn_fs_opt(int c, const char *arg, bn_fopts *o)
{
    unsigned u = 0;
    int rc;
    switch (c) {
    case 'o': o->results = arg; return BN_CONTINUE;
    case 'r': return bn_fs_uint(arg, 1, BN_MAX_ROUNDS, &o->rounds, "bad --rounds (1..100)");
    case 'T': return bn_fs_uint(arg, 1, 1e6, &o->wl_ops, "bad --wl-ops (1..1000000)");
    case 'e': return bn_fs_uint(arg, 1, 1e6, &o->wl_edits, "bad --wl-edits (1..1000000)");
    case 'X': return bn_fs_uint(arg, 1, 1 << 16, &o->wl_mib, "bad --wl-mb (1..65536)");
    case 'H': return bn_fs_uint(arg, 1, 1 << 20, &o->hole_gb, "bad --hole-gb (1..1048576)");
    case 'Y': return bn_fs_uint(arg, 1, 1e6, &o->wl_tree, "bad --wl-tree (1..1000000)");
    case 'P': o->pt_src = arg; return BN_CONTINUE;
    case 'L':
        o->wl_rows = arg;
        return bn_wl_rows_valid(arg) ? BN_CONTINUE
                                     : bn_usage_error(BN_FS_USAGE, "bad --wl-rows", arg);
    case 'K':
        o->fs_opts = arg;
        return arg[0] && !strchr(arg, ' ') ? BN_CONTINUE
                                           : bn_usage_error(BN_FS_USAGE, "bad --fs-opts", arg);
    case 'q': o->quick = 1; return BN_CONTINUE;
    case 'm':
        rc = bn_fs_uint(arg, 1, 1 << 16, &u, "bad --mb (MiB, 1..65536)");
        o->mib = u;
        return rc;
    case 'b':
        o->block = sb_parse_block_size(arg);
        return o->block ? BN_CONTINUE
                        : bn_usage_error(BN_FS_USAGE, "bad block size (64K, 256K, 1M, 4M)", arg);
    case 's': o->synthetic = 1; return BN_CONTINUE;
    case 't': o->tree = arg; return BN_CONTINUE;
    case 'n': return bn_fs_uint(arg, 1, 1e6, &o->tree_files, "bad --tree-files (1..1000000)");
    case 'w': o->workdir = arg; return BN_CONTINUE;
    case 'F': return bn_fs_uint(arg, 1, 3600, &o->fio_secs, "bad --fio-secs (1..3600)");
    case 'M': return bn_fs_uint(arg, 1, 1 << 16, &o->fio_mib, "bad --fio-mb (1..65536)");
    case 'W': return bn_fs_uint(arg, 1, 1000, &o->writers, "bad --writers (1..1000)");
    case 'S': return bn_fs_uint(arg, 1, 1024, &o->writer_mib, "bad --writer-mb (1..1024)");
    case 'R': return bn_fs_uint(arg, 1, 1 << 20, &o->mem_mb, "bad --mem-mb");
    case 'O': return bn_fs_uint(arg, 0, 1 << 20, &o->overhead_mb, "bad --overhead-mb");
    case 'E':
        rc = bn_fs_uint(arg, 1, 1 << 16, &u, "bad --engine-mb (1..65536)");
        o->engine_mib = u;
        return rc;
    case 'h': bn_fs_help(); return BN_EXIT_OK;
    }
    return bn_usage_error(BN_FS_USAGE, "unknown or incomplete option", arg);
}

static unsigned bn_fs_parts(const char *mode)
{
    static const struct { const char *name; unsigned parts; } map[] = {
        {"all", BN_P_ALL}, {"fs", BN_P_FS}, {"write", BN_P_WRITE}, {"read", BN_P_READ},
        {"small", BN_P_SMALL}, {"random", BN_P_RANDOM}, {"size", BN_P_SIZE}, {"rss", BN_P_RSS},
        {"workloads", BN_P_WL},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(mode, map[i].name))
            return map[i].parts;
    return 0;
}

/* --quick changes only the defaults: what the command line names wins. */
static void bn_fs_defaults(bn_fopts *o)
{
    const char *tmp = getenv("TMPDIR");
    if (!o->mib)
        o->mib = o->quick ? 8 : 256;
    o->wl_rounds = o->rounds ? o->rounds : o->quick ? 1 : 2;
    if (!o->rounds)
        o->rounds = o->quick ? 1 : 3;
    if (!o->wl_ops)
        o->wl_ops = o->quick ? 50 : 2000;
    if (!o->wl_edits)
        o->wl_edits = o->quick ? 10 : 100;
    if (!o->wl_mib)
        o->wl_mib = o->quick ? 4 : 32;
    if (!o->hole_gb)
        o->hole_gb = o->quick ? 1 : 100;
    if (!o->wl_tree)
        o->wl_tree = o->quick ? 100 : 2000;
    if (!o->tree_files)
        o->tree_files = o->quick ? 300 : 20000;
    if (!o->fio_secs)
        o->fio_secs = o->quick ? 1 : 5;
    if (!o->fio_mib)
        o->fio_mib = o->quick ? 8 : 128;
    if (!o->writer_mib)
        o->writer_mib = o->quick ? 1 : 4;
    if (!o->engine_mib)
        o->engine_mib = o->quick ? 8 : 256;
    if (!o->workdir)
        o->workdir = tmp && *tmp ? tmp : "/tmp";
}

static int bn_fs_args(int argc, char **argv, bn_fopts *o)
{
    static const struct option longopts[] = {
        {"results", required_argument, NULL, 'o'}, {"out", required_argument, NULL, 'o'},
        {"rounds", required_argument, NULL, 'r'},  {"quick", no_argument, NULL, 'q'},
        {"mb", required_argument, NULL, 'm'},      {"block", required_argument, NULL, 'b'},
        {"synthetic", no_argument, NULL, 's'},     {"tree", required_argument, NULL, 't'},
        {"tree-files", required_argument, NULL, 'n'},
        {"workdir", required_argument, NULL, 'w'}, {"fio-secs", required_argument, NULL, 'F'},
        {"fio-mb", required_argument, NULL, 'M'},  {"writers", required_argument, NULL, 'W'},
        {"writer-mb", required_argument, NULL, 'S'}, {"mem-mb", required_argument, NULL, 'R'},
        {"overhead-mb", required_argument, NULL, 'O'},
        {"engine-mb", required_argument, NULL, 'E'}, {"help", no_argument, NULL, 'h'},
        {"wl-ops", required_argument, NULL, 'T'},  {"wl-edits", required_argument, NULL, 'e'},
        {"wl-mb", required_argument, NULL, 'X'},   {"hole-gb", required_argument, NULL, 'H'},
        {"passthrough-src", required_argument, NULL, 'P'},
        {"wl-tree", required_argument, NULL, 'Y'},
        {"wl-rows", required_argument, NULL, 'L'},
        {"fs-opts", required_argument, NULL, 'K'},
        {NULL, 0, NULL, 0},
    };
    *o = (bn_fopts){.mode = argv[0], .parts = bn_fs_parts(argv[0]), .block = 1u << 20,
                    .results = "bench-results", .writers = 100, .mem_mb = 64,
                    .overhead_mb = 64};
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = bn_fs_opt(c, c == '?' || c == ':' ? argv[optind - 1] : optarg, o);
        if (rc != BN_CONTINUE)
            return rc;
    }
    if (optind < argc)
        return bn_usage_error(BN_FS_USAGE, "unexpected argument", argv[optind]);
    bn_fs_defaults(o);
    return BN_CONTINUE;
}

/* ---- small helpers ---- */

/* Reads PATH to its end: puts it in the page cache before a timed command. */
static int bn_warm(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    static char buf[1u << 20];         /* read and dropped: no need for a fresh one */
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    close(fd);
    return 0;
}

/* Drops the page cache of one file (the file in the mount before a cold read). */
static void bn_drop(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* Times argv once and records it in series k (work: bytes or files per round). */
static int bn_timed(bn_fs *b, int k, char *const argv[], const char *out, double work,
                    double unit)
{
    bn_series *s = &b->s[k];
    double secs;
    int rc = bn_run(argv, out, &secs);
    if (rc != 0) {
        fprintf(stderr, BN_NAME ": %s: %s exited with status %d\n", s->rival, argv[0], rc);
        return -1;
    }
    s->secs[s->n] = secs;
    s->rate[s->n] = work / secs / unit;
    fprintf(stderr, "  %-16s %-52s round %u: %9.2f s %10.1f %s\n", s->row, s->rival, s->n + 1,
            secs, s->rate[s->n], s->unit);
    s->n++;
    return 0;
}

/* ---- preparation: work directory, corpus, tree, store ---- */


static int bn_make_workdir(bn_fs *b)
{
    snprintf(b->work, sizeof(b->work), "%s/fpgalz4fs-bench.XXXXXX", b->o.workdir);
    if (!mkdtemp(b->work))
        return bn_fail("cannot make a work directory under", b->o.workdir);
    bn_cleanup_workdir(b->work);
    bn_path(b->src, b->work, "src");
    bn_path(b->big, b->src, "big");
    bn_path(b->plain, b->work, "plain");
    bn_path(b->lz4dir, b->work, "lz4");
    bn_path(b->m.backing, b->work, "backing");
    bn_path(b->m.mnt, b->work, "mnt");
    bn_path(b->m.log, b->work, "daemon.log");
    const char *dirs[] = {b->src, b->plain, b->lz4dir, b->m.backing, b->m.mnt};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        if (bn_mkdirs(dirs[i]) != 0)
            return bn_fail(strerror(errno), dirs[i]);
    char *argv[] = {b->mkfs, "-b", (char *)sb_block_size_name(b->o.block), b->m.backing, NULL};
    return bn_run(argv, NULL, NULL) == 0 ? 0 : bn_fail("mkfpgalz4fs failed on", b->m.backing);
}

static int bn_use_linux(const bn_fs *b)
{
    return !b->o.synthetic && access(BN_LINUX_TAR, R_OK) == 0;
}

static int bn_prep_big(bn_fs *b)
{
    if (bn_make_source(b->big, b->o.mib, b->o.synthetic, b->big_what, sizeof(b->big_what)) != 0)
        return -1;
    b->big_len = bn_size(b->big);
    return b->big_len > 0 ? 0 : bn_fail("the large file came out empty", b->big);
}

/* nftw passes no context to its callback: the count lives here, only for bn_count_tree. */
static _Thread_local unsigned long bn_nftw_files;
static _Thread_local unsigned long long bn_nftw_bytes;

static int bn_count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (flag == FTW_F && S_ISREG(st->st_mode)) {
        bn_nftw_files++;
        bn_nftw_bytes += (unsigned long long)st->st_size;
    }
    return 0;
}

static void bn_count_tree(bn_fs *b)
{
    bn_nftw_files = 0, bn_nftw_bytes = 0;
    nftw(b->tree, bn_count_one, 64, FTW_PHYS);
    b->tree_files = bn_nftw_files, b->tree_bytes = bn_nftw_bytes;
}

static int bn_prep_tree(bn_fs *b)
{
    char cmd[2 * BN_PATH];
    if (b->o.tree) {
        snprintf(b->tree, sizeof(b->tree), "%s", b->o.tree);
        snprintf(b->tree_what, sizeof(b->tree_what), "the tree given with --tree");
    } else if (bn_use_linux(b) && !b->o.quick) {
        snprintf(cmd, sizeof(cmd), "xz -dc '%s' | tar -x -C '%s'", BN_LINUX_TAR, b->src);
        if (bn_sh(cmd) != 0)
            return -1;
        bn_path(b->tree, b->src, BN_LINUX_TOP);
        snprintf(b->tree_what, sizeof(b->tree_what), "the extracted Linux 6.1 source tree");
    } else {
        bn_path(b->tree, b->src, "tree");
        if (bn_tree_generate(b->tree, b->o.tree_files) != 0)
            return -1;
        snprintf(b->tree_what, sizeof(b->tree_what), "a generated tree of small text files "
                 "(50 per directory)");
    }
    bn_count_tree(b);
    if (!b->tree_files)
        return bn_fail("no files in the tree", b->tree);
    /* in the page cache before the first round, like the large file */
    char *argv[] = {"tar", "-cf", "/dev/null", b->tree, NULL};
    return bn_run(argv, NULL, NULL) == 0 ? 0 : bn_fail("cannot read the tree", b->tree);
}

/* Every fpgalz4fs mount of the driver gets --fs-opts, after the row's own options. */
static int bn_fs_mount_at(bn_fs *b, bn_mount *m, const char *opts)
{
    char all[1024];
    snprintf(all, sizeof(all), "%s%s%s", opts ? opts : "", opts && b->o.fs_opts ? "," : "",
             b->o.fs_opts ? b->o.fs_opts : "");
    return bn_mount_up(m, b->daemon, all[0] ? all : NULL);
}

static int bn_fs_mount(bn_fs *b, const char *opts)
{
    return bn_fs_mount_at(b, &b->m, opts);
}

/* cmp of two files, untimed. */
static int bn_same(const char *a, const char *z)
{
    char *argv[] = {"cmp", "-s", (char *)a, (char *)z, NULL};
    return bn_run(argv, NULL, NULL) == 0;
}

/* The backing file decodes with the stock lz4 to the source: the format's promise. */
static int bn_lz4_same(const char *backing_file, const char *src)
{
    char cmd[3 * BN_PATH];
    snprintf(cmd, sizeof(cmd), "lz4 -d -c '%s' 2>/dev/null | cmp -s - '%s'", backing_file,
             src);
    return bn_sh(cmd) == 0;
}

/* ---- write: cp into the mount, lz4 -1 into the backing fs, cp into a plain directory ---- */

static int bn_write_round(bn_fs *b, char *dst_mnt, char *dst_lz4, char *dst_plain)
{
    double len = (double)b->big_len;
    char *cp_mnt[] = {"cp", b->big, dst_mnt, NULL};
    char *lz4[] = {"lz4", "-1", (char *)bn_lz4_bsize(b->o.block), "-BX", "--no-frame-crc",
                   "-q", "-f", b->big, dst_lz4, NULL};
    char *cp_plain[] = {"cp", b->big, dst_plain, NULL};
    unlink(dst_mnt), unlink(dst_lz4), unlink(dst_plain);
    bn_warm(b->big);
    if (bn_timed(b, BN_S_W_MNT, cp_mnt, NULL, len, BN_MB) != 0)
        return -1;
    bn_warm(b->big);
    if (bn_timed(b, BN_S_W_LZ4, lz4, NULL, len, BN_MB) != 0)
        return -1;
    bn_warm(b->big);
    return bn_timed(b, BN_S_W_PLAIN, cp_plain, NULL, len, BN_MB);
}

static int bn_part_write(bn_fs *b)
{
    char dst_mnt[BN_PATH], dst_lz4[BN_PATH], dst_plain[BN_PATH], stored[BN_PATH];
    bn_path(dst_mnt, b->m.mnt, "big");
    bn_path(dst_lz4, b->lz4dir, "big.lz4");
    bn_path(dst_plain, b->plain, "big");
    bn_path(stored, b->m.backing, "big");
    if (bn_fs_mount(b, NULL) != 0)
        return -1;
    int rc = 0;
    for (unsigned r = 0; r < b->o.rounds && rc == 0; r++)
        rc = bn_write_round(b, dst_mnt, dst_lz4, dst_plain);
    if (rc == 0 && !bn_same(b->big, dst_mnt))
        rc = bn_fail("VERIFY FAILED: the copy in the mount differs from its source", dst_mnt);
    b->rss_write_kib = bn_vm_kib(b->m.pid, "VmHWM");
    if (bn_mount_down(&b->m) != 0 || rc != 0)
        return -1;
    if (!bn_lz4_same(stored, b->big))
        return bn_fail("VERIFY FAILED: lz4 -d of the backing file differs from the source",
                       stored);
    b->stored_ok = 1;
    b->stored = bn_allocated(stored), b->lz4_size = bn_allocated(dst_lz4);
    b->stored_apparent = bn_size(stored), b->lz4_apparent = bn_size(dst_lz4);
    return 0;
}

/* The store and the lz4 file the read and size parts need, when the write part did not run. */
static int bn_ensure_stored(bn_fs *b)
{
    if (b->stored_ok)
        return 0;
    unsigned rounds = b->o.rounds;
    b->o.rounds = 1;
    int rc = bn_part_write(b);
    b->o.rounds = rounds;
    for (int k = BN_S_W_MNT; k <= BN_S_W_PLAIN; k++)
        b->s[k].n = 0;                 /* preparation, not a measurement */
    return rc;
}

/* ---- read: daemon cache cold (a fresh mount each round, the file's page cache dropped),
 * backing files in the page cache for every rival alike ---- */

static int bn_read_round(bn_fs *b, char *in_mnt, char *stored, char *foreign_mnt,
                         char *foreign_backing, char *plain)
{
    double len = (double)b->big_len;
    char *cat_mnt[] = {"cat", in_mnt, NULL};
    char *lz4d[] = {"lz4", "-d", "-c", stored, NULL};
    char *cat_foreign[] = {"cat", foreign_mnt, NULL};
    char *cat_plain[] = {"cat", plain, NULL};
    if (bn_fs_mount(b, NULL) != 0)
        return -1;
    bn_warm(stored), bn_warm(foreign_backing), bn_warm(plain);
    bn_drop(in_mnt), bn_drop(foreign_mnt);
    int rc = bn_timed(b, BN_S_R_MNT, cat_mnt, NULL, len, BN_MB);
    rc = rc ? rc : bn_timed(b, BN_S_R_LZ4, lz4d, NULL, len, BN_MB);
    rc = rc ? rc : bn_timed(b, BN_S_R_FOREIGN, cat_foreign, NULL, len, BN_MB);
    rc = rc ? rc : bn_timed(b, BN_S_R_PLAIN, cat_plain, NULL, len, BN_MB);
    return bn_mount_down(&b->m) != 0 ? -1 : rc;
}

static int bn_part_read(bn_fs *b)
{
    char in_mnt[BN_PATH], stored[BN_PATH], foreign_mnt[BN_PATH], foreign_b[BN_PATH];
    char plain[BN_PATH];
    if (bn_ensure_stored(b) != 0)
        return -1;
    bn_path(in_mnt, b->m.mnt, "big");
    bn_path(stored, b->m.backing, "big");
    bn_path(foreign_mnt, b->m.mnt, "foreign");
    bn_path(foreign_b, b->m.backing, "foreign");
    bn_path(plain, b->plain, "big");
    char *cp_foreign[] = {"cp", b->big, foreign_b, NULL};
    char *cp_plain[] = {"cp", b->big, plain, NULL};
    if (bn_run(cp_foreign, NULL, NULL) != 0 || bn_run(cp_plain, NULL, NULL) != 0)
        return bn_fail("cannot copy the source file for the read rivals", b->big);
    int rc = 0;
    for (unsigned r = 0; r < b->o.rounds && rc == 0; r++)
        rc = bn_read_round(b, in_mnt, stored, foreign_mnt, foreign_b, plain);
    if (rc == 0 && bn_fs_mount(b, NULL) == 0) {
        if (!bn_same(b->big, in_mnt) || !bn_same(b->big, foreign_mnt))
            rc = bn_fail("VERIFY FAILED: a file read through the mount differs", in_mnt);
        bn_mount_down(&b->m);
    }
    unlink(foreign_b);
    return rc;
}

/* ---- small files: cp -r into a fresh mount and into a plain directory ----
 * Creating tens of thousands of inodes right after deleting as many slows ext4 down round
 * after round (its checks for recently deleted inodes), so on one shared filesystem the
 * later rounds measure the filesystem's history more than the rivals. As root, each round
 * of each rival gets an ext4 of its own, made just before and removed just after. */

/* nftw passes no context to its callback; the callback needs none here. */
static int bn_warm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (flag == FTW_F && S_ISREG(st->st_mode))
        bn_warm(path);
    return 0;
}

/* Reads every file of the tree: `tar -cf /dev/null` would not, GNU tar skips the data
 * when the archive is /dev/null. */
static void bn_warm_tree(const bn_fs *b)
{
    nftw(b->tree, bn_warm_one, 64, FTW_PHYS);
}

/* Two copies of the tree with every file's last block partly used, their inodes, and
 * room for the journal and ext4's metadata; sparse, so only what is written takes space. */
static unsigned long long bn_fresh_bytes(const bn_fs *b)
{
    unsigned long long need = 2 * (b->tree_bytes + 4096ull * b->tree_files) +
                              256ull * 2 * b->tree_files + 256ull * BN_MIB;
    unsigned long long least = 1024ull * BN_MIB;
    need = need < least ? least : need;
    return (need + BN_MIB - 1) / BN_MIB * BN_MIB;
}

/* Twice the files, and as many again for the directories and the store's own files. */
static unsigned long bn_fresh_inodes(const bn_fs *b)
{
    return 2 * b->tree_files + 16384;
}

static void bn_small_paths(bn_fs *b)
{
    bn_path(b->fresh.img, b->work, "fresh.img");
    bn_path(b->fresh.dir, b->work, "fresh");
    bn_path(b->sm.backing, b->fresh.dir, "store");
    bn_path(b->sm.mnt, b->work, "mnt-small");
    bn_path(b->sm.log, b->work, "daemon-small.log");
}

/* NULL when each round can have its own ext4; else why not. Makes and removes one. */
static const char *bn_fresh_probe(bn_fs *b)
{
    if (geteuid() != 0)
        return "not root";
    if (!bn_have("mkfs.ext4"))
        return "no mkfs.ext4 on PATH";
    if (bn_loop_up(&b->fresh, bn_fresh_bytes(b), bn_fresh_inodes(b)) != 0)
        return "mkfs.ext4 or the loop mount failed";
    return bn_loop_down(&b->fresh) == 0 ? NULL : "the loop mount did not unmount cleanly";
}

/* The mount rival of round r on its own ext4: a store formatted there, a daemon on it. */
static int bn_small_fresh_mnt(bn_fs *b, unsigned r)
{
    char dst[BN_PATH];
    bn_path(dst, b->sm.mnt, "tree");
    char *mkfs[] = {b->mkfs, "-b", (char *)sb_block_size_name(b->o.block), b->sm.backing,
                    NULL};
    char *cp[] = {"cp", "-r", b->tree, dst, NULL};
    char *diff[] = {"diff", "-rq", b->tree, dst, NULL};
    if (bn_loop_up(&b->fresh, bn_fresh_bytes(b), bn_fresh_inodes(b)) != 0)
        return bn_fail("cannot make a fresh ext4 in", b->fresh.img);
    int rc = 0;
    if (bn_mkdirs(b->sm.backing) != 0 || bn_run(mkfs, NULL, NULL) != 0)
        rc = bn_fail("mkfpgalz4fs failed on", b->sm.backing);
    else if (bn_fs_mount_at(b, &b->sm, NULL) != 0)
        rc = -1;
    if (rc == 0) {
        bn_warm_tree(b);
        rc = bn_timed(b, BN_S_C_MNT, cp, NULL, (double)b->tree_files, 1);
        if (rc == 0 && r == 0 && bn_run(diff, NULL, NULL) != 0)
            rc = bn_fail("VERIFY FAILED: the tree copied into the mount differs", dst);
        if (bn_mount_down(&b->sm) != 0)
            rc = -1;
    }
    return bn_loop_down(&b->fresh) != 0 ? -1 : rc;
}

static int bn_small_fresh_plain(bn_fs *b)
{
    char dst[BN_PATH];
    bn_path(dst, b->fresh.dir, "tree");
    char *cp[] = {"cp", "-r", b->tree, dst, NULL};
    if (bn_loop_up(&b->fresh, bn_fresh_bytes(b), bn_fresh_inodes(b)) != 0)
        return bn_fail("cannot make a fresh ext4 in", b->fresh.img);
    bn_warm_tree(b);
    int rc = bn_timed(b, BN_S_C_PLAIN, cp, NULL, (double)b->tree_files, 1);
    return bn_loop_down(&b->fresh) != 0 ? -1 : rc;
}

/* Without a fresh ext4: both rivals on the work directory's filesystem, emptied between
 * rounds. */
static int bn_small_shared(bn_fs *b)
{
    char dst_mnt[BN_PATH], dst_b[BN_PATH], dst_plain[BN_PATH];
    bn_path(dst_mnt, b->m.mnt, "tree");
    bn_path(dst_b, b->m.backing, "tree");
    bn_path(dst_plain, b->plain, "tree");
    char *cp_mnt[] = {"cp", "-r", b->tree, dst_mnt, NULL};
    char *cp_plain[] = {"cp", "-r", b->tree, dst_plain, NULL};
    char *diff[] = {"diff", "-rq", b->tree, dst_mnt, NULL};
    double files = (double)b->tree_files;
    int rc = 0;
    for (unsigned r = 0; r < b->o.rounds && rc == 0; r++) {
        bn_rm_rf(dst_b);               /* in the backing directory while unmounted: fast */
        if (bn_fs_mount(b, NULL) != 0)
            return -1;
        bn_warm_tree(b);
        rc = bn_timed(b, BN_S_C_MNT, cp_mnt, NULL, files, 1);
        if (rc == 0 && r == 0 && bn_run(diff, NULL, NULL) != 0)
            rc = bn_fail("VERIFY FAILED: the tree copied into the mount differs", dst_mnt);
        if (bn_mount_down(&b->m) != 0)
            rc = -1;
        bn_rm_rf(dst_plain);
        bn_warm_tree(b);
        rc = rc ? rc : bn_timed(b, BN_S_C_PLAIN, cp_plain, NULL, files, 1);
    }
    bn_rm_rf(dst_b), bn_rm_rf(dst_plain);
    return rc;
}

static int bn_part_small(bn_fs *b)
{
    bn_small_paths(b);
    if (bn_mkdirs(b->sm.mnt) != 0)
        return bn_fail(strerror(errno), b->sm.mnt);
    const char *why = bn_fresh_probe(b);
    if (why) {
        snprintf(b->small_setup, sizeof(b->small_setup), "the work directory's "
                 "filesystem, shared by both rivals and every round (no fresh ext4 per round: "
                 "%s), so later rounds pay for the inodes earlier ones deleted", why);
        fprintf(stderr, BN_NAME ": small files on %s\n", b->small_setup);
        return bn_small_shared(b);
    }
    snprintf(b->small_setup, sizeof(b->small_setup), "a fresh ext4 per round and rival (a "
             "sparse %llu MiB image in the work directory, `mkfs.ext4 -N %lu`, lazy init, "
             "`mount -o loop,noinit_itable`; the mount's store formatted on it), made before "
             "and removed after each timed copy", bn_fresh_bytes(b) / BN_MIB,
             bn_fresh_inodes(b));
    fprintf(stderr, BN_NAME ": small files on %s\n", b->small_setup);
    int rc = 0;
    for (unsigned r = 0; r < b->o.rounds && rc == 0; r++) {
        rc = bn_small_fresh_mnt(b, r);
        rc = rc ? rc : bn_small_fresh_plain(b);
    }
    return rc;
}

/* ---- random 4 KiB I/O with fio ---- */

/* IOPS from fio's terse output (version 3: read IOPS is field 8, write IOPS field 49). */
static double bn_fio_iops(const char *out, int write)
{
    FILE *f = fopen(out, "r");
    char line[8192];
    double iops = -1;
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "3;", 2) != 0)
            continue;
        char *save = NULL, *tok = strtok_r(line, ";", &save);
        for (int i = 1; tok && i <= (write ? 48 : 7); i++)
            tok = strtok_r(NULL, ";", &save);
        if (tok)
            iops = strtod(tok, NULL);
    }
    if (f)
        fclose(f);
    return iops;
}

/* --invalidate=0: fio would otherwise drop the file's page cache before each job, and the
 * plain file's reads would go to the disk while the mount's come from the daemon's cache;
 * kept cached, both sides measure CPU, as the other rows do. */
static int bn_fio_one(bn_fs *b, int k, const char *file, int write)
{
    char size[32], runtime[32], out[BN_PATH], fname[BN_PATH + 16];
    snprintf(size, sizeof(size), "--size=%um", b->o.fio_mib);
    snprintf(runtime, sizeof(runtime), "--runtime=%u", b->o.fio_secs);
    snprintf(fname, sizeof(fname), "--filename=%s", file);
    bn_path(out, b->work, "fio.out");
    char *argv[] = {"fio", "--name=bench", fname, size, "--bs=4k",
                    write ? "--rw=randwrite" : "--rw=randread", "--ioengine=psync",
                    runtime, "--time_based", "--buffer_compress_percentage=60",
                    "--refill_buffers", "--randrepeat=1", "--invalidate=0", "--minimal", NULL};
    bn_series *s = &b->s[k];
    double secs;
    if (bn_run(argv, out, &secs) != 0)
        return bn_fail("fio failed on", file);
    double iops = bn_fio_iops(out, write);
    if (iops < 0)
        return bn_fail("no IOPS in fio's output", out);
    s->secs[s->n] = secs, s->rate[s->n] = iops;
    fprintf(stderr, "  %-16s %-52s round %u: %10.0f IOPS\n", s->row, s->rival, s->n + 1, iops);
    s->n++;
    return 0;
}

static int bn_part_random(bn_fs *b)
{
    char in_mnt[BN_PATH], in_plain[BN_PATH];
    if (!bn_have("fio")) {
        for (int k = BN_S_RW_MNT; k <= BN_S_RR_PLAIN; k++)
            b->s[k].skip = "fio is not installed (apt-get install fio)";
        fprintf(stderr, BN_NAME ": fio is not installed: random I/O rows skipped\n");
        return 0;
    }
    bn_path(in_mnt, b->m.mnt, "fio.dat");
    bn_path(in_plain, b->plain, "fio.dat");
    if (bn_fs_mount(b, NULL) != 0)
        return -1;
    int rc = 0;
    for (unsigned r = 0; r < b->o.rounds && rc == 0; r++) {
        rc = bn_fio_one(b, BN_S_RW_MNT, in_mnt, 1);
        rc = rc ? rc : bn_fio_one(b, BN_S_RW_PLAIN, in_plain, 1);
        rc = rc ? rc : bn_fio_one(b, BN_S_RR_MNT, in_mnt, 0);
        rc = rc ? rc : bn_fio_one(b, BN_S_RR_PLAIN, in_plain, 0);
    }
    unlink(in_mnt), unlink(in_plain);
    return bn_mount_down(&b->m) != 0 ? -1 : rc;
}

/* ---- memory: the daemon's peak RSS with N writers at once ---- */

/* One writer: its own file, writer_mib MiB taken from the large file. */
static int bn_writer(const bn_fs *b, const uint8_t *src, unsigned i)
{
    char path[BN_PATH + 32];
    snprintf(path, sizeof(path), "%s/w/%04u", b->m.mnt, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 1;
    size_t want = (size_t)b->o.writer_mib * BN_MIB, len = (size_t)b->big_len;
    size_t at = (size_t)i * BN_MIB % len;
    for (size_t done = 0; done < want;) {
        size_t n = want - done < BN_IO_CHUNK ? want - done : BN_IO_CHUNK;
        if (n > len - at)
            n = len - at;
        ssize_t w = write(fd, src + at, n);
        if (w <= 0)
            return 1;
        done += (size_t)w, at = (at + (size_t)w) % len;
    }
    return close(fd) != 0;
}

static int bn_run_writers(bn_fs *b, const uint8_t *src)
{
    pid_t *kids = bn_alloc(b->o.writers * sizeof(*kids));
    int bad = 0;
    double t0 = bn_clock(CLOCK_MONOTONIC);
    for (unsigned i = 0; i < b->o.writers; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            /* the parent alone cleans up on a signal */
            signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
            signal(SIGPIPE, SIG_DFL);
            _exit(bn_writer(b, src, i));
        }
        bad |= kids[i] < 0;
    }
    for (unsigned i = 0; i < b->o.writers; i++) {
        int st = 1;
        if (kids[i] > 0)
            waitpid(kids[i], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    double secs = bn_clock(CLOCK_MONOTONIC) - t0;
    bn_series *s = &b->s[BN_S_W100];
    s->secs[s->n] = secs;
    s->rate[s->n++] = (double)b->o.writers * b->o.writer_mib * BN_MIB / secs / BN_MB;
    free(kids);
    return bad ? bn_fail("a concurrent writer failed", b->m.mnt) : 0;
}

static int bn_part_rss(bn_fs *b)
{
    char opts[64], wdir[BN_PATH], wdir_b[BN_PATH];
    int fd = open(b->big, O_RDONLY);
    const uint8_t *src = fd < 0 ? MAP_FAILED
                                : mmap(NULL, (size_t)b->big_len, PROT_READ, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    if (src == MAP_FAILED)
        return bn_fail("cannot map the large file", b->big);
    snprintf(opts, sizeof(opts), "mem_mb=%u", b->o.mem_mb);
    bn_path(wdir, b->m.mnt, "w");
    bn_path(wdir_b, b->m.backing, "w");
    int rc = bn_fs_mount(b, opts);
    if (rc == 0) {
        b->rss_idle_kib = bn_vm_kib(b->m.pid, "VmHWM");
        rc = mkdir(wdir, 0755) != 0 ? bn_fail(strerror(errno), wdir) : bn_run_writers(b, src);
        b->rss_writers_kib = bn_vm_kib(b->m.pid, "VmHWM");
        fprintf(stderr, "  %-16s %u writers x %u MiB, mem_mb=%u: peak RSS %ld KiB (idle %ld "
                "KiB)\n", "memory", b->o.writers, b->o.writer_mib, b->o.mem_mb,
                b->rss_writers_kib, b->rss_idle_kib);
        if (bn_mount_down(&b->m) != 0)
            rc = -1;
    }
    munmap((void *)src, (size_t)b->big_len);
    bn_rm_rf(wdir_b);
    return rc;
}

/* ---- workloads: bench_wl.c, on this run's work directory and large file ---- */

static int bn_part_wl(bn_fs *b)
{
    bn_wl_cfg c = {.work = b->work, .daemon = b->daemon, .mkfs = b->mkfs, .big = b->big,
                   .big_len = b->big_len, .pt_src = b->o.pt_src, .block = b->o.block,
                   .rounds = b->o.wl_rounds, .ops = b->o.wl_ops, .edits = b->o.wl_edits,
                   .file_mib = b->o.wl_mib, .fio_secs = b->o.fio_secs,
                   .hole_gb = b->o.hole_gb, .tree_files = b->o.wl_tree,
                   .rows = b->o.wl_rows, .fs_opts = b->o.fs_opts};
    return bn_wl_run(&c, &b->wl);
}

/* ---- engine (all only) ---- */

static int bn_part_engine(bn_fs *b)
{
    char mib[32], rounds[32];
    snprintf(mib, sizeof(mib), "%zu", b->o.engine_mib);
    snprintf(rounds, sizeof(rounds), "%u", b->o.rounds);
    char *argv[] = {"engine", "--out", (char *)b->o.results, "--mb", mib, "--rounds", rounds,
                    "--block", (char *)sb_block_size_name(b->o.block),
                    b->o.synthetic ? "--synthetic" : NULL, NULL};
    int argc = b->o.synthetic ? 10 : 9;
    fprintf(stderr, BN_NAME ": engine part\n");
    return bn_engine_run(argc, argv, &b->eng) == BN_EXIT_OK ? 0 : -1;
}

/* ---- the report ---- */

#define BN_N_TARGETS 8                 /* SPEC.md's; the workloads part adds its own */

static double bn_med(const bn_fs *b, int k)
{
    return b->s[k].n ? b->s[k].median : 0;
}

static const char *bn_need(const bn_fs *b, unsigned part, int k)
{
    if (!(b->o.parts & part))
        return "not run in this mode";
    if (k >= 0 && b->s[k].skip)
        return b->s[k].skip;
    return k >= 0 && !b->s[k].n ? "no rounds" : NULL;
}

static size_t bn_targets(const bn_fs *b, bn_target *t)
{
    double lim = b->o.mem_mb + b->o.overhead_mb;
    t[0] = (bn_target){"write: cp into the mount / lz4 -1 (throughput)",
                       bn_med(b, BN_S_W_MNT) / bn_med(b, BN_S_W_LZ4), 1.25, 0, "x",
                       bn_need(b, BN_P_WRITE, BN_S_W_MNT), "write vs lz4 -1"};
    t[1] = (bn_target){"read: cat from the mount, cache cold / lz4 -d",
                       bn_med(b, BN_S_R_MNT) / bn_med(b, BN_S_R_LZ4), 1.0, 0, "x",
                       bn_need(b, BN_P_READ, BN_S_R_MNT), "read vs lz4 -d"};
    t[2] = (bn_target){"read: cat from the mount / foreign file in the same mount",
                       bn_med(b, BN_S_R_MNT) / bn_med(b, BN_S_R_FOREIGN), 0.9, 0, "x",
                       bn_need(b, BN_P_READ, BN_S_R_FOREIGN), "read vs foreign"};
    t[3] = (bn_target){"small files: cp -r time, mount / plain directory",
                       bn_med(b, BN_S_C_PLAIN) / bn_med(b, BN_S_C_MNT), 1.5, 1, "x",
                       bn_need(b, BN_P_SMALL, BN_S_C_MNT), "cp -r vs plain"};
    t[4] = (bn_target){"stored size (allocated) above lz4 -1 at the same block size",
                       100.0 * ((double)b->stored / (double)b->lz4_size - 1), 1.0, 1, "%",
                       bn_need(b, BN_P_SIZE | BN_P_WRITE, -1), "size vs lz4 -1"};
    if (!t[4].skip && (!b->stored_ok || b->lz4_size <= 0))
        t[4].skip = "no stored file";
    t[5] = (bn_target){"memory: daemon peak RSS with concurrent writers (MiB)",
                       (double)b->rss_writers_kib / 1024.0, lim, 1, "MiB",
                       bn_need(b, BN_P_RSS, BN_S_W100), "peak RSS"};
    if (!t[5].skip && b->rss_writers_kib < 0)
        t[5].skip = "no /proc status for the daemon";
    t[6] = (bn_target){"engine: overlapped card pipeline, % of the modelled rate",
                       b->eng.overlap_pct, 95.0, 0, "%",
                       b->o.parts & BN_P_ENGINE ? (b->eng.valid ? NULL : "engine failed")
                                                : "engine part runs in `all` and `engine`",
                       "card overlap"};
    double best = b->eng.card_mbps > b->eng.sw1_mbps ? b->eng.card_mbps : b->eng.sw1_mbps;
    t[7] = (bn_target){"engine: card+software / the better alone (1 pool thread)",
                       best > 0 ? b->eng.mixed1_mbps / best : 0, 1.0, 0, "x", t[6].skip,
                       "card+sw vs alone"};
    if (!b->wl)
        return BN_N_TARGETS;
    return BN_N_TARGETS + bn_wl_targets(b->wl, t + BN_N_TARGETS,
                                        BN_MAX_TARGETS - BN_N_TARGETS);
}

static int bn_met(const bn_target *t)
{
    return t->at_most ? t->measured <= t->required : t->measured >= t->required;
}

static void bn_fmt_value(char *out, size_t cap, double v, const char *unit)
{
    if (!strcmp(unit, "x"))
        snprintf(out, cap, "%.2fx", v);
    else if (!strcmp(unit, "%"))
        snprintf(out, cap, "%.3f%%", v);
    else
        snprintf(out, cap, "%.1f %s", v, unit);
}

static void bn_targets_table(FILE *f, const bn_fs *b)
{
    bn_target t[BN_MAX_TARGETS];
    size_t n = bn_targets(b, t);
    fprintf(f, "| target (SPEC.md \"Performance\") | measured | target | verdict |\n"
               "| --- | ---: | ---: | --- |\n");
    for (size_t i = 0; i < n; i++) {
        char m[64], r[64];
        bn_fmt_value(m, sizeof(m), t[i].measured, t[i].unit);
        bn_fmt_value(r, sizeof(r), t[i].required, t[i].unit);
        if (t[i].skip)
            fprintf(f, "| %s | - | %s %s | skipped: %s |\n", t[i].name, t[i].at_most ? "<=" : ">=",
                    r, t[i].skip);
        else
            fprintf(f, "| %s | %s | %s %s | %s |\n", t[i].name, m, t[i].at_most ? "<=" : ">=", r,
                    bn_met(&t[i]) ? "met" : "not met");
    }
}

static void bn_rounds_text(char *out, size_t cap, const bn_series *s)
{
    size_t n = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < s->n && n + 16 < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%.2f s", i ? ", " : "", s->secs[i]);
}

static void bn_series_table(FILE *f, const bn_fs *b)
{
    fprintf(f, "| row | rival | median | unit | each round |\n| --- | --- | ---: | --- | --- |\n");
    for (int k = 0; k < BN_N_SERIES; k++) {
        const bn_series *s = &b->s[k];
        char each[512];
        if (s->skip) {
            fprintf(f, "| %s | %s | - | %s | skipped: %s |\n", s->row, s->rival, s->unit,
                    s->skip);
            continue;
        }
        if (!s->n)
            continue;
        bn_rounds_text(each, sizeof(each), s);
        fprintf(f, "| %s | %s | %.1f | %s | %s |\n", s->row, s->rival, s->median, s->unit, each);
    }
}

static void bn_machine(FILE *f)
{
    char line[512], model[256] = "unknown CPU";
    FILE *c = fopen("/proc/cpuinfo", "r");
    while (c && fgets(line, sizeof(line), c))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(model, sizeof(model), "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    if (c)
        fclose(c);
    struct utsname u;
    uname(&u);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    fprintf(f, "- machine: %ld cores (%s), %.1f GiB memory, Linux %s\n",
            sysconf(_SC_NPROCESSORS_ONLN), model,
            (double)pages * (double)psize / (1024.0 * 1024 * 1024), u.release);
}

static void bn_fs_report(FILE *f, const void *ctx)
{
    const bn_fs *b = ctx;
    fprintf(f, "## fpgalz4fs-bench %s\n\n", b->o.mode);
    bn_machine(f);
    fprintf(f, "- command: `%s`\n", b->cmdline);
    fprintf(f, "- load average (1 min) %.2f at start, %.2f at end; other work on the host "
               "shows in every number, so compare rows of this run only\n", b->load[0],
            b->load[1]);
    fprintf(f, "- large file: %s; tree: %s, %lu files, %llu bytes\n", b->big_what,
            b->tree_files ? b->tree_what : "-", b->tree_files, b->tree_bytes);
    fprintf(f, "- store block size %s, engine as the daemon's default; lz4 rivals: `lz4 -1 %s "
               "-BX --no-frame-crc` (the store's frame options), `lz4 -d -c`\n",
            sb_block_size_name(b->o.block), bn_lz4_bsize(b->o.block));
    fprintf(f, "- %u round(s) per rival, median; MB = 10^6 bytes; sources and backing files in "
               "the page cache for every rival (read once before each timed command)\n",
            b->o.rounds);
    fprintf(f, "- cold read: a fresh mount (new daemon) each round and POSIX_FADV_DONTNEED on "
               "the file in the mount; no drop_caches, so the backing files stay cached\n");
    fprintf(f, "- memory: VmHWM of the daemon; %u writers x %u MiB at once with mem_mb=%u "
               "(idle after mount: %.1f MiB; after the write rows with the default mem_mb: "
               "%.1f MiB)\n", b->o.writers, b->o.writer_mib, b->o.mem_mb,
            (double)b->rss_idle_kib / 1024, (double)b->rss_write_kib / 1024);
    fprintf(f, "- random I/O: fio, psync, 4 KiB blocks in a %u MiB file, %u s per run (time "
               "based), buffer_compress_percentage=60, refill_buffers, invalidate=0 (the file "
               "stays cached on both sides); writes first, then reads, in one mount\n",
            b->o.fio_mib, b->o.fio_secs);
    if (b->small_setup[0])
        fprintf(f, "- small files: `cp -r` of the tree onto %s; the tree read once before each "
                "copy; the first round's copy in the mount checked with `diff -rq`\n",
                b->small_setup);
    if (b->stored_ok)
        fprintf(f, "- stored size: %lld bytes allocated in the store (apparent %lld), %lld "
                   "allocated from lz4 -1 (apparent %lld)\n",
                (long long)b->stored, (long long)b->stored_apparent, (long long)b->lz4_size,
                (long long)b->lz4_apparent);
    fprintf(f, "\n### Side by side\n\n");
    bn_series_table(f, b);
    if (b->wl)
        bn_wl_report(f, b->wl);
    fprintf(f, "\n### Targets\n\n");
    bn_targets_table(f, b);
    fprintf(f, "\nRun time %.0f s.\n", bn_clock(CLOCK_MONOTONIC) - b->t_start);
}

static void bn_fs_csv(FILE *f, const void *ctx)
{
    const bn_fs *b = ctx;
    fprintf(f, "row,rival,round,seconds,rate,unit\n");   /* labels quoted: they hold commas */
    for (int k = 0; k < BN_N_SERIES; k++)
        for (unsigned i = 0; i < b->s[k].n; i++)
            fprintf(f, "\"%s\",\"%s\",%u,%.6f,%.3f,%s\n", b->s[k].row, b->s[k].rival, i + 1,
                    b->s[k].secs[i], b->s[k].rate[i], b->s[k].unit);
    if (b->wl)
        bn_wl_csv(f, b->wl);
}

static void bn_targets_csv(FILE *f, const void *ctx)
{
    bn_target t[BN_MAX_TARGETS];
    size_t n = bn_targets(ctx, t);
    fprintf(f, "target,measured,required,comparison,unit,verdict\n");
    for (size_t i = 0; i < n; i++) {
        if (t[i].skip)
            fprintf(f, "\"%s\",,%.4f,%s,%s,skipped\n", t[i].name, t[i].required,
                    t[i].at_most ? "<=" : ">=", t[i].unit);
        else
            fprintf(f, "\"%s\",%.4f,%.4f,%s,%s,%s\n", t[i].name, t[i].measured, t[i].required,
                    t[i].at_most ? "<=" : ">=", t[i].unit, bn_met(&t[i]) ? "met" : "not_met");
    }
}

/* One bar per target: the measured share of the target (1 = just met), capped at 3. */
static void bn_fs_gp(FILE *f, const void *ctx, const char *png)
{
    bn_target t[BN_MAX_TARGETS];
    size_t n = bn_targets(ctx, t);
    /* wider with the workloads' targets, their names turned to fit */
    fprintf(f, "set terminal png size %zu,%d\nset output '%s'\n"
               "set title 'fpgalz4fs against its targets (1.0 = target just met; higher "
               "is better; capped at 3)'\nset style data histograms\n"
               "set style fill solid 0.8 border -1\nset yrange [0:3]\nset grid ytics\n"
               "set xtics scale 0 font ',10'%s\nset bmargin %d\nset key off\n"
               "$d << EOD\n", n > BN_N_TARGETS ? 200 + 36 * n : 1024,
            n > BN_N_TARGETS ? 760 : 600, png, n > BN_N_TARGETS ? " rotate by -60" : "",
            n > BN_N_TARGETS ? 14 : 6);
    for (size_t i = 0; i < n; i++) {
        double share = 0;
        if (!t[i].skip && t[i].measured > 0)
            share = t[i].at_most ? t[i].required / t[i].measured : t[i].measured / t[i].required;
        else if (!t[i].skip)
            share = 3;                 /* 0 measured against an at-most target */
        fprintf(f, "\"%s\" %.4f\n", t[i].tag, share > 3 ? 3 : share);
    }
    fprintf(f, "EOD\nplot $d using 2:xtic(1), 1 with lines lw 2 lc rgb 'red'\n");
}

/* ---- the run ---- */

static void bn_cmdline(bn_fs *b, int argc, char **argv)
{
    size_t n = (size_t)snprintf(b->cmdline, sizeof(b->cmdline), BN_NAME);
    for (int i = 0; i < argc && n < sizeof(b->cmdline); i++)
        n += (size_t)snprintf(b->cmdline + n, sizeof(b->cmdline) - n, " %s", argv[i]);
}

/* The size row reuses the write rows' files; alone it makes them once, untimed. */
static int bn_part_write_size(bn_fs *b)
{
    return b->o.parts & BN_P_WRITE ? bn_part_write(b) : bn_ensure_stored(b);
}

static int bn_fs_parts_run(bn_fs *b)
{
    static const struct { unsigned part; int (*run)(bn_fs *); } steps[] = {
        {BN_P_WRITE | BN_P_SIZE, bn_part_write_size}, {BN_P_READ, bn_part_read},
        {BN_P_SMALL, bn_part_small},             {BN_P_RANDOM, bn_part_random},
        {BN_P_RSS, bn_part_rss},                 {BN_P_WL, bn_part_wl},
    };
    if (bn_prep_big(b) != 0 || ((b->o.parts & BN_P_SMALL) && bn_prep_tree(b) != 0))
        return -1;
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if ((b->o.parts & steps[i].part) && steps[i].run(b) != 0)
            return -1;
    for (int k = 0; k < BN_N_SERIES; k++) {
        double r[BN_MAX_ROUNDS];
        memcpy(r, b->s[k].rate, sizeof(r));
        b->s[k].median = bn_median(r, b->s[k].n);
    }
    return 0;
}

static int bn_fs_outputs(const bn_fs *b)
{
    if (bn_mkdirs(b->o.results) != 0) {
        fprintf(stderr, BN_NAME ": %s: %s\n", b->o.results, strerror(errno));
        return BN_EXIT_FAIL;
    }
    int rc = bn_write_out(b->o.results, "fs.md", b, bn_fs_report);
    rc |= bn_write_out(b->o.results, "fs.csv", b, bn_fs_csv);
    rc |= bn_write_out(b->o.results, "targets.csv", b, bn_targets_csv);
    rc |= bn_plot(b->o.results, "fs", b, bn_fs_gp);
    return rc ? BN_EXIT_FAIL : BN_EXIT_OK;
}

int bn_fs_main(int argc, char **argv)
{
    static bn_fs b;                    /* large (paths, rounds): not on the stack */
    int rc = bn_fs_args(argc, argv, &b.o);
    if (rc != BN_CONTINUE)
        return rc;
    b.t_start = bn_clock(CLOCK_MONOTONIC);
    bn_cmdline(&b, argc, argv);
    for (int k = 0; k < BN_N_SERIES; k++)
        b.s[k] = (bn_series){.row = bn_labels[k].row, .rival = bn_labels[k].rival,
                             .unit = bn_labels[k].unit};
    b.rss_idle_kib = b.rss_write_kib = b.rss_writers_kib = -1;
    if (getloadavg(&b.load[0], 1) != 1)
        b.load[0] = -1;
    bn_cleanup_init();
    if (bn_find_binaries(b.daemon, b.mkfs) != 0 || bn_make_workdir(&b) != 0)
        return BN_EXIT_FAIL;
    fprintf(stderr, BN_NAME ": work directory %s\n", b.work);
    rc = bn_fs_parts_run(&b);
    bn_cleanup_now();                  /* unmounted already; removes the work directory */
    if (rc == 0 && (b.o.parts & BN_P_ENGINE))
        rc = bn_part_engine(&b);
    if (rc != 0)
        return BN_EXIT_FAIL;
    if (getloadavg(&b.load[1], 1) != 1)
        b.load[1] = -1;
    bn_fs_report(stdout, &b);
    fflush(stdout);
    rc = bn_fs_outputs(&b);
    if (b.wl && bn_wl_failures(b.wl)) {
        fprintf(stderr, BN_NAME ": %d workload run(s) FAILED; see the tables\n",
                bn_wl_failures(b.wl));
        rc = BN_EXIT_FAIL;
    }
    free(b.wl);
    return rc;
}
