/* fpgalz4fs: the daemon. Parses the command line, checks and locks the store, forks into the
 * background (its parent returns only once the mount is up and the engine open, or fails
 * with the child's reason), and runs the FUSE loop until unmount. */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <fuse_opt.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cred.h"
#include "eng.h"
#include "ffile.h"
#include "fmt.h"
#include "inode.h"
#include "log.h"
#include "mounts.h"
#include "ops.h"
#include "sb.h"

#ifndef FPGALZ4FS_VERSION
#define FPGALZ4FS_VERSION "0.1.0"
#endif

#define DM_MAX_THREADS 16
/* The kernel hears of every change made through the mount, so its caches only go stale
 * when someone changes the backing directory behind the daemon's back (unsupported, but
 * people do it): a few seconds bounds how long such a change stays unseen while sparing
 * most lookups and getattrs. */
#define DM_CACHE_TIMEOUT_S 5.0
#define DM_SIZES 16384u               /* logical sizes remembered past a forget (sizes.h) */
#define DM_MSG_MAX 1024
#define DM_LOCK_WAIT_MS 10000          /* for the daemon of the last unmount to let go */
#define DM_LOCK_STEP_MS 20

/* Options as given, kept as text so that every value is checked with a clear message. */
struct dm_opts {
    char *engine;                      /* auto|sw|emu|xrt|cuda */
    char *sw_threads;                  /* software compression threads */
    char *cus;                         /* compute units */
    char *bufsets;                     /* buffer sets per compute unit */
    char *card_timeout_ms;             /* age of a card run that counts as a fault */
    char *xclbin;                      /* XRT: the xclbin */
    char *device;                      /* XRT: device index */
    char *xrt_kernel_model;            /* XRT noop shim: run the reference kernel */
    char *emu_card_mbps;               /* emulated card: kernel rate */
    char *emu_pcie_mbps;               /* emulated card: PCIe rate each way */
    char *emu_error_rate;              /* emulated card: fraction of runs that fail */
    char *emu_hang_rate;               /* emulated card: fraction that never complete */
    char *emu_corrupt_rate;            /* emulated card: fraction with a wrong byte */
    char *emu_vanish_after;            /* emulated card: runs before it is pulled out */
    char *mem_mb;                      /* decoded-block cache plus bricks in flight */
    char *file_version;                /* format version of new files */
    char *log;                         /* log file */
    char *backing;                     /* first non-option argument */
    char *mountpoint;                  /* second non-option argument */
    int extra_args;                    /* non-option arguments beyond the two */
    int foreground;                    /* -f (or -d) */
    int read_only;                     /* -o ro, unless a later -o rw */
    int noacl;                         /* -o noacl, unless a later -o acl */
    int nodirect;                      /* -o nodirect_writes, unless a later direct_writes */
    int dir_handles;                   /* -o dir_handles, unless a later nodir_handles */
    int help;                          /* -h, --help */
    int version;                       /* -V, --version */
};

/* Checked values. */
struct dm_config {
    int engine_auto;                   /* engine=auto: the choice is logged */
    eng_backend backend;               /* the engine that will be opened */
    unsigned long long sw_threads;     /* 0: one per online core */
    unsigned long long cus;            /* 0: all */
    unsigned long long bufsets;
    unsigned long long card_timeout_ms;
    unsigned long long device;
    unsigned long long xrt_kernel_model;
    unsigned long long emu_card_mbps;
    unsigned long long emu_pcie_mbps;
    double emu_error_rate;
    double emu_hang_rate;
    double emu_corrupt_rate;
    unsigned long long emu_vanish_after;
    unsigned long long mem_mb;
    unsigned long long file_version;
    char *xclbin;                      /* absolute, or NULL */
    char *log;                         /* absolute, or NULL */
};

/* Everything the daemon holds, released in reverse order by dm_cleanup. */
struct fs_daemon {
    struct dm_opts opt;                /* as parsed */
    struct dm_config cfg;              /* as checked */
    struct fuse_args args;             /* what goes to fuse_session_new */
    char *backing;                     /* realpath of BACKING */
    char *mountpoint;                  /* realpath of MOUNTPOINT */
    int lock_fd;                       /* the store lock, held until exit */
    int report_fd;                     /* pipe to the waiting parent; -1 once reported */
    sb_super sb;                       /* the store's superblock */
    struct op_fs fs;                   /* what the handlers share (root_fd, engine, ...) */
    struct fuse_lowlevel_ops ops;      /* the handlers */
    struct fuse_session *se;           /* the FUSE session, once made */
    int signals_set;                   /* fuse_set_signal_handlers succeeded */
    int mounted;                       /* fuse_session_mount succeeded */
    uint64_t whole_before;             /* the clean mark (sb_mark_read): changes before are
                                          whole on the disk */
    int started_clean;                 /* the mark said clean, and now says dirty: a clean
                                          exit may say clean again */
};

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
    DM_OPT("emu_card_mbps=%s", emu_card_mbps),
    DM_OPT("emu_pcie_mbps=%s", emu_pcie_mbps),
    DM_OPT("emu_error_rate=%s", emu_error_rate),
    DM_OPT("emu_hang_rate=%s", emu_hang_rate),
    DM_OPT("emu_corrupt_rate=%s", emu_corrupt_rate),
    DM_OPT("emu_vanish_after=%s", emu_vanish_after),
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

static void dm_usage(FILE *out)
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
            "  emu_card_mbps=N        emulated card: modelled kernel rate (200)\n"
            "  emu_pcie_mbps=N        emulated card: modelled PCIe rate each way (10000)\n"
            "  emu_error_rate=F       emulated card: fraction of runs that fail, 0..1 (0)\n"
            "  emu_hang_rate=F        emulated card: fraction of runs that hang, 0..1 (0)\n"
            "  emu_corrupt_rate=F     emulated card: fraction of runs with a wrong byte, 0..1 (0)\n"
            "  emu_vanish_after=N     emulated card: every run after the Nth errors (0: never)\n"
            "  mem_mb=N               decoded-block cache and bricks in flight, >= 16\n"
            "                         (256, or 64 per core with more than 4, cuda: 128 per core;\n"
            "                         at most 1/16 of RAM)\n"
            "  file_version=1|2|3|4   on-disk format of new files; 1 to 3 for stores shared\n"
            "                         with builds that read only up to that version (4)\n"
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

static void dm_version(void)
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

/* ------------------------------------------------------------------------------------- */
/* Checking option values */

static int dm_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int dm_bad(const char *fmt, ...)
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
#define DM_MEM_MB_PER_CORE 64ull
#define DM_MEM_MB_PER_CORE_CUDA 128ull
static unsigned long long dm_default_mem_mb(unsigned long long per_core)
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
        dm_uint("emu_card_mbps", o->emu_card_mbps, 1, 1000000, &c->emu_card_mbps) ||
        dm_uint("emu_pcie_mbps", o->emu_pcie_mbps, 1, 1000000, &c->emu_pcie_mbps) ||
        dm_rate("emu_error_rate", o->emu_error_rate, &c->emu_error_rate) ||
        dm_rate("emu_hang_rate", o->emu_hang_rate, &c->emu_hang_rate) ||
        dm_rate("emu_corrupt_rate", o->emu_corrupt_rate, &c->emu_corrupt_rate) ||
        dm_uint("emu_vanish_after", o->emu_vanish_after, 0, 1ull << 62, &c->emu_vanish_after) ||
        dm_uint("mem_mb", o->mem_mb, 16, 1u << 20, &c->mem_mb) ||
        dm_uint("file_version", o->file_version, 1, FMT_VERSION, &c->file_version))
        return -1;
    if (o->xclbin && !(c->xclbin = dm_absolute(o->xclbin)))
        return dm_bad("xclbin=%s: %s", o->xclbin, strerror(errno));
    if (o->log && !(c->log = dm_absolute(o->log)))
        return dm_bad("log=%s: %s", o->log, strerror(errno));
    return 0;
}

/* ------------------------------------------------------------------------------------- */
/* The store */

static int dm_open_store(struct fs_daemon *dm)
{
    dm->backing = realpath(dm->opt.backing, NULL);
    if (!dm->backing)
        return dm_bad("%s: %s", dm->opt.backing, strerror(errno));
    dm->mountpoint = realpath(dm->opt.mountpoint, NULL);
    if (!dm->mountpoint)
        return dm_bad("%s: %s", dm->opt.mountpoint, strerror(errno));
    struct stat st;
    if (stat(dm->mountpoint, &st) == 0 && !S_ISDIR(st.st_mode))
        return dm_bad("%s: the mountpoint is not a directory", dm->mountpoint);
    dm->fs.root_fd = open(dm->backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dm->fs.root_fd < 0)
        return dm_bad("%s: %s", dm->backing, strerror(errno));
    return 0;
}

static int dm_read_super(struct fs_daemon *dm)
{
    sb_error e = sb_read(dm->fs.root_fd, &dm->sb);
    switch (e) {
    case SB_OK:
        return 0;
    case SB_ERR_MISSING:
        return dm_bad("%s is not an fpgalz4fs store (no %s); format it with mkfpgalz4fs",
                      dm->backing, SB_FILE_NAME);
    case SB_ERR_NEWER:
        return dm_bad("%s: format version %u is newer than this fpgalz4fs supports (%u)",
                      dm->backing, dm->sb.format_version, SB_FORMAT_VERSION);
    case SB_ERR_IO:
        return dm_bad("%s/%s: %s", dm->backing, SB_FILE_NAME, strerror(errno));
    case SB_ERR_NOT_REGULAR:
        return dm_bad("%s/%s: %s; refusing to follow or use it (remove it, then run "
                      "mkfpgalz4fs --force with the original block size)",
                      dm->backing, SB_FILE_NAME, sb_error_name(e));
    default:
        return dm_bad("%s/%s: the superblock is damaged (%s); fsck.fpgalz4fs cannot guess it, "
                      "run mkfpgalz4fs --force with the original block size",
                      dm->backing, SB_FILE_NAME, sb_error_name(e));
    }
}

/* An unmount returns before its daemon has synced and let go of the store: a mount right
 * after it (umount; mount) waits for that daemon, up to DM_LOCK_WAIT_MS, while no mount of
 * the store is up. A store that is mounted is refused at once. */
static sb_error dm_lock_wait(struct fs_daemon *dm)
{
    sb_error e = sb_lock(dm->fs.root_fd, &dm->lock_fd);
    const struct timespec step = {0, DM_LOCK_STEP_MS * 1000000L};
    for (int ms = 0; e == SB_ERR_LOCKED && ms < DM_LOCK_WAIT_MS; ms += DM_LOCK_STEP_MS) {
        if (mt_source_mounted(dm->backing) != 0)
            break;
        nanosleep(&step, NULL);
        e = sb_lock(dm->fs.root_fd, &dm->lock_fd);
    }
    return e;
}

static int dm_lock_store(struct fs_daemon *dm)
{
    sb_error e = dm_lock_wait(dm);
    if (e == SB_ERR_LOCKED)
        return dm_bad("%s is already mounted by another fpgalz4fs daemon (or checked by fsck)",
                      dm->backing);
    if (e != SB_OK)
        return dm_bad("%s: cannot lock the store: %s", dm->backing,
                      e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
    return 0;
}

/* Inodes are reopened by file handle (the daemon never keeps a descriptor per inode), which
 * needs a filesystem that exports handles and CAP_DAC_READ_SEARCH: check both up front. */
static int dm_check_handles(struct fs_daemon *dm)
{
    union {
        struct file_handle fh;
        unsigned char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } hb;
    int mount_id;
    hb.fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(dm->fs.root_fd, "", &hb.fh, &mount_id, AT_EMPTY_PATH) < 0)
        return dm_bad("%s: the backing filesystem does not support file handles (%s)",
                      dm->backing, strerror(errno));
    int fd = open_by_handle_at(dm->fs.root_fd, &hb.fh, O_PATH | O_CLOEXEC);
    if (fd < 0 && errno == EPERM)
        return dm_bad("reopening files by handle needs CAP_DAC_READ_SEARCH: run fpgalz4fs as "
                      "root");
    if (fd < 0)
        return dm_bad("%s: cannot reopen by file handle: %s", dm->backing, strerror(errno));
    close(fd);
    return 0;
}

/* ------------------------------------------------------------------------------------- */
/* Start-up report: the parent waits for the child's first word */

/* Reports a start-up failure: to the waiting parent, or to stderr in the foreground; into
 * the log too once there is one. Returns -1. */
static int dm_fail(struct fs_daemon *dm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int dm_fail(struct fs_daemon *dm, const char *fmt, ...)
{
    char msg[DM_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (dm->fs.log)
        lg_printf(dm->fs.log, LG_ERR, "%s", msg);
    if (dm->report_fd >= 0) {
        char line[DM_MSG_MAX + 2];
        int len = snprintf(line, sizeof(line), "E%s", msg);
        if (write(dm->report_fd, line, (size_t)len) < 0)
            fprintf(stderr, "fpgalz4fs: %s\n", msg);
        close(dm->report_fd);
        dm->report_fd = -1;
    } else {
        fprintf(stderr, "fpgalz4fs: %s\n", msg);
    }
    return -1;
}

/* The mount is up: release the parent and let go of the terminal. */
static void dm_report_ok(struct fs_daemon *dm)
{
    if (dm->report_fd < 0)
        return;
    if (write(dm->report_fd, "O", 1) < 0)
        lg_printf(dm->fs.log, LG_WARN, "start-up report to the parent failed: %s",
                  strerror(errno));
    close(dm->report_fd);
    dm->report_fd = -1;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    if (chdir("/") < 0)
        lg_printf(dm->fs.log, LG_WARN, "chdir /: %s", strerror(errno));
}

static int dm_wait_child(int fd, pid_t child)
{
    char msg[DM_MSG_MAX + 2];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, msg + got, sizeof(msg) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || (got += (size_t)n) >= sizeof(msg) - 1)
            break;
    }
    close(fd);
    msg[got] = '\0';
    if (got > 0 && msg[0] == 'O')
        return 0;
    waitpid(child, NULL, 0);
    if (got > 1 && msg[0] == 'E')
        fprintf(stderr, "fpgalz4fs: %s\n", msg + 1);
    else
        fprintf(stderr, "fpgalz4fs: the daemon exited during start-up\n");
    return 1;
}

/* Forks the daemon unless -f. Returns 0 in the process that goes on, or the exit status the
 * parent must return once the child has reported. fuse_daemonize is not used: its parent
 * exits before the daemon has started anything. */
static int dm_fork(struct fs_daemon *dm, int *parent_status)
{
    int p[2];
    *parent_status = -1;
    if (dm->opt.foreground)
        return 0;
    if (pipe2(p, O_CLOEXEC) < 0)
        return dm_bad("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        return dm_bad("fork: %s", strerror(errno));
    if (pid > 0) {
        close(p[1]);
        *parent_status = dm_wait_child(p[0], pid);
        return 0;
    }
    close(p[0]);
    dm->report_fd = p[1];
    setsid();
    return 0;
}

/* ------------------------------------------------------------------------------------- */
/* The mount */

static int dm_open_log(struct fs_daemon *dm)
{
    dm->fs.log = lg_open(dm->cfg.log, dm->opt.foreground && !dm->cfg.log, "fpgalz4fs");
    if (!dm->fs.log)
        return dm_fail(dm, "log=%s: %s", dm->cfg.log ? dm->cfg.log : "", strerror(errno));
    return 0;
}

/* engine=auto: a real card if one is present (XRT first, then CUDA), else software; each
 * step of the choice is logged, since "why is my card not used" is the first question. */
static eng_backend dm_pick_engine(struct fs_daemon *dm, const eng_config *ec)
{
    static const eng_backend cards[] = {ENG_BACKEND_XRT, ENG_BACKEND_CUDA};
    for (size_t i = 0; i < sizeof(cards) / sizeof(cards[0]); i++) {
        char why[256] = "";
        if (eng_probe(cards[i], ec, why, sizeof(why))) {
            lg_printf(dm->fs.log, LG_INFO, "engine=auto: using %s: %s",
                      eng_backend_option(cards[i]), why);
            return cards[i];
        }
        lg_printf(dm->fs.log, LG_INFO, "engine=auto: not %s: %s", eng_backend_option(cards[i]),
                  why[0] ? why : "no device");
    }
    lg_printf(dm->fs.log, LG_INFO, "engine=auto: using software (auto never picks the "
              "emulated card)");
    return ENG_BACKEND_SW;
}

static void dm_log_engine(struct fs_daemon *dm)
{
    const struct dm_config *c = &dm->cfg;
    const char *name = eng_backend_name(dm->fs.eng);
    if (c->backend == ENG_BACKEND_EMU)
        lg_printf(dm->fs.log, LG_INFO, "engine=emu: an EMULATED card (a software model of the "
                  "xilLz4Compress kernel, not hardware): %u compute unit(s), %u buffer sets, "
                  "%llu MB/s modelled", c->cus ? (unsigned)c->cus : 1u,
                  c->bufsets ? (unsigned)c->bufsets : 2u,
                  c->emu_card_mbps);
    else if (strstr(name, "model"))
        lg_printf(dm->fs.log, LG_INFO, "engine=%s: the card's kernel is MODELLED in software "
                  "(%s), not run on hardware", eng_backend_option(c->backend), name);
}

static uint64_t dm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return sb_ns(ts);
}

/* The clean mark (docs/FORMAT.md 1.4): files changed after the time up to which it says every
 * change is whole, and before this mount, may have been caught by a power loss; their blocks
 * written after their last sync are checked at open. Before serving, the mark says dirty, so
 * that a mount that ends without unmounting is seen as such; only a mount that found the
 * store clean says clean again at its unmount (one that found it dirty cannot vouch for the
 * files it never opened). */
static int dm_mark_dirty(struct fs_daemon *dm, ff_options *fo)
{
    int clean = 0;
    sb_error e = sb_mark_read(dm->fs.root_fd, &dm->whole_before, &clean);
    uint64_t now = dm_now_ns();
    if (e != SB_OK || dm->whole_before > now)   /* not a file, or the clock went back */
        dm->whole_before = 0, clean = 0;
    /* clean: no mount changed anything since; whatever else did (someone writing into the
     * backing files) is no power loss, and damage it did reads as EIO, never cut */
    fo->clean_ns = clean ? UINT64_MAX : dm->whole_before;
    fo->start_ns = clean ? 0 : now;
    if (dm->opt.read_only)
        return 0;
    e = e == SB_OK ? sb_mark_write(dm->fs.root_fd, dm->whole_before, 0) : e;
    if (e != SB_OK && unlinkat(dm->fs.root_fd, SB_CLEAN_NAME, 0) != 0 && errno != ENOENT)
        return dm_fail(dm, "%s/%s: cannot mark the store in use: %s", dm->backing,
                       SB_CLEAN_NAME, e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
    dm->started_clean = e == SB_OK && clean;
    return 0;
}

/* The sizes an unmount that left the store clean kept (docs/FORMAT.md 1.6): the lookups of
 * files unchanged since read no footer. None (a new store, a mount that ended otherwise) is
 * the normal case; a damaged file is ignored whole and costs footer reads, nothing else. */
static void dm_sizes_load(struct fs_daemon *dm)
{
    struct stat st;
    uint64_t n = 0;
    if (!dm->fs.sizes || fstat(dm->fs.root_fd, &st) != 0)
        return;
    sz_error e = sz_load(dm->fs.sizes, dm->fs.root_fd, st.st_dev, &n);
    if (e == SZ_OK)
        lg_printf(dm->fs.log, LG_INFO, "%llu logical sizes read from %s",
                  (unsigned long long)n, SZ_FILE_NAME);
    else if (e != SZ_ERR_MISSING)
        lg_printf(dm->fs.log, LG_WARN, "%s/%s: %s; it is not used (sizes come from the "
                  "files' footers)", dm->backing, SZ_FILE_NAME,
                  e == SZ_ERR_IO ? strerror(errno) : sz_error_name(e));
}

/* Only after the syncfs of an unmount that leaves the store clean: every state the file
 * names is then on the disk, whole. */
static void dm_sizes_save(struct fs_daemon *dm)
{
    struct stat st;
    uint64_t n = 0;
    if (!dm->fs.sizes || fstat(dm->fs.root_fd, &st) != 0)
        return;
    sz_error e = sz_save(dm->fs.sizes, dm->fs.root_fd, st.st_dev, &n);
    if (e == SZ_OK)
        lg_printf(dm->fs.log, LG_INFO, "unmount: %llu logical sizes kept in %s",
                  (unsigned long long)n, SZ_FILE_NAME);
    else
        lg_printf(dm->fs.log, LG_WARN, "unmount: %s: %s; the next mount reads sizes from "
                  "the files", SZ_FILE_NAME, e == SZ_ERR_IO ? strerror(errno)
                                                           : sz_error_name(e));
}

/* After the last write: everything is synced, then the mark may say clean. */
static void dm_mark_clean(struct fs_daemon *dm)
{
    if (!dm->started_clean)
        return;
    if (syncfs(dm->fs.root_fd) != 0) {
        lg_printf(dm->fs.log, LG_WARN, "unmount: syncfs: %s; the store stays marked in use",
                  strerror(errno));
        return;
    }
    dm_sizes_save(dm);                 /* the mark's write syncs the directory after it */
    sb_error e = sb_mark_write(dm->fs.root_fd, dm_now_ns(), 1);
    if (e != SB_OK)
        lg_printf(dm->fs.log, LG_WARN, "unmount: %s: %s; the store stays marked in use",
                  SB_CLEAN_NAME, e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
}

/* Backing descriptors open files may keep: the open-file limit less what everything else
 * needs at once (directory streams, the IN_DIR_FDS cached directories, a few per request
 * in flight, the engine, FUSE, the log), so that however many files users hold open, the
 * daemon can still open what the next request needs. Past it, idle files close theirs
 * (ff_fds.c). */
static uint64_t dm_fd_budget(struct fs_daemon *dm)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    uint64_t lim = (uint64_t)rl.rlim_cur, spare = lim / 4 > 1024 ? lim / 4 : 1024;
    uint64_t max = lim > spare + 64 ? lim - spare : 64;
    /* open listings may hold half of the spare ones (dirs.h); past that they reopen */
    dm->fs.dirs.max = (unsigned)(spare / 2);
    lg_printf(dm->fs.log, LG_INFO, "open files keep at most %llu backing descriptors, open "
              "directories %u", (unsigned long long)max, dm->fs.dirs.max);
    return max;
}

/* Read-ahead helpers: as many as software compression threads, so that one `cat` decodes
 * on every core the mount may use. */
static unsigned dm_ahead_threads(const struct dm_config *c)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long long n = c->sw_threads ? c->sw_threads : (unsigned long long)cores;
    return n == 0 ? 1 : n > 8 ? 8 : (unsigned)n;
}

static int dm_open_engine(struct fs_daemon *dm)
{
    char err[256] = "";
    struct dm_config *c = &dm->cfg;
    eng_config ec = {.backend = c->backend, .sw_threads = (unsigned)c->sw_threads,
                     .cus = (unsigned)c->cus, .bufsets = (unsigned)c->bufsets,
                     .card_timeout_ms = (unsigned)c->card_timeout_ms,
                     .block_size = dm->sb.block_size,
                     .emu_card_mbps = (double)c->emu_card_mbps,
                     .emu_pcie_mbps = (double)c->emu_pcie_mbps,
                     .emu_error_rate = c->emu_error_rate, .emu_hang_rate = c->emu_hang_rate,
                     .emu_corrupt_rate = c->emu_corrupt_rate,
                     .emu_vanish_after = c->emu_vanish_after, .xclbin = c->xclbin,
                     .device = (unsigned)c->device,
                     .xrt_kernel_model = (int)c->xrt_kernel_model};
    if (c->xrt_kernel_model && c->backend != ENG_BACKEND_XRT)
        return dm_fail(dm, "xrt_kernel_model=1 needs engine=xrt");
    if (c->engine_auto)
        c->backend = ec.backend = dm_pick_engine(dm, &ec);
    if (!dm->opt.mem_mb && c->backend == ENG_BACKEND_CUDA)
        c->mem_mb = dm_default_mem_mb(DM_MEM_MB_PER_CORE_CUDA);
    dm->fs.eng = eng_open(&ec, err, sizeof(err));
    if (!dm->fs.eng)
        return dm_fail(dm, "engine=%s cannot open: %s", eng_backend_option(c->backend),
                       err[0] ? err : "unknown reason");
    dm_log_engine(dm);
    ff_options fo = {.read_only = dm->opt.read_only, .mem_bytes = dm->cfg.mem_mb << 20,
                     .file_version = (uint32_t)dm->cfg.file_version,
                     .fd_max = dm_fd_budget(dm), .charge_owner = dm->fs.charge,
                     .ahead_threads = dm_ahead_threads(c)};
    if (dm_mark_dirty(dm, &fo) != 0)
        return -1;
    dm->fs.env = ff_env_new(dm->fs.eng, &dm->sb, &fo, dm->fs.log);
    if (!dm->fs.env)
        return dm_fail(dm, "cannot set up the file layer (out of memory?)");
    int e = in_table_new(dm->fs.root_fd, dm->fs.log, &dm->fs.tab);
    if (e)
        return dm_fail(dm, "%s: cannot set up the inode table: %s", dm->backing, strerror(-e));
    dm->fs.sizes = sz_new(DM_SIZES);   /* NULL: every lookup reads the footer */
    dm_sizes_load(dm);
    op_bind_reopen(&dm->fs);
    return 0;
}

/* The mount shows the store as its source and fuse.fpgalz4fs as its type. Access checks are
 * always the kernel's (default_permissions): the daemon runs as root and would otherwise
 * let every caller do anything under allow_other. */
static int dm_fuse_args(struct fs_daemon *dm)
{
    char *opts = NULL;
    char fsname[PATH_MAX + 16];
    snprintf(fsname, sizeof(fsname), "fsname=%s", dm->backing);
    if (fuse_opt_add_opt_escaped(&opts, fsname) ||
        fuse_opt_add_opt(&opts, "subtype=fpgalz4fs,default_permissions") ||
        fuse_opt_add_arg(&dm->args, "-o") || fuse_opt_add_arg(&dm->args, opts)) {
        free(opts);
        return dm_fail(dm, "out of memory");
    }
    free(opts);
    return 0;
}

static int dm_mount(struct fs_daemon *dm)
{
    if (dm_fuse_args(dm))
        return -1;
    op_fill(&dm->ops);
    /* The caller's umask is applied once, by the kernel or (with ACLs) by the handlers; the
     * daemon's own would take away bits a second time. (The log file is open by now.) */
    umask(0);
    dm->fs.backing = dm->backing;
    dm->fs.read_only = dm->opt.read_only;
    dm->fs.acl = !dm->opt.noacl;
    dm->fs.direct_writes = !dm->opt.nodirect;
    dm->fs.dir_handles = dm->opt.dir_handles;
    dm->fs.blksize = (blksize_t)dm->sb.block_size;
    dm->fs.uid = geteuid();
    dm->fs.gid = getegid();
    dm->fs.timeout = DM_CACHE_TIMEOUT_S;
    dm->se = fuse_session_new(&dm->args, &dm->ops, sizeof(dm->ops), &dm->fs);
    if (!dm->se)
        return dm_fail(dm, "invalid mount options (see the message above)");
    dm->fs.se = dm->se;
    if (fuse_set_signal_handlers(dm->se) != 0)
        return dm_fail(dm, "cannot install signal handlers");
    dm->signals_set = 1;
    if (fuse_session_mount(dm->se, dm->mountpoint) != 0)
        return dm_fail(dm, "cannot mount on %s", dm->mountpoint);
    dm->mounted = 1;
    if (op_io_install(&dm->fs) != 0)
        lg_printf(dm->fs.log, LG_INFO, "the kernel checks set-id bits before every write: "
                  "libfuse refused the session's own I/O");
    return 0;
}

/* The kernel's readahead for a FUSE mount is the smaller of the daemon's max_readahead and
 * the mount's bdi setting, whose default (128 KiB) would cut every sequential read into
 * eight requests per 1 MiB block. The bdi exists once mounted, and INIT, which applies the
 * minimum, is only answered when the loop runs: raising the bdi here takes effect. */
static void dm_raise_readahead(struct fs_daemon *dm)
{
    unsigned ma, mi;
    char path[64];
    if (mt_mount_dev(dm->mountpoint, &ma, &mi) != 0)
        return;
    snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", ma, mi);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "1024\n", 5) != 5)
        lg_printf(dm->fs.log, LG_INFO, "readahead stays at the kernel's default: %s: %s", path,
                  strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* Every file open through the mount holds a backing descriptor (and the engine and FUSE
 * hold more), so the soft limit daemons usually start with (1024) would make opens fail with
 * EMFILE long before the hard limit, which only an administrator can raise, says so. The
 * daemon takes the whole hard limit; nothing in it uses select(), whose fd_set stops at
 * FD_SETSIZE. */
static void dm_raise_nofile(struct fs_daemon *dm)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        lg_printf(dm->fs.log, LG_WARN, "open files: getrlimit: %s", strerror(errno));
        return;
    }
    unsigned long long was = (unsigned long long)rl.rlim_cur;
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            lg_printf(dm->fs.log, LG_WARN, "open files: limit stays at %llu: setrlimit: %s",
                      was, strerror(errno));
            return;
        }
    }
    if (rl.rlim_max == RLIM_INFINITY)
        lg_printf(dm->fs.log, LG_INFO, "open files: limit unlimited (was %llu)", was);
    else
        lg_printf(dm->fs.log, LG_INFO, "open files: limit %llu, the hard limit (was %llu)",
                  (unsigned long long)rl.rlim_max, was);
}

/* Before the engine starts its threads: they inherit what is left (cred.h). A daemon that
 * cannot cut its capabilities still serves, and says that users can reach the reserve. */
static void dm_limit_caps(struct fs_daemon *dm)
{
    char why[256];
    cr_mode mode;
    if (cr_limit(&mode, why, sizeof(why)) != 0) {
        lg_printf(dm->fs.log, LG_WARN, "%s: users' writes can use the backing filesystem's "
                  "reserved blocks and pass its quotas", why);
        return;
    }
    dm->fs.charge = mode == CR_CHARGING;
    if (dm->fs.charge)
        lg_printf(dm->fs.log, LG_INFO, "capabilities cut to what the daemon uses; users' "
                  "writes are charged to them (reserved blocks, quotas)");
}

static int dm_loop(struct fs_daemon *dm)
{
    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    if (!lc)
        return -ENOMEM;
    fuse_loop_cfg_set_max_threads(lc, DM_MAX_THREADS);
    fuse_loop_cfg_set_clone_fd(lc, 0);
    int ret = fuse_session_loop_mt(dm->se, lc);
    fuse_loop_cfg_destroy(lc);
    return ret;
}

/* Reverse order of start-up. fuse_session_destroy runs the destroy handler (commit of any
 * file still open, counters into the log) when the kernel did not send DESTROY. */
static void dm_cleanup(struct fs_daemon *dm)
{
    if (dm->mounted)
        fuse_session_unmount(dm->se);
    if (dm->signals_set)
        fuse_remove_signal_handlers(dm->se);
    if (dm->se)
        fuse_session_destroy(dm->se);
    op_io_free(&dm->fs);
    dm_mark_clean(dm);
    in_table_free(dm->fs.tab);
    pthread_mutex_destroy(&dm->fs.warm_lock);
    sz_free(dm->fs.sizes);
    ff_env_free(dm->fs.env);
    eng_close(dm->fs.eng);
    if (dm->fs.log && dm->mounted)
        lg_printf(dm->fs.log, LG_INFO, "unmounted %s from %s", dm->backing, dm->mountpoint);
    lg_close(dm->fs.log);
    if (dm->lock_fd >= 0)
        close(dm->lock_fd);
    if (dm->fs.root_fd >= 0)
        close(dm->fs.root_fd);
    fuse_opt_free_args(&dm->args);
    free(dm->backing);
    free(dm->mountpoint);
    free(dm->cfg.xclbin);
    free(dm->cfg.log);
    char **strs[] = {&dm->opt.engine, &dm->opt.sw_threads, &dm->opt.cus, &dm->opt.bufsets,
                     &dm->opt.card_timeout_ms, &dm->opt.xclbin, &dm->opt.device,
                     &dm->opt.xrt_kernel_model, &dm->opt.emu_card_mbps, &dm->opt.emu_pcie_mbps,
                     &dm->opt.emu_error_rate, &dm->opt.emu_hang_rate, &dm->opt.emu_corrupt_rate,
                     &dm->opt.emu_vanish_after, &dm->opt.mem_mb,
                     &dm->opt.file_version, &dm->opt.log, &dm->opt.backing, &dm->opt.mountpoint};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        free(*strs[i]);
}

static int dm_parse(struct fs_daemon *dm)
{
    if (fuse_opt_parse(&dm->args, &dm->opt, dm_specs, dm_opt_proc) != 0)
        return dm_bad("cannot parse the command line (see --help)");
    if (dm->opt.help || dm->opt.version)
        return 0;
    if (!dm->opt.backing || !dm->opt.mountpoint || dm->opt.extra_args)
        return dm_bad("usage: fpgalz4fs BACKING MOUNTPOINT [-f] [-o opt,...] (see --help)");
    return dm_check(dm);
}

/* Everything up to the fork happens in the foreground, so that a bad store or option is
 * reported on the terminal directly. */
static int dm_prepare(struct fs_daemon *dm)
{
    if (dm_open_store(dm) || dm_read_super(dm) || dm_lock_store(dm) || dm_check_handles(dm))
        return -1;
    return 0;
}

static int dm_serve(struct fs_daemon *dm)
{
    if (dm_open_log(dm))
        return 1;
    dm_raise_nofile(dm);
    dm_limit_caps(dm);
    if (dm_open_engine(dm) || dm_mount(dm))
        return 1;
    lg_printf(dm->fs.log, LG_INFO,
              "mounted %s on %s: engine %s, block size %u, mem_mb %llu%s", dm->backing,
              dm->mountpoint, eng_backend_name(dm->fs.eng), dm->sb.block_size, dm->cfg.mem_mb,
              dm->opt.read_only ? ", read-only" : "");
    dm_raise_readahead(dm);
    dm_report_ok(dm);
    int ret = dm_loop(dm);
    if (ret < 0)
        lg_printf(dm->fs.log, LG_ERR, "the FUSE loop failed: %s", strerror(-ret));
    /* A positive value is the signal that ended the loop: a clean stop. */
    return ret < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct fs_daemon dm;
    /* One malloc arena: block buffers are freed by other threads than the ones that
     * allocated them, and with an arena per thread glibc keeps each arena's high-water mark,
     * which let 100 concurrent writers grow the daemon to well over mem_mb (t_bench's RSS
     * row measures it). */
    mallopt(M_ARENA_MAX, 1);
    memset(&dm, 0, sizeof(dm));
    dm.args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
    dm.lock_fd = -1;
    dm.report_fd = -1;
    dm.fs.root_fd = -1;
    pthread_mutex_init(&dm.fs.warm_lock, NULL);
    int status = 1;
    if (dm_parse(&dm) == 0) {
        if (dm.opt.help) {
            dm_usage(stdout);
            status = 0;
        } else if (dm.opt.version) {
            dm_version();
            status = 0;
        } else if (dm_prepare(&dm) == 0) {
            int parent_status;
            if (dm_fork(&dm, &parent_status) != 0)
                status = 1;
            else if (parent_status >= 0)
                status = parent_status;
            else
                status = dm_serve(&dm);
        }
    }
    if (dm.report_fd >= 0)
        dm_fail(&dm, "start-up failed");
    dm_cleanup(&dm);
    return status;
}
