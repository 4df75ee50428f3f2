/* bench_corpus: what every mode measures on. The Linux source tar when it is installed (the
 * corpus SPEC.md names), else generated text that is the same on every host (fixed seed). */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads up to cap bytes; returns how many came. */
static size_t bn_read_all(FILE *f, uint8_t *buf, size_t cap)
{
    size_t got = 0, n;
    while (got < cap && (n = fread(buf + got, 1, cap - got, f)) > 0)
        got += n;
    return got;
}

static int bn_corpus_file(const bn_corpus_req *r, bn_corpus *c)
{
    FILE *f = fopen(r->file, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, BN_NAME ": %s: %s\n", r->file, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    size_t cap = (size_t)st.st_size;
    if (r->mib_given && cap > r->mib * BN_MIB)
        cap = r->mib * BN_MIB;
    c->data = bn_alloc(cap);
    c->len = bn_read_all(f, c->data, cap);
    fclose(f);
    if (c->len == 0) {
        fprintf(stderr, BN_NAME ": %s: empty or unreadable\n", r->file);
        return -1;
    }
    snprintf(c->what, sizeof(c->what), "%s (%zu bytes)", r->file, c->len);
    return 0;
}

/* The first N MiB of the Linux source tar: real source text. */
static int bn_corpus_linux(const bn_corpus_req *r, bn_corpus *c)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "xz -dc '%s' | head -c %zu", BN_LINUX_TAR, r->mib * BN_MIB);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    c->data = bn_alloc(r->mib * BN_MIB);
    c->len = bn_read_all(p, c->data, r->mib * BN_MIB);
    pclose(p);   /* xz ends on SIGPIPE once head has enough: not an error */
    if (c->len == 0) {
        free(c->data);
        fprintf(stderr, BN_NAME ": '%s' gave nothing; generating a corpus instead\n", cmd);
        return -1;
    }
    snprintf(c->what, sizeof(c->what), "first %zu bytes of %s (%s)", c->len, BN_LINUX_TAR,
             cmd);
    return 0;
}

/* xorshift64*: a fixed seed makes the generated corpus the same on every host. */
static uint64_t bn_rand(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

#define BN_VOCAB 1024u
#define BN_WORD_MAX 24u
#define BN_RECENT 128u                 /* lines kept for repeats */
#define BN_LINE_MAX 256u

typedef struct {
    uint64_t seed;
    char vocab[BN_VOCAB][BN_WORD_MAX];
    char recent[BN_RECENT][BN_LINE_MAX];
    unsigned n_recent;
    unsigned long line_no;
} bn_gen;

static void bn_gen_vocab(bn_gen *g)
{
    static const char *const syl[] = {"ka", "ro", "mi", "ten", "sul", "va", "por", "lin",
                                      "de", "gra", "ex", "ul", "fi", "mon", "tar", "bel",
                                      "cho", "nu", "is", "qua", "zen", "ot", "pre", "dis"};
    for (unsigned w = 0; w < BN_VOCAB; w++) {
        unsigned n = 1 + (unsigned)(bn_rand(&g->seed) % 4);
        g->vocab[w][0] = '\0';
        for (unsigned k = 0; k < n; k++)
            strcat(g->vocab[w], syl[bn_rand(&g->seed) % (sizeof(syl) / sizeof(syl[0]))]);
    }
}

/* A word, with a skew toward the first ones as in natural text (product of two uniforms). */
static const char *bn_gen_word(bn_gen *g)
{
    uint64_t r = bn_rand(&g->seed);
    return g->vocab[((r & 1023u) * ((r >> 10) & 1023u)) >> 10];
}

/* A log-like line: a timestamp, a component, some words, a number or two. */
static size_t bn_gen_fresh(bn_gen *g, char *line)
{
    uint64_t r = bn_rand(&g->seed);
    int n = snprintf(line, BN_LINE_MAX, "%06lu %02u:%02u:%02u %s[%u]:", g->line_no,
                     (unsigned)(r % 24), (unsigned)(r >> 8) % 60, (unsigned)(r >> 16) % 60,
                     bn_gen_word(g), (unsigned)(r >> 24) % 4096);
    unsigned words = 3 + (unsigned)(r >> 40) % 10;
    for (unsigned i = 0; i < words && n < (int)(BN_LINE_MAX - BN_WORD_MAX - 24); i++)
        n += snprintf(line + n, BN_LINE_MAX - (size_t)n, " %s", bn_gen_word(g));
    if ((r >> 50) & 1)
        n += snprintf(line + n, BN_LINE_MAX - (size_t)n, " = %u", (unsigned)(r >> 52));
    line[n++] = '\n';
    line[n] = '\0';
    return (size_t)n;
}

/* One line into buf (room for BN_LINE_MAX): half repeat a recent line verbatim. */
static size_t bn_gen_line(bn_gen *g, char *buf)
{
    g->line_no++;
    if (g->n_recent > 0 && bn_rand(&g->seed) % 2 == 0) {
        const char *old = g->recent[bn_rand(&g->seed) % g->n_recent];
        size_t n = strlen(old);
        memcpy(buf, old, n);
        return n;
    }
    size_t n = bn_gen_fresh(g, buf);
    char *slot = g->recent[g->n_recent < BN_RECENT ? g->n_recent++
                                                   : bn_rand(&g->seed) % BN_RECENT];
    memcpy(slot, buf, n);
    slot[n] = '\0';
    return n;
}

static bn_gen *bn_gen_new(uint64_t seed)
{
    bn_gen *g = bn_alloc(sizeof(*g));
    memset(g, 0, sizeof(*g));
    g->seed = seed;
    bn_gen_vocab(g);
    return g;
}

/* Fills buf[0..cap) with generated lines. */
static void bn_gen_fill(bn_gen *g, uint8_t *buf, size_t cap)
{
    char line[BN_LINE_MAX + 1];
    for (size_t len = 0; len < cap;) {
        size_t n = bn_gen_line(g, line);
        if (n > cap - len)
            n = cap - len;
        memcpy(buf + len, line, n);
        len += n;
    }
}

static void bn_corpus_generate(const bn_corpus_req *r, bn_corpus *c)
{
    bn_gen *g = bn_gen_new(0x6a292b3a14374183ull);
    c->len = r->mib * BN_MIB;
    c->data = bn_alloc(c->len);
    bn_gen_fill(g, c->data, c->len);
    free(g);
    snprintf(c->what, sizeof(c->what), "generated text, %zu bytes (seeded log-like lines: "
             "words, numbers, half of them repeated)", c->len);
}

int bn_corpus_load(const bn_corpus_req *r, bn_corpus *c)
{
    if (r->file)
        return bn_corpus_file(r, c);
    if (!r->synthetic && access(BN_LINUX_TAR, R_OK) == 0 && bn_corpus_linux(r, c) == 0)
        return 0;
    bn_corpus_generate(r, c);
    return 0;
}

int bn_corpus_write_generated(const char *path, size_t mib)
{
    bn_corpus c;
    bn_corpus_req r = {.synthetic = 1, .mib = mib};
    bn_corpus_generate(&r, &c);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(c.data, 1, c.len, f) == c.len;
    if (f && fclose(f) != 0)
        ok = 0;
    free(c.data);
    if (!ok)
        fprintf(stderr, BN_NAME ": %s: %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

#define BN_TREE_PER_DIR 50u
#define BN_TREE_MAX_FILE (64u * 1024u)

/* File sizes skewed small, as in a source tree: most a few KiB, some up to 64 KiB. */
static size_t bn_tree_size(uint64_t *seed)
{
    uint64_t r = bn_rand(seed);
    size_t a = (size_t)(r % BN_TREE_MAX_FILE), b = (size_t)((r >> 20) % BN_TREE_MAX_FILE);
    size_t n = a * b / BN_TREE_MAX_FILE;
    return n < 200 ? 200 : n;
}

int bn_tree_generate(const char *dir, unsigned n)
{
    bn_gen *g = bn_gen_new(0x1f83d9abfb41bd6bull);
    uint8_t *buf = bn_alloc(BN_TREE_MAX_FILE);
    char path[BN_PATH + 64];
    int rc = 0;
    for (unsigned i = 0; i < n && rc == 0; i++) {
        snprintf(path, sizeof(path), "%s/d%03u", dir, i / BN_TREE_PER_DIR);
        if (i % BN_TREE_PER_DIR == 0 && bn_mkdirs(path) != 0) {
            fprintf(stderr, BN_NAME ": %s: %s\n", path, strerror(errno));
            rc = -1;
            break;
        }
        snprintf(path, sizeof(path), "%s/d%03u/f%05u.txt", dir, i / BN_TREE_PER_DIR, i);
        size_t len = bn_tree_size(&g->seed);
        bn_gen_fill(g, buf, len);
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(buf, 1, len, f) == len;
        if ((f && fclose(f) != 0) || !ok) {
            fprintf(stderr, BN_NAME ": %s: %s\n", path, strerror(errno));
            rc = -1;
        }
    }
    free(buf);
    free(g);
    return rc;
}

int bn_make_source(const char *path, size_t mib, int synthetic, char *what, size_t cap)
{
    char cmd[2 * BN_PATH];
    if (!synthetic && access(BN_LINUX_TAR, R_OK) == 0) {
        snprintf(cmd, sizeof(cmd), "xz -dc '%s' | head -c %zu > '%s'", BN_LINUX_TAR,
                 mib * BN_MIB, path);
        if (bn_sh(cmd) != 0)
            return bn_fail("cannot unpack the Linux source tar into", path);
        snprintf(what, cap, "the first %zu MiB of the Linux 6.1 source tar (`xz -dc %s | "
                 "head -c %zu`)", mib, BN_LINUX_TAR, mib * BN_MIB);
        return 0;
    }
    if (bn_corpus_write_generated(path, mib) != 0)
        return -1;
    snprintf(what, cap, "%zu MiB of generated log-like text (fixed seed)", mib);
    return 0;
}
