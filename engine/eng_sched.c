/* How much of the queue the software pool takes while every buffer set of the card is in
 * flight. Software is slower per byte than a card by an order of magnitude or more: a brick
 * it takes is worth it only if one pool thread finishes it before the card would have
 * finished everything else queued and in flight; otherwise the batch waits for software
 * and card and CPU subtract instead of adding.
 *
 * And only while the card is the bottleneck. A card that was idle a few percent of the
 * recent past keeps up with its callers, so a brick software takes finishes no sooner
 * overall and costs the host four times the CPU the card's path does (the copies and the
 * check of its output). In the filesystem, where that CPU also feeds the card, 8 writers
 * with a GPU wrote 5-11 % faster with this rule (docs/BENCHMARKS.md).
 *
 * A card that reads host memory in place costs the host only the check of its output, and
 * a batch its buffer sets hold whole leaves nothing queued for software: there the queue is
 * split first (eng_sched_sw_split), against the card's best run of late, when the queue ends
 * in one caller's batch (eng.c says why). No idle-share rule there: a caller that hands over
 * a batch and waits for all of it idles the card between its batches, and the share of
 * each batch is what makes the two add up. */
#include "eng_internal.h"

/* The card's part after the first take bytes went to software: what it still holds (about
 * half of what is in flight is done, on average) and the rest of the queue. */
static uint64_t eng_sched_card_ps(const eng_rates *r, uint64_t queued, uint64_t take,
                                  uint64_t in_flight)
{
    return (queued - take + in_flight / 2) * r->card_ps_per_byte;
}

unsigned eng_sched_sw_take(const eng_rates *r, const uint32_t *lens, unsigned n,
                           uint64_t queued, uint64_t in_flight)
{
    if (r->card_ps_per_byte == 0)      /* no run measured yet: the card's first runs decide */
        return 0;
    if (r->card_idle_ppm > ENG_SCHED_IDLE_PPM)
        return 0;
    if (r->sw_ps_per_byte == 0)        /* software never measured: one job, to measure it */
        return n > 0;
    uint64_t take = 0;
    unsigned k = 0;
    while (k < n && take + lens[k] <= queued) {
        uint64_t sw = (take + lens[k]) * r->sw_ps_per_byte;
        if (sw > eng_sched_card_ps(r, queued, take + lens[k], in_flight))
            break;
        take += lens[k++];
    }
    return k;
}

/* An average that follows a card whose rate changes (another process's runs, a different
 * mix of data) within a few runs. */
uint64_t eng_sched_ewma(uint64_t old, uint64_t sample)
{
    return old ? (3 * old + sample) / 4 : sample;
}

uint32_t eng_sched_idle_ppm(uint32_t old, uint64_t idle_ns, uint64_t span_ns)
{
    uint64_t sample = span_ns ? (idle_ns >= span_ns ? 1000000u : idle_ns * 1000000u / span_ns)
                              : old;
    return (uint32_t)(((uint64_t)old + sample) / 2);
}

unsigned eng_sched_sw_split(const eng_rates *r, const uint32_t *lens, unsigned n,
                            uint64_t queued, uint64_t in_flight)
{
    eng_rates best = {r->card_ps_per_byte, r->sw_ps_per_byte ? r->sw_ps_per_byte
                                                             : ENG_SCHED_SW_PRIOR_PS, 0};
    return eng_sched_sw_take(&best, lens, n, queued, in_flight);
}

uint64_t eng_sched_best(uint64_t best, uint64_t sample)
{
    uint64_t drift = best + best / 64;
    return best && drift < sample ? drift : sample;
}

unsigned eng_sched_tail_batch(const eng_task *ring, unsigned ring_len, unsigned head,
                              unsigned count, unsigned most)
{
    if (count == 0)
        return 0;
    unsigned last = head + count - 1, n = 1;
    const eng_ticket *call = ring[last % ring_len].call;
    while (n < count && n < most && ring[(last - n) % ring_len].call == call)
        n++;
    return n;
}

uint64_t eng_sched_window(eng_rate_window *w, uint64_t ns, uint64_t bytes)
{
    w->ns += ns, w->bytes += bytes, w->runs++;
    if (w->runs < ENG_RATE_RUNS)
        return 0;
    uint64_t ps = w->bytes ? w->ns * 1000 / w->bytes : 0;
    *w = (eng_rate_window){0};
    return ps;
}

uint64_t eng_sched_fill_wait(const eng_fill *f)
{
    if (f->fill_ns == 0 || f->queued >= f->capacity || f->card_free_ns == 0)
        return 0;
    uint64_t until = f->head_ns + f->fill_ns;
    uint64_t start_by = f->card_free_ns > f->start_ns ? f->card_free_ns - f->start_ns : 0;
    if (start_by < until)
        until = start_by;
    return until > f->now_ns ? until - f->now_ns : 0;
}
