/* The one recovery of version 2 and later files (docs/FORMAT.md 11.4), shared by the
 * daemon's open and fsck: the journal replayed, the footer settled or the slots walked,
 * and the blocks written after the last sync checked. */
#include "fmt2.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the padding after the journal's entry e[k] ends: at the next slot's frame, which
 * is the next entry's when that is the next block (its place follows from its frame), else
 * where it lies on the disk; the last slot's extent ends at the footer's tail. */
uint64_t fmt2_jentry_end(int fd, fmt2_geo g, uint64_t n_blocks, uint64_t tail,
                         const fmt2_jentry *e, uint32_t n, uint32_t k)
{
    uint64_t i = e[k].block, at;
    if (i + 1 >= n_blocks)
        return tail;
    if (k + 1 < n && e[k + 1].block == i + 1)
        return fmt2_jentry_place(g, &e[k + 1]);
    return fmt2_frame_at(fd, g, i + 1, &at) == 0 ? at : fmt2_slot_off(g, i + 1);
}

/* Whether slot e->block already holds what the journal says: the frame (a hole: its
 * header, zeros and tail) and the padding header behind it. Each is a write of its own, and
 * after a power loss any of them may be missing while the others are there. want and tmp
 * hold a slot each. */
static int fmt2_slot_matches(int fd, fmt2_geo g, const fmt2_jentry *e, uint32_t zsum,
                             uint64_t end, uint8_t *want, uint8_t *tmp)
{
    uint64_t s = fmt2_slot_off(g, e->block), n;
    uint64_t at = fmt2_jentry_place(g, e);
    /* a frame on the page boundary: an older one at the slot's start would be read first */
    if (at != s && fmt2_lz4_at(fd, s) != 0)
        return 0;
    if (e->frame) {
        memcpy(want, e->frame, e->frame_len);
        n = e->frame_len;
    } else {
        fmt2_hole_head(want, g.bs, e->len);
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
static fmt_error fmt2_replay_entries(int fd, fmt2_geo g, int write, uint32_t zsum,
                                     const fmt2_footer *ft, const fmt2_jentry *e, uint32_t n,
                                     uint32_t *replayed)
{
    uint8_t *tmp = malloc(2 * fmt2_slot_len(g));
    fmt_error err = tmp ? FMT_OK : FMT_ERR_NOMEM;
    for (uint32_t k = 0; err == FMT_OK && k < n; k++) {
        uint32_t sum = e[k].frame ? 0 : e[k].len == g.bs && zsum ? zsum : fmt2_zero_sum(e[k].len);
        uint64_t end = fmt2_jentry_end(fd, g, ft->n_blocks, ft->tail, e, n, k);
        if (!fmt2_slot_matches(fd, g, &e[k], sum, end, tmp + fmt2_slot_len(g), tmp)) {
            (*replayed)++;
            if (write && fmt2_write_slot(fd, g, e[k].block, e[k].frame, e[k].frame_len,
                                         e[k].len, sum, end, NULL) < 0)
                err = FMT_ERR_IO;
        }
        /* version 7: the padding before it reaches where its frame now is (9.3.1); a slot
         * before it that does not parse is damage the reads report, not the replay's */
        if (err == FMT_OK && write && g.paged && (k == 0 || e[k - 1].block + 1 != e[k].block))
            (void)fmt2_pad_before(fd, g, e[k].block, fmt2_jentry_place(g, &e[k]));
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
static fmt_error fmt2_replay(int fd, fmt2_geo g, int write, uint32_t zsum, fmt2_recovery *r)
{
    fmt2_jentry *e = NULL;
    uint32_t n = 0;
    fmt_error err = fmt2_journal_of(fd, g.bs, &r->ft, &r->jbuf, &e, &n);
    if (err == FMT_ERR_NO_TRAILER) {   /* lost with its commit, which synced nothing */
        r->journal_bad = 1;
        return FMT_OK;
    }
    if (err == FMT_OK)
        err = fmt2_replay_entries(fd, g, write, zsum, &r->ft, e, n, &r->replayed);
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
static int64_t fmt2_repunch_holes(int fd, uint64_t file_len, fmt2_geo g, uint64_t n)
{
    uint8_t *buf = malloc(fmt2_slot_len(g));
    int64_t done = buf ? 0 : -1;
    for (uint64_t i = 0; done >= 0 && i < n; i++) {
        uint32_t len = 0, flen = 0;
        int padded;
        /* a checksum that fails comes after the frame parsed: len and the size word hold */
        if (fmt2_scan_slot(fd, file_len, g, i, 1, buf, &len, &flen, &padded) !=
                FMT_ERR_CHECKSUM ||
            !(fmt_get32(buf + FMT_FRAME_HEADER_LEN) & FMT_RAW_BIT) ||
            fmt_get32(buf + FMT2_HOLE_HEAD + len) != fmt2_zero_sum(len))
            continue;
        if (fmt2_zero(fd, fmt2_slot_off(g, i) + FMT2_HOLE_HEAD, len) < 0)
            done = -1;
        else
            done++;
    }
    free(buf);
    return done;
}

/* Version 7: the padding before each of the first n slots' frames reaches it (9.3.1): a
 * crash between a frame's move to or from its slot's page and the padding before it,
 * without a journal that redoes both, leaves one that does not. Only lz4 -d needs it (the
 * walk and the reads find each frame by itself): a padding that cannot be mended (a slot
 * before it that does not parse, a failed write) is left as it is. */
static void fmt2_mend_pads(int fd, fmt2_geo g, uint64_t n)
{
    for (uint64_t i = 1; i < n; i++) {
        uint8_t h[FMT2_HOLE_HEAD];
        uint64_t at;
        if (fmt2_frame_at(fd, g, i, &at) < 0 || fmt_pread_all(fd, h, sizeof(h), at) < 0 ||
            fmt_get32(h) != FMT_LZ4_MAGIC)
            continue;                  /* inside a run, or damage the reads report */
        (void)fmt2_pad_before(fd, g, i, at);
        uint32_t m = fmt2_run_head_parse(h, sizeof(h), g.bs);
        i += m ? m - 1 : 0;
    }
}

static fmt_error fmt2_recover_walk(int fd, fmt2_geo g, int write, fmt2_recovery *r)
{
    fmt2_scan_result sr;
    fmt_error err = fmt2_scan(fd, r->file_len, g, 1, &sr);
    if (err != FMT_OK)
        return err;
    if (write && sr.bad_blocks) {
        int64_t punched = fmt2_repunch_holes(fd, r->file_len, g, sr.n_blocks);
        if (punched < 0 || (punched > 0 && fdatasync(fd) < 0))
            return FMT_ERR_IO;
        if (punched > 0 && (err = fmt2_scan(fd, r->file_len, g, 1, &sr)) != FMT_OK)
            return err;
    }
    if (sr.n_blocks)                   /* records in the last slot stay counted */
        sr.valid_end = fmt2_rec_tail(fd, g, sr.n_blocks,
                                     (uint32_t)(sr.size - (sr.n_blocks - 1) * (uint64_t)g.bs),
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
    if (g.paged)
        fmt2_mend_pads(fd, g, sr.n_blocks);
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
static fmt_error fmt2_recover_pair(int fd, fmt2_geo g, int write, uint32_t zsum,
                                   fmt2_recovery *r)
{
    fmt2_footer pl[2];
    uint8_t *buf[2] = {NULL, NULL};
    fmt2_jentry *e[2] = {NULL, NULL};
    uint32_t ne[2] = {0, 0};
    int n = 0, ok[2] = {0, 0}, top = -1, old = -1;
    fmt_error err = fmt2_pair_read(fd, r->file_len, g, pl, &n);
    for (int k = 0; err == FMT_OK && k < n; k++) {   /* a footer may name no journal */
        err = pl[k].j_len ? fmt2_journal_of(fd, g.bs, &pl[k], &buf[k], &e[k], &ne[k]) : FMT_OK;
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
            err = fmt2_replay_entries(fd, g, write, zsum, &r->ft, e[0], ne[0], &r->replayed);
    }
    if (err == FMT_OK)
        err = fmt2_replay_entries(fd, g, write, zsum, &r->ft, e[top], ne[top], &r->replayed);
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

static fmt_error fmt2_recover_state(int fd, uint64_t file_len, fmt2_geo g, int write,
                                    uint32_t zsum, fmt2_recovery *r)
{
    memset(r, 0, sizeof(*r));
    r->file_len = file_len;
    fmt_error err = fmt2_footer_read(fd, file_len, g, &r->ft);
    if (err == FMT_ERR_NO_TRAILER) {
        err = fmt2_recover_pair(fd, g, write, zsum, r);
        return err == FMT_ERR_NO_TRAILER ? fmt2_recover_walk(fd, g, write, r) : err;
    }
    if (err != FMT_OK)
        return err;
    if (r->ft.j_len && (err = fmt2_replay(fd, g, write, zsum, r)) != FMT_OK)
        return err;
    /* A journal that does not read back was lost with a commit that synced nothing (a synced
     * one is whole): the footer's size and tail are that commit's, which its slots may not
     * hold. The slots as they are say what the file is: every block it promised is among
     * them, untouched (only a synced journal rewrites those). */
    if (r->journal_bad)
        return fmt2_recover_walk(fd, g, write, r);
    int odd = r->ft.j_len ? r->ft.j_off != r->ft.tail || r->journal_bad
                          : file_len != r->ft.tail + FMT2_FOOTER_LEN;
    if (!write || (!r->replayed && !odd))
        return FMT_OK;
    if (r->replayed && fdatasync(fd) < 0)
        return FMT_ERR_IO;
    return fmt2_settle(fd, r);
}

fmt_error fmt2_recover(int fd, uint64_t file_len, fmt2_geo g, int write, uint32_t zsum,
                       int crashed, fmt2_recovery *r)
{
    fmt_error err = fmt2_recover_state(fd, file_len, g, write, zsum, r);
    return err == FMT_OK ? fmt2_chain_settle(fd, g, write, crashed, r) : err;
}

/* Whether slot i holds a whole block as the footer ft describes it (i < n - 1: a full
 * block padded to the next slot; the last: the footer's size, its extent ending at tail),
 * or a whole hole run followed by another block (*m: its length, else 0); *flen: the
 * frame's length. *fail: an error that says nothing about the slot (no memory). */
static int fmt2_slot_whole(int fd, uint64_t file_len, fmt2_geo g, const fmt2_footer *ft,
                           uint64_t i, uint8_t *buf, uint32_t *flen, uint32_t *m,
                           fmt_error *fail)
{
    uint32_t len = 0;
    int padded = 0;
    fmt_error err = fmt2_scan_slot(fd, file_len, g, i, 1, buf, &len, flen, &padded);
    if (err == FMT_ERR_NOMEM)
        *fail = err;
    *m = err == FMT_ERR_CORRUPT ? fmt2_scan_run(fd, g, i, 1, buf, fmt2_slot_len(g)) : 0;
    if (*m)
        return i + *m < ft->n_blocks;
    if (err != FMT_OK)
        return 0;
    if (i + 1 < ft->n_blocks)
        return len == g.bs && padded;
    uint64_t at = fmt2_slot_off(g, i), fend = at + *flen;
    if (len != ft->size - i * (uint64_t)g.bs || fend > ft->tail)
        return 0;
    return fend == ft->tail || (ft->tail <= fmt2_slot_off(g, i + 1) && fend + 8 <= ft->tail &&
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
static int fmt2_fresh_pad(int fd, uint64_t file_len, fmt2_geo g, uint64_t i, uint8_t *buf,
                          int write, fmt_error *fail)
{
    uint32_t len = 0, flen = 0;
    int padded = 0;
    if (fmt2_scan_slot(fd, file_len, g, i, 0, buf, &len, &flen, &padded) != FMT_OK ||
        len != g.bs)
        return 0;
    uint64_t next;
    if (fmt2_frame_at(fd, g, i + 1, &next) < 0)
        return 0;
    return fmt2_pad_mend(fd, fmt2_slot_off(g, i) + flen, next, 0, write, fail);
}

fmt_error fmt2_check_fresh(int fd, fmt2_geo g, int write, int promise, fmt2_recovery *r)
{
    fmt2_footer ft = r->ft;
    if (ft.fresh >= ft.n_blocks)
        return FMT_OK;
    uint8_t *buf = malloc(fmt2_slot_len(g));
    if (!buf)
        return FMT_ERR_NOMEM;
    fmt_error pad_err = FMT_OK;
    if (ft.fresh > 0 && !fmt2_in_journal(r, ft.fresh - 1))
        r->pad_fixed = fmt2_fresh_pad(fd, r->file_len, g, ft.fresh - 1, buf, write, &pad_err)
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
        if (!fmt2_slot_whole(fd, r->file_len, g, &ft, i, buf, &flen, &m, &fail))
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
        if (i > 0 && fmt2_scan_slot(fd, r->file_len, g, i - 1, 0, buf, &len, &prev,
                                    &padded) != FMT_OK)
            prev = 0;
        r->unsynced_cut = ft.n_blocks - i;
        r->chain_area = 0;             /* the chain, if any, was in a block cut off */
        ft.n_blocks = i, ft.size = i * (uint64_t)g.bs;
        ft.tail = i ? fmt2_slot_off(g, i - 1) + prev : FMT_MARKER_LEN;
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

void fmt2_recovery_free(fmt2_recovery *r)
{
    free(r->jbuf);
    free(r->jbuf_old);
    free(r->je);
    free(r->jat);
    r->jbuf = r->jbuf_old = NULL, r->je = NULL, r->jat = NULL, r->jn = 0;
}
