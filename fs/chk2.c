/* Checking and repairing version 2 files. The recovery is the daemon's own (fmt2_recover:
 * journal replay, or the slot walk with every block verified and a new footer), so fsck and
 * an open repair a file the same way. Then every block is read back as a reader would:
 * frame, block checksum, decoding, content checksum, and the padding that lets `lz4 -d` go
 * from one slot to the next. A bad block is reported and left as it is. */
#include "chk2.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "fmt2.h"

typedef struct {
    int fd;
    fmt2_geo g;                        /* the file's slots */
    chk_say_fn say;
    void *say_ctx;
    chk_result *r;
    const fmt2_recovery *rec;
    uint8_t *buf;                      /* one slot as stored */
    uint32_t skip;                     /* where in it the frame chk2_frame_bytes gave starts */
    uint8_t *dec;                      /* one block decoded */
    uint64_t recs;                     /* blocks whose slot holds page records */
    uint32_t group;                    /* the records' last commit group (the marker's) */
} chk2_ctx;

__attribute__((format(printf, 2, 3))) static void chk2_say(chk2_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    chk_vsay(c->say, c->say_ctx, fmt, ap);
    va_end(ap);
}

static unsigned long long chk2_ull(uint64_t v) { return (unsigned long long)v; }

static void chk2_bad(chk2_ctx *c, uint32_t p, uint64_t i, const char *what)
{
    c->r->found |= p;
    c->r->bad_blocks += p == CHK_P_BLOCK;
    chk2_say(c, "block %llu (slot at offset %llu): %s", chk2_ull(i),
             chk2_ull(fmt2_slot_off(c->g, i)), what);
}

/* The bytes of block i's frame as a reader gets them: a pending journal's copy (a check that
 * wrote nothing) or the slot. *avail: how many bytes of c->buf hold them. */
static const uint8_t *chk2_frame_bytes(chk2_ctx *c, uint64_t i, uint32_t *k, size_t *avail)
{
    const fmt2_recovery *r = c->rec;
    while (*k < r->jn && r->je[*k].block < i)
        (*k)++;
    if (*k < r->jn && r->je[*k].block == i && r->je[*k].frame) {
        *avail = r->je[*k].frame_len;
        return r->je[*k].frame;
    }
    uint64_t at = fmt2_slot_off(c->g, i), want = fmt2_slot_len(c->g), pos;
    if (at >= r->file_len)
        return NULL;
    if (want > r->file_len - at)
        want = r->file_len - at;
    if (fmt_pread_all(c->fd, c->buf, want, at) < 0 || fmt2_frame_at(c->fd, c->g, i, &pos) < 0)
        return NULL;
    c->skip = pos - at < want ? (uint32_t)(pos - at) : 0;   /* version 7: at its page */
    *avail = want - c->skip;
    return c->buf + c->skip;
}

/* Where block i + 1's frame starts (i + 1 < n): the pending journal's place for it when one
 * holds it (a check that wrote nothing), else where its slot has it. */
static uint64_t chk2_next_at(chk2_ctx *c, uint64_t i, uint32_t k)
{
    const fmt2_recovery *r = c->rec;
    uint64_t at = fmt2_slot_off(c->g, i + 1);
    for (; k < r->jn && r->je[k].block <= i + 1; k++)
        if (r->je[k].block == i + 1)
            return fmt2_jentry_place(c->g, &r->je[k]);
    return fmt2_frame_at(c->fd, c->g, i + 1, &at) == 0 ? at : fmt2_slot_off(c->g, i + 1);
}

/* What lz4 -d needs after the frame: padding to the next slot, or to the tail. */
static void chk2_padding(chk2_ctx *c, uint64_t i, uint32_t k, const uint8_t *p, size_t avail,
                         uint32_t flen)
{
    const fmt2_footer *ft = &c->rec->ft;
    if (p != c->buf + c->skip)
        return;                        /* a journal copy: its slot is rewritten from it */
    uint64_t slot_end = (i + 1 < ft->n_blocks ? chk2_next_at(c, i, k) : ft->tail) -
                        (fmt2_slot_off(c->g, i) + c->skip);
    if (slot_end == flen)
        return;
    if (slot_end < flen + 8 || flen + 8 > avail || fmt_get32(p + flen) != FMT_SKIP_PAD ||
        fmt_get32(p + flen + 4) != slot_end - flen - 8)
        chk2_bad(c, CHK_P_WALK, i, "padding after the frame missing or wrong (lz4 -d stops "
                 "here; reads through the mount are right)");
}

/* What the mount reads of a slot whose frame does not parse: the size word at its fixed
 * place, the data and their checksum, decoded. */
static int chk2_block_reads(chk2_ctx *c, const uint8_t *p, size_t avail, uint32_t want)
{
    if (avail < FMT_FRAME_HEADER_LEN + 4)
        return 0;
    uint32_t word = fmt_get32(p + FMT_FRAME_HEADER_LEN), s = fmt_word_size(word);
    if (s == 0 || s > c->g.bs || FMT_FRAME_HEADER_LEN + fmt_block_len(word) > avail)
        return 0;
    return fmt_block_decode(word, p + FMT_FRAME_HEADER_LEN + 4, c->dec, want) == FMT_OK;
}

/* Version 4: the page records behind block i's frame (of flen bytes, block checksum bsum)
 * in its slot, applied as the mount applies them. */
static void chk2_records(chk2_ctx *c, uint64_t i, uint32_t flen, uint32_t bsum, uint32_t len)
{
    fmt2_rec_state st;
    fmt_error err = fmt2_rec_load(c->fd, fmt2_slot_off(c->g, i) + c->skip + flen,
                                  fmt2_slot_off(c->g, i + 1), NULL, 0, bsum,
                                  c->group, c->dec, len, &st);
    if (err == FMT_ERR_CORRUPT)
        chk2_bad(c, CHK_P_BLOCK, i, "a page record's data do not decode");
    else if (err == FMT_OK && st.count)
        c->recs++;
}

/* Version 5: the last block held as a chain (FORMAT.md 9.12). A torn one that a check
 * without writing found is reported by chk2_report, and reads as its blocks that check. */
static void chk2_chain(chk2_ctx *c, uint64_t i, uint32_t k, const uint8_t *p, size_t avail,
                       uint32_t want)
{
    uint32_t len, flen;
    if (c->rec->chain_fixed && !c->rec->settled)
        return;
    fmt_error err = fmt2_chain_parse(p, avail, c->g.bs, 1, &len, &flen);
    if (err != FMT_OK)
        chk2_bad(c, CHK_P_BLOCK, i, err == FMT_ERR_CHECKSUM ? "the chained frame's content "
                 "checksum or length does not match" : "the chained frame is damaged");
    else if (len != want)
        chk2_bad(c, CHK_P_BLOCK, i, "the frame's length differs from the footer's size");
    else
        chk2_padding(c, i, k, p, avail, flen);
}

static void chk2_block(chk2_ctx *c, uint64_t i, uint32_t *k)
{
    const fmt2_footer *ft = &c->rec->ft;
    uint32_t want = i + 1 < ft->n_blocks ? c->g.bs : (uint32_t)(ft->size - i * c->g.bs);
    size_t avail = 0;
    const uint8_t *p = chk2_frame_bytes(c, i, k, &avail);
    if (p == c->buf && avail > 4 && p[4] == FMT2_FLG_CHAIN && i + 1 == ft->n_blocks) {
        chk2_chain(c, i, *k, p, avail, want);
        return;
    }
    uint32_t len, word, flen;
    fmt_error err = p ? fmt2_frame_parse(p, avail, c->g.bs, 1, &len, &word, &flen)
                      : FMT_ERR_CORRUPT;
    if (err == FMT_ERR_CORRUPT && p && chk2_block_reads(c, p, avail, want)) {
        chk2_bad(c, CHK_P_WALK, i, "frame header or end damaged (lz4 -d stops here; reads "
                 "through the mount are right)");
        return;
    }
    if (err != FMT_OK) {
        chk2_bad(c, CHK_P_BLOCK, i, err == FMT_ERR_CHECKSUM ? "block checksum mismatch"
                                                           : "no valid frame in its slot");
        return;
    }
    if (len != want) {
        chk2_bad(c, CHK_P_BLOCK, i, "the frame's length differs from the footer's size");
        return;
    }
    if (fmt_block_decode(word, p + FMT_FRAME_HEADER_LEN + 4, c->dec, len) != FMT_OK) {
        chk2_bad(c, CHK_P_BLOCK, i, "the block does not decode");
        return;
    }
    if (XXH32(c->dec, len, 0) != fmt_get32(p + flen - 4))
        chk2_bad(c, CHK_P_WALK, i, "content checksum mismatch (lz4 -d fails here; reads "
                 "through the mount are right)");
    chk2_padding(c, i, *k, p, avail, flen);
    chk2_records(c, i, flen, fmt_get32(p + flen - FMT2_FRAME_TRAIL), len);
}

/* Whether slot i begins a hole run (version 3): its length, after checking it whole (its
 * end, its data zeros, one group, another block after it); 0 when the slot holds no run
 * head, which chk2_block then checks. A journal's copy of block i comes before the slot. */
static uint32_t chk2_run(chk2_ctx *c, uint64_t i, uint32_t k)
{
    const fmt2_recovery *r = c->rec;
    uint8_t h[FMT2_HOLE_HEAD];
    while (k < r->jn && r->je[k].block < i)
        k++;
    if ((k < r->jn && r->je[k].block == i) ||
        fmt_pread_all(c->fd, h, sizeof(h), fmt2_slot_off(c->g, i)) < 0)
        return 0;
    uint32_t m = fmt2_run_head_parse(h, sizeof(h), c->g.bs);
    if (!m)
        return 0;
    if (i % fmt2_run_group(c->g.bs) + m > fmt2_run_group(c->g.bs) || i + m >= r->ft.n_blocks)
        chk2_bad(c, CHK_P_BLOCK, i, "a hole run that crosses its group or holds the last block");
    else if (!fmt2_run_tail_ok(c->fd, c->g, i, m, 1))
        chk2_bad(c, CHK_P_BLOCK, i, "hole run: checksums, end or padding wrong");
    else if (!fmt2_run_data_zero(c->fd, c->g, i, m))
        chk2_bad(c, CHK_P_BLOCK, i, "hole run: its data do not read as zeros");
    return m;
}

static void chk2_report(chk2_ctx *c, int write)
{
    const fmt2_recovery *r = c->rec;
    uint32_t p = 0;
    if (r->torn) {
        p = CHK_P_TABLE | (r->cut ? CHK_P_TORN : 0);
        chk2_say(c, "no valid footer: %llu blocks (%llu bytes) found in their slots, %llu "
                 "bytes after them %s", chk2_ull(r->ft.n_blocks), chk2_ull(r->ft.size),
                 chk2_ull(r->cut), write ? "cut, footer rewritten" : "to cut");
    } else if (r->replayed) {
        p = CHK_P_INTENTS;
        chk2_say(c, "interrupted commit: %u blocks differ from its journal: %s", r->replayed,
                 write ? "rewritten from it" : "a repair rewrites them from it");
    } else if (write && r->settled && !r->chain_fixed) {
        p = CHK_P_TORN;
        chk2_say(c, "footer not right behind the slots: put back there");
    }
    if (r->chain_fixed) {
        p |= CHK_P_TORN;
        chk2_say(c, "the last block's chained frame ends torn (an append cut short by a "
                 "crash); its blocks that check hold %llu bytes: %s",
                 chk2_ull(r->ft.size - (r->ft.n_blocks - 1) * (uint64_t)c->g.bs),
                 write ? "the frame's end and the footer rewritten behind them"
                       : "a repair ends the frame behind them");
    }
    if (r->chain_padded) {
        p |= CHK_P_TORN;
        chk2_say(c, "the padding behind the last block's chained frame is missing (a link's "
                 "write cut short by a crash): %s", write ? "written" : "a repair writes it");
    }
    if (r->pad_fixed) {
        p |= CHK_P_TORN;
        chk2_say(c, "the padding behind block %llu, the last one synced, is missing (the "
                 "write of the append after it lost to a crash): %s",
                 chk2_ull(r->pad_fixed - 1),
                 write ? "written" : "a repair writes it");
    }
    if (r->unsynced_cut) {
        p |= CHK_P_TORN;
        chk2_say(c, "%llu of the %llu blocks written after the file's last sync did not reach "
                 "the disk whole (a power loss): %s block %llu", chk2_ull(r->unsynced_cut),
                 chk2_ull(r->unsynced), write ? "the file now ends before" :
                 "a repair cuts the file before", chk2_ull(r->ft.n_blocks));
    }
    if (r->journal_bad) {
        p |= CHK_P_INTENTS;
        chk2_say(c, "the journal of the last commit is damaged; the file is read from its "
                 "slots as they are: %s", write ? "the footer no longer names it"
                                                 : "a repair drops it");
    }
    c->r->found |= p;
    if (write)
        c->r->fixed |= p;
}

int chk2_file(int fd, fmt2_geo g, uint64_t file_len, chk_mode mode, int check_fresh,
              chk_say_fn say, void *ctx, chk_result *out, int *wrote)
{
    fmt2_recovery rec;
    int write = mode >= CHK_PREEN;
    fmt_error err = fmt2_recover(fd, file_len, g, write, 0, check_fresh, &rec);
    if (err == FMT_OK && check_fresh)
        err = fmt2_check_fresh(fd, g, write, 0, &rec);
    if (err != FMT_OK)
        return -fmt_errno(err);
    uint8_t flags[4] = {0};
    (void)fmt_pread_all(fd, flags, sizeof(flags), FMT_MARKER_FLAGS_OFF);
    chk2_ctx c = {fd, g, say, ctx, out, &rec, malloc(fmt2_slot_len(g)), 0, malloc(g.bs), 0,
                  fmt2_rec_group_of(fmt_get32(flags))};
    int rc = c.buf && c.dec ? 0 : -ENOMEM;
    *wrote |= write && (rec.settled || rec.replayed || rec.unsynced_cut);
    chk2_report(&c, write);
    out->size = rec.ft.size, out->n_blocks = rec.ft.n_blocks, out->cut_bytes = rec.cut;
    uint32_t k = 0;
    for (uint64_t i = 0; rc == 0 && i < rec.ft.n_blocks; i++) {
        uint32_t m = chk2_run(&c, i, k);
        if (m)
            i += m - 1;
        else
            chk2_block(&c, i, &k);
    }
    if (c.recs)                        /* not a problem: what a crash leaves (FORMAT.md 11.7) */
        chk2_say(&c, "%llu blocks hold page records no writer folded yet (reads through the "
                 "mount apply them; lz4 -d shows these blocks without them until a mount's "
                 "next open of the file folds them)", chk2_ull(c.recs));
    free(c.buf);
    free(c.dec);
    fmt2_recovery_free(&rec);
    return rc;
}

/* A hole is a raw block whose data read as zeros. Its data were never written, so whole
 * pages of it hold no data (SEEK_DATA skips them); the pages it shares with its neighbours'
 * frames hold data, so those two ends are read. */
static int chk2_is_hole(int fd, uint64_t at, uint32_t len, uint64_t page)
{
    uint64_t lo = at + FMT2_HOLE_HEAD, hi = lo + len;
    uint64_t a = (lo + page - 1) / page * page, b = hi / page * page;
    if (a >= b)
        return fmt2_reads_zero(fd, lo, hi);
    off_t d = lseek(fd, (off_t)a, SEEK_DATA);
    if (!(d < 0 && errno == ENXIO) && !(d >= 0 && (uint64_t)d >= b))
        return 0;
    return fmt2_reads_zero(fd, lo, a) && fmt2_reads_zero(fd, b, hi);
}

int chk2_stat_file(int fd, fmt2_geo g, uint64_t file_len, chk_stat *out)
{
    fmt2_footer ft;
    fmt_error err = fmt2_footer_find(fd, file_len, g, &ft);
    if (err == FMT_ERR_NO_TRAILER) {
        fmt2_scan_result sr;
        out->torn = 1;
        if ((err = fmt2_scan(fd, file_len, g, 0, &sr)) == FMT_OK)
            ft.size = sr.size, ft.n_blocks = sr.n_blocks;
    }
    if (err != FMT_OK)
        return -fmt_errno(err);
    out->logical = ft.size, out->blocks = ft.n_blocks;
    struct stat st;
    uint64_t page = fstat(fd, &st) == 0 && st.st_blksize > 0 ? (uint64_t)st.st_blksize : 4096;
    for (uint64_t i = 0; i < ft.n_blocks; i++) {
        uint8_t h[FMT2_HOLE_HEAD];
        uint64_t at;
        if (fmt2_frame_at(fd, g, i, &at) < 0 || fmt_pread_all(fd, h, sizeof(h), at) < 0)
            return -EIO;
        uint32_t word = fmt_get32(h + FMT_FRAME_HEADER_LEN), m;
        if ((m = fmt2_run_head_parse(h, sizeof(h), g.bs)) != 0) {
            out->zero_blocks += m;
            i += m - 1;
            continue;
        }
        if (!(word & FMT_RAW_BIT))
            continue;
        if (chk2_is_hole(fd, at, fmt_word_size(word), page))
            out->zero_blocks++;
        else
            out->raw_blocks++;
    }
    return 0;
}
