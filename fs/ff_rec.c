/* Page records of an open file (format version 4; docs/FORMAT.md 9.11 and 11.7). A commit
 * whose changed blocks each changed in a small range (a database's page, fio's 4 KiB) writes
 * each range as a record behind its block's frame, in the block's own slot, instead of a new
 * frame through a journal: the commit writes about what changed, and one sync makes it
 * durable. The file's last close (and release) folds every slot's records into a new frame,
 * so that a file at rest holds none and decodes with the stock lz4 -d; so does the open
 * after a session that may have crashed. */
#include "ff_slots.h"

#include <errno.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcache.h"

#define FF_REC_SHARE 4u                /* a record covers at most a quarter of a block */
#define FF_REC_FOLD_BYTES (16u << 20)  /* blocks folded per commit at the release */

void ff_rec_free(ff_file *f)
{
    free(f->rec);
    free(f->rec_low);
    f->rec = NULL, f->rec_low = NULL;
    f->n_rec_low = f->cap_rec_low = 0;
}

static int ff_rec_able(const ff_file *f)
{
    return !f->env->opt.read_only &&
           (f->version >= FMT_VERSION_4 ||
            (f->version == FMT_VERSION_3 && ff_new_version(f->env) >= FMT_VERSION_4));
}

static int ff_rec_table(ff_file *f)
{
    if (!f->rec)
        f->rec = calloc(f->cap ? f->cap : 1, sizeof(*f->rec));
    return f->rec ? 0 : -ENOMEM;
}

int ff_rec_reserve(ff_file *f, uint64_t old_cap)
{
    if (!f->rec)
        return 0;
    ff_rec *r = calloc(f->cap, sizeof(*r));
    if (!r) {                          /* every block counts as changed whole, and the
                                          release looks at every slot */
        ff_rec_free(f);
        ff_io_exclusive(f);
        f->rec_old |= f->rec_flag;
        pthread_rwlock_unlock(&f->io);
        return -ENOMEM;
    }
    memcpy(r, f->rec, old_cap * sizeof(*r));
    free(f->rec);
    f->rec = r;
    return 0;
}

/* Adds [lo, hi) to r's ranges: merged with those it overlaps or touches; past
 * FF_REC_RANGES, the two ranges closest to each other become one (covering the gap). */
static void ff_rec_add(ff_rec *r, uint32_t lo, uint32_t hi)
{
    unsigned k = 0, n = 0;
    uint32_t lo2[FF_REC_RANGES + 1], hi2[FF_REC_RANGES + 1];
    for (; k < r->n && r->hi[k] < lo; k++)
        lo2[n] = r->lo[k], hi2[n++] = r->hi[k];
    for (; k < r->n && r->lo[k] <= hi; k++)   /* overlapping or touching: one range */
        lo = r->lo[k] < lo ? r->lo[k] : lo, hi = r->hi[k] > hi ? r->hi[k] : hi;
    lo2[n] = lo, hi2[n++] = hi;
    for (; k < r->n; k++)
        lo2[n] = r->lo[k], hi2[n++] = r->hi[k];
    if (n > FF_REC_RANGES) {
        unsigned m = 0;
        for (unsigned j = 1; j + 1 < n; j++)
            if (lo2[j + 1] - hi2[j] < lo2[m + 1] - hi2[m])
                m = j;
        hi2[m] = hi2[m + 1];
        memmove(lo2 + m + 1, lo2 + m + 2, (n - m - 2) * sizeof(*lo2));
        memmove(hi2 + m + 1, hi2 + m + 2, (n - m - 2) * sizeof(*hi2));
        n--;
    }
    memcpy(r->lo, lo2, n * sizeof(*lo2));
    memcpy(r->hi, hi2, n * sizeof(*hi2));
    r->n = (uint8_t)n;
}

/* Whether stored block i stays where it is while the size does: every block before the
 * last, and the last while no block follows it. */
static int ff_rec_stays(const ff_file *f, uint64_t i)
{
    return i + 1 < f->n_stored ? i + 1 < f->n_blocks
                               : i + 1 == f->n_stored && f->n_blocks == f->n_stored;
}

/* Whether stored block i's slot has a padding that stays while the size does: every slot
 * but the last, and the last while the committed footer puts the end of its extent at the
 * next slot (the footer pair pads it so, and so does a commit that rewrites it in place
 * after a change records could have taken: ff_rec_pads_last): records there survive every
 * footer written at that tail. A write past the end folds them first (ff_rec_leave_last, or
 * the partial last block made dirty whole as it grows). */
static int ff_rec_slot_ok(const ff_file *f, uint64_t i)
{
    return ff_rec_stays(f, i) &&
           (i + 1 < f->n_stored || (f->version >= FMT_VERSION_2 &&
                                    f->v2.tail == fmt2_slot_off(ff2_geo(f), f->n_stored)));
}

void ff_rec_range(ff_file *f, uint64_t i, uint64_t lo, uint64_t hi, int first)
{
    /* without a table every dirty block counts as changed whole: no record; an appending
     * writer's blocks never take one (no padding behind them yet), so it touches none */
    if (!ff_rec_stays(f, i) || !ff_rec_able(f) || hi <= lo || (!first && !f->rec) ||
        ff_rec_table(f) < 0)
        return;
    ff_rec *r = &f->rec[i];
    if (first)
        r->n = 0;
    else if (r->n == 0)
        return;                        /* changed anywhere already */
    ff_rec_add(r, (uint32_t)lo, (uint32_t)hi);
}

void ff_rec_whole(ff_file *f, uint64_t i)
{
    if (f->rec)
        f->rec[i].n = 0;
}

void ff_rec_forget(ff_file *f, uint64_t i)
{
    if (f->rec)
        f->rec[i].known = 0;
}

void ff_rec_reset(ff_file *f)
{
    if (f->rec)
        memset(f->rec, 0, f->cap * sizeof(*f->rec));
}

/* Where stored block i's frame ends, as ff_rec_known found it: its slot's padding header,
 * and the records, follow. */
static uint64_t ff_rec_frame_end(const ff_file *f, uint64_t i)
{
    return f->rec[i].end;
}

/* What slot i holds of records: read once, then kept until a write of the slot forgets it. */
static int ff_rec_known(ff_file *f, uint64_t i)
{
    ff_rec *r = &f->rec[i];
    ff_blk *b = &f->blk[i];
    if (r->known)
        return 0;
    uint8_t w[4];
    uint64_t pos;                      /* the slot's start, or its page (version 7) */
    if (ff2_frame_pos(f, i, &pos) < 0)
        return -EIO;
    if (b->word == 0) {                /* memory has not read the size word yet */
        if (fmt_pread_all(f->fd, w, sizeof(w), pos + FMT_FRAME_HEADER_LEN) < 0)
            return -EIO;
        b->word = fmt_get32(w);
    }
    r->end = pos + FMT2_FRAME_OVERHEAD + fmt_word_size(b->word);
    if (fmt_word_size(b->word) == 0 || fmt_word_size(b->word) > f->bs) {
        r->room = r->used = r->chain = 0, r->known = 1;   /* in a hole run: no frame */
        return 0;
    }
    /* the frame's block checksum and what follows it (the probe), in one read */
    uint8_t h[4 + FMT2_REC_PROBE];
    uint64_t end = r->end;
    ssize_t got = fmt_pread_upto(f->fd, h, sizeof(h), end - FMT2_FRAME_TRAIL);
    if (got < 4)
        return -EIO;
    uint32_t bsum = fmt_get32(h);
    fmt2_rec_state st;           /* the last block's length bounds its room, as for readers */
    if (fmt2_rec_load(f->fd, end, fmt2_slot_off(ff2_geo(f), i + 1), h + 4, (size_t)got - 4,
                      bsum, f->rec_group, NULL,
                      (uint32_t)ff_blen(f, i), &st) != FMT_OK)
        return -EIO;
    if (f->rec_new)                    /* records of an undone upgrade: not this file's */
        st.used = 0, st.chain = bsum;
    r->room = st.room, r->used = st.used, r->chain = st.chain, r->known = 1;
    return 0;
}

static uint32_t ff_rec_bytes(const ff_rec *r)
{
    uint32_t n = 0;
    for (unsigned k = 0; k < r->n; k++)
        n += r->hi[k] - r->lo[k];
    return n;
}

/* Whether dirty block i's change may go as records: a block of its own slot with a padding
 * behind it (neither the last slot nor a hole), changed in a few small ranges. */
static int ff_rec_fits_block(const ff_file *f, uint64_t i)
{
    const ff_blk *b = &f->blk[i];
    const ff_rec *r = &f->rec[i];
    return b->state == FF_DIRTY && ff_rec_slot_ok(f, i) &&
           !(b->off & FMT_ENTRY_ZERO) && b->word != FMT2_RUN_WORD &&
           b->word != FMT2_CHAIN_WORD &&   /* no record follows a chain (FORMAT.md 9.12) */
           b->filled >= ff_blen(f, i) && r->n && ff_rec_bytes(r) <= f->bs / FF_REC_SHARE;
}

/* Block i's record written: memory says the block is as stored, its bytes in the cache. */
static void ff_rec_adopt(ff_file *f, uint64_t i)
{
    ff_blk *b = &f->blk[i];
    bc_forget(f->env->cache, f->id, b->off);
    ff_buf_to_cache(f, b, b->off, f->bs);
    ff_drop_buf(f, b);
    b->state = FF_CLEAN;
    if (f->tail_block == i)            /* the tail compressor's copy is no longer the block */
        f->tail_block = UINT64_MAX;
    f->env->n.page_records++;
}

/* Whether a commit must write block i (its bytes changed, or it became a hole). */
static int ff_rec_must_write(const ff_blk *b)
{
    return b->state == FF_DIRTY || (b->state == FF_ZERO && !(b->off & FMT_ENTRY_ZERO));
}

/* How many blocks the commit must write when it can be records alone (the size stays, and
 * every block it must write changed in few enough bytes to go as records), else 0. A commit
 * that also writes frames has its commit point in its footer, records theirs in the
 * marker's group: two points, and a kill -9 between them left a file that was neither state
 * (t_crash_mix: the records of one block of a close's commit counted, the frames of the
 * others not yet). */
static uint64_t ff_rec_all_fit(const ff_file *f)
{
    if (f->n_blocks != f->n_stored || f->size != f->v2.size)
        return 0;
    uint64_t n = 0;
    for (uint64_t i = f->rewrite_min; i < f->n_blocks; i++) {
        if (!ff_rec_must_write(&f->blk[i]))
            continue;
        if (!ff_rec_fits_block(f, i))
            return 0;
        n++;
    }
    return n;
}

/* Room for one block's records: at most FF_REC_RANGES of them, bs / FF_REC_SHARE bytes in
 * all before compression. */
#define FF_REC_OUT_CAP(bs) (FF_REC_RANGES * (FMT2_REC_OVERHEAD + 16) + \
                            LZ4_COMPRESSBOUND((bs) / FF_REC_SHARE))

/* One block's records, encoded before anything is written. */
typedef struct {
    uint64_t i;
    uint8_t *out;                      /* FF_REC_OUT_CAP bytes of the commit's buffer */
    size_t n;
    uint32_t chain;                    /* the checksum the last of them ends the chain with */
} ff_rec_out;

/* Encodes block i's ranges as records of group g into o->out: 1, 0 when its padding has no
 * room for them (the commit then writes frames), or -errno. */
static int ff_rec_encode_block(ff_file *f, uint64_t i, uint32_t g, ff_rec_out *o)
{
    ff_rec *r = &f->rec[i];
    int rc = ff_rec_known(f, i);
    if (rc < 0)
        return rc;
    o->i = i, o->n = 0, o->chain = r->chain;
    for (unsigned k = 0; k < r->n; k++)
        o->n += fmt2_rec_encode(o->out + o->n, o->chain, g, r->lo[k], f->blk[i].buf + r->lo[k],
                                r->hi[k] - r->lo[k], &o->chain);
    return r->room >= FMT2_KILL_LEN && (uint64_t)r->used + o->n <= r->room;
}

/* The n blocks the commit must write, encoded into o (its buffers in buf): 1, 0 when one
 * does not fit, or -errno. Called with f->io exclusive. */
static int ff_rec_encode_all(ff_file *f, uint32_t g, ff_rec_out *o, uint64_t n, uint8_t *buf)
{
    int rc = 1;
    uint64_t k = 0;
    for (uint64_t i = f->rewrite_min; rc > 0 && k < n && i < f->n_blocks; i++) {
        if (!ff_rec_must_write(&f->blk[i]))
            continue;
        o[k].out = buf + k * FF_REC_OUT_CAP(f->bs);
        rc = ff_rec_encode_block(f, i, g, &o[k++]);
    }
    return rc;
}

/* The commit point of a commit's records, after all of them, with f->io exclusive: the
 * marker's flags name their group (and the file is version 4 from here): a commit cut
 * short by a kill -9 leaves records of a later group, which count for nobody, and the file
 * as it was. Its sync (the commit's) makes both durable. */
static int ff_rec_seal(ff_file *f)
{
    uint8_t m[12];
    uint32_t g = (f->rec_group + 1) & FMT2_REC_GROUP_MASK;
    uint32_t version = f->version > FMT_VERSION_4 ? f->version : FMT_VERSION_4;
    fmt_put32(m, version);
    fmt_put32(m + 4, f->bs);
    fmt_put32(m + 8, fmt2_rec_flags(g, 1));
    int rc = fmt_pwrite_all(f->fd, m, sizeof(m), FMT_MARKER_FLAGS_OFF - 8);
    /* memory takes the blocks as stored either way: its reads count the group (the commit
     * fails, and the next one's seal names a later group, which covers this one) */
    f->version = version, f->rec_flag = 1, f->rec_group = g;
    return rc;
}

/* What a slot keeps free for the next commit's records. A commit that finds one of its
 * blocks without room writes every block as a frame (ff_rec_all_fit), so a slot that ran
 * low is folded by the next records commit that does not change its block. At most half its
 * padding, so that a slot with little room is not folded after every record. */
static int ff_rec_low(const ff_file *f, const ff_rec *r)
{
    uint32_t keep = r->room / 2 < FF_REC_OUT_CAP(f->bs) ? r->room / 2 : FF_REC_OUT_CAP(f->bs);
    return r->used > r->room - keep;
}

/* Notes that block i's slot ran low (f->rec_low), for the next records commit to fold. */
static void ff_rec_note_low(ff_file *f, uint64_t i)
{
    if (f->rec[i].low)
        return;
    if (f->n_rec_low == f->cap_rec_low) {
        uint64_t cap = f->cap_rec_low ? 2 * f->cap_rec_low : 64;
        uint64_t *v = realloc(f->rec_low, cap * sizeof(*v));
        if (!v)
            return;                    /* not folded early: a later commit may write frames */
        f->rec_low = v, f->cap_rec_low = cap;
    }
    f->rec[i].low = 1;
    f->rec_low[f->n_rec_low++] = i;
}

/* Writes the n changed blocks as records, then seals them: 1 done, 0 when one of them does
 * not fit (nothing written: the commit writes frames), or -errno (nothing sealed). */
static int ff_rec_write(ff_file *f, uint64_t n)
{
    ff_rec_out *o = calloc(n, sizeof(*o));
    uint8_t *buf = malloc(n * FF_REC_OUT_CAP(f->bs));
    int rc = o && buf ? 1 : -ENOMEM;
    ff_io_exclusive(f);
    if (rc > 0 && f->version < FMT_VERSION_4)
        f->rec_new = 1;                /* chains in a version 3 file are no one's */
    if (rc > 0)
        rc = ff_rec_encode_all(f, f->rec_group + 1, o, n, buf);
    for (uint64_t k = 0; rc > 0 && k < n; k++) {
        int w = fmt_pwrite_all(f->fd, o[k].out, o[k].n,
                               ff_rec_frame_end(f, o[k].i) + 8 + f->rec[o[k].i].used);
        rc = w < 0 ? w : 1;
    }
    if (rc > 0) {
        int w = ff_rec_seal(f);
        rc = w < 0 ? w : 1;
        for (uint64_t k = 0; k < n; k++) {
            ff_rec *r = &f->rec[o[k].i];
            r->used += (uint32_t)o[k].n, r->chain = o[k].chain;
            ff_rec_adopt(f, o[k].i);
            if (ff_rec_low(f, r))
                ff_rec_note_low(f, o[k].i);
        }
    }
    pthread_rwlock_unlock(&f->io);
    free(buf);
    free(o);
    return rc;
}

/* Makes the blocks whose slots ran low in earlier records commits, and are clean now, dirty
 * whole (their content as stored): the commit of frames that follows folds them. Returns how
 * many; the others (changed again, or rewritten since) stay noted or are dropped. */
static uint64_t ff_rec_take_low(ff_file *f)
{
    uint64_t n = 0, kept = 0;
    for (uint64_t k = 0; k < f->n_rec_low; k++) {
        uint64_t i = f->rec_low[k];
        ff_rec *r = i < f->cap ? &f->rec[i] : NULL;
        int gone = !r || !r->low || !r->known || r->used == 0 || !ff_rec_slot_ok(f, i);
        if (!gone && f->blk[i].state == FF_CLEAN && ff_dirty_whole(f, i) == 0) {
            r->low = 0, n++;
            continue;
        }
        if (!gone)
            f->rec_low[kept++] = i;    /* changed again in this commit: the next one */
        else if (r)
            r->low = 0;
    }
    f->n_rec_low = kept;
    return n;
}

int ff_rec_commit(ff_file *f, int durable)
{
    if (!f->rec || !ff_rec_able(f) || f->rec_off || f->n_batches || f->v2.j_pending ||
        f->v2.footerless ||
        f->n_stored < 1 || f->rewrite_min > f->n_stored - 1)
        return 0;
    uint64_t n = ff_rec_all_fit(f);
    int rc = n ? ff_rec_write(f, n) : 0;
    if (rc <= 0)
        return rc;
    f->mtime_stale = 1;
    f->rewrite_min = UINT64_MAX;
    f->env->n.commits++;
    f->env->n.record_commits++;
    /* Slots that ran low in earlier commits are folded by a commit of frames that changes no
     * content and whose sync is this commit's too: the records are sealed before it starts,
     * so a kill -9 anywhere in it leaves this commit's state. */
    uint64_t folds = ff_rec_take_low(f);
    if (folds) {
        rc = ff_commit(f, durable, FF_COMMIT_FULL);
        if (rc == 0)
            f->env->n.records_folded_early += folds;
        return rc < 0 ? rc : 1;
    }
    rc = durable ? ff2_sync_for(f, durable) : 0;
    if (rc == 0 && durable)
        rc = ff2_promise(f);
    if (rc == 0)
        f->deferred_err = 0;
    return rc < 0 ? rc : 1;
}

/* Makes stored block i dirty whole when its slot holds records (looked at only when this
 * open wrote some there, or an earlier session may have): 1, 0 when there is nothing to
 * fold, or -errno. */
static int ff_rec_fold_block(ff_file *f, uint64_t i)
{
    const ff_blk *b = &f->blk[i];
    if (b->state != FF_CLEAN || (b->off & FMT_ENTRY_ZERO) || b->word == FMT2_RUN_WORD ||
        b->word == FMT2_CHAIN_WORD || (!f->rec[i].known && !f->rec_old))
        return 0;
    int rc = ff_rec_known(f, i);
    if (rc < 0 || f->rec[i].used == 0)
        return rc;
    rc = ff_dirty_whole(f, i);
    return rc < 0 ? rc : 1;
}

/* Folds the records of every stored slot into new frames: each such block is made dirty
 * whole (no record takes it) and committed, 16 MiB of blocks at a time. A slot that cannot
 * be read (a damaged frame or padding: its reads give EIO too) is left as it is and counted
 * in *left, so that the file keeps saying it may hold records. */
static int ff_rec_fold_all(ff_file *f, uint64_t *folded, uint64_t *left)
{
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < f->n_stored; i++) {
        int dirtied = ff_rec_fold_block(f, i);
        *left += dirtied == -EIO;
        rc = dirtied < 0 && dirtied != -EIO ? dirtied : 0;
        *folded += dirtied > 0;
        if (dirtied > 0 && (uint64_t)f->n_dirty * f->bs >= FF_REC_FOLD_BYTES)
            rc = ff_commit(f, 0, FF_COMMIT_FULL);
    }
    return rc == 0 && f->n_dirty ? ff_commit(f, 0, FF_COMMIT_FULL) : rc;
}

int ff_rec_pads_last(const ff_file *f, uint64_t n)
{
    return ff_rec_able(f) && n && n == f->n_stored && n == f->n_blocks && f->rec &&
           f->blk[n - 1].state == FF_DIRTY && f->rec[n - 1].n;
}

int ff_rec_leave_last(ff_file *f)
{
    if ((!f->rec_flag && !f->rec_old) || f->n_stored == 0 || f->n_blocks != f->n_stored)
        return 0;
    int rc = ff_rec_table(f);
    rc = rc < 0 ? rc : ff_rec_fold_block(f, f->n_stored - 1);
    return rc < 0 ? rc : 0;
}

int ff_rec_fold(ff_file *f)
{
    if (f->env->opt.read_only || f->version < FMT_VERSION_4 || (!f->rec_old && !f->rec_flag))
        return 0;                      /* no record was written since the last fold */
    int rc = ff_rec_table(f);
    uint64_t folded = 0, left = 0;
    if (rc == 0)
        rc = ff_rec_fold_all(f, &folded, &left);
    f->env->n.records_folded += folded;
    if (rc < 0)
        return rc;
    if (left) {                        /* the flag stays: later opens still look for records */
        lg_printf(f->env->log, LG_WARN, "%s: %llu damaged slot(s) left unfolded (reads of "
                  "them fail with EIO; fsck.fpgalz4fs repairs what it can)", ff_name(f),
                  (unsigned long long)left);
        return 0;
    }
    /* unsynced: an open after a crash walks the slots of a file the lost session changed,
     * flag or not (ff2_load) */
    uint8_t none[4];
    fmt_put32(none, fmt2_rec_flags(f->rec_group, 0));
    rc = f->rec_flag ? fmt_pwrite_all(f->fd, none, sizeof(none), FMT_MARKER_FLAGS_OFF) : 0;
    f->mtime_stale = 1;                /* the release puts the logical mtime back */
    if (rc == 0) {
        ff_io_exclusive(f);            /* readers look for records while either is set */
        f->rec_flag = f->rec_old = 0;
        pthread_rwlock_unlock(&f->io);
    }
    return rc;
}

int ff_rec_fold_open(ff_file *f)
{
    uint64_t before = f->env->n.records_folded;
    int rc = ff_rec_fold(f);
    uint64_t n = f->env->n.records_folded - before;
    if (rc < 0)
        lg_printf(f->env->log, LG_WARN, "%s: cannot fold the page records an earlier session "
                  "left yet (%s); reads apply them, the release tries again", ff_name(f),
                  strerror(-rc));
    else if (n)
        lg_printf(f->env->log, LG_INFO, "%s: folded the page records an earlier session left "
                  "in %llu blocks", ff_name(f), (unsigned long long)n);
    return rc;
}
