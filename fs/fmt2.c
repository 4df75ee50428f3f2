/* Frames, holes and slots of format version 2 and later (docs/FORMAT.md 9.3-9.5), and the
 * marker of such a file. */
#include "fmt2.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#define XXH_STATIC_LINKING_ONLY        /* XXH32_state_t on the stack */
#include <xxhash.h>

#define FMT2_ZERO_CHUNK 65536u

static const uint8_t fmt2_zeros[FMT2_ZERO_CHUNK];

uint32_t fmt2_zero_sum(uint32_t len)
{
    XXH32_state_t *st = XXH32_createState();
    if (!st)
        return 0;
    XXH32_reset(st, 0);
    for (uint32_t done = 0; done < len;) {
        uint32_t n = len - done < FMT2_ZERO_CHUNK ? len - done : FMT2_ZERO_CHUNK;
        XXH32_update(st, fmt2_zeros, n);
        done += n;
    }
    uint32_t sum = XXH32_digest(st);
    XXH32_freeState(st);
    return sum;
}

/* A frame's header and size word: the FMT2_FRAME_LEAD bytes before its block. */
static void fmt2_frame_lead(uint8_t *out, uint32_t bs, uint32_t len, uint32_t word)
{
    fmt_frame_header(out, bs, len, 1);
    fmt_put32(out + FMT_FRAME_HEADER_LEN, word);
}

/* Block checksum, EndMark, content checksum: the FMT2_FRAME_TRAIL bytes after it. */
static void fmt2_frame_trail(uint8_t *out, uint32_t block_sum, uint32_t raw_sum)
{
    fmt_put32(out, block_sum);
    fmt_put32(out + 4, 0);
    fmt_put32(out + 8, raw_sum);
}

size_t fmt2_frame_encode_sums(uint8_t *out, uint32_t bs, const uint8_t *raw, uint32_t len,
                              const uint8_t *comp, uint32_t comp_len, uint32_t comp_sum,
                              uint32_t raw_sum)
{
    int stored_raw = comp_len == 0 || comp_len >= len;
    uint32_t size = stored_raw ? len : comp_len;
    fmt2_frame_lead(out, bs, len, size | (stored_raw ? FMT_RAW_BIT : 0));
    memcpy(out + FMT2_FRAME_LEAD, stored_raw ? raw : comp, size);
    fmt2_frame_trail(out + FMT2_FRAME_LEAD + size, stored_raw ? raw_sum : comp_sum, raw_sum);
    return FMT2_FRAME_LEAD + size + FMT2_FRAME_TRAIL;
}

uint8_t *fmt2_frame_wrap(uint8_t *comp, uint32_t bs, uint32_t len, uint32_t comp_len,
                         uint32_t comp_sum, uint32_t raw_sum)
{
    fmt2_frame_lead(comp - FMT2_FRAME_LEAD, bs, len, comp_len);
    fmt2_frame_trail(comp + comp_len, comp_sum, raw_sum);
    return comp - FMT2_FRAME_LEAD;
}

size_t fmt2_frame_encode(uint8_t *out, uint32_t bs, const uint8_t *raw, uint32_t len,
                         const uint8_t *comp, uint32_t comp_len)
{
    uint32_t raw_sum = XXH32(raw, len, 0);
    int stored_raw = comp_len == 0 || comp_len >= len;
    return fmt2_frame_encode_sums(out, bs, raw, len, comp, comp_len,
                                  stored_raw ? raw_sum : XXH32(comp, comp_len, 0), raw_sum);
}

fmt_error fmt2_frame_parse(const uint8_t *buf, size_t avail, uint32_t bs, int verify,
                           uint32_t *len, uint32_t *word, uint32_t *frame_len)
{
    uint32_t fbs;
    int has_csize, bsum, csum;
    uint64_t csize;
    size_t h = fmt_frame_header_parse(buf, avail, &fbs, &has_csize, &csize, &bsum, &csum);
    if (h != FMT_FRAME_HEADER_LEN || fbs != bs || !has_csize || !bsum || !csum || csize == 0 ||
        csize > bs || avail < h + 4)
        return FMT_ERR_CORRUPT;
    uint32_t w = fmt_get32(buf + h), s = fmt_word_size(w);
    if (s == 0 || s > bs || ((w & FMT_RAW_BIT) && s != csize))
        return FMT_ERR_CORRUPT;
    uint64_t end = h + fmt_block_len(w);
    if (avail < end + FMT_FRAME_END_LEN || fmt_get32(buf + end) != 0)
        return FMT_ERR_CORRUPT;
    *len = (uint32_t)csize, *word = w, *frame_len = (uint32_t)(end + FMT_FRAME_END_LEN);
    if (verify && XXH32(buf + h + 4, s, 0) != fmt_get32(buf + h + 4 + s))
        return FMT_ERR_CHECKSUM;
    return FMT_OK;
}

int fmt2_zero(int fd, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
        return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return -errno;
    for (uint64_t done = 0; done < len;) {       /* a backing filesystem that cannot punch */
        uint64_t n = len - done < FMT2_ZERO_CHUNK ? len - done : FMT2_ZERO_CHUNK;
        int rc = fmt_pwrite_all(fd, fmt2_zeros, n, off + done);
        if (rc < 0)
            return rc;
        done += n;
    }
    return 0;
}

void fmt2_hole_head(uint8_t *out, uint32_t bs, uint32_t len)
{
    fmt_frame_header(out, bs, len, 1);
    fmt_put32(out + FMT_FRAME_HEADER_LEN, len | FMT_RAW_BIT);
}

void fmt2_hole_tail(uint8_t *out, uint32_t zsum)
{
    fmt_put32(out, zsum);
    fmt_put32(out + 4, 0);
    fmt_put32(out + 8, zsum);
}

/* A hole is a raw block whose data are zeros that were never written: its head and tail are
 * the only bytes on disk. */
static int fmt2_write_hole(int fd, uint32_t bs, uint64_t at, uint32_t len, uint32_t zsum,
                           uint8_t *tail)
{
    uint8_t head[FMT2_HOLE_HEAD];
    fmt2_hole_head(head, bs, len);
    fmt2_hole_tail(tail, zsum);
    int rc = fmt_pwrite_all(fd, head, sizeof(head), at);
    return rc < 0 ? rc : fmt2_zero(fd, at + FMT2_HOLE_HEAD, len);
}

/* Version 7, a frame going on its slot's page: the slot's start must not hold an older
 * frame's magic, which readers would take first (9.3.1). Zeroed only when it does: a punch
 * of part of a page costs a journal transaction of ext4 even where it changes nothing. */
static int fmt2_clear_start(int fd, uint64_t s, uint64_t len)
{
    int rc = fmt2_lz4_at(fd, s);
    return rc == 1 ? fmt2_zero(fd, s, len) : rc;
}

/* The frame's last bytes and the padding header go out in one write; the padding's payload
 * is given back to the backing filesystem, up to holes_from when that is not 0 (the pages
 * from there on are holes already). */
static int fmt2_put_slot(int fd, fmt2_geo g, uint64_t i, const uint8_t *frame,
                         uint32_t frame_len, uint32_t len, uint32_t zsum, uint64_t end,
                         const uint8_t *marker, uint64_t holes_from, const uint8_t *footer)
{
    uint64_t s = fmt2_slot_off(g, i), at = frame ? fmt2_frame_place(g, i, len, frame_len) : s;
    uint8_t tail[FMT2_HOLE_TAIL + 8 + FMT2_KILL_LEN];
    size_t tail_len = 0;
    int rc = at != s ? fmt2_clear_start(fd, s, at - s) : 0;
    if (!frame) {
        rc = fmt2_write_hole(fd, g.bs, at, len, zsum, tail);
        frame_len = len + FMT2_FRAME_OVERHEAD, tail_len = FMT2_HOLE_TAIL;
    }
    uint64_t fend = at + frame_len;
    if (rc == 0 && end > fend) {
        fmt2_pad_header(tail + tail_len, end - fend);
        tail_len += 8;
    }
    if (rc == 0 && end >= fend + 8 + FMT2_KILL_LEN) {
        memset(tail + tail_len, 0, FMT2_KILL_LEN);
        tail_len += FMT2_KILL_LEN;
    }
    int with_footer = footer && frame && end == fend;
    if (rc == 0 && frame) {            /* marker, frame and padding header: one write */
        struct iovec v[4];
        int nv = 0;
        if (marker && i == 0)
            v[nv++] = (struct iovec){(void *)marker, FMT_MARKER_LEN};
        v[nv++] = (struct iovec){(void *)frame, frame_len};
        if (tail_len)
            v[nv++] = (struct iovec){tail, tail_len};
        if (with_footer)
            v[nv++] = (struct iovec){(void *)footer, FMT2_FOOTER_LEN};
        rc = fmt_pwritev_all(fd, v, nv, at - (marker && i == 0 ? FMT_MARKER_LEN : 0));
    } else if (rc == 0 && tail_len) {
        rc = fmt_pwrite_all(fd, tail, tail_len, fend - FMT2_HOLE_TAIL);
    }
    uint64_t stop = holes_from && holes_from < end ? holes_from : end;
    if (rc == 0 && stop > fend + 8)
        fmt_punch(fd, fend + 8, stop - fend - 8);
    if (rc == 0 && footer && !with_footer)
        rc = fmt_pwrite_all(fd, footer, FMT2_FOOTER_LEN, end);
    return rc;
}

int fmt2_lz4_at(int fd, uint64_t off)
{
    uint8_t h[4];
    ssize_t got = fmt_pread_upto(fd, h, sizeof(h), off);
    if (got < 0)
        return (int)got;
    return got == (ssize_t)sizeof(h) && fmt_get32(h) == FMT_LZ4_MAGIC;
}

int fmt2_frame_at(int fd, fmt2_geo g, uint64_t i, uint64_t *at)
{
    uint64_t s = fmt2_slot_off(g, i), p = fmt2_slot_page(g, i);
    *at = s;
    int rc = p == s ? 1 : fmt2_lz4_at(fd, s);
    if (rc == 0 && (rc = fmt2_lz4_at(fd, p)) == 1)
        *at = p;
    return rc < 0 ? rc : 0;
}

/* Where the frame (or hole run) in slot j ends: its padding header follows. 1: slot j holds
 * neither (damage). */
static int fmt2_frame_end(int fd, fmt2_geo g, uint64_t j, uint64_t *end)
{
    uint8_t h[FMT2_HOLE_HEAD];
    uint64_t at, a;
    uint32_t m;
    int rc = fmt2_frame_at(fd, g, j, &at);
    if (rc == 0)
        rc = fmt_pread_all(fd, h, sizeof(h), at);
    if (rc < 0)
        return rc;
    if (fmt_get32(h) == FMT_LZ4_MAGIC) {
        m = fmt2_run_head_parse(h, sizeof(h), g.bs);
        *end = at + FMT2_FRAME_OVERHEAD +
               (m ? (uint64_t)g.bs * m : fmt_word_size(fmt_get32(h + FMT_FRAME_HEADER_LEN)));
        return 0;
    }
    fmt_error err = fmt2_run_find(fd, g, j, &a, &m);   /* inside a run: the run's end */
    if (err != FMT_OK)
        return err == FMT_ERR_IO ? -EIO : 1;
    *end = fmt2_slot_off(g, a) + FMT2_FRAME_OVERHEAD + (uint64_t)g.bs * m;
    return 0;
}

int fmt2_pad_before(int fd, fmt2_geo g, uint64_t i, uint64_t to)
{
    uint64_t end;
    uint8_t h[8];
    if (i == 0)
        return 0;
    int rc = fmt2_frame_end(fd, g, i - 1, &end);
    if (rc != 0 || end + 8 > to || to - end > fmt2_slot_len(g) + FMT2_PAGE)
        return rc < 0 ? rc : 0;        /* damage before: its block reads as EIO anyway */
    ssize_t got = fmt_pread_upto(fd, h, sizeof(h), end);
    if (got < 0)
        return (int)got;
    if (got == (ssize_t)sizeof(h) && fmt_get32(h) == FMT_SKIP_PAD &&
        fmt_get32(h + 4) == to - end - 8)
        return 0;
    return fmt_write_skip_header(fd, end, FMT_SKIP_PAD, (uint32_t)(to - end - 8));
}

int fmt2_write_slot(int fd, fmt2_geo g, uint64_t i, const uint8_t *frame, uint32_t frame_len,
                    uint32_t len, uint32_t zsum, uint64_t end, const uint8_t *marker)
{
    return fmt2_put_slot(fd, g, i, frame, frame_len, len, zsum, end, marker, 0, NULL);
}

int fmt2_rewrite_slot(int fd, fmt2_geo g, uint64_t i, const uint8_t *frame, uint32_t frame_len,
                      uint32_t len, uint64_t end, uint64_t holes_from, const uint8_t *footer)
{
    return fmt2_put_slot(fd, g, i, frame, frame_len, len, 0, end, NULL, holes_from, footer);
}

/* Whole-block holes [a, b), each followed by a slot: between block i's data and block
 * i+1's lie i's tail, its padding and i+1's head (64 bytes; a page in version 6 at large
 * blocks), written at once: the pages they touch hold a tail or a head anyway. */
static int fmt2_write_holes(int fd, fmt2_geo g, uint64_t a, uint64_t b, uint32_t zsum,
                            uint64_t next)
{
    uint8_t gap[FMT2_PAGE + FMT2_HOLE_HEAD];
    int rc = 0;
    if (a < b) {
        fmt2_hole_head(gap, g.bs, g.bs);
        rc = fmt_pwrite_all(fd, gap, FMT2_HOLE_HEAD, fmt2_slot_off(g, a));
    }
    for (uint64_t i = a; rc == 0 && i < b; i++) {
        uint64_t data_end = fmt2_slot_off(g, i) + FMT2_HOLE_HEAD + g.bs;
        uint64_t to = i + 1 < b ? fmt2_slot_off(g, i + 1) : next;
        size_t pad = (size_t)(to - data_end) - FMT2_HOLE_TAIL;
        size_t n = i + 1 < b ? FMT2_HOLE_TAIL + pad + FMT2_HOLE_HEAD : FMT2_HOLE_TAIL + 8;
        memset(gap, 0, n);
        fmt2_hole_tail(gap, zsum);
        fmt2_pad_header(gap + FMT2_HOLE_TAIL, pad);
        if (i + 1 < b)
            fmt2_hole_head(gap + FMT2_HOLE_TAIL + pad, g.bs, g.bs);
        rc = fmt_pwrite_all(fd, gap, n, data_end);
    }
    return rc;
}

int fmt2_write_hole_run(int fd, fmt2_geo g, uint64_t a, uint64_t b, uint32_t zsum, int runs,
                        uint64_t next)
{
    uint64_t grp = fmt2_run_group(g.bs);
    int rc = 0;
    if (!runs || grp < 2)
        return fmt2_write_holes(fd, g, a, b, zsum, next);
    /* a run's head goes out with the end of the run before it when there is one */
    uint64_t prev = UINT64_MAX;
    uint32_t prev_m = 0;
    uint8_t head[FMT2_HOLE_HEAD];
    for (uint64_t i = a; rc == 0 && i < b;) {
        uint64_t end = (i / grp + 1) * grp < b ? (i / grp + 1) * grp : b;
        uint32_t m = (uint32_t)(end - i);
        if (m >= 2 && prev != UINT64_MAX) {
            rc = fmt2_write_run_pair(fd, g, prev, prev_m, m);
        } else if (m >= 2) {
            fmt2_run_head(head, g.bs, m);
            rc = fmt_pwrite_all(fd, head, sizeof(head), fmt2_slot_off(g, i));
        } else {
            rc = prev != UINT64_MAX ? fmt2_write_run_end(fd, g, prev, prev_m, fmt2_slot_off(g, i))
                                    : 0;
            rc = rc < 0 ? rc : fmt2_write_holes(fd, g, i, end, zsum,
                                                end == b ? next : fmt2_slot_off(g, end));
        }
        prev = m >= 2 ? i : UINT64_MAX, prev_m = m;
        i = end;
    }
    return rc == 0 && prev != UINT64_MAX ? fmt2_write_run_end(fd, g, prev, prev_m, next) : rc;
}

void fmt2_marker_encode(uint32_t version, uint32_t bs, uint32_t flags, const uint8_t uuid[16],
                        uint8_t out[FMT_MARKER_LEN])
{
    fmt_marker m = {version, bs, {0}, version >= FMT_VERSION_4 ? flags : 0};
    memcpy(m.uuid, uuid, sizeof(m.uuid));
    fmt_marker_encode(&m, out);
}

int fmt2_restore_marker(int fd, uint32_t version, uint32_t bs, const uint8_t uuid[16])
{
    uint8_t head[FMT_MARKER_LEN];
    fmt2_marker_encode(version, bs, FMT_MARKER_RECORDS, uuid, head);
    return fmt_pwrite_all(fd, head, sizeof(head), 0);
}
