#include "fmt2.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY        /* XXH32_state_t on the stack */
#include <xxhash.h>

#define FMT2_FOOTER_PAYLOAD (FMT2_FOOTER_LEN - 8u)
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

static void fmt2_hole_head(uint8_t *out, uint32_t bs, uint32_t len)
{
    fmt_frame_header(out, bs, len, 1);
    fmt_put32(out + FMT_FRAME_HEADER_LEN, len | FMT_RAW_BIT);
}

/* Block checksum, EndMark, content checksum: the raw data are the content. */
static void fmt2_hole_tail(uint8_t *out, uint32_t zsum)
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

/* The frame's last bytes and the padding header go out in one write; the padding's payload
 * is given back to the backing filesystem, up to holes_from when that is not 0 (the pages
 * from there on are holes already). */
static int fmt2_put_slot(int fd, uint32_t bs, uint64_t i, const uint8_t *frame,
                         uint32_t frame_len, uint32_t len, uint32_t zsum, uint64_t end,
                         const uint8_t *marker, uint64_t holes_from, const uint8_t *footer)
{
    uint64_t at = fmt2_slot_off(bs, i);
    uint8_t tail[FMT2_HOLE_TAIL + 8 + FMT2_KILL_LEN];
    size_t tail_len = 0;
    int rc = 0;
    if (!frame) {
        rc = fmt2_write_hole(fd, bs, at, len, zsum, tail);
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

int fmt2_write_slot(int fd, uint32_t bs, uint64_t i, const uint8_t *frame, uint32_t frame_len,
                    uint32_t len, uint32_t zsum, uint64_t end, const uint8_t *marker)
{
    return fmt2_put_slot(fd, bs, i, frame, frame_len, len, zsum, end, marker, 0, NULL);
}

int fmt2_rewrite_slot(int fd, uint32_t bs, uint64_t i, const uint8_t *frame, uint32_t frame_len,
                      uint32_t len, uint64_t end, uint64_t holes_from, const uint8_t *footer)
{
    return fmt2_put_slot(fd, bs, i, frame, frame_len, len, 0, end, NULL, holes_from, footer);
}

/* Whole-block holes [a, b), each followed by a slot: between block i's data and block
 * i+1's lie i's tail, its padding and i+1's head (64 bytes), written at once. */
static int fmt2_write_holes(int fd, uint32_t bs, uint64_t a, uint64_t b, uint32_t zsum)
{
    uint8_t gap[FMT2_SLOT_EXTRA + FMT2_HOLE_HEAD], *g = gap + FMT2_HOLE_HEAD;
    int rc = 0;
    if (a < b) {
        fmt2_hole_head(gap, bs, bs);
        rc = fmt_pwrite_all(fd, gap, FMT2_HOLE_HEAD, fmt2_slot_off(bs, a));
    }
    memset(gap, 0, sizeof(gap));
    fmt2_hole_tail(g, zsum);
    fmt2_pad_header(g + FMT2_HOLE_TAIL, FMT2_SLOT_EXTRA - FMT2_FRAME_OVERHEAD);
    fmt2_hole_head(g + FMT2_SLOT_EXTRA - FMT2_HOLE_HEAD, bs, bs);
    for (uint64_t i = a; rc == 0 && i < b; i++) {
        uint64_t data_end = fmt2_slot_off(bs, i) + FMT2_HOLE_HEAD + bs;
        size_t n = i + 1 < b ? FMT2_SLOT_EXTRA : FMT2_HOLE_TAIL + 8;
        rc = fmt_pwrite_all(fd, g, n, data_end);
    }
    return rc;
}

int fmt2_write_hole_run(int fd, uint32_t bs, uint64_t a, uint64_t b, uint32_t zsum, int runs)
{
    uint64_t g = fmt2_run_group(bs);
    int rc = 0;
    if (!runs || g < 2)
        return fmt2_write_holes(fd, bs, a, b, zsum);
    /* a run's head goes out with the end of the run before it when there is one */
    uint64_t prev = UINT64_MAX;
    uint32_t prev_m = 0;
    uint8_t head[FMT2_HOLE_HEAD];
    for (uint64_t i = a; rc == 0 && i < b;) {
        uint64_t end = (i / g + 1) * g < b ? (i / g + 1) * g : b;
        uint32_t m = (uint32_t)(end - i);
        if (m >= 2 && prev != UINT64_MAX) {
            rc = fmt2_write_run_pair(fd, bs, prev, prev_m, m);
        } else if (m >= 2) {
            fmt2_run_head(head, bs, m);
            rc = fmt_pwrite_all(fd, head, sizeof(head), fmt2_slot_off(bs, i));
        } else {
            rc = prev != UINT64_MAX ? fmt2_write_run_end(fd, bs, prev, prev_m) : 0;
            rc = rc < 0 ? rc : fmt2_write_holes(fd, bs, i, end, zsum);
        }
        prev = m >= 2 ? i : UINT64_MAX, prev_m = m;
        i = end;
    }
    return rc == 0 && prev != UINT64_MAX ? fmt2_write_run_end(fd, bs, prev, prev_m) : rc;
}

void fmt2_footer_encode(const fmt2_footer *ft, uint8_t out[FMT2_FOOTER_LEN])
{
    fmt_put32(out, FMT_SKIP_FOOTER2);
    fmt_put32(out + 4, FMT2_FOOTER_PAYLOAD);
    fmt_put64(out + 8, ft->size);
    fmt_put64(out + 16, ft->tail);
    fmt_put64(out + 24, ft->j_off);
    fmt_put64(out + 32, ft->j_len);
    fmt_put64(out + 40, ft->seq);
    fmt_put64(out + 48, ft->fresh);
    fmt_put32(out + 56, ft->paired ? FMT2_FOOTER_PAIRED : FMT2_FOOTER_V2);
    fmt_put32(out + 60, XXH32(out + 8, 52, 0));
}

static int fmt2_footer_sane(const fmt2_footer *ft, uint32_t bs, uint64_t start)
{
    if (ft->size > FMT2_MAX_SIZE || ft->fresh > ft->n_blocks)
        return 0;
    uint64_t min_tail = ft->n_blocks ? fmt2_slot_off(bs, ft->n_blocks - 1) + FMT2_FRAME_OVERHEAD
                                     : FMT_MARKER_LEN;
    uint64_t max_tail = ft->n_blocks ? fmt2_slot_off(bs, ft->n_blocks) : FMT_MARKER_LEN;
    if (ft->tail < min_tail || ft->tail > max_tail || ft->tail > start)
        return 0;
    if (ft->j_off == 0)
        return ft->j_len == 0;
    return ft->j_off >= ft->tail && ft->j_len >= FMT2_J_HEAD + 4 && ft->j_len <= start &&
           ft->j_off <= start - ft->j_len;
}

/* The footer in b whose journal must end by start, if it is valid and of this version. */
static int fmt2_footer_parse(const uint8_t *b, uint32_t bs, uint64_t start, uint32_t version,
                             fmt2_footer *ft)
{
    if (fmt_get32(b) != FMT_SKIP_FOOTER2 || fmt_get32(b + 4) != FMT2_FOOTER_PAYLOAD ||
        fmt_get32(b + 56) != version || fmt_get32(b + 60) != XXH32(b + 8, 52, 0))
        return 0;
    uint64_t size = fmt_get64(b + 8);
    *ft = (fmt2_footer){size, (size + bs - 1) / bs, fmt_get64(b + 16), fmt_get64(b + 24),
                        fmt_get64(b + 32), fmt_get64(b + 40), fmt_get64(b + 48),
                        version == FMT2_FOOTER_PAIRED};
    return fmt2_footer_sane(ft, bs, start);
}

fmt_error fmt2_footer_read(int fd, uint64_t file_len, uint32_t bs, fmt2_footer *ft)
{
    uint8_t b[FMT2_FOOTER_LEN];
    if (file_len < FMT_MARKER_LEN + FMT2_FOOTER_LEN)
        return FMT_ERR_NO_TRAILER;
    if (fmt_pread_all(fd, b, sizeof(b), file_len - FMT2_FOOTER_LEN) < 0)
        return FMT_ERR_IO;
    return fmt2_footer_parse(b, bs, file_len - FMT2_FOOTER_LEN, FMT2_FOOTER_V2, ft)
               ? FMT_OK
               : FMT_ERR_NO_TRAILER;
}

fmt_error fmt2_pair_read(int fd, uint64_t file_len, uint32_t bs, fmt2_footer ft[2], int *n)
{
    uint8_t b[FMT2_PAIR_LEN];
    *n = 0;
    if (file_len < FMT_MARKER_LEN + FMT2_PAIR_LEN || file_len % FMT2_PAIR_LEN)
        return FMT_OK;
    if (fmt_pread_all(fd, b, sizeof(b), file_len - FMT2_PAIR_LEN) < 0)
        return FMT_ERR_IO;
    for (int k = 0; k < 2; k++) {
        fmt2_footer t;
        if (fmt2_footer_parse(b + k * FMT2_FOOTER_LEN, bs, file_len - FMT2_PAIR_LEN,
                              FMT2_FOOTER_PAIRED, &t))
            ft[(*n)++] = t;
    }
    if (*n == 2 && ft[0].seq > ft[1].seq) {
        fmt2_footer t = ft[0];
        ft[0] = ft[1], ft[1] = t;
    }
    return FMT_OK;
}

fmt_error fmt2_footer_find(int fd, uint64_t file_len, uint32_t bs, fmt2_footer *ft)
{
    fmt_error err = fmt2_footer_read(fd, file_len, bs, ft);
    if (err != FMT_ERR_NO_TRAILER)
        return err;
    fmt2_footer pl[2];
    int n;
    if ((err = fmt2_pair_read(fd, file_len, bs, pl, &n)) != FMT_OK)
        return err;
    if (n == 0)
        return FMT_ERR_NO_TRAILER;
    *ft = pl[n - 1];
    return FMT_OK;
}

int fmt2_footer_write(int fd, uint64_t off, const fmt2_footer *ft)
{
    return fmt2_footer_put(fd, off, ft, UINT64_MAX);
}

/* A cut that changes no length still sets the backing file's times: a change of metadata,
 * which ext4 makes the next sync pay for with a commit of its own journal. */
int fmt2_footer_put(int fd, uint64_t off, const fmt2_footer *ft, uint64_t len_now)
{
    uint8_t b[FMT2_FOOTER_LEN];
    fmt2_footer_encode(ft, b);
    int rc = fmt_pwrite_all(fd, b, sizeof(b), off);
    if (rc == 0 && len_now > off + sizeof(b) && ftruncate(fd, (off_t)(off + sizeof(b))) < 0)
        rc = -errno;
    return rc;
}

int fmt2_place_write(int fd, uint64_t eof, int k, const fmt2_footer *ft)
{
    uint8_t b[FMT2_FOOTER_LEN] = {0};
    if (ft) {
        fmt2_footer_encode(ft, b);
    } else {                           /* empty: a padding frame, which lz4 skips */
        fmt2_pad_header(b, FMT2_FOOTER_LEN);
    }
    return fmt_pwrite_all(fd, b, sizeof(b), fmt2_place_off(eof, k));
}

size_t fmt2_journal_len(const fmt2_jentry *e, uint32_t n)
{
    size_t len = FMT2_J_HEAD + (size_t)n * FMT2_J_ENTRY + 4;
    for (uint32_t k = 0; k < n; k++)
        len += e[k].frame_len;
    return len;
}

/* The journal's header and entries into head; returns their length. */
static size_t fmt2_journal_head(const fmt2_jentry *e, uint32_t n, uint64_t seq, uint8_t *head)
{
    fmt_put32(head, FMT_SKIP_JOURNAL);
    fmt_put32(head + 4, (uint32_t)(fmt2_journal_len(e, n) - 8));
    fmt_put64(head + 8, seq);
    fmt_put32(head + 16, n);
    fmt_put32(head + 20, 0);
    uint8_t *p = head + FMT2_J_HEAD;
    for (uint32_t k = 0; k < n; k++, p += FMT2_J_ENTRY) {
        fmt_put64(p, e[k].block);
        fmt_put32(p + 8, e[k].frame_len);
        fmt_put32(p + 12, e[k].len);
    }
    return FMT2_J_HEAD + (size_t)n * FMT2_J_ENTRY;
}

int fmt2_journal_iov(const fmt2_jentry *e, uint32_t n, uint64_t seq, uint8_t *head,
                     uint8_t sum[4], struct iovec *iov)
{
    size_t head_len = fmt2_journal_head(e, n, seq, head);
    /* the checksum covers everything after the skippable header but itself */
    XXH32_state_t st;
    XXH32_reset(&st, 0);
    XXH32_update(&st, head + 8, head_len - 8);
    int nv = 0;
    iov[nv++] = (struct iovec){head, head_len};
    for (uint32_t k = 0; k < n; k++) {
        if (!e[k].frame_len)
            continue;
        XXH32_update(&st, e[k].frame, e[k].frame_len);
        iov[nv++] = (struct iovec){(void *)e[k].frame, e[k].frame_len};
    }
    fmt_put32(sum, XXH32_digest(&st));
    iov[nv++] = (struct iovec){sum, 4};
    return nv;
}

void fmt2_journal_encode(const fmt2_jentry *e, uint32_t n, uint64_t seq, uint8_t *out)
{
    size_t len = fmt2_journal_len(e, n);
    uint8_t *frames = out + fmt2_journal_head(e, n, seq, out);
    for (uint32_t k = 0; k < n; k++) {
        if (e[k].frame_len)
            memcpy(frames, e[k].frame, e[k].frame_len);
        frames += e[k].frame_len;
    }
    fmt_put32(out + len - 4, XXH32(out + 8, len - 12, 0));
}

/* Every entry names a block of the file, in increasing order, with a frame that parses and
 * says the length the entry says. */
static fmt_error fmt2_journal_entries(uint8_t *b, uint64_t len, uint32_t bs, uint64_t n_blocks,
                                      fmt2_jentry *e, uint32_t n)
{
    uint64_t frames = FMT2_J_HEAD + (uint64_t)n * FMT2_J_ENTRY, end = len - 4;
    const uint8_t *p = b + FMT2_J_HEAD;
    for (uint32_t k = 0; k < n; k++, p += FMT2_J_ENTRY) {
        e[k] = (fmt2_jentry){fmt_get64(p), fmt_get32(p + 12), fmt_get32(p + 8), b + frames};
        uint32_t flen, word, blen = 0;
        if (e[k].block >= n_blocks || (k && e[k].block <= e[k - 1].block) || e[k].len == 0 ||
            e[k].len > bs || e[k].frame_len > end - frames)
            return FMT_ERR_NO_TRAILER;
        if (e[k].frame_len && (fmt2_frame_parse(e[k].frame, e[k].frame_len, bs, 1, &blen, &word,
                                                &flen) != FMT_OK ||
                               flen != e[k].frame_len || blen != e[k].len))
            return FMT_ERR_NO_TRAILER;
        if (!e[k].frame_len)
            e[k].frame = NULL;
        frames += e[k].frame_len;
    }
    return frames == end ? FMT_OK : FMT_ERR_NO_TRAILER;
}

fmt_error fmt2_journal_read(int fd, uint64_t off, uint64_t len, uint64_t seq, uint32_t bs,
                            uint64_t n_blocks, uint8_t **buf, fmt2_jentry **e, uint32_t *n)
{
    *buf = NULL, *e = NULL, *n = 0;
    if (len < FMT2_J_HEAD + 4 || len > (1ull << 32))
        return FMT_ERR_NO_TRAILER;
    uint8_t *b = malloc(len);
    if (!b)
        return FMT_ERR_NOMEM;
    fmt_error err = fmt_pread_all(fd, b, len, off) < 0 ? FMT_ERR_IO : FMT_OK;
    uint32_t count = err == FMT_OK ? fmt_get32(b + 16) : 0;
    if (err == FMT_OK &&
        (fmt_get32(b) != FMT_SKIP_JOURNAL || fmt_get32(b + 4) != len - 8 ||
         fmt_get64(b + 8) != seq || fmt_get32(b + 20) != 0 ||
         fmt_get32(b + len - 4) != XXH32(b + 8, len - 12, 0) ||
         (uint64_t)count * FMT2_J_ENTRY > len - FMT2_J_HEAD - 4))
        err = FMT_ERR_NO_TRAILER;
    fmt2_jentry *ent = err == FMT_OK ? calloc(count ? count : 1, sizeof(*ent)) : NULL;
    if (err == FMT_OK && !ent)
        err = FMT_ERR_NOMEM;
    if (err == FMT_OK)
        err = fmt2_journal_entries(b, len, bs, n_blocks, ent, count);
    if (err != FMT_OK) {
        free(b);
        free(ent);
        return err;
    }
    *buf = b, *e = ent, *n = count;
    return FMT_OK;
}

/* Whether the content checksum at the end of a parsed frame (flen bytes, block checksum
 * good) is that of its decoded bytes. A power loss can keep a slot write up to a sector
 * boundary that falls between the block checksum and the content checksum: the block then
 * reads well through the mount while lz4 -d rejects the file. */
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

fmt_error fmt2_scan_slot(int fd, uint64_t file_len, uint32_t bs, uint64_t i, int verify,
                         uint8_t *buf, uint32_t *len, uint32_t *flen, int *padded)
{
    uint64_t at = fmt2_slot_off(bs, i), slot = fmt2_slot_len(bs), want = slot;
    if (at >= file_len)
        return FMT_ERR_CORRUPT;
    if (want > file_len - at)
        want = file_len - at;
    if (fmt_pread_all(fd, buf, want, at) < 0)
        return FMT_ERR_IO;
    uint32_t word, fl = 0;
    fmt_error err = fmt2_frame_parse(buf, want, bs, verify, len, &word, &fl);
    if (err == FMT_OK && verify)
        err = fmt2_content_check(buf, *len, word, fl);
    if (err == FMT_ERR_CORRUPT && buf[4] == FMT2_FLG_CHAIN)    /* version 5 (9.12) */
        err = fmt2_chain_parse(buf, want, bs, verify, len, &fl);
    *flen = fl;
    *padded = fl && fl + 8 <= want && fmt_get32(buf + fl) == FMT_SKIP_PAD &&
              fmt_get32(buf + fl + 4) == slot - fl - 8;
    return err;
}

/* Whether slot i, whose bytes (want of them) are in buf, begins a hole run that is whole:
 * its length, else 0. verify also checks its checksums and that its data read as zeros. */
static uint32_t fmt2_scan_run(int fd, uint32_t bs, uint64_t i, int verify, const uint8_t *buf,
                              uint64_t want)
{
    uint32_t m = fmt2_run_head_parse(buf, (size_t)want, bs);
    uint64_t g = fmt2_run_group(bs);
    if (!m || i % g + m > g || !fmt2_run_tail_ok(fd, bs, i, m, verify))
        return 0;
    return !verify || fmt2_run_data_zero(fd, bs, i, m) ? m : 0;
}

/* Slot i (its bytes in buf), whose frame does not parse, as what a crash left of a chain
 * (9.12): its blocks that check are the last block, whose end the recovery puts back
 * (fmt2_chain_settle). */
static fmt_error fmt2_scan_chain(uint64_t file_len, uint32_t bs, uint64_t i, const uint8_t *buf,
                                 fmt2_scan_result *out)
{
    uint64_t at = fmt2_slot_off(bs, i), avail = file_len - at;
    uint8_t *dst = malloc(bs);
    fmt2_chain_info ci;
    if (!dst)
        return FMT_ERR_NOMEM;
    fmt_error err = fmt2_chain_prefix(buf, avail < fmt2_slot_len(bs) ? avail : fmt2_slot_len(bs),
                                      bs, dst, &ci);
    free(dst);
    if (err == FMT_OK)
        out->n_blocks = i + 1, out->size = i * (uint64_t)bs + ci.len,
        out->valid_end = at + FMT_FRAME_HEADER_LEN + ci.area + FMT_FRAME_END_LEN;
    return err;
}

/* A run never holds the last block: a walk that ends right after runs ends before them. */
fmt_error fmt2_scan(int fd, uint64_t file_len, uint32_t bs, int verify, fmt2_scan_result *out)
{
    uint8_t *buf = malloc(fmt2_slot_len(bs));
    if (!buf)
        return FMT_ERR_NOMEM;
    *out = (fmt2_scan_result){0, 0, FMT_MARKER_LEN, 0};
    fmt2_scan_result before_runs = *out;
    int after_run = 0;
    uint64_t bad = 0;
    for (uint64_t i = 0;; i++) {
        uint32_t len = 0, flen = 0, m = 0;
        int padded = 0;
        fmt_error err = fmt2_scan_slot(fd, file_len, bs, i, verify, buf, &len, &flen, &padded);
        if (err == FMT_ERR_IO || err == FMT_ERR_NOMEM) {
            free(buf);
            return err;
        }
        if (err == FMT_ERR_CORRUPT && i * (uint64_t)bs < FMT2_MAX_SIZE)
            m = fmt2_scan_run(fd, bs, i, verify, buf, fmt2_slot_len(bs));
        if (m) {
            if (!after_run)
                before_runs = *out;
            after_run = 1;
            out->n_blocks = i + m, out->bad_blocks = bad, out->size = (i + m) * (uint64_t)bs;
            out->valid_end = fmt2_slot_off(bs, i) + FMT2_FRAME_OVERHEAD + (uint64_t)bs * m;
            i += m - 1;
            continue;
        }
        if (err == FMT_ERR_CHECKSUM && padded && len == bs) {
            bad++;                         /* kept only if a good frame follows */
            continue;
        }
        /* a frame of 9.3 whose checksums fail is a torn write of it (step 4), not a link */
        if ((err == FMT_ERR_CORRUPT || (err == FMT_ERR_CHECKSUM && buf[4] == FMT2_FLG_CHAIN)) &&
            fmt2_slot_off(bs, i) < file_len &&
            fmt2_scan_chain(file_len, bs, i, buf, out) == FMT_OK) {
            out->bad_blocks = bad, after_run = 0;
            break;                         /* what a torn link left of a chain ends it */
        }
        if (err != FMT_OK || i * (uint64_t)bs + len > FMT2_MAX_SIZE)
            break;
        after_run = 0;
        out->n_blocks = i + 1, out->bad_blocks = bad;
        out->size = i * (uint64_t)bs + len;
        out->valid_end = fmt2_slot_off(bs, i) + flen;
        if (len < bs || !padded)          /* a partial block, or no next slot, ends it */
            break;
    }
    if (after_run)
        *out = before_runs;
    free(buf);
    return FMT_OK;
}

static uint64_t fmt2_slot_end(uint32_t bs, uint64_t i, const fmt2_footer *ft)
{
    return i + 1 < ft->n_blocks ? fmt2_slot_off(bs, i + 1) : ft->tail;
}

/* Whether slot e->block already holds what the journal says: the frame (a hole: its
 * header, zeros and tail) and the padding header behind it. Each is a write of its own, and
 * after a power loss any of them may be missing while the others are there. want and tmp
 * hold a slot each. */
static int fmt2_slot_matches(int fd, uint32_t bs, const fmt2_jentry *e, uint32_t zsum,
                             uint64_t end, uint8_t *want, uint8_t *tmp)
{
    uint64_t at = fmt2_slot_off(bs, e->block), n;
    if (e->frame) {
        memcpy(want, e->frame, e->frame_len);
        n = e->frame_len;
    } else {
        fmt2_hole_head(want, bs, e->len);
        memset(want + FMT2_HOLE_HEAD, 0, e->len);
        fmt2_hole_tail(want + FMT2_HOLE_HEAD + e->len, zsum);
        n = FMT2_HOLE_HEAD + (uint64_t)e->len + FMT2_HOLE_TAIL;
    }
    if (end > at + n) {
        fmt2_pad_header(want + n, end - at - n);
        n += 8;
    }
    return fmt_pread_all(fd, tmp, (size_t)n, at) == 0 && memcmp(tmp, want, (size_t)n) == 0;
}

/* Rewrites the slots that differ from the journal's entries e (ft says where each ends). */
static fmt_error fmt2_replay_entries(int fd, uint32_t bs, int write, uint32_t zsum,
                                     const fmt2_footer *ft, const fmt2_jentry *e, uint32_t n,
                                     uint32_t *replayed)
{
    uint8_t *tmp = malloc(2 * fmt2_slot_len(bs));
    fmt_error err = tmp ? FMT_OK : FMT_ERR_NOMEM;
    for (uint32_t k = 0; err == FMT_OK && k < n; k++) {
        uint32_t sum = e[k].frame ? 0 : e[k].len == bs && zsum ? zsum : fmt2_zero_sum(e[k].len);
        uint64_t end = fmt2_slot_end(bs, e[k].block, ft);
        if (fmt2_slot_matches(fd, bs, &e[k], sum, end, tmp + fmt2_slot_len(bs), tmp))
            continue;
        (*replayed)++;
        if (write && fmt2_write_slot(fd, bs, e[k].block, e[k].frame, e[k].frame_len, e[k].len,
                                     sum, end, NULL) < 0)
            err = FMT_ERR_IO;
    }
    free(tmp);
    return err;
}

/* A journal's entries, and where its frames lie in the file. */
typedef struct {
    const fmt2_jentry *e;
    uint32_t n;
    uint64_t off;
    const uint8_t *buf;
} fmt2_jview;

/* What a reader that does not write takes from the journals: their entries by block, the
 * newer journal's where both hold the block. */
static fmt_error fmt2_take_entries(fmt2_recovery *r, fmt2_jview nw, fmt2_jview old)
{
    uint32_t cap = nw.n + old.n, i = 0, j = 0, k = 0;
    r->je = calloc(cap ? cap : 1, sizeof(*r->je));
    r->jat = calloc(cap ? cap : 1, sizeof(*r->jat));
    if (!r->je || !r->jat)
        return FMT_ERR_NOMEM;
    while (i < nw.n || j < old.n) {
        int newer = j >= old.n || (i < nw.n && nw.e[i].block <= old.e[j].block);
        const fmt2_jview *v = newer ? &nw : &old;
        const fmt2_jentry *x = newer ? &nw.e[i++] : &old.e[j++];
        if (newer && j < old.n && old.e[j].block == x->block)
            j++;
        r->je[k] = *x;
        r->jat[k++] = x->frame ? v->off + (uint64_t)(x->frame - v->buf) : 0;
    }
    r->jn = k;
    return FMT_OK;
}

static fmt_error fmt2_journal_of(int fd, uint32_t bs, const fmt2_footer *ft, uint8_t **buf,
                                 fmt2_jentry **e, uint32_t *n)
{
    return fmt2_journal_read(fd, ft->j_off, ft->j_len, ft->seq, bs, ft->n_blocks, buf, e, n);
}

/* A commit stopped between its footer and the last of its slots: redo the slots that differ
 * from its journal. */
static fmt_error fmt2_replay(int fd, uint32_t bs, int write, uint32_t zsum, fmt2_recovery *r)
{
    fmt2_jentry *e = NULL;
    uint32_t n = 0;
    fmt_error err = fmt2_journal_of(fd, bs, &r->ft, &r->jbuf, &e, &n);
    if (err == FMT_ERR_NO_TRAILER) {   /* lost with its commit, which synced nothing */
        r->journal_bad = 1;
        return FMT_OK;
    }
    if (err == FMT_OK)
        err = fmt2_replay_entries(fd, bs, write, zsum, &r->ft, e, n, &r->replayed);
    if (err == FMT_OK)
        err = fmt2_take_entries(r, (fmt2_jview){e, n, r->ft.j_off, r->jbuf},
                                (fmt2_jview){NULL, 0, 0, NULL});
    free(e);
    return err;
}

/* Drops the journal: a clean footer right behind the slots, the file cut after it. */
static fmt_error fmt2_settle(int fd, fmt2_recovery *r)
{
    fmt2_footer ft = r->ft;
    ft.j_off = ft.j_len = 0, ft.seq++, ft.paired = 0;
    if (fmt2_footer_write(fd, ft.tail, &ft) < 0)
        return FMT_ERR_IO;
    r->ft = ft, r->file_len = ft.tail + FMT2_FOOTER_LEN, r->settled = 1;
    return FMT_OK;
}

/* Punches the data of every slot before block n whose frame is a hole's (raw, its block
 * checksum that of its length's zeros: only the writer of a hole makes that head and end)
 * but whose data are not zeros: a power loss kept the head and end of a hole written over
 * a block, and lost its punch (FORMAT.md 11.4 step 1a). Returns how many, or -1. */
static int64_t fmt2_repunch_holes(int fd, uint64_t file_len, uint32_t bs, uint64_t n)
{
    uint8_t *buf = malloc(fmt2_slot_len(bs));
    int64_t done = buf ? 0 : -1;
    for (uint64_t i = 0; done >= 0 && i < n; i++) {
        uint32_t len = 0, flen = 0;
        int padded;
        /* a checksum that fails comes after the frame parsed: len and the size word hold */
        if (fmt2_scan_slot(fd, file_len, bs, i, 1, buf, &len, &flen, &padded) !=
                FMT_ERR_CHECKSUM ||
            !(fmt_get32(buf + FMT_FRAME_HEADER_LEN) & FMT_RAW_BIT) ||
            fmt_get32(buf + FMT2_HOLE_HEAD + len) != fmt2_zero_sum(len))
            continue;
        if (fmt2_zero(fd, fmt2_slot_off(bs, i) + FMT2_HOLE_HEAD, len) < 0)
            done = -1;
        else
            done++;
    }
    free(buf);
    return done;
}

static fmt_error fmt2_recover_walk(int fd, uint32_t bs, int write, fmt2_recovery *r)
{
    fmt2_scan_result sr;
    fmt_error err = fmt2_scan(fd, r->file_len, bs, 1, &sr);
    if (err != FMT_OK)
        return err;
    if (write && sr.bad_blocks) {
        int64_t punched = fmt2_repunch_holes(fd, r->file_len, bs, sr.n_blocks);
        if (punched < 0 || (punched > 0 && fdatasync(fd) < 0))
            return FMT_ERR_IO;
        if (punched > 0 && (err = fmt2_scan(fd, r->file_len, bs, 1, &sr)) != FMT_OK)
            return err;
    }
    if (sr.n_blocks)                   /* records in the last slot stay counted */
        sr.valid_end = fmt2_rec_tail(fd, bs, sr.n_blocks,
                                     (uint32_t)(sr.size - (sr.n_blocks - 1) * (uint64_t)bs),
                                     sr.valid_end);
    r->torn = 1, r->bad_blocks = sr.bad_blocks;
    r->cut = r->file_len > sr.valid_end ? r->file_len - sr.valid_end : 0;
    uint8_t h[4];                      /* a damaged footer right after the slots is replaced,
                                          not data cut */
    if (r->cut == FMT2_FOOTER_LEN && fmt_pread_all(fd, h, 4, sr.valid_end) == 0 &&
        fmt_get32(h) == FMT_SKIP_FOOTER2)
        r->cut = 0;
    r->ft = (fmt2_footer){sr.size, sr.n_blocks, sr.valid_end, 0, 0, 0, sr.n_blocks, 0};
    if (!write)
        return FMT_OK;
    if (fmt2_footer_write(fd, sr.valid_end, &r->ft) < 0)
        return FMT_ERR_IO;
    r->file_len = sr.valid_end + FMT2_FOOTER_LEN, r->settled = 1;
    return FMT_OK;
}

/* A file that ends with paired footers (FORMAT.md 11.6): the newest whose journal reads back
 * says what the file is (a newer one whose journal does not was a commit that never synced).
 * The other one's journal, when it reads back too, is the commit before, whose slots were
 * written after its sync and may not have reached the disk: it is replayed first. Without
 * a usable footer, FMT_ERR_NO_TRAILER: the walk. */
static fmt_error fmt2_recover_pair(int fd, uint32_t bs, int write, uint32_t zsum,
                                   fmt2_recovery *r)
{
    fmt2_footer pl[2];
    uint8_t *buf[2] = {NULL, NULL};
    fmt2_jentry *e[2] = {NULL, NULL};
    uint32_t ne[2] = {0, 0};
    int n = 0, ok[2] = {0, 0}, top = -1, old = -1;
    fmt_error err = fmt2_pair_read(fd, r->file_len, bs, pl, &n);
    for (int k = 0; err == FMT_OK && k < n; k++) {   /* a footer may name no journal */
        err = pl[k].j_len ? fmt2_journal_of(fd, bs, &pl[k], &buf[k], &e[k], &ne[k]) : FMT_OK;
        ok[k] = err == FMT_OK;
        err = err == FMT_ERR_NO_TRAILER ? FMT_OK : err;
    }
    for (int k = n - 1; k >= 0 && top < 0; k--)
        top = ok[k] ? k : -1;
    if (top == 1 && ok[0] && pl[0].n_blocks == pl[1].n_blocks)
        old = 0;
    if (err == FMT_OK && top < 0)
        err = FMT_ERR_NO_TRAILER, r->journal_bad = n > 0;
    if (err == FMT_OK) {
        r->ft = pl[top], r->paired = 1, r->pair_journals = 1 + (old == 0);
        if (old == 0)
            err = fmt2_replay_entries(fd, bs, write, zsum, &r->ft, e[0], ne[0], &r->replayed);
    }
    if (err == FMT_OK)
        err = fmt2_replay_entries(fd, bs, write, zsum, &r->ft, e[top], ne[top], &r->replayed);
    if (err == FMT_OK)
        err = fmt2_take_entries(r, (fmt2_jview){e[top], ne[top], pl[top].j_off, buf[top]},
                                old == 0 ? (fmt2_jview){e[0], ne[0], pl[0].j_off, buf[0]}
                                         : (fmt2_jview){NULL, 0, 0, NULL});
    for (int k = 0; k < 2; k++) {
        free(e[k]);
        if (err == FMT_OK && k == top)
            r->jbuf = buf[k];
        else if (err == FMT_OK && k == old)
            r->jbuf_old = buf[k];
        else
            free(buf[k]);
    }
    if (err != FMT_OK || !write)
        return err;
    /* the slots the journals hold must be on the disk before the journals go */
    return fdatasync(fd) < 0 ? FMT_ERR_IO : fmt2_settle(fd, r);
}

static fmt_error fmt2_recover_state(int fd, uint64_t file_len, uint32_t bs, int write,
                                    uint32_t zsum, fmt2_recovery *r)
{
    memset(r, 0, sizeof(*r));
    r->file_len = file_len;
    fmt_error err = fmt2_footer_read(fd, file_len, bs, &r->ft);
    if (err == FMT_ERR_NO_TRAILER) {
        err = fmt2_recover_pair(fd, bs, write, zsum, r);
        return err == FMT_ERR_NO_TRAILER ? fmt2_recover_walk(fd, bs, write, r) : err;
    }
    if (err != FMT_OK)
        return err;
    if (r->ft.j_len && (err = fmt2_replay(fd, bs, write, zsum, r)) != FMT_OK)
        return err;
    /* A journal that does not read back was lost with a commit that synced nothing (a synced
     * one is whole): the footer's size and tail are that commit's, which its slots may not
     * hold. The slots as they are say what the file is: every block it promised is among
     * them, untouched (only a synced journal rewrites those). */
    if (r->journal_bad)
        return fmt2_recover_walk(fd, bs, write, r);
    int odd = r->ft.j_len ? r->ft.j_off != r->ft.tail || r->journal_bad
                          : file_len != r->ft.tail + FMT2_FOOTER_LEN;
    if (!write || (!r->replayed && !odd))
        return FMT_OK;
    if (r->replayed && fdatasync(fd) < 0)
        return FMT_ERR_IO;
    return fmt2_settle(fd, r);
}

fmt_error fmt2_recover(int fd, uint64_t file_len, uint32_t bs, int write, uint32_t zsum,
                       int crashed, fmt2_recovery *r)
{
    fmt_error err = fmt2_recover_state(fd, file_len, bs, write, zsum, r);
    return err == FMT_OK ? fmt2_chain_settle(fd, bs, write, crashed, r) : err;
}

/* Whether slot i holds a whole block as the footer ft describes it (i < n - 1: a full
 * block padded to the next slot; the last: the footer's size, its extent ending at tail),
 * or a whole hole run followed by another block (*m: its length, else 0); *flen: the
 * frame's length. *fail: an error that says nothing about the slot (no memory). */
static int fmt2_slot_whole(int fd, uint64_t file_len, uint32_t bs, const fmt2_footer *ft,
                           uint64_t i, uint8_t *buf, uint32_t *flen, uint32_t *m,
                           fmt_error *fail)
{
    uint32_t len = 0;
    int padded = 0;
    fmt_error err = fmt2_scan_slot(fd, file_len, bs, i, 1, buf, &len, flen, &padded);
    if (err == FMT_ERR_NOMEM)
        *fail = err;
    *m = err == FMT_ERR_CORRUPT ? fmt2_scan_run(fd, bs, i, 1, buf, fmt2_slot_len(bs)) : 0;
    if (*m)
        return i + *m < ft->n_blocks;
    if (err != FMT_OK)
        return 0;
    if (i + 1 < ft->n_blocks)
        return len == bs && padded;
    uint64_t at = fmt2_slot_off(bs, i), fend = at + *flen;
    if (len != ft->size - i * (uint64_t)bs || fend > ft->tail)
        return 0;
    return fend == ft->tail || (ft->tail - at <= fmt2_slot_len(bs) && fend + 8 <= ft->tail &&
                                fmt_get32(buf + *flen) == FMT_SKIP_PAD &&
                                fmt_get32(buf + *flen + 4) == ft->tail - fend - 8);
}

/* Whether block i is one the journal r holds (its copy is read instead of the slot). */
static int fmt2_in_journal(const fmt2_recovery *r, uint64_t i)
{
    for (uint32_t k = 0; k < r->jn; k++)
        if (r->je[k].block == i)
            return 1;
    return 0;
}

int fmt2_pad_mend(int fd, uint64_t end, uint64_t to, int kill, int write, fmt_error *err)
{
    uint8_t pad[8 + FMT2_KILL_LEN] = {0};   /* the kill word: the zeros after the header */
    if (to < end + 8 || fmt_pread_all(fd, pad, 8, end) < 0)
        return 0;
    if (fmt_get32(pad) == FMT_SKIP_PAD && fmt_get32(pad + 4) == to - end - 8)
        return 0;
    fmt2_pad_header(pad, to - end);
    size_t n = kill && to - end >= sizeof(pad) ? sizeof(pad) : 8;
    if (write && fmt_pwrite_all(fd, pad, n, end) < 0)
        *err = FMT_ERR_IO;
    return 1;
}

/* Block i, synced, is followed by blocks appended after the sync: the commit that appended
 * them wrote the padding behind its frame, over what its slot ended with when it was the
 * last (a footer, another padding), in a write of its own that a power loss may have lost
 * while it kept the appended slots and their footer. Its frame is whole, and so nothing is
 * cut for it: the padding header is written again (not the kill word: page records that
 * follow stay). Returns 1 when it was not right. */
static int fmt2_fresh_pad(int fd, uint64_t file_len, uint32_t bs, uint64_t i, uint8_t *buf,
                          int write, fmt_error *fail)
{
    uint32_t len = 0, flen = 0;
    int padded = 0;
    if (fmt2_scan_slot(fd, file_len, bs, i, 0, buf, &len, &flen, &padded) != FMT_OK ||
        len != bs)
        return 0;
    return fmt2_pad_mend(fd, fmt2_slot_off(bs, i) + flen, fmt2_slot_off(bs, i + 1), 0, write,
                         fail);
}

fmt_error fmt2_check_fresh(int fd, uint32_t bs, int write, int promise, fmt2_recovery *r)
{
    fmt2_footer ft = r->ft;
    if (ft.fresh >= ft.n_blocks)
        return FMT_OK;
    uint8_t *buf = malloc(fmt2_slot_len(bs));
    if (!buf)
        return FMT_ERR_NOMEM;
    fmt_error pad_err = FMT_OK;
    if (ft.fresh > 0 && !fmt2_in_journal(r, ft.fresh - 1))
        r->pad_fixed = fmt2_fresh_pad(fd, r->file_len, bs, ft.fresh - 1, buf, write, &pad_err)
                           ? ft.fresh : 0;
    if (pad_err != FMT_OK) {
        free(buf);
        return pad_err;
    }
    uint64_t i = ft.fresh, runs_from = UINT64_MAX;
    uint32_t flen = 0, m = 0;
    fmt_error fail = FMT_OK;
    for (; i < ft.n_blocks; i += m ? m : 1) {
        m = 0;
        if (fmt2_in_journal(r, i) || (r->chain_area && i + 1 == ft.n_blocks)) {
            runs_from = UINT64_MAX;    /* a chain: fmt2_chain_settle checked its blocks */
            continue;
        }
        if (!fmt2_slot_whole(fd, r->file_len, bs, &ft, i, buf, &flen, &m, &fail))
            break;
        runs_from = m ? (runs_from == UINT64_MAX ? i : runs_from) : UINT64_MAX;
    }
    if (fail != FMT_OK) {              /* cut nothing for want of memory */
        free(buf);
        return fail;
    }
    r->unsynced = ft.n_blocks - ft.fresh;
    if (i < ft.n_blocks && runs_from != UINT64_MAX)
        i = runs_from;                 /* a run never holds the last block */
    if (i < ft.n_blocks) {             /* cut before the first block that is not whole */
        uint32_t len = 0, prev = 0;
        int padded;
        if (i > 0 && fmt2_scan_slot(fd, r->file_len, bs, i - 1, 0, buf, &len, &prev,
                                    &padded) != FMT_OK)
            prev = 0;
        r->unsynced_cut = ft.n_blocks - i;
        r->chain_area = 0;             /* the chain, if any, was in a block cut off */
        ft.n_blocks = i, ft.size = i * (uint64_t)bs;
        ft.tail = i ? fmt2_slot_off(bs, i - 1) + prev : FMT_MARKER_LEN;
        if (i && !prev) {              /* cannot happen: block i - 1 was checked whole */
            free(buf);
            return FMT_ERR_CORRUPT;
        }
    }
    free(buf);
    ft.fresh = ft.n_blocks;
    if (!write || (!r->unsynced_cut && !promise)) { /* in memory only: a journal stays */
        r->ft = ft;
        return FMT_OK;
    }
    ft.j_off = ft.j_len = 0, ft.seq++;
    /* what the footer now promises must be on the disk first */
    if (fdatasync(fd) < 0 || fmt2_footer_write(fd, ft.tail, &ft) < 0)
        return FMT_ERR_IO;
    fmt2_recovery_free(r);
    r->ft = ft, r->file_len = ft.tail + FMT2_FOOTER_LEN, r->settled = 1;
    return FMT_OK;
}

void fmt2_marker_encode(uint32_t version, uint32_t bs, uint32_t flags, const uint8_t uuid[16],
                        uint8_t out[FMT_MARKER_LEN])
{
    fmt_marker m = {version, bs, {0}, version >= FMT_VERSION_4 ? flags : 0};
    memcpy(m.uuid, uuid, sizeof(m.uuid));
    fmt_marker_encode(&m, out);
}

int fmt2_restore_marker(int fd, uint32_t bs, const uint8_t uuid[16])
{
    uint8_t head[FMT_MARKER_LEN];
    fmt2_marker_encode(FMT_VERSION, bs, FMT_MARKER_RECORDS, uuid, head);
    return fmt_pwrite_all(fd, head, sizeof(head), 0);
}

void fmt2_recovery_free(fmt2_recovery *r)
{
    free(r->jbuf);
    free(r->jbuf_old);
    free(r->je);
    free(r->jat);
    r->jbuf = r->jbuf_old = NULL, r->je = NULL, r->jat = NULL, r->jn = 0;
}
