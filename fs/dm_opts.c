/* The daemon's command line: the options libfuse does not know, kept as text and checked
 * one by one so that a bad value gets a message that names it (docs/SECURITY.md: bad input
 * gets a clear error), the defaults that follow the machine, --help and --version. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dm.h"
#include "fmt.h"

#ifndef FPGALZ4FS_VERSION
#define FPGALZ4FS_VERSION "0.1.0"
#endif

enum { DM_KEY_HELP, DM_KEY_VERSION, DM_KEY_FG, DM_KEY_DEBUG, DM_KEY_RO, DM_KEY_RW, DM_KEY_ACL,
       DM_KEY_NOACL, DM_KEY_DIRECT, DM_KEY_NODIRECT, DM_KEY_DIRH, DM_KEY_NODIRH };

#define DM_OPT(templ, field) {templ, offsetof(struct dm_opts, field), 0}

static const struct fuse_opt dm_specs[] = {
    DM_OPT("engine=%s", engine),
    DM_OPT("sw_threads=%s", sw_threads),
    DM_OPT("cus=%s", cus),
    DM_OPT("bufsets=%s", bufsets),
    DM_OPT("card_timeout_ms=%s", card_timeout_ms),
    DM_OPT("xclbin=%s", xclbin),
    DM_OPT("device=%s", device),
    DM_OPT("xrt_kernel_model=%s", xrt_kernel_model),
    DM_OPT("card_only=%s", card_only),
    DM_OPT("card_fill_us=%s", card_fill_us),
    DM_OPT("emu_card_mbps=%s", emu_card_mbps),
    DM_OPT("emu_pcie_mbps=%s", emu_pcie_mbps),
    DM_OPT("emu_error_rate=%s", emu_error_rate),
    DM_OPT("emu_hang_rate=%s", emu_hang_rate),
    DM_OPT("emu_corrupt_rate=%s", emu_corrupt_rate),
    DM_OPT("emu_vanish_after=%s", emu_vanish_after),
    DM_OPT("emu_card_check=%s", emu_card_check),
    DM_OPT("mem_mb=%s", mem_mb),
    DM_OPT("file_version=%s", file_version),
    DM_OPT("log=%s", log),
    FUSE_OPT_KEY("-h", DM_KEY_HELP),
    FUSE_OPT_KEY("--help", DM_KEY_HELP),
    FUSE_OPT_KEY("-V", DM_KEY_VERSION),
    FUSE_OPT_KEY("--version", DM_KEY_VERSION),
    FUSE_OPT_KEY("-f", DM_KEY_FG),
    FUSE_OPT_KEY("-d", DM_KEY_DEBUG),
    FUSE_OPT_KEY("debug", DM_KEY_DEBUG),
    FUSE_OPT_KEY("ro", DM_KEY_RO),
    FUSE_OPT_KEY("rw", DM_KEY_RW),
    FUSE_OPT_KEY("acl", DM_KEY_ACL),
    FUSE_OPT_KEY("noacl", DM_KEY_NOACL),
    FUSE_OPT_KEY("direct_writes", DM_KEY_DIRECT),
    FUSE_OPT_KEY("nodirect_writes", DM_KEY_NODIRECT),
    FUSE_OPT_KEY("dir_handles", DM_KEY_DIRH),
    FUSE_OPT_KEY("nodir_handles", DM_KEY_NODIRH),
    /* What mount(8) and fstab may pass that libfuse does not know: access-time policy is
     * the kernel's for a FUSE mount, and the rest concern mount(8) itself. */
    FUSE_OPT_KEY("diratime", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nodiratime", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("relatime", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("norelatime", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("strictatime", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("lazytime", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nolazytime", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("iversion", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("noiversion", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_END,
};

void dm_usage(FILE *out)
{
    fprintf(out,
            "usage: fpgalz4fs BACKING MOUNTPOINT [-f] [-o opt,...]\n"
            "       fpgalz4fs --version | --help\n"
            "\n"
            "Mounts the fpgalz4fs store BACKING (made by mkfpgalz4fs) on MOUNTPOINT.\n"
            "\n"
            "  -f                     stay in the foreground, log to stderr\n"
            "  -d, -o debug           foreground with FUSE request tracing\n"
            "  -h, --help             this text\n"
            "  -V, --version          version and the engines of this build\n"
            "\n"
            "fpgalz4fs options (-o):\n"
            "  engine=auto|sw|emu|xrt|cuda  compression engine (auto)\n"
            "  sw_threads=N           software compression threads (number of cores)\n"
            "  cus=N                  compute units to use (all; emu: 1)\n"
            "  bufsets=N              buffer sets per compute unit, >= 1 (2; cuda: 4)\n"
            "  card_timeout_ms=N      a card run older than this is a fault (5000)\n"
            "  xclbin=PATH            XRT: the xclbin to load\n"
            "  device=N               XRT: device index (0)\n"
            "  xrt_kernel_model=0|1   XRT noop shim: run the reference kernel (0)\n"
            "  card_only=0|1          a card's bricks wait for it, never go to software (0)\n"
            "  card_fill_us=N         while the card is busy, a brick waits up to N us to fill\n"
            "                         (2000; 0: starts at once)\n"
            "  emu_card_mbps=N        emulated card: modelled kernel rate (200)\n"
            "  emu_pcie_mbps=N        emulated card: modelled PCIe rate each way (10000)\n"
            "  emu_error_rate=F       emulated card: fraction of runs that fail, 0..1 (0)\n"
            "  emu_hang_rate=F        emulated card: fraction of runs that hang, 0..1 (0)\n"
            "  emu_corrupt_rate=F     emulated card: fraction of runs with a wrong byte, 0..1 (0)\n"
            "  emu_vanish_after=N     emulated card: every run after the Nth errors (0: never)\n"
            "  emu_card_check=0|1     emulated card: model a card that checks its own output (0)\n"
            "  mem_mb=N               decoded-block cache and bricks in flight, >= 16\n"
            "                         (256, or 64 per core with more than 4, cuda: 128 per core;\n"
            "                         at most 1/16 of RAM)\n"
            "  file_version=1|2|3|4|5|6|7 on-disk format of new files; 1 to 6 for stores\n"
            "                         shared with builds that read only up to that version (7)\n"
            "  log=FILE               log file (default: stderr with -f, else syslog)\n"
            "  acl, noacl             POSIX ACLs stored and enforced, or refused (acl)\n"
            "  direct_writes, nodirect_writes\n"
            "                         a file created or opened write-only with O_TRUNC is\n"
            "                         written past the page cache, or through it (direct)\n"
            "  dir_handles, nodir_handles\n"
            "                         every listing opens the directory (OPENDIR, RELEASEDIR),\n"
            "                         or only where the kernel cannot skip it (nodir_handles)\n"
            "\n"
            "Standard mount and FUSE options pass through, among them:\n"
            "  ro, rw, allow_other, allow_root, default_permissions (always on), dev, nodev,\n"
            "  suid, nosuid, exec, noexec, atime, noatime, sync, async, dirsync,\n"
            "  (relatime, strictatime, lazytime, nodiratime, defaults, auto, noauto, user,\n"
            "  nofail, _netdev are accepted and ignored: the kernel keeps access times)\n"
            "  auto_unmount, fsname=NAME, subtype=NAME\n");
}

void dm_version(void)
{
    char names[128];
    eng_backends_available(names, sizeof(names));
    printf("fpgalz4fs %s\nbackends: %s\n", FPGALZ4FS_VERSION, names);
}

static int dm_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    struct dm_opts *o = data;
    switch (key) {
    case DM_KEY_HELP:
        o->help = 1;
        return 0;
    case DM_KEY_VERSION:
        o->version = 1;
        return 0;
    case DM_KEY_FG:
        o->foreground = 1;
        return 0;
    case DM_KEY_DEBUG:
        o->foreground = 1;
        return 1;
    case DM_KEY_RO:
        o->read_only = 1;
        return 1;
    case DM_KEY_RW:
        o->read_only = 0;
        return 1;
    case DM_KEY_ACL:
    case DM_KEY_NOACL:
        o->noacl = key == DM_KEY_NOACL;
        return 0;
    case DM_KEY_DIRECT:
    case DM_KEY_NODIRECT:
        o->nodirect = key == DM_KEY_NODIRECT;
        return 0;
    case DM_KEY_DIRH:
    case DM_KEY_NODIRH:
        o->dir_handles = key == DM_KEY_DIRH;
        return 0;
    case FUSE_OPT_KEY_NONOPT:
        if (!o->backing)
            o->backing = strdup(arg);
        else if (!o->mountpoint)
            o->mountpoint = strdup(arg);
        else
            o->extra_args++;
        return 0;
    default:
        return 1;                      /* a mount or FUSE option: fuse_session_new checks it */
    }
}

/* ---- checking option values ---- */

int dm_bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fpgalz4fs: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static int dm_uint(const char *name, const char *text, unsigned long long min,
                   unsigned long long max, unsigned long long *out)
{
    if (!text)
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || errno || *end || v < min || v > max)
        return dm_bad("%s=%s: expected a whole number from %llu to %llu", name, text, min, max);
    *out = v;
    return 0;
}

static int dm_rate(const char *name, const char *text, double *out)
{
    if (!text)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || *end || !(v >= 0.0 && v <= 1.0))
        return dm_bad("%s=%s: expected a fraction from 0 to 1", name, text);
    *out = v;
    return 0;
}

/* libfuse changes directory to / and the daemon may too: every path option is made
 * absolute first. A file that does not exist yet (a new log) keeps its name under the
 * resolved directory. */
static char *dm_absolute(const char *path)
{
    char *real = realpath(path, NULL);
    if (real || path[0] == '/')
        return real ? real : strdup(path);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)))
        return NULL;
    size_t len = strlen(cwd) + strlen(path) + 2;
    char *abs = malloc(len);
    if (abs)
        snprintf(abs, len, "%s/%s", cwd, path);
    return abs;
}

static int dm_engine(struct dm_config *c, const char *engine)
{
    c->backend = ENG_BACKEND_SW;
    if (!engine || strcmp(engine, "auto") == 0) {
        c->engine_auto = 1;
        return 0;
    }
    for (eng_backend b = ENG_BACKEND_SW; b <= ENG_BACKEND_CUDA; b++)
        if (strcmp(engine, eng_backend_option(b)) == 0) {
            c->backend = b;
            return 0;
        }
    return dm_bad("engine=%s: expected auto, sw, emu, xrt or cuda", engine);
}

/* mem_mb when not given: 256, or per_core MiB per online core where that is more (each
 * streaming writer keeps bricks in flight: at 256, eight writers on 16 cores waited for their
 * own bricks with the cores 46 % idle; with a GPU, whose four buffer sets hold 256 MiB of
 * bricks besides, 8 writers wrote 10 % faster at 128 per core than at 64: docs/BENCHMARKS.md),
 * but never above a sixteenth of the memory. */
unsigned long long dm_default_mem_mb(unsigned long long per_core)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    unsigned long long mb = cores > 4 ? per_core * (unsigned long long)cores : 256;
    unsigned long long cap = pages > 0 && page > 0
                                 ? (unsigned long long)pages * (unsigned long long)page >> 24
                                 : mb;
    if (mb > cap)
        mb = cap;
    return mb < 256 ? 256 : mb;
}

static int dm_check(struct fs_daemon *dm)
{
    const struct dm_opts *o = &dm->opt;
    struct dm_config *c = &dm->cfg;
    c->bufsets = 0;                    /* the engine's default for the backend */
    c->card_timeout_ms = 5000;
    c->card_fill_us = ENG_FILL_US_DEFAULT;
    c->emu_card_mbps = 200;
    c->emu_pcie_mbps = 10000;
    c->mem_mb = dm_default_mem_mb(DM_MEM_MB_PER_CORE);
    c->file_version = FMT_VERSION;
    if (dm_engine(c, o->engine) || dm_uint("sw_threads", o->sw_threads, 1, 1024, &c->sw_threads) ||
        dm_uint("cus", o->cus, 1, 64, &c->cus) ||
        dm_uint("bufsets", o->bufsets, 1, 64, &c->bufsets) ||
        dm_uint("card_timeout_ms", o->card_timeout_ms, 1, 3600000, &c->card_timeout_ms) ||
        dm_uint("device", o->device, 0, 1023, &c->device) ||
        dm_uint("xrt_kernel_model", o->xrt_kernel_model, 0, 1, &c->xrt_kernel_model) ||
        dm_uint("card_only", o->card_only, 0, 1, &c->card_only) ||
        dm_uint("card_fill_us", o->card_fill_us, 0, 1000000, &c->card_fill_us) ||
        dm_uint("emu_card_mbps", o->emu_card_mbps, 1, 1000000, &c->emu_card_mbps) ||
        dm_uint("emu_pcie_mbps", o->emu_pcie_mbps, 1, 1000000, &c->emu_pcie_mbps) ||
        dm_rate("emu_error_rate", o->emu_error_rate, &c->emu_error_rate) ||
        dm_rate("emu_hang_rate", o->emu_hang_rate, &c->emu_hang_rate) ||
        dm_rate("emu_corrupt_rate", o->emu_corrupt_rate, &c->emu_corrupt_rate) ||
        dm_uint("emu_vanish_after", o->emu_vanish_after, 0, 1ull << 62, &c->emu_vanish_after) ||
        dm_uint("emu_card_check", o->emu_card_check, 0, 1, &c->emu_card_check) ||
        dm_uint("mem_mb", o->mem_mb, 16, 1u << 20, &c->mem_mb) ||
        dm_uint("file_version", o->file_version, 1, FMT_VERSION, &c->file_version))
        return -1;
    if (o->xclbin && !(c->xclbin = dm_absolute(o->xclbin)))
        return dm_bad("xclbin=%s: %s", o->xclbin, strerror(errno));
    if (o->log && !(c->log = dm_absolute(o->log)))
        return dm_bad("log=%s: %s", o->log, strerror(errno));
    return 0;
}

int dm_parse(struct fs_daemon *dm)
{
    if (fuse_opt_parse(&dm->args, &dm->opt, dm_specs, dm_opt_proc) != 0)
        return dm_bad("cannot parse the command line (see --help)");
    if (dm->opt.help || dm->opt.version)
        return 0;
    if (!dm->opt.backing || !dm->opt.mountpoint || dm->opt.extra_args)
        return dm_bad("usage: fpgalz4fs BACKING MOUNTPOINT [-f] [-o opt,...] (see --help)");
    return dm_check(dm);
}

void dm_opts_free(struct fs_daemon *dm)
{
    free(dm->cfg.xclbin);
    free(dm->cfg.log);
    char **strs[] = {&dm->opt.engine, &dm->opt.sw_threads, &dm->opt.cus, &dm->opt.bufsets,
                     &dm->opt.card_timeout_ms, &dm->opt.xclbin, &dm->opt.device,
                     &dm->opt.xrt_kernel_model, &dm->opt.card_only, &dm->opt.card_fill_us,
                     &dm->opt.emu_card_mbps,
                     &dm->opt.emu_pcie_mbps,
                     &dm->opt.emu_error_rate, &dm->opt.emu_hang_rate, &dm->opt.emu_corrupt_rate,
                     &dm->opt.emu_vanish_after, &dm->opt.emu_card_check, &dm->opt.mem_mb,
                     &dm->opt.file_version, &dm->opt.log, &dm->opt.backing, &dm->opt.mountpoint};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        free(*strs[i]);
}
