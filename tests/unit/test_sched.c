/* eng_sched: how much of the queue software takes while the card is busy (engine/eng_sched.c).
 * Rates in picoseconds per byte: 77 is a GPU's 13 GB/s, 2325 one core's lz4 -1 (0.43 GB/s),
 * 5000 an emulated card modelled at 200 MB/s. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "eng_internal.h"

#define MIB (1u << 20)

static const uint32_t eight[8] = {MIB, MIB, MIB, MIB, MIB, MIB, MIB, MIB};

/* Nothing is known before the card's first run: the card decides; software unmeasured gets
 * one job, to be measured. */
static void test_unmeasured(void **state)
{
    (void)state;
    eng_rates none = {0, 0, 0}, card_only = {77, 0, 0};
    assert_int_equal(eng_sched_sw_take(&none, eight, 8, 256ull * MIB, 128ull * MIB), 0);
    assert_int_equal(eng_sched_sw_take(&card_only, eight, 8, 256ull * MIB, 128ull * MIB), 1);
    assert_int_equal(eng_sched_sw_take(&card_only, eight, 0, 0, 128ull * MIB), 0);
}

/* A long queue ahead of a fast card: a core's share of 8 blocks (19.5 ms) is done before
 * the card's 25 ms for the rest, so software takes all 8. */
static void test_long_queue_shares(void **state)
{
    (void)state;
    eng_rates gpu = {77, 2325, 0};
    assert_int_equal(eng_sched_sw_take(&gpu, eight, 8, 256ull * MIB, 128ull * MIB), 8);
}

/* The end of a batch: the card finishes 8 MiB in 0.6 ms, a core one block in 2.4 ms. Giving
 * software anything would make the batch wait for it. */
static void test_queue_end_stays_on_card(void **state)
{
    (void)state;
    eng_rates gpu = {77, 2325, 0};
    assert_int_equal(eng_sched_sw_take(&gpu, eight, 8, 8ull * MIB, 0), 0);
    assert_int_equal(eng_sched_sw_take(&gpu, eight, 8, 16ull * MIB, 0), 0);
    /* somewhere between: as many as finish in time */
    unsigned k = eng_sched_sw_take(&gpu, eight, 8, 40ull * MIB, 0);
    assert_true(k > 0 && k < 8);
    assert_true((uint64_t)k * MIB * 2325 <= (40ull - k) * MIB * 77);
    assert_true((uint64_t)(k + 1) * MIB * 2325 > (40ull - k - 1) * MIB * 77);
}

/* A card slower than a core: software takes what it can finish before the card, which
 * here is most of a short queue. */
static void test_slow_card(void **state)
{
    (void)state;
    eng_rates emu = {5000, 2325, 0};
    unsigned k = eng_sched_sw_take(&emu, eight, 8, 8ull * MIB, 0);
    assert_int_equal(k, 5);            /* 5 x 2325 <= 3 x 5000; 6 x 2325 > 2 x 5000 */
}

/* However fast software is, it never takes the whole queue from a card with nothing else
 * to do (the card would then finish first), nor more than is queued. */
static void test_card_keeps_some(void **state)
{
    (void)state;
    eng_rates emu = {5000, 1, 0};
    assert_int_equal(eng_sched_sw_take(&emu, eight, 8, 3ull * MIB, 0), 2);
    assert_int_equal(eng_sched_sw_take(&emu, eight, 8, 3ull * MIB, 8ull * MIB), 3);
}

/* A card idle more than 2 % of late keeps up with its callers: software takes none of its
 * queue, however long, so the host's CPU goes to feeding and checking the card. A slow card
 * that is never idle still gets software's help. */
static void test_card_keeps_up(void **state)
{
    (void)state;
    eng_rates gpu = {77, 2325, ENG_SCHED_IDLE_PPM + 1};
    assert_int_equal(eng_sched_sw_take(&gpu, eight, 8, 256ull * MIB, 128ull * MIB), 0);
    gpu.card_idle_ppm = ENG_SCHED_IDLE_PPM;
    assert_int_equal(eng_sched_sw_take(&gpu, eight, 8, 256ull * MIB, 128ull * MIB), 8);
    eng_rates emu = {5000, 2325, 0};
    assert_int_equal(eng_sched_sw_take(&emu, eight, 8, 8ull * MIB, 0), 5);
}

/* The idle share follows the windows: a card busy from an idle start passes under the
 * limit within 6 windows (60 ms), and a window idle a tenth of its time puts it back over. */
static void test_idle_share(void **state)
{
    (void)state;
    uint32_t ppm = 1000000;
    int windows = 0;
    while (ppm > ENG_SCHED_IDLE_PPM) {
        ppm = eng_sched_idle_ppm(ppm, 0, 10000000);
        windows++;
    }
    assert_int_equal(windows, 6);
    assert_int_equal(eng_sched_idle_ppm(0, 1000000, 10000000), 50000);
    assert_int_equal(eng_sched_idle_ppm(0, 20000000, 10000000), 500000);  /* capped */
    assert_int_equal(eng_sched_idle_ppm(300, 5, 0), 300);                 /* no time passed */
}

static void test_ewma(void **state)
{
    (void)state;
    assert_int_equal(eng_sched_ewma(0, 100), 100);
    assert_int_equal(eng_sched_ewma(100, 200), 125);
    uint64_t v = 100;
    for (int i = 0; i < 20; i++)
        v = eng_sched_ewma(v, 1000);
    assert_true(v > 990 && v <= 1000);
}

/* A deep queue is shared while the card is idle (a batch that its buffer sets hold whole)
 * and while software is not measured yet (the prior: 2500 ps per byte); the queue one
 * writer keeps in the engine (32 MiB) is not, and neither is anything before the card's
 * first run. */
static void test_split(void **state)
{
    (void)state;
    eng_rates idle_gpu = {54, 0, 900000}, measured = {54, 2325, 900000}, none = {0, 2325, 0};
    unsigned k = eng_sched_sw_split(&idle_gpu, eight, 8, 256ull * MIB, 0);
    assert_true(k > 0 && k < 8);       /* k x 2500 <= (256 - k) x 54 */
    assert_true((uint64_t)k * 2500 <= (256ull - k) * 54);
    assert_true((uint64_t)(k + 1) * 2500 > (256ull - k - 1) * 54);
    assert_int_equal(eng_sched_sw_take(&idle_gpu, eight, 8, 256ull * MIB, 0), 0);
    assert_true(eng_sched_sw_split(&measured, eight, 8, 256ull * MIB, 0) >= k);
    assert_int_equal(eng_sched_sw_split(&measured, eight, 8, 32ull * MIB, 0), 0);
    assert_int_equal(eng_sched_sw_split(&none, eight, 8, 256ull * MIB, 0), 0);
}

/* The best rate follows a faster run at once and a slower card by 1/64 a run. */
static void test_best(void **state)
{
    (void)state;
    assert_int_equal(eng_sched_best(0, 80), 80);
    assert_int_equal(eng_sched_best(80, 60), 60);
    assert_int_equal(eng_sched_best(640, 1000), 650);
    uint64_t b = 64;
    for (int i = 0; i < 100; i++)
        b = eng_sched_best(b, 200);
    assert_int_equal(b, 200);
}

/* Runs collected two at a time (the second a moment after the first, whose gap holds both
 * runs' time) read as the unit's true rate once taken together, never as the second run's
 * near-zero gap; the window reopens after each sample. */
static void test_window(void **state)
{
    (void)state;
    eng_rate_window w = {0};
    uint64_t best = 0, got = 0;
    for (unsigned r = 0; r < 4 * ENG_RATE_RUNS; r++) {
        uint64_t ns = r % 2 ? 50000 : 2 * 400000 - 50000;   /* 8 MiB at 40 ps, in pairs */
        uint64_t ps = eng_sched_window(&w, ns, 8 << 20);
        assert_true((r + 1) % ENG_RATE_RUNS == 0 ? ps != 0 : ps == 0);
        if (ps)
            best = eng_sched_best(best, ps), got++;
    }
    assert_int_equal(got, 4);
    assert_true(best >= 45 && best <= 50);               /* 800 us for 16 MiB: 47.7 ps */
    assert_int_equal(w.runs, 0);
    assert_int_equal(eng_sched_window(&w, 0, 0), 0);
}

/* The queue's tail batch: the jobs of the last job's call, counted back across the ring's
 * end and up to the bound; another call's job ends it. */
static void test_tail_batch(void **state)
{
    (void)state;
    eng_ticket a, b;
    eng_task ring[10] = {{0}};
    for (unsigned i = 0; i < 10; i++)
        ring[i].call = i < 3 || i > 7 ? &a : &b;     /* a a a b b b b b a a */
    assert_int_equal(eng_sched_tail_batch(ring, 10, 0, 0, 64), 0);
    assert_int_equal(eng_sched_tail_batch(ring, 10, 3, 5, 64), 5);   /* b x 5 */
    assert_int_equal(eng_sched_tail_batch(ring, 10, 3, 5, 4), 4);    /* bounded */
    assert_int_equal(eng_sched_tail_batch(ring, 10, 8, 5, 64), 5);   /* a a | a a a: wraps */
    assert_int_equal(eng_sched_tail_batch(ring, 10, 5, 6, 64), 3);   /* b b b a a | a */
    assert_int_equal(eng_sched_tail_batch(ring, 10, 6, 3, 64), 1);   /* b b a */
}

/* A brick short of its capacity waits while the card is busy, until the earlier of its
 * oldest job's bound and the moment it must start to keep the card fed; it starts at once
 * when it is full, when a compute unit is idle, or when waiting is off. */
static void test_fill_wait(void **state)
{
    (void)state;
    eng_fill f = {.now_ns = 1000000, .head_ns = 900000, .fill_ns = 2000000,
                  .card_free_ns = 5000000, .start_ns = 300000, .queued = 3, .capacity = 64};
    assert_int_equal(eng_sched_fill_wait(&f), 1900000);  /* the bound: 2.9 ms, then 4.7 */
    f.card_free_ns = 2000000;
    assert_int_equal(eng_sched_fill_wait(&f), 700000);   /* the card needs it at 1.7 ms */
    f.start_ns = 1500000;
    assert_int_equal(eng_sched_fill_wait(&f), 0);        /* too late to wait */
    f.start_ns = 300000, f.queued = 64;
    assert_int_equal(eng_sched_fill_wait(&f), 0);        /* full */
    f.queued = 3, f.card_free_ns = 0;
    assert_int_equal(eng_sched_fill_wait(&f), 0);        /* a compute unit is idle */
    f.card_free_ns = 5000000, f.fill_ns = 0;
    assert_int_equal(eng_sched_fill_wait(&f), 0);        /* waiting is off */
    f.fill_ns = 2000000, f.now_ns = 2900000;
    assert_int_equal(eng_sched_fill_wait(&f), 0);        /* the oldest job waited its bound */
    f.card_free_ns = 200000;
    assert_int_equal(eng_sched_fill_wait(&f), 0);        /* the card ran out already */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unmeasured),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_best),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_tail_batch),
        cmocka_unit_test(test_long_queue_shares),
        cmocka_unit_test(test_queue_end_stays_on_card),
        cmocka_unit_test(test_slow_card),
        cmocka_unit_test(test_card_keeps_some),
        cmocka_unit_test(test_card_keeps_up),
        cmocka_unit_test(test_idle_share),
        cmocka_unit_test(test_ewma),
        cmocka_unit_test(test_fill_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
