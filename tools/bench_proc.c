/* bench_proc: child processes, mounts, and the clean-up that must happen even when the run
 * is interrupted: a benchmark left mounted or with a gigabyte of temporary files behind is
 * worse than no benchmark. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define BN_MOUNT_WAIT_S 30.0
#define BN_UMOUNT_WAIT_S 120.0
#define BN_MAX_MOUNTS 8
#define BN_MAX_LOOPS 4

/* ---- the clean-up registry ----
 * Process-wide on purpose: a signal handler can reach nothing else. Filled before any
 * mount or directory exists, read only by bn_cleanup_now. */

static struct {
    bn_mount *mounts[BN_MAX_MOUNTS];
    bn_loop *loops[BN_MAX_LOOPS];
    char workdir[BN_PATH];
    volatile pid_t child;              /* the command running now: stopped first */
    volatile sig_atomic_t done;
} bn_reg;

/* Blocks the clean-up signals (*old: the mask to restore). bn_spawn holds them briefly, and
 * the clean-up for its whole length: a signal in the middle would find it marked done and
 * end the process halfway through it. */
static void bn_hold_signals(sigset_t *old)
{
    sigset_t hold;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT), sigaddset(&hold, SIGTERM), sigaddset(&hold, SIGHUP);
    sigaddset(&hold, SIGPIPE);
    sigprocmask(SIG_BLOCK, &hold, old);
}

/* posix_spawn(p) with the clean-up signals held until the new pid is stored where the
 * handler looks (*pid, and *track when not NULL): a signal in between would miss the
 * process, and a `mount` it missed could finish after the clean-up. The child gets the
 * caller's signal mask back. */
static int bn_spawn(const char *prog, char *const argv[], const posix_spawn_file_actions_t *fa,
                    int search, pid_t *pid, volatile pid_t *track)
{
    sigset_t old;
    posix_spawnattr_t at;
    bn_hold_signals(&old);
    posix_spawnattr_init(&at);
    posix_spawnattr_setsigmask(&at, &old);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    int rc = search ? posix_spawnp(pid, prog, fa, &at, argv, environ)
                    : posix_spawn(pid, prog, fa, &at, argv, environ);
    if (rc != 0)
        *pid = 0;                      /* unspecified after a failure; the handler reads it */
    else if (track)
        *track = *pid;
    posix_spawnattr_destroy(&at);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int bn_run(char *const argv[], const char *out, double *secs)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out ? out : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    double t0 = bn_clock(CLOCK_MONOTONIC);
    int rc = bn_spawn(argv[0], argv, &fa, 1, &pid, &bn_reg.child);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, BN_NAME ": cannot start %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    bn_reg.child = 0;
    if (secs)
        *secs = bn_clock(CLOCK_MONOTONIC) - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int bn_sh(const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    int rc = bn_run(argv, NULL, NULL);
    if (rc != 0)
        fprintf(stderr, BN_NAME ": '%s' failed (status %d)\n", cmd, rc);
    return rc;
}

/* fork+exec+waitpid: async-signal-safe, so usable from the handler. */
static void bn_exec_quiet(const char *prog, char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
        }
        execv(prog, argv);
        _exit(127);
    }
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
}

static void bn_cleanup_one(bn_mount *m)
{
    char *fu[] = {"fusermount3", "-u", "-z", m->mnt, NULL};
    char *um[] = {"umount", "-l", m->mnt, NULL};
    if (m->pid <= 0)
        return;
    bn_exec_quiet("/usr/bin/fusermount3", fu);
    bn_exec_quiet("/bin/fusermount3", fu);
    bn_exec_quiet("/usr/bin/umount", um);
    kill(m->pid, SIGKILL);
    while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    m->pid = 0;
}

/* Lazy: detached at once even when busy, so the work directory can go right after; the
 * loop device (set up with autoclear by mount) goes when the filesystem is released. Both
 * paths of umount are tried: the second finds nothing mounted on a merged /usr. */
static void bn_cleanup_loop_one(bn_loop *l)
{
    char *um[] = {"umount", "-l", l->dir, NULL};
    if (!l->up)
        return;
    bn_exec_quiet("/usr/bin/umount", um);
    bn_exec_quiet("/bin/umount", um);
    l->up = 0;
}

static void bn_cleanup_all(void)
{
    bn_reg.done = 1;
    if (bn_reg.child > 0) {
        kill(bn_reg.child, SIGKILL);
        while (waitpid(bn_reg.child, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    for (int i = 0; i < BN_MAX_MOUNTS; i++)
        if (bn_reg.mounts[i])
            bn_cleanup_one(bn_reg.mounts[i]);
    /* after the daemons: a store may live on one of these filesystems */
    for (int i = 0; i < BN_MAX_LOOPS; i++)
        if (bn_reg.loops[i])
            bn_cleanup_loop_one(bn_reg.loops[i]);
    if (bn_reg.workdir[0]) {
        char *rm[] = {"rm", "-rf", "--one-file-system", bn_reg.workdir, NULL};
        bn_exec_quiet("/bin/rm", rm);
        bn_reg.workdir[0] = '\0';
    }
}

void bn_cleanup_now(void)
{
    sigset_t old;
    bn_hold_signals(&old);
    if (!bn_reg.done)
        bn_cleanup_all();
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void bn_on_signal(int sig)
{
    static const char msg[] = BN_NAME ": interrupted; unmounting and removing the work "
                                      "directory\n";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
    bn_cleanup_now();
    signal(sig, SIG_DFL);
    raise(sig);
}

void bn_cleanup_init(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = bn_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);     /* the output piped into `head`, say */
    atexit(bn_cleanup_now);
}

void bn_cleanup_mount(bn_mount *m)
{
    for (int i = 0; i < BN_MAX_MOUNTS; i++)
        if (bn_reg.mounts[i] == m || !bn_reg.mounts[i]) {
            bn_reg.mounts[i] = m;
            return;
        }
}

void bn_cleanup_loop(bn_loop *l)
{
    for (int i = 0; i < BN_MAX_LOOPS; i++)
        if (bn_reg.loops[i] == l || !bn_reg.loops[i]) {
            bn_reg.loops[i] = l;
            return;
        }
}

void bn_cleanup_workdir(const char *dir)
{
    snprintf(bn_reg.workdir, sizeof(bn_reg.workdir), "%s", dir);
}

/* ---- mounts ---- */

/* Whether MNT is a mount point now, from /proc/self/mountinfo (a stat could block on a
 * daemon that is still starting). Our paths have no characters that mountinfo escapes. */
static int bn_is_mounted(const char *mnt)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[2 * BN_PATH], a[64], b[64], c[64], d[BN_PATH], point[BN_PATH];
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f))
        if (sscanf(line, "%63s %63s %63s %4095s %4095s", a, b, c, d, point) == 5)
            found = strcmp(point, mnt) == 0;
    fclose(f);
    return found;
}

static void bn_log_tail(const char *log)
{
    char cmd[BN_PATH + 64];
    snprintf(cmd, sizeof(cmd), "tail -n 15 '%s' >&2", log);
    bn_sh(cmd);
}

/* Spawns argv (stdout to /dev/null; stderr to m->log when err_to_log, else inherited),
 * registered for clean-up, and waits for the mount to appear on m->mnt. */
static int bn_mount_spawn(bn_mount *m, char *const argv[], int err_to_log, const char *opts)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (err_to_log)
        posix_spawn_file_actions_addopen(&fa, 2, m->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    bn_cleanup_mount(m);
    int rc = bn_spawn(argv[0], argv, &fa, 0, &m->pid, NULL);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, BN_NAME ": cannot start %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    for (double t0 = bn_clock(CLOCK_MONOTONIC); !bn_is_mounted(m->mnt);) {
        int st;
        if (waitpid(m->pid, &st, WNOHANG) == m->pid ||
            bn_clock(CLOCK_MONOTONIC) - t0 > BN_MOUNT_WAIT_S) {
            fprintf(stderr, BN_NAME ": %s did not mount %s (opts %s); its log:\n", argv[0],
                    m->mnt, opts);
            bn_log_tail(m->log);
            bn_cleanup_one(m);
            return -1;
        }
        usleep(10000);
    }
    return 0;
}

int bn_mount_up(bn_mount *m, const char *daemon, const char *opts)
{
    char o[BN_PATH + 512];
    snprintf(o, sizeof(o), "%s%slog=%s", opts ? opts : "", opts && *opts ? "," : "", m->log);
    char *argv[] = {(char *)daemon, m->backing, m->mnt, "-f", "-o", o, NULL};
    return bn_mount_spawn(m, argv, 0, o);
}

int bn_mount_up_rival(bn_mount *m, const char *prog, const char *opts)
{
    char *argv[] = {(char *)prog, m->mnt, "-f", "-o", (char *)opts, NULL};
    return bn_mount_spawn(m, argv, 1, opts);
}

int bn_mount_down(bn_mount *m)
{
    char *argv[] = {"fusermount3", "-u", m->mnt, NULL};
    if (m->pid <= 0)
        return 0;
    int rc = bn_run(argv, NULL, NULL);
    for (double t0 = bn_clock(CLOCK_MONOTONIC); rc == 0;) {
        int st;
        if (waitpid(m->pid, &st, WNOHANG) == m->pid) {
            m->pid = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 0;
            fprintf(stderr, BN_NAME ": the daemon of %s %s %d after its unmount\n", m->mnt,
                    WIFEXITED(st) ? "exited with status" : "was killed by signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            return -1;
        }
        if (bn_clock(CLOCK_MONOTONIC) - t0 > BN_UMOUNT_WAIT_S)
            break;
        usleep(10000);
    }
    fprintf(stderr, BN_NAME ": %s did not unmount cleanly (%s); forcing it\n", m->mnt,
            rc ? "fusermount3 -u failed" : "the daemon did not exit");
    bn_cleanup_one(m);
    return -1;
}

long long bn_io_write_bytes(pid_t pid)
{
    char path[64], line[256];
    long long v = -1;
    snprintf(path, sizeof(path), "/proc/%ld/io", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "write_bytes:", 12)) {
            v = strtoll(line + 12, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

long bn_vm_kib(pid_t pid, const char *key)
{
    char path[64], line[256];
    size_t klen = strlen(key);
    long v = -1;
    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            v = strtol(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* ---- fresh ext4 filesystems on loop devices ---- */

static int bn_loop_image(const bn_loop *l, unsigned long long bytes)
{
    int fd = open(l->img, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0;   /* sparse: no block written */
    if (!ok)
        fprintf(stderr, BN_NAME ": cannot make the image %s: %s\n", l->img, strerror(errno));
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

int bn_loop_up(bn_loop *l, unsigned long long bytes, unsigned long inodes)
{
    char nin[32];
    snprintf(nin, sizeof(nin), "%lu", inodes);
    /* Lazy init keeps mkfs short; noinit_itable keeps ext4's background zeroing of the
     * inode tables out of the timed commands. */
    char *mkfs[] = {"mkfs.ext4", "-q", "-F", "-N", nin, "-E",
                    "lazy_itable_init=1,lazy_journal_init=1", l->img, NULL};
    char *mnt[] = {"mount", "-o", "loop,noinit_itable", l->img, l->dir, NULL};
    bn_cleanup_loop(l);
    if (bn_mkdirs(l->dir) != 0) {
        fprintf(stderr, BN_NAME ": %s: %s\n", l->dir, strerror(errno));
        return -1;
    }
    if (bn_loop_image(l, bytes) != 0)
        return -1;
    if (bn_run(mkfs, NULL, NULL) != 0) {
        fprintf(stderr, BN_NAME ": mkfs.ext4 failed on %s\n", l->img);
        unlink(l->img);
        return -1;
    }
    l->up = 1;                         /* from here on the clean-up may find it mounted */
    if (bn_run(mnt, NULL, NULL) != 0) {
        fprintf(stderr, BN_NAME ": cannot loop-mount %s on %s\n", l->img, l->dir);
        l->up = 0;
        unlink(l->img);
        return -1;
    }
    return 0;
}

int bn_loop_down(bn_loop *l)
{
    char *um[] = {"umount", l->dir, NULL};
    char *lazy[] = {"umount", "-l", l->dir, NULL};
    int rc = 0;
    if (!l->up)
        return 0;
    if (bn_run(um, NULL, NULL) != 0) {
        fprintf(stderr, BN_NAME ": %s is busy; detaching it lazily\n", l->dir);
        bn_run(lazy, NULL, NULL);
        rc = -1;
    }
    l->up = 0;
    if (unlink(l->img) != 0) {
        fprintf(stderr, BN_NAME ": cannot remove %s: %s\n", l->img, strerror(errno));
        rc = -1;
    }
    return rc;
}

int bn_find_binaries(char *daemon, char *mkfs)
{
    char self[BN_PATH];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return bn_fail("cannot find this program's directory", NULL);
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    bn_path(daemon, self, "fpgalz4fs");
    bn_path(mkfs, self, "mkfpgalz4fs");
    if (access(daemon, X_OK) != 0 || access(mkfs, X_OK) != 0)
        return bn_fail("fpgalz4fs and mkfpgalz4fs must be built next to this program", self);
    return 0;
}
