/* Commits of format version 2 files (docs/FORMAT.md, part II): every block has its own slot,
 * so a commit writes the blocks that changed and nothing else. The footer pair is in
 * ff_pair.c, opening and repair in ff_load2.c; ff_slots.h is what they share.
 *
 * Blocks past the committed ones (appends, holes) go straight to their slots: nothing old
 * lies there. Blocks rewritten in place go first into a journal after the slots, which the
 * footer names, then into their slots; a crash in between is finished at the next open by
 * replaying the journal. The journal is synced before the slots are touched only when a slot
 * may hold data an fsync promised (or the caller wants durability): rewriting data no one
 * was promised needs only the order that the page cache keeps for a killed daemon. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bcache.h"
#include "ff_slots.h"

/* A journal larger than this is not left in the file at rest: its commit syncs and cuts it. */
#define FF2_JOURNAL_KEEP(bs) ((uint64_t)(bs) / 2)

static void ff2_frames_free(ff2_frames *fr)
{
    free(fr->v);
    free(fr->buf);
}

/* Whether a job's frame is made where the engine left the block (fmt2_frame_wrap): a
 * compressed block of a plan that left room around it. A block stored raw is copied. */
static int ff2_compressed(const eng_job *jb)
{
    return jb->out_len > 0 && jb->out_len < jb->len;
}

static int ff2_wraps(const ff_commit_plan *p, const eng_job *jb)
{
    return p->comp_lead == FMT2_FRAME_LEAD && ff2_compressed(jb);
}

/* The frame of a block the engine compressed, with the checksums its thread computed when it
 * did (the writer's thread then only copies, or not even that). */
uint8_t *ff2_frame_of_job(const ff_file *f, const ff_commit_plan *p, eng_job *jb, uint8_t *out,
                          uint32_t *frame_len)
{
    uint32_t raw_sum = jb->sums_done ? jb->src_sum : XXH32(jb->src, jb->len, 0);
    uint32_t comp_sum = !ff2_compressed(jb) ? raw_sum
                        : jb->sums_done      ? jb->out_sum
                                             : XXH32(jb->dst, jb->out_len, 0);
    if (ff2_wraps(p, jb)) {
        *frame_len = FMT2_FRAME_OVERHEAD + jb->out_len;
        return fmt2_frame_wrap(jb->dst, f->bs, jb->len, jb->out_len, comp_sum, raw_sum);
    }
    *frame_len = (uint32_t)fmt2_frame_encode_sums(out, f->bs, jb->src, jb->len, jb->dst,
                                                  jb->out_len, comp_sum, raw_sum);
    return out;
}

/* Bytes of ff2_frames.buf the frames of blocks [a, b) need: those not made in place. */
static uint64_t ff2_copied_bytes(const ff_file *f, const ff_commit_plan *p, uint64_t a,
                                 uint64_t b, uint64_t *n)
{
    uint64_t bytes = 0;
    *n = 0;
    for (uint64_t i = a; i < b; i++) {
        const ff_blk *k = &f->blk[i];
        uint32_t j = p->job_at[i - p->s];
        *n += k->state != FF_CLEAN;
        if (k->state == FF_DIRTY && (j >= p->n_jobs || !ff2_wraps(p, &p->jobs[j])))
            bytes += ff_blen(f, i) + FMT2_FRAME_OVERHEAD;
    }
    return bytes;
}

/* Encodes every changed block of [p->s, p->end) whose index is in [lo, hi). */
static int ff2_encode(ff_file *f, const ff_commit_plan *p, uint64_t lo, uint64_t hi,
                      ff2_frames *fr)
{
    uint64_t a = p->s > lo ? p->s : lo, b = p->end < hi ? p->end : hi, n;
    uint64_t bytes = ff2_copied_bytes(f, p, a, b, &n);
    *fr = (ff2_frames){calloc(n ? n : 1, sizeof(ff2_frame)), 0, malloc(bytes ? bytes : 1)};
    if (!fr->v || !fr->buf)
        return -ENOMEM;
    uint8_t *at = fr->buf;
    for (uint64_t i = a; i < b; i++) {
        const ff_blk *k = &f->blk[i];
        if (k->state == FF_CLEAN)
            continue;
        ff2_frame *e = &fr->v[fr->n++];
        *e = (ff2_frame){i, (uint32_t)ff_blen(f, i), 0, NULL, 0, 0};
        uint32_t j = p->job_at[i - p->s];
        if (k->state == FF_ZERO || j == UINT32_MAX)
            continue;
        if (ff_is_zero(k->buf, e->len))
            continue;                  /* a written block of zeros is stored as a hole */
        if (j == FF_JOB_TAIL) {
            int rc = ff_tail_frame(f, k->buf, e->len, at, &e->frame, &e->frame_len);
            if (rc < 0)
                return rc;
            e->from_tail = 1;
        } else {
            e->frame = ff2_frame_of_job(f, p, &p->jobs[j], at, &e->frame_len);
        }
        if (e->frame == at)
            at += e->frame_len;
        f->env->n.blocks_written++;
    }
    return 0;
}

int ff2_stored_frame_len(ff_file *f, uint64_t i, uint64_t *len)
{
    uint32_t word = f->blk[i].word;
    if (word == FMT2_CHAIN_WORD) {
        *len = FMT_FRAME_HEADER_LEN + (uint64_t)f->chain_area + FMT_FRAME_END_LEN;
        return 0;
    }
    if (f->blk[i].off & FMT_ENTRY_ZERO) {
        *len = ff_blen(f, i) + FMT2_FRAME_OVERHEAD;
        return 0;
    }
    uint64_t at = fmt_entry_off(&(fmt_entry){f->blk[i].off, 0}), skip = 0;
    if (at == ff2_word_off(f, i)) {    /* the slot's frame, at its start or its page */
        uint64_t pos;
        int rc = ff2_frame_pos(f, i, &pos);
        if (rc < 0)
            return rc;
        skip = pos - fmt2_slot_off(ff2_geo(f), i), at = pos + FMT_FRAME_HEADER_LEN;
    }
    if (word == 0) {
        uint8_t w[4];
        int rc = fmt_pread_all(f->fd, w, 4, at);
        if (rc < 0)
            return rc;
        word = fmt_get32(w);
    }
    *len = skip + FMT_FRAME_HEADER_LEN + fmt_block_len(word) + FMT_FRAME_END_LEN;
    return 0;
}

int ff2_frame_pos(ff_file *f, uint64_t i, uint64_t *pos)
{
    return fmt2_frame_at(f->fd, ff2_geo(f), i, pos);
}

uint64_t ff2_word_off(const ff_file *f, uint64_t i)
{
    return fmt2_slot_off(ff2_geo(f), i) + FMT_FRAME_HEADER_LEN;
}

/* Where this commit puts the frame of entry e: its slot's start or its page (9.3.1; a hole,
 * frame_len 0, at the start). */
static uint64_t ff2_place(const ff_file *f, const ff2_frame *e)
{
    return fmt2_frame_place(ff2_geo(f), e->block, e->len, e->frame_len);
}

/* Where the padding after entry fr->v[k] ends once the file has n blocks and its last slot
 * ends at tail: at the next slot's frame, this commit's when it writes the next block,
 * else where it lies. */
static uint64_t ff2_slot_end(ff_file *f, const ff2_frames *fr, uint64_t k, uint64_t n,
                             uint64_t tail)
{
    uint64_t i = fr->v[k].block, pos;
    if (i + 1 >= n)
        return tail;
    if (k + 1 < fr->n && fr->v[k + 1].block == i + 1)
        return ff2_place(f, &fr->v[k + 1]);
    if (i + 1 < f->n_stored && ff2_frame_pos(f, i + 1, &pos) == 0)
        return pos;
    return fmt2_slot_off(ff2_geo(f), i + 1);
}

/* Checksum of a hole of len bytes: hashing a whole block of zeros per hole made a large
 * hole cost as much as writing it. */
uint32_t ff2_zsum(ff_file *f, uint32_t len)
{
    if (len != f->bs)
        return fmt2_zero_sum(len);
    if (!f->v2.zsum)
        f->v2.zsum = fmt2_zero_sum(len);
    return f->v2.zsum;
}

/* The first block of a file that has none yet carries the marker again in its write: the
 * write that made the file is not synced, and without the marker the block would be shown
 * as a foreign file's bytes after a power loss that kept one and not the other. */
static int ff2_write_frame(ff_file *f, const ff2_frames *fr, uint64_t k, uint64_t n,
                           uint64_t tail)
{
    const ff2_frame *e = &fr->v[k];
    uint8_t marker[FMT_MARKER_LEN];
    int first = e->block == 0 && f->n_stored == 0;
    if (first)
        fmt2_marker_encode(f->version, f->bs, fmt2_rec_flags(f->rec_group, f->rec_flag),
                           f->env->sb.uuid, marker);
    return fmt2_write_slot(f->fd, ff2_geo(f), e->block, e->frame_len ? e->frame : NULL,
                           e->frame_len, e->len, e->frame_len ? 0 : ff2_zsum(f, e->len),
                           ff2_slot_end(f, fr, k, n, tail), first ? marker : NULL);
}

/* Whole-block holes from fr->v[k] on that another block follows: how many in a row. */
static uint64_t ff2_hole_run(const ff_file *f, const ff2_frames *fr, uint64_t k, uint64_t n)
{
    uint64_t r = 0;
    while (k + r < fr->n && fr->v[k + r].frame_len == 0 && fr->v[k + r].len == f->bs &&
           fr->v[k + r].block + 1 < n && fr->v[k + r].block == fr->v[k].block + r)
        r++;
    return r;
}

int ff2_pad(ff_file *f, uint64_t at, uint64_t end, int punch)
{
    int rc = fmt_write_skip_header(f->fd, at, FMT_SKIP_PAD, (uint32_t)(end - at - 8));
    if (rc == 0 && punch)
        fmt_punch(f->fd, at + 8, end - at - 8);
    return rc;
}

int ff2_open_last(ff_file *f, uint64_t *at, uint64_t *end)
{
    *end = 0;
    if (f->n_stored == 0 || f->blk[f->n_stored - 1].state != FF_CLEAN)
        return 0;
    uint64_t last = f->n_stored - 1, flen = 0;
    int rc = ff2_stored_frame_len(f, last, &flen);
    *at = fmt2_slot_off(ff2_geo(f), last) + flen;
    *end = rc == 0 ? fmt2_slot_off(ff2_geo(f), f->n_stored) : 0;
    return rc;
}

/* The old last slot ends where its frame ends; once blocks follow it, it gets padding up to
 * the next slot's frame (fr's first entry past it). */
static int ff2_pad_old_last(ff_file *f, const ff2_frames *fr, uint64_t new_n)
{
    uint64_t at = 0, end = 0;
    int rc = new_n > f->n_stored ? ff2_open_last(f, &at, &end) : 0;
    for (uint64_t k = 0; rc == 0 && end && k < fr->n; k++)
        if (fr->v[k].block == f->n_stored)
            end = ff2_place(f, &fr->v[k]);
    return rc == 0 && end ? ff2_pad(f, at, end, 1) : rc;
}

/* Where the last slot's extent ends after the commit: at its frame, unless the frame shrank
 * in place, when padding covers the old frame's bytes (at least 8 bytes of padding). */
static int ff2_new_tail(ff_file *f, const ff2_frames *fr, uint64_t n, uint64_t *tail)
{
    if (n == 0) {
        *tail = FMT_MARKER_LEN;
        return 0;
    }
    uint64_t flen = 0, at = fmt2_slot_off(ff2_geo(f), n - 1);
    const ff2_frame *last = fr->n && fr->v[fr->n - 1].block == n - 1 ? &fr->v[fr->n - 1] : NULL;
    int rc = 0;
    if (last)
        flen = last->frame_len ? last->frame_len : last->len + FMT2_FRAME_OVERHEAD,
        at = ff2_place(f, last);
    else
        rc = ff2_stored_frame_len(f, n - 1, &flen);
    uint64_t end = at + flen;
    if (rc == 0 && n == f->n_stored && end < f->v2.tail)
        end = f->v2.tail - end >= 8 ? f->v2.tail : end + 8;
    /* a last block rewritten in place after a small change gets its slot's padding, for
     * the page records of the commits after */
    if (rc == 0 && last && ff_rec_pads_last(f, n) && end + 8 <= fmt2_slot_off(ff2_geo(f), n))
        end = fmt2_slot_off(ff2_geo(f), n);
    *tail = end;
    return rc;
}

/* Marks the holes of fr->v[k, k + run) that fmt2_write_hole_run puts into hole runs: those
 * of a group that holds at least two of them. */
static void ff2_mark_runs(const ff_file *f, ff2_frames *fr, uint64_t k, uint64_t run)
{
    uint64_t g = fmt2_run_group(f->bs);
    for (uint64_t j = k; f->version >= FMT_VERSION_3 && g > 1 && j < k + run;) {
        uint64_t b = fr->v[j].block, end = (b / g + 1) * g - b;
        uint64_t m = end < k + run - j ? end : k + run - j;
        for (uint64_t x = j; m >= 2 && x < j + m; x++)
            fr->v[x].in_run = 1;
        j += m;
    }
}

/* A hole's data are never written: they must read as zeros already. Where an appended hole
 * goes over bytes the file had (an old journal, the footer pair's area), those are zeroed and
 * the zeros synced before any hole's head or end is written: a power loss could otherwise
 * keep the head and end and lose the punch, and the hole would fail its checksum. */
static int ff2_clear_old(ff_file *f, const ff2_frames *fr)
{
    for (uint64_t k = 0; k < fr->n; k++) {
        if (fr->v[k].block < f->n_stored || fr->v[k].frame_len)
            continue;
        uint64_t at = fmt2_slot_off(ff2_geo(f), fr->v[k].block);
        if (at >= f->v2.eof)
            return 0;
        int rc = fmt2_zero(f->fd, at, f->v2.eof - at);
        return rc < 0 ? rc : fdatasync(f->fd) < 0 ? -errno : 0;
    }
    return 0;
}

/* A commit that appends and rewrites blocks in place writes the appended slots before the
 * journal and footer that are its commit point, and the first of them goes over the old
 * footer (or leaves it short of the file's end): a kill -9 between the two left a file that
 * the walk read with the new blocks and without the rewritten ones (FORMAT.md 14, item 9).
 * A footer of the committed state, written first where the journal will go, is what the
 * open finds until the journal's footer replaces it. */
static int ff2_guard(ff_file *f, uint64_t at)
{
    fmt2_footer ft = ff2_footer(f, f->v2.size, f->v2.tail, 0, 0, f->v2.disk_fresh);
    int rc = fmt2_footer_put(f->fd, at, &ft, 0);
    if (rc == 0 && at + FMT2_FOOTER_LEN > f->v2.eof)
        f->v2.eof = at + FMT2_FOOTER_LEN;
    return rc;
}

/* Blocks at or past the stored ones: nothing lives in their slots but, at the start, the
 * old journal and footer. Holes in a row cost one small write per block (version 2) or per
 * group of blocks (version 3: hole runs). With guard, the committed state's footer goes
 * at tail first (ff2_guard). */
static int ff2_write_appends(ff_file *f, ff2_frames *fr, uint64_t n, uint64_t tail, int guard)
{
    int rc = ff2_clear_old(f, fr);
    rc = rc < 0 || !guard ? rc : ff2_guard(f, tail);
    rc = rc < 0 ? rc : ff2_pad_old_last(f, fr, n);
    for (uint64_t k = 0; rc == 0 && k < fr->n;) {
        uint64_t run = fr->v[k].block >= f->n_stored ? ff2_hole_run(f, fr, k, n) : 0;
        if (run) {
            rc = fmt2_write_hole_run(f->fd, ff2_geo(f), fr->v[k].block, fr->v[k].block + run,
                                     ff2_zsum(f, f->bs), f->version >= FMT_VERSION_3,
                                     ff2_slot_end(f, fr, k + run - 1, n, tail));
            ff2_mark_runs(f, fr, k, run);
            k += run;
            continue;
        }
        if (fr->v[k].block >= f->n_stored)
            rc = ff2_write_frame(f, fr, k, n, tail);
        k++;
    }
    return rc;
}

/* Whether block i, whose size word memory does not know or says it is a hole, lies in a
 * hole run on the disk; 1 with the run in *a, *m. */
static int ff2_run_of(ff_file *f, uint64_t i, uint64_t *a, uint32_t *m)
{
    const ff_blk *b = &f->blk[i];
    uint32_t size = fmt_word_size(b->word);
    if (b->word && size > 0 && size <= f->bs)
        return 0;                      /* a frame of its own */
    fmt_error err = fmt2_run_find(f->fd, ff2_geo(f), i, a, m);
    return err == FMT_OK ? 1 : err == FMT_ERR_IO ? -EIO : 0;
}

/* The run of block i, if it has one, becomes single holes in this commit: its clean blocks
 * are rewritten as holes (memory: FF_ZERO), so that none of its slots stays inside another
 * block's frame. *next: the first block after the run (i + 1 without one). */
static int ff2_split_run_at(ff_file *f, uint64_t i, uint64_t *next)
{
    uint64_t a = i;
    uint32_t m = 0;
    int rc = ff2_run_of(f, i, &a, &m);
    *next = rc == 1 ? a + m : i + 1;
    for (uint64_t j = a; rc == 1 && j < a + m && j < f->n_blocks; j++) {
        ff_blk *b = &f->blk[j];
        b->off = ff2_word_off(f, j) | FMT_ENTRY_ZERO, b->word = FMT2_RUN_WORD;
        if (b->state == FF_CLEAN)
            b->state = FF_ZERO, ff_changed(f, j);
    }
    return rc < 0 ? rc : 0;
}

int ff2_split_runs(ff_file *f)
{
    uint64_t end = f->n_stored < f->n_blocks ? f->n_stored : f->n_blocks, next;
    if (f->version < FMT_VERSION_3 || fmt2_run_group(f->bs) < 2 || f->rewrite_min >= f->n_stored)
        return 0;
    int rc = 0;
    for (uint64_t i = f->rewrite_min; rc == 0 && i < end; i = next) {
        next = i + 1;
        if (f->blk[i].state != FF_CLEAN)
            rc = ff2_split_run_at(f, i, &next);
    }
    /* a shrink's new last block: a run never holds the last block */
    if (rc == 0 && f->n_blocks && f->n_blocks <= f->n_stored &&
        f->blk[f->n_blocks - 1].state == FF_CLEAN)
        rc = ff2_split_run_at(f, f->n_blocks - 1, &next);
    return rc;
}

/* A sync: every journal before it is dead once it returns. */
int ff2_sync_for(ff_file *f, int durable)
{
    int rc = ff_sync_for(f, durable);
    if (rc == 0)
        f->v2.j_live = 0;
    return rc;
}

int ff2_sync(ff_file *f)
{
    return ff2_sync_for(f, FF_DURABLE_DATA);
}

/* The slots a commit rewrote after its sync reach the disk with the next commit's sync.
 * Started now, they go while the writer makes its next changes, and that sync waits mostly
 * for its own journal (a database, random writes with an fsync every few). A hint only:
 * nothing waits for it, and any order it gives is one a power loss may leave anyway. */
void ff2_start_writeback(ff_file *f)
{
    (void)sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* The entries of the blocks rewritten in place, for the journal. */
fmt2_jentry *ff2_jentries(const ff_file *f, const ff2_frames *fr, uint32_t *n_out,
                          int *promised)
{
    fmt2_jentry *e = calloc(fr->n ? fr->n : 1, sizeof(*e));
    uint32_t n = 0;
    *promised = 0;
    for (uint64_t k = 0; e && k < fr->n && fr->v[k].block < f->n_stored; k++) {
        const ff2_frame *v = &fr->v[k];
        e[n++] = (fmt2_jentry){v->block, v->len, v->frame_len, v->frame};
        *promised |= v->block < f->v2.fresh;
    }
    *n_out = n;
    return e;
}

/* Where the pages that stored block i's padding gave back begin, when memory knows the
 * frame in its slot (not a hole): the pages before hold data, those from there to the end of
 * the slot are holes. 0: not known. */
static uint64_t ff2_holes_from(ff_file *f, uint64_t i)
{
    const ff_blk *b = &f->blk[i];
    uint64_t flen;
    if (i >= f->n_stored || (b->off & FMT_ENTRY_ZERO) ||
        (b->off & FMT_OFFSET_MASK) != ff2_word_off(f, i) || ff2_stored_frame_len(f, i, &flen) < 0)
        return 0;
    uint64_t recs = 0;                 /* page records behind the frame (ff_rec.c) */
    if (f->rec_flag && (!f->rec || !f->rec[i].known))
        return 0;
    if (f->rec_flag)
        recs = f->rec[i].used;
    return (fmt2_slot_off(ff2_geo(f), i) + flen + 8 + recs + 4095) & ~4095ull;
}

/* A slot's padding was given back to the backing filesystem, so a frame that grows needs
 * new space: it is reserved before the journal becomes the commit, so that a full disk
 * fails the commit cleanly instead of tearing a slot the journal would have to redo. Only
 * pages that are holes are reserved: a fallocate over allocated pages still changes the
 * backing file's metadata, and the commit's fdatasync then costs a journal commit of the
 * backing filesystem. */
int ff2_reserve_slots(ff_file *f, const fmt2_jentry *e, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        uint64_t at = fmt2_jentry_place(ff2_geo(f), &e[k]);
        uint64_t len = (e[k].frame_len ? e[k].frame_len : FMT2_HOLE_HEAD) + 8;
        uint64_t data = e[k].frame_len ? ff2_holes_from(f, e[k].block) : 0;
        if (data > at)
            len = at + len > data ? at + len - data : 0, at = data;
        if (len && fallocate(f->fd, FALLOC_FL_KEEP_SIZE, (off_t)at, (off_t)len) < 0 &&
            errno != EOPNOTSUPP && errno != ENOSYS)
            return -errno;
        if (!e[k].frame_len &&
            fallocate(f->fd, FALLOC_FL_KEEP_SIZE, (off_t)(at + FMT2_HOLE_HEAD + e[k].len),
                      FMT2_HOLE_TAIL + 8) < 0 && errno != EOPNOTSUPP && errno != ENOSYS)
            return -errno;
    }
    return 0;
}

int ff2_pwrite_journal(ff_file *f, const fmt2_jentry *e, uint32_t n, uint64_t at,
                       const uint8_t *after, size_t after_len)
{
    uint8_t *head = malloc(FMT2_J_HEAD + (size_t)n * FMT2_J_ENTRY), sum[4];
    struct iovec *v = malloc(((size_t)n + 3) * sizeof(*v));
    int rc = -ENOMEM;
    if (head && v) {
        int nv = fmt2_journal_iov(e, n, f->v2.seq + 1, head, sum, v);
        if (after_len)
            v[nv++] = (struct iovec){(void *)after, after_len};
        rc = fmt_pwritev_all(f->fd, v, nv, at);
    }
    free(head);
    free(v);
    return rc;
}

int ff2_write_journal(ff_file *f, const fmt2_jentry *e, uint32_t n, uint64_t at,
                      const fmt2_footer *ft)
{
    uint8_t foot[FMT2_FOOTER_LEN];
    fmt2_footer_encode(ft, foot);
    uint64_t end = at + fmt2_journal_len(e, n) + FMT2_FOOTER_LEN;
    int rc = ff2_pwrite_journal(f, e, n, at, foot, sizeof(foot));
    if (rc == 0 && f->v2.eof > end && ftruncate(f->fd, (off_t)end) < 0)
        rc = -errno;
    return rc;
}

/* The decoded blocks cached for a slot rewritten in place are stale, and go while reads
 * are held off; ff2_adopt then gives the cache the block's new bytes, the writer's buffer
 * itself: a random writer (a database, fio) merges its next change into a block it rewrote
 * without decoding the slot again or copying the block. A shrink drops the whole file's:
 * slots past the new end are reused later. */
static void ff2_cache_rewritten(ff_file *f, const ff2_frames *fr, uint64_t n)
{
    if (n < f->n_stored) {
        bc_forget_file(f->env->cache, f->id);
        return;
    }
    for (uint64_t k = 0; k < fr->n && fr->v[k].block < f->n_stored; k++)
        bc_forget(f->env->cache, f->id, ff2_word_off(f, fr->v[k].block));
}

/* The in-place part: slots that hold committed blocks. Reads decode outside the file's
 * lock, so they are kept out while the bytes under them change. A frame over a frame
 * punches only the pages the old one held (ff2_reserve_slots says why). footer, when not
 * NULL, is an encoded footer that goes at tail once the slots are written: with the last
 * slot's frame when that one is rewritten. */
int ff2_write_in_place(ff_file *f, const ff2_frames *fr, uint64_t n, uint64_t tail,
                       const uint8_t *footer)
{
    int rc = 0;
    ff_io_exclusive(f);
    for (uint64_t k = 0; rc == 0 && k < fr->n && fr->v[k].block < f->n_stored; k++) {
        const ff2_frame *e = &fr->v[k];
        const uint8_t *ft = e->block + 1 == n ? footer : NULL;
        uint64_t was = 0, place = ff2_place(f, e);
        int after_own = k > 0 && fr->v[k - 1].block + 1 == e->block;
        int moves = ff2_geo(f).paged && e->block > 0 && !after_own;
        if (moves)
            rc = ff2_frame_pos(f, e->block, &was);
        if (rc == 0 && e->frame_len) {
            rc = fmt2_rewrite_slot(f->fd, ff2_geo(f), e->block, e->frame, e->frame_len, e->len,
                                   ff2_slot_end(f, fr, k, n, tail),
                                   ff2_holes_from(f, e->block), ft);
        } else if (rc == 0) {
            rc = ff2_write_frame(f, fr, k, n, tail);
            if (rc == 0 && ft)
                rc = fmt_pwrite_all(f->fd, ft, FMT2_FOOTER_LEN, tail);
        }
        /* a frame that moved to or from its page: the padding before it follows (9.3.1) */
        if (rc == 0 && moves && place != was)
            rc = fmt2_pad_before(f->fd, ff2_geo(f), e->block, place);
        if (ft)
            footer = NULL;
    }
    if (rc == 0 && footer)
        rc = fmt_pwrite_all(f->fd, footer, FMT2_FOOTER_LEN, tail);
    if (rc == 0)
        ff2_cache_rewritten(f, fr, n);
    else
        bc_forget_file(f->env->cache, f->id);
    pthread_rwlock_unlock(&f->io);
    return rc;
}

/* Blocks at or past the result were all written since the last sync, so nobody was
 * promised them: rewriting them in place needs no synced journal. The fresh blocks are a
 * suffix: this commit's appends, the old fresh suffix, and written blocks just below it;
 * never a block an fsync promised (v2.promised), whose rewrites must always go through a
 * synced journal: a torn rewrite would take the promised bytes it did not change with it. */
static uint64_t ff2_fresh_after(const ff_file *f, const ff2_frames *fr, uint64_t n, int synced)
{
    if (synced)
        return n;
    uint64_t b = f->v2.fresh < f->n_stored ? f->v2.fresh : f->n_stored;
    uint64_t k = fr->n;
    while (k > 0 && fr->v[k - 1].block >= b)
        k--;
    while (k > 0 && b > 0 && fr->v[k - 1].block == b - 1)
        b--, k--;
    if (b < f->v2.promised)
        b = f->v2.promised;
    return b < n ? b : n;
}

fmt2_footer ff2_footer(const ff_file *f, uint64_t size, uint64_t tail, uint64_t j_off,
                       uint64_t j_len, uint64_t fresh)
{
    return (fmt2_footer){size, (size + f->bs - 1) / f->bs, tail, j_off, j_len, f->v2.seq + 1,
                         fresh, 0};
}

/* Memory takes a footer without journal at tail, the file cut after it. */
static void ff2_settled(ff_file *f, uint64_t tail, uint64_t fresh)
{
    f->v2.seq++, f->v2.disk_fresh = fresh, f->v2.eof = tail + FMT2_FOOTER_LEN,
    f->v2.j_off = f->v2.j_len = 0, f->v2.footerless = 0, f->v2.paired = 0, f->v2.tail = tail;
}

/* Drops the journal: the footer goes right after the slots again. */
int ff2_settle(ff_file *f, uint64_t size, uint64_t tail, uint64_t fresh)
{
    fmt2_footer ft = ff2_footer(f, size, tail, 0, 0, fresh);
    int rc = fmt2_footer_put(f->fd, tail, &ft, f->v2.eof);
    if (rc == 0)
        ff2_settled(f, tail, fresh);
    return rc;
}

/* The journal is the commit point of blocks rewritten in place: journal and footer in one
 * write, [sync], slots. A shrinking commit puts both after the old footer, whose state
 * stays whole until the new footer exists; it then settles the footer back behind the
 * slots. A commit that syncs nothing settles with the slots: the footer that drops its
 * journal goes out in the last slot's write (FORMAT.md 11.1 step 6.7). */
static int ff2_commit_journal(ff_file *f, const ff2_frames *fr, ff2_target *t)
{
    uint32_t n_j;
    int promised;
    fmt2_jentry *e = ff2_jentries(f, fr, &n_j, &promised);
    if (!e)
        return -ENOMEM;
    uint64_t at = t->shrink ? (f->v2.eof > t->tail ? f->v2.eof : t->tail) : t->tail;
    uint64_t jlen = fmt2_journal_len(e, n_j);
    int sync = t->durable || promised;
    fmt2_footer ft = ff2_footer(f, t->size, t->tail, at, jlen, t->fresh_pre);
    int rc = ff2_reserve_slots(f, e, n_j);
    if (rc == 0)
        rc = ff2_write_journal(f, e, n_j, at, &ft);
    free(e);
    if (rc == 0)                       /* from here the journal is the commit: a failure
                                          leaves its slots to be redone, never rolled back */
        f->v2.seq++, f->v2.disk_fresh = ft.fresh, f->v2.eof = at + jlen + FMT2_FOOTER_LEN,
        f->v2.j_off = at,
        f->v2.j_len = jlen, f->v2.footerless = 0, f->v2.j_pending = 1, f->v2.jp_n = t->n,
        f->v2.jp_tail = t->tail, f->v2.paired = 0;
    if (rc == 0 && sync)
        rc = ff2_sync_for(f, t->durable);
    /* An unsynced journal protects nothing once its slots are written: drop it at once, so
     * the next open has nothing to compare. A synced one stays until the next commit's
     * sync, unless it is large. A shrink syncs first: its footer goes where a dropped block
     * began, which the old footer may still name after a machine crash. It syncs after the
     * cut too: until the cut is on the disk the dropped slots are still there, whole, and a
     * later commit whose journal a power loss takes would have the walk bring them back. */
    int settle = t->shrink || !sync || jlen > FF2_JOURNAL_KEEP(f->bs);
    int with_slots = settle && !sync && !t->shrink && !f->v2.j_live;
    uint8_t settled[FMT2_FOOTER_LEN];
    if (with_slots) {
        fmt2_footer st = ff2_footer(f, t->size, t->tail, 0, 0, t->fresh);
        fmt2_footer_encode(&st, settled);
    }
    if (rc == 0)
        rc = ff2_write_in_place(f, fr, t->n, t->tail, with_slots ? settled : NULL);
    if (rc == 0 && sync) {
        f->v2.j_live = 1;              /* the slots may still be in the page cache only */
        ff2_start_writeback(f);
    }
    if (rc == 0 && with_slots) {
        uint64_t end = t->tail + FMT2_FOOTER_LEN;
        if (f->v2.eof > end && ftruncate(f->fd, (off_t)end) < 0)
            rc = -errno;
        else
            ff2_settled(f, t->tail, t->fresh);
    } else if (rc == 0 && settle) {
        if (f->v2.j_live || t->shrink)
            rc = ff2_sync(f);
        /* the fresh memory keeps, not n: a footer at rest must never trust a block that
         * memory would rewrite in place without a synced journal (the next open checks
         * only the blocks at or past the footer's fresh, 11.4 step 4) */
        if (rc == 0)
            rc = ff2_settle(f, t->size, t->tail, t->fresh);
        if (rc == 0 && t->shrink)
            rc = ff2_sync(f);
    }
    if (rc == 0)
        f->v2.j_pending = 0;
    return rc;
}

/* Memory now says what the slots hold. */
static void ff2_adopt(ff_file *f, const ff2_frames *fr, const ff2_target *t)
{
    for (uint64_t k = 0; k < fr->n; k++) {
        ff_blk *b = &f->blk[fr->v[k].block];
        if (fr->v[k].from_tail)
            f->tail_block = fr->v[k].block;
        else if (fr->v[k].block == f->tail_block)
            f->tail_block = UINT64_MAX;
        /* a block rewritten in place keeps its new bytes in the cache: the next write
         * to it, or a read, decodes nothing (ff2_cache_rewritten dropped the old ones) */
        if (fr->v[k].frame_len && b->state == FF_DIRTY && fr->v[k].block < f->n_stored &&
            t->n >= f->n_stored)
            ff_buf_to_cache(f, b, ff2_word_off(f, fr->v[k].block), fr->v[k].len);
        ff_drop_buf(f, b);
        ff_rec_forget(f, fr->v[k].block);
        b->state = FF_CLEAN;
        b->off = ff2_word_off(f, fr->v[k].block) | (fr->v[k].frame_len ? 0 : FMT_ENTRY_ZERO);
        b->word = fr->v[k].frame_len ? fmt_get32(fr->v[k].frame + FMT_FRAME_HEADER_LEN)
                  : fr->v[k].in_run  ? FMT2_RUN_WORD
                                     : (fr->v[k].len | FMT_RAW_BIT);
    }
    f->n_stored = t->n;
    f->v2.tail = t->tail, f->v2.fresh = t->fresh, f->v2.size = t->size;
    if (t->durable)
        f->v2.promised = t->n;
    else if (f->v2.promised > t->n)
        f->v2.promised = t->n;
}

/* A commit failed while writing the slots its footer's journal names (a full disk): the
 * journal is the only whole copy of those blocks, so they are written from it before
 * anything may overwrite it. */
static int ff2_redo_journal(ff_file *f)
{
    uint8_t *buf;
    fmt2_jentry *e;
    uint32_t n;
    if (!f->v2.j_pending)
        return 0;
    fmt_error err = fmt2_journal_read(f->fd, f->v2.j_off, f->v2.j_len, f->v2.seq, f->bs,
                                      f->v2.jp_n, &buf, &e, &n);
    if (err != FMT_OK)
        return -fmt_errno(err);
    int rc = 0;
    ff_io_exclusive(f);
    fmt2_geo g = ff2_geo(f);
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        rc = fmt2_write_slot(f->fd, g, e[k].block, e[k].frame, e[k].frame_len, e[k].len,
                             e[k].frame ? 0 : ff2_zsum(f, e[k].len),
                             fmt2_jentry_end(f->fd, g, f->v2.jp_n, f->v2.jp_tail, e, n, k), NULL);
        if (rc == 0 && g.paged && (k == 0 || e[k - 1].block + 1 != e[k].block))
            rc = fmt2_pad_before(f->fd, g, e[k].block, fmt2_jentry_place(g, &e[k]));
    }
    bc_forget_file(f->env->cache, f->id);
    ff_rec_reset(f);
    pthread_rwlock_unlock(&f->io);
    /* until a sync puts those slots on the disk, the journal stays their only durable copy:
     * live, so that nothing overwrites or punches it first */
    if (rc == 0)
        f->v2.j_pending = 0, f->v2.j_live = 1;
    free(buf);
    free(e);
    return rc;
}

int ff2_commit_write(ff_file *f, ff_commit_plan *p, int durable)
{
    ff2_frames fr;
    int redo = ff2_redo_journal(f);
    if (redo < 0)
        return redo;
    ff2_target t = {p->end, p->size, 0, 0, p->end < f->n_stored, durable, 0};
    int rc = ff2_encode(f, p, 0, UINT64_MAX, &fr);
    if (rc == 0)
        rc = ff2_new_tail(f, &fr, t.n, &t.tail);
    int in_place = fr.n && fr.v[0].block < f->n_stored;
    t.fresh = ff2_fresh_after(f, &fr, t.n, durable);
    t.fresh_pre = ff2_fresh_after(f, &fr, t.n, 0);
    int pair = rc == 0 && ff2_pair_wanted(f, &fr, &t);
    if (rc == 0 && !pair && f->v2.j_live)  /* the old journal may be overwritten from here */
        rc = ff2_sync(f);
    if (rc == 0 && !pair)
        rc = ff2_write_appends(f, &fr, t.n, t.tail, in_place && !t.shrink && t.n > f->n_stored);
    if (rc == 0 && pair) {
        rc = ff2_commit_pair(f, &fr, &t);
    } else if (rc == 0 && (in_place || t.shrink)) {
        rc = ff2_commit_journal(f, &fr, &t);
    } else if (rc == 0) {
        rc = durable && fr.n ? ff2_commit_open_pair(f, &fr, &t) : 1;
        if (rc == 1) {                 /* no pair: the footer right behind the slots */
            rc = ff2_settle(f, t.size, t.tail, t.fresh_pre);
            if (rc == 0 && durable)
                rc = ff2_sync_for(f, durable);
        }
    }
    if (rc == 0 && durable)
        t.fresh = t.n;
    if (rc == 0)
        ff2_adopt(f, &fr, &t);
    ff2_frames_free(&fr);
    return rc;
}

/* A streaming brick of an appending writer: its slots only, no footer. The footer at the
 * end of the file is overwritten by the first of them; a crash before the next commit leaves
 * the slots to the walk of the next open, which takes them as written. */
int ff2_stream_write(ff_file *f, ff_commit_plan *p)
{
    ff2_frames fr;
    int redo = ff2_redo_journal(f);
    if (redo < 0)
        return redo;
    int rc = ff2_encode(f, p, f->n_stored, UINT64_MAX, &fr);
    ff2_target t = {p->end, p->end * (uint64_t)f->bs, 0, f->v2.fresh, 0, 0, f->v2.fresh};
    if (rc == 0 && f->v2.j_live)
        rc = ff2_sync(f);
    if (rc == 0)
        rc = ff2_new_tail(f, &fr, t.n, &t.tail);
    if (rc == 0)
        rc = ff2_write_appends(f, &fr, t.n, t.tail, 0);
    if (rc == 0)
        ff2_stream_adopt(f, &fr, t.n, t.tail, t.tail);
    ff2_frames_free(&fr);
    return rc;
}

void ff2_stream_adopt(ff_file *f, const ff2_frames *fr, uint64_t n, uint64_t tail,
                      uint64_t reached)
{
    ff2_target t = {n, n * (uint64_t)f->bs, tail, f->v2.fresh, 0, 0, f->v2.fresh};
    ff2_adopt(f, fr, &t);
    if (reached > f->v2.eof)           /* nothing was cut: an old journal or pair area past
                                          the new slots is still there */
        f->v2.eof = reached;
    f->v2.footerless = 1, f->v2.paired = 0;
}

