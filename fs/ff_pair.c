/* The footer pair of version 2 files (docs/FORMAT.md 9.10, 11.6): while durable commits
 * that rewrite blocks in place follow one another, each writes its journal into the half of
 * a small area behind the slots that the journal of the commit before does not hold, and its
 * footer into the other of two footer places at the end of the file, so that nothing the
 * commit before still needs is overwritten before this commit's own sync: one sync each. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ff_slots.h"

/* The pair's area is two halves, each a quarter larger than the journal that laid it out
 * plus 2 KiB, so that journals that grow a little from commit to commit still fit. The whole
 * area stays under one block, so that slots, area and pair keep within two blocks of the
 * logical size (FORMAT.md 13) as the small journal of 11.1 does, or under an eighth of the
 * slots before it: random writes with an fsync every few (a database on a large file) make
 * journals of many blocks, which would otherwise pay two syncs and two changes of length per
 * commit. A file keeps an area over one block only while it is open (ff2_pair_rest). 0: no
 * half fits a journal of jlen bytes behind n slots. */
#define FF2_PAIR_SLACK 2048u
#define FF2_PAIR_ZEROS (32u << 10)     /* the most opening the pair writes ahead of a journal */
#define FF2_PAIR_SMALL(bs) ((uint64_t)(bs) / 2 - FMT2_PAIR_LEN)
static uint64_t ff2_pair_half(fmt2_geo g, uint64_t n, uint64_t jlen)
{
    uint64_t want = jlen + jlen / 4 + FF2_PAIR_SLACK, most = fmt2_slot_off(g, n) / 16;
    if (most < FF2_PAIR_SMALL(g.bs))
        most = FF2_PAIR_SMALL(g.bs);
    uint64_t half = (want < most ? want : most) / FMT2_PAIR_LEN * FMT2_PAIR_LEN;
    return jlen + 8 <= half ? half : 0;    /* room for the padding behind it */
}

/* Whether this commit's journal goes into the footer pair: the commit syncs anyway (it is
 * durable or rewrites a promised block), rewrites committed blocks and nothing else (an
 * appended slot would land in the area), and its journal is small. */
int ff2_pair_wanted(const ff_file *f, const ff2_frames *fr, const ff2_target *t)
{
    if (t->shrink || t->n != f->n_stored || !fr->n || fr->v[fr->n - 1].block >= f->n_stored ||
        f->v2.footerless)
        return 0;
    uint32_t n_j;
    int promised;
    fmt2_jentry *e = ff2_jentries(f, fr, &n_j, &promised);
    int yes = e && (t->durable || promised) &&
              ff2_pair_half(ff2_geo(f), t->n, fmt2_journal_len(e, n_j));
    free(e);
    return yes;
}

/* The two halves of the area: [area, area + half) and [area + half, eof - 128). */
static uint64_t ff2_half_end(const ff_file *f, uint64_t at)
{
    return at == f->v2.area ? f->v2.area + f->v2.half : f->v2.eof - FMT2_PAIR_LEN;
}

/* Whether a journal of jlen bytes fills the half starting at at exactly or leaves room for
 * the padding frame that covers the rest of it. */
static int ff2_half_fits(const ff_file *f, uint64_t at, uint64_t jlen)
{
    uint64_t room = ff2_half_end(f, at) - at;
    return jlen == room || jlen + 8 <= room;
}

/* Where a journal of jlen bytes goes in the pair's area without touching the journal of the
 * commit before, which is live until this commit's sync: the other half. 0: it does not
 * fit. */
static uint64_t ff2_pair_room(const ff_file *f, uint64_t jlen)
{
    if (!f->v2.paired)
        return 0;
    uint64_t at = f->v2.j_off == f->v2.area ? f->v2.area + f->v2.half : f->v2.area;
    return ff2_half_fits(f, at, jlen) ? at : 0;
}

/* A new area and pair behind the slots, with halves for journals of about jlen bytes. The
 * pair goes past the file's present end, where its places read as zeros until written, so
 * that no footer of an earlier layout can be taken for one of it; a live journal is synced
 * first, since the new one may overwrite it. Nothing is written past the present end here:
 * ff2_pair_pads finishes the layout after the commit's sync. */
static int ff2_pair_lay_out(ff_file *f, uint64_t n, uint64_t tail, uint64_t jlen)
{
    struct stat st;
    int rc = f->v2.j_live ? ff2_sync(f) : 0;
    if (rc == 0 && fstat(f->fd, &st) < 0)
        rc = -errno;
    /* The footer that ends the file now, if one does, lies behind the slots, where a later
     * footer written at the tail may land exactly over it. Were that write lost and the cut
     * after it kept, this one would end the file again, naming slots that changed since.
     * It is zeroed here, on the disk with the pair commit's sync. */
    if (rc == 0 && (uint64_t)st.st_size >= tail + FMT2_FOOTER_LEN)
        rc = fmt2_zero(f->fd, (uint64_t)st.st_size - FMT2_FOOTER_LEN, FMT2_FOOTER_LEN);
    uint64_t area = fmt2_slot_off(ff2_geo(f), n), half = ff2_pair_half(ff2_geo(f), n, jlen);
    uint64_t end = area + 2 * half;
    if (rc == 0 && end < (uint64_t)st.st_size)
        end = (uint64_t)st.st_size;
    f->v2.paired = 0, f->v2.area = area, f->v2.half = half, f->v2.place = 0;
    f->v2.eof = (end + FMT2_PAIR_LEN - 1) / FMT2_PAIR_LEN * FMT2_PAIR_LEN + FMT2_PAIR_LEN;
    return rc;
}

/* The rest of a new layout, so that the stock lz4 reads through it (FORMAT.md 9.10): from
 * tail, the end of the last slot's extent, a padding frame up to the area, and the second
 * half a padding frame until a journal goes there. Written after the commit's sync: a power
 * loss may keep any write that was not synced and lose the one that made the file long
 * enough for it, and a write past the synced end of a file that survives alone must be one
 * the open recognizes as ours (a frame, a journal, a footer; FORMAT.md 11.4 step 0), which a
 * padding header is not. */
static int ff2_pair_pads(ff_file *f, uint64_t tail, int punch, int half1)
{
    int rc = tail < f->v2.area ? ff2_pad(f, tail, f->v2.area, punch) : 0;
    if (rc == 0 && half1)
        rc = ff2_pad(f, f->v2.area + f->v2.half, f->v2.eof - FMT2_PAIR_LEN, 0);
    return rc;
}

/* Opening the pair writes half 0 and half 1's padding header before the commit's sync, when
 * they are small (a database's journal file): the next journal then goes over written space,
 * so that commit changes no metadata and its sync is the data alone. The write begins with
 * an empty journal (28 bytes, checksummed), which the open recognizes as a version 2 file's
 * should a power loss keep this write alone past the synced end of a new file (11.4 step
 * 0). 0: written; 1: not (too large). */
static int ff2_pair_prefill(ff_file *f)
{
    uint64_t len = f->v2.half + 8, j = FMT2_J_HEAD + 4;
    if (len > FF2_PAIR_ZEROS)
        return 1;
    uint8_t *b = calloc(1, len);
    if (!b)
        return -ENOMEM;
    fmt2_journal_encode(NULL, 0, 0, b);
    fmt2_pad_header(b + j, f->v2.half - j);
    fmt2_pad_header(b + f->v2.half, f->v2.eof - FMT2_PAIR_LEN - f->v2.area - f->v2.half);
    int rc = fmt_pwrite_all(f->fd, b, len, f->v2.area);
    free(b);
    return rc;
}

/* The journal at at, and the padding frame that covers the rest of its half, in one write. */
static int ff2_pair_journal(ff_file *f, const fmt2_jentry *e, uint32_t n, uint64_t at,
                            uint64_t *len)
{
    *len = fmt2_journal_len(e, n);
    uint64_t room = ff2_half_end(f, at) - at;
    uint8_t pad[8];
    if (room > *len)
        fmt2_pad_header(pad, room - *len);
    return ff2_pwrite_journal(f, e, n, at, pad, room > *len ? sizeof(pad) : 0);
}

/* The footer into place k; right after a lay-out, place 1's footer and place 0's padding
 * frame in one write, which extends the file with a footer the open recognizes. */
static int ff2_pair_footer(ff_file *f, int k, const fmt2_footer *ft, int laid_out)
{
    uint8_t b[FMT2_PAIR_LEN];
    if (!laid_out)
        return fmt2_place_write(f->fd, f->v2.eof, k, ft);
    memset(b, 0, sizeof(b));
    fmt2_pad_header(b, FMT2_FOOTER_LEN);
    fmt2_footer_encode(ft, b + FMT2_FOOTER_LEN);
    return fmt_pwrite_all(f->fd, b, sizeof(b), fmt2_place_off(f->v2.eof, 0));
}

/* A durable in-place commit through the pair: journal into the area, beside the one the
 * commit before synced; footer into the other place; one sync; that older footer cleared
 * (its journal is dead from here; the clearing is on the disk before anything overwrites
 * that journal, since that waits for the next sync); then the slots. When the commit
 * rewrites the last block, t->tail becomes the area's start (that slot is padded to it). */
int ff2_commit_pair(ff_file *f, const ff2_frames *fr, ff2_target *t)
{
    uint32_t n_j;
    int promised, laid_out = 0;
    fmt2_jentry *e = ff2_jentries(f, fr, &n_j, &promised);
    if (!e)
        return -ENOMEM;
    uint64_t jlen = fmt2_journal_len(e, n_j), at = ff2_pair_room(f, jlen);
    int rc = ff2_reserve_slots(f, e, n_j);
    if (rc == 0 && at == 0 && (rc = ff2_pair_lay_out(f, t->n, t->tail, jlen)) == 0)
        at = f->v2.area, laid_out = 1;
    /* a rewritten last block's slot is padded up to the area (its rewrite, after the sync,
     * writes that padding); otherwise the tail stays where the last slot ends, and a padding
     * frame from there reaches the area */
    if (fr->v[fr->n - 1].block + 1 == t->n)
        t->tail = fmt2_slot_off(ff2_geo(f), t->n);
    if (rc == 0)
        rc = ff2_pair_journal(f, e, n_j, at, &jlen);
    free(e);
    int place = laid_out ? 1 : 1 - f->v2.place;
    fmt2_footer ft = ff2_footer(f, t->size, t->tail, at, jlen, t->fresh_pre);
    ft.paired = 1;
    if (rc == 0)
        rc = ff2_pair_footer(f, place, &ft, laid_out);
    if (rc == 0)
        f->v2.seq++, f->v2.disk_fresh = ft.fresh, f->v2.j_off = at, f->v2.j_len = jlen,
        f->v2.footerless = 0, f->v2.j_pending = 1, f->v2.jp_n = t->n, f->v2.jp_tail = t->tail,
        f->v2.paired = 1, f->v2.place = place;
    if (rc == 0 && (rc = ff2_sync_for(f, t->durable)) == 0) {
        f->v2.j_live = 1;
        f->env->n.pair_commits++;
        rc = laid_out ? ff2_pair_pads(f, t->tail, 1, 1)
                      : fmt2_place_write(f->fd, f->v2.eof, 1 - place, NULL);
    }
    if (rc == 0)
        rc = ff2_write_in_place(f, fr, t->n, t->tail, NULL);
    if (rc == 0) {
        f->v2.j_pending = 0;
        ff2_start_writeback(f);
    } else {                           /* the next commit lays the pair out anew, past it */
        f->v2.paired = 0;
    }
    return rc;
}

/* A durable commit that only appended: instead of a footer at the tail, a pair laid out for
 * the last block, its footer naming no journal. A writer that syncs and then rewrites what
 * it appended (a database's journal file rewrites its header) then finds the pair in place:
 * its commit changes no length and allocates nothing, so its sync is the backing file's data
 * alone. Not when the last block's journal would not fit a half. The pair is only an
 * optimization: when laying it out fails (a full disk), the appended blocks are committed
 * the usual way (1: the caller settles, which cuts what the attempt wrote). */
int ff2_commit_open_pair(ff_file *f, const ff2_frames *fr, ff2_target *t)
{
    uint64_t flen = 0;
    const ff2_frame *last = &fr->v[fr->n - 1];
    if (last->block + 1 == t->n)
        flen = last->frame_len ? last->frame_len : last->len + FMT2_FRAME_OVERHEAD;
    uint64_t jlen = FMT2_J_HEAD + FMT2_J_ENTRY + 4 + flen;
    if (!flen || !ff2_pair_half(ff2_geo(f), t->n, jlen))
        return 1;
    int rc = ff2_pair_lay_out(f, t->n, t->tail, jlen), unfilled = 1;
    if (rc == 0 && (unfilled = ff2_pair_prefill(f)) < 0)
        rc = unfilled;
    fmt2_footer ft = ff2_footer(f, t->size, t->tail, 0, 0, t->fresh_pre);
    ft.paired = 1;
    if (rc == 0)
        rc = ff2_pair_footer(f, 1, &ft, 1);
    if (rc < 0)
        return 1;
    f->v2.seq++, f->v2.disk_fresh = ft.fresh, f->v2.j_off = f->v2.j_len = 0,
    f->v2.footerless = 0, f->v2.paired = 1, f->v2.place = 1;
    rc = ff2_sync_for(f, t->durable);
    /* after the sync, inside what it made durable: the last frame's padding to the area (in
     * its page, already written: not punched, which would change metadata), and the halves'
     * padding frames when the prefill did not write them */
    if (rc == 0)
        rc = ff2_pair_pads(f, t->tail, 0, unfilled);
    if (rc == 0 && unfilled)
        rc = ff2_pad(f, f->v2.area, f->v2.area + f->v2.half, 0);
    if (rc < 0)
        f->v2.paired = 0;
    return rc;
}

/* The last handle is gone and the daemon keeps the file's state for its next open: a pair
 * whose area is over one block is left as the last release leaves any pair (sync, then the
 * footer behind the slots), so that a file at rest keeps within two blocks of its logical
 * size (FORMAT.md 13). */
int ff2_pair_rest(ff_file *f)
{
    if (!f->v2.paired || f->v2.half <= FF2_PAIR_SMALL(f->bs))
        return 0;
    return ff2_release(f);
}
