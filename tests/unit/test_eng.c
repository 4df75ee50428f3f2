/* Unit tests of the software engine: every job round-trips through the stock LZ4 decoder,
 * incompressible input is reported as "store raw", concurrent callers each get their own
 * results, and the counters add up. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/* cmocka hands every test a state pointer that most tests have no use for. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "eng.h"

#include <lz4.h>
#include <xxhash.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testdata.h"

#define MIB (1u << 20)


static eng_ctx *open_sw(unsigned threads)
{
    char err[256] = "";
    eng_config cfg = {.backend = ENG_BACKEND_SW, .sw_threads = threads};
    eng_ctx *eng = eng_open(&cfg, err, sizeof(err));
    if (!eng)
        fail_msg("eng_open: %s", err);
    return eng;
}

static void job_init(eng_job *job, const uint8_t *src, uint32_t len)
{
    *job = (eng_job){0};
    job->src = src;
    job->len = len;
    job->dst_cap = eng_bound(len);
    job->dst = malloc(job->dst_cap);
    job->out_len = 0xdeadbeef;
    assert_non_null(job->dst);
}

/* Returns 0 when the job's output decodes to its input (or says "store raw"). */
static int job_check(const eng_job *job)
{
    if (job->out_len >= job->len)
        return job->out_len == job->len ? 0 : -1;
    uint8_t *back = malloc(job->len);
    int n = LZ4_decompress_safe((const char *)job->dst, (char *)back, (int)job->out_len,
                                (int)job->len);
    int ok = n == (int)job->len && memcmp(back, job->src, job->len) == 0;
    free(back);
    return ok ? 0 : -1;
}

static void test_bound_and_name(void **state)
{
    eng_ctx *eng = open_sw(1);
    assert_int_equal(eng_bound(1), (uint32_t)LZ4_compressBound(1));
    assert_int_equal(eng_bound(4 * MIB), (uint32_t)LZ4_compressBound(4 * MIB));
    assert_string_equal(eng_backend_name(eng), "sw");
    eng_close(eng);
    eng_close(NULL);
}

static void test_open_errors(void **state)
{
    char err[256] = "";
    eng_config cfg = {.backend = (eng_backend)42, .sw_threads = 1};
    assert_null(eng_open(&cfg, err, sizeof(err)));
    assert_true(strlen(err) > 0);
}

static void test_open_default_threads(void **state)
{
    eng_ctx *eng = open_sw(0);
    uint8_t src[1000];
    eng_job job;
    fill_text(src, sizeof(src), 3);
    job_init(&job, src, sizeof(src));
    eng_compress(eng, &job, 1);
    assert_int_equal(job_check(&job), 0);
    assert_true(job.out_len < job.len);
    free(job.dst);
    eng_close(eng);
}

static void test_round_trip_text(void **state)
{
    static const uint32_t sizes[] = {1, 100, 64 * 1024 - 1, MIB};
    eng_ctx *eng = open_sw(2);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *src = malloc(sizes[i]);
        eng_job job;
        fill_text(src, sizes[i], i + 1);
        job_init(&job, src, sizes[i]);
        eng_compress(eng, &job, 1);
        assert_int_equal(job_check(&job), 0);
        if (sizes[i] >= 100)
            assert_true(job.out_len < job.len);
        else
            assert_int_equal(job.out_len, 1);   /* one byte never shrinks: stored raw */
        free(job.dst);
        free(src);
    }
    eng_close(eng);
}

static void test_random_is_raw(void **state)
{
    eng_ctx *eng = open_sw(2);
    uint8_t *src = malloc(MIB);
    eng_job job;
    fill_random(src, MIB, 7);
    job_init(&job, src, MIB);
    eng_compress(eng, &job, 1);
    assert_true(job.out_len >= job.len);
    assert_int_equal(job.out_len, job.len);
    free(job.dst);
    free(src);
    eng_close(eng);
}

static void test_small_dst_is_raw(void **state)
{
    eng_ctx *eng = open_sw(1);
    uint8_t src[4096];
    uint8_t dst[16];
    fill_random(src, sizeof(src), 9);
    eng_job job = {.src = src, .len = sizeof(src), .dst = dst, .dst_cap = sizeof(dst)};
    eng_compress(eng, &job, 1);
    assert_int_equal(job.out_len, job.len);
    eng_close(eng);
}

static void test_zeros_shrink(void **state)
{
    eng_ctx *eng = open_sw(2);
    uint8_t *src = calloc(1, MIB);
    eng_job job;
    job_init(&job, src, MIB);
    eng_compress(eng, &job, 1);
    assert_true(job.out_len < MIB / 100);
    assert_int_equal(job_check(&job), 0);
    free(job.dst);
    free(src);
    eng_close(eng);
}

/* Many jobs in one call span several bricks, some of them run by the pool. */
static void test_many_jobs_one_call(void **state)
{
    enum { N = 45 };
    eng_ctx *eng = open_sw(3);
    uint8_t *src = malloc((size_t)N * 65536);
    eng_job jobs[N];
    for (int i = 0; i < N; i++) {
        uint32_t len = 1 + (uint32_t)i * 1453;
        if (i % 5 == 4)
            fill_random(src + (size_t)i * 65536, len, (uint64_t)i + 100);
        else
            fill_text(src + (size_t)i * 65536, len, (uint64_t)i + 100);
        job_init(&jobs[i], src + (size_t)i * 65536, len);
    }
    eng_compress(eng, jobs, N);
    for (int i = 0; i < N; i++) {
        if (job_check(&jobs[i]) != 0)
            fail_msg("job %d of %d is wrong", i, N);
        free(jobs[i].dst);
    }
    free(src);
    eng_close(eng);
}

/* More bricks than the queue holds: the overflow is compressed by the caller itself. */
static void test_queue_overflow(void **state)
{
    enum { N = 800, LEN = 300 };
    eng_ctx *eng = open_sw(1);
    uint8_t *src = malloc((size_t)N * LEN);
    eng_job *jobs = calloc(N, sizeof(*jobs));
    fill_text(src, (size_t)N * LEN, 11);
    for (int i = 0; i < N; i++)
        job_init(&jobs[i], src + (size_t)i * LEN, LEN);
    eng_compress(eng, jobs, N);
    for (int i = 0; i < N; i++) {
        if (job_check(&jobs[i]) != 0)
            fail_msg("job %d of %d is wrong", i, N);
        free(jobs[i].dst);
    }
    eng_stats st;
    eng_get_stats(eng, &st);
    assert_int_equal(st.blocks_sw, N);
    assert_int_equal(st.bricks_sw, N / 8);
    free(jobs);
    free(src);
    eng_close(eng);
}

typedef struct {
    eng_ctx *eng;
    int id;
    int failures;
    uint64_t jobs, bricks, bytes_in, bytes_out;
} caller_arg;

/* One caller: 50 calls of 1..20 jobs of varied sizes and kinds, each checked on return. */
static void *caller(void *p)
{
    caller_arg *a = p;
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(a->id + 1);
    enum { MAX_JOBS = 20, MAX_LEN = 70000 };
    uint8_t *src = malloc((size_t)MAX_JOBS * MAX_LEN);
    eng_job jobs[MAX_JOBS] = {{0}};
    for (int i = 0; i < MAX_JOBS; i++) {
        jobs[i].dst_cap = eng_bound(MAX_LEN);
        jobs[i].dst = malloc(jobs[i].dst_cap);
    }
    for (int call = 0; call < 50; call++) {
        size_t n = 1 + rng_next(&s) % MAX_JOBS;
        for (size_t i = 0; i < n; i++) {
            uint32_t len = 1 + rng_next(&s) % MAX_LEN;
            uint8_t *b = src + i * MAX_LEN;
            if (rng_next(&s) % 4 == 0)
                fill_random(b, len, s);
            else
                fill_text(b, len, s);
            jobs[i].src = b;
            jobs[i].len = len;
            jobs[i].out_len = 0;
        }
        eng_compress(a->eng, jobs, n);
        a->bricks += (n + 7) / 8;
        for (size_t i = 0; i < n; i++) {
            a->failures += job_check(&jobs[i]) != 0;
            a->jobs++;
            a->bytes_in += jobs[i].len;
            a->bytes_out += jobs[i].out_len < jobs[i].len ? jobs[i].out_len : jobs[i].len;
        }
    }
    for (int i = 0; i < MAX_JOBS; i++)
        free(jobs[i].dst);
    free(src);
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    enum { CALLERS = 4 };
    eng_ctx *eng = open_sw(2);
    pthread_t t[CALLERS];
    caller_arg args[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        args[i] = (caller_arg){.eng = eng, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, caller, &args[i]), 0);
    }
    eng_stats want = {0}, got;
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(args[i].failures, 0);
        want.blocks_sw += args[i].jobs;
        want.bricks_sw += args[i].bricks;
        want.bytes_in += args[i].bytes_in;
        want.bytes_out += args[i].bytes_out;
    }
    eng_get_stats(eng, &got);
    assert_int_equal(got.blocks_sw, want.blocks_sw);
    assert_int_equal(got.bricks_sw, want.bricks_sw);
    assert_int_equal(got.bytes_in, want.bytes_in);
    assert_int_equal(got.bytes_out, want.bytes_out);
    eng_close(eng);
}

/* want_sums: both checksums an LZ4 frame carries come back with the job, equal to XXH32
 * of the input and of the output (for a raw block only the input's); without it, none. */
static void test_sums(void **state)
{
    eng_ctx *eng = open_sw(2);
    uint8_t *text = malloc(MIB), *noise = malloc(MIB);
    fill_text(text, MIB, 3);
    fill_random(noise, MIB, 4);
    eng_job jobs[3];
    job_init(&jobs[0], text, MIB);
    job_init(&jobs[1], noise, MIB);
    job_init(&jobs[2], text, 1000);
    jobs[0].want_sums = jobs[1].want_sums = 1;
    eng_compress(eng, jobs, 3);
    assert_true(jobs[0].sums_done && jobs[1].sums_done);
    assert_false(jobs[2].sums_done);
    assert_true(jobs[0].out_len < MIB);
    assert_int_equal(jobs[0].src_sum, XXH32(text, MIB, 0));
    assert_int_equal(jobs[0].out_sum, XXH32(jobs[0].dst, jobs[0].out_len, 0));
    assert_int_equal(jobs[1].out_len, MIB);            /* raw: the input's sum is the block's */
    assert_int_equal(jobs[1].src_sum, XXH32(noise, MIB, 0));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(job_check(&jobs[i]), 0);
        free(jobs[i].dst);
    }
    free(text);
    free(noise);
    eng_close(eng);
}

static void test_stats_add_up(void **state)
{
    eng_ctx *eng = open_sw(2);
    eng_stats st;
    eng_get_stats(eng, &st);
    assert_int_equal(st.blocks_sw + st.bricks_sw + st.bytes_in + st.bytes_out, 0);

    uint8_t *zeros = calloc(1, 65536), *noise = malloc(65536);
    fill_random(noise, 65536, 5);
    eng_job jobs[17];
    uint64_t out = 0;
    for (int i = 0; i < 17; i++)
        job_init(&jobs[i], i % 2 ? noise : zeros, 65536);
    eng_compress(eng, jobs, 17);       /* 3 bricks */
    eng_compress(eng, jobs, 1);        /* 1 brick */
    eng_compress(eng, jobs, 0);        /* nothing */
    for (int i = 0; i < 17; i++) {
        assert_int_equal(job_check(&jobs[i]), 0);
        out += jobs[i].out_len;
    }
    out += jobs[0].out_len;
    eng_get_stats(eng, &st);
    assert_int_equal(st.blocks_sw, 18);
    assert_int_equal(st.bricks_sw, 4);
    assert_int_equal(st.bytes_in, 18 * 65536);
    assert_int_equal(st.bytes_out, out);
    assert_true(st.bytes_out < st.bytes_in);
    for (int i = 0; i < 17; i++)
        free(jobs[i].dst);
    free(zeros);
    free(noise);
    eng_close(eng);
}

/* What a continuation sees: how often it ran, whether every job was done when it did, and
 * on which thread. */
typedef struct {
    eng_job *jobs;
    size_t n;
    int runs, all_done;
    pthread_t thread;
} then_seen;

static void then_note(void *arg)
{
    then_seen *t = arg;
    t->runs++;
    t->thread = pthread_self();
    t->all_done = 1;
    for (size_t i = 0; i < t->n; i++)
        t->all_done &= t->jobs[i].out_len != 0xdeadbeef && job_check(&t->jobs[i]) == 0;
}

/* eng_submit_then: the continuation runs once, after the last job and before eng_wait
 * returns; on a pool thread when the pool compressed, on the caller's when nothing was
 * queued; and with no jobs at all, at once. */
static void test_submit_then(void **state)
{
    enum { N = 24, LEN = 65536 };
    eng_ctx *eng = open_sw(2);
    uint8_t *src = malloc((size_t)N * LEN);
    eng_job jobs[N];
    fill_text(src, (size_t)N * LEN, 5);
    for (int i = 0; i < N; i++)
        job_init(&jobs[i], src + (size_t)i * LEN, LEN);
    then_seen seen = {jobs, N, 0, 0, pthread_self()};
    eng_ticket t;
    eng_submit_then(eng, jobs, N, &t, then_note, &seen);
    eng_wait(eng, &t);
    assert_int_equal(seen.runs, 1);
    assert_true(seen.all_done);
    assert_false(pthread_equal(seen.thread, pthread_self()));  /* 1.5 MiB goes to the pool */
    eng_job small;
    job_init(&small, src, 100);       /* small enough to be compressed inline */
    then_seen one = {&small, 1, 0, 0, 0};
    eng_submit_then(eng, &small, 1, &t, then_note, &one);
    eng_wait(eng, &t);
    assert_int_equal(one.runs, 1);
    assert_true(one.all_done);
    assert_true(pthread_equal(one.thread, pthread_self()));
    then_seen none = {NULL, 0, 0, 0, 0};
    eng_submit_then(eng, NULL, 0, &t, then_note, &none);
    assert_int_equal(none.runs, 1);
    eng_wait(eng, &t);
    assert_int_equal(none.runs, 1);
    for (int i = 0; i < N; i++)
        free(jobs[i].dst);
    free(small.dst);
    free(src);
    eng_close(eng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_and_name),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_open_default_threads),
        cmocka_unit_test(test_round_trip_text),
        cmocka_unit_test(test_random_is_raw),
        cmocka_unit_test(test_small_dst_is_raw),
        cmocka_unit_test(test_zeros_shrink),
        cmocka_unit_test(test_many_jobs_one_call),
        cmocka_unit_test(test_queue_overflow),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_stats_add_up),
        cmocka_unit_test(test_sums),
        cmocka_unit_test(test_submit_then),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
