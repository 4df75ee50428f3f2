/* fpgalz4fs: the daemon. Parses the command line (dm_opts.c), checks and locks the store
 * (dm_store.c), forks into the background (its parent returns only once the mount is up and
 * the engine open, or fails with the child's reason), and runs the FUSE loop until unmount. */
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include "cred.h"
#include "dm.h"
#include "inode.h"
#include "log.h"
#include "mounts.h"

#define DM_MAX_THREADS 16
/* The kernel hears of every change made through the mount, so its caches only go stale
 * when someone changes the backing directory behind the daemon's back (unsupported, but
 * people do it): a few seconds bounds how long such a change stays unseen while sparing
 * most lookups and getattrs. */
#define DM_CACHE_TIMEOUT_S 5.0
#define DM_SIZES 16384u               /* logical sizes remembered past a forget (sizes.h) */
#define DM_MSG_MAX 1024

/* ------------------------------------------------------------------------------------- */
/* Start-up report: the parent waits for the child's first word */

int dm_fail(struct fs_daemon *dm, const char *fmt, ...)
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
                     .emu_vanish_after = c->emu_vanish_after,
                     .emu_card_check = (int)c->emu_card_check, .xclbin = c->xclbin,
                     .device = (unsigned)c->device,
                     .xrt_kernel_model = (int)c->xrt_kernel_model,
                     .card_only = (int)c->card_only,
                     .fill_us = c->card_fill_us ? (unsigned)c->card_fill_us : ENG_FILL_NEVER};
    if (c->xrt_kernel_model && c->backend != ENG_BACKEND_XRT)
        return dm_fail(dm, "xrt_kernel_model=1 needs engine=xrt");
    if (c->card_only && (c->backend == ENG_BACKEND_SW || c->engine_auto))
        return dm_fail(dm, "card_only=1 needs engine=emu, xrt or cuda");
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
    dm->fs.warm_budget = (dm->cfg.mem_mb << 20) / 16;
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
    dm_opts_free(dm);
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
