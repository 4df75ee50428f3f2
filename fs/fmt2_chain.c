/* The chained last frame of format version 5 (docs/FORMAT.md 9.12 and 11.8): the last
 * block of a file held as several linked LZ4 blocks in one frame, so that an append to it
 * adds a block behind the others instead of rewriting the whole frame. Encoding, decoding,
 * and what recovery does with a chain that a crash left without its end. */
#include "fmt2.h"

#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define FMT2_LZ4_WINDOW 65536u           /* how far back a linked block's matches reach */

void fmt2_chain_head(uint8_t out[FMT_FRAME_HEADER_LEN], uint32_t bs, uint32_t len)
{
    fmt_frame_header(out, bs, len, 1);
    out[4] = FMT2_FLG_CHAIN;
    out[FMT_FRAME_HEADER_LEN - 1] = (uint8_t)(XXH32(out + 4, FMT_FRAME_HEADER_LEN - 5, 0) >> 8);
}

size_t fmt2_chain_link(uint8_t *out, const uint8_t *added, uint32_t n, const uint8_t *comp,
                       uint32_t comp_len, uint32_t raw_sum)
{
    int raw = comp == NULL || comp_len >= n;
    uint32_t size = raw ? n : comp_len;
    fmt_put32(out, size | (raw ? FMT_RAW_BIT : 0));
    memcpy(out + 4, raw ? added : comp, size);
    fmt_put32(out + 4 + size, XXH32(out + 4, size, 0));
    fmt_put32(out + 8 + size, 0);
    fmt_put32(out + 12 + size, raw_sum);
    return FMT2_CHAIN_LINK_OVERHEAD + size;
}

/* Block k of a chain at b (its size word), decoded at dst + pos after the pos bytes before
 * it; the number of bytes it decoded to, or -1. */
static int64_t fmt2_chain_block(const uint8_t *b, uint32_t word, uint8_t *dst, uint32_t pos,
                                uint32_t cap)
{
    uint32_t s = fmt_word_size(word);
    if (word & FMT_RAW_BIT) {
        if (s > cap - pos)
            return -1;
        memcpy(dst + pos, b + 4, s);
        return s;
    }
    uint32_t dict = pos < FMT2_LZ4_WINDOW ? pos : FMT2_LZ4_WINDOW;
    int got = LZ4_decompress_safe_usingDict((const char *)b + 4, (char *)dst + pos, (int)s,
                                            (int)(cap - pos), (const char *)dst + pos - dict,
                                            (int)dict);
    return got > 0 ? got : -1;
}

fmt_error fmt2_chain_decode(const uint8_t *b, size_t avail, uint32_t bs, uint8_t *dst,
                            uint32_t cap, int strict, fmt2_chain_info *out)
{
    *out = (fmt2_chain_info){0, 0, 0};
    size_t at = 0;
    for (;;) {
        if (avail - at < 4)
            return strict ? FMT_ERR_CORRUPT : FMT_OK;
        uint32_t word = fmt_get32(b + at), s = fmt_word_size(word);
        if (word == 0)
            return FMT_OK;             /* the EndMark */
        int64_t got = -1;
        if (s > 0 && s <= bs && avail - at - 4 >= (size_t)s + 4 &&
            XXH32(b + at + 4, s, 0) == fmt_get32(b + at + 4 + s))
            got = fmt2_chain_block(b + at, word, dst, out->len, cap);
        if (got <= 0)
            return strict ? FMT_ERR_CORRUPT : FMT_OK;
        out->len += (uint32_t)got, out->blocks++;
        at += (size_t)s + FMT_BLOCK_OVERHEAD;
        out->area = (uint32_t)at;
    }
}

/* The header of a chain (FLG 0x5C, or 0x7C where a power loss kept the old header of the
 * frame that the first link turned into a chain): magic, FLG, block size. The content size
 * and the header checksum are not looked at: they are the part a torn header write leaves
 * wrong, and the chain's blocks say what they hold. */
static int fmt2_chain_head_ok(const uint8_t *h, size_t avail, uint32_t bs)
{
    return avail >= FMT2_FRAME_LEAD && fmt_get32(h) == FMT_LZ4_MAGIC &&
           (h[4] == 0x7C || h[4] == FMT2_FLG_CHAIN) && h[5] == (uint8_t)(fmt_bd_code(bs) << 4);
}

fmt_error fmt2_chain_parse(const uint8_t *buf, size_t avail, uint32_t bs, int verify,
                           uint32_t *len, uint32_t *frame_len)
{
    uint8_t head[FMT_FRAME_HEADER_LEN];
    if (avail < FMT2_FRAME_LEAD || fmt_get32(buf) != FMT_LZ4_MAGIC || buf[4] != FMT2_FLG_CHAIN)
        return FMT_ERR_CORRUPT;
    uint64_t csize = fmt_get64(buf + 6);
    if (csize == 0 || csize >= bs)
        return FMT_ERR_CORRUPT;
    fmt2_chain_head(head, bs, (uint32_t)csize);
    if (memcmp(head, buf, FMT_FRAME_HEADER_LEN) != 0)
        return FMT_ERR_CORRUPT;
    /* the structure: size words, each block within the bytes, the EndMark */
    size_t at = FMT_FRAME_HEADER_LEN;
    uint32_t blocks = 0;
    for (;;) {
        if (avail - at < 4)
            return FMT_ERR_CORRUPT;
        uint32_t word = fmt_get32(buf + at), s = fmt_word_size(word);
        if (word == 0)
            break;
        if (s == 0 || s > bs || avail - at - 4 < (size_t)s + 4)
            return FMT_ERR_CORRUPT;
        at += (size_t)s + FMT_BLOCK_OVERHEAD, blocks++;
    }
    if (blocks == 0 || avail - at < FMT_FRAME_END_LEN)
        return FMT_ERR_CORRUPT;
    *len = (uint32_t)csize, *frame_len = (uint32_t)(at + FMT_FRAME_END_LEN);
    if (!verify)
        return FMT_OK;
    uint8_t *dst = malloc(bs);
    if (!dst)
        return FMT_ERR_NOMEM;
    fmt2_chain_info ci;
    fmt_error err = fmt2_chain_decode(buf + FMT_FRAME_HEADER_LEN, avail - FMT_FRAME_HEADER_LEN,
                                      bs, dst, bs, 1, &ci);
    if (err == FMT_OK && (ci.len != csize || XXH32(dst, ci.len, 0) != fmt_get32(buf + at + 4)))
        err = FMT_ERR_CHECKSUM;
    free(dst);
    return err;
}

/* Whether the frame of 9.3 in buf, whose block decoded to dst[0, len) and ends at `end`, is
 * whole: its header's content size, EndMark and content checksum. */
static int fmt2_frame_whole(const uint8_t *buf, size_t avail, uint32_t bs, const uint8_t *dst,
                            uint32_t len, size_t end)
{
    uint32_t fbs;
    int has_csize, bsum, csum;
    uint64_t csize;
    return fmt_frame_header_parse(buf, avail, &fbs, &has_csize, &csize, &bsum, &csum) ==
               FMT_FRAME_HEADER_LEN &&
           fbs == bs && csize == len && avail >= end + FMT_FRAME_END_LEN &&
           fmt_get32(buf + end) == 0 && fmt_get32(buf + end + 4) == XXH32(dst, len, 0);
}

fmt_error fmt2_chain_prefix(const uint8_t *buf, size_t avail, uint32_t bs, uint8_t *dst,
                            fmt2_chain_info *out)
{
    *out = (fmt2_chain_info){0, 0, 0};
    if (!fmt2_chain_head_ok(buf, avail, bs))
        return FMT_ERR_CORRUPT;
    fmt_error err = fmt2_chain_decode(buf + FMT_FRAME_HEADER_LEN, avail - FMT_FRAME_HEADER_LEN,
                                      bs, dst, bs - 1, 0, out);
    if (err != FMT_OK || out->blocks == 0)
        return err == FMT_OK ? FMT_ERR_CORRUPT : err;
    /* a frame of 9.3 (FLG 0x7C) alone counts with a link written behind its block, or whole
     * (the state before the links a crash lost: its own end and content checksum hold);
     * else it is a frame torn at its end, which is no chain (the walk drops it, 10.1) */
    size_t next = FMT_FRAME_HEADER_LEN + (size_t)out->area;
    if (buf[4] != 0x7C || out->blocks > 1 || (avail >= next + 4 && fmt_get32(buf + next) != 0))
        return FMT_OK;
    return fmt2_frame_whole(buf, avail, bs, dst, out->len, next) ? FMT_OK : FMT_ERR_CORRUPT;
}

/* Slot i's frame as the footer ft says it: the header and the word after the first block.
 * 1 when it is an ordinary frame (FLG 0x7C) that ends where it must, whose content size is
 * the footer's, or when it is no frame at all (a hole run, damage: not this file's concern);
 * 0 when it is a chain, or a frame whose first block a link followed. */
static int fmt2_last_plain(int fd, uint64_t file_len, uint32_t bs, const fmt2_footer *ft,
                           uint64_t at)
{
    uint8_t h[FMT2_FRAME_LEAD], end[4];
    uint32_t fbs;
    int has_csize, bsum, csum;
    uint64_t csize;
    if (at + FMT2_FRAME_LEAD > file_len || fmt_pread_all(fd, h, sizeof(h), at) < 0 ||
        fmt_get32(h) != FMT_LZ4_MAGIC)
        return 1;
    if (h[4] == FMT2_FLG_CHAIN)
        return 0;
    if (fmt_frame_header_parse(h, sizeof(h), &fbs, &has_csize, &csize, &bsum, &csum) !=
        FMT_FRAME_HEADER_LEN)
        return 1;
    uint64_t want = ft->size - (ft->n_blocks - 1) * (uint64_t)bs;
    uint64_t s = fmt_word_size(fmt_get32(h + FMT_FRAME_HEADER_LEN));
    uint64_t e = at + FMT2_FRAME_LEAD + s + 4;
    if (s == 0 || s > bs || e + 4 > file_len)
        return 1;
    if (fmt_pread_all(fd, end, sizeof(end), e) < 0)
        return 1;
    return csize == want && fmt_get32(end) == 0;
}

/* Writes the chain's header, end and a footer for it, and cuts the file there. */
static fmt_error fmt2_chain_end(int fd, uint64_t at, uint32_t bs, const uint8_t *dst,
                                const fmt2_chain_info *ci, fmt2_footer *ft)
{
    uint8_t head[FMT_FRAME_HEADER_LEN], end[FMT_FRAME_END_LEN];
    fmt2_chain_head(head, bs, ci->len);
    fmt_put32(end, 0);
    fmt_put32(end + 4, XXH32(dst, ci->len, 0));
    uint64_t e = at + FMT_FRAME_HEADER_LEN + ci->area;
    if (fmt_pwrite_all(fd, head, sizeof(head), at) < 0 ||
        fmt_pwrite_all(fd, end, sizeof(end), e) < 0)
        return FMT_ERR_IO;
    ft->tail = e + FMT_FRAME_END_LEN, ft->j_off = ft->j_len = 0, ft->seq++, ft->paired = 0;
    return fmt2_footer_write(fd, ft->tail, ft) < 0 ? FMT_ERR_IO : FMT_OK;
}

int fmt2_chain_suspect(int fd, uint64_t file_len, fmt2_geo g, const fmt2_footer *ft)
{
    return ft->n_blocks && !ft->j_len && !ft->paired &&
           !fmt2_last_plain(fd, file_len, g.bs, ft, fmt2_slot_off(g, ft->n_blocks - 1));
}

fmt_error fmt2_chain_settle(int fd, fmt2_geo g, int write, int crashed, fmt2_recovery *r)
{
    fmt2_footer ft = r->ft;
    r->chain_area = 0;
    if (ft.n_blocks == 0)
        return FMT_OK;
    uint64_t i = ft.n_blocks - 1, at = fmt2_slot_off(g, i);
    if (fmt2_last_plain(fd, r->file_len, g.bs, &ft, at))
        return FMT_OK;
    uint64_t avail = r->file_len - at < fmt2_slot_len(g) ? r->file_len - at : fmt2_slot_len(g);
    uint8_t *buf = malloc(avail), *dst = malloc(g.bs);
    fmt_error err = buf && dst ? FMT_OK : FMT_ERR_NOMEM;
    if (err == FMT_OK && fmt_pread_all(fd, buf, avail, at) < 0)
        err = FMT_ERR_IO;
    uint32_t len = 0, flen = 0;
    uint64_t want = ft.size - i * (uint64_t)g.bs;
    fmt2_chain_info ci = {0, 0, 0};
    /* whole, it may be padded to a later tail: the footer pair, or a journal, follows */
    if (err == FMT_OK && fmt2_chain_parse(buf, avail, g.bs, 1, &len, &flen) == FMT_OK &&
        len == want && at + flen <= ft.tail) {
        r->chain_area = flen - FMT2_FRAME_OVERHEAD + FMT_BLOCK_OVERHEAD;
        /* padded to a later tail (a pair link, FORMAT.md 11.8): the padding that the
         * link's write put behind it, which a power loss may have torn off, lz4 -d needs */
        if (crashed || r->torn)
            r->chain_padded = fmt2_pad_mend(fd, at + flen, ft.tail, 1, write, &err);
    } else if (err == FMT_OK && (crashed || r->torn) &&
               fmt2_chain_prefix(buf, avail, g.bs, dst, &ci) == FMT_OK) {
        /* a link or the end a crash left torn: the blocks that check are the block */
        ft.size = i * (uint64_t)g.bs + ci.len;
        ft.fresh = ft.fresh < ft.n_blocks ? ft.fresh : ft.n_blocks;
        r->chain_area = ci.area, r->chain_fixed = 1;
        /* a journal or pair the footer names goes with the footer: its slots first */
        if (write && (ft.j_len || r->paired) && fdatasync(fd) < 0)
            err = FMT_ERR_IO;
        if (err == FMT_OK && write && (err = fmt2_chain_end(fd, at, g.bs, dst, &ci, &ft)) == FMT_OK)
            r->file_len = ft.tail + FMT2_FOOTER_LEN, r->settled = 1, r->paired = 0;
        else if (!write)
            ft.tail = at + FMT_FRAME_HEADER_LEN + ci.area + FMT_FRAME_END_LEN;
        r->ft = ft;
    }
    free(buf);
    free(dst);
    return err;
}
