/* fpgalz4fs-cudabench: the GPU backend's figures on one input file, cut into independent
 * blocks of one size (the store's block size):
 *   kernel   the CUDA kernel alone, data already on the GPU: the whole file in one launch,
 *            and the engine's bricks launched back to back on one stream, without and with
 *            the GPU's check of its output (whose verdicts must agree with the host's);
 *   engine   the real engine (eng_open with engine=cuda, card only) with every transfer:
 *            the dispatcher's copy into pinned memory, copy in, kernel, drain, copy out;
 *            and again with the input in memory from eng_host_alloc ("direct": the GPU
 *            copies each block from where it lies, the host copies nothing in);
 *   cpu      liblz4 level 1 (LZ4_compress_default) on N threads, one block at a time each.
 * Every compressed block is decoded with liblz4 and compared with its input; any mismatch
 * fails the run (exit 1). GB/s are input bytes (10^9) per second; ratio is input bytes over
 * stored bytes (a block that does not shrink is stored raw).
 *
 * usage: fpgalz4fs-cudabench [-b BLOCK] [-m kernel|engine|cpu|all] [-s BUFSETS] [-r REPEAT]
 *                            [-t THREADS] FILE */
#include <errno.h>
#include <lz4.h>
#include <xxhash.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "eng.h"
#include "krn_lz4_cuda.h"

#define CB_BRICK_BYTES (64u << 20)     /* as the plugin's brick */

typedef struct {
    uint8_t *data;
    size_t size;
    uint32_t bs;
    uint32_t n_blocks;
} cb_input;

typedef struct {
    const char *mode, *file;
    uint32_t bs;
    unsigned bufsets, repeat, threads;
} cb_opts;

static double cb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t cb_len(const cb_input *in, uint32_t j)
{
    size_t left = in->size - (size_t)j * in->bs;
    return left < in->bs ? (uint32_t)left : in->bs;
}

/* Decodes every block that shrank and compares it with its input; returns the stored bytes,
 * or 0 on any mismatch. out_len[j] >= len means stored raw. */
static size_t cb_verify(const cb_input *in, uint8_t *const *outs, const uint32_t *out_len,
                        unsigned *raw)
{
    size_t stored = 0;
    uint8_t *dec = malloc(in->bs);
    *raw = 0;
    for (uint32_t j = 0; dec && j < in->n_blocks; j++) {
        uint32_t len = cb_len(in, j);
        if (out_len[j] >= len) {
            stored += len, (*raw)++;
            continue;
        }
        int n = LZ4_decompress_safe((const char *)outs[j], (char *)dec, (int)out_len[j],
                                    (int)in->bs);
        if (n != (int)len || memcmp(dec, in->data + (size_t)j * in->bs, len) != 0) {
            fprintf(stderr, "block %u (%u bytes -> %u) does not decode to its input\n", j, len,
                    out_len[j]);
            free(dec);
            return 0;
        }
        stored += out_len[j];
    }
    free(dec);
    return stored;
}

static int cb_report(const char *what, const cb_input *in, double secs, uint8_t *const *outs,
                     const uint32_t *out_len)
{
    unsigned raw;
    size_t stored = cb_verify(in, outs, out_len, &raw);
    if (!stored) {
        printf("%-28s FAILED: output does not decode\n", what);
        return -1;
    }
    printf("%-28s block=%u blocks=%u GB/s=%.2f ratio=%.3f raw_blocks=%u decoded=ok\n", what,
           in->bs, in->n_blocks, (double)in->size / secs / 1e9, (double)in->size / stored, raw);
    return 0;
}

/* ---- kernel alone ---- */

static int cb_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "CUDA: %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

typedef struct {
    uint8_t *d_in, *d_out, *d_scratch;
    uint32_t *d_in_sizes, *d_sizes;
    krn_cuda_verdict *d_verdicts;
    cudaStream_t st;
} cb_gpu;

static int cb_gpu_setup(const cb_input *in, cb_gpu *g)
{
    size_t bytes = (size_t)in->n_blocks * in->bs;
    uint32_t *lens = malloc(in->n_blocks * sizeof(uint32_t));
    for (uint32_t j = 0; lens && j < in->n_blocks; j++)
        lens[j] = cb_len(in, j);
    int rc = !lens || cb_check(cudaMalloc((void **)&g->d_in, bytes + KRN_CUDA_PAD), "malloc") ||
             cb_check(cudaMalloc((void **)&g->d_out, bytes), "malloc") ||
             cb_check(cudaMalloc((void **)&g->d_sizes, in->n_blocks * 4), "malloc") ||
             cb_check(cudaMalloc((void **)&g->d_in_sizes, in->n_blocks * 4), "malloc") ||
             cb_check(cudaMalloc((void **)&g->d_verdicts,
                                 in->n_blocks * sizeof(krn_cuda_verdict)), "malloc") ||
             cb_check(cudaMalloc((void **)&g->d_scratch,
                                 krn_cuda_scratch_bytes(in->n_blocks, in->bs)), "malloc") ||
             cb_check(cudaMemcpy(g->d_in, in->data, in->size, cudaMemcpyHostToDevice), "copy") ||
             cb_check(cudaMemcpy(g->d_in_sizes, lens, in->n_blocks * 4, cudaMemcpyHostToDevice),
                      "copy") ||
             cb_check(cudaStreamCreate(&g->st), "stream");
    free(lens);
    return rc ? -1 : 0;
}

/* Runs the kernel (and with check, the GPU's check of its output after each launch) over
 * the file in launches of per_launch blocks; returns the best time. */
static double cb_kernel_time(const cb_input *in, cb_gpu *g, uint32_t per_launch, unsigned reps,
                             int check)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    float best = 1e30f;
    for (unsigned r = 0; r < reps + 1; r++) {      /* the first run warms up */
        cudaEventRecord(a, g->st);
        for (uint32_t j = 0; j < in->n_blocks; j += per_launch) {
            uint32_t n = in->n_blocks - j < per_launch ? in->n_blocks - j : per_launch;
            size_t o = (size_t)j * in->bs;
            /* Each launch its own scratch slice, as the engine's buffer sets have. */
            size_t so = krn_cuda_scratch_bytes(j, in->bs);
            if (cb_check(krn_cuda_compress(g->d_in + o, g->d_in_sizes + j, g->d_out + o,
                                           g->d_sizes + j, n, in->bs, g->d_scratch + so, g->st,
                                           0), "launch"))
                return -1;
            if (check && cb_check(krn_cuda_check(g->d_in + o, g->d_in_sizes + j, g->d_out + o,
                                                 g->d_sizes + j, g->d_verdicts + j, n, in->bs,
                                                 g->d_scratch + so, g->st), "check launch"))
                return -1;
        }
        cudaEventRecord(b, g->st);
        if (cb_check(cudaEventSynchronize(b), "kernel"))
            return -1;
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r > 0 && ms < best)
            best = ms;
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    return best / 1e3;
}

static int cb_kernel_collect(const cb_input *in, cb_gpu *g, const char *what, double secs)
{
    size_t bytes = (size_t)in->n_blocks * in->bs;
    uint8_t *out = malloc(bytes);
    uint32_t *sizes = malloc(in->n_blocks * sizeof(uint32_t));
    uint8_t **outs = malloc(in->n_blocks * sizeof(*outs));
    int rc = -1;
    if (out && sizes && outs &&
        !cb_check(cudaMemcpy(out, g->d_out, bytes, cudaMemcpyDeviceToHost), "copy back") &&
        !cb_check(cudaMemcpy(sizes, g->d_sizes, in->n_blocks * 4, cudaMemcpyDeviceToHost),
                  "copy back")) {
        for (uint32_t j = 0; j < in->n_blocks; j++)
            outs[j] = out + (size_t)j * in->bs;
        rc = cb_report(what, in, secs, outs, sizes);
    }
    free(out), free(sizes), free(outs);
    return rc;
}

/* Every block the GPU compressed must have its check say it decodes, with the sums the
 * host computes of the same bytes: a check that fails good output (or passes it with wrong
 * sums) fails the run. */
static int cb_verdicts_agree(const cb_input *in, cb_gpu *g)
{
    size_t bytes = (size_t)in->n_blocks * in->bs;
    uint8_t *out = malloc(bytes);
    uint32_t *sizes = malloc(in->n_blocks * sizeof(uint32_t));
    krn_cuda_verdict *v = malloc(in->n_blocks * sizeof(*v));
    int rc = -1;
    if (out && sizes && v &&
        !cb_check(cudaMemcpy(out, g->d_out, bytes, cudaMemcpyDeviceToHost), "copy back") &&
        !cb_check(cudaMemcpy(sizes, g->d_sizes, in->n_blocks * 4, cudaMemcpyDeviceToHost),
                  "copy back") &&
        !cb_check(cudaMemcpy(v, g->d_verdicts, in->n_blocks * sizeof(*v),
                             cudaMemcpyDeviceToHost), "copy back")) {
        uint32_t bad = 0, checked = 0;
        for (uint32_t j = 0; j < in->n_blocks; j++) {
            uint32_t len = cb_len(in, j);
            if (sizes[j] == 0 || sizes[j] >= len)
                continue;
            checked++;
            const uint8_t *src = in->data + (size_t)j * in->bs, *o = out + (size_t)j * in->bs;
            bad += !v[j].decodes || v[j].src_sum != XXH32(src, len, 0) ||
                   v[j].out_sum != XXH32(o, sizes[j], 0);
        }
        printf("%-28s %u compressed blocks checked on the GPU, %u disagree with the host\n",
               "check", checked, bad);
        rc = bad ? -1 : 0;
    }
    free(out), free(sizes), free(v);
    return rc;
}

static int cb_kernel(const cb_input *in, const cb_opts *o)
{
    cb_gpu g = {0};
    struct cudaDeviceProp p;
    if (cb_check(cudaGetDeviceProperties(&p, 0), "device") || cb_gpu_setup(in, &g))
        return -1;
    printf("gpu: %s, %d SMs, sm_%d%d\n", p.name, p.multiProcessorCount, p.major, p.minor);
    uint32_t brick = CB_BRICK_BYTES / in->bs ? CB_BRICK_BYTES / in->bs : 1;
    double t_all = cb_kernel_time(in, &g, in->n_blocks, o->repeat, 0);
    int rc = t_all < 0 ? -1 : cb_kernel_collect(in, &g, "kernel (one launch)", t_all);
    double t_brick = rc ? -1 : cb_kernel_time(in, &g, brick, o->repeat, 0);
    if (t_brick < 0 || cb_kernel_collect(in, &g, "kernel (64 MiB bricks)", t_brick))
        rc = -1;
    double t_check = rc ? -1 : cb_kernel_time(in, &g, brick, o->repeat, 1);
    if (t_check < 0 || cb_kernel_collect(in, &g, "kernel+check (64 MiB)", t_check) ||
        cb_verdicts_agree(in, &g))
        rc = -1;
    cudaFree(g.d_in), cudaFree(g.d_out), cudaFree(g.d_sizes), cudaFree(g.d_in_sizes);
    cudaFree(g.d_scratch), cudaFree(g.d_verdicts), cudaStreamDestroy(g.st);
    return rc;
}

/* ---- the engine with transfers ---- */

static int cb_engine(const cb_input *in, const cb_opts *o, int card_only, int direct)
{
    eng_config cfg = {.backend = ENG_BACKEND_CUDA, .block_size = in->bs,
                      .bufsets = o->bufsets, .card_only = card_only};
    char err[256];
    eng_ctx *eng = eng_open(&cfg, err, sizeof(err));
    if (!eng) {
        fprintf(stderr, "engine: %s\n", err);
        return -1;
    }
    size_t host_bytes = (size_t)in->n_blocks * in->bs;
    uint8_t *host = direct ? eng_host_alloc(eng, host_bytes) : NULL;
    if (host)
        memcpy(host, in->data, host_bytes);             /* untimed, as the load */
    const uint8_t *data = host ? host : in->data;
    eng_job *jobs = calloc(in->n_blocks, sizeof(*jobs));
    uint8_t **outs = calloc(in->n_blocks, sizeof(*outs));
    uint32_t *lens = calloc(in->n_blocks, sizeof(*lens));
    int rc = jobs && outs && lens && (host || !direct) ? 0 : -1;
    for (uint32_t j = 0; rc == 0 && j < in->n_blocks; j++) {
        uint32_t len = cb_len(in, j);
        jobs[j] = (eng_job){.src = data + (size_t)j * in->bs, .len = len,
                            .dst_cap = eng_bound(len), .src_host = direct};
        outs[j] = jobs[j].dst = malloc(jobs[j].dst_cap);
        rc = outs[j] ? 0 : -1;
        memset(outs[j], 0, jobs[j].dst_cap);            /* fault the pages in, untimed */
    }
    double best = 1e30;
    for (unsigned r = 0; rc == 0 && r < o->repeat + 1; r++) {
        double t0 = cb_now();
        eng_compress(eng, jobs, in->n_blocks);
        double t = cb_now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    eng_stats st;
    eng_get_stats(eng, &st);
    for (uint32_t j = 0; rc == 0 && j < in->n_blocks; j++)
        lens[j] = jobs[j].out_len;
    char what[64];
    snprintf(what, sizeof(what), "engine %s%s bufsets=%u", card_only ? "gpu-only" : "gpu+cpu",
             direct ? " direct" : "", o->bufsets);
    if (rc == 0)
        rc = cb_report(what, in, best, outs, lens);
    printf("%-28s blocks_card=%llu blocks_sw=%llu blocks_direct=%llu fallback_busy=%llu "
           "fallback_error=%llu checked_on_card=%llu verify_failed=%llu\n", "",
           (unsigned long long)st.blocks_card, (unsigned long long)st.blocks_sw,
           (unsigned long long)st.blocks_direct, (unsigned long long)st.fallback_busy,
           (unsigned long long)st.fallback_error, (unsigned long long)st.blocks_checked_on_card,
           (unsigned long long)st.verify_failed);
    printf("%-28s rates (ps/byte): card %llu, card's best %llu, one software thread %llu; "
           "card idle %llu us\n", "",
           (unsigned long long)st.card_ps_per_byte, (unsigned long long)st.card_best_ps,
           (unsigned long long)st.sw_ps_per_byte, (unsigned long long)st.card_idle_us);
    for (uint32_t j = 0; outs && j < in->n_blocks; j++)
        free(outs[j]);
    free(jobs), free(outs), free(lens);
    eng_host_free(eng, host, host_bytes);
    eng_close(eng);
    return rc;
}

/* ---- liblz4 on the host's cores ---- */

typedef struct {
    const cb_input *in;
    uint8_t **outs;
    uint32_t *lens;
    _Atomic uint32_t next;
} cb_cpu;

static void *cb_cpu_worker(void *arg)
{
    cb_cpu *c = arg;
    for (uint32_t j; (j = atomic_fetch_add(&c->next, 1)) < c->in->n_blocks;) {
        uint32_t len = cb_len(c->in, j);
        int n = LZ4_compress_default((const char *)c->in->data + (size_t)j * c->in->bs,
                                     (char *)c->outs[j], (int)len, LZ4_compressBound((int)len));
        c->lens[j] = n > 0 && (uint32_t)n < len ? (uint32_t)n : len;
    }
    return NULL;
}

static int cb_cpu_run(const cb_input *in, unsigned threads, unsigned reps)
{
    cb_cpu c = {.in = in};
    c.outs = calloc(in->n_blocks, sizeof(*c.outs));
    c.lens = calloc(in->n_blocks, sizeof(*c.lens));
    pthread_t *t = calloc(threads, sizeof(*t));
    int rc = c.outs && c.lens && t ? 0 : -1;
    for (uint32_t j = 0; rc == 0 && j < in->n_blocks; j++) {
        c.outs[j] = malloc(eng_bound(in->bs));
        rc = c.outs[j] ? (memset(c.outs[j], 0, eng_bound(in->bs)), 0) : -1;
    }
    double best = 1e30;
    for (unsigned r = 0; rc == 0 && r < reps + 1; r++) {
        atomic_store(&c.next, 0);
        double t0 = cb_now();
        for (unsigned i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, cb_cpu_worker, &c);
        for (unsigned i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
        double s = cb_now() - t0;
        if (r > 0 && s < best)
            best = s;
    }
    char what[64];
    snprintf(what, sizeof(what), "liblz4 level 1, %u thread%s", threads, threads > 1 ? "s" : "");
    if (rc == 0)
        rc = cb_report(what, in, best, c.outs, c.lens);
    for (uint32_t j = 0; c.outs && j < in->n_blocks; j++)
        free(c.outs[j]);
    free(c.outs), free(c.lens), free(t);
    return rc;
}

/* ---- main ---- */

static int cb_load(const char *path, uint32_t bs, cb_input *in)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fprintf(stderr, "%s: %s\n", path, strerror(errno)), -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    in->bs = bs;
    in->size = size > 0 ? (size_t)size : 0;
    in->n_blocks = (uint32_t)((in->size + bs - 1) / bs);
    in->data = calloc((size_t)in->n_blocks * bs + 64, 1);
    int ok = in->size && in->data && fread(in->data, 1, in->size, f) == in->size;
    fclose(f);
    if (!ok)
        fprintf(stderr, "%s: cannot read it (or it is empty)\n", path);
    return ok ? 0 : -1;
}

static uint32_t cb_size_arg(const char *s)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    return *end || v < 1024 || v % 1024 || v > (64ul << 20) ? 0 : (uint32_t)v;
}

static int cb_usage(void)
{
    fprintf(stderr, "usage: fpgalz4fs-cudabench [-b BLOCK] [-m kernel|engine|cpu|all] "
                    "[-s BUFSETS] [-r REPEAT] [-t THREADS] FILE\n"
                    "  BLOCK: 1024..64M, a whole number of KiB (default 1M)\n");
    return 2;
}

int main(int argc, char **argv)
{
    cb_opts o = {.mode = "all", .bs = 1u << 20, .bufsets = 2, .repeat = 3,
                 .threads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN)};
    for (int c; (c = getopt(argc, argv, "b:m:s:r:t:")) != -1;) {
        if (c == 'b' && !(o.bs = cb_size_arg(optarg)))
            return cb_usage();
        else if (c == 'm')
            o.mode = optarg;
        else if (c == 's')
            o.bufsets = (unsigned)atoi(optarg);
        else if (c == 'r')
            o.repeat = (unsigned)atoi(optarg);
        else if (c == 't')
            o.threads = (unsigned)atoi(optarg);
        else if (c == '?')
            return cb_usage();
    }
    int all = strcmp(o.mode, "all") == 0;
    if (optind != argc - 1 || o.threads < 1 || o.bufsets < 1 ||
        (!all && strcmp(o.mode, "kernel") && strcmp(o.mode, "engine") && strcmp(o.mode, "cpu")))
        return cb_usage();
    cb_input in;
    if (cb_load(argv[optind], o.bs, &in))
        return 1;
    int rc = 0;
    if (all || !strcmp(o.mode, "kernel"))
        rc |= cb_kernel(&in, &o);
    for (int direct = 0; direct <= 1; direct++) {
        if (all || !strcmp(o.mode, "engine"))
            rc |= cb_engine(&in, &o, 1, direct);
        if (all)
            rc |= cb_engine(&in, &o, 0, direct);
    }
    if (all || !strcmp(o.mode, "cpu")) {
        rc |= cb_cpu_run(&in, o.threads, o.repeat);
        if (all && o.threads > 1)
            rc |= cb_cpu_run(&in, 1, 1);
    }
    free(in.data);
    return rc ? 1 : 0;
}
