/* The software pool (engine/eng_sw.c) on its own: a brick to compress comes back
 * compressed and measured; a card's brick is checked, a good output kept as it is and a wrong
 * one compressed again and counted; a saturated pool refuses what it cannot start soon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <lz4.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "eng_internal.h"

#define LEN 65536u

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned done;
    uint32_t redone;
    int hold;                          /* on_done waits while set: its thread stays taken */
} reports;

static void on_done(void *arg, eng_brick *b)
{
    reports *r = arg;
    pthread_mutex_lock(&r->lock);
    r->done++;
    r->redone = b->redone;
    pthread_cond_broadcast(&r->cond);
    while (r->hold)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

static void wait_reports(reports *r, unsigned n)
{
    pthread_mutex_lock(&r->lock);
    while (r->done < n)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

typedef struct {
    uint8_t src[LEN];
    uint8_t dst[LEN + LEN / 255 + 16];
    eng_job job;
} one_job;

static one_job *job_new(void)
{
    one_job *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    for (uint32_t i = 0; i < LEN; i++)  /* compressible: short runs of a few letters */
        j->src[i] = (uint8_t)('a' + (i / 7) % 5);
    j->job = (eng_job){.src = j->src, .len = LEN, .dst = j->dst, .dst_cap = sizeof(j->dst)};
    return j;
}

static int job_decodes(const one_job *j)
{
    uint8_t back[LEN];
    int n = LZ4_decompress_safe((const char *)j->dst, (char *)back, (int)j->job.out_len,
                                (int)LEN);
    return n == (int)LEN && memcmp(back, j->src, LEN) == 0;
}

/* Runs one brick (a card's when from_card) on a fresh pool of two threads. */
static reports run_one(uint32_t from_card, one_job *j, uint64_t *ps_per_byte)
{
    reports r = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    char err[256] = "";
    eng_sw_pool *p = eng_sw_open(2, on_done, &r, err, sizeof(err));
    if (!p)
        fail_msg("eng_sw_open: %s", err);
    assert_int_equal(eng_sw_threads(p), 2);
    assert_int_equal(eng_sw_ps_per_byte(p), 0);
    eng_brick b = {.tasks = {{.job = &j->job}}, .n = 1, .from_card = from_card};
    eng_sw_add(p, &b);
    wait_reports(&r, 1);
    if (ps_per_byte)
        *ps_per_byte = eng_sw_ps_per_byte(p);
    eng_sw_close(p);
    return r;
}

static void test_compress_is_measured(void **state)
{
    (void)state;
    one_job *j = job_new();
    uint64_t ps = 0;
    run_one(0, j, &ps);
    assert_true(j->job.out_len < LEN && job_decodes(j));
    assert_true(ps > 0);
    free(j);
}

/* A card's output is checked: a good one is kept, a wrong one compressed again. A check is
 * not a measure of software's rate. */
static void test_check_catches_wrong_output(void **state)
{
    (void)state;
    one_job *j = job_new();
    eng_sw_compress_job(&j->job);
    uint32_t good_len = j->job.out_len;
    uint64_t ps = 1;
    reports r = run_one(1, j, &ps);
    assert_int_equal(r.redone, 0);
    assert_int_equal(j->job.out_len, good_len);
    assert_int_equal(ps, 0);
    j->dst[good_len / 2] ^= 0xff;      /* a card's bit error */
    r = run_one(1, j, NULL);
    assert_int_equal(r.redone, 1);
    assert_true(job_decodes(j));
    free(j);
}

/* A pool whose threads are all taken refuses a brick to compress (eng_sw_try_add), so that
 * the card keeps it; eng_sw_add queues it instead. The one thread is held in its report. */
static void test_try_add_refuses_when_full(void **state)
{
    (void)state;
    reports r = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .hold = 1};
    char err[256] = "";
    eng_sw_pool *p = eng_sw_open(1, on_done, &r, err, sizeof(err));
    assert_non_null(p);
    one_job *a = job_new(), *b = job_new();
    eng_brick ba = {.tasks = {{.job = &a->job}}, .n = 1};
    eng_brick bb = {.tasks = {{.job = &b->job}}, .n = 1};
    assert_int_equal(eng_sw_try_add(p, &ba, 0), 0);   /* no room for compressing at all */
    assert_int_equal(eng_sw_try_add(p, &ba, 4), 1);
    wait_reports(&r, 1);               /* its thread is now held in on_done */
    assert_int_equal(eng_sw_try_add(p, &bb, 4), 0);
    eng_sw_add(p, &bb);
    pthread_mutex_lock(&r.lock);
    r.hold = 0;
    pthread_cond_broadcast(&r.cond);
    pthread_mutex_unlock(&r.lock);
    wait_reports(&r, 2);
    assert_true(job_decodes(a) && job_decodes(b));
    eng_sw_close(p);
    free(a), free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compress_is_measured),
        cmocka_unit_test(test_check_catches_wrong_output),
        cmocka_unit_test(test_try_add_refuses_when_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
