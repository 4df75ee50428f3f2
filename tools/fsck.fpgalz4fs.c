/* fsck.fpgalz4fs: checks every backing file of an unmounted store and repairs what can be
 * repaired (fs/chk.c does the work; docs/TOOLS.md has the rules and the exit codes).
 *
 * It holds the store lock for the whole run, so it never runs beside a daemon. Findings go to
 * stdout, one line each prefixed with the file's path; the summary is the last line.
 *
 * --convert rewrites every own file of format version 1 that its check leaves without
 * problems as a version 5 file, in place (tools/tl_convert.c, shared with mkfpgalz4fs
 * --compress-existing). */
#include "chk.h"
#include "fmt.h"
#include "sb.h"
#include "tl_convert.h"
#include "tl_util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FK_NAME "fsck.fpgalz4fs"
#define FK_USAGE "usage: " FK_NAME " [-n|-y] [-v] [--convert] DIR"

/* Exit status bits, as e2fsck's. */
enum { FK_CLEAN = 0, FK_CORRECTED = 1, FK_LEFT = 4, FK_OPERATIONAL = 8, FK_USAGE_ERR = 16,
       FK_CONTINUE = -1 };

typedef struct {
    int no, yes, verbose;
    int convert;                       /* --convert: version 1 files become version 5 */
    const char *dir;
} fk_options;

typedef struct {
    dev_t dev;
    ino_t ino;
} fk_inode;

typedef struct {
    const fk_options *o;
    chk_mode mode;
    int ask;                           /* interactive: check, then ask before repairing */
    int bar;                           /* progress bar on stderr */
    uint64_t total, done;
    struct timespec last_bar;
    const char *rel;                   /* file being checked, for the lines chk says */
    int bar_shown;
    uint64_t own, foreign, newer, repaired, to_repair, unrepairable, bad_blocks, failed;
    fk_inode *seen;                    /* hard-linked files already checked */
    size_t n_seen, cap_seen;
    int status;
    uint64_t whole_before;             /* the clean mark: changes before are whole */
    const sb_super *sb;                /* the store's superblock */
    /* --convert */
    tl_conv tc;
    uint64_t converted, conv_links, conv_left, conv_failed, stale, bytes_in, bytes_out;
} fk_state;

static void fk_help(void)
{
    printf(FK_USAGE "\n"
           "Checks every backing file of the fpgalz4fs store DIR (unmounted) and repairs\n"
           "what can be repaired.\n"
           "\n"
           "  -n          check only, write nothing\n"
           "  -y          repair everything repairable without asking\n"
           "              (neither: ask on a terminal, otherwise repair only what the\n"
           "              daemon would repair by itself at open)\n"
           "  -v          name every file checked (and every file of format version 1)\n"
           "  --convert   after its check, rewrite every file of format version 1 as\n"
           "              version 5, in place (owner, mode, times and extended\n"
           "              attributes kept; hard-linked files and files with problems\n"
           "              left are not converted); safe to interrupt and run again;\n"
           "              a conversion counts as a correction. Not with -n\n"
           "  -h, --help  show this help\n"
           "  --version   show the version\n"
           "\n"
           "Exit status: 0 clean, 1 errors corrected (or files converted), 4 errors left,\n"
           "8 operational error, 16 usage error (bits combined).\n");
}

static const tl_tool fk_tool = {FK_NAME, FK_USAGE, FK_USAGE_ERR};

static int fk_parse_args(int argc, char **argv, fk_options *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"convert", no_argument, NULL, 'C'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "nyvh", longopts, NULL)) != -1) {
        switch (c) {
        case 'C': o->convert = 1; break;
        case 'n': o->no = 1; break;
        case 'y': o->yes = 1; break;
        case 'v': o->verbose = 1; break;
        case 'h': fk_help(); return FK_CLEAN;
        case 'V': printf(FK_NAME " " FPGALZ4FS_VERSION "\n"); return FK_CLEAN;
        default: return tl_unknown_option(&fk_tool, optopt, argv[optind - 1]);
        }
    }
    if (o->no && o->yes)
        return tl_usage_error(&fk_tool, "-n and -y exclude each other", NULL);
    if (o->no && o->convert)
        return tl_usage_error(&fk_tool, "-n and --convert exclude each other (-n writes "
                              "nothing; -n -v names the files of format version 1)", NULL);
    int rc = tl_take_dir(&fk_tool, argc, argv, optind, &o->dir);
    return rc ? rc : FK_CONTINUE;
}

/* ---- progress ---- */

static void fk_bar_clear(fk_state *s)
{
    if (s->bar_shown)
        fputs("\r\033[K", stderr);
    s->bar_shown = 0;
}

static void fk_bar(fk_state *s)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - s->last_bar.tv_sec) * 1000 + (now.tv_nsec - s->last_bar.tv_nsec) / 1000000;
    if (!s->bar || (s->bar_shown && ms < 100 && s->done < s->total))
        return;
    s->last_bar = now;
    int width = 40, fill = s->total ? (int)(s->done * (uint64_t)width / s->total) : width;
    fprintf(stderr, "\r[%.*s%*s] %llu/%llu files", fill, "########################################",
            width - fill, "", (unsigned long long)s->done, (unsigned long long)s->total);
    s->bar_shown = 1;
}

static int fk_count(void *ctx, int dirfd, const char *name, const char *rel,
                    const struct stat *st)
{
    if (st)
        ((fk_state *)ctx)->total++;
    return 0;
}

/* ---- one file ---- */

static void fk_say(void *ctx, const char *line)
{
    fk_state *s = ctx;
    fk_bar_clear(s);
    printf("%s/%s: %s\n", s->o->dir, s->rel, line);
    fflush(stdout);
}

/* Hard links are one file: checked once. */
static int fk_seen(fk_state *s, const struct stat *st)
{
    if (st->st_nlink < 2)
        return 0;
    for (size_t i = 0; i < s->n_seen; i++)
        if (s->seen[i].dev == st->st_dev && s->seen[i].ino == st->st_ino)
            return 1;
    if (s->n_seen == s->cap_seen) {
        size_t cap = s->cap_seen ? s->cap_seen * 2 : 16;
        fk_inode *v = realloc(s->seen, cap * sizeof(*v));
        if (!v)
            return 0;
        s->seen = v, s->cap_seen = cap;
    }
    s->seen[s->n_seen++] = (fk_inode){st->st_dev, st->st_ino};
    return 0;
}

__attribute__((format(printf, 2, 3))) static void fk_line(fk_state *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fk_say(s, line);
}

static int fk_ask(fk_state *s)
{
    char line[64];
    fk_bar_clear(s);
    printf("%s/%s: repair? [y/N] ", s->o->dir, s->rel);
    fflush(stdout);
    return fgets(line, sizeof(line), stdin) && (line[0] == 'y' || line[0] == 'Y');
}

static void fk_tally(fk_state *s, const chk_result *r)
{
    uint32_t left = r->found & ~r->fixed;
    if (r->kind == CHK_FOREIGN)
        s->foreign++;
    else if (r->kind == CHK_NEWER)
        s->newer++;
    else
        s->own++;
    s->bad_blocks += r->bad_blocks;
    if (r->fixed) {
        s->repaired++;
        s->status |= FK_CORRECTED;
    }
    if (left & CHK_P_UNREPAIRABLE)
        s->unrepairable++;
    if (left & ~CHK_P_UNREPAIRABLE)
        s->to_repair++;
    if (left)
        s->status |= FK_LEFT;
}

static int fk_check_fd(fk_state *s, int fd, chk_mode mode, chk_result *r)
{
    int rc = chk_file(fd, s->sb, mode, s->whole_before, fk_say, s, r);
    if (rc < 0) {
        fk_bar_clear(s);
        printf("%s/%s: cannot check: %s\n", s->o->dir, s->rel, strerror(-rc));
    }
    return rc;
}

/* The name was a regular file when the walk looked at it. Between then and the open it may
 * have been replaced: a symlink is not followed (O_NOFOLLOW), a FIFO does not block the open
 * (O_NONBLOCK), and anything but the listed file is refused (ESTALE), so that a repair run by
 * root writes into nothing but the store's own file. */
static int fk_open_file(int dirfd, const char *name, const struct stat *st, int writable)
{
    struct stat now;
    int fd = openat(dirfd, name, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK |
                    O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &now) != 0 || !S_ISREG(now.st_mode) || now.st_dev != st->st_dev ||
        now.st_ino != st->st_ino) {
        close(fd);
        errno = ESTALE;
        return -1;
    }
    return fd;
}

/* A file of format version 1, after its check (r): named under -v; under --convert,
 * rewritten as the newest version unless the check left problems or it has hard links. fd is the
 * descriptor the check used. */
static void fk_version1(fk_state *s, int dirfd, const char *name, int fd, const chk_result *r)
{
    struct stat st;
    uint64_t stored = 0;
    int v = fstat(fd, &st) < 0 ? -errno : tl_file_version(fd, (uint64_t)st.st_size);
    if (v < 0) {
        fk_line(s, "cannot read the format version: %s", strerror(-v));
        s->failed++, s->status |= FK_OPERATIONAL;
        return;
    }
    /* a damaged marker the check left: a version 1 file (only those are recognised so) */
    int left = (r->found & ~r->fixed) != 0;
    if (v != 1 && !(v == 0 && left && (r->found & CHK_P_MARKER)))
        return;
    if (!s->o->convert) {
        if (s->o->verbose)
            fk_line(s, "format version 1: fsck --convert rewrites it as version %u", FMT_VERSION);
        return;
    }
    if (left) {
        fk_line(s, "format version 1: not converted to version %u (problems left, see above)",
                FMT_VERSION);
        s->conv_left++;
        return;
    }
    if (st.st_nlink > 1) {
        fk_line(s, "format version 1: has %llu hard links: not converted to version %u (a "
                "rename would split them)", (unsigned long long)st.st_nlink, FMT_VERSION);
        s->conv_links++;
        return;
    }
    int rc = tl_convert(&s->tc, dirfd, name, s->rel, fd, &st, TL_SRC_OWN, &stored);
    if (rc < 0) {
        fk_line(s, "format version 1: not converted to version %u (left as it was): %s",
                FMT_VERSION, rc == -EBUSY ? "changed while being converted" : strerror(-rc));
        s->conv_failed++, s->status |= FK_OPERATIONAL;
        return;
    }
    uint64_t was = (uint64_t)st.st_blocks * 512;
    fk_line(s, "format version 1: converted to version %u (%llu bytes on disk, were %llu)",
            FMT_VERSION, (unsigned long long)stored, (unsigned long long)was);
    s->converted++, s->status |= FK_CORRECTED;
    s->bytes_in += was, s->bytes_out += stored;
}

/* --convert: temporaries of an interrupted conversion (of this tool or of mkfpgalz4fs
 * --compress-existing) go first. */
static int fk_stale(void *ctx, int dirfd, const char *name, const char *rel,
                    const struct stat *st)
{
    fk_state *s = ctx;
    int rc = st ? tl_conv_remove_stale(dirfd, name) : 0;
    if (rc > 0) {
        s->stale++;
        if (s->o->verbose)
            printf("%s/%s: stale temporary of an interrupted conversion: removed\n", s->o->dir,
                   rel);
    } else if (rc < 0) {
        printf("%s/%s: cannot remove a stale temporary of an interrupted conversion: %s\n",
               s->o->dir, rel, strerror(-rc));
        s->failed++, s->status |= FK_OPERATIONAL;
    }
    return 0;
}

static int fk_file(void *ctx, int dirfd, const char *name, const char *rel,
                   const struct stat *st)
{
    fk_state *s = ctx;
    chk_result r;
    s->rel = rel;
    if (!st) {
        fk_bar_clear(s);
        printf("%s/%s: cannot read directory: %s\n", s->o->dir, rel, strerror(errno));
        s->failed++, s->status |= FK_OPERATIONAL;
        return 0;
    }
    s->done++;
    fk_bar(s);
    if (fk_seen(s, st) || (s->o->convert && chk_is_convert_name(name)))
        return 0;                      /* a temporary the first walk could not remove */
    int writable = s->mode != CHK_CHECK || s->ask;
    int fd = fk_open_file(dirfd, name, st, writable);
    if (fd < 0) {
        fk_bar_clear(s);
        printf("%s/%s: cannot open: %s\n", s->o->dir, rel,
               errno == ESTALE ? "no longer the file that was listed" : strerror(errno));
        s->failed++, s->status |= FK_OPERATIONAL;
        return 0;
    }
    int rc = fk_check_fd(s, fd, s->ask ? CHK_CHECK : s->mode, &r);
    if (rc == 0 && s->ask && (r.found & ~CHK_P_UNREPAIRABLE) && fk_ask(s))
        rc = fk_check_fd(s, fd, CHK_REPAIR, &r);
    if (rc < 0) {
        close(fd);
        s->failed++, s->status |= FK_OPERATIONAL;
        return 0;
    }
    if (s->o->verbose && !r.found) {
        fk_bar_clear(s);
        printf("%s/%s: %s, clean\n", s->o->dir, rel, r.kind == CHK_OWN ? "own"
                                                      : r.kind == CHK_NEWER ? "newer format"
                                                                            : "foreign");
    }
    fk_tally(s, &r);
    if (r.kind == CHK_OWN)
        fk_version1(s, dirfd, name, fd, &r);
    close(fd);
    return 0;
}

/* ---- the store ---- */

static int fk_fail(const char *dir, const char *what)
{
    fprintf(stderr, FK_NAME ": %s: %s\n", dir, what);
    return FK_OPERATIONAL;
}

/* Takes the lock the daemon holds while mounted, then reads the superblock. */
static int fk_open_store(const char *dir, int *dirfd, int *lock_fd, sb_super *sb)
{
    *dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0)
        return fk_fail(dir, errno == ENOENT ? "no such directory" : strerror(errno));
    sb_error e = sb_lock(*dirfd, lock_fd);
    if (e == SB_ERR_MISSING)
        return fk_fail(dir, "not a fpgalz4fs store (no superblock .fpgalz4fs)");
    if (e == SB_ERR_LOCKED)
        return fk_fail(dir, "store is in use (mounted, or another tool holds it); unmount it "
                            "first");
    if (e != SB_OK)
        return fk_fail(dir, e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
    e = sb_read(*dirfd, sb);
    if (e == SB_ERR_NEWER)
        return fk_fail(dir, "store has a newer format version than this build; not checking it");
    if (e != SB_OK) {
        fprintf(stderr, FK_NAME ": %s: superblock: %s (mkfpgalz4fs --force writes a new one "
                "and keeps every file)\n", dir, e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
        return FK_OPERATIONAL;
    }
    return FK_CONTINUE;
}

static void fk_summary(const fk_state *s)
{
    fk_bar_clear((fk_state *)s);
    printf(FK_NAME ": %s: %llu files (%llu own, %llu foreign, %llu newer format), %llu repaired, "
           "%llu to repair, %llu unrepairable, %llu bad blocks, %llu not checked\n", s->o->dir,
           (unsigned long long)(s->own + s->foreign + s->newer), (unsigned long long)s->own,
           (unsigned long long)s->foreign, (unsigned long long)s->newer,
           (unsigned long long)s->repaired, (unsigned long long)s->to_repair,
           (unsigned long long)s->unrepairable, (unsigned long long)s->bad_blocks,
           (unsigned long long)s->failed);
    if (s->o->convert)
        printf(FK_NAME ": %s: %llu files converted to version %u (%llu bytes on disk, now %llu), "
               "not converted: %llu hard-linked, %llu with problems left, %llu failed; %llu "
               "stale temporaries removed\n", s->o->dir, (unsigned long long)s->converted,
               FMT_VERSION,
               (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out,
               (unsigned long long)s->conv_links, (unsigned long long)s->conv_left,
               (unsigned long long)s->conv_failed, (unsigned long long)s->stale);
}

int main(int argc, char **argv)
{
    fk_options o = {0};
    int status = fk_parse_args(argc, argv, &o);
    if (status != FK_CONTINUE)
        return status;
    int dirfd = -1, lock_fd = -1;
    sb_super sb;
    status = fk_open_store(o.dir, &dirfd, &lock_fd, &sb);
    if (status != FK_CONTINUE) {
        if (dirfd >= 0)
            close(dirfd);
        return status;
    }
    fk_state s = {.o = &o, .bar = isatty(STDERR_FILENO), .sb = &sb};
    s.mode = o.no ? CHK_CHECK : o.yes ? CHK_REPAIR : CHK_PREEN;
    s.ask = !o.no && !o.yes && isatty(STDIN_FILENO);
    int clean;
    if (sb_mark_read(dirfd, &s.whole_before, &clean) != SB_OK)
        s.whole_before = 0;            /* a mark that is not a file: nothing is known whole */
    else if (clean)
        s.whole_before = UINT64_MAX;   /* no mount changed anything since (FORMAT.md 1.5) */
    if (o.convert) {
        char err[256];
        if (tl_conv_open(&s.tc, &sb, err, sizeof(err)) < 0) {
            fprintf(stderr, FK_NAME ": cannot open the compression engine: %s\n", err);
            close(lock_fd);
            close(dirfd);
            return FK_OPERATIONAL;
        }
        chk_walk(dirfd, fk_stale, &s);
    }
    if (s.bar)
        chk_walk(dirfd, fk_count, &s);
    chk_walk(dirfd, fk_file, &s);
    fk_summary(&s);
    if (o.convert)
        tl_conv_close(&s.tc);
    free(s.seen);
    close(lock_fd);
    close(dirfd);
    return s.status;
}
