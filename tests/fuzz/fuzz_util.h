/* fz: what the fuzz harnesses share: a failed invariant aborts (so libFuzzer and the corpus
 * replay both stop on it), inputs become in-memory backing files, and one file-layer
 * environment (software engine, log to /dev/null) lives for the whole run.
 *
 * Every harness defines LLVMFuzzerTestOneInput; under clang -fsanitize=fuzzer libFuzzer calls
 * it, otherwise fuzz_replay.c's main calls it once per corpus file. */
#ifndef FPGALZ4FS_FUZZ_UTIL_H
#define FPGALZ4FS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "ffile.h"

/* Reports a broken invariant with its place and aborts. */
#define FZ_CHECK(cond, ...)                                                                 \
    do {                                                                                    \
        if (!(cond))                                                                        \
            fz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                \
    } while (0)

_Noreturn void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A new anonymous in-memory file (it supports fallocate, futimens, fsync like a disk file)
 * holding data; aborts when the system refuses one. */
int fz_memfile(const uint8_t *data, size_t len);

/* Everything ff_open needs, made once per process. */
typedef struct {
    eng_ctx *eng;
    lg_log *log;
    ff_env *rw;                        /* a read-write mount: repairs run */
    ff_env *ro;                        /* a read-only mount: nothing is ever written */
} fz_env;

fz_env *fz_env_get(void);

/* Reads the whole logical content of an open file in block-sized pieces, up to cap bytes
 * (the rest is probed a piece per block), into a malloc'd buffer. Each piece's status goes
 * into *first_err (the first negative errno, 0 if none). Returns the buffer (size bytes or
 * cap, whichever is smaller, in *len). */
uint8_t *fz_read_all(ff_file *f, uint64_t size, uint64_t cap, size_t *len, int *first_err);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
