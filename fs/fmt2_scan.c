/* The slot walk (docs/FORMAT.md 10.1): slots taken from block 0 while their frames parse,
 * for a file without a footer, the repair and fsck. */
#include "fmt2.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

static fmt_error fmt2_content_check(const uint8_t *frame, uint32_t len, uint32_t word,
                                    uint32_t flen)
{
    const uint8_t *data = frame + FMT_FRAME_HEADER_LEN + 4;
    uint32_t want = fmt_get32(frame + flen - 4), s = fmt_word_size(word);
    if (word & FMT_RAW_BIT)                     /* the block checksum hashed the content */
        return fmt_get32(data + s) == want ? FMT_OK : FMT_ERR_CHECKSUM;
    uint8_t *dst = malloc(len);
    if (!dst)
        return FMT_ERR_NOMEM;
    fmt_error err = fmt_block_decode(word, data, dst, len);
    if (err == FMT_OK && XXH32(dst, len, 0) != want)
        err = FMT_ERR_CHECKSUM;
    free(dst);
    return err;
}

/* Where in slot i's bytes (buf, want of them from the slot's start) its frame begins: 0, or
 * in version 7 the distance to the page boundary when the slot starts without a frame's
 * magic and one is there (9.3.1). */
static uint32_t fmt2_frame_skip(fmt2_geo g, uint64_t i, const uint8_t *buf, uint64_t want)
{
    uint64_t d = fmt2_slot_page(g, i) - fmt2_slot_off(g, i);
    if (d == 0 || want < 4 || fmt_get32(buf) == FMT_LZ4_MAGIC || d + 4 > want ||
        fmt_get32(buf + d) != FMT_LZ4_MAGIC)
        return 0;
    return (uint32_t)d;
}

fmt_error fmt2_scan_slot(int fd, uint64_t file_len, fmt2_geo g, uint64_t i, int verify,
                         uint8_t *buf, uint32_t *len, uint32_t *flen, int *padded)
{
    uint64_t at = fmt2_slot_off(g, i), want = fmt2_slot_len(g);
    if (at >= file_len)
        return FMT_ERR_CORRUPT;
    if (want > file_len - at)
        want = file_len - at;
    if (fmt_pread_all(fd, buf, want, at) < 0)
        return FMT_ERR_IO;
    uint32_t word, fl = 0, d = fmt2_frame_skip(g, i, buf, want);
    const uint8_t *fr = buf + d;
    fmt_error err = fmt2_frame_parse(fr, want - d, g.bs, verify, len, &word, &fl);
    if (err == FMT_OK && verify)
        err = fmt2_content_check(fr, *len, word, fl);
    if (err == FMT_ERR_CORRUPT && !d && buf[4] == FMT2_FLG_CHAIN)   /* version 5 (9.12) */
        err = fmt2_chain_parse(buf, want, g.bs, verify, len, &fl);
    fl = fl ? fl + d : 0;
    *flen = fl;
    /* the padding reaches the next slot's frame, at its start or (version 7) its page */
    uint64_t to = fl && fl + 8 <= want ? at + fl + 8 + fmt_get32(buf + fl + 4) : 0;
    *padded = to && fmt_get32(buf + fl) == FMT_SKIP_PAD &&
              (to == fmt2_slot_off(g, i + 1) || to == fmt2_slot_page(g, i + 1));
    return err;
}

uint32_t fmt2_scan_run(int fd, fmt2_geo g, uint64_t i, int verify, const uint8_t *buf,
                       uint64_t want)
{
    uint32_t m = fmt2_run_head_parse(buf, (size_t)want, g.bs);
    uint64_t grp = fmt2_run_group(g.bs);
    if (!m || i % grp + m > grp || !fmt2_run_tail_ok(fd, g, i, m, verify))
        return 0;
    return !verify || fmt2_run_data_zero(fd, g, i, m) ? m : 0;
}

/* Slot i (its bytes in buf), whose frame does not parse, as what a crash left of a chain
 * (9.12): its blocks that check are the last block, whose end the recovery puts back
 * (fmt2_chain_settle). */
static fmt_error fmt2_scan_chain(uint64_t file_len, fmt2_geo g, uint64_t i, const uint8_t *buf,
                                 fmt2_scan_result *out)
{
    uint64_t at = fmt2_slot_off(g, i), avail = file_len - at;
    uint8_t *dst = malloc(g.bs);
    fmt2_chain_info ci;
    if (!dst)
        return FMT_ERR_NOMEM;
    fmt_error err = fmt2_chain_prefix(buf, avail < fmt2_slot_len(g) ? avail : fmt2_slot_len(g),
                                      g.bs, dst, &ci);
    free(dst);
    if (err == FMT_OK)
        out->n_blocks = i + 1, out->size = i * (uint64_t)g.bs + ci.len,
        out->valid_end = at + FMT_FRAME_HEADER_LEN + ci.area + FMT_FRAME_END_LEN;
    return err;
}

/* A run never holds the last block: a walk that ends right after runs ends before them. */
fmt_error fmt2_scan(int fd, uint64_t file_len, fmt2_geo g, int verify, fmt2_scan_result *out)
{
    uint8_t *buf = malloc(fmt2_slot_len(g));
    if (!buf)
        return FMT_ERR_NOMEM;
    *out = (fmt2_scan_result){0, 0, FMT_MARKER_LEN, 0};
    fmt2_scan_result before_runs = *out;
    int after_run = 0;
    uint64_t bad = 0;
    for (uint64_t i = 0;; i++) {
        uint32_t len = 0, flen = 0, m = 0;
        int padded = 0;
        fmt_error err = fmt2_scan_slot(fd, file_len, g, i, verify, buf, &len, &flen, &padded);
        if (err == FMT_ERR_IO || err == FMT_ERR_NOMEM) {
            free(buf);
            return err;
        }
        if (err == FMT_ERR_CORRUPT && i * (uint64_t)g.bs < FMT2_MAX_SIZE)
            m = fmt2_scan_run(fd, g, i, verify, buf, fmt2_slot_len(g));
        if (m) {
            if (!after_run)
                before_runs = *out;
            after_run = 1;
            out->n_blocks = i + m, out->bad_blocks = bad, out->size = (i + m) * (uint64_t)g.bs;
            out->valid_end = fmt2_slot_off(g, i) + FMT2_FRAME_OVERHEAD + (uint64_t)g.bs * m;
            i += m - 1;
            continue;
        }
        if (err == FMT_ERR_CHECKSUM && padded && len == g.bs) {
            bad++;                         /* kept only if a good frame follows */
            continue;
        }
        /* a frame of 9.3 whose checksums fail is a torn write of it (step 4), not a link */
        if ((err == FMT_ERR_CORRUPT || (err == FMT_ERR_CHECKSUM && buf[4] == FMT2_FLG_CHAIN)) &&
            fmt2_slot_off(g, i) < file_len &&
            fmt2_scan_chain(file_len, g, i, buf, out) == FMT_OK) {
            out->bad_blocks = bad, after_run = 0;
            break;                         /* what a torn link left of a chain ends it */
        }
        if (err != FMT_OK || i * (uint64_t)g.bs + len > FMT2_MAX_SIZE)
            break;
        after_run = 0;
        out->n_blocks = i + 1, out->bad_blocks = bad;
        out->size = i * (uint64_t)g.bs + len;
        out->valid_end = fmt2_slot_off(g, i) + flen;
        if (len < g.bs || !padded)          /* a partial block, or no next slot, ends it */
            break;
    }
    if (after_run)
        *out = before_runs;
    free(buf);
    return FMT_OK;
}
