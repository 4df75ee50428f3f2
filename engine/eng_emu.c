/* The emulated card: a model of an Alveo card running xilLz4Compress, for tests and for
 * hosts without a card. Each compute unit is a thread that runs the reference kernel
 * (kernels/krn_lz4.c) over the buffer sets started on it, in order, and completes each run
 * when the modelled card would: a run's input crosses PCIe at emu_pcie_mbps, the kernel
 * takes it at emu_card_mbps, the output crosses back at emu_pcie_mbps, and each of these
 * three engines (DMA in, kernel, DMA out) works on one run at a time, so transfers of one
 * buffer set overlap the kernel of another exactly as far as the host keeps sets in flight.
 * The model keeps its own clock (stage timelines), so late wake-ups of the thread do not
 * add up. Runs fail (emu_error_rate: an error state or implausible sizes), never complete
 * (emu_hang_rate) or complete with a wrong byte (emu_corrupt_rate) at random, from a seeded
 * generator, so faults are repeatable.
 *
 * With emu_card_check the modelled card also checks its own output, as the CUDA backend's
 * GPU does: after the kernel it decodes each compressed block against its input and hashes
 * both (eng_card_check). A corrupt run then spoils a byte before that check (every other
 * run: the card's verdict must say so) or after it (the rest: a fault on the way back, which
 * only the host's comparison of sums can see).
 *
 * The modelled card also reads host memory where it lies (start_from; memory from
 * host_alloc, here ordinary memory): its DMA gathers those blocks into the set when the run
 * is started, as a card with access to host memory would, so that the engine's zero-copy
 * path is tested without a GPU. The gather is done by start itself, while the engine still
 * holds the jobs: a run the engine gives up on must not read memory its caller took back. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lz4.h>
#include <xxhash.h>

#include "eng_internal.h"
#include "krn_lz4.h"

#define EMU_MAX_CUS 16u
#define EMU_MAX_SETS 16u

enum { EMU_OK = 0, EMU_HANG, EMU_ERROR_STATE, EMU_BAD_SIZES, EMU_CORRUPT };

typedef struct {
    eng_bufset bs;                     /* host memory: "sync" costs only the modelled time */
    _Atomic int state;                 /* eng_run_state, read by poll without a lock */
    uint32_t n_blocks, input_size;     /* arguments of the run started last */
    uint64_t start_ns;                 /* when the host started it */
    uint64_t gen;                      /* runs started on this set */
} emu_set;

typedef struct {
    unsigned set;
    uint64_t gen;
} emu_entry;

typedef struct {
    struct eng_dev_s *dev;
    pthread_t thread;
    int started;
    pthread_mutex_t lock;              /* guards the queue and the sets' gen */
    pthread_cond_t cv;                 /* new runs, stop */
    emu_entry queue[EMU_MAX_SETS];     /* runs started and not yet taken, in order */
    unsigned q_head, q_count;
    emu_set sets[EMU_MAX_SETS];
    uint64_t dma_in_free, kernel_free, dma_out_free;   /* model clock: when each is free */
} emu_cu;

struct eng_dev_s {
    unsigned n_cus, n_sets;
    uint32_t stride;
    double card_bps, pcie_bps, error_rate, hang_rate, corrupt_rate;
    int card_check;                    /* emu_card_check: the model checks its own output */
    uint64_t vanish_after;             /* runs before the card is gone (0: never) */
    uint64_t runs;                     /* runs begun, under rng_lock */
    pthread_mutex_t rng_lock;
    uint64_t rng;                      /* xorshift state for fault injection */
    _Atomic int stopping;              /* read under each compute unit's lock, set once under
                                          each in turn: atomic, since unit 1 may read it
                                          while unit 0's lock is the one held for the store */
    emu_cu *cus;
};

static double emu_random(struct eng_dev_s *d)
{
    pthread_mutex_lock(&d->rng_lock);
    d->rng ^= d->rng << 13, d->rng ^= d->rng >> 7, d->rng ^= d->rng << 17;
    double r = (double)(d->rng >> 11) / (double)(1ull << 53);
    pthread_mutex_unlock(&d->rng_lock);
    return r;
}

/* A card pulled out of its slot: once vanish_after runs have begun, every run errors. */
static int emu_vanished(struct eng_dev_s *d)
{
    pthread_mutex_lock(&d->rng_lock);
    int gone = d->vanish_after && ++d->runs > d->vanish_after;
    pthread_mutex_unlock(&d->rng_lock);
    return gone;
}

static int emu_fault(struct eng_dev_s *d)
{
    if (emu_vanished(d))
        return EMU_ERROR_STATE;
    if (d->hang_rate > 0 && emu_random(d) < d->hang_rate)
        return EMU_HANG;
    if (d->error_rate > 0 && emu_random(d) < d->error_rate)
        return emu_random(d) < 0.5 ? EMU_ERROR_STATE : EMU_BAD_SIZES;
    if (d->corrupt_rate > 0 && emu_random(d) < d->corrupt_rate)
        return EMU_CORRUPT;
    return EMU_OK;
}

/* Waits until deadline_ns (monotonic; 0: forever) unless the card stops. Called with the
 * compute unit's lock held. Returns 0 when the time ran out. */
static int emu_sleep_until(emu_cu *cu, uint64_t deadline_ns)
{
    while (!cu->dev->stopping) {
        uint64_t now = eng_now_ns();
        if (deadline_ns && now >= deadline_ns)
            return 0;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t wait = deadline_ns ? deadline_ns - now : 50000000ull;
        uint64_t t = (uint64_t)ts.tv_nsec + wait;
        ts.tv_sec += (time_t)(t / 1000000000ull), ts.tv_nsec = (long)(t % 1000000000ull);
        pthread_cond_timedwait(&cu->cv, &cu->lock, &ts);
    }
    return -1;
}

static uint64_t emu_max(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* When the modelled card finishes a run: each stage starts once the stage before it is done
 * and its own engine is free, the first one no earlier than the host started the run. A
 * run never completes before the thread has really computed it, so a host slower than the
 * model simply runs at its own speed. */
static uint64_t emu_finish_time(emu_cu *cu, const emu_set *s, uint64_t out)
{
    const struct eng_dev_s *d = cu->dev;
    uint64_t in_end = emu_max(s->start_ns, cu->dma_in_free) +
                      (uint64_t)(s->input_size / d->pcie_bps * 1e9);
    uint64_t k_end = emu_max(in_end, cu->kernel_free) +
                     (uint64_t)(s->input_size / d->card_bps * 1e9);
    uint64_t out_end = emu_max(k_end, cu->dma_out_free) + (uint64_t)(out / d->pcie_bps * 1e9);
    cu->dma_in_free = in_end, cu->kernel_free = k_end, cu->dma_out_free = out_end;
    return out_end;
}

/* A silent bug: the run completes with plausible sizes, and one byte of one compressed
 * block is wrong (the host's verification must catch it; a byte of a raw block is never
 * read, its input is stored instead). */
static void emu_corrupt(emu_set *s, uint32_t stride, uint64_t gen)
{
    for (uint32_t k = 0; k < s->n_blocks; k++) {
        uint32_t j = (uint32_t)((gen + k) % s->n_blocks);
        uint32_t size = s->bs.sizes[j];
        if (size > 0 && size < s->bs.in_sizes[j]) {
            s->bs.out[(size_t)j * stride + (gen * 7919u) % size] ^= 0x20;
            return;
        }
    }
}

/* The card's own check of a run (emu_card_check): what eng_card_check says of each block. */
static void emu_check_own(emu_set *s, uint32_t stride)
{
    uint8_t *dec = malloc(stride);
    for (uint32_t j = 0; j < s->n_blocks; j++) {
        const uint8_t *in = s->bs.in + (size_t)j * stride, *out = s->bs.out + (size_t)j * stride;
        uint32_t len = s->bs.in_sizes[j], size = s->bs.sizes[j];
        eng_card_check *c = &s->bs.checks[j];
        *c = (eng_card_check){0};
        if (size == 0 || size >= len || len > stride)
            continue;
        c->decodes = dec && LZ4_decompress_safe((const char *)out, (char *)dec, (int)size,
                                                (int)len) == (int)len &&
                     memcmp(dec, in, len) == 0;
        c->src_sum = XXH32(in, len, 0), c->out_sum = XXH32(out, size, 0);
    }
    free(dec);
}

/* One run: the kernel over the set, then whatever time the modelled card still needs. */
static void emu_run(emu_cu *cu, emu_set *s, uint64_t gen)
{
    struct eng_dev_s *d = cu->dev;
    int fault = emu_fault(d);
    pthread_mutex_unlock(&cu->lock);
    uint64_t out = 0;
    if (fault != EMU_HANG && fault != EMU_ERROR_STATE) {
        krn_lz4_compress(s->bs.in, s->bs.out, s->bs.sizes, s->bs.in_sizes, d->stride / 1024,
                         s->input_size);
        for (uint32_t j = 0; j < s->n_blocks; j++)
            out += s->bs.sizes[j];
    }
    int spoil_after = d->card_check && gen % 2;
    if (fault == EMU_CORRUPT && !spoil_after)
        emu_corrupt(s, d->stride, gen);
    if (d->card_check && fault != EMU_HANG && fault != EMU_ERROR_STATE)
        emu_check_own(s, d->stride);
    if (fault == EMU_CORRUPT && spoil_after)
        emu_corrupt(s, d->stride, gen);
    if (fault == EMU_BAD_SIZES)        /* what a broken card might leave: caught by the host */
        s->bs.sizes[s->n_blocks - 1] = (uint32_t[]){0, d->stride + 1,
                                                    0xFFFFFFFFu}[gen % 3];
    pthread_mutex_lock(&cu->lock);
    if (fault == EMU_HANG) {
        emu_sleep_until(cu, 0);        /* holds the set until the card is closed */
        return;
    }
    if (emu_sleep_until(cu, emu_finish_time(cu, s, out)) == 0)
        s->state = fault == EMU_ERROR_STATE ? ENG_RUN_ERROR : ENG_RUN_DONE;
}

static void *emu_cu_thread(void *arg)
{
    emu_cu *cu = arg;
    pthread_mutex_lock(&cu->lock);
    while (!cu->dev->stopping) {
        if (cu->q_count == 0) {
            pthread_cond_wait(&cu->cv, &cu->lock);
            continue;
        }
        emu_entry e = cu->queue[cu->q_head];
        cu->q_head = (cu->q_head + 1) % EMU_MAX_SETS, cu->q_count--;
        emu_run(cu, &cu->sets[e.set], e.gen);
    }
    pthread_mutex_unlock(&cu->lock);
    return NULL;
}

static void emu_close(eng_dev *d);

static int emu_alloc_sets(struct eng_dev_s *d, emu_cu *cu)
{
    size_t bytes = (size_t)KRN_PARALLEL_BLOCKS * d->stride;
    for (unsigned i = 0; i < d->n_sets; i++) {
        eng_bufset *b = &cu->sets[i].bs;
        b->in = malloc(bytes);
        b->out = malloc(bytes);
        b->sizes = calloc(KRN_PARALLEL_BLOCKS, sizeof(uint32_t));
        b->in_sizes = calloc(KRN_PARALLEL_BLOCKS, sizeof(uint32_t));
        b->checks = d->card_check ? calloc(KRN_PARALLEL_BLOCKS, sizeof(*b->checks)) : NULL;
        if (!b->in || !b->out || !b->sizes || !b->in_sizes || (d->card_check && !b->checks))
            return -1;
    }
    return 0;
}

static eng_dev *emu_open(const eng_config *cfg, uint32_t stride, char *err, size_t err_cap)
{
    struct eng_dev_s *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->n_cus = cfg->cus ? cfg->cus : 1;
    d->n_sets = cfg->bufsets;
    d->stride = stride;
    d->card_bps = cfg->emu_card_mbps * 1e6, d->pcie_bps = cfg->emu_pcie_mbps * 1e6;
    d->error_rate = cfg->emu_error_rate, d->hang_rate = cfg->emu_hang_rate;
    d->corrupt_rate = cfg->emu_corrupt_rate;
    d->card_check = cfg->emu_card_check;
    d->vanish_after = cfg->emu_vanish_after;
    d->rng = cfg->emu_seed ? cfg->emu_seed : 0x9E3779B97F4A7C15ull;
    pthread_mutex_init(&d->rng_lock, NULL);
    if (d->n_cus > EMU_MAX_CUS || d->n_sets < 1 || d->n_sets > EMU_MAX_SETS) {
        snprintf(err, err_cap, "emulated card: cus must be 1..%u and bufsets 1..%u",
                 EMU_MAX_CUS, EMU_MAX_SETS);
        emu_close(d);
        return NULL;
    }
    d->cus = calloc(d->n_cus, sizeof(*d->cus));
    for (unsigned i = 0; d->cus && i < d->n_cus; i++) {
        emu_cu *cu = &d->cus[i];
        cu->dev = d;
        pthread_mutex_init(&cu->lock, NULL);
        pthread_cond_init(&cu->cv, NULL);
        if (emu_alloc_sets(d, cu) < 0 || pthread_create(&cu->thread, NULL, emu_cu_thread, cu)) {
            snprintf(err, err_cap, "emulated card: cannot set up compute unit %u", i);
            emu_close(d);
            return NULL;
        }
        cu->started = 1;
    }
    if (!d->cus) {
        snprintf(err, err_cap, "emulated card: %s", strerror(ENOMEM));
        emu_close(d);
        return NULL;
    }
    return d;
}

static unsigned emu_n_cus(const eng_dev *d) { return d->n_cus; }
static unsigned emu_n_sets(const eng_dev *d) { return d->n_sets; }
static unsigned emu_capacity(const eng_dev *d) { (void)d; return KRN_PARALLEL_BLOCKS; }

static eng_bufset *emu_bufset(eng_dev *d, unsigned cu, unsigned set)
{
    return &d->cus[cu].sets[set].bs;
}

static int emu_start_from(eng_dev *d, unsigned cu_i, unsigned set, uint32_t n_blocks,
                          uint32_t input_size, const uint8_t *const *src)
{
    emu_cu *cu = &d->cus[cu_i];
    emu_set *s = &cu->sets[set];
    for (uint32_t j = 0; src && j < n_blocks; j++)     /* the DMA that reads host memory */
        if (src[j])
            memcpy(s->bs.in + (size_t)j * d->stride, src[j], s->bs.in_sizes[j]);
    pthread_mutex_lock(&cu->lock);
    s->n_blocks = n_blocks, s->input_size = input_size;
    s->start_ns = eng_now_ns();
    s->state = ENG_RUN_RUNNING;
    cu->queue[(cu->q_head + cu->q_count++) % EMU_MAX_SETS] = (emu_entry){set, ++s->gen};
    pthread_cond_broadcast(&cu->cv);
    pthread_mutex_unlock(&cu->lock);
    return 0;
}

static int emu_start(eng_dev *d, unsigned cu_i, unsigned set, uint32_t n_blocks,
                     uint32_t input_size)
{
    return emu_start_from(d, cu_i, set, n_blocks, input_size, NULL);
}

static void *emu_host_alloc(eng_dev *d, size_t bytes)
{
    (void)d;
    return aligned_alloc(4096, bytes);
}

static void emu_host_free(eng_dev *d, void *p, size_t bytes)
{
    (void)d, (void)bytes;
    free(p);
}

static eng_run_state emu_poll(eng_dev *d, unsigned cu, unsigned set)
{
    return (eng_run_state)d->cus[cu].sets[set].state;
}

static int emu_collect(eng_dev *d, unsigned cu, unsigned set)
{
    (void)d, (void)cu, (void)set;      /* host memory: the modelled transfer time is spent */
    return 0;
}

/* A card's run cannot be cancelled, so abandoning one changes nothing on the card: a run
 * that is only slow completes later (poll then says so, and the engine takes the set
 * back), and a hung one holds its set until the card is closed, as a hung kernel holds
 * its buffers. */
static void emu_abandon(eng_dev *d, unsigned cu_i, unsigned set)
{
    (void)d, (void)cu_i, (void)set;
}

static void emu_close(eng_dev *d)
{
    for (unsigned i = 0; d->cus && i < d->n_cus; i++) {
        emu_cu *cu = &d->cus[i];
        pthread_mutex_lock(&cu->lock);
        d->stopping = 1;
        pthread_cond_broadcast(&cu->cv);
        pthread_mutex_unlock(&cu->lock);
        if (cu->started)
            pthread_join(cu->thread, NULL);
        for (unsigned s = 0; s < EMU_MAX_SETS; s++) {
            free(cu->sets[s].bs.in), free(cu->sets[s].bs.out);
            free(cu->sets[s].bs.sizes), free(cu->sets[s].bs.in_sizes);
            free(cu->sets[s].bs.checks);
        }
        pthread_cond_destroy(&cu->cv);
        pthread_mutex_destroy(&cu->lock);
    }
    free(d->cus);
    pthread_mutex_destroy(&d->rng_lock);
    free(d);
}

const eng_dev_ops eng_emu_ops = {
    .name = "emu",
    .open = emu_open,
    .n_cus = emu_n_cus,
    .n_sets = emu_n_sets,
    .capacity = emu_capacity,
    .bufset = emu_bufset,
    .start = emu_start,
    .poll = emu_poll,
    .collect = emu_collect,
    .abandon = emu_abandon,
    .close = emu_close,
    .host_alloc = emu_host_alloc,
    .host_free = emu_host_free,
    .start_from = emu_start_from,
};
