/* Repeatable test data shared by the unit tests: text-like bytes that compress about as
 * well as logs or source, and random bytes that do not. */
#ifndef FPGALZ4FS_TESTDATA_H
#define FPGALZ4FS_TESTDATA_H

#include <stddef.h>
#include <stdint.h>

/* A small xorshift generator, so every run sees the same data. */
static inline uint32_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 32);
}

/* Words and punctuation: compresses about as well as logs or source text. */
static inline void fill_text(uint8_t *buf, size_t len, uint64_t seed)
{
    static const char *const words[] = {
        "the ", "engine ", "compresses ", "block ", "of ", "data ", "into ", "LZ4 ",
        "frames, ", "while ", "card ", "is ", "busy.\n", "error: ", "ok\n", "2024-01-01 ",
    };
    uint64_t s = seed | 1;
    size_t n = 0;
    while (n < len) {
        const char *w = words[rng_next(&s) % 16];
        for (size_t i = 0; w[i] && n < len; i++)
            buf[n++] = (uint8_t)w[i];
    }
}

static inline void fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)rng_next(&s);
}

#endif
