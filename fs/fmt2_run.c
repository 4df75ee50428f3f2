/* Hole runs of format version 3 (docs/FORMAT.md 9.5.1): whole-block holes that follow one
 * another are stored as one raw frame of up to a group's worth of zeros, so that a sparse
 * file costs about one page per group instead of one per block. */
#include "fmt2.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define FMT2_ZSUM_SPAN 0xA59010B8u          /* XXH32 of FMT2_RUN_SPAN zero bytes (9.5) */
#define FMT2_RUN_TAIL (FMT2_HOLE_TAIL + 8u) /* checksums, EndMark and the padding header */

uint32_t fmt2_run_zero_sum(uint32_t bs, uint32_t m)
{
    uint64_t len = (uint64_t)bs * m;
    return len == FMT2_RUN_SPAN ? FMT2_ZSUM_SPAN : fmt2_zero_sum((uint32_t)len);
}

void fmt2_run_head(uint8_t out[FMT2_HOLE_HEAD], uint32_t bs, uint32_t m)
{
    uint32_t len = bs * m;
    fmt_frame_header(out, FMT2_RUN_SPAN, len, 1);
    fmt_put32(out + FMT_FRAME_HEADER_LEN, len | FMT_RAW_BIT);
}

uint32_t fmt2_run_head_parse(const uint8_t *h, size_t avail, uint32_t bs)
{
    uint32_t fbs;
    int has_csize, bsum, csum;
    uint64_t csize;
    uint64_t g = fmt2_run_group(bs);
    if (g < 2 || avail < FMT2_HOLE_HEAD ||
        fmt_frame_header_parse(h, avail, &fbs, &has_csize, &csize, &bsum, &csum) !=
            FMT_FRAME_HEADER_LEN ||
        fbs != FMT2_RUN_SPAN || !has_csize || !bsum || !csum || csize % bs || csize / bs < 2 ||
        csize / bs > g)
        return 0;
    uint32_t m = (uint32_t)(csize / bs);
    return fmt_get32(h + FMT_FRAME_HEADER_LEN) == ((uint32_t)csize | FMT_RAW_BIT) ? m : 0;
}

/* Where the run at block a of m blocks ends its frame (its padding header follows). */
static uint64_t fmt2_run_frame_end(fmt2_geo g, uint64_t a, uint32_t m)
{
    return fmt2_slot_off(g, a) + FMT2_FRAME_OVERHEAD + (uint64_t)g.bs * m;
}

int fmt2_run_tail_ok(int fd, fmt2_geo g, uint64_t a, uint32_t m, int verify)
{
    uint8_t t[FMT2_RUN_TAIL];
    uint64_t fend = fmt2_run_frame_end(g, a, m), pad = fmt2_slot_off(g, a + m) - fend;
    uint64_t paged = fmt2_slot_page(g, a + m) - fend;   /* version 7: to the next frame */
    if (fmt_pread_all(fd, t, sizeof(t), fend - FMT2_HOLE_TAIL) < 0)
        return 0;
    uint32_t sum = fmt_get32(t);
    if (fmt_get32(t + 8) != sum || fmt_get32(t + 4) != 0 || fmt_get32(t + 12) != FMT_SKIP_PAD ||
        (fmt_get32(t + 16) != pad - 8 && fmt_get32(t + 16) != paged - 8))
        return 0;
    return !verify || sum == fmt2_run_zero_sum(g.bs, m);
}

int fmt2_reads_zero(int fd, uint64_t lo, uint64_t hi)
{
    static const uint8_t zeros[4096];
    uint8_t buf[4096];
    while (lo < hi) {
        off_t d = lseek(fd, (off_t)lo, SEEK_DATA);
        if ((d < 0 && errno == ENXIO) || (d >= 0 && (uint64_t)d >= hi))
            return 1;                  /* a hole to the end, or beyond the range */
        if (d < 0)                     /* SEEK_DATA unknown here: read everything */
            d = (off_t)lo;
        uint64_t at = (uint64_t)d, n = hi - at < sizeof(buf) ? hi - at : sizeof(buf);
        if (fmt_pread_all(fd, buf, (size_t)n, at) < 0 || memcmp(buf, zeros, (size_t)n))
            return 0;
        lo = at + n;
    }
    return 1;
}

int fmt2_run_data_zero(int fd, fmt2_geo g, uint64_t a, uint32_t m)
{
    uint64_t lo = fmt2_slot_off(g, a) + FMT2_HOLE_HEAD;
    return fmt2_reads_zero(fd, lo, lo + (uint64_t)g.bs * m);
}

/* The end of the run at a of m blocks: block checksum, EndMark, content checksum, padding
 * header (FMT2_RUN_TAIL bytes). */
static void fmt2_run_tail(uint8_t *t, fmt2_geo g, uint64_t a, uint32_t m, uint64_t to)
{
    uint32_t sum = fmt2_run_zero_sum(g.bs, m);
    fmt_put32(t, sum);
    fmt_put32(t + 4, 0);
    fmt_put32(t + 8, sum);
    fmt2_pad_header(t + FMT2_HOLE_TAIL, to - fmt2_run_frame_end(g, a, m));
}

int fmt2_write_run_end(int fd, fmt2_geo g, uint64_t a, uint32_t m, uint64_t to)
{
    uint8_t t[FMT2_RUN_TAIL];
    fmt2_run_tail(t, g, a, m, to);
    return fmt_pwrite_all(fd, t, sizeof(t), fmt2_run_frame_end(g, a, m) - FMT2_HOLE_TAIL);
}

int fmt2_write_run_pair(int fd, fmt2_geo g, uint64_t a, uint32_t m, uint32_t m_next)
{
    /* from a's end to the head of the run at a + m: 64 * m bytes, 4 KiB for a whole group;
     * where slots lie on pages (version 6), a page each: two writes, the padding left out */
    uint8_t buf[64 * 64];
    uint64_t at = fmt2_run_frame_end(g, a, m) - FMT2_HOLE_TAIL;
    size_t len = (size_t)(fmt2_slot_off(g, a + m) + FMT2_HOLE_HEAD - at);
    if (len > sizeof(buf)) {
        fmt2_run_head(buf, g.bs, m_next);
        int rc = fmt2_write_run_end(fd, g, a, m, fmt2_slot_off(g, a + m));
        return rc < 0 ? rc : fmt_pwrite_all(fd, buf, FMT2_HOLE_HEAD, fmt2_slot_off(g, a + m));
    }
    memset(buf, 0, len);
    fmt2_run_tail(buf, g, a, m, fmt2_slot_off(g, a + m));
    fmt2_run_head(buf + len - FMT2_HOLE_HEAD, g.bs, m_next);
    return fmt_pwrite_all(fd, buf, len, at);
}

int fmt2_slot_hole(int fd, fmt2_geo g, uint64_t i, uint32_t len, uint32_t zsum, uint64_t *a,
                   uint32_t *m)
{
    uint8_t h[FMT2_HOLE_HEAD], t[4];
    uint64_t at = fmt2_slot_off(g, i);
    if (fmt_pread_all(fd, h, sizeof(h), at) < 0)
        return -EIO;
    uint32_t word = fmt_get32(h + FMT_FRAME_HEADER_LEN);
    if (fmt_get32(h) == 0 || fmt2_run_head_parse(h, sizeof(h), g.bs)) {
        fmt_error err = fmt2_run_find(fd, g, i, a, m);
        return err == FMT_OK ? 1 : err == FMT_ERR_IO ? -EIO : 0;
    }
    /* a single hole: raw, its length, the checksum of zeros, and data that read as zeros
     * (its pages are holes of the backing file: nothing is read) */
    if (!(word & FMT_RAW_BIT) || fmt_word_size(word) != len ||
        fmt_pread_all(fd, t, sizeof(t), at + FMT2_HOLE_HEAD + len) < 0 || fmt_get32(t) != zsum)
        return 0;
    *a = i, *m = 1;
    return fmt2_reads_zero(fd, at + FMT2_HOLE_HEAD, at + FMT2_HOLE_HEAD + len);
}

/* Whether the head h, read from slot j, begins a run that holds block i: *m its length.
 * -1: a read failed. */
static int fmt2_run_holds(int fd, fmt2_geo g, const uint8_t *h, uint64_t j, uint64_t i,
                          uint32_t *m)
{
    *m = fmt_get32(h) == FMT_LZ4_MAGIC ? fmt2_run_head_parse(h, FMT2_HOLE_HEAD, g.bs) : 0;
    if (!*m || j + *m <= i)
        return 0;
    return fmt2_run_tail_ok(fd, g, j, *m, 0);
}

fmt_error fmt2_run_find(int fd, fmt2_geo g, uint64_t i, uint64_t *a, uint32_t *m)
{
    uint64_t grp = fmt2_run_group(g.bs);
    if (grp < 2)
        return FMT_ERR_CORRUPT;
    /* the group's first slot is the usual head; else look back from i, one slot at a time,
     * to the first slot that begins with something: only that one can be the head (the
     * slots inside a run lie in its data, which are zeros) */
    uint64_t first = i / grp * grp;
    uint8_t h[FMT2_HOLE_HEAD];
    for (uint64_t k = 0, j = first; k == 0 || j > first; k++, j = i + 1 - k) {
        if (fmt_pread_all(fd, h, sizeof(h), fmt2_slot_off(g, j)) < 0)
            return FMT_ERR_IO;
        uint64_t p = fmt2_slot_page(g, j);
        if (k > 0 && fmt_get32(h) == 0 && (p == fmt2_slot_off(g, j) || fmt2_lz4_at(fd, p) == 0))
            continue;                  /* zeros, and no frame at its page either */
        int r = fmt2_run_holds(fd, g, h, j, i, m);
        if (r != 0 || k > 0) {
            *a = j;
            return r > 0 ? FMT_OK : r < 0 ? FMT_ERR_IO : FMT_ERR_CORRUPT;
        }
    }
    return FMT_ERR_CORRUPT;
}
