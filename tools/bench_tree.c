/* The workloads part's source trees: a generated tree of small text files, and the
 * metadata-heavy commands timed on it (cp -r, tar -x, find | xargs stat, du -s, ls -lR,
 * git status, rm -r), each run by bench_wl.c on every rival. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BN_TREE_PER_DIR 40u            /* files per directory, as in a source tree */
#define BN_TREE_SEED 0x2545F4914F6CDD1Dull

static uint64_t bn_tree_rand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Source-like text: lines of identifiers, between 100 B and about 24 KiB a file. */
static int bn_tree_file(const char *path, uint64_t *s)
{
    static const char *words[] = {"static", "int", "return", "struct", "const", "char",
                                  "if", "else", "for", "unsigned", "void", "err", "buf",
                                  "len", "size_t", "goto out;", "NULL", "->next"};
    size_t want = 100 + bn_tree_rand(s) % (bn_tree_rand(s) % 4 ? 6000 : 24000), n = 0;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    while (n < want) {
        int w = fprintf(f, "%s%s", words[bn_tree_rand(s) % (sizeof(words) / sizeof(words[0]))],
                        bn_tree_rand(s) % 8 ? " " : ";\n");
        n += w > 0 ? (size_t)w : 0;
    }
    return fclose(f) == 0 ? 0 : -1;
}

int bn_tree_make(const char *dir, const char *tar, unsigned files)
{
    char sub[BN_PATH], name[32], path[BN_PATH];
    uint64_t s = BN_TREE_SEED;
    bn_rm_rf(dir);
    for (unsigned i = 0; i < files; i++) {
        snprintf(name, sizeof(name), "d%03u", i / BN_TREE_PER_DIR);
        bn_path(sub, dir, name);
        if (i % BN_TREE_PER_DIR == 0 && bn_mkdirs(sub) != 0)
            return -1;
        snprintf(name, sizeof(name), "f%05u.c", i);
        bn_path(path, sub, name);
        if (bn_tree_file(path, &s) != 0)
            return -1;
    }
    char *argv[] = {"tar", "-cf", (char *)tar, "-C", (char *)dir, ".", NULL};
    return bn_run(argv, NULL, NULL);
}

/* The kernel's caches (pages, dentries, inodes; a FUSE mount's too) emptied, so that the
 * commands after it ask the filesystem; not as root: a warm run. */
static void bn_tree_cold(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd >= 0) {
        (void)!write(fd, "3\n", 2);
        close(fd);
    }
}

static int bn_tree_sh(const char *cmd, double *secs)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    return bn_run(argv, NULL, secs);
}

/* What each op needs in place before it is timed: a copy of the tree (and for git status,
 * a repository of it). */
static int bn_tree_setup(int op, const char *src, const char *t)
{
    char cmd[4 * BN_PATH];
    if (op == BN_TREE_CP || op == BN_TREE_TAR)
        return 0;
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", src, t);
    if (bn_tree_sh(cmd, NULL) != 0)
        return -1;
    if (op == BN_TREE_GIT) {
        snprintf(cmd, sizeof(cmd), "cd '%s' && git init -q . && git add -A && git -c "
                 "user.name=bench -c user.email=bench@localhost commit -qm tree", t);
        if (bn_tree_sh(cmd, NULL) != 0)
            return -1;
    }
    bn_tree_cold();
    return 0;
}

int bn_tree_run(int op, const char *src, const char *tar, const char *dir, double *secs)
{
    char t[BN_PATH], cmd[4 * BN_PATH];
    bn_path(t, dir, "t");
    if (bn_tree_setup(op, src, t) != 0)
        return -1;
    switch (op) {
    case BN_TREE_CP: snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", src, t); break;
    case BN_TREE_TAR:
        snprintf(cmd, sizeof(cmd), "mkdir '%s' && tar -xf '%s' -C '%s'", t, tar, t);
        break;
    case BN_TREE_STAT:
        snprintf(cmd, sizeof(cmd), "find '%s' -type f | xargs stat >/dev/null", t);
        break;
    case BN_TREE_DU: snprintf(cmd, sizeof(cmd), "du -s '%s' >/dev/null", t); break;
    case BN_TREE_LS: snprintf(cmd, sizeof(cmd), "ls -lR '%s' >/dev/null", t); break;
    case BN_TREE_GIT:
        snprintf(cmd, sizeof(cmd), "cd '%s' && git -c safe.directory='*' status --porcelain "
                 ">/dev/null", t);
        break;
    case BN_TREE_RM: snprintf(cmd, sizeof(cmd), "rm -r '%s'", t); break;
    default: return -1;
    }
    return bn_tree_sh(cmd, secs);
}
