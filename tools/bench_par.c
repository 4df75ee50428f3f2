/* The `parallel` mode: N processes each write their own file into the mount at once, then N
 * read them back from a cold mount (the daemon and the kernel start with nothing cached),
 * for N = 1, 2, 4, 8, 16, on fpgalz4fs and on libfuse's passthrough_ll (the cost of FUSE
 * alone); aggregate MB/s side by side, and how much of the writes the card sat idle. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sb.h"

#define BN_PAR_USAGE "usage: " BN_NAME " parallel [--results DIR] [--rounds N] [--quick] " \
                     "[--mb N] [--block 64K|256K|1M|4M] [--engine NAME] [--max-procs N] "   \
                     "[--synthetic] [--workdir DIR] [--passthrough-src FILE]"
#define BN_PAR_COUNTS 5u               /* 1, 2, 4, 8, 16 processes */
#define BN_PAR_CHUNK (1u << 20)        /* each write(2) and read(2) */

enum { BN_PAR_FS = 0, BN_PAR_PT, BN_PAR_RIVALS };

typedef struct {
    const char *results, *workdir, *engine, *pt_src;
    unsigned rounds, max_procs;
    size_t mib;
    uint32_t block;
    int quick, synthetic;
} bn_popts;

typedef struct {
    double wr[BN_MAX_ROUNDS], rd[BN_MAX_ROUNDS];  /* aggregate MB/s of each round */
    double idle[BN_MAX_ROUNDS];                   /* card idle share of each write round */
    double fill[BN_MAX_ROUNDS];                   /* blocks a card run, each write round */
    unsigned n, n_idle;
} bn_pcell;

typedef struct {
    bn_popts o;
    char work[BN_PATH], src[BN_PATH], daemon[BN_PATH], mkfs[BN_PATH], pt[BN_PATH];
    char ptdir[BN_PATH], pt_src[BN_PATH], what[512], backend[64];
    const char *pt_skip;               /* why passthrough_ll is not a rival here */
    const uint8_t *data;               /* the source file, mapped */
    size_t len;
    unsigned counts[BN_PAR_COUNTS], n_counts;
    bn_pcell cell[BN_PAR_RIVALS][BN_PAR_COUNTS];
    bn_mount m;
    double t_start;
} bn_par;

static void bn_par_help(void)
{
    printf(BN_PAR_USAGE "\n"
           "N processes each write their own copy of a file into the mount at once, then N\n"
           "read them back from a freshly mounted (cold) store, for N = 1, 2, 4, 8, 16: on\n"
           "fpgalz4fs and on libfuse's passthrough_ll, compiled from libfuse3-dev's example.\n"
           "Prints aggregate MB/s (medians of the rounds), their ratios and the card's idle\n"
           "share during the writes; writes DIR/parallel.md and DIR/parallel.csv.\n\n"
           "  --results DIR     where the results go (default ./bench-results)\n"
           "  --rounds N        rounds per rival and count (default 3; quick 1)\n"
           "  --quick           4 MiB files, up to 4 processes, 1 round: a smoke test\n"
           "  --mb N            each process's file, MiB (default 64)\n"
           "  --block SIZE      store block size (default 1M)\n"
           "  --engine NAME     the daemon's engine= (default: the daemon's own choice)\n"
           "  --max-procs N     the largest N (default 16)\n"
           "  --synthetic       generated data even when the Linux source tar exists\n"
           "  --workdir DIR     temporary files go under DIR (default $TMPDIR or /tmp)\n"
           "  --passthrough-src FILE  passthrough_ll.c (default: libfuse3-dev's example)\n");
}

static int bn_par_num(const char *arg, double lo, double hi, double *v, const char *what)
{
    return bn_parse_num(arg, lo, hi, v) == 0 ? BN_CONTINUE
                                             : bn_usage_error(BN_PAR_USAGE, what, arg);
}

static int bn_par_opt(int c, const char *arg, bn_popts *o)
{
    double v = 0;
    int rc = BN_CONTINUE;
    switch (c) {
    case 'o': o->results = arg; break;
    case 'w': o->workdir = arg; break;
    case 'e': o->engine = arg; break;
    case 'P': o->pt_src = arg; break;
    case 'q': o->quick = 1; break;
    case 's': o->synthetic = 1; break;
    case 'r':
        rc = bn_par_num(arg, 1, BN_MAX_ROUNDS, &v, "bad --rounds");
        o->rounds = (unsigned)v;
        break;
    case 'm':
        rc = bn_par_num(arg, 1, 1 << 16, &v, "bad --mb");
        o->mib = (size_t)v;
        break;
    case 'n':
        rc = bn_par_num(arg, 1, 1024, &v, "bad --max-procs");
        o->max_procs = (unsigned)v;
        break;
    case 'b':
        o->block = sb_parse_block_size(arg);
        if (!o->block)
            rc = bn_usage_error(BN_PAR_USAGE, "bad block size (64K, 256K, 1M, 4M)", arg);
        break;
    case 'h': bn_par_help(); return BN_EXIT_OK;
    default: return bn_usage_error(BN_PAR_USAGE, "bad option", arg);
    }
    return rc;
}

static int bn_par_args(int argc, char **argv, bn_popts *o)
{
    static const struct option longopts[] = {
        {"results", required_argument, NULL, 'o'}, {"workdir", required_argument, NULL, 'w'},
        {"engine", required_argument, NULL, 'e'},
        {"passthrough-src", required_argument, NULL, 'P'},
        {"quick", no_argument, NULL, 'q'},         {"synthetic", no_argument, NULL, 's'},
        {"rounds", required_argument, NULL, 'r'},  {"mb", required_argument, NULL, 'm'},
        {"max-procs", required_argument, NULL, 'n'}, {"block", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    *o = (bn_popts){.results = "bench-results", .block = 1u << 20};
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = bn_par_opt(c, c == '?' || c == ':' ? argv[optind - 1] : optarg, o);
        if (rc != BN_CONTINUE)
            return rc;
    }
    if (optind < argc)
        return bn_usage_error(BN_PAR_USAGE, "unexpected argument", argv[optind]);
    if (!o->rounds)
        o->rounds = o->quick ? 1 : 3;
    if (!o->mib)
        o->mib = o->quick ? 4 : 64;
    if (!o->max_procs)
        o->max_procs = o->quick ? 4 : 16;
    if (!o->workdir)
        o->workdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    return BN_CONTINUE;
}

/* ---- preparation ---- */

/* The work directory, the source file (mapped: every writer writes from the same pages) and
 * passthrough_ll. */
static int bn_par_prepare(bn_par *b)
{
    snprintf(b->work, sizeof(b->work), "%s/fpgalz4fs-bench.XXXXXX", b->o.workdir);
    if (!mkdtemp(b->work))
        return bn_fail("cannot make a work directory under", b->o.workdir);
    bn_cleanup_workdir(b->work);
    bn_path(b->src, b->work, "src");
    bn_path(b->m.backing, b->work, "backing");
    bn_path(b->m.mnt, b->work, "mnt");
    bn_path(b->ptdir, b->work, "pt-backing");
    if (bn_mkdirs(b->m.mnt) != 0 || bn_mkdirs(b->ptdir) != 0)
        return bn_fail(strerror(errno), b->work);
    if (bn_make_source(b->src, b->o.mib, b->o.synthetic, b->what, sizeof(b->what)) != 0)
        return -1;
    int fd = open(b->src, O_RDONLY);
    b->len = (size_t)bn_size(b->src);
    void *p = fd < 0 || b->len == 0
                  ? MAP_FAILED
                  : mmap(NULL, b->len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (fd >= 0)
        close(fd);
    if (p == MAP_FAILED)
        return bn_fail("cannot map the source file", b->src);
    b->data = p;
    b->pt_skip = bn_pt_build(b->work, b->o.pt_src, b->pt, b->pt_src);
    for (unsigned n = 1; n <= b->o.max_procs && b->n_counts < BN_PAR_COUNTS; n *= 2)
        b->counts[b->n_counts++] = n;
    return 0;
}

/* ---- mounts ---- */

static int bn_par_up(bn_par *b, int rival, int fresh)
{
    char opts[BN_PATH + 64];
    if (rival == BN_PAR_PT) {
        snprintf(opts, sizeof(opts), "source=%s", b->ptdir);
        bn_path(b->m.log, b->work, "passthrough_ll.log");
        return bn_mount_up_rival(&b->m, b->pt, opts);
    }
    if (fresh) {
        char *argv[] = {b->mkfs, "-b", (char *)sb_block_size_name(b->o.block), b->m.backing, NULL};
        if (bn_rm_rf(b->m.backing) != 0 || bn_mkdirs(b->m.backing) != 0 ||
            bn_run(argv, NULL, NULL) != 0)
            return bn_fail("mkfpgalz4fs failed on", b->m.backing);
    }
    bn_path(b->m.log, b->work, "daemon.log");
    snprintf(opts, sizeof(opts), "%s%s", b->o.engine ? "engine=" : "",
             b->o.engine ? b->o.engine : "");
    return bn_mount_up(&b->m, b->daemon, opts);
}

/* The mount's user.fpgalz4fs.stats into text; 0, or -1 when there is none (passthrough_ll). */
static int bn_par_stats(const bn_par *b, char *text, size_t cap)
{
    ssize_t n = getxattr(b->m.mnt, "user.fpgalz4fs.stats", text, cap - 1);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    return 0;
}

/* One counter of the stats; -1 if there is none. */
static double bn_par_stat(const bn_par *b, const char *key)
{
    char text[8192], want[64];
    snprintf(want, sizeof(want), "\n%s=", key);
    char *v = bn_par_stats(b, text, sizeof(text)) == 0 ? strstr(text, want) : NULL;
    return v ? strtod(v + strlen(want), NULL) : -1;
}

/* The engine the daemon reports it runs ("sw", "cuda", ...), into b->backend. */
static void bn_par_backend(bn_par *b)
{
    char text[8192];
    char *v = bn_par_stats(b, text, sizeof(text)) == 0 ? strstr(text, "backend=") : NULL;
    if (v)
        snprintf(b->backend, sizeof(b->backend), "%.*s", (int)strcspn(v + 8, "\n"), v + 8);
}

/* ---- the processes ---- */

static int bn_par_child(const bn_par *b, unsigned i, int write_it)
{
    char path[BN_PATH + 16];
    snprintf(path, sizeof(path), "%s/f%02u", b->m.mnt, i);
    int fd = open(path, write_it ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
    if (fd < 0)
        return 1;
    static uint8_t buf[BN_PAR_CHUNK];
    size_t done = 0;
    while (done < b->len) {
        size_t n = b->len - done < BN_PAR_CHUNK ? b->len - done : BN_PAR_CHUNK;
        ssize_t r = write_it ? write(fd, b->data + done, n) : read(fd, buf, n);
        if (r <= 0)
            return 1;
        done += (size_t)r;
    }
    return close(fd) != 0;
}

/* N processes at once; the aggregate MB/s, or -1 when one failed. */
static double bn_par_run(const bn_par *b, unsigned n, int write_it)
{
    pid_t kids[1024];
    int bad = 0;
    double t0 = bn_clock(CLOCK_MONOTONIC);
    for (unsigned i = 0; i < n; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
            _exit(bn_par_child(b, i, write_it));
        }
        bad |= kids[i] < 0;
    }
    for (unsigned i = 0; i < n; i++) {
        int st = 1;
        if (kids[i] > 0)
            waitpid(kids[i], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    double secs = bn_clock(CLOCK_MONOTONIC) - t0;
    return bad ? -1 : (double)n * (double)b->len / secs / BN_MB;
}

/* The last file written reads back as the source (untimed). */
static int bn_par_verify(const bn_par *b, unsigned n)
{
    char path[BN_PATH + 16];
    snprintf(path, sizeof(path), "%s/f%02u", b->m.mnt, n - 1);
    int fd = open(path, O_RDONLY);
    uint8_t *got = bn_alloc(b->len);
    size_t done = 0;
    ssize_t r = 1;
    while (fd >= 0 && done < b->len && (r = read(fd, got + done, b->len - done)) > 0)
        done += (size_t)r;
    int same = fd >= 0 && done == b->len && memcmp(got, b->data, b->len) == 0;
    if (fd >= 0)
        close(fd);
    free(got);
    return same ? 0 : bn_fail("VERIFY FAILED: a file written in parallel reads back wrong", path);
}

/* ---- the rounds ---- */

static int bn_par_clear_pt(bn_par *b)
{
    return bn_rm_rf(b->ptdir) == 0 && bn_mkdirs(b->ptdir) == 0 ? 0
                                                               : bn_fail("cannot empty", b->ptdir);
}

/* One round of N writers, then N readers from a cold mount, on one rival. */
static int bn_par_round(bn_par *b, int rival, unsigned k)
{
    unsigned n = b->counts[k];
    bn_pcell *c = &b->cell[rival][k];
    if (rival == BN_PAR_PT && bn_par_clear_pt(b) != 0)
        return -1;
    if (bn_par_up(b, rival, 1) != 0)
        return bn_fail("cannot mount", b->m.mnt);
    double idle0 = bn_par_stat(b, "card_idle_us");
    double runs0 = bn_par_stat(b, "bricks_card"), blocks0 = bn_par_stat(b, "blocks_card");
    double wr = bn_par_run(b, n, 1);
    double idle1 = bn_par_stat(b, "card_idle_us");
    double runs1 = bn_par_stat(b, "bricks_card"), blocks1 = bn_par_stat(b, "blocks_card");
    if (rival == BN_PAR_FS)
        bn_par_backend(b);
    if (bn_mount_down(&b->m) != 0 || wr < 0)
        return bn_fail(wr < 0 ? "a writer failed in" : "cannot unmount", b->m.mnt);
    if (rival == BN_PAR_FS && idle0 >= 0 && idle1 >= 0 && strcmp(b->backend, "sw") != 0) {
        c->fill[c->n_idle] = runs1 > runs0 && blocks0 >= 0 ? (blocks1 - blocks0) / (runs1 - runs0)
                                                          : -1;
        c->idle[c->n_idle++] = (idle1 - idle0) / 1e6 / ((double)n * (double)b->len / wr / BN_MB);
    }
    if (bn_par_up(b, rival, 0) != 0)
        return bn_fail("cannot mount again", b->m.mnt);
    double rd = bn_par_run(b, n, 0);
    int bad = rd < 0 || (c->n == 0 && bn_par_verify(b, n) != 0);
    if (bn_mount_down(&b->m) != 0 || bad)
        return bn_fail(rd < 0 ? "a reader failed in" : "cannot finish the reads in", b->m.mnt);
    c->wr[c->n] = wr, c->rd[c->n++] = rd;
    fprintf(stderr, "  %-16s %2u processes, round %u: write %8.1f MB/s, cold read %8.1f MB/s\n",
            rival == BN_PAR_FS ? "fpgalz4fs" : "passthrough_ll", n, c->n, wr, rd);
    return 0;
}

static int bn_par_measure(bn_par *b)
{
    for (int rival = 0; rival < BN_PAR_RIVALS; rival++) {
        if (rival == BN_PAR_PT && b->pt_skip) {
            fprintf(stderr, BN_NAME ": passthrough_ll skipped: %s\n", b->pt_skip);
            continue;
        }
        for (unsigned k = 0; k < b->n_counts; k++)
            for (unsigned r = 0; r < b->o.rounds; r++)
                if (bn_par_round(b, rival, k) != 0)
                    return -1;
    }
    return 0;
}

/* ---- the report ---- */

static double bn_par_med(const double *v, unsigned n)
{
    double tmp[BN_MAX_ROUNDS];
    memcpy(tmp, v, n * sizeof(*v));
    return n ? bn_median(tmp, n) : -1;
}

static void bn_par_cell(FILE *f, double v, const char *fmt)
{
    if (v < 0)
        fprintf(f, " - |");
    else
        fprintf(f, fmt, v);
}

static void bn_par_report(FILE *f, const void *ctx)
{
    const bn_par *b = ctx;
    fprintf(f, "## Parallel writers and cold readers\n\n- data: each process its own copy of "
               "%s (%zu bytes); %u round(s), medians\n- fpgalz4fs: %s blocks, engine %s "
               "(backend reported: %s)\n- passthrough_ll: %s\n- a read round runs on a fresh "
               "mount of what the write round stored\n\n",
            b->what, b->len, b->o.rounds, sb_block_size_name(b->o.block),
            b->o.engine ? b->o.engine : "the daemon's default", b->backend[0] ? b->backend : "-",
            b->pt_skip ? b->pt_skip : "libfuse3-dev's example, compiled by this driver");
    fprintf(f, "| processes | write fpgalz4fs MB/s | write passthrough_ll | ratio | cold read "
               "fpgalz4fs MB/s | cold read passthrough_ll | ratio | card idle during writes | "
               "blocks a card run |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
               "---: |\n");
    for (unsigned k = 0; k < b->n_counts; k++) {
        const bn_pcell *c = &b->cell[BN_PAR_FS][k], *p = &b->cell[BN_PAR_PT][k];
        double fw = bn_par_med(c->wr, c->n), pw = bn_par_med(p->wr, p->n);
        double fr = bn_par_med(c->rd, c->n), pr = bn_par_med(p->rd, p->n);
        fprintf(f, "| %u |", b->counts[k]);
        bn_par_cell(f, fw, " %.1f |");
        bn_par_cell(f, pw, " %.1f |");
        bn_par_cell(f, fw >= 0 && pw > 0 ? fw / pw : -1, " %.2fx |");
        bn_par_cell(f, fr, " %.1f |");
        bn_par_cell(f, pr, " %.1f |");
        bn_par_cell(f, fr >= 0 && pr > 0 ? fr / pr : -1, " %.2fx |");
        bn_par_cell(f, c->n_idle ? 100 * bn_par_med(c->idle, c->n_idle) : -1, " %.0f %% |");
        bn_par_cell(f, c->n_idle ? bn_par_med(c->fill, c->n_idle) : -1, " %.1f |");
        fprintf(f, "\n");
    }
    fprintf(f, "\nThe card's idle share is its idle time (card_idle_us, summed over compute "
               "units) over the round's time, and its runs' size the card's blocks over its "
               "runs in the round (bricks_card; `card_fill_us`); `-` with the software "
               "engine.\nRun time %.0f s.\n",
            bn_clock(CLOCK_MONOTONIC) - b->t_start);
}

static void bn_par_csv(FILE *f, const void *ctx)
{
    const bn_par *b = ctx;
    fprintf(f, "rival,processes,round,write_mbps,cold_read_mbps\n");
    for (int rival = 0; rival < BN_PAR_RIVALS; rival++)
        for (unsigned k = 0; k < b->n_counts; k++)
            for (unsigned r = 0; r < b->cell[rival][k].n; r++)
                fprintf(f, "%s,%u,%u,%.1f,%.1f\n",
                        rival == BN_PAR_FS ? "fpgalz4fs" : "passthrough_ll", b->counts[k],
                        r + 1, b->cell[rival][k].wr[r], b->cell[rival][k].rd[r]);
}

int bn_par_main(int argc, char **argv)
{
    bn_par *b = bn_alloc(sizeof(*b));
    memset(b, 0, sizeof(*b));
    int rc = bn_par_args(argc, argv, &b->o);
    if (rc != BN_CONTINUE) {
        free(b);
        return rc;
    }
    b->t_start = bn_clock(CLOCK_MONOTONIC);
    bn_cleanup_init();
    rc = bn_find_binaries(b->daemon, b->mkfs) == 0 && bn_par_prepare(b) == 0 &&
                 bn_par_measure(b) == 0
             ? 0
             : -1;
    if (rc == 0) {
        bn_par_report(stdout, b);
        rc = bn_mkdirs(b->o.results) != 0 ||
             bn_write_out(b->o.results, "parallel.md", b, bn_par_report) != 0 ||
             bn_write_out(b->o.results, "parallel.csv", b, bn_par_csv) != 0;
    }
    bn_cleanup_now();
    free(b);
    return rc == 0 ? BN_EXIT_OK : BN_EXIT_FAIL;
}
