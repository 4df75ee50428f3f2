/* fpgalz4fs-stat: how well a tree of a store is compressed, in the manner of btrfs's compsize:
 * logical bytes, stored bytes (allocated: st_blocks * 512, and apparent: st_size) and their
 * ratio, for own and foreign files, and counts of blocks stored raw and of zero blocks.
 *
 * It reads only markers and seek tables (fs/chk.c, chk_stat_file), never decodes a block, and
 * writes nothing, so it may run on a mounted store. Given a mountpoint (or a directory inside
 * one) of fpgalz4fs, it reads the backing directory named by the mount's source field in
 * /proc/self/mountinfo (the daemon mounts with fsname=BACKING, an absolute path). */
#include "chk.h"
#include "tl_util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_NAME "fpgalz4fs-stat"
#define ST_USAGE "usage: " ST_NAME " [-v] DIR"
#define ST_FSTYPE "fuse.fpgalz4fs"

enum { ST_OK = 0, ST_FAIL = 1, ST_USAGE_ERR = 2, ST_CONTINUE = -1 };
enum { ST_ROW_OWN = 0, ST_ROW_FOREIGN, ST_ROW_NEWER, ST_ROWS };

typedef struct {
    uint64_t files, logical, disk, apparent;
} st_row;

typedef struct {
    int verbose;
    st_row rows[ST_ROWS];
    uint64_t blocks, raw_blocks, zero_blocks, torn, errors;
} st_state;

static const tl_tool st_tool = {ST_NAME, ST_USAGE, ST_USAGE_ERR};

static int st_parse_args(int argc, char **argv, int *verbose, const char **dir)
{
    static const struct option longopts[] = {
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'v': *verbose = 1; break;
        case 'h':
            printf(ST_USAGE "\n"
                   "Logical and stored sizes of the files under DIR: a store's backing\n"
                   "directory, a mountpoint of fpgalz4fs, or a directory inside either.\n"
                   "\n"
                   "  -v, --verbose  one line per file\n"
                   "  -h, --help     show this help\n"
                   "  --version      show the version\n");
            return ST_OK;
        case 'V': printf(ST_NAME " " FPGALZ4FS_VERSION "\n"); return ST_OK;
        default: return tl_unknown_option(&st_tool, optopt, argv[optind - 1]);
        }
    }
    int rc = tl_take_dir(&st_tool, argc, argv, optind, dir);
    return rc ? rc : ST_CONTINUE;
}

/* ---- mountpoints ---- */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void st_unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; w++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 4;
        } else {
            *w = *r++;
        }
    }
    *w = '\0';
}

/* 1 when mount point mp contains path (at a path boundary). */
static int st_under(const char *path, const char *mp)
{
    size_t n = strlen(mp);
    if (!strcmp(mp, "/"))
        return 1;
    return !strncmp(path, mp, n) && (path[n] == '/' || path[n] == '\0');
}

/* The mount holding real (the innermost, i.e. the longest mount point containing it): when
 * it is fpgalz4fs, writes the matching backing path into out and returns 1. */
static int st_backing_of(const char *real, char *out, size_t cap)
{
    FILE *fp = fopen("/proc/self/mountinfo", "r");
    char *line = NULL, best_mp[PATH_MAX] = "", best_src[PATH_MAX] = "", best_type[64] = "";
    size_t n = 0;
    if (!fp)
        return 0;
    while (getline(&line, &n, fp) > 0) {
        char mp[PATH_MAX], type[64], src[PATH_MAX];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
            sscanf(dash + 3, "%63s %4095s", type, src) != 2)
            continue;
        st_unescape(mp);
        st_unescape(src);
        if (st_under(real, mp) && strlen(mp) >= strlen(best_mp)) {
            snprintf(best_mp, sizeof(best_mp), "%s", mp);
            snprintf(best_src, sizeof(best_src), "%s", src);
            snprintf(best_type, sizeof(best_type), "%s", type);
        }
    }
    free(line);
    fclose(fp);
    if (strcmp(best_type, ST_FSTYPE))
        return 0;
    const char *rest = strcmp(best_mp, "/") ? real + strlen(best_mp) : real;
    snprintf(out, cap, "%s%s", best_src, rest);
    return 1;
}

/* ---- the walk ---- */

static double st_pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static const char *st_kind_name(chk_kind k)
{
    return k == CHK_OWN ? "own" : k == CHK_NEWER ? "newer" : "foreign";
}

static int st_file(void *ctx, int dirfd, const char *name, const char *rel,
                   const struct stat *st)
{
    st_state *s = ctx;
    chk_stat cs;
    int fd = st ? openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC) : -1;
    int rc = fd < 0 ? -(errno ? errno : EIO) : chk_stat_file(fd, &cs);
    if (fd >= 0)
        close(fd);
    if (rc < 0) {
        fprintf(stderr, ST_NAME ": %s: %s\n", *rel ? rel : ".", strerror(-rc));
        s->errors++;
        return 0;
    }
    st_row *row = &s->rows[cs.kind == CHK_OWN ? ST_ROW_OWN : cs.kind == CHK_NEWER
                                                             ? ST_ROW_NEWER : ST_ROW_FOREIGN];
    row->files++;
    row->logical += cs.logical, row->disk += cs.disk, row->apparent += cs.apparent;
    s->blocks += cs.blocks, s->raw_blocks += cs.raw_blocks, s->zero_blocks += cs.zero_blocks;
    s->torn += cs.torn;
    if (s->verbose)
        printf("%-7s %14llu %14llu %14llu %7.2f%%%s %s\n", st_kind_name(cs.kind),
               (unsigned long long)cs.logical, (unsigned long long)cs.disk,
               (unsigned long long)cs.apparent, st_pct(cs.disk, cs.logical),
               cs.torn ? " torn" : "", rel);
    return 0;
}

static void st_print_row(const char *name, const st_row *r)
{
    printf("%-7s %8llu %14llu %14llu %14llu %7.2f%%\n", name, (unsigned long long)r->files,
           (unsigned long long)r->logical, (unsigned long long)r->disk,
           (unsigned long long)r->apparent, st_pct(r->disk, r->logical));
}

static void st_report(const st_state *s)
{
    static const char *const names[ST_ROWS] = {"own", "foreign", "newer"};
    st_row total = {0};
    printf("%-7s %8s %14s %14s %14s %8s\n", "kind", "files", "logical", "disk", "apparent",
           "ratio");
    for (int k = 0; k < ST_ROWS; k++) {
        if (k == ST_ROW_NEWER && !s->rows[k].files)
            continue;
        st_print_row(names[k], &s->rows[k]);
        total.files += s->rows[k].files, total.logical += s->rows[k].logical;
        total.disk += s->rows[k].disk, total.apparent += s->rows[k].apparent;
    }
    st_print_row("total", &total);
    printf("blocks %llu (stored raw %llu, zero %llu) in own files; %llu own files without a "
           "seek table (torn)\n", (unsigned long long)s->blocks,
           (unsigned long long)s->raw_blocks, (unsigned long long)s->zero_blocks,
           (unsigned long long)s->torn);
}

int main(int argc, char **argv)
{
    st_state s = {0};
    const char *dir = NULL;
    int status = st_parse_args(argc, argv, &s.verbose, &dir);
    if (status != ST_CONTINUE)
        return status;
    char real[PATH_MAX], backing[PATH_MAX];
    if (!realpath(dir, real)) {
        fprintf(stderr, ST_NAME ": %s: %s\n", dir, strerror(errno));
        return ST_FAIL;
    }
    const char *path = real;
    if (st_backing_of(real, backing, sizeof(backing))) {
        printf("%s: a mount of fpgalz4fs; reading its backing directory %s\n", dir, backing);
        path = backing;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, ST_NAME ": %s: %s\n", path, strerror(errno));
        return ST_FAIL;
    }
    if (s.verbose)
        printf("%-7s %14s %14s %14s %8s path\n", "kind", "logical", "disk", "apparent", "ratio");
    chk_walk(fd, st_file, &s);
    close(fd);
    st_report(&s);
    return s.errors ? ST_FAIL : ST_OK;
}
