#include "fmt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define FMT_FLG 0x78u   /* version 01, independent blocks, block checksums, content size */
#define FMT_FLG_CSUM 0x04u   /* content checksum */

#define FMT_NAME_ITEM(name, text) text,
static const char *const fmt_error_names[] = {FMT_LIST_ERRORS(FMT_NAME_ITEM)};
#undef FMT_NAME_ITEM

const char *fmt_error_name(fmt_error e)
{
    return (unsigned)e < sizeof(fmt_error_names) / sizeof(*fmt_error_names)
               ? fmt_error_names[e] : "unknown error";
}

int fmt_errno(fmt_error e)
{
    switch (e) {
    case FMT_OK: return 0;
    case FMT_ERR_NEWER: return EPROTO;
    case FMT_ERR_NOMEM: return ENOMEM;
    default: return EIO;
    }
}

void fmt_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void fmt_put64(uint8_t *p, uint64_t v)
{
    fmt_put32(p, (uint32_t)v);
    fmt_put32(p + 4, (uint32_t)(v >> 32));
}

uint32_t fmt_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t fmt_get64(const uint8_t *p)
{
    return (uint64_t)fmt_get32(p) | (uint64_t)fmt_get32(p + 4) << 32;
}

uint8_t fmt_bd_code(uint32_t block_size)
{
    switch (block_size) {
    case 64u << 10: return 4;
    case 256u << 10: return 5;
    case 1u << 20: return 6;
    case 4u << 20: return 7;
    default: return 0;
    }
}

static uint32_t fmt_bd_size(uint8_t code)
{
    static const uint32_t sizes[] = {64u << 10, 256u << 10, 1u << 20, 4u << 20};
    return code >= 4 && code <= 7 ? sizes[code - 4] : 0;
}

void fmt_frame_header(uint8_t out[FMT_FRAME_HEADER_LEN], uint32_t block_size, uint64_t content,
                      int content_checksum)
{
    fmt_put32(out, FMT_LZ4_MAGIC);
    out[4] = (uint8_t)(FMT_FLG | (content_checksum ? FMT_FLG_CSUM : 0));
    out[5] = (uint8_t)(fmt_bd_code(block_size) << 4);
    fmt_put64(out + 6, content);
    out[14] = (uint8_t)(XXH32(out + 4, 10, 0) >> 8);
}

size_t fmt_frame_header_parse(const uint8_t *buf, size_t len, uint32_t *block_size,
                              int *has_csize, uint64_t *csize, int *block_checksum,
                              int *content_checksum)
{
    if (len < 7 || fmt_get32(buf) != FMT_LZ4_MAGIC)
        return 0;
    uint8_t flg = buf[4], bd = buf[5];
    if ((flg >> 6) != 1 || (flg & 0x02) || (bd & 0x8F) || !fmt_bd_size((uint8_t)(bd >> 4)))
        return 0;
    size_t hlen = 7 + ((flg & 0x08) ? 8 : 0) + ((flg & 0x01) ? 4 : 0);
    if (len < hlen || buf[hlen - 1] != (uint8_t)(XXH32(buf + 4, hlen - 5, 0) >> 8))
        return 0;
    *block_size = fmt_bd_size((uint8_t)(bd >> 4));
    *has_csize = (flg & 0x08) != 0;
    *csize = *has_csize ? fmt_get64(buf + 6) : 0;
    *block_checksum = (flg & 0x10) != 0;
    *content_checksum = (flg & 0x04) != 0;
    if (!(flg & 0x20))           /* linked blocks: no random access, treat as foreign */
        return 0;
    return hlen;
}

void fmt_marker_encode(const fmt_marker *m, uint8_t out[FMT_MARKER_LEN])
{
    fmt_frame_header(out, m->block_size, 0, 0);
    fmt_put32(out + FMT_FRAME_HEADER_LEN, 0);                    /* EndMark */
    uint8_t *s = out + FMT_EMPTY_FRAME_LEN;
    fmt_put32(s, FMT_SKIP_MARKER);
    fmt_put32(s + 4, FMT_MARKER_PAYLOAD);
    fmt_put32(s + 8, FMT_MARKER_MAGIC);
    fmt_put32(s + 12, m->version);
    fmt_put32(s + 16, m->block_size);
    fmt_put32(s + 20, m->flags);
    memcpy(s + 24, m->uuid, 16);
}

fmt_error fmt_marker_decode(const uint8_t *buf, size_t len, fmt_marker *m)
{
    uint8_t want[FMT_EMPTY_FRAME_LEN];
    if (len < FMT_MARKER_LEN || fmt_get32(buf) != FMT_LZ4_MAGIC)
        return FMT_ERR_FOREIGN;
    const uint8_t *s = buf + FMT_EMPTY_FRAME_LEN;
    if (fmt_get32(s) != FMT_SKIP_MARKER || fmt_get32(s + 4) != FMT_MARKER_PAYLOAD ||
        fmt_get32(s + 8) != FMT_MARKER_MAGIC)
        return FMT_ERR_FOREIGN;
    m->version = fmt_get32(s + 12);
    m->block_size = fmt_get32(s + 16);
    m->flags = fmt_get32(s + 20);
    memcpy(m->uuid, s + 24, 16);
    if (m->version > FMT_VERSION)
        return FMT_ERR_NEWER;
    /* The empty frame must be exactly the one we write: anything else is someone else's. */
    if (m->version == 0 || !fmt_bd_code(m->block_size))
        return FMT_ERR_FOREIGN;
    fmt_frame_header(want, m->block_size, 0, 0);
    fmt_put32(want + FMT_FRAME_HEADER_LEN, 0);
    return memcmp(buf, want, sizeof(want)) ? FMT_ERR_FOREIGN : FMT_OK;
}

size_t fmt_block_encode(uint8_t *out, const uint8_t *raw, uint32_t len, const uint8_t *comp,
                        uint32_t comp_len)
{
    int stored_raw = comp_len == 0 || comp_len >= len;
    const uint8_t *data = stored_raw ? raw : comp;
    uint32_t size = stored_raw ? len : comp_len;
    fmt_put32(out, size | (stored_raw ? FMT_RAW_BIT : 0));
    memcpy(out + 4, data, size);
    fmt_put32(out + 4 + size, XXH32(data, size, 0));
    return FMT_BLOCK_OVERHEAD + size;
}

fmt_error fmt_block_decode(uint32_t word, const uint8_t *data, uint8_t *dst, uint32_t expect)
{
    uint32_t size = fmt_word_size(word);
    if (XXH32(data, size, 0) != fmt_get32(data + size))
        return FMT_ERR_CHECKSUM;
    if (word & FMT_RAW_BIT) {
        if (size != expect)
            return FMT_ERR_CORRUPT;
        memcpy(dst, data, size);
        return FMT_OK;
    }
    int got = LZ4_decompress_safe((const char *)data, (char *)dst, (int)size, (int)expect);
    return got == (int)expect ? FMT_OK : FMT_ERR_CORRUPT;
}

ssize_t fmt_pread_upto(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int fmt_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    ssize_t n = fmt_pread_upto(fd, buf, len, off);
    return n < 0 ? (int)n : (size_t)n < len ? -EIO : 0;
}

int fmt_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    struct iovec v = {(void *)buf, len};
    return len ? fmt_pwritev_all(fd, &v, 1, off) : 0;
}

int fmt_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n < IOV_MAX ? n : IOV_MAX, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -ENOSPC;
        off += (uint64_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len)
            w -= (ssize_t)iov->iov_len, iov++, n--;
        if (n > 0)
            iov->iov_base = (uint8_t *)iov->iov_base + w, iov->iov_len -= (size_t)w;
    }
    return 0;
}

size_t fmt_trailer_len(uint32_t n_entries, uint32_t n_reveal, uint32_t n_retire)
{
    return 8 + (size_t)n_entries * FMT_ENTRY_LEN + (size_t)n_reveal * FMT_REVEAL_LEN +
           (size_t)n_retire * FMT_RETIRE_LEN + FMT_FOOTER_LEN;
}

void fmt_trailer_encode(const fmt_trailer *t, uint8_t *out)
{
    size_t total = fmt_trailer_len(t->n_entries, t->n_reveal, t->n_retire);
    fmt_put32(out, FMT_SKIP_TRAILER);
    fmt_put32(out + 4, (uint32_t)(total - 8));
    uint8_t *p = out + 8;
    for (uint32_t i = 0; i < t->n_entries; i++, p += FMT_ENTRY_LEN) {
        fmt_put64(p, t->entries[i].off);
        fmt_put32(p + 8, t->entries[i].word);
    }
    for (uint32_t i = 0; i < t->n_reveal; i++, p += FMT_REVEAL_LEN)
        fmt_put64(p, t->reveal[i]);
    for (uint32_t i = 0; i < t->n_retire; i++, p += FMT_RETIRE_LEN) {
        fmt_put64(p, t->retire[i].off);
        fmt_put64(p + 8, t->retire[i].len);
    }
    fmt_put64(p, t->size);
    fmt_put32(p + 8, t->n_entries);
    fmt_put32(p + 12, t->n_reveal);
    fmt_put32(p + 16, t->n_retire);
    fmt_put32(p + 20, FMT_VERSION_1);
    fmt_put32(p + 24, XXH32(out + 8, (size_t)(p + 24 - (out + 8)), 0));
    fmt_put32(p + 28, FMT_FOOTER_MAGIC);
}

void fmt_trailer_free(fmt_trailer *t)
{
    free(t->entries);
    free(t->reveal);
    free(t->retire);
    memset(t, 0, sizeof(*t));
}

/* Checks that an entry describes a plausible block lying wholly before limit. */
static int fmt_entry_ok(const fmt_entry *e, uint32_t block_size, uint64_t logical, uint64_t limit)
{
    uint32_t size = fmt_word_size(e->word);
    uint64_t off = fmt_entry_off(e);
    if ((e->off & ~(FMT_OFFSET_MASK | FMT_ENTRY_ZERO)) || size == 0 || size > block_size || off < FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN)
        return 0;
    if ((e->word & FMT_RAW_BIT) && size != logical)
        return 0;
    return off + fmt_block_len(e->word) <= limit;
}

static fmt_error fmt_trailer_parse(const uint8_t *p, uint32_t block_size, fmt_trailer *t)
{
    t->entries = calloc(t->n_entries ? t->n_entries : 1, sizeof(*t->entries));
    t->reveal = calloc(t->n_reveal ? t->n_reveal : 1, sizeof(*t->reveal));
    t->retire = calloc(t->n_retire ? t->n_retire : 1, sizeof(*t->retire));
    if (!t->entries || !t->reveal || !t->retire)
        return FMT_ERR_NOMEM;
    for (uint32_t i = 0; i < t->n_entries; i++, p += FMT_ENTRY_LEN) {
        t->entries[i].off = fmt_get64(p);
        t->entries[i].word = fmt_get32(p + 8);
        uint64_t logical = i + 1 < t->n_entries ? block_size
                                                : t->size - (uint64_t)i * block_size;
        if (!fmt_entry_ok(&t->entries[i], block_size, logical, t->start))
            return FMT_ERR_NO_TRAILER;
    }
    for (uint32_t i = 0; i < t->n_reveal; i++, p += FMT_REVEAL_LEN)
        if ((t->reveal[i] = fmt_get64(p)) > t->start || t->start - t->reveal[i] < 8)
            return FMT_ERR_NO_TRAILER;
    for (uint32_t i = 0; i < t->n_retire; i++, p += FMT_RETIRE_LEN) {
        fmt_retire *r = &t->retire[i];
        r->off = fmt_get64(p);
        r->len = fmt_get64(p + 8);
        if (r->len < 8 || r->len > UINT32_MAX || r->off > t->start || t->start - r->off < r->len)
            return FMT_ERR_NO_TRAILER;
    }
    return FMT_OK;
}

fmt_error fmt_trailer_read(int fd, uint64_t file_len, uint32_t block_size, fmt_trailer *t)
{
    uint8_t foot[FMT_FOOTER_LEN];
    memset(t, 0, sizeof(*t));
    if (file_len < FMT_MARKER_LEN + 8 + FMT_FOOTER_LEN)
        return FMT_ERR_NO_TRAILER;
    int rc = fmt_pread_all(fd, foot, sizeof(foot), file_len - FMT_FOOTER_LEN);
    if (rc < 0)
        return errno = -rc, FMT_ERR_IO;
    if (fmt_get32(foot + 28) != FMT_FOOTER_MAGIC || fmt_get32(foot + 20) != FMT_VERSION_1)
        return FMT_ERR_NO_TRAILER;
    t->size = fmt_get64(foot);
    if (t->size > FMT_MAX_SIZE)
        return FMT_ERR_NO_TRAILER;
    t->n_entries = fmt_get32(foot + 8);
    t->n_reveal = fmt_get32(foot + 12);
    t->n_retire = fmt_get32(foot + 16);
    uint64_t total = fmt_trailer_len(t->n_entries, t->n_reveal, t->n_retire);
    if (total > file_len - FMT_MARKER_LEN ||
        t->n_entries != (t->size + block_size - 1) / block_size)
        return FMT_ERR_NO_TRAILER;
    t->start = file_len - total;
    uint8_t *buf = malloc(total);
    if (!buf)
        return FMT_ERR_NOMEM;
    fmt_error err = FMT_ERR_NO_TRAILER;
    rc = fmt_pread_all(fd, buf, total, t->start);
    if (rc < 0)
        err = (errno = -rc, FMT_ERR_IO);
    else if (fmt_get32(buf) == FMT_SKIP_TRAILER && fmt_get32(buf + 4) == total - 8 &&
             XXH32(buf + 8, total - 8 - 8, 0) == fmt_get32(buf + total - 8))
        err = fmt_trailer_parse(buf + 8, block_size, t);
    free(buf);
    if (err != FMT_OK)
        fmt_trailer_free(t);
    return err;
}

int fmt_write_skip_header(int fd, uint64_t off, uint32_t magic, uint32_t size)
{
    uint8_t h[8];
    fmt_put32(h, magic);
    fmt_put32(h + 4, size);
    return fmt_pwrite_all(fd, h, sizeof(h), off);
}

/* Gives a retired frame's payload back to the backing filesystem; the bytes read as zeros,
 * which any LZ4 decoder skips since they are inside a skippable frame. */
void fmt_punch(int fd, uint64_t off, uint64_t len)
{
    uint64_t start = (off + 4095) & ~4095ull, end = (off + len) & ~4095ull;
    if (end > start)
        (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
                        (off_t)(end - start));
}

int fmt_apply_intents(int fd, const fmt_trailer *t, int punch)
{
    uint8_t h[8];
    int changed = 0, rc;
    for (uint32_t i = 0; i < t->n_retire; i++) {
        const fmt_retire *r = &t->retire[i];
        if ((rc = fmt_pread_all(fd, h, 4, r->off)) < 0)
            return rc;
        if (fmt_get32(h) != FMT_LZ4_MAGIC)
            continue;
        if ((rc = fmt_write_skip_header(fd, r->off, FMT_SKIP_DEAD, (uint32_t)(r->len - 8))) < 0)
            return rc;
        if (punch)
            fmt_punch(fd, r->off + 8, r->len - 8);
        changed++;
    }
    for (uint32_t i = 0; i < t->n_reveal; i++) {
        if ((rc = fmt_pread_all(fd, h, 8, t->reveal[i])) < 0)
            return rc;
        if (fmt_get32(h) != FMT_SKIP_HIDDEN || fmt_get32(h + 4) == 0)
            continue;
        if ((rc = fmt_write_skip_header(fd, t->reveal[i], FMT_SKIP_HIDDEN, 0)) < 0)
            return rc;
        changed++;
    }
    return changed;
}

/* Growing array of entries for a scan. */
typedef struct {
    fmt_entry *v;
    uint32_t n, cap;
} fmt_entries;

static int fmt_entries_push(fmt_entries *a, uint64_t off, uint32_t word)
{
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? a->cap * 2 : 64;
        fmt_entry *v = realloc(a->v, cap * sizeof(*v));
        if (!v)
            return -1;
        a->v = v, a->cap = cap;
    }
    a->v[a->n++] = (fmt_entry){off, word};
    return 0;
}

typedef struct {
    int fd;
    uint64_t file_len;
    uint32_t block_size;
    int verify;
    uint8_t *data;                     /* block_size + 4 bytes, for verification */
    fmt_entries entries;
    uint64_t size;                     /* logical bytes so far */
    uint32_t bad;                      /* blocks of the current frame whose checksum failed */
} fmt_scanner;

/* Checks the blocks of one frame: every block but the last is full, raw blocks have their
 * logical length, and a partial block only ever ends the file. */
static int fmt_scan_frame_sizes(fmt_scanner *s, uint32_t first, uint64_t csize)
{
    uint32_t k = s->entries.n - first;
    if (k == 0)
        return csize == 0;
    if (s->size % s->block_size)
        return 0;                      /* a partial block followed by more data */
    uint64_t full = (uint64_t)(k - 1) * s->block_size;
    if (csize <= full || csize - full > s->block_size)
        return 0;
    for (uint32_t i = first; i < s->entries.n; i++) {
        uint64_t logical = i + 1 < s->entries.n ? s->block_size : csize - full;
        if ((s->entries.v[i].word & FMT_RAW_BIT) && fmt_word_size(s->entries.v[i].word) != logical)
            return 0;
    }
    return 1;
}

/* Parses the frame at pos; returns its end, or 0 when it does not parse whole. */
static uint64_t fmt_scan_frame(fmt_scanner *s, uint64_t pos)
{
    uint8_t h[19];
    uint32_t bs;
    int has_csize, bsum, csum;
    uint64_t csize;
    size_t avail = s->file_len - pos < sizeof(h) ? (size_t)(s->file_len - pos) : sizeof(h);
    if (fmt_pread_all(s->fd, h, avail, pos) < 0)
        return 0;
    size_t hlen = fmt_frame_header_parse(h, avail, &bs, &has_csize, &csize, &bsum, &csum);
    if (hlen != FMT_FRAME_HEADER_LEN || !has_csize || !bsum || !csum || bs != s->block_size)
        return 0;
    uint32_t first = s->entries.n;
    uint64_t p = pos + hlen;
    for (;;) {
        uint8_t w[4];
        if (p + 4 > s->file_len || fmt_pread_all(s->fd, w, 4, p) < 0)
            return 0;
        uint32_t word = fmt_get32(w);
        if (word == 0)
            break;
        uint32_t size = fmt_word_size(word);
        if (size > s->block_size || p + fmt_block_len(word) > s->file_len)
            return 0;
        if (s->verify) {
            if (fmt_pread_all(s->fd, s->data, size + 4, p + 4) < 0)
                return 0;
            /* counted, not fatal: fmt_scan decides whether it is damage or a torn tail */
            s->bad += XXH32(s->data, size, 0) != fmt_get32(s->data + size);
        }
        if (fmt_entries_push(&s->entries, p, word) < 0)
            return 0;
        p += fmt_block_len(word);
    }
    if (p + FMT_FRAME_END_LEN > s->file_len || !fmt_scan_frame_sizes(s, first, csize))
        return 0;
    s->size += csize;
    return p + FMT_FRAME_END_LEN;
}

fmt_error fmt_scan(int fd, uint64_t file_len, uint32_t block_size, int verify,
                   fmt_scan_result *out)
{
    fmt_scanner s = {.fd = fd, .file_len = file_len, .block_size = block_size,
                     .verify = verify};
    memset(out, 0, sizeof(*out));
    if (verify && !(s.data = malloc((size_t)block_size + 4)))
        return FMT_ERR_NOMEM;
    uint64_t pos = FMT_MARKER_LEN;
    /* A whole frame with a bad block is damage when a whole item follows it (a torn commit
     * leaves its bad bytes only at the end): it is kept, and its bad blocks read as EIO. As
     * the last item it counts as torn and is cut. pend_* is such a frame awaiting a follower. */
    uint64_t pend_pos = 0, pend_size = 0;
    uint32_t pend_n = 0;
    while (pos + 8 <= file_len) {
        uint8_t h[8];
        uint32_t n_before = s.entries.n;
        uint64_t size_before = s.size;
        s.bad = 0;
        if (fmt_pread_all(fd, h, 8, pos) < 0)
            break;
        uint32_t magic = fmt_get32(h);
        uint64_t next = 0;
        if (magic == FMT_LZ4_MAGIC)
            next = fmt_scan_frame(&s, pos);
        else if ((magic & 0xFFFFFFF0u) == 0x184D2A50u && pos + 8 + fmt_get32(h + 4) <= file_len)
            next = pos + 8 + fmt_get32(h + 4);
        if (next && magic == FMT_SKIP_TRAILER)
            out->last_table_end = next;
        if (!next) {
            s.entries.n = n_before;    /* drop the blocks of a frame that did not end */
            break;
        }
        pend_pos = 0;                  /* a whole item: the pending frame was not the tail */
        if (s.bad)
            pend_pos = pos, pend_n = n_before, pend_size = size_before;
        pos = next;
    }
    if (pend_pos) {
        s.entries.n = pend_n, s.size = pend_size;
        pos = pend_pos;
    }
    free(s.data);
    out->valid_end = pos;
    out->torn = pos != file_len;
    out->table.entries = s.entries.v;
    out->table.n_entries = s.entries.n;
    out->table.size = s.size;
    return FMT_OK;
}
