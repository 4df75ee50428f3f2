/* fpgalz4fs-bench: the benchmark driver. Speed targets are checked here and only here (the
 * tests never time anything), and each mode prints a table a person can read and paste.
 *
 * The modes sit in one table: `engine` (bench_engine.c) times the compression engine alone;
 * the filesystem modes (bench_fs.c) run fpgalz4fs and its rivals side by side on real
 * mounts (`workloads`, bench_wl.c, adds application-shaped writes against libfuse's
 * passthrough_ll); `all` runs every filesystem row, the workloads and then the engine, and
 * checks each target of SPEC.md "Performance" and of the workloads. */
#include "bench.h"

#include <string.h>

#define BN_USAGE "usage: " BN_NAME " MODE [options]   ('" BN_NAME " MODE --help' for a " \
                 "mode's options)"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the mode's name */
    const char *summary;
} bn_mode;

static const bn_mode bn_modes[] = {
    {"all", bn_fs_main, "every row below and the engine; the table of targets (one command)"},
    {"fs", bn_fs_main, "every filesystem row (write, read, small, random, size, rss)"},
    {"write", bn_fs_main, "cp of a large file into the mount, lz4 -1, cp to a plain directory"},
    {"read", bn_fs_main, "cat from the mount (daemon cache cold), lz4 -d, foreign, plain"},
    {"small", bn_fs_main, "cp -r of a source tree into the mount and a plain directory"},
    {"random", bn_fs_main, "fio random 4 KiB reads and writes, mount against plain"},
    {"size", bn_fs_main, "stored size against lz4 -1 at the same block size"},
    {"rss", bn_fs_main, "the daemon's peak RSS, with N concurrent writers"},
    {"workloads", bn_fs_main, "SQLite, appends, fio, edits, holes: fpgalz4fs, passthrough_ll, "
                              "ext4"},
    {"parallel", bn_par_main, "1, 2, 4, 8, 16 writers at once, then as many cold readers: "
                              "fpgalz4fs, passthrough_ll"},
    {"engine", bn_engine_main, "the compression engine alone: software, emulated card, both"},
};

#define BN_N_MODES (sizeof(bn_modes) / sizeof(bn_modes[0]))

static void bn_help(void)
{
    printf(BN_USAGE "\nMeasures fpgalz4fs against its rivals and prints tables; speed targets "
                    "live here.\n\nmodes:\n");
    for (size_t i = 0; i < BN_N_MODES; i++)
        printf("  %-11s %s\n", bn_modes[i].name, bn_modes[i].summary);
    printf("\n  -h, --help   show this help\n  --version    show the version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return bn_usage_error(BN_USAGE, "missing MODE", NULL);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        bn_help();
        return BN_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf(BN_NAME " " FPGALZ4FS_VERSION "\n");
        return BN_EXIT_OK;
    }
    for (size_t i = 0; i < BN_N_MODES; i++)
        if (!strcmp(argv[1], bn_modes[i].name))
            return bn_modes[i].run(argc - 1, argv + 1);
    return bn_usage_error(BN_USAGE, "unknown mode", argv[1]);
}
