/* libfuse's passthrough_ll example, the rival that costs what FUSE alone costs: found where
 * Debian's libfuse3-dev ships it and compiled into the driver's work directory. */
#include "bench.h"

#include <string.h>
#include <unistd.h>

/* SRC, or libfuse3-dev's example, plain or gzip-compressed as Debian may ship it. */
static int bn_pt_find(const char *src, char *out)
{
    static const char *const where[] = {
        "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c",
        "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c.gz",
    };
    if (src) {
        snprintf(out, BN_PATH, "%s", src);
        return access(out, R_OK);
    }
    for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
        if (access(where[i], R_OK) == 0) {
            snprintf(out, BN_PATH, "%s", where[i]);
            return 0;
        }
    return -1;
}

/* The source and the headers next to it (passthrough_helpers.h), each plain or gzipped,
 * into DIR as plain files. */
static int bn_pt_copy(const char *src, const char *dir)
{
    char from[BN_PATH], cmd[5 * BN_PATH + 512];
    snprintf(from, sizeof(from), "%s", src);
    char *slash = strrchr(from, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(from, sizeof(from), ".");
    snprintf(cmd, sizeof(cmd), "for f in '%s' '%s'/*.h '%s'/*.h.gz; do [ -f \"$f\" ] || "
             "continue; b=${f##*/}; case $f in *.gz) gzip -dc \"$f\" > '%s'/\"${b%%.gz}\";; "
             "*) cp \"$f\" '%s'/\"$b\";; esac || exit 1; done", src, from, from, dir, dir);
    return bn_sh(cmd);
}

const char *bn_pt_build(const char *work, const char *src_opt, char *bin, char *src)
{
    char dir[BN_PATH], file[BN_PATH], cmd[3 * BN_PATH + 256];
    if (bn_pt_find(src_opt, src) != 0)
        return "no passthrough_ll.c (apt-get install libfuse3-dev, or --passthrough-src)";
    if (!bn_have("cc") || !bn_have("pkg-config"))
        return "no cc or pkg-config to compile passthrough_ll.c";
    bn_path(dir, work, "passthrough_ll-src");
    bn_path(bin, work, "passthrough_ll");
    const char *base = strrchr(src, '/') ? strrchr(src, '/') + 1 : src;
    bn_path(file, dir, base);
    size_t n = strlen(file);
    if (n > 3 && !strcmp(file + n - 3, ".gz"))
        file[n - 3] = '\0';
    if (bn_mkdirs(dir) != 0 || bn_pt_copy(src, dir) != 0)
        return "cannot copy passthrough_ll.c into the work directory";
    if (access(bin, X_OK) == 0)
        return NULL;                   /* built already in this work directory */
    /* -w: the example's warnings are libfuse's business, not this build's */
    snprintf(cmd, sizeof(cmd), "cc -O2 -w -o '%s' '%s' $(pkg-config --cflags --libs fuse3)",
             bin, file);
    return bn_sh(cmd) == 0 ? NULL : "passthrough_ll.c did not compile";
}
