/* Page records of format version 4 (docs/FORMAT.md 9.11): a small change of a block stored
 * behind the block's frame, in the padding of its own slot, so that a commit of a few pages
 * writes a few pages. Nothing here knows an open file: ff_rec.c decides when to write them
 * and folds them into frames again. */
#include "fmt2.h"

#include <errno.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define FMT2_REC_READ (64u << 10)           /* the first read of a chain, then doubled */

size_t fmt2_rec_encode(uint8_t *out, uint32_t prev, uint32_t group, uint32_t off,
                       const uint8_t *raw, uint32_t len, uint32_t *sum)
{
    int comp = LZ4_compress_default((const char *)raw, (char *)out + FMT2_REC_HEAD, (int)len,
                                    LZ4_compressBound((int)len));
    uint32_t word = comp > 0 && (uint32_t)comp < len ? (uint32_t)comp : len | FMT_RAW_BIT;
    if (word & FMT_RAW_BIT)
        memcpy(out + FMT2_REC_HEAD, raw, len);
    fmt_put32(out, FMT2_REC_MAGIC);
    fmt_put32(out + 4, prev);
    fmt_put32(out + 8, group & FMT2_REC_GROUP_MASK);
    fmt_put32(out + 12, off);
    fmt_put32(out + 16, len);
    fmt_put32(out + 20, word);
    size_t n = FMT2_REC_HEAD + fmt_word_size(word);
    *sum = XXH32(out, n, 0);
    fmt_put32(out + n, *sum);
    return n + 4;
}

/* The length of the record at b if it is the chain's next (prev), of a committed group and
 * whole in avail bytes of a block of blen bytes; 0 otherwise. */
static size_t fmt2_rec_whole(const uint8_t *b, size_t avail, uint32_t prev, uint32_t group,
                             uint32_t blen)
{
    if (avail < FMT2_REC_OVERHEAD || fmt_get32(b) != FMT2_REC_MAGIC || fmt_get32(b + 4) != prev)
        return 0;
    uint32_t g = fmt_get32(b + 8);
    if ((g & ~FMT2_REC_GROUP_MASK) || !fmt2_rec_group_ok(g, group))
        return 0;
    uint32_t off = fmt_get32(b + 12), len = fmt_get32(b + 16), word = fmt_get32(b + 20);
    uint32_t d = fmt_word_size(word);
    if (len == 0 || off >= blen || len > blen - off || d == 0 || d > len ||
        ((word & FMT_RAW_BIT) && d != len) || d > avail - FMT2_REC_OVERHEAD)
        return 0;
    size_t n = FMT2_REC_HEAD + d;
    return XXH32(b, n, 0) == fmt_get32(b + n) ? n + 4 : 0;
}

static fmt_error fmt2_rec_put(const uint8_t *b, uint8_t *dst)
{
    uint32_t off = fmt_get32(b + 12), len = fmt_get32(b + 16), word = fmt_get32(b + 20);
    const uint8_t *data = b + FMT2_REC_HEAD;
    if (word & FMT_RAW_BIT) {
        memcpy(dst + off, data, len);
        return FMT_OK;
    }
    int got = LZ4_decompress_safe((const char *)data, (char *)dst + off,
                                  (int)fmt_word_size(word), (int)len);
    return got == (int)len ? FMT_OK : FMT_ERR_CORRUPT;
}

fmt_error fmt2_rec_apply(const uint8_t *area, size_t avail, uint32_t bsum, uint32_t group,
                         uint8_t *dst, uint32_t blen, fmt2_rec_state *st)
{
    st->used = 0, st->chain = bsum, st->count = 0;
    for (;;) {
        size_t n = fmt2_rec_whole(area + st->used, avail - st->used, st->chain, group, blen);
        if (n == 0)
            return FMT_OK;
        if (dst && fmt2_rec_put(area + st->used, dst) != FMT_OK)
            return FMT_ERR_CORRUPT;
        st->chain = fmt_get32(area + st->used + n - 4);
        st->used += (uint32_t)n, st->count++;
    }
}

/* The payload's first have bytes are read; the chain is walked, reading more while its next
 * record may lie past them. */
static fmt_error fmt2_rec_walk(int fd, uint64_t at, uint8_t **bufp, size_t have, uint32_t bsum,
                               uint32_t group, uint8_t *dst, uint32_t blen, fmt2_rec_state *st)
{
    uint32_t room = st->room;
    for (;;) {
        fmt_error err = fmt2_rec_apply(*bufp, have, bsum, group, NULL, blen, st);
        if (err != FMT_OK || have == room || have - st->used >= FMT2_REC_OVERHEAD + blen)
            break;                     /* the chain ends inside what was read */
        size_t more = have * 2 < room ? have * 2 : room;
        uint8_t *b = realloc(*bufp, more);
        if (!b)
            return FMT_ERR_NOMEM;
        *bufp = b;
        ssize_t r = fmt_pread_upto(fd, b + have, more - have, at + have);
        if (r < 0)
            return FMT_ERR_IO;
        if ((size_t)r < more - have) { /* the file ends inside the padding: walk what is */
            have += (size_t)r, room = (uint32_t)have;
            continue;
        }
        have = more;
    }
    return dst ? fmt2_rec_apply(*bufp, st->used, bsum, group, dst, blen, st) : FMT_OK;
}

fmt_error fmt2_rec_load(int fd, uint64_t end, uint64_t lim, const uint8_t *probe,
                        size_t probe_len, uint32_t bsum, uint32_t group, uint8_t *dst,
                        uint32_t blen, fmt2_rec_state *st)
{
    uint8_t own[FMT2_REC_PROBE];
    *st = (fmt2_rec_state){0, 0, bsum, 0};
    if (!probe) {
        ssize_t r = fmt_pread_upto(fd, own, sizeof(own), end - FMT_FRAME_END_LEN);
        if (r < 0)
            return FMT_ERR_IO;
        probe = own, probe_len = (size_t)r;
    }
    const uint8_t *pad = probe + FMT_FRAME_END_LEN;
    if (probe_len < FMT_FRAME_END_LEN + 8 || fmt_get32(pad) != FMT_SKIP_PAD)
        return FMT_OK;                 /* no padding: the last slot */
    st->room = fmt_get32(pad + 4);
    if (st->room > blen + FMT2_SLOT_EXTRA)     /* no slot's padding is longer */
        st->room = blen + FMT2_SLOT_EXTRA;
    /* nor do records reach the next slot, whose frame may start at its page (9.3.1) */
    if (end + 8 + st->room > lim)
        st->room = lim > end + 8 ? (uint32_t)(lim - end - 8) : 0;
    if (probe_len < FMT2_REC_PROBE || fmt_get32(pad + 8) != FMT2_REC_MAGIC ||
        fmt_get32(pad + 12) != bsum)
        return FMT_OK;                 /* no record */
    size_t first = st->room < FMT2_REC_READ ? st->room : FMT2_REC_READ;
    uint8_t *buf = malloc(first ? first : 1);
    if (!buf)
        return FMT_ERR_NOMEM;
    ssize_t r = fmt_pread_upto(fd, buf, first, end + 8);
    fmt_error err = r < 0 ? FMT_ERR_IO : FMT_OK;
    if (err == FMT_OK && (size_t)r < first)
        st->room = (uint32_t)r, first = (size_t)r;
    if (err == FMT_OK)
        err = fmt2_rec_walk(fd, end + 8, &buf, first, bsum, group, dst, blen, st);
    free(buf);
    return err;
}

uint64_t fmt2_rec_tail(int fd, fmt2_geo g, uint64_t n, uint32_t len, uint64_t frame_end)
{
    /* the marker's version and flags; the frame's block checksum and the probe behind it in
     * one read, as the writer reads them */
    uint8_t m[12], h[4 + FMT2_REC_PROBE];
    const uint8_t *pad = h + 4 + FMT_FRAME_END_LEN;
    fmt2_rec_state st;
    if (n == 0 || fmt_pread_all(fd, m, sizeof(m), FMT_MARKER_FLAGS_OFF - 8) < 0 ||
        fmt_get32(m) < FMT_VERSION_4 || fmt_get32(m) > FMT_VERSION ||
        fmt_pread_all(fd, h, sizeof(h), frame_end - FMT2_FRAME_TRAIL) < 0 ||
        fmt_get32(pad) != FMT_SKIP_PAD ||
        frame_end + 8 + fmt_get32(pad + 4) != fmt2_slot_off(g, n) ||
        fmt2_rec_load(fd, frame_end, fmt2_slot_off(g, n), h + 4, FMT2_REC_PROBE, fmt_get32(h),
                      fmt2_rec_group_of(fmt_get32(m + 8)), NULL, len, &st) != FMT_OK ||
        st.used == 0)
        return frame_end;
    return fmt2_slot_off(g, n);
}
