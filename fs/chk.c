/* Checking and repairing backing files. The frames are the truth and the seek table a cache
 * (docs/FORMAT.md, 2.1), so a file with an intact table is checked against it block by block
 * and frame by frame, and one without is walked and given a table rebuilt from what the walk
 * accepts. Unlike a repair at open, which verifies block checksums during the walk and cuts
 * a bad block that ends the file as a torn tail, the walk here does not verify: a bad block
 * stays in the rebuilt table and is reported, so that every other block of the file stays
 * readable. */
#include "chk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "chk2.h"
#include "fmt2.h"
#include "sb.h"
#include "sizes.h"

typedef struct {
    int fd;
    chk_mode mode;
    chk_say_fn say;
    void *say_ctx;
    chk_result *r;
    const sb_super *store;             /* NULL: unknown */
    uint32_t bs;
    uint32_t version;                  /* the marker's format version */
    int wrote;                         /* the file was written: its times go back */
    int intents_left;                  /* unflipped headers remain (check only) */
    uint8_t *raw;                      /* one block as stored: word, data, checksum */
    uint8_t *dec;                      /* one block decoded */
} chk_ctx;

void chk_vsay(chk_say_fn say, void *ctx, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    if (say)
        say(ctx, line);
}

__attribute__((format(printf, 2, 3))) static void chk_say(chk_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    chk_vsay(c->say, c->say_ctx, fmt, ap);
    va_end(ap);
}

static unsigned long long chk_ull(uint64_t v) { return (unsigned long long)v; }

/* Writes len bytes at off when the mode allows problem p to be repaired; marks it fixed. */
static int chk_patch(chk_ctx *c, uint32_t p, const void *buf, size_t len, uint64_t off)
{
    if (c->mode < CHK_PREEN)
        return 0;
    int rc = fmt_pwrite_all(c->fd, buf, len, off);
    if (rc < 0)
        return rc;
    c->wrote = 1;
    c->r->fixed |= p;
    return 1;
}

/* ---- the header flips of a commit (the same tests as fmt_apply_intents, without writing) */

static int chk_intents_pending(int fd, const fmt_trailer *t)
{
    uint8_t h[8];
    int n = 0, rc;
    for (uint32_t i = 0; i < t->n_retire; i++) {
        if ((rc = fmt_pread_all(fd, h, 4, t->retire[i].off)) < 0)
            return rc;
        n += fmt_get32(h) == FMT_LZ4_MAGIC;
    }
    for (uint32_t i = 0; i < t->n_reveal; i++) {
        if ((rc = fmt_pread_all(fd, h, 8, t->reveal[i])) < 0)
            return rc;
        n += fmt_get32(h) == FMT_SKIP_HIDDEN && fmt_get32(h + 4) != 0;
    }
    return n;
}

/* Finishes (or reports) the flips of the trailer t. */
static int chk_intents(chk_ctx *c, const fmt_trailer *t, const char *which)
{
    int n = chk_intents_pending(c->fd, t);
    if (n <= 0)
        return n;
    c->r->found |= CHK_P_INTENTS;
    if (c->mode < CHK_PREEN) {
        c->intents_left = 1;
        chk_say(c, "interrupted commit: %d header flips of the %s not done", n, which);
        return 0;
    }
    int done = fmt_apply_intents(c->fd, t, 1);
    if (done < 0)
        return done;
    c->wrote = 1;
    c->r->fixed |= CHK_P_INTENTS;
    chk_say(c, "finished an interrupted commit: %d header flips of the %s", done, which);
    return 0;
}

/* ---- blocks and frames against a table ---- */

static uint64_t chk_blen(const fmt_trailer *t, uint32_t bs, uint64_t i)
{
    return i + 1 < t->n_entries ? bs : t->size - i * bs;
}

/* Verifies block i into c->dec. 0: good; 1: bad (reported); <0: -errno. A size word that
 * differs from the table's copy while the data verify with the table's is patched. */
static int chk_block(chk_ctx *c, const fmt_trailer *t, uint64_t i)
{
    const fmt_entry *e = &t->entries[i];
    uint64_t off = fmt_entry_off(e), len = chk_blen(t, c->bs, i);
    uint32_t size = fmt_word_size(e->word);
    int rc = fmt_pread_all(c->fd, c->raw, fmt_block_len(e->word), off);
    if (rc < 0 && rc != -EIO)
        return rc;
    fmt_error err = rc < 0 ? FMT_ERR_IO : FMT_OK;
    if (err == FMT_OK && fmt_get32(c->raw) != e->word) {
        if (XXH32(c->raw + 4, size, 0) != fmt_get32(c->raw + 4 + size)) {
            err = FMT_ERR_CORRUPT;
        } else {
            uint8_t w[4];
            fmt_put32(w, e->word);
            c->r->found |= CHK_P_HEADER;
            chk_say(c, "block %llu: size word at offset %llu differs from the seek table%s",
                    chk_ull(i), chk_ull(off),
                    (rc = chk_patch(c, CHK_P_HEADER, w, 4, off)) > 0 ? ": patched" : "");
            if (rc < 0)
                return rc;
        }
    }
    if (err == FMT_OK)
        err = fmt_block_decode(e->word, c->raw + 4, c->dec, (uint32_t)len);
    if (err == FMT_OK)
        return 0;
    c->r->found |= CHK_P_BLOCK;
    c->r->bad_blocks++;
    chk_say(c, "block %llu (logical bytes %llu..%llu) at offset %llu: %s; not repairable, "
            "reads of it give EIO", chk_ull(i), chk_ull(i * c->bs), chk_ull(i * c->bs + len - 1),
            chk_ull(off), err == FMT_ERR_CHECKSUM ? "checksum mismatch"
                          : err == FMT_ERR_IO ? "cannot be read" : "does not decode");
    return 1;
}

/* The 8-byte wrapper before a visible frame must be a revealed FMT_SKIP_HIDDEN. One still
 * hidden while check-only left the commit's flips undone is that finding, not a new one. */
static int chk_wrapper(chk_ctx *c, uint64_t fstart, uint64_t flen)
{
    uint8_t have[8], want[8];
    if (fstart < FMT_MARKER_LEN + 8)
        return 0;
    int rc = fmt_pread_all(c->fd, have, 8, fstart - 8);
    if (rc < 0)
        return rc;
    fmt_put32(want, FMT_SKIP_HIDDEN);
    fmt_put32(want + 4, 0);
    if (!memcmp(have, want, 8) || (c->intents_left && fmt_get32(have) == FMT_SKIP_HIDDEN &&
                                   fmt_get32(have + 4) == flen))
        return 0;
    c->r->found |= CHK_P_HEADER;
    rc = chk_patch(c, CHK_P_HEADER, want, 8, fstart - 8);
    chk_say(c, "wrapper at offset %llu before the frame at %llu is damaged%s",
            chk_ull(fstart - 8), chk_ull(fstart), rc > 0 ? ": patched" : "");
    return rc < 0 ? rc : 0;
}

/* Frame header, EndMark and content checksum of the frame holding blocks [a, b). */
static int chk_frame_ends(chk_ctx *c, const fmt_trailer *t, uint64_t a, uint64_t b,
                          uint64_t content, int have_sum, uint32_t sum)
{
    uint8_t want[FMT_FRAME_HEADER_LEN], have[FMT_FRAME_HEADER_LEN], end[8];
    uint64_t fstart = fmt_entry_off(&t->entries[a]) - FMT_FRAME_HEADER_LEN;
    uint64_t fend = fmt_entry_off(&t->entries[b - 1]) + fmt_block_len(t->entries[b - 1].word);
    int rc = fmt_pread_all(c->fd, have, sizeof(have), fstart);
    if (rc == 0) {
        fmt_frame_header(want, c->bs, content, 1);
        if (memcmp(have, want, sizeof(want))) {
            c->r->found |= CHK_P_HEADER;
            rc = chk_patch(c, CHK_P_HEADER, want, sizeof(want), fstart);
            chk_say(c, "frame header at offset %llu (blocks %llu..%llu) is damaged%s",
                    chk_ull(fstart), chk_ull(a), chk_ull(b - 1), rc > 0 ? ": patched" : "");
        }
    }
    if (rc >= 0)
        rc = chk_wrapper(c, fstart, fend + FMT_FRAME_END_LEN - fstart);
    if (rc >= 0 && (rc = fmt_pread_all(c->fd, end, 8, fend)) == 0) {
        uint8_t good[8];
        fmt_put32(good, 0);
        fmt_put32(good + 4, have_sum ? sum : fmt_get32(end + 4));
        if (memcmp(end, good, 8)) {
            c->r->found |= CHK_P_HEADER;
            rc = chk_patch(c, CHK_P_HEADER, good, 8, fend);
            chk_say(c, "end of the frame at offset %llu (EndMark or content checksum at %llu) "
                    "is damaged%s", chk_ull(fstart), chk_ull(fend), rc > 0 ? ": patched" : "");
        }
    }
    return rc < 0 ? rc : 0;
}

static int chk_frame(chk_ctx *c, const fmt_trailer *t, uint64_t a, uint64_t b)
{
    XXH32_state_t *st = XXH32_createState();
    if (!st)
        return -ENOMEM;
    XXH32_reset(st, 0);
    uint64_t content = 0;
    int all_good = 1, rc = 0;
    for (uint64_t i = a; i < b && rc >= 0; i++) {
        uint64_t len = chk_blen(t, c->bs, i);
        rc = chk_block(c, t, i);
        if (rc == 0)
            XXH32_update(st, c->dec, len);
        all_good &= rc == 0;
        content += len;
    }
    uint32_t sum = XXH32_digest(st);
    XXH32_freeState(st);
    /* without every block decoded the content checksum cannot be known: it is left alone */
    return rc < 0 ? rc : chk_frame_ends(c, t, a, b, content, all_good, sum);
}

/* Blocks of one frame lie back to back (FORMAT.md 2.7). */
static int chk_frames(chk_ctx *c, const fmt_trailer *t)
{
    int rc = 0;
    for (uint64_t a = 0, b; a < t->n_entries && rc >= 0; a = b) {
        for (b = a + 1; b < t->n_entries; b++) {
            const fmt_entry *p = &t->entries[b - 1];
            if (fmt_entry_off(p) + fmt_block_len(p->word) != fmt_entry_off(&t->entries[b]))
                break;
        }
        rc = chk_frame(c, t, a, b);
    }
    return rc;
}

/* What lz4 -d sees must be what the table says. */
static int chk_walk_agrees(chk_ctx *c, const fmt_trailer *t)
{
    fmt_scan_result sr;
    fmt_error err = fmt_scan(c->fd, c->r->file_len, c->bs, 0, &sr);
    if (err != FMT_OK)
        return -fmt_errno(err);
    uint64_t i = 0, n = sr.table.n_entries < t->n_entries ? sr.table.n_entries : t->n_entries;
    while (i < n && fmt_entry_off(&sr.table.entries[i]) == fmt_entry_off(&t->entries[i]) &&
           sr.table.entries[i].word == t->entries[i].word)
        i++;
    if (i < n || sr.table.n_entries != t->n_entries || sr.table.size != t->size || sr.torn) {
        c->r->found |= CHK_P_WALK;
        chk_say(c, "the frames (what lz4 -d decodes) agree with the seek table only up to "
                "block %llu: the walk finds %llu blocks (%llu bytes, stops at offset %llu), the "
                "table has %llu (%llu bytes); not repairable, reads through the mount use the "
                "table", chk_ull(i), chk_ull(sr.table.n_entries), chk_ull(sr.table.size),
                chk_ull(sr.valid_end), chk_ull(t->n_entries), chk_ull(t->size));
    }
    fmt_trailer_free(&sr.table);
    return 0;
}

static int chk_with_table(chk_ctx *c, fmt_trailer *t)
{
    int rc = chk_intents(c, t, "seek table");
    if (rc == 0)
        rc = chk_frames(c, t);
    /* undone flips or header patches explain a walk that differs: compare only once done */
    if (rc == 0 && !c->intents_left && !(c->r->found & ~c->r->fixed & CHK_P_HEADER))
        rc = chk_walk_agrees(c, t);
    c->r->size = t->size;
    c->r->n_blocks = t->n_entries;
    return rc;
}

/* ---- files without a table at EOF ---- */

/* A machine crash can keep bytes appended after a durable table and lose its flips: finish
 * them before walking, as open does. */
static int chk_last_table(chk_ctx *c)
{
    fmt_scan_result sr;
    fmt_trailer t;
    fmt_error err = fmt_scan(c->fd, c->r->file_len, c->bs, 0, &sr);
    if (err != FMT_OK)
        return -fmt_errno(err);
    int rc = 0;
    if (sr.last_table_end && fmt_trailer_read(c->fd, sr.last_table_end, c->bs, &t) == FMT_OK) {
        rc = chk_intents(c, &t, "last intact seek table");
        fmt_trailer_free(&t);
    }
    fmt_trailer_free(&sr.table);
    return rc;
}

static int chk_write_table(chk_ctx *c, fmt_trailer *t, uint64_t at)
{
    size_t len = fmt_trailer_len(t->n_entries, 0, 0);
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    t->n_reveal = t->n_retire = 0;
    fmt_trailer_encode(t, buf);
    int rc = fmt_pwrite_all(c->fd, buf, len, at);
    free(buf);
    if (rc == 0 && ftruncate(c->fd, (off_t)(at + len)) < 0)
        rc = -errno;
    if (rc == 0 && fdatasync(c->fd) < 0)
        rc = -errno;
    c->wrote = 1;
    t->start = at;
    return rc;
}

static int chk_without_table(chk_ctx *c)
{
    fmt_scan_result sr;
    int rc = chk_last_table(c);
    fmt_error err = rc < 0 ? FMT_OK : fmt_scan(c->fd, c->r->file_len, c->bs, 1, &sr);
    if (rc < 0 || err != FMT_OK)
        return rc < 0 ? rc : -fmt_errno(err);
    uint64_t cut = c->r->file_len - sr.valid_end;
    c->r->found |= CHK_P_TABLE | (cut ? CHK_P_TORN : 0);
    c->r->cut_bytes = cut;
    int fix = c->mode >= CHK_PREEN;
    chk_say(c, "no valid seek table at the end of the file: %s from the frames (%llu blocks, "
            "%llu bytes)", fix ? "rebuilt" : "can be rebuilt", chk_ull(sr.table.n_entries),
            chk_ull(sr.table.size));
    if (cut)
        chk_say(c, "torn tail: %llu bytes after offset %llu do not parse%s", chk_ull(cut),
                chk_ull(sr.valid_end), fix ? ": cut" : "");
    if (fix && (rc = chk_write_table(c, &sr.table, sr.valid_end)) == 0) {
        c->r->fixed |= CHK_P_TABLE | (cut ? CHK_P_TORN : 0);
        c->r->file_len = sr.table.start + fmt_trailer_len(sr.table.n_entries, 0, 0);
    }
    if (rc == 0)
        rc = chk_frames(c, &sr.table);
    c->r->size = sr.table.size;
    c->r->n_blocks = sr.table.n_entries;
    fmt_trailer_free(&sr.table);
    return rc;
}

/* ---- the marker ---- */

/* A file that is foreign only because of a damaged marker: most of the marker's magics are
 * there and, with the marker put right, the seek table at EOF (checksummed) is intact. */
static uint32_t chk_damaged_marker(int fd, const uint8_t *h, uint64_t len)
{
    int magics = (fmt_get32(h) == FMT_LZ4_MAGIC) +
                 (fmt_get32(h + 19) == FMT_SKIP_MARKER && fmt_get32(h + 23) == FMT_MARKER_PAYLOAD) +
                 (fmt_get32(h + 27) == FMT_MARKER_MAGIC);
    static const uint32_t sizes[] = {64u << 10, 256u << 10, 1u << 20, 4u << 20};
    uint32_t cand[6] = {fmt_get32(h + 35), 0, 0, 0, 0, 0};
    if ((h[5] >> 4) >= 4 && (h[5] >> 4) <= 7)
        cand[1] = sizes[(h[5] >> 4) - 4];
    if (magics < 2)
        return 0;
    memcpy(cand + 2, sizes, sizeof(sizes));
    for (size_t k = 0; k < 6; k++) {
        fmt_trailer t;
        if (!fmt_bd_code(cand[k]) || fmt_trailer_read(fd, len, cand[k], &t) != FMT_OK)
            continue;
        fmt_trailer_free(&t);
        return cand[k];
    }
    return 0;
}

/* Sets c->bs and the kind; 1 when the rest of the file is to be checked as an own file. */
/* A version 2 file whose marker a power loss took (fmt2_lost_marker): the daemon's open
 * writes it back (fmt2_restore_marker), and so does a preen; the rest is checked as the
 * version 2 file it is. */
static int chk_lost_marker(chk_ctx *c, const uint8_t *h)
{
    uint32_t version = 0;
    uint32_t bs = fmt2_lost_marker(c->fd, h, c->r->file_len, c->store->block_size, &version);
    if (!bs)
        return c->r->kind = CHK_FOREIGN, 0;
    c->bs = bs, c->version = version, c->r->kind = CHK_OWN;
    c->r->found |= CHK_P_MARKER;
    if (c->mode < CHK_PREEN) {
        chk_say(c, "marker lost (a power loss kept later writes but not the file's first): "
                "the mount and a repair write it back");
        return 1;
    }
    int rc = fmt2_restore_marker(c->fd, version, bs, c->store->uuid);
    if (rc < 0)
        return rc;
    c->wrote = 1;
    c->r->fixed |= CHK_P_MARKER;
    chk_say(c, "marker lost (a power loss): written back (block size %s)", sb_block_size_name(bs));
    return 1;
}

static int chk_marker(chk_ctx *c)
{
    uint8_t h[FMT_MARKER_LEN];
    fmt_marker m;
    if (c->r->file_len < FMT_MARKER_LEN)
        return c->r->kind = CHK_FOREIGN, 0;
    int rc = fmt_pread_all(c->fd, h, sizeof(h), 0);
    if (rc < 0)
        return rc;
    fmt_error err = fmt_marker_decode(h, sizeof(h), &m);
    if (err == FMT_OK)
        return c->bs = m.block_size, c->version = m.version, c->r->kind = CHK_OWN, 1;
    if (err == FMT_ERR_NEWER) {
        chk_say(c, "format version %u is newer than this build (%u): not checked, not written",
                m.version, FMT_VERSION);
        return c->r->kind = CHK_NEWER, 0;
    }
    uint32_t bs = chk_damaged_marker(c->fd, h, c->r->file_len);
    if (!bs && c->store)
        return chk_lost_marker(c, h);
    if (!bs)
        return c->r->kind = CHK_FOREIGN, 0;
    c->bs = bs, c->r->kind = CHK_OWN;
    c->r->found |= CHK_P_MARKER;
    m = (fmt_marker){FMT_VERSION_1, bs, {0}, 0};
    memcpy(m.uuid, h + 43, sizeof(m.uuid));
    uint8_t good[FMT_MARKER_LEN];
    fmt_marker_encode(&m, good);
    if (c->mode < CHK_REPAIR) {
        chk_say(c, "marker damaged (the mount shows the file as foreign); the rest is an "
                "intact own file of block size %s: a repair (-y) rewrites the marker",
                sb_block_size_name(bs));
        c->mode = CHK_CHECK;           /* nothing else is written into a file shown raw */
        return 1;
    }
    if ((rc = chk_patch(c, CHK_P_MARKER, good, sizeof(good), 0)) < 0)
        return rc;
    chk_say(c, "marker damaged: rewritten (block size %s)", sb_block_size_name(bs));
    return 1;
}

int chk_file(int fd, const sb_super *store, chk_mode mode, uint64_t changed_after_ns,
             chk_say_fn say, void *ctx, chk_result *out)
{
    struct stat st;
    memset(out, 0, sizeof(*out));
    if (fstat(fd, &st) < 0)
        return -errno;
    chk_ctx c = {.fd = fd, .mode = mode, .say = say, .say_ctx = ctx, .r = out, .store = store};
    out->file_len = out->size = (uint64_t)st.st_size;
    int rc = chk_marker(&c);
    if (rc > 0 && c.version >= FMT_VERSION_2) {
        out->block_size = c.bs;
        rc = chk2_file(fd, fmt2_geo_of(c.version, c.bs), out->file_len, mode,
                       sb_ns(st.st_ctim) > changed_after_ns, say, ctx, out, &c.wrote);
    } else if (rc > 0) {
        out->block_size = c.bs;
        c.raw = malloc((size_t)c.bs + FMT_BLOCK_OVERHEAD);
        c.dec = malloc(c.bs);
        fmt_trailer t;
        fmt_error err = c.raw && c.dec ? fmt_trailer_read(fd, out->file_len, c.bs, &t)
                                       : FMT_ERR_NOMEM;
        if (err == FMT_OK) {
            rc = chk_with_table(&c, &t);
            fmt_trailer_free(&t);
        } else {
            rc = err == FMT_ERR_NO_TRAILER ? chk_without_table(&c) : -fmt_errno(err);
        }
    }
    free(c.raw);
    free(c.dec);
    if (c.wrote) {
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        if (futimens(fd, ts) < 0 && rc >= 0)
            rc = -errno;
    }
    return rc < 0 ? rc : 0;
}

/* ---- fpgalz4fs-stat ---- */

int chk_stat_file(int fd, chk_stat *out)
{
    struct stat st;
    uint8_t h[FMT_MARKER_LEN];
    fmt_marker m;
    memset(out, 0, sizeof(*out));
    if (fstat(fd, &st) < 0)
        return -errno;
    out->apparent = out->logical = (uint64_t)st.st_size;
    out->disk = (uint64_t)st.st_blocks * 512;
    out->kind = CHK_FOREIGN;
    if (out->apparent < FMT_MARKER_LEN)
        return 0;
    int rc = fmt_pread_all(fd, h, sizeof(h), 0);
    fmt_error err = rc < 0 ? FMT_ERR_IO : fmt_marker_decode(h, sizeof(h), &m);
    if (err == FMT_ERR_NEWER)
        out->kind = CHK_NEWER;
    if (err != FMT_OK)
        return err == FMT_ERR_IO ? rc : 0;
    out->kind = CHK_OWN;
    if (m.version >= FMT_VERSION_2)
        return chk2_stat_file(fd, fmt2_geo_of(m.version, m.block_size), out->apparent, out);
    fmt_trailer t;
    if ((err = fmt_trailer_read(fd, out->apparent, m.block_size, &t)) == FMT_ERR_NO_TRAILER) {
        fmt_scan_result sr;
        out->torn = 1;
        if ((err = fmt_scan(fd, out->apparent, m.block_size, 0, &sr)) == FMT_OK)
            t = sr.table;
    }
    if (err != FMT_OK)
        return -fmt_errno(err);
    out->logical = t.size;
    out->blocks = t.n_entries;
    for (uint32_t i = 0; i < t.n_entries; i++) {
        out->raw_blocks += (t.entries[i].word & FMT_RAW_BIT) != 0;
        out->zero_blocks += (t.entries[i].off & FMT_ENTRY_ZERO) != 0;
    }
    fmt_trailer_free(&t);
    return 0;
}

/* ---- walking a store ---- */

typedef struct {
    char **v;
    size_t n, cap;
} chk_names;

static void chk_names_free(chk_names *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
}

static int chk_name_cmp(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* All names first, sorted: the callback may rename files into this directory (a conversion),
 * and readdir need not show such changes consistently. */
static int chk_list(int fd, chk_names *a)
{
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (errno = 0, e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (a->n == a->cap) {
            size_t cap = a->cap ? a->cap * 2 : 64;
            char **v = realloc(a->v, cap * sizeof(*v));
            if (!v)
                rc = -1, errno = ENOMEM;
            else
                a->v = v, a->cap = cap;
        }
        if (rc == 0 && !(a->v[a->n++] = strdup(e->d_name)))
            a->n--, rc = -1, errno = ENOMEM;
    }
    int saved = errno;
    closedir(d);
    errno = saved;
    if (rc == 0 && saved)
        rc = -1;
    if (rc == 0 && a->n > 1)
        qsort(a->v, a->n, sizeof(*a->v), chk_name_cmp);
    return rc;
}

/* The store's own files at its top (superblock, clean mark, sizes file, their temporaries):
 * no backing files. A conversion's leftover temporary is one, for the walk to remove. */
static int chk_is_store_file(const char *name)
{
    return !strcmp(name, SB_FILE_NAME) || !strcmp(name, SB_TMP_NAME) ||
           !strcmp(name, SB_CLEAN_NAME) || !strcmp(name, SB_CLEAN_TMP_NAME) ||
           !strcmp(name, SZ_FILE_NAME) || !strcmp(name, SZ_TMP_NAME);
}

static int chk_walk_dir(int fd, const char *rel, dev_t dev, chk_walk_fn fn, void *ctx)
{
    chk_names names = {0};
    if (chk_list(fd, &names) < 0) {
        int saved = errno;
        chk_names_free(&names);
        errno = saved;
        return fn(ctx, fd, ".", rel, NULL);
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < names.n; i++) {
        const char *name = names.v[i];
        struct stat st;
        char *path = NULL;
        if (!*rel && chk_is_store_file(name))
            continue;
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;                  /* gone since the listing */
        if (asprintf(&path, "%s%s%s", rel, *rel ? "/" : "", name) < 0) {
            rc = -ENOMEM;
            break;
        }
        if (S_ISREG(st.st_mode)) {
            rc = fn(ctx, fd, name, path, &st);
        } else if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
            int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? fn(ctx, fd, name, path, NULL) : chk_walk_dir(sub, path, dev, fn, ctx);
            if (sub >= 0)
                close(sub);
        }
        free(path);
    }
    chk_names_free(&names);
    return rc;
}

int chk_walk(int dirfd, chk_walk_fn fn, void *ctx)
{
    struct stat st;
    if (fstat(dirfd, &st) < 0)
        return fn(ctx, dirfd, ".", "", NULL);
    return chk_walk_dir(dirfd, "", st.st_dev, fn, ctx);
}

void chk_convert_name(uint64_t ino, char *out, size_t cap)
{
    snprintf(out, cap, CHK_CONVERT_PREFIX "%llx" CHK_CONVERT_SUFFIX, chk_ull(ino));
}

int chk_is_convert_name(const char *name)
{
    size_t lp = strlen(CHK_CONVERT_PREFIX), ls = strlen(CHK_CONVERT_SUFFIX), n = strlen(name);
    if (n <= lp + ls || strncmp(name, CHK_CONVERT_PREFIX, lp) ||
        strcmp(name + n - ls, CHK_CONVERT_SUFFIX))
        return 0;
    for (size_t i = lp; i < n - ls; i++)
        if (!strchr("0123456789abcdef", name[i]))
            return 0;
    return n - ls - lp <= 16;
}
