/* Fuzz target: the format parsers (fs/fmt.c, fs/fmt2*.c) and the read-only open path of
 * fs/ff_repair.c and fs/ff_load2.c.
 *
 * The input is a whole backing file. It goes through the marker, frame header, trailer and
 * frame-walk decoders (for a version 2 marker: frame, footer, journal and slot-walk decoders),
 * then is opened on a read-only mount (nothing written, no repair) and read block by block.
 * A second pass repairs the trailer's checksum first (version 2: the footer's and the
 * journal's), so that the mutations reach the parsers instead of stopping at their XXH32.
 * The chained last frame (version 5) is parsed in the first slots and the last one, and at
 * the input's start with each block size; and a chain built from the input's own bytes
 * must read back, cut and damaged without leaving its bounds.
 *
 * Invariants: decoders accept or refuse, never read outside the input; a trailer that
 * parses re-encodes to the same table; a verifying walk finds a prefix of what a plain walk
 * finds; a file that opens reads with success or EIO only, never more bytes than its size. */
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "fmt.h"
#include "fmt2.h"
#include "fuzz_util.h"

#define FF_READ_CAP (8u << 20)
#define FF_MAX_BLOCK_CHECKS 256u
#define FF_CHAIN_MAX (128u << 10)      /* bytes a chain the round trip builds holds, at most */
#define FF_CHAIN_BLOCKS 8u             /* its blocks, at most */

static const uint32_t fzf_sizes[4] = {64u << 10, 256u << 10, 1u << 20, 4u << 20};

static void fzf_check_header(const uint8_t *data, size_t size)
{
    uint32_t bs;
    int has_csize, bsum, csum;
    uint64_t csize;
    size_t n = fmt_frame_header_parse(data, size, &bs, &has_csize, &csize, &bsum, &csum);
    FZ_CHECK(n == 0 || (n >= 7 && n <= 19 && n <= size), "header length %zu of %zu", n, size);
    if (n)
        FZ_CHECK(fmt_bd_code(bs) != 0, "block size %u accepted", bs);
}

/* Field by field: fmt_entry has padding, which memcmp would compare too. */
static int fzf_same_entries(const fmt_entry *a, const fmt_entry *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (a[i].off != b[i].off || a[i].word != b[i].word)
            return 0;
    return 1;
}

/* Decodes a table's blocks straight from the file: any result but a crash is allowed. */
static void fzf_decode_blocks(int fd, const fmt_trailer *t, uint32_t bs, uint64_t file_len)
{
    uint8_t *raw = malloc((size_t)bs + 8), *dst = malloc(bs);
    FZ_CHECK(raw && dst, "malloc");
    for (uint32_t i = 0; i < t->n_entries && i < FF_MAX_BLOCK_CHECKS; i++) {
        const fmt_entry *e = &t->entries[i];
        uint64_t off = fmt_entry_off(e), logical = i + 1 < t->n_entries ? bs : t->size - (uint64_t)i * bs;
        FZ_CHECK(fmt_word_size(e->word) <= bs && off + fmt_block_len(e->word) <= file_len,
                 "entry %u (offset %llu word %08x) outside the file", i,
                 (unsigned long long)off, e->word);
        if ((e->off & FMT_ENTRY_ZERO) || fmt_pread_all(fd, raw, fmt_block_len(e->word), off) < 0)
            continue;
        fmt_error err = fmt_block_decode(e->word, raw + 4, dst, (uint32_t)logical);
        FZ_CHECK(err == FMT_OK || err == FMT_ERR_CHECKSUM || err == FMT_ERR_CORRUPT,
                 "block decode gave %d", (int)err);
    }
    free(raw);
    free(dst);
}

/* A table that parsed, encoded again in place of the old one, must parse to the same. */
static void fzf_roundtrip(int fd, const fmt_trailer *t, uint32_t bs)
{
    size_t len = fmt_trailer_len(t->n_entries, t->n_reveal, t->n_retire);
    uint8_t *enc = malloc(len);
    FZ_CHECK(enc != NULL, "malloc");
    fmt_trailer_encode(t, enc);
    int fd2 = fz_memfile(NULL, 0);
    uint8_t *head = malloc(t->start ? t->start : 1);
    FZ_CHECK(head && fmt_pread_all(fd, head, t->start, 0) == 0, "copy");
    FZ_CHECK(fmt_pwrite_all(fd2, head, t->start, 0) == 0 &&
             fmt_pwrite_all(fd2, enc, len, t->start) == 0, "write");
    fmt_trailer u;
    fmt_error err = fmt_trailer_read(fd2, t->start + len, bs, &u);
    FZ_CHECK(err == FMT_OK, "re-encoded table refused: %d", (int)err);
    FZ_CHECK(u.size == t->size && u.n_entries == t->n_entries && u.n_reveal == t->n_reveal &&
             u.n_retire == t->n_retire && u.start == t->start, "re-encoded table differs");
    FZ_CHECK(fzf_same_entries(u.entries, t->entries, t->n_entries) &&
             memcmp(u.reveal, t->reveal, t->n_reveal * sizeof(uint64_t)) == 0 &&
             memcmp(u.retire, t->retire, t->n_retire * sizeof(fmt_retire)) == 0,
             "re-encoded entries differ");
    fmt_trailer_free(&u);
    free(head);
    free(enc);
    close(fd2);
}

static void fzf_check_trailer(int fd, uint64_t len, uint32_t bs)
{
    fmt_trailer t;
    fmt_error err = fmt_trailer_read(fd, len, bs, &t);
    FZ_CHECK(err == FMT_OK || err == FMT_ERR_NO_TRAILER, "trailer read gave %d", (int)err);
    if (err != FMT_OK)
        return;
    FZ_CHECK(t.size <= FMT_MAX_SIZE && t.n_entries == (t.size + bs - 1) / bs,
             "size %llu with %u entries", (unsigned long long)t.size, t.n_entries);
    FZ_CHECK(t.start >= FMT_MARKER_LEN && t.start < len, "table start %llu",
             (unsigned long long)t.start);
    fzf_decode_blocks(fd, &t, bs, t.start);
    fzf_roundtrip(fd, &t, bs);
    fmt_trailer_free(&t);
}

static void fzf_check_scan(int fd, uint64_t len, uint32_t bs)
{
    fmt_scan_result plain, verified;
    FZ_CHECK(fmt_scan(fd, len, bs, 0, &plain) == FMT_OK, "scan");
    FZ_CHECK(fmt_scan(fd, len, bs, 1, &verified) == FMT_OK, "verifying scan");
    FZ_CHECK(plain.valid_end <= len && plain.torn == (plain.valid_end != len),
             "valid_end %llu of %llu", (unsigned long long)plain.valid_end,
             (unsigned long long)len);
    FZ_CHECK(plain.last_table_end <= plain.valid_end, "table end past valid end");
    FZ_CHECK(verified.valid_end <= plain.valid_end &&
             verified.table.n_entries <= plain.table.n_entries &&
             fzf_same_entries(verified.table.entries, plain.table.entries,
                              verified.table.n_entries),
             "a verifying walk is not a prefix of the plain walk");
    fmt_trailer *t = &plain.table;
    FZ_CHECK(t->n_entries == (t->size + bs - 1) / bs, "scan: size %llu with %u entries",
             (unsigned long long)t->size, t->n_entries);
    fzf_decode_blocks(fd, t, bs, plain.valid_end);
    fmt_trailer_free(&plain.table);
    fmt_trailer_free(&verified.table);
}

/* Opens read-only and reads everything; compares with the size a stat reports. */
static void fzf_check_open(int fd, uint64_t len, uint32_t bs, uint32_t version)
{
    fz_env *env = fz_env_get();
    int dfd = dup(fd);
    ff_file *f;
    FZ_CHECK(dfd >= 0, "dup");
    int rc = ff_open(env->ro, dfd, "fuzz", &f);
    FZ_CHECK(rc == 0 || rc == -EIO || rc == -EPROTO || rc == -ENOMEM, "ff_open gave %d", rc);
    uint64_t ssize;
    int own, src = ff_stat_size(env->ro, fd, &ssize, &own);
    /* 1: only the repair of an open tells the size (a torn file, a lost marker) */
    FZ_CHECK(src == 0 || src == 1 || src == -EIO || src == -EPROTO, "ff_stat_size gave %d", src);
    if (rc != 0)
        return;
    uint64_t size = ff_size(f);
    fmt_trailer t;
    fmt2_footer ft;
    /* a valid footer gives the size, unless its journal is damaged: then the open walks the
     * slots, and stat says so (1) */
    if (bs && version >= FMT_VERSION_2 &&
        fmt2_footer_read(fd, len, fmt2_geo_of(version, bs), &ft) == FMT_OK)
        FZ_CHECK((src == 0 && ssize == size && ft.size == size) || (src == 1 && ft.j_len),
                 "v2: stat size %llu, open size %llu, footer size %llu",
                 (unsigned long long)ssize, (unsigned long long)size,
                 (unsigned long long)ft.size);
    if (bs && version == FMT_VERSION_1 && fmt_trailer_read(fd, len, bs, &t) == FMT_OK) {
        FZ_CHECK(src == 0 && ssize == size && t.size == size, "stat size %llu, open size %llu",
                 (unsigned long long)ssize, (unsigned long long)size);
        fmt_trailer_free(&t);
    }
    size_t got;
    int err;
    free(fz_read_all(f, size, FF_READ_CAP, &got, &err));
    FZ_CHECK(err == 0 || err == -EIO || err == -ENOMEM, "read gave %d", err);
    off_t d = ff_lseek(f, 0, SEEK_DATA), h = ff_lseek(f, 0, SEEK_HOLE);
    FZ_CHECK((d >= 0 && (uint64_t)d <= size) || d == -ENXIO, "SEEK_DATA gave %lld", (long long)d);
    FZ_CHECK((h >= 0 && (uint64_t)h <= size) || (h == -ENXIO && size == 0),
             "SEEK_HOLE gave %lld", (long long)h);
    FZ_CHECK(ff_release(f) == 0, "release of a read-only file failed");
}

/* ---- version 2 ---- */

/* A frame parse stays inside avail and says lengths that fit it. */
static void fzf2_parse_at(const uint8_t *buf, size_t avail, uint32_t bs)
{
    uint32_t len = 0, word = 0, flen = 0;
    fmt_error err = fmt2_frame_parse(buf, avail, bs, 1, &len, &word, &flen);
    FZ_CHECK(err == FMT_OK || err == FMT_ERR_CORRUPT || err == FMT_ERR_CHECKSUM,
             "frame parse gave %d", (int)err);
    if (err == FMT_ERR_CORRUPT)
        return;
    FZ_CHECK(len >= 1 && len <= bs && flen <= avail && fmt_word_size(word) <= bs &&
             flen == FMT_FRAME_HEADER_LEN + fmt_block_len(word) + FMT_FRAME_END_LEN,
             "frame: len %u word %08x frame %u of %zu", len, word, flen, avail);
    uint32_t l2, w2, f2;
    FZ_CHECK(fmt2_frame_parse(buf, avail, bs, 0, &l2, &w2, &f2) == FMT_OK && l2 == len &&
             w2 == word && f2 == flen, "a frame that verifies does not parse the same unverified");
    if (err != FMT_OK)
        return;
    uint8_t *dst = malloc(bs);
    FZ_CHECK(dst != NULL, "malloc");
    fmt_error d = fmt_block_decode(word, buf + FMT_FRAME_HEADER_LEN + 4, dst, len);
    FZ_CHECK(d == FMT_OK || d == FMT_ERR_CORRUPT, "block decode gave %d", (int)d);
    free(dst);
}

/* A chain of page records (version 4) read from any bytes stays inside them, and applying
 * it writes only inside the block; walking it without applying finds the same chain. The
 * chain's first prev is taken from the input, so that inputs reach the records themselves. */
static void fzf2_check_records(const uint8_t *area, size_t avail, uint32_t bs)
{
    if (avail < 8)
        return;
    uint32_t bsum = fmt_get32(area + 4), group = avail >= 12 ? fmt_get32(area + 8) : 0;
    uint8_t *dst = calloc(1, bs);
    FZ_CHECK(dst != NULL, "calloc");
    fmt2_rec_state st;
    fmt_error err = fmt2_rec_apply(area, avail, bsum, group, dst, bs, &st);
    FZ_CHECK(err == FMT_OK || err == FMT_ERR_CORRUPT, "record apply gave %d", (int)err);
    FZ_CHECK(st.used <= avail && (st.count == 0) == (st.used == 0),
             "records: %u bytes, %u records of %zu", st.used, st.count, avail);
    fmt2_rec_state walk;
    FZ_CHECK(fmt2_rec_apply(area, avail, bsum, group, NULL, bs, &walk) == FMT_OK &&
             (err != FMT_OK || (walk.used == st.used && walk.chain == st.chain)),
             "a walk without applying finds another chain");
    free(dst);
}

/* ---- version 5: the chained last frame ---- */

/* Decodes the blocks at b (from a chain's first size word) into exactly cap bytes, strict and
 * lenient: both stay inside b and dst, the lenient decode never fails, and a strict one that
 * succeeds ends at an EndMark and found what the lenient one finds. */
static void fzf5_check_decode(const uint8_t *b, size_t avail, uint32_t bs, uint32_t cap)
{
    uint8_t *ds = malloc(cap), *dl = malloc(cap);
    FZ_CHECK((ds && dl) || cap == 0, "malloc");
    fmt2_chain_info si, li;
    fmt_error se = fmt2_chain_decode(b, avail, bs, ds, cap, 1, &si);
    fmt_error le = fmt2_chain_decode(b, avail, bs, dl, cap, 0, &li);
    FZ_CHECK(se == FMT_OK || se == FMT_ERR_CORRUPT, "strict chain decode gave %d", (int)se);
    FZ_CHECK(le == FMT_OK, "lenient chain decode gave %d", (int)le);
    const fmt2_chain_info *in[2] = {&si, &li};
    for (int k = 0; k < 2; k++)
        FZ_CHECK(in[k]->len <= cap && in[k]->area <= avail &&
                     (in[k]->blocks == 0) == (in[k]->len == 0) &&
                     in[k]->area >= (uint64_t)in[k]->blocks * (FMT_BLOCK_OVERHEAD + 1),
                 "chain decode (%s): %u bytes, area %u, %u blocks of %zu, cap %u",
                 k ? "lenient" : "strict", in[k]->len, in[k]->area, in[k]->blocks, avail, cap);
    if (se == FMT_OK)
        FZ_CHECK(si.area + 4 <= avail && fmt_get32(b + si.area) == 0 && si.len == li.len &&
                     si.area == li.area && si.blocks == li.blocks &&
                     memcmp(ds, dl, si.len) == 0,
                 "a strict decode (%u bytes, area %u) that the lenient one (%u, %u) does not find",
                 si.len, si.area, li.len, li.area);
    free(ds);
    free(dl);
}

/* Any bytes as the start of a last slot: parsing, its verification and the prefix recovery
 * keeps stay inside them and say lengths that fit them and the block size. */
static void fzf5_check_at(const uint8_t *buf, size_t avail, uint32_t bs)
{
    uint32_t l0 = 0, f0 = 0, l1 = 0, f1 = 0;
    fmt_error e0 = fmt2_chain_parse(buf, avail, bs, 0, &l0, &f0);
    fmt_error e1 = fmt2_chain_parse(buf, avail, bs, 1, &l1, &f1);
    FZ_CHECK(e0 == FMT_OK || e0 == FMT_ERR_CORRUPT, "chain parse gave %d", (int)e0);
    FZ_CHECK(e1 == FMT_OK || e1 == FMT_ERR_CORRUPT || e1 == FMT_ERR_CHECKSUM ||
             e1 == FMT_ERR_NOMEM, "verifying chain parse gave %d", (int)e1);
    if (e0 == FMT_OK)
        FZ_CHECK(f0 <= avail && l0 >= 1 && l0 < bs &&
                     f0 >= FMT_FRAME_HEADER_LEN + FMT_BLOCK_OVERHEAD + 1 + FMT_FRAME_END_LEN &&
                     fmt_get32(buf + f0 - FMT_FRAME_END_LEN) == 0,
                 "chain: len %u frame %u of %zu, bs %u", l0, f0, avail, bs);
    FZ_CHECK(e0 == FMT_OK || e1 == FMT_ERR_CORRUPT, "a chain that verifies does not parse");
    if (e1 == FMT_OK || e1 == FMT_ERR_CHECKSUM)
        FZ_CHECK(e0 == FMT_OK && l1 == l0 && f1 == f0,
                 "a verifying chain parse (len %u frame %u) differs from a plain one (%u, %u)",
                 l1, f1, l0, f0);
    uint8_t *dst = malloc(bs);
    FZ_CHECK(dst != NULL, "malloc");
    fmt2_chain_info pi;
    fmt_error pe = fmt2_chain_prefix(buf, avail, bs, dst, &pi);
    FZ_CHECK(pe == FMT_OK || pe == FMT_ERR_CORRUPT, "chain prefix gave %d", (int)pe);
    if (pe == FMT_OK)
        FZ_CHECK(pi.blocks >= 1 && pi.len >= 1 && pi.len < bs &&
                     pi.area <= avail - FMT_FRAME_HEADER_LEN && fmt_get32(buf) == FMT_LZ4_MAGIC &&
                     (buf[4] == FMT2_FLG_CHAIN || buf[4] == 0x7C) &&
                     buf[5] == (uint8_t)(fmt_bd_code(bs) << 4),
                 "chain prefix: %u bytes, area %u, %u blocks of %zu, bs %u", pi.len, pi.area,
                 pi.blocks, avail, bs);
    if (e1 == FMT_OK) {
        /* whole and verified: a strict decode gives its content, the prefix all of it */
        uint8_t *whole = malloc(bs);
        fmt2_chain_info ci;
        FZ_CHECK(whole != NULL, "malloc");
        FZ_CHECK(fmt2_chain_decode(buf + FMT_FRAME_HEADER_LEN, avail - FMT_FRAME_HEADER_LEN, bs,
                                   whole, bs, 1, &ci) == FMT_OK &&
                     ci.len == l1 && ci.area == f1 - FMT2_FRAME_OVERHEAD + FMT_BLOCK_OVERHEAD &&
                     XXH32(whole, ci.len, 0) == fmt_get32(buf + f1 - 4),
                 "a chain that verifies (len %u frame %u) does not decode so", l1, f1);
        FZ_CHECK(pe == FMT_OK && pi.len == l1 && pi.area == ci.area && pi.blocks == ci.blocks &&
                     memcmp(dst, whole, l1) == 0,
                 "the prefix of a chain that verifies is not all of it: %u of %u bytes", pi.len,
                 l1);
        free(whole);
    }
    free(dst);
    if (avail >= FMT_FRAME_HEADER_LEN)
        fzf5_check_decode(buf + FMT_FRAME_HEADER_LEN, avail - FMT_FRAME_HEADER_LEN, bs, bs);
}

/* The last slot a footer names, which is where a chain lies. */
static void fzf5_check_last(int fd, const uint8_t *data, size_t size, fmt2_geo g)
{
    fmt2_footer ft;
    if (fmt2_footer_read(fd, size, g, &ft) != FMT_OK || ft.n_blocks == 0)
        return;
    uint64_t at = fmt2_slot_off(g, ft.n_blocks - 1), n = fmt2_slot_len(g);
    if (at < size)
        fzf5_check_at(data + at, size - at < n ? size - at : n, g.bs);
}

static uint32_t fzf5_next(uint32_t *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

/* A chain built from the input: its last byte picks the block size and the number of
 * blocks, the 4 bytes before it seed where the blocks end, which are stored raw, where the
 * chain is cut and which byte is changed, and the bytes before them are its content. The
 * first block is compressed alone (LZ4_compress_default), each later one with the bytes
 * before it as its dictionary (LZ4_compress_fast_continue), as a link is; either is stored
 * raw when so picked or not smaller. It parses, verifies and decodes back to the content;
 * cut anywhere, the prefix recovery keeps exactly its whole blocks; decoded into one byte
 * too few, its last block fails; one byte changed, the parsers keep to their bounds. */
static void fzf5_roundtrip(const uint8_t *data, size_t size)
{
    if (size < 6)
        return;
    uint8_t pick = data[size - 1];
    uint32_t bs = fzf_sizes[pick & 3], nb = 1 + (pick >> 2) % FF_CHAIN_BLOCKS;
    uint32_t seed = fmt_get32(data + size - 5), total = (uint32_t)(size - 5);
    const uint8_t *src = data;
    if (total > bs - 1)
        total = bs - 1;
    if (total > FF_CHAIN_MAX)
        total = FF_CHAIN_MAX;
    if (nb > total)
        nb = total;
    size_t cap = FMT2_FRAME_OVERHEAD + total + (size_t)nb * FMT_BLOCK_OVERHEAD;
    uint8_t *frame = malloc(cap), *comp = malloc((size_t)LZ4_compressBound((int)total));
    LZ4_stream_t *st = LZ4_createStream();
    FZ_CHECK(frame && comp && st, "malloc");
    uint32_t dec_end[FF_CHAIN_BLOCKS], area_end[FF_CHAIN_BLOCKS], pos = 0;
    size_t at = FMT_FRAME_HEADER_LEN;
    fmt2_chain_head(frame, bs, total);
    for (uint32_t j = 0; j < nb; j++) {
        uint32_t n = total - pos;
        if (j + 1 < nb)
            n = 1 + fzf5_next(&seed) % (total - pos - (nb - j - 1));
        int comp_len = 0;
        if (!(fzf5_next(&seed) & 3)) {
            /* stored raw */
        } else if (j == 0) {
            comp_len = LZ4_compress_default((const char *)src, (char *)comp, (int)n,
                                            LZ4_compressBound((int)n));
        } else {
            uint32_t dict = pos < 65536u ? pos : 65536u;
            LZ4_resetStream_fast(st);
            LZ4_loadDict(st, (const char *)src + pos - dict, (int)dict);
            comp_len = LZ4_compress_fast_continue(st, (const char *)src + pos, (char *)comp,
                                                  (int)n, LZ4_compressBound((int)n), 1);
        }
        FZ_CHECK(comp_len >= 0, "LZ4 compression failed");
        size_t l = fmt2_chain_link(frame + at, src + pos, n, comp_len > 0 ? comp : NULL,
                                   (uint32_t)comp_len, XXH32(src, pos + n, 0));
        FZ_CHECK(l >= FMT2_CHAIN_LINK_OVERHEAD + 1 && l <= FMT2_CHAIN_LINK_OVERHEAD + n &&
                     at + l <= cap, "link of %u bytes is %zu", n, l);
        at += l - FMT_FRAME_END_LEN;
        pos += n;
        dec_end[j] = pos, area_end[j] = (uint32_t)(at - FMT_FRAME_HEADER_LEN);
    }
    size_t flen = at + FMT_FRAME_END_LEN;
    uint32_t len = 0, fl = 0;
    fmt_error err = fmt2_chain_parse(frame, flen, bs, 1, &len, &fl);
    FZ_CHECK(err == FMT_OK && len == total && fl == flen,
             "a chain of %u bytes in %u blocks (frame %zu) parses as %d: len %u frame %u", total,
             nb, flen, (int)err, len, fl);
    fzf5_check_at(frame, flen, bs);
    uint8_t *dst = malloc(bs), *cut = malloc(flen + 64);
    FZ_CHECK(dst && cut, "malloc");
    fmt2_chain_info ci;
    FZ_CHECK(fmt2_chain_decode(frame + FMT_FRAME_HEADER_LEN, flen - FMT_FRAME_HEADER_LEN, bs, dst,
                               bs, 1, &ci) == FMT_OK &&
                 ci.len == total && ci.blocks == nb && ci.area == area_end[nb - 1] &&
                 memcmp(dst, src, total) == 0,
             "a chain of %u bytes in %u blocks decodes to %u in %u", total, nb, ci.len, ci.blocks);
    /* followed by other bytes (a padding, the footer), it still ends where it ends */
    memcpy(cut, frame, flen);
    memcpy(cut + flen, data, size < 64 ? size : 64);
    FZ_CHECK(fmt2_chain_parse(cut, flen + (size < 64 ? size : 64), bs, 1, &len, &fl) == FMT_OK &&
                 len == total && fl == flen, "a chain followed by bytes ends at %u, not %zu", fl,
             flen);
    /* one byte too few to decode into: the last block does not fit */
    fzf5_check_decode(frame + FMT_FRAME_HEADER_LEN, flen - FMT_FRAME_HEADER_LEN, bs, total - 1);
    uint8_t *small = malloc(total - 1);
    fmt2_chain_info si;
    FZ_CHECK(small != NULL || total == 1, "malloc");
    FZ_CHECK(fmt2_chain_decode(frame + FMT_FRAME_HEADER_LEN, flen - FMT_FRAME_HEADER_LEN, bs,
                               small, total - 1, 1, &si) == FMT_ERR_CORRUPT,
             "a chain of %u bytes decodes strictly into %u", total, total - 1);
    FZ_CHECK(fmt2_chain_decode(frame + FMT_FRAME_HEADER_LEN, flen - FMT_FRAME_HEADER_LEN, bs,
                               small, total - 1, 0, &si) == FMT_OK &&
                 si.blocks == nb - 1 && si.len == (nb > 1 ? dec_end[nb - 2] : 0) &&
                 memcmp(small, src, si.len) == 0,
             "decoded into %u bytes, a chain of %u in %u blocks gave %u in %u", total - 1, total,
             nb, si.len, si.blocks);
    free(small);
    /* cut (a torn link): the prefix keeps the blocks that are whole, nothing parses */
    size_t keep = fzf5_next(&seed) % (flen + 1);
    uint8_t *torn = malloc(keep ? keep : 1);
    FZ_CHECK(torn != NULL, "malloc");
    memcpy(torn, frame, keep);
    uint32_t k = 0;
    while (k < nb && keep >= FMT_FRAME_HEADER_LEN && area_end[k] <= keep - FMT_FRAME_HEADER_LEN)
        k++;
    err = fmt2_chain_prefix(torn, keep, bs, dst, &ci);
    FZ_CHECK(k == 0 ? err == FMT_ERR_CORRUPT
                    : err == FMT_OK && ci.blocks == k && ci.len == dec_end[k - 1] &&
                          ci.area == area_end[k - 1] && memcmp(dst, src, ci.len) == 0,
             "a chain of %u blocks cut at %zu of %zu: prefix %d with %u blocks, %u bytes "
             "(%u expected)", nb, keep, flen, (int)err, ci.blocks, ci.len, k);
    FZ_CHECK(keep == flen || (fmt2_chain_parse(torn, keep, bs, 0, &len, &fl) == FMT_ERR_CORRUPT &&
                              fmt2_chain_parse(torn, keep, bs, 1, &len, &fl) == FMT_ERR_CORRUPT),
             "a chain cut at %zu of %zu parses", keep, flen);
    fzf5_check_at(torn, keep, bs);
    free(torn);
    /* one byte changed anywhere in it */
    uint32_t r = fzf5_next(&seed);
    uint8_t *bent = malloc(flen);
    FZ_CHECK(bent != NULL, "malloc");
    memcpy(bent, frame, flen);
    bent[r % flen] ^= (uint8_t)(1 + fzf5_next(&seed) % 255);
    fzf5_check_at(bent, flen, bs);
    free(bent);
    free(cut);
    free(dst);
    LZ4_freeStream(st);
    free(comp);
    free(frame);
}

/* At the input's start, with every block size, and the round trip. */
static void fzf5_check_chain(const uint8_t *data, size_t size)
{
    for (int i = 0; i < 4; i++)
        fzf5_check_at(data, size, fzf_sizes[i]);
    fzf5_roundtrip(data, size);
}

/* The frame parser on the first slots, where the input puts them: at their starts and, in
 * version 7, at their pages (FORMAT.md 9.3.1). */
static void fzf2_check_frames(const uint8_t *data, size_t size, fmt2_geo g)
{
    for (uint64_t i = 0; i < 8; i++) {
        uint64_t at = i % 2 ? fmt2_slot_page(g, i / 2) : fmt2_slot_off(g, i / 2);
        if (at >= size)
            break;
        if (i % 2 && at == fmt2_slot_off(g, i / 2))
            continue;
        fzf2_parse_at(data + at, size - at, g.bs);
        fzf2_check_records(data + at, size - at, g.bs);
        fzf5_check_at(data + at, size - at, g.bs);
    }
}

/* A journal that reads is made of entries that the encoder writes byte for byte. */
static void fzf2_check_journal(int fd, const fmt2_footer *ft, uint32_t bs)
{
    uint8_t *buf;
    fmt2_jentry *e;
    uint32_t n;
    fmt_error err = fmt2_journal_read(fd, ft->j_off, ft->j_len, ft->seq, bs, ft->n_blocks,
                                      &buf, &e, &n);
    FZ_CHECK(err == FMT_OK || err == FMT_ERR_NO_TRAILER || err == FMT_ERR_NOMEM ||
             err == FMT_ERR_IO, "journal read gave %d", (int)err);
    if (err != FMT_OK)
        return;
    for (uint32_t k = 0; k < n; k++) {
        FZ_CHECK(e[k].block < ft->n_blocks && (k == 0 || e[k].block > e[k - 1].block) &&
                 e[k].len >= 1 && e[k].len <= bs && (e[k].frame_len == 0) == (e[k].frame == NULL),
                 "journal entry %u: block %llu len %u frame %u", k,
                 (unsigned long long)e[k].block, e[k].len, e[k].frame_len);
        FZ_CHECK(!e[k].frame || (e[k].frame >= buf && e[k].frame + e[k].frame_len <= buf + ft->j_len),
                 "journal entry %u points outside the journal", k);
    }
    size_t len = fmt2_journal_len(e, n);
    FZ_CHECK(len == ft->j_len, "journal of %llu bytes re-encodes to %zu",
             (unsigned long long)ft->j_len, len);
    uint8_t *enc = malloc(len);
    FZ_CHECK(enc != NULL, "malloc");
    fmt2_journal_encode(e, n, ft->seq, enc);
    FZ_CHECK(memcmp(enc, buf, len) == 0, "a journal that reads does not re-encode the same");
    free(enc);
    free(buf);
    free(e);
}

static void fzf2_check_footer(int fd, uint64_t len, fmt2_geo g)
{
    fmt2_footer ft;
    fmt_error err = fmt2_footer_read(fd, len, g, &ft);
    FZ_CHECK(err == FMT_OK || err == FMT_ERR_NO_TRAILER, "footer read gave %d", (int)err);
    if (err != FMT_OK)
        return;
    FZ_CHECK(ft.size <= FMT2_MAX_SIZE && ft.n_blocks == (ft.size + g.bs - 1) / g.bs &&
             ft.fresh <= ft.n_blocks && ft.tail >= FMT_MARKER_LEN &&
             ft.tail <= len - FMT2_FOOTER_LEN &&
             (ft.j_off == 0 ? ft.j_len == 0
                            : ft.j_off >= ft.tail && ft.j_off + ft.j_len <= len - FMT2_FOOTER_LEN),
             "footer: size %llu tail %llu journal %llu+%llu of %llu", (unsigned long long)ft.size,
             (unsigned long long)ft.tail, (unsigned long long)ft.j_off,
             (unsigned long long)ft.j_len, (unsigned long long)len);
    uint8_t b[FMT2_FOOTER_LEN], enc[FMT2_FOOTER_LEN];
    FZ_CHECK(fmt_pread_all(fd, b, sizeof(b), len - FMT2_FOOTER_LEN) == 0, "read footer");
    fmt2_footer_encode(&ft, enc);
    FZ_CHECK(memcmp(b, enc, sizeof(b)) == 0, "a footer that reads does not re-encode the same");
    if (ft.j_len)
        fzf2_check_journal(fd, &ft, g.bs);
}

static void fzf2_check_scan(int fd, uint64_t len, fmt2_geo g)
{
    fmt2_scan_result plain, verified;
    FZ_CHECK(fmt2_scan(fd, len, g, 0, &plain) == FMT_OK, "scan");
    FZ_CHECK(fmt2_scan(fd, len, g, 1, &verified) == FMT_OK, "verifying scan");
    FZ_CHECK(plain.bad_blocks == 0, "a plain walk found bad blocks");
    const fmt2_scan_result *r[2] = {&plain, &verified};
    for (int k = 0; k < 2; k++) {
        FZ_CHECK(r[k]->valid_end <= len && r[k]->valid_end >= FMT_MARKER_LEN &&
                 r[k]->n_blocks == (r[k]->size + g.bs - 1) / g.bs &&
                 r[k]->bad_blocks <= r[k]->n_blocks,
                 "scan: %llu blocks, size %llu, end %llu of %llu",
                 (unsigned long long)r[k]->n_blocks, (unsigned long long)r[k]->size,
                 (unsigned long long)r[k]->valid_end, (unsigned long long)len);
        FZ_CHECK(r[k]->n_blocks == 0 ? r[k]->valid_end == FMT_MARKER_LEN
                                     : r[k]->valid_end > fmt2_slot_off(g, r[k]->n_blocks - 1) &&
                                           r[k]->valid_end <= fmt2_slot_off(g, r[k]->n_blocks),
                 "scan end %llu outside slot %llu", (unsigned long long)r[k]->valid_end,
                 (unsigned long long)r[k]->n_blocks);
    }
    FZ_CHECK(verified.n_blocks <= plain.n_blocks && verified.valid_end <= plain.valid_end,
             "a verifying walk took more than a plain one");
}

/* The footer's checksum (and the journal's it names) recomputed, when they are there. */
static uint8_t *fzf2_fix(const uint8_t *data, size_t size)
{
    if (size < FMT_MARKER_LEN + FMT2_FOOTER_LEN)
        return NULL;
    const uint8_t *foot = data + size - FMT2_FOOTER_LEN;
    if (fmt_get32(foot) != FMT_SKIP_FOOTER2)
        return NULL;
    uint8_t *copy = malloc(size);
    FZ_CHECK(copy != NULL, "malloc");
    memcpy(copy, data, size);
    uint8_t *f = copy + size - FMT2_FOOTER_LEN;
    fmt_put32(f + 4, FMT2_FOOTER_LEN - 8);
    fmt_put32(f + 56, 2);
    fmt_put32(f + 60, XXH32(f + 8, 52, 0));
    uint64_t j_off = fmt_get64(f + 24), j_len = fmt_get64(f + 32);
    if (j_off && j_len >= FMT2_J_HEAD + 4 && j_len <= size - FMT2_FOOTER_LEN &&
        j_off <= size - FMT2_FOOTER_LEN - j_len) {
        uint8_t *j = copy + j_off;
        fmt_put32(j, FMT_SKIP_JOURNAL);
        fmt_put32(j + 4, (uint32_t)(j_len - 8));
        fmt_put64(j + 8, fmt_get64(f + 40));
        fmt_put32(j + j_len - 4, XXH32(j + 8, j_len - 12, 0));
    }
    return copy;
}

/* The trailer's checksum recomputed from what its footer claims, when that fits the input. */
static uint8_t *fzf_fix_trailer(const uint8_t *data, size_t size, size_t *out_len)
{
    if (size < FMT_MARKER_LEN + 8 + FMT_FOOTER_LEN)
        return NULL;
    const uint8_t *foot = data + size - FMT_FOOTER_LEN;
    uint64_t total = fmt_trailer_len(fmt_get32(foot + 8), fmt_get32(foot + 12), fmt_get32(foot + 16));
    if (fmt_get32(foot + 28) != FMT_FOOTER_MAGIC || total > size - FMT_MARKER_LEN)
        return NULL;
    uint8_t *copy = malloc(size);
    FZ_CHECK(copy != NULL, "malloc");
    memcpy(copy, data, size);
    uint8_t *t = copy + size - total;
    fmt_put32(t, FMT_SKIP_TRAILER);
    fmt_put32(t + 4, (uint32_t)(total - 8));
    fmt_put32(copy + size - 8, XXH32(t + 8, total - 16, 0));
    *out_len = size;
    return copy;
}

static void fzf_run(const uint8_t *data, size_t size)
{
    fmt_marker m;
    fzf_check_header(data, size);
    if (size > FMT_MARKER_LEN)
        fzf_check_header(data + FMT_MARKER_LEN, size - FMT_MARKER_LEN);
    fmt_error err = fmt_marker_decode(data, size, &m);
    FZ_CHECK(err == FMT_OK || err == FMT_ERR_FOREIGN || err == FMT_ERR_NEWER, "marker %d", (int)err);
    FZ_CHECK(err != FMT_OK || (size >= FMT_MARKER_LEN && fmt_bd_code(m.block_size)),
             "marker accepted with block size %u", m.block_size);
    int fd = fz_memfile(data, size);
    if (err == FMT_OK && m.version >= FMT_VERSION_2) {
        fmt2_geo g = fmt2_geo_of(m.version, m.block_size);
        fzf2_check_frames(data, size, g);
        fzf5_check_last(fd, data, size, g);
        fzf2_check_footer(fd, size, g);
        fzf2_check_scan(fd, size, g);
    } else if (err == FMT_OK) {
        fzf_check_trailer(fd, size, m.block_size);
        fzf_check_scan(fd, size, m.block_size);
    }
    fzf_check_open(fd, size, err == FMT_OK ? m.block_size : 0, err == FMT_OK ? m.version : 0);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t fixed_len;
    fzf_run(data, size);
    fzf5_check_chain(data, size);
    uint8_t *fixed = fzf_fix_trailer(data, size, &fixed_len);
    if (fixed && memcmp(fixed, data, size) != 0)
        fzf_run(fixed, fixed_len);
    free(fixed);
    fmt_marker m;
    if (fmt_marker_decode(data, size, &m) == FMT_OK && m.version >= FMT_VERSION_2 &&
        (fixed = fzf2_fix(data, size)) != NULL) {
        if (memcmp(fixed, data, size) != 0)
            fzf_run(fixed, size);
        free(fixed);
    }
    return 0;
}
