/* Footers of format version 2 and later (docs/FORMAT.md 9.7 and 9.10): the one that ends
 * a file, and the two places of the footer pair. */
#include "fmt2.h"

#include <errno.h>
#include <unistd.h>
#include <xxhash.h>

#define FMT2_FOOTER_PAYLOAD (FMT2_FOOTER_LEN - 8u)

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

static int fmt2_footer_sane(const fmt2_footer *ft, fmt2_geo g, uint64_t start)
{
    if (ft->size > FMT2_MAX_SIZE || ft->fresh > ft->n_blocks)
        return 0;
    uint64_t min_tail = ft->n_blocks ? fmt2_slot_off(g, ft->n_blocks - 1) + FMT2_FRAME_OVERHEAD
                                     : FMT_MARKER_LEN;
    uint64_t max_tail = ft->n_blocks ? fmt2_slot_off(g, ft->n_blocks) : FMT_MARKER_LEN;
    if (ft->tail < min_tail || ft->tail > max_tail || ft->tail > start)
        return 0;
    if (ft->j_off == 0)
        return ft->j_len == 0;
    return ft->j_off >= ft->tail && ft->j_len >= FMT2_J_HEAD + 4 && ft->j_len <= start &&
           ft->j_off <= start - ft->j_len;
}

/* The footer in b whose journal must end by start, if it is valid and of this version. */
static int fmt2_footer_parse(const uint8_t *b, fmt2_geo g, uint64_t start, uint32_t version,
                             fmt2_footer *ft)
{
    if (fmt_get32(b) != FMT_SKIP_FOOTER2 || fmt_get32(b + 4) != FMT2_FOOTER_PAYLOAD ||
        fmt_get32(b + 56) != version || fmt_get32(b + 60) != XXH32(b + 8, 52, 0))
        return 0;
    uint64_t size = fmt_get64(b + 8);
    *ft = (fmt2_footer){size, (size + g.bs - 1) / g.bs, fmt_get64(b + 16), fmt_get64(b + 24),
                        fmt_get64(b + 32), fmt_get64(b + 40), fmt_get64(b + 48),
                        version == FMT2_FOOTER_PAIRED};
    return fmt2_footer_sane(ft, g, start);
}

fmt_error fmt2_footer_read(int fd, uint64_t file_len, fmt2_geo g, fmt2_footer *ft)
{
    uint8_t b[FMT2_FOOTER_LEN];
    if (file_len < FMT_MARKER_LEN + FMT2_FOOTER_LEN)
        return FMT_ERR_NO_TRAILER;
    if (fmt_pread_all(fd, b, sizeof(b), file_len - FMT2_FOOTER_LEN) < 0)
        return FMT_ERR_IO;
    return fmt2_footer_parse(b, g, file_len - FMT2_FOOTER_LEN, FMT2_FOOTER_V2, ft)
               ? FMT_OK
               : FMT_ERR_NO_TRAILER;
}

fmt_error fmt2_pair_read(int fd, uint64_t file_len, fmt2_geo g, fmt2_footer ft[2], int *n)
{
    uint8_t b[FMT2_PAIR_LEN];
    *n = 0;
    if (file_len < FMT_MARKER_LEN + FMT2_PAIR_LEN || file_len % FMT2_PAIR_LEN)
        return FMT_OK;
    if (fmt_pread_all(fd, b, sizeof(b), file_len - FMT2_PAIR_LEN) < 0)
        return FMT_ERR_IO;
    for (int k = 0; k < 2; k++) {
        fmt2_footer t;
        if (fmt2_footer_parse(b + k * FMT2_FOOTER_LEN, g, file_len - FMT2_PAIR_LEN,
                              FMT2_FOOTER_PAIRED, &t))
            ft[(*n)++] = t;
    }
    if (*n == 2 && ft[0].seq > ft[1].seq) {
        fmt2_footer t = ft[0];
        ft[0] = ft[1], ft[1] = t;
    }
    return FMT_OK;
}

fmt_error fmt2_footer_find(int fd, uint64_t file_len, fmt2_geo g, fmt2_footer *ft)
{
    fmt_error err = fmt2_footer_read(fd, file_len, g, ft);
    if (err != FMT_ERR_NO_TRAILER)
        return err;
    fmt2_footer pl[2];
    int n;
    if ((err = fmt2_pair_read(fd, file_len, g, pl, &n)) != FMT_OK)
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
