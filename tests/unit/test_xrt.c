/* The XRT backend plugin (fpgalz4fs-xrt.so) under XRT's noop shim: the call sequence through
 * its device interface, busy detection with a completion delay, the kernel model's output,
 * abandoning and closing with runs in flight, and the whole engine on top of it.
 *
 * Built whether or not XRT is present: the plugin is loaded at run time from the test's own
 * folder (the build root), and every test skips when it is not there. The noop shim is set
 * up here: XILINX_XRT points at a temporary folder whose lib links to the folder XRT was
 * loaded from, and xrt.ini makes every run complete 100 ms after it starts. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lz4.h>

#include "eng_internal.h"
#include "testdata.h"

#define TX_DELAY_US 100000
#define TX_STRIDE (64u * 1024)

typedef struct {
    eng_plugin_handle h;
    char dir[PATH_MAX];                /* the temporary XILINX_XRT and xclbins */
    char xclbin[PATH_MAX + 16];
    char other[PATH_MAX + 16];         /* an xclbin of another kernel */
    int ready;
} tx_env;

static tx_env tx;

/* The folder libxrt_coreutil was loaded from (the plugin links it). */
static int tx_find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    if (slash && strncmp(slash + 1, "libxrt_coreutil.so", 18) == 0) {
        snprintf(arg, PATH_MAX, "%.*s", (int)(slash - info->dlpi_name), info->dlpi_name);
        return 1;
    }
    return 0;
}

static int tx_run(const char *fmt, ...)
{
    char cmd[3 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static int tx_setup_env(void)
{
    char err[256], exe[PATH_MAX], lib[PATH_MAX] = "", path[2 * PATH_MAX];
    if (eng_plugin_load("xrt", &tx.h, err, sizeof(err)) != 0) {
        print_message("skipping: the XRT backend is not built (%s)\n", err);
        return -1;
    }
    dl_iterate_phdr(tx_find_lib, lib);
    snprintf(path, sizeof(path), "%s/libxrt_noop.so.2", lib);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (!lib[0] || access(path, R_OK) != 0 || n <= 0) {
        print_message("skipping: XRT's noop shim is not installed\n");
        return -1;
    }
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(tx.dir, sizeof(tx.dir), "%s/fpgalz4fs-test-xrt.XXXXXX", P_tmpdir);
    if (!mkdtemp(tx.dir))
        return -1;
    snprintf(tx.xclbin, sizeof(tx.xclbin), "%s/lz4.xclbin", tx.dir);
    snprintf(tx.other, sizeof(tx.other), "%s/other.xclbin", tx.dir);
    if (tx_run("mkdir -p '%s/xrt' && ln -s '%s' '%s/xrt/lib' && "
               "printf '[Runtime]\\nnoop_completion_delay_us=%d\\n' > '%s/xrt.ini' && "
               "'%s/fpgalz4fs-mkxclbin' --cus 2 '%s' && "
               "'%s/fpgalz4fs-mkxclbin' --kernel otherKernel '%s'", tx.dir, lib, tx.dir,
               TX_DELAY_US, tx.dir, exe, tx.xclbin, exe, tx.other) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/xrt", tx.dir);
    setenv("XILINX_XRT", path, 1);
    setenv("XCL_EMULATION_MODE", "noop", 1);
    snprintf(path, sizeof(path), "%s/xrt.ini", tx.dir);
    setenv("XRT_INI_PATH", path, 1);
    return 0;
}

static int tx_group_setup(void **state)
{
    (void)state;
    tx.ready = tx_setup_env() == 0;
    return 0;
}

static int tx_group_teardown(void **state)
{
    (void)state;
    if (tx.dir[0])
        tx_run("rm -rf '%s'", tx.dir);
    eng_plugin_unload(&tx.h);
    return 0;
}

static const eng_dev_ops *tx_ops(void)
{
    if (!tx.ready)
        skip();
    return tx.h.plugin->ops;
}

static eng_config tx_config(int model)
{
    return (eng_config){.backend = ENG_BACKEND_XRT, .bufsets = 2, .card_timeout_ms = 5000,
                        .block_size = TX_STRIDE, .xclbin = tx.xclbin, .xrt_kernel_model = model};
}

/* Fills a set with n blocks (the last one random, so it does not shrink) and the sentinel. */
static uint32_t tx_fill(eng_bufset *bs, uint32_t n, uint8_t *orig)
{
    for (uint32_t j = 0; j < n; j++) {
        uint8_t *blk = orig + (size_t)j * TX_STRIDE;
        if (j == n - 1)
            fill_random(blk, TX_STRIDE, j + 1);
        else
            fill_text(blk, TX_STRIDE, j + 1);
        memcpy(bs->in + (size_t)j * TX_STRIDE, blk, TX_STRIDE);
        bs->in_sizes[j] = TX_STRIDE;
        bs->sizes[j] = 0xFFFFFFFFu;
    }
    return n * TX_STRIDE;
}

/* Polls until the run is no longer running; returns the final state. */
static eng_run_state tx_wait(const eng_dev_ops *ops, eng_dev *d, unsigned cu, unsigned set)
{
    eng_run_state st = ENG_RUN_RUNNING;
    for (int i = 0; i < 5000 && st == ENG_RUN_RUNNING; i++) {
        usleep(1000);
        st = ops->poll(d, cu, set);
    }
    return st;
}

/* Opens the device under the plugin's ops (tx_config(model)), or skips. */
static eng_dev *tx_open(const eng_dev_ops **ops, int model)
{
    *ops = tx_ops();
    char err[512] = "";
    eng_config cfg = tx_config(model);
    eng_dev *d = (*ops)->open(&cfg, TX_STRIDE, err, sizeof(err));
    assert_non_null(d);
    return d;
}

/* Waits for the run on (cu, set) to end, which it must do, and collects it. */
static void tx_finish(const eng_dev_ops *ops, eng_dev *d, unsigned cu, unsigned set)
{
    assert_int_equal(tx_wait(ops, d, cu, set), ENG_RUN_DONE);
    assert_int_equal(ops->collect(d, cu, set), 0);
}

static double tx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Starts a run on (cu, set) and sees it busy: the shim completes a run TX_DELAY_US after
 * its start, so a poll that comes later than that (this thread descheduled) may rightly see
 * it done; then the run is collected and started again (at most 5 times). A run seen done
 * sooner is a failure. */
static void tx_start_busy(const eng_dev_ops *ops, eng_dev *d, unsigned cu, unsigned set,
                          uint32_t n, uint32_t input)
{
    for (int tries = 0; tries < 5; tries++) {
        double t0 = tx_now();
        assert_int_equal(ops->start(d, cu, set, n, input), 0);
        eng_run_state st = ops->poll(d, cu, set);
        if (st == ENG_RUN_RUNNING)
            return;
        assert_true(tx_now() - t0 >= TX_DELAY_US / 1e6 * 0.9);
        tx_finish(ops, d, cu, set);
    }
    fail_msg("the poll came too late five times in a row");
}

/* An LZ4 block of len bytes at comp decodes to the TX_STRIDE bytes at want. */
static void tx_check_block(const uint8_t *comp, uint32_t len, const uint8_t *want)
{
    uint8_t *back = malloc(TX_STRIDE);
    int n = LZ4_decompress_safe((const char *)comp, (char *)back, (int)len, TX_STRIDE);
    assert_int_equal(n, TX_STRIDE);
    assert_memory_equal(back, want, TX_STRIDE);
    free(back);
}

/* The API sequence: open, one kernel per CU, buffer sets, start, busy, done, collect. */
static void test_sequence_and_busy(void **state)
{
    (void)state;
    const eng_dev_ops *ops;
    eng_dev *d = tx_open(&ops, 0);
    assert_int_equal(ops->n_cus(d), 2);
    assert_int_equal(ops->n_sets(d), 2);
    assert_int_equal(ops->capacity(d), 8);
    assert_ptr_not_equal(ops->bufset(d, 0, 0)->in, ops->bufset(d, 1, 0)->in);
    assert_string_equal(ops->label(d), "xrt");

    uint8_t *orig = malloc(8 * TX_STRIDE);
    eng_bufset *bs = ops->bufset(d, 1, 1);
    uint32_t input = tx_fill(bs, 3, orig);
    /* The run completes 100 ms after it starts: right after the start the card is busy. */
    tx_start_busy(ops, d, 1, 1, 3, input);
    tx_finish(ops, d, 1, 1);
    /* No kernel ran under the noop shim: the sentinel is still there for the engine to see. */
    for (int j = 0; j < 3; j++)
        assert_int_equal(bs->sizes[j], 0xFFFFFFFFu);
    /* The set runs again. */
    assert_int_equal(ops->start(d, 1, 1, 3, input), 0);
    assert_int_equal(tx_wait(ops, d, 1, 1), ENG_RUN_DONE);
    ops->close(d);
    free(orig);
}

/* xrt_kernel_model=1: the reference kernel's output through the XRT buffers. */
static void test_model_output(void **state)
{
    (void)state;
    const eng_dev_ops *ops;
    eng_dev *d = tx_open(&ops, 1);
    assert_string_equal(ops->label(d), "xrt-model");
    uint8_t *orig = malloc(8 * TX_STRIDE);
    eng_bufset *bs = ops->bufset(d, 0, 1);
    uint32_t input = tx_fill(bs, 8, orig);
    assert_int_equal(ops->start(d, 0, 1, 8, input), 0);
    tx_finish(ops, d, 0, 1);
    for (uint32_t j = 0; j < 7; j++) {
        assert_true(bs->sizes[j] > 0 && bs->sizes[j] < TX_STRIDE);
        tx_check_block(bs->out + (size_t)j * TX_STRIDE, bs->sizes[j],
                       orig + (size_t)j * TX_STRIDE);
    }
    assert_true(bs->sizes[7] >= TX_STRIDE && bs->sizes[7] <= TX_STRIDE + TX_STRIDE / 64);
    ops->close(d);
    free(orig);
}

/* A run given up on is not cancelled: poll keeps saying it runs until it is over, and only
 * then is the set started again (the engine waits for that, never for the run); closing with
 * runs in flight returns. */
static void test_abandon_and_close_in_flight(void **state)
{
    (void)state;
    const eng_dev_ops *ops;
    eng_dev *d = tx_open(&ops, 1);
    uint8_t *orig = malloc(8 * TX_STRIDE);
    uint32_t input = tx_fill(ops->bufset(d, 0, 0), 2, orig);
    double t0 = tx_now();
    tx_start_busy(ops, d, 0, 0, 2, input);
    ops->abandon(d, 0, 0);
    double after = tx_now() - t0;
    if (after < TX_DELAY_US / 1e6 * 0.5)  /* the abandon returned long before the run ends */
        assert_int_equal(ops->poll(d, 0, 0), ENG_RUN_RUNNING);
    assert_int_not_equal(tx_wait(ops, d, 0, 0), ENG_RUN_RUNNING);
    input = tx_fill(ops->bufset(d, 0, 0), 2, orig);
    assert_int_equal(ops->start(d, 0, 0, 2, input), 0);
    tx_finish(ops, d, 0, 0);
    assert_true(ops->bufset(d, 0, 0)->sizes[0] < TX_STRIDE);
    /* runs in flight on both compute units, then close */
    for (unsigned cu = 0; cu < 2; cu++) {
        input = tx_fill(ops->bufset(d, cu, 1), 2, orig);
        assert_int_equal(ops->start(d, cu, 1, 2, input), 0);
    }
    ops->close(d);
    free(orig);
}

static void test_refusals(void **state)
{
    (void)state;
    const eng_dev_ops *ops = tx_ops();
    char err[512] = "";
    eng_config cfg = tx_config(0);
    cfg.xclbin = tx.other;
    assert_null(ops->open(&cfg, TX_STRIDE, err, sizeof(err)));
    assert_non_null(strstr(err, "no compute unit of kernel xilLz4Compress"));
    cfg = tx_config(0);
    cfg.cus = 3;
    assert_null(ops->open(&cfg, TX_STRIDE, err, sizeof(err)));
    assert_non_null(strstr(err, "cus=3"));
    /* the model only under noop */
    unsetenv("XCL_EMULATION_MODE");
    cfg = tx_config(1);
    eng_dev *d = ops->open(&cfg, TX_STRIDE, err, sizeof(err));
    setenv("XCL_EMULATION_MODE", "noop", 1);
    assert_null(d);
    assert_non_null(strstr(err, "noop"));
    /* auto never picks an emulated device */
    cfg = tx_config(0);
    assert_int_equal(tx.h.plugin->probe(&cfg, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "emulated device"));
}

/* The whole engine on the plugin: without the model every output is caught and redone in
 * software; with it the card's output is used. Either way every job decodes. */
static void tx_engine(int model)
{
    tx_ops();
    char err[512] = "";
    eng_config cfg = tx_config(model);
    eng_ctx *eng = eng_open(&cfg, err, sizeof(err));
    assert_non_null(eng);
    enum { N = 24 };
    eng_job jobs[N];
    uint8_t *src = malloc((size_t)N * TX_STRIDE);
    uint32_t cap = eng_bound(TX_STRIDE);
    uint8_t *dst = malloc((size_t)N * cap);
    for (int i = 0; i < N; i++) {
        fill_text(src + (size_t)i * TX_STRIDE, TX_STRIDE, (uint64_t)i + 100);
        jobs[i] = (eng_job){.src = src + (size_t)i * TX_STRIDE, .len = TX_STRIDE,
                            .dst = dst + (size_t)i * cap, .dst_cap = cap};
    }
    eng_compress(eng, jobs, N);
    for (int i = 0; i < N; i++) {
        assert_true(jobs[i].out_len < TX_STRIDE);
        tx_check_block(jobs[i].dst, jobs[i].out_len, jobs[i].src);
    }
    eng_stats st;
    eng_get_stats(eng, &st);
    if (model) {
        assert_true(st.bricks_card > 0);
        assert_int_equal(st.fallback_error, 0);
        assert_string_equal(eng_backend_name(eng), "xrt-model");
    } else {
        assert_int_equal(st.bricks_card, 0);
        assert_true(st.fallback_error > 0);
        assert_string_equal(eng_backend_name(eng), "xrt");
    }
    eng_close(eng);
    free(src), free(dst);
}

static void test_engine_catches_every_output(void **state) { (void)state; tx_engine(0); }
static void test_engine_uses_model_output(void **state) { (void)state; tx_engine(1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_and_busy),
        cmocka_unit_test(test_model_output),
        cmocka_unit_test(test_abandon_and_close_in_flight),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_engine_catches_every_output),
        cmocka_unit_test(test_engine_uses_model_output),
    };
    return cmocka_run_group_tests(tests, tx_group_setup, tx_group_teardown);
}
