/* A version 2 file whose marker a power loss took (docs/FORMAT.md 11.4 step 0): the write
 * that made the file, its marker in it, never reached the disk, and some later ones did, one
 * perhaps torn at a sector boundary. What is left says what the file was: a footer at its
 * end, a whole frame in slot 0, the head of a frame, a hole run or a journal at a slot start,
 * a journal or footer near the end, whole or cut by it, the end of a frame or hole and the
 * padding header that reaches the next slot, or the end of a hole that is the last block. A
 * foreign file that begins with 59 zero bytes and holds one of these is taken for an own
 * file: only a version 2 writer makes them. */
#include "fmt2.h"

#include <stdlib.h>
#include <xxhash.h>

#define FMT2_LOST_HEAD 6u                    /* magic, FLG and BD of a slot's frame */

/* Whether a slot begins with h (avail bytes of it before the end of the file, torn_end: the
 * file ends at a sector boundary, where a torn write stops): a frame of block size bs, a hole
 * run (BD 4 MiB whatever bs, 9.5.1), or a journal (the first half of a footer pair's journal
 * area begins where the next slot would, 9.10). A slot begins at least 5 bytes before a
 * sector boundary (59 + k * 64 mod 512), so a torn write there keeps magic and FLG. */
static int fmt2_slot_head(const uint8_t *h, size_t avail, int torn_end, uint32_t bs)
{
    if (avail >= 4 && fmt_get32(h) == FMT_SKIP_JOURNAL)
        return 1;
    if (avail < 5 || fmt_get32(h) != FMT_LZ4_MAGIC || h[4] != 0x7C)
        return 0;
    if (avail == 5)
        return torn_end;
    return h[5] == (uint8_t)(fmt_bd_code(bs) << 4) || h[5] == 0x70;
}

/* Whether slot i of block size bs begins with a head fmt2_slot_head takes. */
static int fmt2_slot_says(int fd, uint64_t file_len, fmt2_geo g, uint64_t i)
{
    uint8_t h[FMT2_LOST_HEAD];
    uint64_t at = fmt2_slot_off(g, i);
    if (at + 4 > file_len || fmt2_frame_at(fd, g, i, &at) < 0)   /* version 7: or its page */
        return 0;
    size_t avail = file_len - at < sizeof(h) ? (size_t)(file_len - at) : sizeof(h);
    return fmt_pread_all(fd, h, avail, at) == 0 &&
           fmt2_slot_head(h, avail, file_len % 512 == 0, g.bs);
}

/* Whether b (n bytes, ending at the end of the file, file_len) holds at p the first part of
 * a journal or footer that a torn write cut: the write ran past the end, the file ends at a
 * sector boundary, and what is left of the head fits (9.6, 9.7). */
static int fmt2_torn_item(const uint8_t *b, size_t n, size_t p, uint64_t file_len)
{
    uint32_t magic = fmt_get32(b + p);
    uint64_t len = (uint64_t)fmt_get32(b + p + 4) + 8;
    if (file_len % 512 || p + len <= n)
        return 0;
    if (magic == FMT_SKIP_FOOTER2)
        return len == FMT2_FOOTER_LEN;
    if (magic != FMT_SKIP_JOURNAL || len < 28)
        return 0;
    if (p + 24 > n)                    /* seq, entry count and flags torn off too */
        return 1;
    return fmt_get32(b + p + 20) == 0 && 16 * (uint64_t)fmt_get32(b + p + 16) <= len - 28;
}

/* Whether the FMT2_HOLE_TAIL bytes at e end a raw frame or a hole (9.3, 9.5): block
 * checksum, EndMark 0, content checksum equal to the block checksum (*sum). */
static int fmt2_raw_end(const uint8_t *e, uint32_t *sum)
{
    *sum = fmt_get32(e);
    return fmt_get32(e + 4) == 0 && fmt_get32(e + 8) == *sum;
}

/* Whether b holds at p, at offset `at` of the file, a whole journal or footer (each
 * checksummed), the head of one cut by the end of the file, or a padding header that reaches
 * a slot boundary behind the end of a raw frame or a hole (9.3, 9.5: block checksum, EndMark,
 * content checksum, equal for raw data): what a commit writes at its tail, or the write
 * between two holes. */
static int fmt2_tail_says(const uint8_t *b, size_t n, size_t p, uint64_t at, uint64_t file_len,
                          fmt2_geo g)
{
    uint32_t magic = fmt_get32(b + p), sum;
    uint64_t len = (uint64_t)fmt_get32(b + p + 4) + 8;
    if (magic == FMT_SKIP_PAD) {
        uint64_t end = at + len;
        return p >= FMT2_HOLE_TAIL && end > FMT_MARKER_LEN &&
               (fmt2_slot_off(g, fmt2_slot_of(g, end)) == end ||
                fmt2_slot_page(g, fmt2_slot_of(g, end)) == end) &&
               fmt2_raw_end(b + p - FMT2_HOLE_TAIL, &sum) && sum != 0;
    }
    if ((magic != FMT_SKIP_JOURNAL && magic != FMT_SKIP_FOOTER2) || len < 16)
        return 0;
    return p + len > n ? fmt2_torn_item(b, n, p, file_len)
                       : fmt_get32(b + p + len - 4) == XXH32(b + p + 8, (size_t)len - 12, 0);
}

/* Whether the last two slots' worth of the file holds what fmt2_tail_says takes: the write
 * that set the file's length, kept by a power loss that lost the rest. */
static int fmt2_tail_item(int fd, uint64_t file_len, fmt2_geo g)
{
    uint64_t w = 2 * fmt2_slot_len(g), from = file_len > FMT_MARKER_LEN + w ? file_len - w
                                                                               : FMT_MARKER_LEN;
    if (file_len <= from + 8)
        return 0;
    size_t n = (size_t)(file_len - from);
    uint8_t *b = malloc(n);
    int found = 0;
    if (!b || fmt_pread_all(fd, b, n, from) < 0) {
        free(b);
        return 0;
    }
    for (size_t p = 0; !found && p + 8 <= n; p++)
        found = fmt2_tail_says(b, n, p, from + p, file_len, g);
    free(b);
    return found;
}

/* Whether the file ends with the end of a hole that is its last block (9.5: block checksum,
 * EndMark, content checksum, both the XXH32 of the hole's zeros, no padding after it): the
 * bytes between the last slot's 19-byte head and these 12 are the hole's length. */
static int fmt2_last_hole_end(int fd, uint64_t file_len, fmt2_geo g)
{
    uint8_t e[FMT2_HOLE_TAIL];
    if (file_len < fmt2_slot_off(g, 0) + FMT2_HOLE_HEAD + 1 + sizeof(e))
        return 0;
    uint64_t k = fmt2_slot_of(g, file_len - 1);
    uint64_t data = fmt2_slot_off(g, k) + FMT2_HOLE_HEAD, end = file_len - sizeof(e);
    if (end <= data || end - data > g.bs || fmt_pread_all(fd, e, sizeof(e), end) < 0)
        return 0;
    uint32_t sum;
    return fmt2_raw_end(e, &sum) && sum == fmt2_zero_sum((uint32_t)(end - data));
}

/* Whether a slot start among the first FMT2_LOST_MARKER_SLOTS, or among those of the last
 * two slots' worth of the file, begins with a head fmt2_slot_head takes. */
static int fmt2_slot_heads(int fd, uint64_t file_len, fmt2_geo g)
{
    uint64_t n = file_len > FMT_MARKER_LEN ? fmt2_slot_of(g, file_len) + 1 : 0;
    for (uint64_t i = 0; i < n && i < FMT2_LOST_MARKER_SLOTS; i++)
        if (fmt2_slot_says(fd, file_len, g, i))
            return 1;
    for (uint64_t i = n > 3 ? n - 3 : 0; i < n; i++)
        if (i >= FMT2_LOST_MARKER_SLOTS && fmt2_slot_says(fd, file_len, g, i))
            return 1;
    return 0;
}

/* Whether slot 0 of geometry g holds a whole frame (*padded: with the padding that reaches
 * slot 1 where g puts it). */
static int fmt2_slot0_whole(int fd, uint64_t file_len, fmt2_geo g, int *padded)
{
    uint8_t *buf = malloc(fmt2_slot_len(g));
    uint32_t len = 0, flen = 0;
    *padded = 0;
    int ok = buf && fmt2_scan_slot(fd, file_len, g, 0, 1, buf, &len, &flen, padded) == FMT_OK;
    free(buf);
    return ok;
}

/* How many of the slots after the first that fmt2_slot_heads looks at begin with a head
 * where g puts them. */
static int fmt2_spaced_heads(int fd, uint64_t file_len, fmt2_geo g)
{
    uint64_t n = file_len > FMT_MARKER_LEN ? fmt2_slot_of(g, file_len) + 1 : 0;
    int hits = 0;
    for (uint64_t i = 1; i < n; i++)
        if ((i < FMT2_LOST_MARKER_SLOTS || i + 3 >= n) && fmt2_slot_says(fd, file_len, g, i))
            hits++;
    return hits;
}

/* The version to read a file of block size bs as: from 1 MiB blocks on, version 6 spaces its
 * slots otherwise than versions 2 to 5 (fmt2_geo_of), and what is left tells which: heads of
 * slots after the first, and slot 0's padding, where only one spacing puts them. A file of
 * one slot reads alike either way (FMT_VERSION); a tie between both keeps the old spacing. */
static uint32_t fmt2_lost_version(int fd, uint64_t file_len, uint32_t bs)
{
    if (bs < FMT2_PAGE_MIN_BS)
        return FMT_VERSION;
    const uint32_t v[2] = {FMT_VERSION, FMT_VERSION_5};
    int hits[2];
    for (int k = 0; k < 2; k++) {
        fmt2_geo g = fmt2_geo_of(v[k], bs);
        int padded;
        hits[k] = fmt2_spaced_heads(fd, file_len, g) +
                  (fmt2_slot0_whole(fd, file_len, g, &padded) && padded);
    }
    return hits[1] && hits[1] >= hits[0] ? FMT_VERSION_5 : FMT_VERSION;
}

static int fmt2_footer_ends(int fd, uint64_t file_len, fmt2_geo g)
{
    fmt2_footer ft;
    return fmt2_footer_read(fd, file_len, g, &ft) == FMT_OK;
}

/* A footer, and the frame its last block names begins where g puts it, with g's block size
 * in its header (a frame of 9.3 or a chain, 9.12): a footer's bounds alone hold at more than
 * one block size (a file of 1 MiB blocks has a footer that reads as one of 64 KiB blocks). */
static int fmt2_footer_framed(int fd, uint64_t file_len, fmt2_geo g)
{
    fmt2_footer ft;
    uint8_t h[FMT2_LOST_HEAD];
    if (fmt2_footer_read(fd, file_len, g, &ft) != FMT_OK)
        return 0;
    if (ft.n_blocks == 0)
        return 1;
    uint64_t at = fmt2_slot_off(g, ft.n_blocks - 1);
    return at + sizeof(h) <= file_len && fmt2_frame_at(fd, g, ft.n_blocks - 1, &at) == 0 &&
           fmt_pread_all(fd, h, sizeof(h), at) == 0 &&
           fmt_get32(h) == FMT_LZ4_MAGIC && (h[4] == 0x7C || h[4] == FMT2_FLG_CHAIN) &&
           h[5] == (uint8_t)(fmt_bd_code(g.bs) << 4);
}

static int fmt2_slot0_frame(int fd, uint64_t file_len, fmt2_geo g)
{
    int padded;
    return fmt2_slot0_whole(fd, file_len, g, &padded);
}

/* What is left elsewhere says what the file was (for the store's block size only). */
static int fmt2_rest_says(int fd, uint64_t file_len, fmt2_geo g)
{
    return fmt2_slot_heads(fd, file_len, g) || fmt2_tail_item(fd, file_len, g) ||
           fmt2_last_hole_end(fd, file_len, g);
}

/* Whether test holds at the slot spacing the file shows, for block size bs (*version: the
 * version of that spacing). The spacing is told (fmt2_lost_version, which reads slots) only
 * once the test holds at one of the two: a foreign file that starts with zeros, opened or
 * looked at again and again, costs the tests alone. */
static int fmt2_lost_at(int fd, uint64_t file_len, uint32_t bs,
                        int (*test)(int, uint64_t, fmt2_geo), uint32_t *version)
{
    int at_new = test(fd, file_len, fmt2_geo_of(FMT_VERSION, bs));
    int at_old = bs >= FMT2_PAGE_MIN_BS && test(fd, file_len, fmt2_geo_of(FMT_VERSION_5, bs));
    if (!at_new && !at_old)
        return 0;
    *version = fmt2_lost_version(fd, file_len, bs);
    return *version == FMT_VERSION ? at_new : at_old;
}

uint32_t fmt2_lost_marker(int fd, const uint8_t *head, uint64_t file_len, uint32_t bs_hint,
                          uint32_t *version)
{
    for (size_t i = 0; i < FMT_MARKER_LEN; i++)
        if (head[i])
            return 0;
    /* bs_hint first, then the other block sizes, each once */
    uint32_t sizes[5] = {bs_hint}, n_sizes = bs_hint != 0;
    for (uint32_t bs = 64u << 10; bs <= 4u << 20; bs <<= 2)
        if (bs != bs_hint)
            sizes[n_sizes++] = bs;
    for (uint32_t k = 0; k < n_sizes; k++)
        if (fmt2_lost_at(fd, file_len, sizes[k], fmt2_footer_framed, version))
            return sizes[k];
    for (uint32_t k = 0; k < n_sizes; k++)    /* its last slot's write lost, or torn */
        if (fmt2_lost_at(fd, file_len, sizes[k], fmt2_footer_ends, version))
            return sizes[k];
    for (uint32_t k = 0; k < n_sizes; k++)
        if (fmt2_lost_at(fd, file_len, sizes[k], fmt2_slot0_frame, version))
            return sizes[k];
    /* slot 0 torn or lost too: what is left elsewhere, of the store's block size, says what
     * the file was (the walk then keeps the blocks before the first slot that is not whole:
     * none) */
    if (bs_hint && fmt2_lost_at(fd, file_len, bs_hint, fmt2_rest_says, version))
        return bs_hint;
    *version = 0;
    return 0;
}
