/* Fuzz target: the superblock parser (fs/sb.c).
 *
 * The input is the text of DIR/.fpgalz4fs. It is parsed as it is, then again with its
 * checksum line recomputed (everything up to its last line, or all of it, plus a correct
 * "checksum=" line), so that mutations reach the key=value parser behind the XXH32.
 * Invariants: a superblock that parses has a valid block size and a version this build
 * reads, and formats back to text that parses to the same values; the block-size parser
 * gives 0 or one of the four sizes; the clean mark's parser (sb_mark_parse) accepts only one
 * line of "clean T" or "dirty T". The same input is also the sizes file (fs/sizes.c), as it
 * is and with its checksum recomputed: what parses has the length its count says, imports,
 * and exports again into a file that parses with at most as many entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fmt.h"
#include "fuzz_util.h"
#include "sb.h"
#include "sizes.h"

static void fzs_check(const char *text, size_t len)
{
    sb_super sb;
    sb_error e = sb_parse(text, len, &sb);
    FZ_CHECK(e == SB_OK || e == SB_ERR_CORRUPT || e == SB_ERR_NEWER || e == SB_ERR_BLOCK_SIZE,
             "sb_parse gave %d", (int)e);
    if (e != SB_OK)
        return;
    FZ_CHECK(sb_block_size_valid(sb.block_size), "block size %u accepted", sb.block_size);
    FZ_CHECK(sb.format_version >= 1 && sb.format_version <= SB_FORMAT_VERSION,
             "version %u accepted", sb.format_version);
    char out[SB_MAX_TEXT];
    size_t n = sb_format(&sb, out, sizeof(out));
    FZ_CHECK(n > 0, "a parsed superblock does not format");
    sb_super again;
    FZ_CHECK(sb_parse(out, n, &again) == SB_OK, "formatted text does not parse");
    FZ_CHECK(again.format_version == sb.format_version && again.block_size == sb.block_size &&
             again.created == sb.created && memcmp(again.uuid, sb.uuid, 16) == 0,
             "format and parse do not round-trip");
}

/* The input with its last line replaced by a correct checksum line (one line only: kept,
 * with a newline added). */
static char *fzs_with_checksum(const char *text, size_t len, size_t *out_len)
{
    size_t end = len;
    while (end > 0 && text[end - 1] == '\n')
        end--;
    const char *nl = end ? memrchr(text, '\n', end) : NULL;
    size_t body = nl ? (size_t)(nl - text) + 1 : len;
    char *out = malloc(body + 32);
    FZ_CHECK(out != NULL, "malloc");
    memcpy(out, text, body);
    if (!nl && body)
        out[body++] = '\n';
    int tail = snprintf(out + body, 31, "checksum=%08x\n", (unsigned)XXH32(out, body, 0));
    *out_len = body + (size_t)tail;
    return out;
}

static void fzs_sizes(const uint8_t *data, size_t size)
{
    uint64_t n = 0, again = 0;
    sz_error e = sz_parse(data, size, &n);
    FZ_CHECK(e >= SZ_OK && e <= SZ_ERR_ENTRY && e != SZ_ERR_MISSING &&
                 e != SZ_ERR_NOT_REGULAR, "sz_parse gave %d", (int)e);
    if (e != SZ_OK)
        return;
    FZ_CHECK(size == SZ_HEAD + n * SZ_ENTRY + 8, "%zu bytes for %llu entries", size,
             (unsigned long long)n);
    sz_cache *c = sz_new(256);
    FZ_CHECK(c != NULL, "sz_new");
    FZ_CHECK(sz_import(c, data, size, 3, &again) == SZ_OK && again == n, "import");
    uint8_t *out = NULL;
    size_t len = 0;
    FZ_CHECK(sz_export(c, 3, &out, &len) == SZ_OK, "export");
    FZ_CHECK(sz_parse(out, len, &again) == SZ_OK && again <= n, "exported file does not parse");
    free(out);
    sz_free(c);
}

/* The sizes file with a correct checksum, so that mutations reach the entries. */
static void fzs_sizes_fixed(const uint8_t *data, size_t size)
{
    if (size < 8)
        return;
    uint8_t *copy = malloc(size);
    FZ_CHECK(copy != NULL, "malloc");
    memcpy(copy, data, size);
    fmt_put64(copy + size - 8, XXH64(copy, size - 8, 0));
    fzs_sizes(copy, size);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fzs_sizes(data, size);
    fzs_sizes_fixed(data, size);
    const char *text = (const char *)data;
    fzs_check(text, size);
    size_t n;
    char *fixed = fzs_with_checksum(text, size, &n);
    fzs_check(fixed, n);
    free(fixed);
    if (size < 64) {
        char word[64];
        memcpy(word, data, size);
        word[size] = '\0';
        uint32_t bs = sb_parse_block_size(word);
        FZ_CHECK(bs == 0 || sb_block_size_valid(bs), "block size parser gave %u", bs);
    }
    /* the clean mark's parser: what it accepts formats back to the same text */
    uint64_t ns = 0;
    int clean = -1;
    if (sb_mark_parse(text, size, &ns, &clean) == 0) {
        char again[64];
        int len = snprintf(again, sizeof(again), "%s %llu\n", clean ? "clean" : "dirty",
                           (unsigned long long)ns);
        FZ_CHECK(clean == 0 || clean == 1, "clean %d", clean);
        FZ_CHECK(len > 0 && (size_t)len <= size, "mark text grew: %zu -> %d", size, len);
    }
    return 0;
}
