/* The kernel's table of mounts, /proc/self/mountinfo. An unmount returns before the daemon
 * that served the store has synced and let go of it, so a store that is locked with no mount
 * of it up is one whose daemon is finishing (or that fsck is checking): a new mount waits for
 * it rather than refusing (daemon.c). */
#include "mounts.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table writes space, tab, newline and backslash as \ooo (octal). */
static void mt_unescape(char *s)
{
    char *out = s;
    for (const char *in = s; *in;) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 4;
        } else {
            *out++ = *in++;
        }
    }
    *out = '\0';
}

/* The source of a mountinfo line whose type is fuse or fuse.*; NULL for any other. Fields
 * after " - ": type, source, super options. */
static char *mt_fuse_source(char *line)
{
    char *sep = strstr(line, " - ");
    if (!sep)
        return NULL;
    char *save = NULL, *type = strtok_r(sep + 3, " \n", &save);
    char *src = type ? strtok_r(NULL, " \n", &save) : NULL;
    if (!src || (strcmp(type, "fuse") != 0 && strncmp(type, "fuse.", 5) != 0))
        return NULL;
    mt_unescape(src);
    return src;
}

int mt_source_mounted(const char *source)
{
    FILE *mi = fopen("/proc/self/mountinfo", "re");
    if (!mi)
        return -1;
    char *line = NULL, *src;
    size_t cap = 0;
    int found = 0;
    while (!found && getline(&line, &cap, mi) > 0)
        found = (src = mt_fuse_source(line)) != NULL && strcmp(src, source) == 0;
    free(line);
    fclose(mi);
    return found;
}

int mt_mount_dev(const char *path, unsigned *major, unsigned *minor)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[PATH_MAX * 2 + 256], mnt[PATH_MAX * 2];
    unsigned ma, mi;
    int found = -1;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &ma, &mi, mnt) != 3)
            continue;
        mt_unescape(mnt);
        if (strcmp(mnt, path) == 0) {
            *major = ma;
            *minor = mi;
            found = 0;
        }
    }
    fclose(f);
    return found;
}
