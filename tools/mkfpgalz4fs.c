/* mkfpgalz4fs: makes a directory into an fpgalz4fs store by writing its superblock, and
 * converts the plain files of a store into the store's format.
 *
 * Formatting never deletes or changes any file but the superblock: a directory holding
 * anything other than lost+found is refused unless --adopt (its files then stay as they are
 * and the mount shows them as foreign files), and an existing store is rewritten only with
 * --force, under the store lock so that a mounted store is never reformatted beneath its
 * daemon. --compress-existing (under the store lock too) rewrites each foreign file through
 * the same writer the daemon uses (ff_create, ff_write, ff_release on the software engine)
 * into a temporary file next to it, copies owner, mode, extended attributes and times, syncs
 * it and renames it over the original: an interrupted run leaves every file whole
 * (tools/tl_convert.c, shared with fsck.fpgalz4fs --convert). */
#include "chk.h"
#include "log.h"
#include "sb.h"
#include "tl_convert.h"
#include "tl_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MK_NAME "mkfpgalz4fs"
#define MK_USAGE "usage: " MK_NAME " [-b 64K|256K|1M|4M] [--force] [--adopt] " \
                 "[--compress-existing] DIR"

enum { MK_EXIT_OK = 0, MK_EXIT_FAIL = 1, MK_EXIT_USAGE = 2, MK_CONTINUE = -1 };

typedef struct {
    uint32_t block_size;
    int block_size_given;
    int force;
    int adopt;                         /* format a directory that already holds files */
    int compress;                      /* convert the foreign files of the store */
    const char *dir;
} mk_options;

/* What the directory holds, as far as formatting cares. */
typedef struct {
    int has_sb;                        /* a superblock is already there */
    char other[256];                   /* the first entry that makes it "not empty", or "" */
} mk_contents;

static void mk_help(void)
{
    printf(MK_USAGE "\n"
           "Makes DIR (empty, or holding only lost+found) into an fpgalz4fs store.\n"
           "\n"
           "  -b SIZE      block size: 64K, 256K, 1M (default) or 4M\n"
           "  --force      write a new superblock over an existing store's (new UUID);\n"
           "               no file is ever deleted\n"
           "  --adopt      format DIR even though it holds files; they stay as they are\n"
           "               and read through the mount as foreign (plain) files\n"
           "  --compress-existing\n"
           "               convert every foreign file of the (unmounted) store DIR in\n"
           "               place into the store's format, keeping owner, mode, times and\n"
           "               extended attributes; hard-linked files are skipped; safe to\n"
           "               interrupt and run again. With --adopt: format, then convert\n"
           "  -h, --help   show this help\n"
           "  --version    show the version\n");
}

static const tl_tool mk_tool = {MK_NAME, MK_USAGE, MK_EXIT_USAGE};

/* Returns MK_CONTINUE when the command line asks for a format, else the exit status. */
static int mk_parse_args(int argc, char **argv, mk_options *o)
{
    static const struct option longopts[] = {
        {"force", no_argument, NULL, 'f'},
        {"adopt", no_argument, NULL, 'a'},
        {"compress-existing", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;   /* our own one-line messages instead of getopt's */
    while ((c = getopt_long(argc, argv, ":b:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            o->block_size = sb_parse_block_size(optarg);
            if (!o->block_size)
                return tl_usage_error(&mk_tool, "bad block size (use 64K, 256K, 1M or 4M):", optarg);
            o->block_size_given = 1;
            break;
        case 'f': o->force = 1; break;
        case 'a': o->adopt = 1; break;
        case 'c': o->compress = 1; break;
        case 'h': mk_help(); return MK_EXIT_OK;
        case 'V': printf(MK_NAME " " FPGALZ4FS_VERSION "\n"); return MK_EXIT_OK;
        case ':': return tl_usage_error(&mk_tool, "missing value for option", "-b");
        default: return tl_unknown_option(&mk_tool, optopt, argv[optind - 1]);
        }
    }
    int rc = tl_take_dir(&mk_tool, argc, argv, optind, &o->dir);
    if (rc)
        return rc;
    if (o->compress && !o->adopt && (o->block_size_given || o->force))
        return tl_usage_error(&mk_tool, "--compress-existing alone formats nothing (files get "
                              "the store's block size); -b and --force apply to formatting "
                              "(with --adopt)", NULL);
    return MK_CONTINUE;
}

static int mk_fail(const char *dir, const char *what)
{
    fprintf(stderr, MK_NAME ": %s: %s\n", dir, what);
    return MK_EXIT_FAIL;
}

/* Reads the directory through its own descriptor so that dirfd stays usable afterwards. */
static int mk_scan(int dirfd, mk_contents *c)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    memset(c, 0, sizeof(*c));
    struct dirent *e;
    while ((errno = 0, e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, SB_FILE_NAME) == 0)
            c->has_sb = 1;
        /* .fpgalz4fs.tmp is our own leftover from a superblock write cut short by a crash */
        else if (strcmp(n, ".") && strcmp(n, "..") && strcmp(n, "lost+found") &&
                 strcmp(n, SB_TMP_NAME) && strcmp(n, SB_CLEAN_NAME) &&
                 strcmp(n, SB_CLEAN_TMP_NAME) && !c->other[0])
            snprintf(c->other, sizeof(c->other), "%s", n);
    }
    int saved = errno;
    closedir(d);
    errno = saved;
    return saved ? -1 : 0;
}

/* With --force on an existing store: holds the store lock (kept until exit) and refuses a
 * store of a newer format, which this build must never rewrite. */
static int mk_take_existing(int dirfd, const char *dir, int *lock_fd)
{
    sb_super old;
    sb_error e = sb_lock(dirfd, lock_fd);
    if (e == SB_ERR_LOCKED)
        return mk_fail(dir, "store is in use by a mounted daemon");
    if (e != SB_OK) {
        fprintf(stderr, MK_NAME ": %s: cannot lock the store: %s\n", dir,
                e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
        return MK_EXIT_FAIL;
    }
    if (sb_read(dirfd, &old) == SB_ERR_NEWER)
        return mk_fail(dir, "store has a newer format version than this build; not rewriting it");
    return MK_CONTINUE;
}

/* Every refusal happens here, before anything is written. */
static int mk_check(int dirfd, const mk_options *o, int *lock_fd)
{
    mk_contents c;
    if (mk_scan(dirfd, &c) != 0) {
        fprintf(stderr, MK_NAME ": %s: cannot list: %s\n", o->dir, strerror(errno));
        return MK_EXIT_FAIL;
    }
    if (c.has_sb && !o->force)
        return mk_fail(o->dir, "already a fpgalz4fs store (--force writes a new superblock "
                               "and keeps every file)");
    if (c.has_sb)
        return mk_take_existing(dirfd, o->dir, lock_fd);
    if (c.other[0] && !o->adopt) {
        fprintf(stderr, MK_NAME ": %s: directory is not empty (it holds '%s'); refusing to "
                        "format it (--adopt formats it and keeps its files)\n", o->dir, c.other);
        return MK_EXIT_FAIL;
    }
    return MK_CONTINUE;
}

static int mk_open_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    if (errno == ENOENT)
        mk_fail(dir, "no such directory");
    else if (errno == ENOTDIR)
        mk_fail(dir, "not a directory");
    else
        mk_fail(dir, strerror(errno));
    return -1;
}

static int mk_format(int dirfd, const mk_options *o)
{
    sb_super sb;
    char uuid[37];
    sb_error e = sb_init(&sb, o->block_size);
    if (e == SB_OK)
        e = sb_write(dirfd, &sb);
    if (e != SB_OK) {
        fprintf(stderr, MK_NAME ": %s: cannot write the superblock: %s\n", o->dir,
                e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
        return MK_EXIT_FAIL;
    }
    sb_uuid_text(sb.uuid, uuid);
    printf(MK_NAME ": formatted %s: block size %s, uuid %s\n", o->dir,
           sb_block_size_name(sb.block_size), uuid);
    return MK_EXIT_OK;
}

/* ---- --compress-existing ---- */

typedef struct {
    int dirfd;
    const char *dir;
    tl_conv tc;
    int bar, bar_shown;
    struct timespec last_bar;
    uint64_t total_bytes, done_bytes;
    uint64_t converted, own, links, stale, failed, bytes_in, bytes_out;
    const sb_super *sb;                /* the store's: a file whose marker a power loss
                                          took is recognized as its own */
} mk_conv;

static void mk_bar_clear(mk_conv *c)
{
    if (c->bar_shown)
        fputs("\r\033[K", stderr);
    c->bar_shown = 0;
}

static void mk_bar(mk_conv *c, int force)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - c->last_bar.tv_sec) * 1000 +
              (now.tv_nsec - c->last_bar.tv_nsec) / 1000000;
    if (!c->bar || (!force && c->bar_shown && ms < 100))
        return;
    c->last_bar = now;
    int width = 40;
    int fill = c->total_bytes ? (int)(c->done_bytes * (double)width / (double)c->total_bytes) : width;
    fill = fill > width ? width : fill;
    fprintf(stderr, "\r[%.*s%*s] %llu/%llu MiB, %llu files", fill,
            "########################################", width - fill, "",
            (unsigned long long)(c->done_bytes >> 20), (unsigned long long)(c->total_bytes >> 20),
            (unsigned long long)c->converted);
    c->bar_shown = 1;
}

__attribute__((format(printf, 3, 4))) static void mk_note(mk_conv *c, const char *rel,
                                                          const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    mk_bar_clear(c);
    fprintf(stderr, MK_NAME ": %s/%s: %s\n", c->dir, rel, line);
}

/* 1 for a file in the format (or of a newer one), 0 for a foreign file, -errno. A file that is
 * foreign only because its marker is damaged is left for fsck.fpgalz4fs (2). */
static int mk_classify(int fd, const struct stat *st, const sb_super *sb)
{
    int rc = tl_file_version(fd, (uint64_t)st->st_size);
    if (rc != 0)
        return rc < 0 ? rc : 1;
    chk_result r;
    rc = chk_file(fd, sb, CHK_CHECK, UINT64_MAX, NULL, NULL, &r);
    return rc < 0 ? rc : r.kind == CHK_OWN ? 2 : 0;
}

/* Stale temporaries of an interrupted run, and the bytes to convert (for the progress bar). */
static int mk_survey(void *ctx, int dirfd, const char *name, const char *rel,
                     const struct stat *st)
{
    mk_conv *c = ctx;
    if (!st)
        return 0;
    int rc = tl_conv_remove_stale(dirfd, name);
    if (rc != 0) {
        if (rc > 0)
            c->stale++;
        else
            mk_note(c, rel, "cannot remove a stale temporary: %s", strerror(-rc));
        return 0;
    }
    if (st->st_nlink == 1)
        c->total_bytes += (uint64_t)st->st_size;
    return 0;
}

static void mk_progress(void *ctx, uint64_t bytes)
{
    mk_conv *c = ctx;
    c->done_bytes += bytes;
    mk_bar(c, 0);
}

static int mk_convert(void *ctx, int dirfd, const char *name, const char *rel,
                      const struct stat *st)
{
    mk_conv *c = ctx;
    uint64_t stored = 0;
    if (!st) {
        mk_note(c, rel, "cannot read directory: %s", strerror(errno));
        c->failed++;
        return 0;
    }
    if (chk_is_convert_name(name))
        return 0;
    int src = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    int kind = src < 0 ? -errno : mk_classify(src, st, c->sb);
    if (kind != 0 || st->st_nlink > 1) {
        if (kind < 0)
            mk_note(c, rel, "cannot read: %s", strerror(-kind)), c->failed++;
        else if (kind == 2)
            mk_note(c, rel, "looks like an own file whose marker is damaged or lost: not "
                    "converted (run fsck.fpgalz4fs -y)"), c->failed++;
        else if (kind == 1)
            c->own++;
        else
            mk_note(c, rel, "has %llu hard links: not converted (a rename would split them)",
                    (unsigned long long)st->st_nlink), c->links++;
        if (src >= 0)
            close(src);
        c->done_bytes += st->st_nlink == 1 ? (uint64_t)st->st_size : 0;
        return 0;
    }
    int rc = tl_convert(&c->tc, dirfd, name, rel, src, st, TL_SRC_PLAIN, &stored);
    close(src);
    if (rc < 0) {
        mk_note(c, rel, rc == -EBUSY ? "changed while being converted: left as it was"
                                      : "not converted (left as it was): %s", strerror(-rc));
        c->failed++;
        return 0;
    }
    c->converted++;
    c->bytes_in += (uint64_t)st->st_size, c->bytes_out += stored;
    return 0;
}

static int mk_compress_existing(int dirfd, const char *dir, int *lock_fd)
{
    sb_super sb;
    sb_error e = *lock_fd >= 0 ? SB_OK : sb_lock(dirfd, lock_fd);
    if (e == SB_ERR_MISSING)
        return mk_fail(dir, "not a fpgalz4fs store (--adopt --compress-existing formats it "
                            "first)");
    if (e == SB_ERR_LOCKED)
        return mk_fail(dir, "store is in use by a mounted daemon");
    if (e == SB_OK)
        e = sb_read(dirfd, &sb);
    if (e != SB_OK) {
        fprintf(stderr, MK_NAME ": %s: %s\n", dir, e == SB_ERR_IO ? strerror(errno)
                                                  : sb_error_name(e));
        return MK_EXIT_FAIL;
    }
    mk_conv c = {.dirfd = dirfd, .dir = dir, .bar = isatty(STDERR_FILENO), .sb = &sb};
    char err[256];
    chk_walk(dirfd, mk_survey, &c);
    if (tl_conv_open(&c.tc, &sb, err, sizeof(err)) < 0) {
        fprintf(stderr, MK_NAME ": cannot open the compression engine: %s\n", err);
        return MK_EXIT_FAIL;
    }
    c.tc.progress = mk_progress, c.tc.progress_ctx = &c;
    chk_walk(dirfd, mk_convert, &c);
    mk_bar_clear(&c);
    tl_conv_close(&c.tc);
    printf(MK_NAME ": %s: converted %llu files (%llu bytes, now %llu on disk), %llu already in "
           "the format, %llu hard-linked skipped, %llu failed, %llu stale temporaries removed\n",
           dir, (unsigned long long)c.converted, (unsigned long long)c.bytes_in,
           (unsigned long long)c.bytes_out, (unsigned long long)c.own,
           (unsigned long long)c.links, (unsigned long long)c.failed,
           (unsigned long long)c.stale);
    return c.failed ? MK_EXIT_FAIL : MK_EXIT_OK;
}

/* A store that has no clean mark yet (a new one) gets one once what was written is on the
 * disk: nothing in it can have been caught by a power loss. An existing mark (--force on a
 * store that was in use) stays as it is. */
static void mk_mark_clean(int dirfd)
{
    struct stat st;
    if (fstatat(dirfd, SB_CLEAN_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (syncfs(dirfd) == 0)
        sb_mark_write(dirfd, sb_ns(ts), 1);
}

int main(int argc, char **argv)
{
    mk_options o = {.block_size = 1u << 20, .force = 0, .dir = NULL};
    int status = mk_parse_args(argc, argv, &o), lock_fd = -1;
    if (status != MK_CONTINUE)
        return status;
    int dirfd = mk_open_dir(o.dir);
    if (dirfd < 0)
        return MK_EXIT_FAIL;
    if (!o.compress || o.adopt)
        status = mk_check(dirfd, &o, &lock_fd);
    if (status == MK_CONTINUE && (!o.compress || o.adopt))
        status = mk_format(dirfd, &o);
    if ((status == MK_CONTINUE || status == MK_EXIT_OK) && o.compress)
        status = mk_compress_existing(dirfd, o.dir, &lock_fd);
    if (status == MK_CONTINUE || status == MK_EXIT_OK)
        mk_mark_clean(dirfd);
    if (lock_fd >= 0)
        close(lock_fd);
    close(dirfd);
    return status;
}
