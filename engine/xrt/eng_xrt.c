/* The XRT backend: an Alveo card running the Vitis Libraries' xilLz4Compress kernel, driven
 * through XRT's C API. Built as the plugin fpgalz4fs-xrt.so, which the engine opens with
 * dlopen, so that the daemon never links XRT and runs on hosts without it.
 *
 * One kernel handle per compute unit ("xilLz4Compress:{xilLz4Compress_N}", the CU names read
 * from the xclbin), and for each CU N buffer sets allocated once, in the memory bank each
 * argument of that CU is connected to (xrtKernelArgGroupId), each with its own run handle
 * whose buffer arguments are set once. A run: sync the input, the block sizes and the
 * sentinel-filled size array to the card, set the two scalars, start. xrtRunState is the
 * non-blocking busy test. Collecting syncs back the size array and only the compressed bytes.
 *
 * XRT ends the process (an uncaught C++ exception) when XILINX_XRT is unset or its shim
 * library is missing, so both are checked before the first XRT call; nothing here may take
 * the daemon down.
 *
 * xrt_kernel_model=1 (only under XRT's noop shim, whose buffers are host memory and whose
 * runs compute nothing): when a run completes, the reference kernel (kernels/krn_lz4.c, the
 * xilLz4Compress contract) runs over the mapped buffers, as XRT's software emulation runs a
 * kernel's C model, so the whole data path through the XRT API yields real output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#include "eng_internal.h"
#include "krn_lz4.h"
#include "xrt_xclbin.h"

#define XR_KERNEL "xilLz4Compress"
#define XR_MAX_SETS 16u
#define XR_BUF_ARGS 4                  /* in, out, compressd_size, in_block_size */
#define XR_ARG_BLOCK_KB 4
#define XR_ARG_INPUT_SIZE 5
#define XR_SYNC_ALIGN 64u              /* the kernel's 512-bit data width */
/* Buffers are whole pages: XRT's host-side allocation asks aligned_alloc for page alignment,
 * which is only valid for a size that is a multiple of it (8 sizes would be 32 bytes). */
#define XR_PAGE 4096u
#define XR_XOCL_SYSFS "/sys/bus/pci/drivers/xocl"

enum { XR_IN = 0, XR_OUT, XR_SIZES, XR_IN_SIZES };

typedef struct {
    xrtBufferHandle bo[XR_BUF_ARGS];   /* allocated once, in the CU's banks */
    eng_bufset bs;                     /* their host mappings */
    xrtRunHandle run;                  /* its buffer arguments are set once */
    int pending;                       /* started, not yet seen complete */
    int modelled;                      /* xrt_kernel_model: the model ran for this run */
    uint32_t input_size;
} xr_set;

typedef struct {
    xrtKernelHandle kernel;
    int group[XR_BUF_ARGS];            /* memory bank group of each buffer argument */
    xr_set sets[XR_MAX_SETS];
} xr_cu;

struct eng_dev_s {
    xrtDeviceHandle dev;
    unsigned n_cus, n_sets;
    uint32_t stride;
    unsigned timeout_ms;
    int model;
    xr_cu cus[XB_MAX_CUS];
};

/* ---- the environment: what must hold before any XRT call ---- */

/* The shim library XRT will load for the emulation mode in effect; NULL if unknown. */
static const char *xr_shim_name(const char *mode)
{
    if (!mode || !*mode)
        return "libxrt_core.so.2";
    if (strcmp(mode, "noop") == 0)
        return "libxrt_noop.so.2";
    if (strcmp(mode, "sw_emu") == 0)
        return "libxrt_swemu.so.2";
    if (strcmp(mode, "hw_emu") == 0)
        return "libxrt_hwemu.so.2";
    return NULL;
}

/* XRT terminates the process when XILINX_XRT is unset or its shim is missing: check both. */
static int xr_env_ok(char *why, size_t cap)
{
    const char *root = getenv("XILINX_XRT");
    const char *mode = getenv("XCL_EMULATION_MODE");
    if (!root || !*root) {
        snprintf(why, cap, "XILINX_XRT is not set, so no XRT card can be used (on a host with "
                 "an Alveo card: source /opt/xilinx/xrt/setup.sh)");
        return 0;
    }
    const char *shim = xr_shim_name(mode);
    if (!shim) {
        snprintf(why, cap, "XCL_EMULATION_MODE=%s is not one of noop, sw_emu, hw_emu", mode);
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/lib/%s", root, shim);
    if (access(path, R_OK) != 0) {
        snprintf(why, cap, "XILINX_XRT=%s has no %s (%s), so no XRT card can be used", root,
                 path, strerror(errno));
        return 0;
    }
    return 1;
}

static int xr_is_noop(void)
{
    const char *mode = getenv("XCL_EMULATION_MODE");
    return mode && strcmp(mode, "noop") == 0;
}

/* ---- probe (engine=auto): a real card and an xclbin with the kernel, never emulation ---- */

static int xr_probe(const eng_config *cfg, char *why, size_t cap)
{
    const char *mode = getenv("XCL_EMULATION_MODE");
    if (!xr_env_ok(why, cap))
        return 0;
    if (mode && *mode) {
        snprintf(why, cap, "XCL_EMULATION_MODE=%s: an emulated device, not a card (auto "
                 "never picks it; use engine=xrt)", mode);
        return 0;
    }
    if (access(XR_XOCL_SYSFS, F_OK) != 0) {
        snprintf(why, cap, "no Alveo card: the xocl driver is not loaded (no %s)",
                 XR_XOCL_SYSFS);
        return 0;
    }
    if (!cfg->xclbin) {
        snprintf(why, cap, "the xocl driver is loaded but no xclbin= was given, so the card "
                 "is not used (see docs/XRT.md)");
        return 0;
    }
    xb_cus cus;
    if (xb_find_cus(cfg->xclbin, XR_KERNEL, &cus, why, cap) != 0)
        return 0;
    xrtDeviceHandle d = xrtDeviceOpen(cfg->device);
    if (!d) {
        snprintf(why, cap, "no XRT card with index %u (xbutil examine lists them)", cfg->device);
        return 0;
    }
    xrtDeviceClose(d);
    snprintf(why, cap, "XRT card %u with %s (%u compute units of %s)", cfg->device, cfg->xclbin,
             cus.n, XR_KERNEL);
    return 1;
}

/* ---- open ---- */

static void xr_close(eng_dev *d);

static int xr_fail(char *err, size_t cap, const char *what)
{
    int e = errno;
    snprintf(err, cap, "XRT: %s%s%s", what, e ? ": " : "", e ? strerror(e) : "");
    return -1;
}

/* Checks everything that can be checked without a device. */
static int xr_check_config(const eng_config *cfg, xb_cus *cus, char *err, size_t cap)
{
    if (!xr_env_ok(err, cap))
        return -1;
    if (cfg->xrt_kernel_model && !xr_is_noop()) {
        snprintf(err, cap, "xrt_kernel_model=1 runs only under XRT's noop shim "
                 "(XCL_EMULATION_MODE=noop); on a card the kernel itself runs");
        return -1;
    }
    if (!cfg->xclbin) {
        snprintf(err, cap, "engine=xrt needs xclbin=PATH: the %s xclbin built from the Vitis "
                 "Libraries (docs/XRT.md)", XR_KERNEL);
        return -1;
    }
    if (xb_find_cus(cfg->xclbin, XR_KERNEL, cus, err, cap) != 0)
        return -1;
    if (cfg->cus > cus->n) {
        snprintf(err, cap, "cus=%u but %s has %u compute units of %s", cfg->cus, cfg->xclbin,
                 cus->n, XR_KERNEL);
        return -1;
    }
    if (cfg->bufsets < 1 || cfg->bufsets > XR_MAX_SETS) {
        snprintf(err, cap, "XRT: bufsets must be 1..%u", XR_MAX_SETS);
        return -1;
    }
    return 0;
}

/* One buffer set: four buffers in the CU's banks, mapped, and a run with them as arguments. */
static int xr_open_set(struct eng_dev_s *d, xr_cu *cu, xr_set *s, char *err, size_t cap)
{
    _Static_assert(KRN_PARALLEL_BLOCKS * sizeof(uint32_t) <= XR_PAGE, "size arrays fit a page");
    size_t bytes[XR_BUF_ARGS] = {(size_t)KRN_PARALLEL_BLOCKS * d->stride,
                                 (size_t)KRN_PARALLEL_BLOCKS * d->stride,
                                 XR_PAGE, XR_PAGE};
    void *map[XR_BUF_ARGS];
    for (int a = 0; a < XR_BUF_ARGS; a++) {
        errno = 0;
        s->bo[a] = xrtBOAlloc(d->dev, bytes[a], XRT_BO_FLAGS_NONE, (xrtMemoryGroup)cu->group[a]);
        if (!s->bo[a])
            return xr_fail(err, cap, "cannot allocate a buffer on the card");
        map[a] = xrtBOMap(s->bo[a]);
        if (!map[a])
            return xr_fail(err, cap, "cannot map a card buffer");
    }
    s->bs = (eng_bufset){.in = map[XR_IN], .out = map[XR_OUT], .sizes = map[XR_SIZES],
                         .in_sizes = map[XR_IN_SIZES]};
    s->run = xrtRunOpen(cu->kernel);
    if (!s->run)
        return xr_fail(err, cap, "cannot open a run");
    for (int a = 0; a < XR_BUF_ARGS; a++)
        if (xrtRunSetArg(s->run, a, s->bo[a]) != 0)
            return xr_fail(err, cap, "cannot set a buffer argument");
    return 0;
}

static int xr_open_cu(struct eng_dev_s *d, xr_cu *cu, const xuid_t uuid, const char *inst,
                      char *err, size_t cap)
{
    char name[2 * XB_NAME_CAP + 8];
    snprintf(name, sizeof(name), "%s:{%s}", XR_KERNEL, inst);
    errno = 0;
    cu->kernel = xrtPLKernelOpen(d->dev, uuid, name);
    if (!cu->kernel) {
        char what[sizeof(name) + 32];
        snprintf(what, sizeof(what), "cannot open kernel %s", name);
        return xr_fail(err, cap, what);
    }
    for (int a = 0; a < XR_BUF_ARGS; a++) {
        cu->group[a] = xrtKernelArgGroupId(cu->kernel, a);
        if (cu->group[a] < 0)
            return xr_fail(err, cap, "no memory bank for a buffer argument");
    }
    for (unsigned i = 0; i < d->n_sets; i++)
        if (xr_open_set(d, cu, &cu->sets[i], err, cap) != 0)
            return -1;
    return 0;
}

static eng_dev *xr_open(const eng_config *cfg, uint32_t stride, char *err, size_t cap)
{
    xb_cus cus;
    if (xr_check_config(cfg, &cus, err, cap) != 0)
        return NULL;
    struct eng_dev_s *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(err, cap, "XRT: %s", strerror(ENOMEM));
        return NULL;
    }
    d->n_cus = cfg->cus ? cfg->cus : cus.n;
    d->n_sets = cfg->bufsets;
    d->stride = stride;
    d->timeout_ms = cfg->card_timeout_ms;
    d->model = cfg->xrt_kernel_model;
    errno = 0;
    d->dev = xrtDeviceOpen(cfg->device);
    xuid_t uuid;
    char what[512];
    int rc = 0;
    if (!d->dev) {
        snprintf(what, sizeof(what), "no device with index %u (xbutil examine lists them)",
                 cfg->device);
        rc = xr_fail(err, cap, what);
    } else if ((errno = 0, xrtDeviceLoadXclbinFile(d->dev, cfg->xclbin)) != 0) {
        snprintf(what, sizeof(what), "cannot load %s", cfg->xclbin);
        rc = xr_fail(err, cap, what);
    } else if (xrtDeviceGetXclbinUUID(d->dev, uuid) != 0) {
        rc = xr_fail(err, cap, "cannot read the xclbin's uuid");
    }
    for (unsigned i = 0; rc == 0 && i < d->n_cus; i++)
        rc = xr_open_cu(d, &d->cus[i], uuid, cus.cu[i], err, cap);
    if (rc != 0) {
        xr_close(d);
        return NULL;
    }
    return d;
}

/* ---- runs ---- */

static unsigned xr_n_cus(const eng_dev *d) { return d->n_cus; }
static unsigned xr_n_sets(const eng_dev *d) { return d->n_sets; }
static unsigned xr_capacity(const eng_dev *d) { (void)d; return KRN_PARALLEL_BLOCKS; }

static eng_bufset *xr_bufset(eng_dev *d, unsigned cu, unsigned set)
{
    return &d->cus[cu].sets[set].bs;
}

static size_t xr_round(size_t n, size_t cap)
{
    n = (n + XR_SYNC_ALIGN - 1) / XR_SYNC_ALIGN * XR_SYNC_ALIGN;
    return n < cap ? n : cap;
}

static int xr_start(eng_dev *d, unsigned cu, unsigned set, uint32_t n_blocks,
                    uint32_t input_size)
{
    xr_set *s = &d->cus[cu].sets[set];
    size_t in_cap = (size_t)KRN_PARALLEL_BLOCKS * d->stride;
    size_t sizes = KRN_PARALLEL_BLOCKS * sizeof(uint32_t);
    (void)n_blocks;                    /* the kernel counts blocks from input_size */
    if (!s->run)
        return -EIO;
    /* The size array goes too: it holds the sentinel that tells a run that wrote nothing. */
    if (xrtBOSync(s->bo[XR_IN], XCL_BO_SYNC_BO_TO_DEVICE, xr_round(input_size, in_cap), 0) ||
        xrtBOSync(s->bo[XR_IN_SIZES], XCL_BO_SYNC_BO_TO_DEVICE, sizes, 0) ||
        xrtBOSync(s->bo[XR_SIZES], XCL_BO_SYNC_BO_TO_DEVICE, sizes, 0))
        return -EIO;
    /* Scalars go through varargs as 64-bit values: right however XRT reads them. */
    if (xrtRunSetArg(s->run, XR_ARG_BLOCK_KB, (uint64_t)(d->stride / 1024)) ||
        xrtRunSetArg(s->run, XR_ARG_INPUT_SIZE, (uint64_t)input_size) || xrtRunStart(s->run))
        return -EIO;
    s->input_size = input_size;
    s->pending = 1, s->modelled = 0;
    return 0;
}

/* The kernel's C model over the mapped buffers (noop shim only: they are the card's). */
static void xr_model(struct eng_dev_s *d, xr_set *s)
{
    krn_lz4_compress(s->bs.in, s->bs.out, s->bs.sizes, s->bs.in_sizes, d->stride / 1024,
                     s->input_size);
    s->modelled = 1;
}

static eng_run_state xr_poll(eng_dev *d, unsigned cu, unsigned set)
{
    xr_set *s = &d->cus[cu].sets[set];
    if (!s->run)
        return ENG_RUN_ERROR;
    enum ert_cmd_state st = xrtRunState(s->run);
    if (st < ERT_CMD_STATE_COMPLETED)
        return ENG_RUN_RUNNING;
    s->pending = 0;
    if (st != ERT_CMD_STATE_COMPLETED)
        return ENG_RUN_ERROR;
    if (d->model && !s->modelled)
        xr_model(d, s);
    return ENG_RUN_DONE;
}

/* Brings back the size array, then only the compressed bytes of each block that shrank. */
static int xr_collect(eng_dev *d, unsigned cu, unsigned set)
{
    xr_set *s = &d->cus[cu].sets[set];
    size_t sizes = KRN_PARALLEL_BLOCKS * sizeof(uint32_t);
    if (xrtBOSync(s->bo[XR_SIZES], XCL_BO_SYNC_BO_FROM_DEVICE, sizes, 0))
        return -EIO;
    uint32_t n = (s->input_size + d->stride - 1) / d->stride;
    for (uint32_t j = 0; j < n && j < KRN_PARALLEL_BLOCKS; j++) {
        uint32_t len = s->bs.sizes[j];
        if (len == 0 || len >= s->bs.in_sizes[j] || len > d->stride)
            continue;                  /* stored raw, or a fault the engine will catch */
        if (xrtBOSync(s->bo[XR_OUT], XCL_BO_SYNC_BO_FROM_DEVICE, xr_round(len, d->stride),
                      (size_t)j * d->stride))
            return -EIO;
    }
    return 0;
}

/* A run that timed out: XRT's C API cannot abort it, and the card may still read and write
 * the set's buffers, so nothing changes here: the set keeps its run, poll reports it, and
 * the engine leaves the set alone until the run is over (then it is started again, with
 * the same run handle). */
static void xr_abandon(eng_dev *d, unsigned cu_i, unsigned set)
{
    (void)d, (void)cu_i, (void)set;
}

/* ---- close: runs, then buffers, then kernels, then the device ---- */

static void xr_close_run(struct eng_dev_s *d, xrtRunHandle r, int pending)
{
    if (pending && xrtRunState(r) < ERT_CMD_STATE_COMPLETED)
        xrtRunWaitFor(r, d->timeout_ms ? d->timeout_ms : 5000);
    xrtRunClose(r);
}

static void xr_close(eng_dev *d)
{
    for (unsigned c = 0; c < d->n_cus; c++)
        for (unsigned i = 0; i < d->n_sets; i++)
            if (d->cus[c].sets[i].run)
                xr_close_run(d, d->cus[c].sets[i].run, d->cus[c].sets[i].pending);
    for (unsigned c = 0; c < d->n_cus; c++)
        for (unsigned i = 0; i < d->n_sets; i++)
            for (int a = 0; a < XR_BUF_ARGS; a++)
                if (d->cus[c].sets[i].bo[a])
                    xrtBOFree(d->cus[c].sets[i].bo[a]);
    for (unsigned c = 0; c < d->n_cus; c++)
        if (d->cus[c].kernel)
            xrtKernelClose(d->cus[c].kernel);
    if (d->dev)
        xrtDeviceClose(d->dev);
    free(d);
}

static const char *xr_label(const eng_dev *d) { return d->model ? "xrt-model" : "xrt"; }

static const eng_dev_ops xr_ops = {
    .name = "xrt",
    .open = xr_open,
    .n_cus = xr_n_cus,
    .n_sets = xr_n_sets,
    .capacity = xr_capacity,
    .bufset = xr_bufset,
    .start = xr_start,
    .poll = xr_poll,
    .collect = xr_collect,
    .abandon = xr_abandon,
    .close = xr_close,
    .label = xr_label,
};

__attribute__((visibility("default"))) const eng_plugin fpgalz4fs_plugin = {
    .abi = ENG_PLUGIN_ABI,
    .config_size = sizeof(eng_config),
    .name = "xrt",
    .ops = &xr_ops,
    .probe = xr_probe,
};
