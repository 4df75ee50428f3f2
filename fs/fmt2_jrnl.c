/* The journal of an in-place commit (docs/FORMAT.md 9.6): encoded for the writer, read and
 * checked for the recovery. */
#include "fmt2.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY        /* XXH32_state_t on the stack */
#include <xxhash.h>

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
