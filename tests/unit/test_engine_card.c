/* Unit tests of the engine with the emulated card (ENG_BACKEND_EMU): every job's output
 * decodes to that job's own input whichever path compressed it (card, software because the
 * card was busy, failed or hung, or software because the job was small), jobs of concurrent
 * callers share bricks, card_only never falls back for a busy card, submissions in flight
 * complete independently, eng_close neither loses work nor deadlocks, and the counters add
 * up. Blocks are 64 KiB so that runs are short; deadlocks are caught by running the work on a
 * helper thread with a time limit (a liveness bound, not a speed target). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "eng.h"

#include <lz4.h>
#include <xxhash.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KIB 1024u
#define BS (64u * KIB)                 /* block size (the card's stride) in every test */
#define SMALL 1024u                    /* jobs below this never go to the card */
#define UNSET 0xdeadbeefu              /* out_len before the engine sets it */
#define LIVENESS_S 30.0                /* generous bound on anything that must return */

/* ------------------------------------------------------------------ data */

static uint64_t mix64(uint64_t *s)
{
    /* splitmix64 step */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

enum { K_TEXT = 0, K_NOISE, K_ZERO, K_KINDS };

/* Log-like lines: shrinks well, and differently for every seed. */
static void gen_text(uint8_t *p, size_t n, uint64_t seed)
{
    static const char *const vocab[] = {
        "card", "brick", "block", "job", "queue", "timeout", "fallback", "software",
        "kernel", "stride", "ok", "error", "=", "42", "0x1f", "\n",
        "dispatcher", "buffer", "set", "run", "[info]", "[warn]", "lz4", "frame",
    };
    uint64_t s = seed * 7919u + 1;
    size_t at = 0;
    while (at < n) {
        const char *w = vocab[mix64(&s) % (sizeof(vocab) / sizeof(vocab[0]))];
        for (; *w && at < n; w++)
            p[at++] = (uint8_t)*w;
        if (at < n)
            p[at++] = ' ';
    }
}

static void gen_noise(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t s = seed ^ 0x5bd1e995u;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = mix64(&s);
        for (size_t k = 0; k < 8 && i + k < n; k++)
            p[i + k] = (uint8_t)(v >> (8 * k));
    }
}

static void gen(uint8_t *p, size_t n, int kind, uint64_t seed)
{
    if (kind == K_TEXT)
        gen_text(p, n, seed);
    else if (kind == K_NOISE)
        gen_noise(p, n, seed);
    else
        memset(p, 0, n);
}

/* ------------------------------------------------------------------ jobs */

/* A set of jobs with their own input and output buffers, and what the counters should say. */
typedef struct {
    size_t n;
    eng_job *jobs;
    int *kind;
    uint8_t **src;
} jobset;

typedef struct {
    uint64_t jobs, small, bytes_in, bytes_out;
} tally;

static void jobset_init(jobset *js, size_t n)
{
    js->n = n;
    js->jobs = calloc(n ? n : 1, sizeof(*js->jobs));
    js->kind = calloc(n ? n : 1, sizeof(*js->kind));
    js->src = calloc(n ? n : 1, sizeof(*js->src));
    assert_non_null(js->jobs);
    assert_non_null(js->kind);
    assert_non_null(js->src);
}

/* (Re)fills job i with len bytes of kind, and poisons its output. */
static void jobset_set(jobset *js, size_t i, uint32_t len, int kind, uint64_t seed)
{
    free(js->src[i]);
    free(js->jobs[i].dst);
    js->src[i] = malloc(len);
    assert_non_null(js->src[i]);
    gen(js->src[i], len, kind, seed);
    js->kind[i] = kind;
    eng_job *j = &js->jobs[i];
    j->src = js->src[i];
    j->len = len;
    j->dst_cap = eng_bound(len);
    j->dst = malloc(j->dst_cap);
    assert_non_null(j->dst);
    memset(j->dst, 0xA5, j->dst_cap);
    j->out_len = UNSET;
}

static void jobset_free(jobset *js)
{
    for (size_t i = 0; i < js->n; i++) {
        free(js->src[i]);
        free(js->jobs[i].dst);
    }
    free(js->jobs);
    free(js->kind);
    free(js->src);
    memset(js, 0, sizeof(*js));
}

/* 0 when job's result stands for its own input: a raw LZ4 block that decodes to exactly
 * src, or "store raw" (out_len >= len). Compressible input of a card-sized job must shrink. */
static int job_bad(const eng_job *j, int kind, char *why, size_t why_cap)
{
    if (j->out_len == UNSET) {
        snprintf(why, why_cap, "out_len never set (len %u)", j->len);
        return 1;
    }
    if (j->out_len >= j->len) {
        if (kind != K_NOISE && j->len >= SMALL) {
            snprintf(why, why_cap, "compressible job of %u bytes reported as raw (out_len %u)",
                     j->len, j->out_len);
            return 1;
        }
        return 0;
    }
    if (j->out_len > j->dst_cap) {
        snprintf(why, why_cap, "out_len %u beyond dst_cap %u", j->out_len, j->dst_cap);
        return 1;
    }
    uint8_t *back = malloc(j->len);
    assert_non_null(back);
    int got = LZ4_decompress_safe((const char *)j->dst, (char *)back, (int)j->out_len,
                                  (int)j->len);
    int bad = got != (int)j->len || memcmp(back, j->src, j->len) != 0;
    free(back);
    if (bad)
        snprintf(why, why_cap, "output of %u bytes decodes to %d bytes %s its input of %u",
                 j->out_len, got, got == (int)j->len ? "that differ from" : "instead of",
                 j->len);
    return bad;
}

/* Counts the wrong jobs (printing the first few) and adds the set to the tally. */
static int jobset_check(const jobset *js, tally *t, const char *who)
{
    int bad = 0;
    for (size_t i = 0; i < js->n; i++) {
        char why[200];
        const eng_job *j = &js->jobs[i];
        if (job_bad(j, js->kind[i], why, sizeof(why))) {
            if (bad < 5)
                print_message("%s: job %zu (kind %d): %s\n", who, i, js->kind[i], why);
            bad++;
        }
        if (t) {
            t->jobs++;
            t->small += j->len < SMALL;
            t->bytes_in += j->len;
            t->bytes_out += j->out_len < j->len ? j->out_len : j->len;
        }
    }
    return bad;
}

/* ------------------------------------------------------------------ engine */

static eng_config emu_cfg(void)
{
    eng_config c = {
        .backend = ENG_BACKEND_EMU,
        .sw_threads = 2,
        .block_size = BS,
        .emu_card_mbps = 2000,
        .emu_seed = 0x1234567ull,
    };
    return c;
}

static eng_ctx *open_cfg(const eng_config *c)
{
    char err[256] = "";
    eng_ctx *eng = eng_open(c, err, sizeof(err));
    if (!eng)
        fail_msg("eng_open(emu): %s", err);
    return eng;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The counters agree with what the callers submitted. */
static void expect_counters(const eng_stats *st, const tally *t)
{
    print_message("    bricks card %llu sw %llu, blocks card %llu sw %llu, fallback busy %llu "
                  "error %llu small %llu, idle %llu us, in %llu out %llu\n",
                  (unsigned long long)st->bricks_card, (unsigned long long)st->bricks_sw,
                  (unsigned long long)st->blocks_card, (unsigned long long)st->blocks_sw,
                  (unsigned long long)st->fallback_busy,
                  (unsigned long long)st->fallback_error,
                  (unsigned long long)st->fallback_small,
                  (unsigned long long)st->card_idle_us, (unsigned long long)st->bytes_in,
                  (unsigned long long)st->bytes_out);
    assert_int_equal(st->blocks_card + st->blocks_sw, t->jobs);
    assert_int_equal(st->bytes_in, t->bytes_in);
    assert_int_equal(st->bytes_out, t->bytes_out);
    assert_int_equal(st->fallback_small, t->small);
    /* a brick holds 1..8 jobs */
    assert_true(st->blocks_card >= st->bricks_card);
    assert_true(st->blocks_card <= 8 * st->bricks_card);
    assert_true(st->blocks_sw >= st->bricks_sw);
    assert_true(st->blocks_sw <= 8 * st->bricks_sw);
    /* every small job is a software brick of its own */
    assert_true(st->bricks_sw >= st->fallback_small);
}

/* Runs fn(arg) on a helper thread; fails the test when it has not returned within limit_s
 * (the helper is then left behind: its memory is never freed). Returns the time it took. */
typedef void (*body_fn)(void *arg);
typedef struct {
    body_fn fn;
    void *arg;
} bounded_call;

static void *bounded_main(void *p)
{
    bounded_call *c = p;
    c->fn(c->arg);
    return NULL;
}

static double run_bounded(const char *what, body_fn fn, void *arg, double limit_s)
{
    bounded_call *c = malloc(sizeof(*c));
    assert_non_null(c);
    c->fn = fn, c->arg = arg;
    pthread_t t;
    double t0 = now_s();
    assert_int_equal(pthread_create(&t, NULL, bounded_main, c), 0);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)limit_s;
    int rc = pthread_timedjoin_np(t, NULL, &dl);
    double took = now_s() - t0;
    if (rc != 0)
        fail_msg("%s has not returned after %.1f s: deadlock or livelock", what, took);
    free(c);
    print_message("    %s took %.3f s\n", what, took);
    return took;
}

/* ------------------------------------------------------------------ callers */

/* One caller thread: `calls` calls of 1..max_jobs jobs (exactly max_jobs when fixed_jobs)
 * of lengths min_len..max_len, mixed kinds, every result checked on return. */
typedef struct {
    eng_ctx *eng;
    unsigned id, calls, max_jobs, fixed_jobs;
    uint32_t min_len, max_len;
    int text_only;
    int use_submit;                    /* eng_submit + eng_wait instead of eng_compress */
    unsigned pause_us;                 /* between calls: lets the card's back-off expire */
    tally t;
    int bad;
    double max_call_s;                 /* the longest call */
} caller_arg;

static void *caller_main(void *p)
{
    caller_arg *a = p;
    uint64_t s = 0xC0FFEEull + a->id * 1000003ull;
    jobset js;
    jobset_init(&js, a->max_jobs);
    for (unsigned call = 0; call < a->calls; call++) {
        size_t n = a->fixed_jobs ? a->max_jobs : 1 + mix64(&s) % a->max_jobs;
        for (size_t i = 0; i < n; i++) {
            uint32_t span = a->max_len - a->min_len + 1;
            uint32_t len = a->min_len + (uint32_t)(mix64(&s) % span);
            int kind = a->text_only ? K_TEXT : (int)(mix64(&s) % 8 == 0 ? K_NOISE
                                                     : mix64(&s) % 8 == 0 ? K_ZERO : K_TEXT);
            jobset_set(&js, i, len, kind, mix64(&s));
        }
        jobset part = js;
        part.n = n;
        double t0 = now_s();
        if (a->use_submit) {
            eng_ticket tk;
            eng_submit(a->eng, js.jobs, n, &tk);
            eng_wait(a->eng, &tk);
        } else {
            eng_compress(a->eng, js.jobs, n);
        }
        if (now_s() - t0 > a->max_call_s)
            a->max_call_s = now_s() - t0;
        if (a->pause_us)
            usleep(a->pause_us);
        char who[64];
        snprintf(who, sizeof(who), "caller %u call %u", a->id, call);
        a->bad += jobset_check(&part, &a->t, who);
    }
    jobset_free(&js);
    return NULL;
}

/* Runs n callers built from proto at once; returns their summed tally, failing on any wrong
 * job. */
typedef struct {
    caller_arg proto;
    unsigned n;
    tally sum;
    int bad;
    double max_call_s;
} crowd;

static void crowd_run(void *p)
{
    crowd *c = p;
    pthread_t *t = calloc(c->n, sizeof(*t));
    caller_arg *a = calloc(c->n, sizeof(*a));
    for (unsigned i = 0; i < c->n; i++) {
        a[i] = c->proto;
        a[i].id = c->proto.id + i;
        if (pthread_create(&t[i], NULL, caller_main, &a[i]) != 0)
            abort();
    }
    for (unsigned i = 0; i < c->n; i++) {
        pthread_join(t[i], NULL);
        c->bad += a[i].bad;
        if (a[i].max_call_s > c->max_call_s)
            c->max_call_s = a[i].max_call_s;
        c->sum.jobs += a[i].t.jobs, c->sum.small += a[i].t.small;
        c->sum.bytes_in += a[i].t.bytes_in, c->sum.bytes_out += a[i].t.bytes_out;
    }
    free(t);
    free(a);
}

static void close_body(void *eng) { eng_close(eng); }

/* ------------------------------------------------------------------ tests */

static void test_open_emu(void **state)
{
    eng_config c = emu_cfg();
    eng_ctx *eng = open_cfg(&c);
    assert_string_equal(eng_backend_name(eng), "emu");
    char names[128];
    eng_backends_available(names, sizeof(names));
    assert_non_null(strstr(names, "sw emu"));
    /* an idle card counts idle time */
    usleep(30000);
    eng_stats st;
    eng_get_stats(eng, &st);
    assert_true(st.card_idle_us >= 20000);
    assert_int_equal(st.bricks_card + st.bricks_sw + st.blocks_card + st.blocks_sw, 0);
    eng_close(eng);

    char err[256];
    c.bufsets = 17;                    /* beyond what the emulated card offers */
    err[0] = 0;
    assert_null(eng_open(&c, err, sizeof(err)));
    assert_true(strlen(err) > 0);
    c = emu_cfg();
    c.cus = 17;
    err[0] = 0;
    assert_null(eng_open(&c, err, sizeof(err)));
    assert_true(strlen(err) > 0);
}

/* Edge sizes around the small-job threshold and the stride, all kinds, in single calls and
 * in one call of everything. */
static void test_mixed_sizes(void **state)
{
    static const uint32_t lens[] = {1,    2,    127,  128,   1000,  1023,  1024,
                                    1025, 4096, 4097, 30000, 65535, BS};
    const size_t nl = sizeof(lens) / sizeof(lens[0]);
    eng_config c = emu_cfg();
    eng_ctx *eng = open_cfg(&c);
    tally t = {0};
    jobset js;
    jobset_init(&js, nl * K_KINDS);
    for (size_t i = 0; i < nl * K_KINDS; i++)
        jobset_set(&js, i, lens[i % nl], (int)(i / nl), 100 + i);
    /* one call of every job */
    eng_compress(eng, js.jobs, js.n);
    assert_int_equal(jobset_check(&js, &t, "one call"), 0);
    /* every job alone */
    for (size_t i = 0; i < js.n; i++) {
        jobset one = js;
        jobset_set(&js, i, lens[i % nl], (int)(i / nl), 900 + i);
        one.jobs = &js.jobs[i], one.kind = &js.kind[i], one.n = 1;
        eng_compress(eng, one.jobs, 1);
        assert_int_equal(jobset_check(&one, &t, "alone"), 0);
    }
    /* an empty call does nothing */
    eng_compress(eng, js.jobs, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &t);
    assert_true(st.bricks_card > 0);
    assert_int_equal(st.fallback_error, 0);
    jobset_free(&js);
    eng_close(eng);
}

/* Several threads at once, jobs of all sizes and kinds. */
static void test_concurrent_mixed(void **state)
{
    eng_config c = emu_cfg();
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 6,
                .proto = {.eng = eng, .calls = 40, .max_jobs = 12, .min_len = 1, .max_len = BS}};
    run_bounded("6 concurrent callers", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    assert_true(st.bricks_card > 0);
    assert_true(st.fallback_small > 0);
    eng_close(eng);
}

/* Many callers, one 4 KiB job per call: a card brick holding more than one job holds jobs of
 * several callers, so blocks_card > bricks_card shows that bricks pack callers together. */
static void test_bricks_pack_callers(void **state)
{
    eng_config c = emu_cfg();
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 16,
                .proto = {.eng = eng, .calls = 150, .max_jobs = 1, .fixed_jobs = 1,
                          .min_len = 4 * KIB, .max_len = 4 * KIB, .text_only = 1}};
    run_bounded("16 callers of one 4 KiB job each", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    assert_int_equal(st.fallback_small, 0);
    assert_true(st.bricks_card > 0);
    if (!(st.bricks_card < st.blocks_card))
        fail_msg("no card brick held jobs of more than one caller: bricks_card %llu, "
                 "blocks_card %llu (bricks_sw %llu, blocks_sw %llu)",
                 (unsigned long long)st.bricks_card, (unsigned long long)st.blocks_card,
                 (unsigned long long)st.bricks_sw, (unsigned long long)st.blocks_sw);
    eng_close(eng);
}

/* A slow card with one buffer set: bricks that find it busy go to software. */
static void test_busy_card_falls_back(void **state)
{
    eng_config c = emu_cfg();
    c.emu_card_mbps = 20;
    c.bufsets = 1;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 2,
                .proto = {.eng = eng, .calls = 6, .max_jobs = 40, .fixed_jobs = 1,
                          .min_len = 8 * KIB, .max_len = BS}};
    run_bounded("busy card", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    assert_true(st.fallback_busy > 0);
    assert_true(st.bricks_sw > 0);
    assert_true(st.bricks_sw >= st.fallback_busy);
    assert_true(st.bricks_card > 0);
    assert_int_equal(st.fallback_error, 0);
    eng_close(eng);
}

/* card_only: bricks wait for the slow card; only small jobs go to software. */
static void test_card_only_never_busy(void **state)
{
    eng_config c = emu_cfg();
    c.emu_card_mbps = 20;
    c.bufsets = 1;
    c.card_only = 1;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 2,
                .proto = {.eng = eng, .calls = 5, .max_jobs = 30, .fixed_jobs = 1,
                          .min_len = 200, .max_len = BS}};
    run_bounded("card_only with a busy card", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    /* and one call with small jobs among big ones */
    jobset js;
    jobset_init(&js, 24);
    for (size_t i = 0; i < js.n; i++)
        jobset_set(&js, i, i % 3 == 0 ? 1 + (uint32_t)i * 40 : BS - (uint32_t)i, K_TEXT, 40 + i);
    eng_compress(eng, js.jobs, js.n);
    assert_int_equal(jobset_check(&js, &cr.sum, "card_only, small and big"), 0);
    jobset_free(&js);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    assert_true(cr.sum.small > 0);     /* the test does exercise small jobs */
    assert_int_equal(st.fallback_busy, 0);
    assert_int_equal(st.fallback_error, 0);
    assert_int_equal(st.bricks_sw, st.fallback_small);
    assert_int_equal(st.blocks_sw, st.fallback_small);
    assert_int_equal(st.blocks_card, cr.sum.jobs - cr.sum.small);
    eng_close(eng);
}

/* Polls until no job waits for a brick or bound_s has passed; returns whether the queue
 * emptied. */
static int queue_empties_within(eng_ctx *eng, double bound_s)
{
    double until = now_s() + bound_s;
    eng_stats st;
    do {
        eng_get_stats(eng, &st);
        if (st.jobs_queued == 0)
            return 1;
        usleep(500);
    } while (now_s() < until);
    return 0;
}

/* While the card runs a full brick, 7 jobs arrive one call at a time, the first well before
 * the others. Waiting to fill (fill_us), the first is still queued half a run later, and the
 * 7 start together as one brick when the card is about to finish; starting at once
 * (ENG_FILL_NEVER), the first has left the queue alone into the free set by then. Half a
 * run of the slow card (8 blocks at 2 MB/s, about 260 ms) is far from both the time a
 * dispatcher takes to see a job, even on a loaded machine, and the moment a waiting brick
 * starts. Returns the card's bricks of those 7 jobs. */
static uint64_t bricks_for_late_jobs(unsigned fill_us)
{
    eng_config c = emu_cfg();
    c.emu_card_mbps = 2;
    c.bufsets = 2;
    c.card_only = 1;
    c.fill_us = fill_us;
    eng_ctx *eng = open_cfg(&c);
    jobset js;
    jobset_init(&js, 23);              /* 8 to measure, 8 that keep the card busy, 7 late */
    for (size_t i = 0; i < js.n; i++)
        jobset_set(&js, i, BS, K_TEXT, 700 + i);
    eng_compress(eng, js.jobs, 8);     /* the card's rate is measured from this run */
    eng_stats before, after;
    eng_get_stats(eng, &before);
    assert_true(before.card_ps_per_byte > 0);
    double half_run_s = (double)before.card_ps_per_byte * 8 * BS / 1e12 / 2;
    eng_ticket full, late[7];
    eng_submit(eng, js.jobs + 8, 8, &full);
    eng_submit(eng, js.jobs + 16, 1, &late[0]);
    int alone = queue_empties_within(eng, half_run_s);
    print_message("    %s: the first late job %s half a run (%.0f ms)\n",
                  fill_us == ENG_FILL_NEVER ? "at once" : "waiting to fill",
                  alone ? "started within" : "still waited after", half_run_s * 1e3);
    assert_int_equal(alone, fill_us == ENG_FILL_NEVER);
    for (unsigned k = 1; k < 7; k++)
        eng_submit(eng, js.jobs + 16 + k, 1, &late[k]);
    eng_wait(eng, &full);
    for (unsigned k = 0; k < 7; k++)
        eng_wait(eng, &late[k]);
    eng_get_stats(eng, &after);
    assert_int_equal(jobset_check(&js, NULL, "late jobs"), 0);
    eng_close(eng);
    jobset_free(&js);
    return after.bricks_card - before.bricks_card - 1;
}

static void test_bricks_fill_while_card_busy(void **state)
{
    uint64_t waited = bricks_for_late_jobs(1000000), at_once = bricks_for_late_jobs(ENG_FILL_NEVER);
    print_message("    bricks of the 7 late jobs: %llu waiting, %llu at once\n",
                  (unsigned long long)waited, (unsigned long long)at_once);
    assert_int_equal(waited, 1);
    assert_true(at_once >= 2);
}

/* Injected card errors (error state and implausible sizes): all data right, some bricks
 * redone in software, and the card is used again after its back-off. */
static void test_injected_errors(void **state)
{
    eng_config c = emu_cfg();
    c.emu_error_rate = 0.3;
    c.emu_seed = 0xE1E1E1ull;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 4,
                .proto = {.eng = eng, .calls = 100, .max_jobs = 16, .min_len = 512,
                          .max_len = BS, .pause_us = 5000}};
    /* How many runs fit between back-offs depends on the machine's speed, so the callers
     * go on, round after round, until the card has been used again several times; a card
     * never retried after its back-off fails every round. */
    eng_stats st;
    unsigned round = 0;
    do {
        run_bounded("callers with card errors", crowd_run, &cr, LIVENESS_S);
        eng_get_stats(eng, &st);
    } while (++round < 8 && (st.bricks_card < 5 || st.fallback_error < 5));
    print_message("    %u round(s)\n", round);
    assert_int_equal(cr.bad, 0);
    expect_counters(&st, &cr.sum);
    assert_true(st.bricks_card >= 5);
    assert_true(st.fallback_error >= 5);
    eng_close(eng);
}

/* Every job (all asked for sums) has the checksums of the bytes it holds. */
static void expect_sums(const jobset *js)
{
    for (size_t i = 0; i < js->n; i++) {
        const eng_job *j = &js->jobs[i];
        assert_true(j->sums_done);
        assert_int_equal(j->src_sum, XXH32(j->src, j->len, 0));
        if (j->out_len < j->len)
            assert_int_equal(j->out_sum, XXH32(j->dst, j->out_len, 0));
    }
}

/* A card that returns wrong bytes with plausible sizes (one flipped byte in a compressed
 * block of every run): every job still decodes to its input, the wrong blocks are counted
 * and redone in software, and what the sums say is the checksums of the bytes kept. With
 * card_check the card checks its own output: half its runs are spoiled before that check
 * (its verdict must say so), half after it (only the host's sums can tell). */
static void silent_corruption(int card_check)
{
    eng_config c = emu_cfg();
    c.emu_corrupt_rate = 1.0;
    c.emu_card_check = card_check;
    eng_ctx *eng = open_cfg(&c);
    for (int call = 0; call < 3; call++) {
        jobset js;
        jobset_init(&js, 24);
        for (size_t i = 0; i < js.n; i++) {
            jobset_set(&js, i, BS - (uint32_t)i * 3, K_TEXT, 500 + i + (size_t)call * 100);
            js.jobs[i].want_sums = 1;
        }
        tally t = {0};
        eng_compress(eng, js.jobs, js.n);
        assert_int_equal(jobset_check(&js, &t, "card with silent corruption"), 0);
        expect_sums(&js);
        jobset_free(&js);
    }
    eng_stats st;
    eng_get_stats(eng, &st);
    print_message("    bricks_card %llu verify_failed %llu checked_on_card %llu\n",
                  (unsigned long long)st.bricks_card, (unsigned long long)st.verify_failed,
                  (unsigned long long)st.blocks_checked_on_card);
    assert_true(st.bricks_card >= 2);
    /* one wrong block per run: redone, never kept (a flip that still decodes to the input
     * is no error, so at least most of them) */
    assert_true(st.verify_failed <= st.bricks_card);
    assert_true(st.verify_failed * 4 >= st.bricks_card * 3);
    assert_int_equal(st.blocks_checked_on_card, card_check ? st.blocks_card : 0);
    eng_close(eng);
}

static void test_silent_corruption_caught(void **state)
{
    (void)state;
    silent_corruption(0);
}

static void test_silent_corruption_caught_on_card(void **state)
{
    (void)state;
    silent_corruption(1);
}

/* A correct card: verification finds nothing, whether the card checks its own output or
 * the pool decodes it; the sums are the frame's either way, for blocks stored raw (noise)
 * too. */
static void verify_good_card(int card_check)
{
    eng_config c = emu_cfg();
    c.emu_card_check = card_check;
    eng_ctx *eng = open_cfg(&c);
    jobset js;
    jobset_init(&js, 16);
    for (size_t i = 0; i < js.n; i++) {
        jobset_set(&js, i, BS, i % 4 == 3 ? K_NOISE : K_TEXT, 900 + i);
        js.jobs[i].want_sums = 1;
    }
    eng_compress(eng, js.jobs, js.n);
    assert_int_equal(jobset_check(&js, NULL, "good card"), 0);
    expect_sums(&js);
    eng_stats st;
    eng_get_stats(eng, &st);
    assert_true(st.blocks_card > 0);
    assert_int_equal(st.verify_failed, 0);
    assert_int_equal(st.blocks_checked_on_card, card_check ? st.blocks_card : 0);
    jobset_free(&js);
    eng_close(eng);
}

static void test_verify_passes_good_card(void **state)
{
    (void)state;
    verify_good_card(0);
}

static void test_verify_passes_good_card_on_card(void **state)
{
    (void)state;
    verify_good_card(1);
}

/* Sources in memory from eng_host_alloc (src_host) are read by the card where they lie:
 * one area holds even jobs side by side (a run of adjacent blocks, the last one short),
 * odd jobs stay in malloc'd memory and are copied. Every output must decode to its own
 * input, the direct ones must be counted, and the memory must be the caller's to change
 * the moment the call returns (the card read it before, not after). */
static void test_host_memory_read_in_place(void **state)
{
    eng_config c = emu_cfg();
    c.card_only = 1;
    eng_ctx *eng = open_cfg(&c);
    assert_int_equal(eng_host_direct(eng), 1);
    jobset js;
    jobset_init(&js, 24);
    size_t area_bytes = js.n / 2 * BS;
    uint8_t *area = eng_host_alloc(eng, area_bytes);
    assert_non_null(area);
    assert_int_equal((uintptr_t)area % 4096, 0);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < js.n; i++) {
            uint32_t len = i == js.n - 2 ? BS - 777 : BS;
            jobset_set(&js, i, len, (int)((i + round) % 2 ? K_TEXT : K_NOISE), 4000 + i + round);
            if (i % 2 == 0) {
                memcpy(area + i / 2 * BS, js.src[i], len);
                js.jobs[i].src = area + i / 2 * BS;
                js.jobs[i].src_host = 1;
            }
        }
        eng_compress(eng, js.jobs, js.n);
        assert_int_equal(jobset_check(&js, NULL, "direct and copied"), 0);
        memset(area, 0x5A, area_bytes);            /* ours again: nothing may read it now */
    }
    eng_stats st;
    eng_get_stats(eng, &st);
    assert_int_equal(st.blocks_direct, 3 * js.n / 2);
    assert_int_equal(st.blocks_card, 3 * js.n);
    assert_int_equal(st.verify_failed, 0);
    eng_host_free(eng, area, area_bytes);
    jobset_free(&js);
    eng_close(eng);
}

/* A run written off at its time-out may still be reading the blocks it was given (a GPU's
 * queued copy from pinned memory): memory given back meanwhile is held (host_parked) and
 * only freed once the late run is over and its set came back. */
static void test_host_memory_held_while_set_off(void **state)
{
    (void)state;
    eng_config c = emu_cfg();
    c.emu_card_mbps = 0.25;            /* a 64 KiB run takes about 260 ms, far past the
                                          time-out even when the dispatcher thread waits for
                                          a core for a while on a loaded machine (at 33 ms the
                                          run could end before it looked, and nothing was
                                          written off) */
    c.card_timeout_ms = 5;
    eng_ctx *eng = open_cfg(&c);
    uint8_t *p = eng_host_alloc(eng, BS);
    assert_non_null(p);
    gen(p, BS, K_TEXT, 31);
    uint8_t out[LZ4_COMPRESSBOUND(BS)], back[BS];
    eng_job j = {.src = p, .len = BS, .dst = out, .dst_cap = sizeof(out), .src_host = 1};
    eng_compress(eng, &j, 1);          /* the card's run is written off, software does it */
    assert_int_equal(LZ4_decompress_safe((const char *)out, (char *)back, (int)j.out_len, BS), BS);
    assert_memory_equal(back, p, BS);
    eng_stats st;
    eng_get_stats(eng, &st);
    assert_int_equal(st.sets_written_off, 1);
    if (st.sets_recovered == 0) {      /* the late run still holds the set */
        eng_host_free(eng, p, BS);
        eng_get_stats(eng, &st);
        assert_int_equal(st.host_parked, st.sets_recovered ? 0 : 1);
    } else {
        print_message("    the late run ended before the test looked: nothing to hold\n");
        eng_host_free(eng, p, BS);
    }
    for (int i = 0; i < 300 && (st.sets_recovered == 0 || st.host_parked > 0); i++) {
        usleep(10000);
        eng_get_stats(eng, &st);
    }
    assert_int_equal(st.sets_recovered, 1);
    assert_int_equal(st.host_parked, 0);
    run_bounded("eng_close", close_body, eng, LIVENESS_S);
}

/* Without a card that reads host memory, eng_host_alloc is plain page-aligned memory, a job
 * that says src_host is copied like any other, and nothing counts as direct. */
static void test_host_memory_software(void **state)
{
    eng_config c = {.backend = ENG_BACKEND_SW, .sw_threads = 2, .block_size = BS};
    eng_ctx *eng = open_cfg(&c);
    assert_int_equal(eng_host_direct(eng), 0);
    uint8_t *p = eng_host_alloc(eng, BS + 1);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 4096, 0);
    gen(p, BS + 1, K_TEXT, 77);
    uint8_t out[LZ4_COMPRESSBOUND(BS)], back[BS];
    eng_job j = {.src = p, .len = BS, .dst = out, .dst_cap = sizeof(out), .src_host = 1};
    eng_compress(eng, &j, 1);
    assert_true(j.out_len < BS);
    assert_int_equal(LZ4_decompress_safe((const char *)out, (char *)back, (int)j.out_len, BS), BS);
    assert_memory_equal(back, p, BS);
    eng_stats st;
    eng_get_stats(eng, &st);
    assert_int_equal(st.blocks_direct, 0);
    eng_host_free(eng, p, BS + 1);
    eng_host_free(eng, NULL, 0);
    eng_close(eng);
}

/* Bricks of 1 MiB blocks (8 MiB a run): the copies into and out of the card's buffers are
 * shared with the copy team's helpers, round after round, from several callers at once;
 * every byte must land in its own job, and the counters must add up. */
static void test_big_bricks_shared_copies(void **state)
{
    eng_config c = emu_cfg();
    c.block_size = 1024 * KIB;
    c.card_only = 1;
    c.emu_card_mbps = 100000;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 3,
                .proto = {.eng = eng, .calls = 6, .max_jobs = 12, .min_len = 4 * KIB,
                          .max_len = 1024 * KIB}};
    run_bounded("callers with 1 MiB blocks", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    assert_true(st.blocks_card > 8);   /* some runs were whole 8 MiB bricks */
    eng_close(eng);
}

/* Every run fails: everything is done in software, nothing is lost. */
static void test_card_always_fails(void **state)
{
    eng_config c = emu_cfg();
    c.emu_error_rate = 1.0;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 3,
                .proto = {.eng = eng, .calls = 20, .max_jobs = 10, .min_len = 1, .max_len = BS}};
    run_bounded("callers with a card that always fails", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    assert_int_equal(st.bricks_card, 0);
    assert_int_equal(st.blocks_card, 0);
    assert_true(st.fallback_error > 0);
    eng_close(eng);
}

/* Runs that never complete: time-outs send their bricks to software and write their sets off
 * (a hung run holds its compute unit, as a hung kernel does); every call returns. */
static void test_hangs(void **state)
{
    (void)state;
    eng_config c = emu_cfg();
    c.emu_hang_rate = 0.3;
    c.cus = 2;
#ifdef __SANITIZE_THREAD__
    c.card_timeout_ms = 400;           /* the emulated kernel runs many times slower */
#else
    c.card_timeout_ms = 50;
#endif
    c.emu_seed = 0xABCDEFull;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 4,
                .proto = {.eng = eng, .calls = 100, .max_jobs = 16, .min_len = 512,
                          .max_len = BS, .pause_us = 5000}};
    run_bounded("callers with hanging card runs", crowd_run, &cr, LIVENESS_S);
    eng_stats st;
    eng_get_stats(eng, &st);
    print_message("    longest eng_compress call: %.3f s; sets written off %llu\n",
                  cr.max_call_s, (unsigned long long)st.sets_written_off);
    assert_int_equal(cr.bad, 0);
    expect_counters(&st, &cr.sum);
    assert_true(st.fallback_error > 0);
    assert_true(st.sets_written_off > 0);
    run_bounded("eng_close after hangs", close_body, eng, LIVENESS_S);
}

/* A card whose every run hangs: each of its 4 buffer sets is tried once, written off at its
 * time-out and never started again, however many bricks follow; software takes them all. */
static void test_hung_sets_stay_off(void **state)
{
    (void)state;
    eng_config c = emu_cfg();
    c.emu_hang_rate = 1;
    c.cus = 2;
    c.bufsets = 2;
    c.card_timeout_ms = 30;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 3,
                .proto = {.eng = eng, .calls = 30, .max_jobs = 16, .min_len = 2048,
                          .max_len = BS, .pause_us = 2000}};
    eng_stats st;
    for (int round = 0; round < 3; round++) {
        run_bounded("callers with a card that hangs on every run", crowd_run, &cr, LIVENESS_S);
        /* Every set started times out 30 ms after its start, so a set wrongly put back in
         * use shows by then as a fifth write-off; a dispatcher kept off a core (a sanitizer,
         * a loaded machine) may notice the first four later, so wait for them, boundedly. */
        usleep(100000);
        double until = now_s() + LIVENESS_S;
        eng_get_stats(eng, &st);
        while (st.sets_written_off < 4 && now_s() < until) {
            usleep(10000);
            eng_get_stats(eng, &st);
        }
        print_message("    sets written off %llu, recovered %llu, fallback error %llu\n",
                      (unsigned long long)st.sets_written_off,
                      (unsigned long long)st.sets_recovered,
                      (unsigned long long)st.fallback_error);
        assert_int_equal(st.sets_written_off, 4);
    }
    assert_int_equal(cr.bad, 0);
    expect_counters(&st, &cr.sum);
    assert_int_equal(st.sets_recovered, 0);
    assert_int_equal(st.bricks_card, 0);
    run_bounded("eng_close with hung runs", close_body, eng, LIVENESS_S);
}

/* Runs slower than card_timeout_ms: their bricks go to software and their sets are written
 * off; the sets come back once the late runs complete, and the card is used again. */
static void test_slow_runs_recover(void **state)
{
    (void)state;
    eng_config c = emu_cfg();
    c.emu_card_mbps = 20;              /* a 512 KiB brick takes about 26 ms */
    c.card_timeout_ms = 5;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 2,
                .proto = {.eng = eng, .calls = 20, .max_jobs = 16, .min_len = 16384,
                          .max_len = BS, .pause_us = 2000}};
    run_bounded("callers with a card slower than its time-out", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    uint64_t off = 0;
    double until = now_s() + LIVENESS_S;
    for (;;) {                         /* the late runs complete within a second or so */
        eng_get_stats(eng, &st);
        off = st.sets_written_off;
        if ((off > 0 && st.sets_recovered == off) || now_s() >= until)
            break;
        usleep(10000);
    }
    print_message("    sets written off %llu, recovered %llu, bricks card %llu sw %llu\n",
                  (unsigned long long)off, (unsigned long long)st.sets_recovered,
                  (unsigned long long)st.bricks_card, (unsigned long long)st.bricks_sw);
    expect_counters(&st, &cr.sum);
    assert_true(off > 0);
    assert_int_equal(st.sets_recovered, off);
    /* Back in use: once the rest after the faults is over, a brick small enough to beat the
     * time-out is compressed by the card. */
    usleep(500000);
    jobset js;
    jobset_init(&js, 1);
    uint64_t card = st.bricks_card;
    for (int i = 0; i < 100 && card == st.bricks_card; i++) {
        jobset_set(&js, 0, 4096, K_TEXT, 77 + (uint64_t)i);
        eng_compress(eng, js.jobs, js.n);
        tally t = {0};
        assert_int_equal(jobset_check(&js, &t, "after recovery"), 0);
        eng_get_stats(eng, &st);
        if (card == st.bricks_card)
            usleep(20000);
    }
    print_message("    after recovery: bricks card %llu\n", (unsigned long long)st.bricks_card);
    assert_true(st.bricks_card > card);
    jobset_free(&js);
    run_bounded("eng_close", close_body, eng, LIVENESS_S);
}

/* One eng_compress call against a card that hangs on every run returns in bounded time. */
typedef struct {
    eng_ctx *eng;
    jobset *js;
} one_call;

static void one_call_body(void *p)
{
    one_call *o = p;
    eng_compress(o->eng, o->js->jobs, o->js->n);
}

static void test_single_call_all_hang(void **state)
{
    eng_config c = emu_cfg();
    c.emu_hang_rate = 1.0;
    c.card_timeout_ms = 50;
    eng_ctx *eng = open_cfg(&c);
    jobset js;
    jobset_init(&js, 64);
    for (size_t i = 0; i < js.n; i++)
        jobset_set(&js, i, BS - (uint32_t)i * 7, i % 5 == 4 ? K_NOISE : K_TEXT, 300 + i);
    one_call o = {eng, &js};
    double took = run_bounded("eng_compress of 64 jobs, every run hangs", one_call_body, &o,
                              LIVENESS_S);
    assert_true(took < LIVENESS_S);
    tally t = {0};
    assert_int_equal(jobset_check(&js, &t, "all hang"), 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &t);
    assert_int_equal(st.bricks_card, 0);
    assert_true(st.fallback_error > 0);
    run_bounded("eng_close after every run hung", close_body, eng, LIVENESS_S);
    jobset_free(&js);
}

/* Errors and hangs together on two compute units with three buffer sets each. */
static void test_errors_and_hangs_multi_cu(void **state)
{
    eng_config c = emu_cfg();
    c.cus = 2;
    c.bufsets = 3;
    c.emu_error_rate = 0.2;
    c.emu_hang_rate = 0.1;
    c.card_timeout_ms = 50;
    c.emu_card_mbps = 500;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 5,
                .proto = {.eng = eng, .calls = 60, .max_jobs = 20, .min_len = 1,
                          .max_len = BS, .use_submit = 1, .pause_us = 4000}};
    run_bounded("callers, 2 CUs with errors and hangs", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    assert_true(st.fallback_error > 0);
    run_bounded("eng_close", close_body, eng, LIVENESS_S);
}

/* One thread, several submissions in flight at once: the first goes to a slow card, the
 * rest to software while the card is busy, so they finish out of order; each job's result
 * is its own. Waited for in reverse order, and again in a shuffled order over rounds. */
#define TICKETS 6
typedef struct {
    eng_ctx *eng;
    int bad;
    tally t;
    double first_wait_s, card_wait_s;
} inflight_arg;

static void inflight_body(void *p)
{
    inflight_arg *a = p;
    jobset js[TICKETS];
    eng_ticket tk[TICKETS];
    uint64_t s = 77;
    for (int k = 0; k < TICKETS; k++)
        jobset_init(&js[k], 8);
    for (int round = 0; round < 8; round++) {
        for (int k = 0; k < TICKETS; k++)
            for (size_t i = 0; i < js[k].n; i++) {
                uint32_t len = round == 0 ? BS : (uint32_t)(SMALL + mix64(&s) % (BS - SMALL + 1));
                int kind = (i + (size_t)k) % 7 == 6 ? K_NOISE : K_TEXT;
                jobset_set(&js[k], i, len, kind, mix64(&s));
            }
        double t0 = now_s();
        for (int k = 0; k < TICKETS; k++)
            eng_submit(a->eng, js[k].jobs, js[k].n, &tk[k]);
        int order[TICKETS];
        for (int k = 0; k < TICKETS; k++)
            order[k] = TICKETS - 1 - k;
        if (round > 0)
            for (int k = TICKETS - 1; k > 0; k--) {
                int r = (int)(mix64(&s) % (uint64_t)(k + 1)), x = order[k];
                order[k] = order[r], order[r] = x;
            }
        for (int k = 0; k < TICKETS; k++) {
            eng_wait(a->eng, &tk[order[k]]);
            if (round == 0 && k == 0)
                a->first_wait_s = now_s() - t0;
        }
        if (round == 0)
            a->card_wait_s = now_s() - t0;
        for (int k = 0; k < TICKETS; k++) {
            char who[64];
            snprintf(who, sizeof(who), "round %d ticket %d", round, k);
            a->bad += jobset_check(&js[k], &a->t, who);
        }
    }
    for (int k = 0; k < TICKETS; k++)
        jobset_free(&js[k]);
}

static void test_submit_wait_in_flight(void **state)
{
    eng_config c = emu_cfg();
    c.emu_card_mbps = 5;               /* a brick of 8 x 64 KiB takes the card ~105 ms */
    c.bufsets = 1;
    eng_ctx *eng = open_cfg(&c);
    inflight_arg a = {.eng = eng};
    run_bounded("submissions in flight from one thread", inflight_body, &a, LIVENESS_S);
    print_message("    round 0: last ticket done after %.4f s, all after %.4f s\n",
                  a.first_wait_s, a.card_wait_s);
    assert_int_equal(a.bad, 0);
    /* round 0: the first ticket's brick is on the card for ~105 ms; the last one, done in
     * software while the card was busy, finished well before it */
    assert_true(a.first_wait_s < a.card_wait_s);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &a.t);
    /* both paths were used, so completions interleaved out of submission order */
    assert_true(st.bricks_card > 0);
    assert_true(st.bricks_sw > 0);
    assert_true(st.fallback_busy > 0);
    eng_close(eng);
}

/* After heavy use, with nothing pending, eng_close returns promptly. */
static void test_close_after_heavy_use(void **state)
{
    eng_config c = emu_cfg();
    c.bufsets = 4;
    eng_ctx *eng = open_cfg(&c);
    crowd cr = {.n = 8,
                .proto = {.eng = eng, .calls = 40, .max_jobs = 16, .min_len = 1,
                          .max_len = BS}};
    run_bounded("heavy use", crowd_run, &cr, LIVENESS_S);
    assert_int_equal(cr.bad, 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &cr.sum);
    double took = run_bounded("eng_close after heavy use", close_body, eng, LIVENESS_S);
    assert_true(took < 5.0);
}

/* eng_close while submitted jobs sit on a hung card run: close waits for the run in flight
 * (it times out and goes to software) and returns; every job is done and right. */
static void test_close_with_hung_run_in_flight(void **state)
{
    eng_config c = emu_cfg();
    c.emu_hang_rate = 1.0;
    c.card_timeout_ms = 300;
    eng_ctx *eng = open_cfg(&c);
    jobset js;
    jobset_init(&js, 40);
    for (size_t i = 0; i < js.n; i++)
        jobset_set(&js, i, 2 * KIB + (uint32_t)i * 1500, K_TEXT, 500 + i);
    eng_ticket tk;
    eng_submit(eng, js.jobs, js.n, &tk);
    usleep(50000);                     /* the first run is hung on the card by now */
    run_bounded("eng_close with a hung run in flight", close_body, eng, LIVENESS_S);
    assert_int_equal(tk.pending, 0);
    pthread_cond_destroy(&tk.done);
    assert_int_equal(jobset_check(&js, NULL, "closed with hung run"), 0);
    jobset_free(&js);
}

/* A block size that is not a whole number of KiB (the kernel's stride is given in KiB): the
 * engine either refuses it at open or compresses every job right. */
static void test_odd_block_size(void **state)
{
    static const uint32_t sizes[] = {64 * KIB + 512, 4 * KIB + 100, 3000};
    int sizes_wrong = 0;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint32_t bs = sizes[k];
        eng_config c = emu_cfg();
        c.block_size = bs;
        c.card_only = 1;
        char err[256] = "";
        eng_ctx *eng = eng_open(&c, err, sizeof(err));
        if (!eng) {
            print_message("    block size %u refused: %s\n", bs, err);
            assert_true(strlen(err) > 0);
            continue;
        }
        jobset js;
        jobset_init(&js, 32);
        for (size_t i = 0; i < js.n; i++)
            jobset_set(&js, i, i % 4 == 3 ? bs : 1024 + (uint32_t)(i * 7919 % (bs - 1024)),
                       K_TEXT, 7000 + i);
        eng_compress(eng, js.jobs, js.n);
        tally t = {0};
        char who[64];
        snprintf(who, sizeof(who), "block size %u", bs);
        int bad = jobset_check(&js, &t, who);
        eng_stats st;
        eng_get_stats(eng, &st);
        expect_counters(&st, &t);
        jobset_free(&js);
        eng_close(eng);
        if (bad)
            print_message("    block size %u: %d of 32 jobs wrong\n", bs, bad);
        sizes_wrong += bad > 0;
    }
    if (sizes_wrong)
        fail_msg("%d block size(s) accepted by eng_open gave wrong output", sizes_wrong);
}

/* One call of more jobs than the engine's queue holds, on a card that is never bypassed. */
static void test_one_huge_call(void **state)
{
    eng_config c = emu_cfg();
    c.card_only = 1;
    eng_ctx *eng = open_cfg(&c);
    jobset js;
    jobset_init(&js, 2500);
    for (size_t i = 0; i < js.n; i++)
        jobset_set(&js, i, 1024 + (uint32_t)(i * 37 % 3000), i % 11 == 0 ? K_NOISE : K_TEXT,
                   20000 + i);
    one_call o = {eng, &js};
    run_bounded("one call of 2500 jobs", one_call_body, &o, LIVENESS_S);
    tally t = {0};
    assert_int_equal(jobset_check(&js, &t, "huge call"), 0);
    eng_stats st;
    eng_get_stats(eng, &st);
    expect_counters(&st, &t);
    assert_int_equal(st.blocks_card, 2500);
    assert_true(st.bricks_card >= 2500 / 8);
    jobset_free(&js);
    eng_close(eng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_emu),
        cmocka_unit_test(test_mixed_sizes),
        cmocka_unit_test(test_concurrent_mixed),
        cmocka_unit_test(test_bricks_pack_callers),
        cmocka_unit_test(test_busy_card_falls_back),
        cmocka_unit_test(test_card_only_never_busy),
        cmocka_unit_test(test_bricks_fill_while_card_busy),
        cmocka_unit_test(test_injected_errors),
        cmocka_unit_test(test_card_always_fails),
        cmocka_unit_test(test_silent_corruption_caught),
        cmocka_unit_test(test_silent_corruption_caught_on_card),
        cmocka_unit_test(test_big_bricks_shared_copies),
        cmocka_unit_test(test_host_memory_read_in_place),
        cmocka_unit_test(test_host_memory_software),
        cmocka_unit_test(test_host_memory_held_while_set_off),
        cmocka_unit_test(test_verify_passes_good_card),
        cmocka_unit_test(test_verify_passes_good_card_on_card),
        cmocka_unit_test(test_hangs),
        cmocka_unit_test(test_hung_sets_stay_off),
        cmocka_unit_test(test_slow_runs_recover),
        cmocka_unit_test(test_single_call_all_hang),
        cmocka_unit_test(test_errors_and_hangs_multi_cu),
        cmocka_unit_test(test_submit_wait_in_flight),
        cmocka_unit_test(test_close_after_heavy_use),
        cmocka_unit_test(test_close_with_hung_run_in_flight),
        cmocka_unit_test(test_odd_block_size),
        cmocka_unit_test(test_one_huge_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
