/* The CUDA backend: an NVIDIA GPU as the engine's card, in the plugin fpgalz4fs-cuda.so (the
 * CUDA runtime is linked in statically, so the daemon itself needs no CUDA on the host).
 *
 * One GPU is one compute unit with n buffer sets (bufsets=, 4 by default). Each set owns,
 * allocated once at open: a pinned host input, mapped pinned host outputs (bytes and sizes),
 * the device buffers, the kernel's scratch, a stream and an event. A run is one stream's
 * sequence: copy in (a copy engine), the kernel (kernels/cuda/), the drain that writes only
 * the compressed bytes back into the mapped host output, then the event. Sets have their own
 * streams, so brick k+1's copy in overlaps brick k's kernel and brick k-1's way back; the
 * busy test is cudaEventQuery, which never blocks.
 *
 * Any CUDA error fails the run: the engine hands the brick to software and rests the card
 * with back-off before its next start. An error that poisons the CUDA context (a kernel
 * fault) is cleared at the next start by resetting the device and allocating again.
 *
 * A brick is up to CU_BRICK_BYTES of blocks: a GPU needs thousands of warps at once, one per
 * 16 KiB sub-block, so 64 MiB (4096 warps) fills an H100's 132 SMs about one and a half
 * times over; four sets let the next bricks wait on the card while the host copies one in
 * and checks another's output.
 *
 * Blocks in memory from host_alloc (page-locked with cudaHostRegister) are copied to the GPU
 * from where they lie, by the copy engine: the host copies nothing into the set first (seed
 * 004). The memory is the caller's own (malloc'd, then registered), not cudaHostAlloc's, so
 * that the device reset after a fault, which drops every registration, cannot free it: a
 * block in memory no longer registered is still copied right, through the driver's staging.
 *
 * After the kernel the GPU checks its own output (krn_cuda_check: every compressed block
 * walked against its input, and XXH32 of both), and the drain brings the verdicts back with
 * the sizes: the engine's pool then only compares sums it computes for the frame anyway,
 * instead of decoding every block on the host (a core per 2 GB/s).
 *
 * Tests only: FPGALZ4FS_CUDA_FAIL_EVERY=N makes every Nth run's launch invalid (a real CUDA
 * launch error), to exercise the fallback; FPGALZ4FS_CUDA_SPOIL_EVERY=N flips a byte of a
 * compressed block of every Nth run on the GPU before the check (a compressor's bug), and
 * FPGALZ4FS_CUDA_SPOIL_BACK_EVERY=N one in host memory after the run (a fault on the way
 * back): both must end in verify_failed and the right bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "eng_internal.h"
#include "krn_lz4_cuda.h"

#define CU_BRICK_BYTES (64u << 20)
#define CU_MAX_SETS 16u

_Static_assert(sizeof(eng_card_check) == sizeof(krn_cuda_verdict),
               "the kernel's verdict is the engine's card check");

typedef struct {
    eng_bufset bs;                     /* host side: in pinned; out, sizes, checks mapped */
    uint8_t *d_in, *d_out, *h_out_dev; /* h_out_dev: bs.out as the device sees it */
    uint32_t *d_sizes, *d_in_sizes, *h_sizes_dev;
    krn_cuda_verdict *d_verdicts, *h_checks_dev;
    uint32_t n_blocks;                 /* of the run started last */
    void *d_scratch;
    cudaStream_t stream;
    cudaEvent_t done;
} cu_set;

struct eng_dev_s {
    int device;
    uint32_t stride;
    unsigned capacity, n_sets;
    unsigned fail_every;               /* tests: every Nth run fails its launch; 0: never */
    unsigned spoil_every;              /* tests: every Nth run's output is spoiled before the
                                          check (a compressor's bug) */
    unsigned spoil_back_every;         /* tests: every Nth run's output is spoiled in host
                                          memory after it (a fault on the way back) */
    unsigned long runs, collects;
    int poisoned;                      /* the context saw a sticky error: reset before use */
    unsigned timeout_ms;               /* card_timeout_ms: how long close waits for runs */
    cu_set sets[CU_MAX_SETS];
};

static int cu_fail(char *err, size_t err_cap, const char *what, cudaError_t e)
{
    snprintf(err, err_cap, "CUDA: %s: %s", what, cudaGetErrorString(e));
    return -1;
}

static void cu_free_set(cu_set *s)
{
    if (s->done)
        cudaEventDestroy(s->done);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    cudaFreeHost(s->bs.in), cudaFreeHost(s->bs.out);
    cudaFreeHost(s->bs.sizes), cudaFreeHost(s->bs.in_sizes), cudaFreeHost(s->bs.checks);
    cudaFree(s->d_in), cudaFree(s->d_out), cudaFree(s->d_sizes), cudaFree(s->d_in_sizes);
    cudaFree(s->d_scratch), cudaFree(s->d_verdicts);
    memset(s, 0, sizeof(*s));
}

static int cu_alloc_set(struct eng_dev_s *d, cu_set *s, char *err, size_t err_cap)
{
    size_t bytes = (size_t)d->capacity * d->stride, idx = d->capacity * sizeof(uint32_t);
    size_t verdicts = d->capacity * sizeof(krn_cuda_verdict);
    unsigned mapped = cudaHostAllocMapped | cudaHostAllocPortable;
    cudaError_t e = cudaHostAlloc((void **)&s->bs.in, bytes + KRN_CUDA_PAD, cudaHostAllocPortable);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&s->bs.out, bytes, mapped);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&s->bs.sizes, idx, mapped);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&s->bs.in_sizes, idx, cudaHostAllocPortable);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&s->bs.checks, verdicts, mapped);
    if (e != cudaSuccess)
        return cu_fail(err, err_cap, "pinned host buffers", e);
    memset(s->bs.sizes, 0, idx);       /* a set polled across a reset fails the size check */
    memset(s->bs.checks, 0, verdicts); /* and its blocks are never taken as checked */
    e = cudaHostGetDevicePointer((void **)&s->h_out_dev, s->bs.out, 0);
    if (e == cudaSuccess)
        e = cudaHostGetDevicePointer((void **)&s->h_sizes_dev, s->bs.sizes, 0);
    if (e == cudaSuccess)
        e = cudaHostGetDevicePointer((void **)&s->h_checks_dev, s->bs.checks, 0);
    if (e != cudaSuccess)
        return cu_fail(err, err_cap, "mapping host buffers", e);
    e = cudaMalloc((void **)&s->d_in, bytes + KRN_CUDA_PAD);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->d_out, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->d_sizes, idx);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->d_in_sizes, idx);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->d_verdicts, verdicts);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_scratch, krn_cuda_scratch_bytes(d->capacity, d->stride));
    if (e != cudaSuccess)
        return cu_fail(err, err_cap, "device buffers", e);
    e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return cu_fail(err, err_cap, "streams", e);
    return 0;
}

static int cu_alloc_all(struct eng_dev_s *d, char *err, size_t err_cap)
{
    cudaError_t e = cudaSetDevice(d->device);
    if (e != cudaSuccess)
        return cu_fail(err, err_cap, "selecting the device", e);
    for (unsigned i = 0; i < d->n_sets; i++)
        if (cu_alloc_set(d, &d->sets[i], err, err_cap) != 0)
            return -1;
    return 0;
}

/* Whether every set's stream is idle, waiting at most timeout_ms for them (a kernel cannot
 * be cancelled, and freeing memory it uses would wait for it without end). */
static int cu_streams_idle(struct eng_dev_s *d, unsigned timeout_ms)
{
    struct timespec t0, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int busy = 0;
        for (unsigned i = 0; i < CU_MAX_SETS; i++)
            busy |= d->sets[i].stream && cudaStreamQuery(d->sets[i].stream) == cudaErrorNotReady;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (long)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (!busy || ms >= (long)timeout_ms)
            return !busy;
        nanosleep(&nap, NULL);
    }
}

/* A set still running after card_timeout_ms keeps its memory: the process gives it back
 * when it exits, which a hung kernel cannot stop. */
static void cu_close(eng_dev *d)
{
    int idle = cudaSetDevice(d->device) == cudaSuccess &&
               cu_streams_idle(d, d->timeout_ms ? d->timeout_ms : 5000);
    for (unsigned i = 0; idle && i < CU_MAX_SETS; i++)
        cu_free_set(&d->sets[i]);
    free(d);
}

/* A test's fault period from the environment; 0 (never) when unset. */
static unsigned cu_env_every(const char *name)
{
    const char *v = getenv(name);
    return v ? (unsigned)strtoul(v, NULL, 10) : 0;
}

/* Why the device cannot be used with cfg, or 0. */
static int cu_check_device(const eng_config *cfg, char *why, size_t cap)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return cu_fail(why, cap, "no usable GPU (driver or device missing)", e);
    if (count == 0)
        return snprintf(why, cap, "CUDA: no GPU on this host"), -1;
    if (cfg->device >= (unsigned)count)
        return snprintf(why, cap, "CUDA: device=%u, but this host has %d GPU(s)", cfg->device,
                        count), -1;
    return 0;
}

static eng_dev *cu_open(const eng_config *cfg, uint32_t stride, char *err, size_t err_cap)
{
    if (cu_check_device(cfg, err, err_cap) != 0)
        return NULL;
    if (cfg->cus > 1 || cfg->bufsets < 1 || cfg->bufsets > CU_MAX_SETS || stride % 16) {
        snprintf(err, err_cap, "CUDA: a GPU is one compute unit (cus=1) with bufsets 1..%u",
                 CU_MAX_SETS);
        return NULL;
    }
    struct eng_dev_s *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(err, err_cap, "CUDA: %s", strerror(ENOMEM));
        return NULL;
    }
    d->device = (int)cfg->device;
    d->stride = stride;
    d->n_sets = cfg->bufsets;
    d->timeout_ms = cfg->card_timeout_ms;
    d->capacity = CU_BRICK_BYTES / stride;
    d->capacity = d->capacity < 1 ? 1 : d->capacity > ENG_MAX_BRICK ? ENG_MAX_BRICK : d->capacity;
    d->fail_every = cu_env_every("FPGALZ4FS_CUDA_FAIL_EVERY");
    d->spoil_every = cu_env_every("FPGALZ4FS_CUDA_SPOIL_EVERY");
    d->spoil_back_every = cu_env_every("FPGALZ4FS_CUDA_SPOIL_BACK_EVERY");
    if (cu_alloc_all(d, err, err_cap) != 0) {
        cu_close(d);
        return NULL;
    }
    return d;
}

static unsigned cu_n_cus(const eng_dev *d) { (void)d; return 1; }
static unsigned cu_n_sets(const eng_dev *d) { return d->n_sets; }
static unsigned cu_capacity(const eng_dev *d) { return d->capacity; }

static eng_bufset *cu_bufset(eng_dev *d, unsigned cu, unsigned set)
{
    (void)cu;
    return &d->sets[set].bs;
}

/* After a sticky error every call fails until the device is reset; the buffers go with it. */
static int cu_recover(struct eng_dev_s *d)
{
    char err[256];
    for (unsigned i = 0; i < CU_MAX_SETS; i++)
        cu_free_set(&d->sets[i]);
    cudaDeviceReset();
    if (cu_alloc_all(d, err, sizeof(err)) != 0)
        return -EIO;
    d->poisoned = 0;
    return 0;
}

/* Whether an error left the context unusable (a fault, not a refused launch): a sticky
 * error is returned by every later call, so asking the set's stream tells, without waiting
 * for the work of other sets (a hung kernel would make that wait endless). */
static void cu_note_error(struct eng_dev_s *d, cudaStream_t stream)
{
    cudaGetLastError();
    cudaError_t e = cudaStreamQuery(stream);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        d->poisoned = 1;
}

/* Whether block k continues the copy that block j starts: both in the set's input buffer,
 * or both in the caller's memory, one stride apart, the one before whole. */
static int cu_same_run(const struct eng_dev_s *d, const cu_set *s, const uint8_t *const *src,
                       uint32_t j, uint32_t k)
{
    if (!src || (!src[j] && !src[k]))
        return 1;
    return src[j] && src[k] && src[k - 1] + d->stride == src[k] &&
           s->bs.in_sizes[k - 1] == d->stride;
}

/* The brick's input to the GPU: one copy per run of blocks that lie one after the other. */
static cudaError_t cu_copy_in(struct eng_dev_s *d, cu_set *s, uint32_t n,
                              const uint8_t *const *src)
{
    cudaError_t e = cudaSuccess;
    for (uint32_t j = 0, k; j < n && e == cudaSuccess; j = k) {
        for (k = j + 1; k < n && cu_same_run(d, s, src, j, k); k++)
            ;
        size_t bytes = (size_t)(k - 1 - j) * d->stride + s->bs.in_sizes[k - 1];
        const uint8_t *from = src && src[j] ? src[j] : s->bs.in + (size_t)j * d->stride;
        e = cudaMemcpyAsync(s->d_in + (size_t)j * d->stride, from, bytes,
                            cudaMemcpyHostToDevice, s->stream);
    }
    return e;
}

static int cu_start_from(eng_dev *d, unsigned cu, unsigned set, uint32_t n_blocks,
                         uint32_t input_size, const uint8_t *const *src)
{
    (void)cu, (void)input_size;
    if (d->poisoned && cu_recover(d) != 0)
        return -EIO;
    cu_set *s = &d->sets[set];
    s->n_blocks = n_blocks;
    d->runs++;
    int fail = d->fail_every && d->runs % d->fail_every == 0;
    int spoil = d->spoil_every && d->runs % d->spoil_every == 0;
    cudaError_t e = cu_copy_in(d, s, n_blocks, src);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(s->d_in_sizes, s->bs.in_sizes, n_blocks * sizeof(uint32_t),
                            cudaMemcpyHostToDevice, s->stream);
    if (e == cudaSuccess)
        e = krn_cuda_compress(s->d_in, s->d_in_sizes, s->d_out, s->d_sizes, n_blocks, d->stride,
                              s->d_scratch, s->stream, fail);
    if (e == cudaSuccess && spoil)
        e = krn_cuda_spoil(s->d_out, s->d_sizes, s->d_in_sizes, n_blocks, d->stride,
                           (uint32_t)d->runs, s->stream);
    if (e == cudaSuccess)
        e = krn_cuda_check(s->d_in, s->d_in_sizes, s->d_out, s->d_sizes, s->d_verdicts,
                           n_blocks, d->stride, s->d_scratch, s->stream);
    if (e == cudaSuccess)
        e = krn_cuda_drain(s->d_out, s->d_sizes, s->d_in_sizes, s->d_verdicts, s->h_out_dev,
                           s->h_sizes_dev, s->h_checks_dev, n_blocks, d->stride, s->stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(s->done, s->stream);
    if (e == cudaSuccess)
        return 0;
    /* Work already queued on the stream may still run: poll says so until it is done, and
     * the engine does not refill the set before. */
    cu_note_error(d, s->stream);
    return -EIO;
}

static int cu_start(eng_dev *d, unsigned cu, unsigned set, uint32_t n_blocks,
                    uint32_t input_size)
{
    return cu_start_from(d, cu, set, n_blocks, input_size, NULL);
}

static void *cu_host_alloc(eng_dev *d, size_t bytes)
{
    void *p = aligned_alloc(4096, bytes);
    if (p && cudaSetDevice(d->device) == cudaSuccess)
        cudaHostRegister(p, bytes, cudaHostRegisterPortable);
    cudaGetLastError();                /* unregistered memory is still copied right */
    return p;
}

static void cu_host_free(eng_dev *d, void *p, size_t bytes)
{
    (void)d, (void)bytes;
    cudaHostUnregister(p);
    cudaGetLastError();
    free(p);
}

/* The stream, not only the run's event: after a failed start, work it queued may remain. */
static eng_run_state cu_poll(eng_dev *d, unsigned cu, unsigned set)
{
    (void)cu;
    cudaError_t e = cudaStreamQuery(d->sets[set].stream);
    if (e == cudaSuccess)
        return ENG_RUN_DONE;
    if (e == cudaErrorNotReady)
        return ENG_RUN_RUNNING;
    cu_note_error(d, d->sets[set].stream);
    return ENG_RUN_ERROR;
}

/* The drain already wrote the mapped host buffers. A test's fault on the way back flips a
 * byte of the first compressed block there, after the card's check. */
static int cu_collect(eng_dev *d, unsigned cu, unsigned set)
{
    (void)cu;
    eng_bufset *bs = &d->sets[set].bs;
    if (!d->spoil_back_every || ++d->collects % d->spoil_back_every != 0)
        return 0;
    for (uint32_t j = 0; j < d->sets[set].n_blocks; j++)
        if (bs->sizes[j] > 0 && bs->sizes[j] < bs->in_sizes[j]) {
            bs->out[(size_t)j * d->stride + bs->sizes[j] / 3] ^= 0x01;
            break;
        }
    return 0;
}

/* A kernel cannot be cancelled, and waiting for it would stop every other brick: the
 * engine leaves the set alone until poll says its stream is idle. */
static void cu_abandon(eng_dev *d, unsigned cu, unsigned set)
{
    (void)d, (void)cu, (void)set;
}

static int cu_probe(const eng_config *cfg, char *why, size_t why_cap)
{
    if (cu_check_device(cfg, why, why_cap) != 0)
        return 0;
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, (int)cfg->device);
    if (e != cudaSuccess)
        return cu_fail(why, why_cap, "reading the device", e), 0;
    snprintf(why, why_cap, "GPU %u: %s (sm_%d%d, %d SMs)", cfg->device, p.name, p.major,
             p.minor, p.multiProcessorCount);
    return 1;
}

static const eng_dev_ops cu_ops = {
    .name = "cuda",
    .open = cu_open,
    .n_cus = cu_n_cus,
    .n_sets = cu_n_sets,
    .capacity = cu_capacity,
    .bufset = cu_bufset,
    .start = cu_start,
    .poll = cu_poll,
    .collect = cu_collect,
    .abandon = cu_abandon,
    .close = cu_close,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .start_from = cu_start_from,
};

__attribute__((visibility("default"))) const eng_plugin fpgalz4fs_plugin = {
    .abi = ENG_PLUGIN_ABI,
    .config_size = sizeof(eng_config),
    .name = "cuda",
    .ops = &cu_ops,
    .probe = cu_probe,
};
