/* Corpus replay for builds without libFuzzer (gcc): calls the harness once per file.
 *
 *   fuzz_NAME_replay PATH...     each PATH a corpus file or a directory of them
 *
 * Exits 0 when every input ran (a broken invariant aborts inside the harness), 2 on a usage
 * or read error, and 2 when no input at all was found: an empty corpus tests nothing. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

#define FR_MAX_INPUT (16u << 20)

static int fr_run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = malloc(FR_MAX_INPUT);
    size_t n = buf ? fread(buf, 1, FR_MAX_INPUT, fp) : 0;
    int bad = !buf || ferror(fp) || !feof(fp);
    fclose(fp);
    if (bad) {
        fprintf(stderr, "%s: unreadable or larger than %u bytes\n", path, FR_MAX_INPUT);
        free(buf);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int fr_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of a directory, in name order so that a log line points at the
 * same input on every machine. Returns the count, or -1. */
static long fr_run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **v = realloc(names, cap * sizeof(*v));
            if (!v)
                break;
            names = v;
        }
        if (asprintf(&names[n], "%s/%s", dir, e->d_name) < 0)
            break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), fr_cmp);
    long done = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (fr_run_file(names[i]) < 0)
                done = -1;
            else if (done >= 0)
                done++;
        }
        free(names[i]);
    }
    free(names);
    return done;
}

int main(int argc, char **argv)
{
    long total = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        long n = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? fr_run_dir(argv[i])
                 : fr_run_file(argv[i]) == 0                     ? 1
                                                                 : -1;
        if (n < 0)
            return 2;
        total += n;
    }
    printf("%s: replayed %ld inputs, every invariant held\n", argv[0], total);
    return total > 0 ? 0 : 2;
}
