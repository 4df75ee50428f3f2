/* Fuzz target: opening a possibly torn file on a read-write mount, where fs/ff_repair.c finishes
 * interrupted commits and rebuilds a damaged seek table from the frames (fs/fmt.c's walk), and
 * fs/ff_load2.c replays a version 2 file's journal or rebuilds its footer from the slots
 * (fs/fmt2_scan.c's walk).
 *
 * The input is a whole backing file, opened, read in full and released; then opened again.
 * Invariants:
 *   - open succeeds or fails with EIO, EPROTO (newer version) or ENOMEM; reads give the data
 *     or EIO, nothing else;
 *   - after a read-write open of an own file, the file ends in a valid seek table (version 2:
 *     a valid footer), so the second open repairs nothing;
 *   - the second open reads exactly what the first read (size, bytes, where errors are);
 *   - after a repair the table is the frames' truth: when the stock LZ4 frame decoder
 *     decodes the whole backing file, it gives the same bytes;
 *   - a foreign file reads back byte for byte and is never changed. */
#include <errno.h>
#include <lz4frame.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"
#include "fmt2.h"
#include "fuzz_util.h"

#define FR_READ_CAP (8u << 20)
#define FR_LZ4F_CAP (64u << 20)

typedef struct {
    int rc;                            /* ff_open's result */
    uint64_t size;
    uint8_t *data;                     /* the first min(size, cap) bytes read */
    size_t len;
    int err;                           /* first read error */
} fr_view;

static void fr_open_read(ff_env *env, int fd, fr_view *v)
{
    ff_file *f;
    int dfd = dup(fd);
    FZ_CHECK(dfd >= 0, "dup");
    memset(v, 0, sizeof(*v));
    v->rc = ff_open(env, dfd, "fuzz", &f);
    FZ_CHECK(v->rc == 0 || v->rc == -EIO || v->rc == -EPROTO || v->rc == -ENOMEM,
             "ff_open gave %d", v->rc);
    if (v->rc != 0)
        return;
    v->size = ff_size(f);
    v->data = fz_read_all(f, v->size, FR_READ_CAP, &v->len, &v->err);
    FZ_CHECK(v->err == 0 || v->err == -EIO || v->err == -ENOMEM, "read gave %d", v->err);
    FZ_CHECK(ff_release(f) == 0, "release of an unchanged file failed");
}

static uint64_t fr_repairs(ff_env *env)
{
    ff_stats s;
    ff_env_stats(env, &s);
    return s.repairs;
}

static uint8_t *fr_file_bytes(int fd, size_t *len)
{
    off_t end = lseek(fd, 0, SEEK_END);
    FZ_CHECK(end >= 0, "lseek");
    uint8_t *buf = malloc(end ? (size_t)end : 1);
    FZ_CHECK(buf && (end == 0 || fmt_pread_all(fd, buf, (size_t)end, 0) == 0), "read back");
    *len = (size_t)end;
    return buf;
}

/* Decodes a whole backing file with liblz4's frame decoder; NULL when it refuses it. */
static uint8_t *fr_lz4f_decode(const uint8_t *src, size_t len, size_t *out_len)
{
    LZ4F_dctx *dctx;
    FZ_CHECK(!LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)), "dctx");
    size_t cap = 1u << 20, used = 0, pos = 0, hint = 1;
    uint8_t *out = malloc(cap);
    FZ_CHECK(out != NULL, "malloc");
    while (pos < len && hint != 0) {
        if (cap - used < (1u << 20)) {
            if (cap >= FR_LZ4F_CAP)
                break;
            out = realloc(out, cap *= 2);
            FZ_CHECK(out != NULL, "realloc");
        }
        size_t dst_n = cap - used, src_n = len - pos;
        hint = LZ4F_decompress(dctx, out + used, &dst_n, src + pos, &src_n, NULL);
        if (LZ4F_isError(hint) || (src_n == 0 && dst_n == 0))
            break;
        used += dst_n, pos += src_n;
        if (hint == 0 && pos < len)
            hint = 1;                  /* one frame ended: the next item follows */
    }
    LZ4F_freeDecompressionContext(dctx);
    if (pos != len || LZ4F_isError(hint) || hint != 0) {
        free(out);
        return NULL;
    }
    *out_len = used;
    return out;
}

static void fr_same_view(const fr_view *a, const fr_view *b)
{
    FZ_CHECK(a->rc == b->rc, "open gave %d, then %d", a->rc, b->rc);
    FZ_CHECK(a->size == b->size, "size %llu, then %llu", (unsigned long long)a->size,
             (unsigned long long)b->size);
    FZ_CHECK(a->err == b->err, "read error %d, then %d", a->err, b->err);
    FZ_CHECK(a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0),
             "content differs between two opens");
}

/* After a repair the frames are the table: the stock decoder must agree where it decodes. */
static void fr_check_frames_truth(int fd, const fr_view *v)
{
    size_t len, dec_len;
    uint8_t *bytes = fr_file_bytes(fd, &len);
    uint8_t *dec = fr_lz4f_decode(bytes, len, &dec_len);
    if (dec && v->err == 0 && v->len == v->size) {
        FZ_CHECK(dec_len == v->size, "lz4 decodes %zu bytes, the table says %llu", dec_len,
                 (unsigned long long)v->size);
        FZ_CHECK(dec_len == 0 || memcmp(dec, v->data, dec_len) == 0,
                 "lz4 and the repaired table disagree");
    }
    free(dec);
    free(bytes);
}

static void fr_check_own(int fd, const fr_view *first, int repaired)
{
    fz_env *env = fz_env_get();
    uint8_t head[FMT_MARKER_LEN];
    fmt_marker m;
    fmt_trailer t;
    FZ_CHECK(fmt_pread_all(fd, head, sizeof(head), 0) == 0, "marker gone");
    FZ_CHECK(fmt_marker_decode(head, sizeof(head), &m) == FMT_OK, "marker changed");
    size_t len;
    free(fr_file_bytes(fd, &len));
    if (m.version >= FMT_VERSION_2) {
        fmt2_footer ft;
        FZ_CHECK(fmt2_footer_read(fd, len, fmt2_geo_of(m.version, m.block_size), &ft) == FMT_OK,
                 "no valid footer after a read-write open");
        FZ_CHECK(ft.size == first->size, "footer size %llu, open size %llu",
                 (unsigned long long)ft.size, (unsigned long long)first->size);
    } else {
        FZ_CHECK(fmt_trailer_read(fd, len, m.block_size, &t) == FMT_OK,
                 "no valid seek table after a read-write open");
        fmt_trailer_free(&t);
    }
    if (repaired)
        fr_check_frames_truth(fd, first);
    uint64_t before = fr_repairs(env->rw);
    fr_view second;
    fr_open_read(env->rw, fd, &second);
    FZ_CHECK(fr_repairs(env->rw) == before, "a repaired file was repaired again");
    fr_same_view(first, &second);
    free(second.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_env *env = fz_env_get();
    fmt_marker m;
    fmt_error kind = fmt_marker_decode(data, size, &m);
    int fd = fz_memfile(data, size);
    /* a foreign file is passed through byte for byte, unless it is a version 2 file whose
     * marker a power loss took (FORMAT.md 11.4 step 0): that one is repaired as an own file */
    uint32_t lost_version = 0;
    int lost = kind == FMT_ERR_FOREIGN && size >= FMT_MARKER_LEN &&
               fmt2_lost_marker(fd, data, size, 64u << 10, &lost_version) != 0;
    uint64_t before = fr_repairs(env->rw);
    fr_view first;
    fr_open_read(env->rw, fd, &first);
    int repaired = fr_repairs(env->rw) != before;
    if (kind == FMT_ERR_FOREIGN && !lost) {
        size_t len;
        uint8_t *now = fr_file_bytes(fd, &len);
        FZ_CHECK(first.rc == 0 && first.err == 0 && first.size == size && !repaired,
                 "foreign file: open %d, read %d, size %llu", first.rc, first.err,
                 (unsigned long long)first.size);
        FZ_CHECK(len == size && (size == 0 || (memcmp(now, data, size) == 0 &&
                                               memcmp(first.data, data, first.len) == 0)),
                 "a foreign file changed or read back different bytes");
        free(now);
    } else if (kind == FMT_ERR_NEWER) {
        size_t len;
        uint8_t *now = fr_file_bytes(fd, &len);
        FZ_CHECK(first.rc == -EPROTO, "newer file opened with %d", first.rc);
        FZ_CHECK(len == size && memcmp(now, data, size) == 0, "a newer file was changed");
        free(now);
    } else if (first.rc == 0) {
        fr_check_own(fd, &first, repaired);
    }
    free(first.data);
    close(fd);
    return 0;
}
