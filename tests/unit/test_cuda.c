/* Unit tests of the CUDA backend (plugin fpgalz4fs-cuda.so) through the real engine.
 *
 * On a host without a usable GPU (or without the plugin) the GPU tests are skipped, saying
 * why, and what can still be checked is: engine=cuda fails to open with a clear reason.
 * On a GPU: every block the card compressed decodes with liblz4 to its own input, blocks
 * that do not shrink come back raw, blocks of any length and several strides (smaller and
 * larger than the kernel's sub-block) work, real CUDA launch errors send bricks to software
 * and the card is used again after its back-off, concurrent callers with several buffer
 * sets lose nothing, and bad device options are refused with the reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <lz4.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "eng.h"
#include "testdata.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

static int have_gpu;
static char gpu_why[512];

#define NEED_GPU()                                                                      \
    do {                                                                                \
        if (!have_gpu) {                                                                \
            print_message("no usable CUDA GPU (%s): skipped\n", gpu_why);               \
            skip();                                                                     \
        }                                                                               \
    } while (0)

typedef struct {
    eng_job *jobs;
    uint8_t **src;
    size_t n;
} job_set;

enum { D_TEXT, D_RANDOM, D_ZERO, D_HALF, D_KINDS };

static void fill(uint8_t *p, uint32_t len, int kind, uint64_t seed)
{
    if (kind == D_TEXT)
        fill_text(p, len, seed);
    else if (kind == D_RANDOM)
        fill_random(p, len, seed);
    else if (kind == D_ZERO)
        memset(p, 0, len);
    else {                             /* text, then noise: shrinks, with long literal runs */
        fill_text(p, len / 2, seed);
        fill_random(p + len / 2, len - len / 2, seed);
    }
}

static void jobs_make(job_set *js, const uint32_t *lens, size_t n, uint64_t seed)
{
    js->n = n;
    js->jobs = calloc(n, sizeof(*js->jobs));
    js->src = calloc(n, sizeof(*js->src));
    assert_non_null(js->jobs);
    assert_non_null(js->src);
    for (size_t i = 0; i < n; i++) {
        js->src[i] = malloc(lens[i]);
        assert_non_null(js->src[i]);
        fill(js->src[i], lens[i], (int)(i % D_KINDS), seed + i);
        uint32_t cap = eng_bound(lens[i]);
        js->jobs[i] = (eng_job){.src = js->src[i], .len = lens[i], .dst = malloc(cap),
                                .dst_cap = cap, .out_len = 0xdeadbeefu};
        assert_non_null(js->jobs[i].dst);
    }
}

/* Every job decodes to its input; returns how many were stored raw. */
static size_t jobs_check(const job_set *js)
{
    size_t raw = 0;
    for (size_t i = 0; i < js->n; i++) {
        const eng_job *j = &js->jobs[i];
        assert_int_not_equal(j->out_len, 0xdeadbeefu);
        if (j->out_len >= j->len) {
            raw++;
            continue;
        }
        uint8_t *dec = malloc(j->len);
        assert_non_null(dec);
        int n = LZ4_decompress_safe((const char *)j->dst, (char *)dec, (int)j->out_len,
                                    (int)j->len);
        if (n != (int)j->len || memcmp(dec, js->src[i], j->len) != 0)
            fail_msg("job %zu (%u bytes, %u compressed) does not decode to its input", i,
                     j->len, j->out_len);
        free(dec);
    }
    return raw;
}

/* The frame's sums of every job are those of the bytes it holds. */
static void sums_check(const job_set *js)
{
    for (size_t i = 0; i < js->n; i++) {
        const eng_job *j = &js->jobs[i];
        assert_true(j->sums_done);
        assert_int_equal(j->src_sum, XXH32(js->src[i], j->len, 0));
        if (j->out_len < j->len)
            assert_int_equal(j->out_sum, XXH32(j->dst, j->out_len, 0));
    }
}

static void jobs_free(job_set *js)
{
    for (size_t i = 0; i < js->n; i++) {
        free(js->src[i]);
        free(js->jobs[i].dst);
    }
    free(js->jobs);
    free(js->src);
}

static eng_ctx *open_cuda(uint32_t bs, unsigned bufsets, int card_only)
{
    eng_config cfg = {.backend = ENG_BACKEND_CUDA, .block_size = bs, .bufsets = bufsets,
                      .card_only = card_only};
    char err[512];
    eng_ctx *e = eng_open(&cfg, err, sizeof(err));
    if (!e)
        fail_msg("engine=cuda did not open: %s", err);
    assert_string_equal(eng_backend_name(e), "cuda");
    return e;
}

/* ------------------------------------------------------------------ tests */

/* Without a GPU, engine=cuda must refuse to open and say why. */
static void test_no_gpu_refused(void **state)
{
    (void)state;
    if (have_gpu)
        skip();
    eng_config cfg = {.backend = ENG_BACKEND_CUDA};
    char err[512] = "";
    eng_ctx *e = eng_open(&cfg, err, sizeof(err));
    assert_null(e);
    print_message("engine=cuda refused: %s\n", err);
    assert_true(strstr(err, "CUDA") || strstr(err, "cuda"));
}

static void test_probe_names_gpu(void **state)
{
    (void)state;
    NEED_GPU();
    print_message("%s\n", gpu_why);
    assert_non_null(strstr(gpu_why, "GPU 0"));
}

/* Lengths around the kernel's edges: tiny (no match allowed), a sub-block and one byte
 * more, odd lengths, whole blocks; text, noise, zeros and half-and-half. */
static void test_roundtrip_1m(void **state)
{
    (void)state;
    NEED_GPU();
    static const uint32_t lens[] = {
        MIB, MIB, MIB, MIB, MIB - 1, 1024, 1025, 1037, 16384, 16385, 16384 * 3 + 5,
        100000, 65536, 65537, 262147, 777777, 4096, 12345, MIB - 7, 2048,
    };
    size_t n = sizeof(lens) / sizeof(lens[0]);
    job_set js;
    jobs_make(&js, lens, n, 11);
    eng_ctx *e = open_cuda(MIB, 2, 1);
    eng_compress(e, js.jobs, js.n);
    eng_stats st;
    eng_get_stats(e, &st);
    assert_int_equal(st.blocks_card, n);
    assert_int_equal(st.blocks_sw, 0);
    assert_int_equal(st.verify_failed, 0);             /* the GPU's check passes good output */
    assert_int_equal(st.blocks_checked_on_card, n);
    size_t raw = jobs_check(&js);
    for (size_t i = 0; i < n; i++) {
        if (i % D_KINDS == D_RANDOM)
            assert_true(js.jobs[i].out_len >= js.jobs[i].len);      /* noise stays raw */
        if (i % D_KINDS == D_ZERO && lens[i] >= 4096)
            assert_true(js.jobs[i].out_len < lens[i] / 100);
        if (i % D_KINDS == D_TEXT && lens[i] >= 65536)
            assert_true(js.jobs[i].out_len < lens[i] / 2);
    }
    assert_true(raw >= n / D_KINDS);
    eng_close(e);
    jobs_free(&js);
}

static void roundtrip_stride(uint32_t bs, size_t n, unsigned bufsets)
{
    uint32_t *lens = calloc(n, sizeof(*lens));
    assert_non_null(lens);
    for (size_t i = 0; i < n; i++)
        lens[i] = i % 3 ? bs : bs / 2 + (uint32_t)(i * 37 % (bs / 2));
    job_set js;
    jobs_make(&js, lens, n, bs + n);
    for (size_t i = 0; i < n; i++)
        js.jobs[i].want_sums = 1;
    eng_ctx *e = open_cuda(bs, bufsets, 1);
    eng_compress(e, js.jobs, js.n);
    eng_stats st;
    eng_get_stats(e, &st);
    assert_int_equal(st.blocks_card, n);
    assert_int_equal(st.verify_failed, 0);
    assert_int_equal(st.blocks_checked_on_card, n);
    jobs_check(&js);
    sums_check(&js);
    eng_close(e);
    jobs_free(&js);
    free(lens);
}

static void test_stride_4k(void **state)
{
    (void)state;
    NEED_GPU();
    roundtrip_stride(4 * KIB, 3000, 2);
}

static void test_stride_64k(void **state)
{
    (void)state;
    NEED_GPU();
    roundtrip_stride(64 * KIB, 1200, 3);
}

static void test_stride_4m(void **state)
{
    (void)state;
    NEED_GPU();
    roundtrip_stride(4 * MIB, 40, 2);
}

/* Real launch errors: each sends its brick to software, the card rests, then works again. */
static void test_launch_errors_fall_back(void **state)
{
    (void)state;
    NEED_GPU();
    setenv("FPGALZ4FS_CUDA_FAIL_EVERY", "2", 1);
    eng_ctx *e = open_cuda(256 * KIB, 2, 0);
    unsetenv("FPGALZ4FS_CUDA_FAIL_EVERY");
    uint32_t lens[40];
    for (size_t i = 0; i < 40; i++)
        lens[i] = 256 * KIB - (uint32_t)i * 100;
    for (int round = 0; round < 6; round++) {
        job_set js;
        jobs_make(&js, lens, 40, 100u + (uint64_t)round);
        eng_compress(e, js.jobs, js.n);
        jobs_check(&js);
        jobs_free(&js);
        usleep(120000);                /* past the first back-offs */
    }
    eng_stats st;
    eng_get_stats(e, &st);
    print_message("blocks_card=%llu blocks_sw=%llu fallback_error=%llu\n",
                  (unsigned long long)st.blocks_card, (unsigned long long)st.blocks_sw,
                  (unsigned long long)st.fallback_error);
    assert_true(st.fallback_error > 0);
    assert_true(st.blocks_card > 0);
    assert_true(st.blocks_sw > 0);
    assert_int_equal(st.blocks_card + st.blocks_sw, 6 * 40);
    eng_close(e);
}

/* A GPU whose output is wrong, before its own check (env SPOIL_EVERY: a compressor's bug)
 * or after it (SPOIL_BACK_EVERY: a fault on the way back): every run's first compressed
 * block, at a place that moves from run to run. Every job must still decode to its input
 * with the right sums, and (nearly) every spoiled block must be counted and redone. */
static void spoiled_runs(const char *env)
{
    setenv(env, "1", 1);
    eng_ctx *e = open_cuda(256 * KIB, 2, 1);
    unsetenv(env);
    uint32_t lens[32];
    for (size_t i = 0; i < 32; i++)
        lens[i] = 256 * KIB - (uint32_t)i * 33;
    for (int round = 0; round < 8; round++) {
        job_set js;
        jobs_make(&js, lens, 32, 300u + (uint64_t)round);
        for (size_t i = 0; i < js.n; i++)
            js.jobs[i].want_sums = 1;
        eng_compress(e, js.jobs, js.n);
        jobs_check(&js);
        sums_check(&js);
        jobs_free(&js);
    }
    eng_stats st;
    eng_get_stats(e, &st);
    print_message("%s: bricks_card=%llu verify_failed=%llu checked_on_card=%llu\n", env,
                  (unsigned long long)st.bricks_card, (unsigned long long)st.verify_failed,
                  (unsigned long long)st.blocks_checked_on_card);
    assert_true(st.bricks_card >= 8);
    assert_true(st.verify_failed <= st.bricks_card);
    assert_true(st.verify_failed * 4 >= st.bricks_card * 3);
    assert_int_equal(st.blocks_checked_on_card, st.blocks_card);
    eng_close(e);
}

static void test_spoiled_on_gpu_caught(void **state)
{
    (void)state;
    NEED_GPU();
    spoiled_runs("FPGALZ4FS_CUDA_SPOIL_EVERY");
}

static void test_spoiled_on_way_back_caught(void **state)
{
    (void)state;
    NEED_GPU();
    spoiled_runs("FPGALZ4FS_CUDA_SPOIL_BACK_EVERY");
}

typedef struct {
    eng_ctx *e;
    uint64_t seed;
} caller_arg;

static void *caller_main(void *p)
{
    caller_arg *a = p;
    uint32_t lens[48];
    for (size_t i = 0; i < 48; i++)
        lens[i] = 128 * KIB + (uint32_t)((a->seed * 977 + i * 4099) % (128 * KIB));
    for (int r = 0; r < 4; r++) {
        job_set js;
        jobs_make(&js, lens, 48, a->seed * 10 + (uint64_t)r);
        eng_compress(a->e, js.jobs, js.n);
        jobs_check(&js);
        jobs_free(&js);
    }
    return NULL;
}

/* Several callers, three buffer sets, the card and software together. */
static void test_concurrent_callers(void **state)
{
    (void)state;
    NEED_GPU();
    eng_ctx *e = open_cuda(256 * KIB, 3, 0);
    pthread_t t[6];
    caller_arg a[6];
    for (int i = 0; i < 6; i++) {
        a[i] = (caller_arg){e, (uint64_t)i + 1};
        assert_int_equal(pthread_create(&t[i], NULL, caller_main, &a[i]), 0);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    eng_stats st;
    eng_get_stats(e, &st);
    assert_int_equal(st.blocks_card + st.blocks_sw, 6 * 4 * 48);
    assert_true(st.blocks_card > 0);
    eng_close(e);
}

static void test_bad_options_refused(void **state)
{
    (void)state;
    NEED_GPU();
    char err[512];
    eng_config cfg = {.backend = ENG_BACKEND_CUDA, .device = 99};
    assert_null(eng_open(&cfg, err, sizeof(err)));
    print_message("device=99: %s\n", err);
    assert_non_null(strstr(err, "device=99"));
    cfg = (eng_config){.backend = ENG_BACKEND_CUDA, .cus = 2};
    assert_null(eng_open(&cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "cus=1"));
    cfg = (eng_config){.backend = ENG_BACKEND_CUDA, .bufsets = 17};
    assert_null(eng_open(&cfg, err, sizeof(err)));
    assert_non_null(strstr(err, "bufsets"));
}

int main(void)
{
    eng_config cfg = {.backend = ENG_BACKEND_CUDA};
    have_gpu = eng_probe(ENG_BACKEND_CUDA, &cfg, gpu_why, sizeof(gpu_why));
    if (!have_gpu)
        printf("test_cuda: GPU tests SKIPPED: no usable CUDA GPU: %s\n", gpu_why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_gpu_refused),
        cmocka_unit_test(test_probe_names_gpu),
        cmocka_unit_test(test_roundtrip_1m),
        cmocka_unit_test(test_stride_4k),
        cmocka_unit_test(test_stride_64k),
        cmocka_unit_test(test_stride_4m),
        cmocka_unit_test(test_launch_errors_fall_back),
        cmocka_unit_test(test_spoiled_on_gpu_caught),
        cmocka_unit_test(test_spoiled_on_way_back_caught),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_bad_options_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
