/* bench_engine: the `engine` mode. It drives the compression engine through its public
 * interface only (eng.h), on the same corpus for every configuration: software alone, the
 * emulated card alone with 1..4 buffer sets (1 = no overlap), and card plus software. Every
 * round's output is decoded and compared with the input outside the timed region, so a fast
 * but wrong engine never scores. Rates are MB/s of input with MB = 10^6 bytes, the unit of
 * emu_card_mbps, so that a card row's percentage of the modelled rate is a plain ratio. */
#include "bench.h"
#include "eng.h"
#include "sb.h"

#include <errno.h>
#include <getopt.h>
#include <lz4.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BN_ENGINE_USAGE                                                                    \
    "usage: " BN_NAME " engine [--mb N] [--block 64K|256K|1M|4M] [--rounds R] "            \
    "[--corpus FILE|--synthetic] [--out DIR] [--card-mbps X] [--pcie-mbps X] [--writers N]"

#define BN_BRICK_JOBS 8u               /* one xilLz4Compress run: a writer's slice */
#define BN_TARGET_PCT 95.0             /* the overlapped pipeline's share of the model */
#define BN_MAX_CONFS 8u
#define BN_MAX_ROWS (2u * BN_MAX_CONFS)
#define BN_POISON 64u                  /* bytes of each output overwritten before a round */

/* ---- engine mode: options ---- */

typedef struct {
    size_t mib;                        /* corpus size, MiB */
    int mib_given;                     /* --mb was given: it also caps --corpus FILE */
    uint32_t block;                    /* block size of every job */
    unsigned rounds;                   /* timed rounds per configuration */
    unsigned writers;                  /* submitting threads in the many-files variant */
    double card_mbps, pcie_mbps;       /* the emulated card's model */
    const char *corpus_file;           /* NULL: Linux tar, else generated */
    int synthetic;                     /* generate even when the Linux tar is there */
    const char *out_dir;
} bn_eopts;

static void bn_engine_help(void)
{
    printf(BN_ENGINE_USAGE "\n"
           "Times eng_compress on one corpus: software alone (all cores, 1 thread), the\n"
           "emulated card alone with bufsets 1 (no overlap) to 4, and card plus software;\n"
           "each once as one call with every job and once with N writer threads submitting\n"
           "brick-sized slices. Prints the median MB/s (10^6 B/s of input) and writes\n"
           "DIR/engine.md, DIR/engine.csv and, with gnuplot, DIR/engine.png.\n\n"
           "  --mb N          corpus size in MiB (default 256)\n"
           "  --block SIZE    block size: 64K, 256K, 1M (default) or 4M\n"
           "  --rounds R      timed rounds per configuration (default 3)\n"
           "  --corpus FILE   use FILE (all of it, or its first N MiB with --mb)\n"
           "  --synthetic     generated text even when " BN_LINUX_TAR " exists\n"
           "  --out DIR       where the results go (default ./bench-results)\n"
           "  --card-mbps X   emulated card's modelled kernel rate, MB/s (default 200)\n"
           "  --pcie-mbps X   emulated card's modelled PCIe rate each way (default 10000)\n"
           "  --writers N     submitting threads in the many-files variant (default 8)\n"
           "  -h, --help      show this help\n");
}

static int bn_engine_opt(int c, const char *arg, bn_eopts *o)
{
    double v;
    switch (c) {
    case 'm':
        if (bn_parse_num(arg, 1, 1 << 20, &v) || v != (double)(size_t)v)
            return bn_usage_error(BN_ENGINE_USAGE, "bad --mb (a whole number of MiB)", arg);
        o->mib = (size_t)v, o->mib_given = 1;
        return BN_CONTINUE;
    case 'b':
        o->block = sb_parse_block_size(arg);
        if (!o->block)
            return bn_usage_error(BN_ENGINE_USAGE, "bad block size (64K, 256K, 1M, 4M)", arg);
        return BN_CONTINUE;
    case 'r':
        if (bn_parse_num(arg, 1, BN_MAX_ROUNDS, &v) || v != (double)(unsigned)v)
            return bn_usage_error(BN_ENGINE_USAGE, "bad --rounds (1..100)", arg);
        o->rounds = (unsigned)v;
        return BN_CONTINUE;
    case 'w':
        if (bn_parse_num(arg, 1, 256, &v) || v != (double)(unsigned)v)
            return bn_usage_error(BN_ENGINE_USAGE, "bad --writers (1..256)", arg);
        o->writers = (unsigned)v;
        return BN_CONTINUE;
    case 'c':
        if (bn_parse_num(arg, 1, 1e6, &o->card_mbps))
            return bn_usage_error(BN_ENGINE_USAGE, "bad --card-mbps", arg);
        return BN_CONTINUE;
    case 'p':
        if (bn_parse_num(arg, 1, 1e7, &o->pcie_mbps))
            return bn_usage_error(BN_ENGINE_USAGE, "bad --pcie-mbps", arg);
        return BN_CONTINUE;
    case 'f': o->corpus_file = arg; return BN_CONTINUE;
    case 's': o->synthetic = 1; return BN_CONTINUE;
    case 'o': o->out_dir = arg; return BN_CONTINUE;
    case 'h': bn_engine_help(); return BN_EXIT_OK;
    }
    return bn_usage_error(BN_ENGINE_USAGE, "unknown or incomplete option", arg);
}

/* Returns BN_CONTINUE when the command line asks for a run, else the exit status. */
static int bn_engine_args(int argc, char **argv, bn_eopts *o)
{
    static const struct option longopts[] = {
        {"mb", required_argument, NULL, 'm'},        {"block", required_argument, NULL, 'b'},
        {"rounds", required_argument, NULL, 'r'},    {"corpus", required_argument, NULL, 'f'},
        {"synthetic", no_argument, NULL, 's'},       {"out", required_argument, NULL, 'o'},
        {"card-mbps", required_argument, NULL, 'c'}, {"pcie-mbps", required_argument, NULL, 'p'},
        {"writers", required_argument, NULL, 'w'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (bn_eopts){.mib = 256, .block = 1u << 20, .rounds = 3, .writers = 8,
                    .card_mbps = 200, .pcie_mbps = 10000, .out_dir = "bench-results"};
    opterr = 0;   /* our own messages, with the usage line */
    optind = 0;   /* `all` parses again after another mode: start over */
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = bn_engine_opt(c, c == '?' || c == ':' ? argv[optind - 1] : optarg, o);
        if (rc != BN_CONTINUE)
            return rc;
    }
    if (optind < argc)
        return bn_usage_error(BN_ENGINE_USAGE, "unexpected argument", argv[optind]);
    if (o->corpus_file && o->synthetic)
        return bn_usage_error(BN_ENGINE_USAGE, "--corpus and --synthetic exclude each other",
                              NULL);
    return BN_CONTINUE;
}

/* ---- engine mode: jobs, one round, verification ---- */

typedef struct {
    const char *label;                 /* what the table calls it */
    eng_config cfg;
    int uses_card;
} bn_conf;

enum { BN_SW_ALL, BN_SW_ONE, BN_CARD1, BN_CARD2, BN_CARD3, BN_CARD4, BN_MIXED, BN_MIXED_ONE,
       BN_N_CONFS };

typedef struct {
    double secs, cpu_secs;             /* wall and process CPU time of the timed region */
    double ratio;                      /* input bytes / bytes kept */
    eng_stats d;                       /* counters of this round alone */
} bn_round;

typedef struct {
    const bn_conf *conf;
    unsigned writers;                  /* 0: one call with every job */
    double mbps, cpu_pct, ratio, idle_pct;
    eng_stats d;                       /* counters of the median round */
} bn_row;

typedef struct {
    bn_eopts o;
    bn_corpus corpus;
    unsigned cores;
    eng_job *jobs;
    size_t n_jobs;
    uint8_t *scratch;                  /* one block, for decoding */
    bn_conf confs[BN_N_CONFS];
    bn_row rows[BN_MAX_ROWS];
    size_t n_rows;
    double load[2];                    /* 1-minute load average at start and end: others'
                                          work on the host shows in every number */
} bn_bench;

static void bn_make_jobs(bn_bench *b)
{
    uint32_t bs = b->o.block;
    b->n_jobs = (b->corpus.len + bs - 1) / bs;
    b->jobs = bn_alloc(b->n_jobs * sizeof(*b->jobs));
    size_t out_bytes = 0;
    for (size_t i = 0; i < b->n_jobs; i++)
        out_bytes += eng_bound(i + 1 < b->n_jobs ? bs : (uint32_t)(b->corpus.len - i * bs));
    uint8_t *out = bn_alloc(out_bytes);
    memset(out, 0, out_bytes);   /* touch every page now: no page faults in the timed region */
    for (size_t i = 0; i < b->n_jobs; i++) {
        eng_job *j = &b->jobs[i];
        *j = (eng_job){0};
        j->src = b->corpus.data + i * bs;
        j->len = i + 1 < b->n_jobs ? bs : (uint32_t)(b->corpus.len - i * bs);
        j->dst = out, j->dst_cap = eng_bound(j->len);
        out += j->dst_cap;
    }
    b->scratch = bn_alloc(bs);
}

/* A job the engine forgot keeps out_len 0, and a "compressed" output it never wrote fails
 * to decode: a stale result from the previous round cannot pass for this round's. */
static void bn_poison(bn_bench *b)
{
    for (size_t i = 0; i < b->n_jobs; i++) {
        eng_job *j = &b->jobs[i];
        j->out_len = 0;
        memset(j->dst, 0xA5, j->dst_cap < BN_POISON ? j->dst_cap : BN_POISON);
    }
}

/* Decodes every job and compares it with its input; exits on the first mismatch. */
static double bn_verify(bn_bench *b, const char *what, unsigned round_no)
{
    uint64_t in = 0, kept = 0;
    for (size_t i = 0; i < b->n_jobs; i++) {
        const eng_job *j = &b->jobs[i];
        int ok = j->out_len > 0 && j->out_len <= j->len;
        if (ok && j->out_len < j->len)   /* else stored raw: the input itself is kept */
            ok = LZ4_decompress_safe((const char *)j->dst, (char *)b->scratch,
                                     (int)j->out_len, (int)j->len) == (int)j->len &&
                 memcmp(b->scratch, j->src, j->len) == 0;
        if (!ok) {
            fprintf(stderr, BN_NAME ": VERIFY FAILED: %s, round %u, job %zu (offset %zu, "
                    "len %u, out_len %u): output does not decode to the input\n", what,
                    round_no, i, (size_t)(j->src - b->corpus.data), j->len, j->out_len);
            exit(BN_EXIT_FAIL);
        }
        in += j->len, kept += j->out_len;
    }
    return (double)in / (double)kept;
}

typedef struct {
    eng_ctx *eng;
    eng_job *jobs;
    size_t n_jobs;
    _Atomic size_t next;               /* first job of the next slice to take */
    pthread_barrier_t go;              /* threads exist before the clock starts */
} bn_feed;

/* One "file": takes brick-sized slices until none are left, one eng_compress each. */
static void *bn_writer(void *arg)
{
    bn_feed *f = arg;
    pthread_barrier_wait(&f->go);
    for (;;) {
        size_t i = atomic_fetch_add(&f->next, BN_BRICK_JOBS);
        if (i >= f->n_jobs)
            break;
        size_t n = f->n_jobs - i < BN_BRICK_JOBS ? f->n_jobs - i : BN_BRICK_JOBS;
        eng_compress(f->eng, f->jobs + i, n);
    }
    return NULL;
}

static void bn_run_writers(bn_bench *b, eng_ctx *eng, unsigned n, bn_round *r)
{
    pthread_t th[256];
    bn_feed f = {.eng = eng, .jobs = b->jobs, .n_jobs = b->n_jobs};
    atomic_init(&f.next, 0);
    pthread_barrier_init(&f.go, NULL, n + 1);
    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, bn_writer, &f) != 0) {
            fprintf(stderr, BN_NAME ": cannot start writer threads\n");
            exit(BN_EXIT_FAIL);
        }
    pthread_barrier_wait(&f.go);
    double t0 = bn_clock(CLOCK_MONOTONIC), c0 = bn_clock(CLOCK_PROCESS_CPUTIME_ID);
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    r->secs = bn_clock(CLOCK_MONOTONIC) - t0;
    r->cpu_secs = bn_clock(CLOCK_PROCESS_CPUTIME_ID) - c0;
    pthread_barrier_destroy(&f.go);
}

static void bn_run_one_call(bn_bench *b, eng_ctx *eng, bn_round *r)
{
    double t0 = bn_clock(CLOCK_MONOTONIC), c0 = bn_clock(CLOCK_PROCESS_CPUTIME_ID);
    eng_compress(eng, b->jobs, b->n_jobs);
    r->secs = bn_clock(CLOCK_MONOTONIC) - t0;
    r->cpu_secs = bn_clock(CLOCK_PROCESS_CPUTIME_ID) - c0;
}

static void bn_stats_sub(const eng_stats *a, const eng_stats *z, eng_stats *d)
{
    d->bricks_card = z->bricks_card - a->bricks_card;
    d->bricks_sw = z->bricks_sw - a->bricks_sw;
    d->blocks_card = z->blocks_card - a->blocks_card;
    d->blocks_sw = z->blocks_sw - a->blocks_sw;
    d->fallback_busy = z->fallback_busy - a->fallback_busy;
    d->fallback_error = z->fallback_error - a->fallback_error;
    d->fallback_small = z->fallback_small - a->fallback_small;
    d->card_idle_us = z->card_idle_us - a->card_idle_us;
    d->bytes_in = z->bytes_in - a->bytes_in;
    d->bytes_out = z->bytes_out - a->bytes_out;
}

static void bn_round_run(bn_bench *b, eng_ctx *eng, unsigned writers, bn_round *r)
{
    eng_stats s0, s1;
    bn_poison(b);
    eng_get_stats(eng, &s0);
    if (writers)
        bn_run_writers(b, eng, writers, r);
    else
        bn_run_one_call(b, eng, r);
    eng_get_stats(eng, &s1);
    bn_stats_sub(&s0, &s1, &r->d);
}

/* ---- engine mode: configurations and the median ---- */

static void bn_conf_set(bn_conf *c, const char *label, eng_backend be, unsigned threads,
                        unsigned bufsets, int card_only, const bn_eopts *o)
{
    c->label = label;
    c->uses_card = be == ENG_BACKEND_EMU;
    c->cfg = (eng_config){.backend = be, .sw_threads = threads, .bufsets = bufsets,
                          .block_size = o->block, .emu_card_mbps = o->card_mbps,
                          .emu_pcie_mbps = o->pcie_mbps, .card_only = card_only};
}

static void bn_make_confs(bn_bench *b)
{
    static char sw_all[48], mixed[64];
    const bn_eopts *o = &b->o;
    snprintf(sw_all, sizeof(sw_all), "sw %u pool threads", b->cores);
    snprintf(mixed, sizeof(mixed), "card+sw bufsets=2 + %u pool threads", b->cores);
    bn_conf_set(&b->confs[BN_SW_ALL], sw_all, ENG_BACKEND_SW, b->cores, 0, 0, o);
    bn_conf_set(&b->confs[BN_SW_ONE], "sw 1 pool thread", ENG_BACKEND_SW, 1, 0, 0, o);
    /* card alone: the pool only sees jobs too small for a run, so one thread is plenty */
    bn_conf_set(&b->confs[BN_CARD1], "card bufsets=1 (no overlap)", ENG_BACKEND_EMU, 1, 1, 1, o);
    bn_conf_set(&b->confs[BN_CARD2], "card bufsets=2", ENG_BACKEND_EMU, 1, 2, 1, o);
    bn_conf_set(&b->confs[BN_CARD3], "card bufsets=3", ENG_BACKEND_EMU, 1, 3, 1, o);
    bn_conf_set(&b->confs[BN_CARD4], "card bufsets=4", ENG_BACKEND_EMU, 1, 4, 1, o);
    bn_conf_set(&b->confs[BN_MIXED], mixed, ENG_BACKEND_EMU, b->cores, 2, 0, o);
    bn_conf_set(&b->confs[BN_MIXED_ONE], "card+sw bufsets=2 + 1 pool thread", ENG_BACKEND_EMU,
                1, 2, 0, o);
}

static int bn_round_cmp(const void *pa, const void *pb)
{
    double a = ((const bn_round *)pa)->secs, z = ((const bn_round *)pb)->secs;
    return (a > z) - (a < z);
}

/* Median of the rounds' times (mean of the middle two for an even count); the counters,
 * ratio and CPU share are those of the lower-middle round. */
static void bn_row_from_rounds(bn_bench *b, bn_round *r, unsigned n, bn_row *row)
{
    qsort(r, n, sizeof(*r), bn_round_cmp);
    const bn_round *m = &r[(n - 1) / 2];
    double secs = n % 2 ? m->secs : (m->secs + r[n / 2].secs) / 2;
    row->mbps = (double)b->corpus.len / secs / BN_MB;
    row->cpu_pct = 100.0 * m->cpu_secs / m->secs;
    row->ratio = m->ratio;
    row->d = m->d;
    row->idle_pct = row->conf->uses_card ? 100.0 * (double)m->d.card_idle_us / 1e6 / m->secs
                                         : 0;
}

static const char *bn_variant(const bn_bench *b, const bn_row *row)
{
    static char text[BN_MAX_ROWS][32];
    char *t = text[row - b->rows];
    if (row->writers)
        snprintf(t, sizeof(text[0]), "%u writers x 8 jobs", row->writers);
    else
        snprintf(t, sizeof(text[0]), "1 call, %zu jobs", b->n_jobs);
    return t;
}

static void bn_measure(bn_bench *b, const bn_conf *c, unsigned writers)
{
    char err[256], what[128];
    bn_round r[BN_MAX_ROUNDS];
    bn_row *row = &b->rows[b->n_rows++];
    *row = (bn_row){.conf = c, .writers = writers};
    eng_ctx *eng = eng_open(&c->cfg, err, sizeof(err));
    if (!eng) {
        fprintf(stderr, BN_NAME ": %s: cannot open the engine: %s\n", c->label, err);
        exit(BN_EXIT_FAIL);
    }
    snprintf(what, sizeof(what), "%s, %s", c->label, bn_variant(b, row));
    for (unsigned i = 0; i < b->o.rounds; i++) {
        bn_round_run(b, eng, writers, &r[i]);
        r[i].ratio = bn_verify(b, what, i + 1);
        fprintf(stderr, "  %-48s round %u: %8.1f MB/s, verified\n", what, i + 1,
                (double)b->corpus.len / r[i].secs / BN_MB);
    }
    eng_close(eng);
    bn_row_from_rounds(b, r, b->o.rounds, row);
}

/* ---- engine mode: the table, the files, the verdicts ---- */

static void bn_table(FILE *f, const bn_bench *b)
{
    fprintf(f, "| configuration | submission | MB/s (median) | %% of modelled %.0f MB/s | ratio "
               "| bricks card/sw | fallback busy | card idle %% | host CPU %% |\n"
               "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
            b->o.card_mbps);
    for (size_t i = 0; i < b->n_rows; i++) {
        const bn_row *r = &b->rows[i];
        char pct[16] = "-", idle[16] = "-";
        if (r->conf->uses_card) {
            snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * r->mbps / b->o.card_mbps);
            snprintf(idle, sizeof(idle), "%.1f%%", r->idle_pct);
        }
        fprintf(f, "| %s | %s | %.1f | %s | %.3f | %llu/%llu | %llu | %s | %.0f%% |\n",
                r->conf->label, bn_variant(b, r), r->mbps, pct, r->ratio,
                (unsigned long long)r->d.bricks_card, (unsigned long long)r->d.bricks_sw,
                (unsigned long long)r->d.fallback_busy, idle, r->cpu_pct);
    }
}

static const bn_row *bn_find(const bn_bench *b, int conf, unsigned writers)
{
    for (size_t i = 0; i < b->n_rows; i++)
        if (b->rows[i].conf == &b->confs[conf] && b->rows[i].writers == writers)
            return &b->rows[i];
    return NULL;
}

static const char *bn_verdict(int ok) { return ok ? "PASS" : "MISS"; }

/* The three engine targets of SPEC.md "Performance", once per submission variant. */
static void bn_checks(FILE *f, const bn_bench *b, unsigned writers)
{
    const bn_row *c1 = bn_find(b, BN_CARD1, writers), *c2 = bn_find(b, BN_CARD2, writers);
    const bn_row *sw = bn_find(b, BN_SW_ALL, writers), *mx = bn_find(b, BN_MIXED, writers);
    double model = b->o.card_mbps, p1 = 100 * c1->mbps / model, p2 = 100 * c2->mbps / model;
    const char *v = writers ? "writers" : "1 call";
    fprintf(f, "- %s: overlapped (bufsets=2) >= %.0f%% of the modelled %.0f MB/s: %s "
               "(%.1f MB/s = %.1f%%)\n", v, BN_TARGET_PCT, model,
            bn_verdict(p2 >= BN_TARGET_PCT), c2->mbps, p2);
    fprintf(f, "- %s: non-overlapped (bufsets=1) below the overlapped pipeline: %s (%.1f MB/s "
               "= %.1f%% against %.1f MB/s = %.1f%%; %s %.0f%% of the modelled rate)\n", v,
            bn_verdict(c1->mbps < c2->mbps), c1->mbps, p1, c2->mbps, p2,
            p1 < BN_TARGET_PCT ? "below" : "not below", BN_TARGET_PCT);
    fprintf(f, "- %s: card+software above card alone and software alone: %s (%.1f MB/s vs "
               "card bufsets=2 %.1f MB/s, %s %.1f MB/s)\n", v,
            bn_verdict(mx->mbps > c2->mbps && mx->mbps > sw->mbps), mx->mbps, c2->mbps,
            sw->conf->label, sw->mbps);
    /* The emulated card's kernel runs on the host's cores too, so with every core in the
     * pool card+software shares the CPU that software alone had to itself; with the same
     * pool on both sides the card's rate comes on top, as a real card's would. */
    const bn_row *s1 = bn_find(b, BN_SW_ONE, writers), *m1 = bn_find(b, BN_MIXED_ONE, writers);
    fprintf(f, "- %s: with the same software pool (1 thread), card+software above card alone "
               "and software alone: %s (%.1f MB/s vs card %.1f MB/s, software %.1f MB/s)\n", v,
            bn_verdict(m1->mbps > c2->mbps && m1->mbps > s1->mbps), m1->mbps, c2->mbps,
            s1->mbps);
}

/* The emulated card overlaps its three stages (DMA in, kernel, DMA out) across buffer
 * sets, so with enough sets in flight its ceiling is the slowest stage. */
static double bn_emu_ceiling(const bn_bench *b)
{
    const bn_row *c2 = bn_find(b, BN_CARD2, 0);
    double in = b->o.pcie_mbps, out = b->o.pcie_mbps * c2->ratio, k = b->o.card_mbps;
    return in < k ? (in < out ? in : out) : (k < out ? k : out);
}

static void bn_report(FILE *f, const bn_bench *b)
{
    double top = bn_emu_ceiling(b);
    fprintf(f, "## fpgalz4fs-bench engine\n\n"
               "- corpus: %s\n- block %s, %zu jobs, rounds per row: %u (median), %u cores "
               "(load average %.2f at start, %.2f at end), MB = 10^6 bytes of input\n"
               "- emulated card: modelled kernel %.0f MB/s, PCIe %.0f MB/s each way, 1 "
               "compute unit; card rows wait for the card (card_only=1)\n"
               "- pool threads: the software threads of the engine (callers only queue and wait)\n"
               "- card idle %%: the engine's card_idle_us over wall time; host CPU %%: "
               "process CPU time over wall time (100%% = one core)\n\n",
            b->corpus.what, sb_block_size_name(b->o.block), b->n_jobs, b->o.rounds, b->cores,
            b->load[0], b->load[1], b->o.card_mbps, b->o.pcie_mbps);
    bn_table(f, b);
    fprintf(f, "\nThe emulated card overlaps DMA in, kernel and DMA out across buffer sets, so "
               "its ceiling is its slowest stage: %.1f MB/s (%.1f%% of the modelled rate).\n",
            top, 100 * top / b->o.card_mbps);
    fprintf(f, "\nTargets (SPEC.md \"Performance\"):\n\n");
    bn_checks(f, b, 0);
    bn_checks(f, b, b->o.writers);
}

static void bn_csv(FILE *f, const bn_bench *b)
{
    fprintf(f, "configuration,submission,writers,mb_s_median,pct_of_modelled,ratio,"
               "bricks_card,bricks_sw,fallback_busy,card_idle_pct,host_cpu_pct\n");
    for (size_t i = 0; i < b->n_rows; i++) {
        const bn_row *r = &b->rows[i];
        fprintf(f, "%s,%s,%u,%.2f,", r->conf->label, r->writers ? "writers" : "one_call",
                r->writers, r->mbps);
        if (r->conf->uses_card)
            fprintf(f, "%.2f,", 100.0 * r->mbps / b->o.card_mbps);
        else
            fprintf(f, ",");
        fprintf(f, "%.4f,%llu,%llu,%llu,%.1f,%.1f\n", r->ratio,
                (unsigned long long)r->d.bricks_card, (unsigned long long)r->d.bricks_sw,
                (unsigned long long)r->d.fallback_busy, r->idle_pct, r->cpu_pct);
    }
}

/* One bar pair per configuration (one call, writers) and the modelled rate as a line. */
static void bn_gp(FILE *f, const bn_bench *b, const char *png)
{
    fprintf(f, "set terminal png size 1280,640\nset output '%s'\n"
               "set title 'fpgalz4fs engine, block %s: median MB/s of input'\n"
               "set style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.8 border -1\nset ylabel 'MB/s (10^6 B/s)'\n"
               "set yrange [0:*]\nset grid ytics\nset xtics rotate by -20\n"
               "set rmargin 16\nset bmargin 8\nset key top right\n$d << EOD\n", png,
            sb_block_size_name(b->o.block));
    for (int c = 0; c < BN_N_CONFS; c++)
        fprintf(f, "\"%s\" %.2f %.2f\n", b->confs[c].label, bn_find(b, c, 0)->mbps,
                bn_find(b, c, b->o.writers)->mbps);
    fprintf(f, "EOD\nplot $d using 2:xtic(1) title '1 call', '' using 3 title '%u writers', "
               "%.2f with lines lw 2 title 'modelled card rate'\n", b->o.writers,
            b->o.card_mbps);
}

/* The output files' callbacks take the bench as an opaque context. */
static void bn_report_cb(FILE *f, const void *b) { bn_report(f, b); }
static void bn_csv_cb(FILE *f, const void *b) { bn_csv(f, b); }
static void bn_gp_cb(FILE *f, const void *b, const char *png) { bn_gp(f, b, png); }

static int bn_outputs(const bn_bench *b)
{
    if (bn_mkdirs(b->o.out_dir) != 0) {
        fprintf(stderr, BN_NAME ": %s: %s\n", b->o.out_dir, strerror(errno));
        return BN_EXIT_FAIL;
    }
    int rc = bn_write_out(b->o.out_dir, "engine.md", b, bn_report_cb);
    rc |= bn_write_out(b->o.out_dir, "engine.csv", b, bn_csv_cb);
    bn_plot(b->o.out_dir, "engine", b, bn_gp_cb);
    return rc ? BN_EXIT_FAIL : BN_EXIT_OK;
}

static void bn_summarize(const bn_bench *b, bn_engine_summary *s)
{
    const bn_row *c1 = bn_find(b, BN_CARD1, 0), *c2 = bn_find(b, BN_CARD2, 0);
    const bn_row *s1 = bn_find(b, BN_SW_ONE, 0), *m1 = bn_find(b, BN_MIXED_ONE, 0);
    *s = (bn_engine_summary){.valid = 1, .card_model_mbps = b->o.card_mbps,
                             .overlap_pct = 100 * c2->mbps / b->o.card_mbps,
                             .nooverlap_pct = 100 * c1->mbps / b->o.card_mbps,
                             .mixed1_mbps = m1->mbps, .card_mbps = c2->mbps,
                             .sw1_mbps = s1->mbps};
}

int bn_engine_run(int argc, char **argv, bn_engine_summary *sum)
{
    static bn_bench b;                 /* large (rows, configs): not on the stack */
    int rc = bn_engine_args(argc, argv, &b.o);
    if (rc != BN_CONTINUE)
        return rc;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    b.cores = cores > 0 ? (unsigned)cores : 1;
    if (getloadavg(&b.load[0], 1) != 1)
        b.load[0] = -1;
    bn_corpus_req req = {.file = b.o.corpus_file, .synthetic = b.o.synthetic,
                         .mib = b.o.mib, .mib_given = b.o.mib_given};
    if (bn_corpus_load(&req, &b.corpus) != 0)
        return BN_EXIT_FAIL;
    fprintf(stderr, BN_NAME ": corpus: %s\n", b.corpus.what);
    bn_make_jobs(&b);
    bn_make_confs(&b);
    for (int c = 0; c < BN_N_CONFS; c++) {
        bn_measure(&b, &b.confs[c], 0);
        bn_measure(&b, &b.confs[c], b.o.writers);
    }
    if (getloadavg(&b.load[1], 1) != 1)
        b.load[1] = -1;
    bn_report(stdout, &b);
    fflush(stdout);
    if (sum)
        bn_summarize(&b, sum);
    return bn_outputs(&b);
}

int bn_engine_main(int argc, char **argv)
{
    return bn_engine_run(argc, argv, NULL);
}
