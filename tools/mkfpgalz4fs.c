/* mkfpgalz4fs: makes a directory into an fpgalz4fs store by writing its superblock.
 *
 * It never deletes or changes any file but the superblock: a directory holding anything other
 * than lost+found is refused, and an existing store is rewritten only with --force, under the
 * store lock so that a mounted store is never reformatted beneath its daemon. */
#include "sb.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MK_NAME "mkfpgalz4fs"
#define MK_USAGE "usage: " MK_NAME " [-b 64K|256K|1M|4M] [--force] DIR"

enum { MK_EXIT_OK = 0, MK_EXIT_FAIL = 1, MK_EXIT_USAGE = 2, MK_CONTINUE = -1 };

typedef struct {
    uint32_t block_size;
    int force;
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
           "  -h, --help   show this help\n"
           "  --version    show the version\n");
}

static int mk_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, MK_NAME ": %s%s%s%s (" MK_USAGE ")\n", what, arg ? " '" : "",
            arg ? arg : "", arg ? "'" : "");
    return MK_EXIT_USAGE;
}

/* getopt names an unknown short option only by its letter (it may sit inside a cluster such
 * as -xb), and an unknown long one only through argv. */
static int mk_unknown_option(int letter, const char *arg)
{
    char text[3] = {'-', (char)letter, '\0'};
    return mk_usage_error("unknown option", letter ? text : arg);
}

/* Returns MK_CONTINUE when the command line asks for a format, else the exit status. */
static int mk_parse_args(int argc, char **argv, mk_options *o)
{
    static const struct option longopts[] = {
        {"force", no_argument, NULL, 'f'},
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
                return mk_usage_error("bad block size (use 64K, 256K, 1M or 4M):", optarg);
            break;
        case 'f': o->force = 1; break;
        case 'h': mk_help(); return MK_EXIT_OK;
        case 'V': printf(MK_NAME " " FPGALZ4FS_VERSION "\n"); return MK_EXIT_OK;
        case ':': return mk_usage_error("missing value for option", "-b");
        default: return mk_unknown_option(optopt, argv[optind - 1]);
        }
    }
    if (optind == argc)
        return mk_usage_error("missing DIR", NULL);
    if (optind + 1 < argc)
        return mk_usage_error("too many arguments, from", argv[optind + 1]);
    o->dir = argv[optind];
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
                 strcmp(n, SB_FILE_NAME ".tmp") && !c->other[0])
            snprintf(c->other, sizeof(c->other), "%s", n);
    }
    int saved = errno;
    closedir(d);
    errno = saved;
    return saved ? -1 : 0;
}

/* With --force on an existing store: holds the store lock (kept until exit) and refuses a
 * store of a newer format, which this build must never rewrite. */
static int mk_take_existing(int dirfd, const char *dir)
{
    int lock_fd;
    sb_super old;
    sb_error e = sb_lock(dirfd, &lock_fd);
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
static int mk_check(int dirfd, const mk_options *o)
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
        return mk_take_existing(dirfd, o->dir);
    if (c.other[0]) {
        fprintf(stderr, MK_NAME ": %s: directory is not empty (it holds '%s'); refusing to "
                        "format it\n", o->dir, c.other);
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

int main(int argc, char **argv)
{
    mk_options o = {.block_size = 1u << 20, .force = 0, .dir = NULL};
    int status = mk_parse_args(argc, argv, &o);
    if (status != MK_CONTINUE)
        return status;
    int dirfd = mk_open_dir(o.dir);
    if (dirfd < 0)
        return MK_EXIT_FAIL;
    status = mk_check(dirfd, &o);
    if (status == MK_CONTINUE)
        status = mk_format(dirfd, &o);
    close(dirfd);   /* a store lock taken by mk_check is released as the process exits */
    return status;
}
