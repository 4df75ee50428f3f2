/* The commit protocol (docs/FORMAT.md; ff_internal.h sums it up): the plan of a commit,
 * handing blocks to the engine, frames, the seek table, adopting what is on disk, and the
 * streaming batches of an appending writer. */
#include "ff_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "fmt.h"
#include "fmt2.h"

/* ---- the commit ---- */

/* First block of the stored frame holding block i: blocks of one frame lie back to back. */
static uint64_t ff_frame_first(const ff_file *f, uint64_t i)
{
    while (i > 0) {
        const ff_blk *p = &f->blk[i - 1];
        if ((p->off & FMT_OFFSET_MASK) + fmt_block_len(p->word) != (f->blk[i].off & FMT_OFFSET_MASK))
            break;
        i--;
    }
    return i;
}

/* One past the last block of the stored frame starting at block i. */
static uint64_t ff_frame_end(const ff_file *f, uint64_t i)
{
    for (i++; i < f->n_stored; i++) {
        const ff_blk *p = &f->blk[i - 1];
        if ((p->off & FMT_OFFSET_MASK) + fmt_block_len(p->word) != (f->blk[i].off & FMT_OFFSET_MASK))
            break;
    }
    return i;
}

static void ff_plan_free(ff_env *env, ff_commit_plan *p)
{
    env->dirty_bytes -= p->comp_bytes;
    free(p->stage);
    free(p->jobs);
    free(p->comp);
    free(p->job_at);
    fmt_trailer_free(&p->t);
}

static int ff_plan_retire(ff_file *f, ff_commit_plan *p)
{
    uint32_t n = 0;
    for (uint64_t i = p->s; i < f->n_stored; i = ff_frame_end(f, i))
        n++;
    p->t.retire = calloc(n ? n : 1, sizeof(*p->t.retire));
    p->t.reveal = calloc((p->end - p->s) / FF_FRAME_MAX_BLOCKS + 2 + f->n_pending,
                         sizeof(*p->t.reveal));
    p->t.entries = calloc(p->end ? p->end : 1, sizeof(*p->t.entries));
    if (!p->t.retire || !p->t.reveal || !p->t.entries)
        return -ENOMEM;
    if (f->n_pending)
        memcpy(p->t.reveal, f->pending, f->n_pending * sizeof(*f->pending));
    p->t.n_reveal = f->n_pending;
    for (uint64_t i = p->s; i < f->n_stored; i = ff_frame_end(f, i)) {
        uint64_t last = ff_frame_end(f, i) - 1;
        uint64_t start = (f->blk[i].off & FMT_OFFSET_MASK) - FMT_FRAME_HEADER_LEN;
        uint64_t stop = (f->blk[last].off & FMT_OFFSET_MASK) + fmt_block_len(f->blk[last].word) +
                        FMT_FRAME_END_LEN;
        p->t.retire[p->t.n_retire++] = (fmt_retire){start, stop - start};
    }
    return 0;
}

/* A whole block of zeros is encoded once per file and reused: holes cost no compression. */
static int ff_zero_template(ff_file *f)
{
    if (f->zero_comp)
        return 0;
    uint8_t *out = malloc(eng_bound(f->bs));
    if (!out)
        return -ENOMEM;
    eng_job j = {.src = f->env->zeros, .len = f->bs, .dst = out, .dst_cap = eng_bound(f->bs)};
    eng_compress(f->env->eng, &j, 1);
    f->zero_comp = out;
    f->zero_comp_len = j.out_len;
    return 0;
}

static int ff_is_zero_template(const ff_file *f, uint64_t i)
{
    return f->blk[i].state == FF_ZERO && ff_blen(f, i) == f->bs;
}

/* Hands every changed block of the plan to the engine; returns without waiting. */
static int ff_submit(ff_file *f, ff_commit_plan *p)
{
    uint64_t n_blocks = p->end - p->s;
    p->job_at = malloc((n_blocks ? n_blocks : 1) * sizeof(*p->job_at));
    p->jobs = malloc((n_blocks ? n_blocks : 1) * sizeof(*p->jobs));
    if (!p->job_at || !p->jobs)
        return -ENOMEM;
    for (uint64_t i = p->s; i < p->end; i++) {
        const ff_blk *k = &f->blk[i];
        /* version 2 stores a hole without compressing anything */
        int job = k->state == FF_DIRTY ||
                  (k->state == FF_ZERO && f->version == 1 && !ff_is_zero_template(f, i));
        p->job_at[i - p->s] = !job ? UINT32_MAX
                              : p->full && ff_tail_wanted(f, i) ? FF_JOB_TAIL
                                                                 : p->n_jobs++;
    }
    p->comp = malloc((size_t)(p->n_jobs ? p->n_jobs : 1) * p->comp_step);
    if (!p->comp)
        return -ENOMEM;
    /* Outputs in flight count against the same budget as dirty blocks, so that many
     * streaming writers commit (and wait) before memory outgrows mem_mb. */
    p->comp_bytes = (uint64_t)p->n_jobs * p->comp_step;
    f->env->dirty_bytes += p->comp_bytes;
    for (uint64_t i = p->s; i < p->end; i++) {
        uint32_t j = p->job_at[i - p->s];
        if (j < p->n_jobs)
            p->jobs[j] = (eng_job){
                .src = f->blk[i].state == FF_DIRTY ? f->blk[i].buf : f->env->zeros,
                .len = (uint32_t)ff_blen(f, i),
                .dst = p->comp + (size_t)j * p->comp_step + p->comp_lead,
                .dst_cap = p->comp_stride, .want_sums = f->version >= FMT_VERSION_2,
                .src_host = f->blk[i].state == FF_DIRTY && f->blk[i].host};
    }
    if (p->bw)
        ff_brick_submit(f, p);
    else
        eng_submit(f->env->eng, p->jobs, p->n_jobs, &p->ticket);
    return 0;
}

/* Lays out blocks [a, b) in p->stage after the wrapper and frame header: stored bytes for
 * clean blocks (copied, never recompressed), the engine's output for changed ones. */
static int ff_encode_blocks(ff_file *f, ff_commit_plan *p, uint64_t a, uint64_t b, size_t *used)
{
    size_t at = 8 + FMT_FRAME_HEADER_LEN;
    for (uint64_t i = a; i < b; i++) {
        ff_blk *k = &f->blk[i];
        fmt_entry *e = &p->t.entries[i];
        uint32_t j = p->job_at[i - p->s];
        if (k->state == FF_CLEAN) {
            int rc = fmt_pread_all(f->fd, p->stage + at, fmt_block_len(k->word),
                                   k->off & FMT_OFFSET_MASK);
            if (rc < 0)
                return rc;
            e->off = (k->off & FMT_ENTRY_ZERO) | (p->pos + at);
            f->env->n.blocks_copied++;
        } else if (j == UINT32_MAX) {
            fmt_block_encode(p->stage + at, f->env->zeros, f->bs, f->zero_comp, f->zero_comp_len);
            e->off = (p->pos + at) | FMT_ENTRY_ZERO;
        } else {
            const eng_job *jb = &p->jobs[j];
            int zero = k->state == FF_ZERO || ff_is_zero(jb->src, jb->len);
            fmt_block_encode(p->stage + at, jb->src, jb->len, jb->dst, jb->out_len);
            e->off = (p->pos + at) | (zero ? FMT_ENTRY_ZERO : 0);
            f->env->n.blocks_written++;
        }
        e->word = k->state == FF_CLEAN ? k->word : fmt_get32(p->stage + at);
        at += fmt_block_len(e->word);
    }
    *used = at;
    return 0;
}

/* XXH32 of the decoded bytes of blocks [a, b), for the frame's content checksum. Blocks
 * that are only copied are decoded for it: a rewrite in the middle costs a decode. */
static int ff_content_checksum(ff_file *f, uint64_t a, uint64_t b, uint32_t *sum)
{
    XXH32_state_t *st = XXH32_createState();
    uint8_t *tmp = NULL;
    int rc = st ? 0 : -ENOMEM;
    if (st)
        XXH32_reset(st, 0);
    for (uint64_t i = a; rc == 0 && i < b; i++) {
        const ff_blk *k = &f->blk[i];
        const uint8_t *src = k->state == FF_DIRTY ? k->buf : f->env->zeros;
        if (k->state == FF_CLEAN && !(k->off & FMT_ENTRY_ZERO)) {
            if (!tmp && !(tmp = malloc(f->bs))) {
                rc = -ENOMEM;
                break;
            }
            rc = ff_decode(f, i, tmp);
            src = tmp;
        }
        XXH32_update(st, src, ff_blen(f, i));
    }
    free(tmp);
    if (st)
        *sum = XXH32_digest(st);
    XXH32_freeState(st);
    return rc;
}

/* Writes blocks [a, b) as one frame inside a hidden wrapper at p->pos. */
static int ff_write_frame(ff_file *f, ff_commit_plan *p, uint64_t a, uint64_t b)
{
    size_t at = 0;
    uint32_t sum;
    int rc = ff_content_checksum(f, a, b, &sum);
    if (rc == 0)
        rc = ff_encode_blocks(f, p, a, b, &at);
    if (rc < 0)
        return rc;
    uint64_t content = 0;
    for (uint64_t i = a; i < b; i++)
        content += ff_blen(f, i);
    fmt_put32(p->stage + at, 0);                             /* EndMark */
    fmt_put32(p->stage + at + 4, sum);
    at += FMT_FRAME_END_LEN;
    fmt_put32(p->stage, FMT_SKIP_HIDDEN);
    fmt_put32(p->stage + 4, p->visible ? 0 : (uint32_t)(at - 8));
    fmt_frame_header(p->stage + 8, f->bs, content, 1);
    if ((rc = fmt_pwrite_all(f->fd, p->stage, at, p->pos)) < 0)
        return rc;
    if (!p->visible)
        p->t.reveal[p->t.n_reveal++] = p->pos;
    p->pos += at;
    return 0;
}

/* Frames of at most FF_FRAME_MAX_BLOCKS full blocks; a partial block gets a frame of its own
 * so that appending to it never rewrites the full blocks before it. */
static int ff_write_frames(ff_file *f, ff_commit_plan *p)
{
    uint64_t i = p->s;
    int rc = 0;
    if (p->end > p->s && !(p->stage = malloc(p->stage_cap)))
        return -ENOMEM;
    while (rc == 0 && i < p->end) {
        uint64_t b = i + FF_FRAME_MAX_BLOCKS < p->end ? i + FF_FRAME_MAX_BLOCKS : p->end;
        if (b == p->end && ff_blen(f, b - 1) < f->bs && b - 1 > i)
            b--;
        rc = ff_write_frame(f, p, i, b);
        i = b;
    }
    free(p->stage);
    p->stage = NULL;
    return rc;
}

static int ff_plan_zero_template(ff_file *f, const ff_commit_plan *p)
{
    for (uint64_t i = p->s; i < p->end; i++)
        if (ff_is_zero_template(f, i))
            return ff_zero_template(f);
    return 0;
}

static int ff_plan(ff_file *f, ff_commit_plan *p, int pressure)
{
    uint64_t r = f->rewrite_min;
    uint64_t base = f->n_batches ? f->batches[f->n_batches - 1]->end : f->n_stored;
    p->s = r < f->n_stored ? (f->version == 1 ? ff_frame_first(f, r) : r) : base;
    p->end = f->n_blocks;
    /* Under pressure a writer keeps its partial last block in memory, and a streaming
     * writer every block from the first one not yet filled (the kernel's writeback need not
     * send blocks whole or in order): writing them now would retire them at the next. */
    if (pressure && f->size % f->bs && p->end - 1 >= base && p->end - 1 > p->s)
        p->end--;
    /* ...but never below the stored blocks: a streaming writer's commit made full by an
     * in-place change would otherwise end the file at its first unfilled block, a shrink
     * that a power loss could keep (blocks an fsync promised, gone) */
    for (uint64_t i = base; pressure == FF_COMMIT_STREAM && i < p->end; i++) {
        const ff_blk *b = &f->blk[i];
        if (b->state == FF_ZERO || (b->state == FF_DIRTY && b->filled < ff_blen(f, i)))
            p->end = i;
    }
    p->size = p->end == f->n_blocks ? f->size : p->end * f->bs;
    p->pos = f->phys_end;
    /* Buffers as large as this plan needs, not as a whole frame of whole blocks: a small
     * file's commit then costs kilobytes, not megabytes of fresh pages. */
    uint64_t n = p->end > p->s ? p->end - p->s : 1;
    uint32_t longest = n > 1 ? f->bs : (uint32_t)ff_blen(f, p->s < f->n_blocks ? p->s : 0);
    p->comp_stride = eng_bound(longest ? longest : 1);
    /* a version 2 frame is the compressed block between a lead and a trail: made where the
     * engine left the block, it is written from there without a copy */
    p->comp_lead = f->version >= FMT_VERSION_2 ? FMT2_FRAME_LEAD : 0;
    p->comp_step = p->comp_stride + (p->comp_lead ? FMT2_FRAME_LEAD + FMT2_FRAME_TRAIL : 0);
    p->stage_cap = 8 + FMT_FRAME_HEADER_LEN + FMT_FRAME_END_LEN +
                   (size_t)(n < FF_FRAME_MAX_BLOCKS ? n : FF_FRAME_MAX_BLOCKS) *
                       (p->comp_stride + FMT_BLOCK_OVERHEAD);
    if (f->version >= FMT_VERSION_2) { /* slots: nothing to retire, no frames to group */
        p->planned = 1;
        return 0;
    }
    int rc = ff_plan_retire(f, p);
    /* A frame that replaces nothing and follows only revealed frames can be written
     * revealed: a crash before the seek table leaves it to the scan of the next open, which
     * takes the frames as they are; it saves two calls per frame. Streaming commits stay
     * hidden (their file keeps its last committed state until the next seek table), and so
     * does anything after their hidden frames, which a scan would skip. */
    p->visible = p->t.n_retire == 0 && f->n_pending == 0 && f->n_batches == 0 &&
                 pressure != FF_COMMIT_STREAM;
    if (rc == 0)
        rc = ff_plan_zero_template(f, p);
    p->planned = rc == 0;
    return rc;
}

int ff_write_trailer(ff_file *f, ff_commit_plan *p)
{
    for (uint64_t i = 0; i < p->s; i++)
        p->t.entries[i] = (fmt_entry){f->blk[i].off, f->blk[i].word};
    p->t.n_entries = (uint32_t)p->end;
    p->t.size = p->size;
    size_t len = fmt_trailer_len(p->t.n_entries, p->t.n_reveal, p->t.n_retire);
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    fmt_trailer_encode(&p->t, buf);
    int rc = fmt_pwrite_all(f->fd, buf, len, p->pos);
    free(buf);
    if (rc == 0 && ftruncate(f->fd, (off_t)(p->pos + len)) < 0)
        rc = -errno;
    p->pos += len;
    return rc;
}

/* The plan is on disk: make memory say the same. */
/* A brick ends after the writer went on: a block changed before the brick's range
 * meanwhile (a header patched behind the data) is still to be written. */
static void ff_adopt_range(ff_file *f, const ff_commit_plan *p)
{
    if (f->rewrite_min >= p->s)
        f->rewrite_min = p->end < f->n_blocks ? p->end : UINT64_MAX;
}

static void ff_adopt(ff_file *f, ff_commit_plan *p)
{
    for (uint64_t i = p->s; i < p->end; i++) {
        ff_blk *b = &f->blk[i];
        ff_drop_buf(f, b);
        b->off = p->t.entries[i].off, b->word = p->t.entries[i].word, b->state = FF_CLEAN;
    }
    f->n_stored = p->end;
    ff_adopt_range(f, p);
    f->phys_end = p->pos;
}

void ff_restore_mtime(ff_file *f)
{
    struct timespec ts[2] = {{0, UTIME_OMIT}, f->mtime};
    (void)futimens(f->fd, ts);
    f->mtime_stale = 0;
}

int ff_sync_for(ff_file *f, int durable)
{
    if (durable != FF_DURABLE_ALL)
        return fdatasync(f->fd) < 0 ? -errno : 0;
    ff_restore_mtime(f);               /* the logical mtime, not the time of the last write */
    return fsync(f->fd) < 0 ? -errno : 0;
}

static int ff_sync(ff_file *f)
{
    return ff_sync_for(f, FF_DURABLE_DATA);
}

/* Remembers the hidden wrappers of a streaming commit, which wrote no seek table. */
static int ff_keep_pending(ff_file *f, const ff_commit_plan *p)
{
    uint32_t need = f->n_pending + p->t.n_reveal;
    if (need > f->pending_cap) {
        uint64_t *v = realloc(f->pending, need * 2 * sizeof(*v));
        if (!v)
            return -ENOMEM;
        f->pending = v, f->pending_cap = need * 2;
    }
    if (p->t.n_reveal)                 /* memcpy to a NULL list is undefined, even of 0 bytes */
        memcpy(f->pending + f->n_pending, p->t.reveal, p->t.n_reveal * sizeof(*f->pending));
    f->n_pending = need;
    return 0;
}

/* Order on disk: frames (hidden) -> [sync if anything is retired] -> seek table ->
 * [sync if anything is retired or the caller wants durability] -> header flips. The first
 * sync keeps a durable table from naming frames that never reached the disk; the second
 * keeps old frames from being retired before the table that replaces them is durable. */
static int ff_commit_write(ff_file *f, ff_commit_plan *p, int durable)
{
    int retiring = p->t.n_retire > 0, rc = ff_write_frames(f, p);
    uint64_t old_start = f->table_start, old_end = f->table_end, table = p->pos;
    if (rc == 0 && retiring)
        rc = ff_sync(f);
    if (rc == 0)
        rc = ff_write_trailer(f, p);
    if (rc == 0 && (retiring || durable))
        rc = ff_sync_for(f, durable);
    if (rc == 0) {
        f->n_pending = 0;
        f->table_start = table, f->table_end = p->pos;
        if ((retiring || durable) && old_end > old_start + 8)   /* nobody's fallback now */
            fmt_punch(f->fd, old_start + 8, old_end - old_start - 8);
    }
    return rc;
}

static void ff_commit_failed(ff_file *f, int rc)
{
    struct stat st;
    if (f->version >= FMT_VERSION_2) { /* slots: what was written stays; the blocks stay
                                          dirty and the next commit writes them again,
                                          zeroing whatever this one left past the old end */
        lg_printf(f->env->log, LG_ERR, "%s: commit failed: %s", ff_name(f), strerror(-rc));
        if (fstat(f->fd, &st) == 0 && (uint64_t)st.st_size > f->v2.eof)
            f->v2.eof = (uint64_t)st.st_size;
        ff2_rollback(f);
        return;
    }
    /* Everything before phys_end is intact: cut what this commit added. */
    lg_printf(f->env->log, LG_ERR, "%s: commit failed: %s", ff_name(f), strerror(-rc));
    if (ftruncate(f->fd, (off_t)f->phys_end) < 0)
        lg_printf(f->env->log, LG_ERR, "%s: cannot cut a failed commit: %s", ff_name(f),
                  strerror(errno));
}

static void ff_batch_drop(ff_file *f, ff_commit_plan *p)
{
    ff_brick_free(f, p);
    ff_plan_free(f->env, p);
    free(p);
}

static ff_commit_plan *ff_batch_pop(ff_file *f)
{
    ff_commit_plan *p = f->batches[0];
    memmove(f->batches, f->batches + 1, --f->n_batches * sizeof(*f->batches));
    return p;
}

/* Waits for every brick in flight and drops it unwritten: its blocks stay dirty. (A pool
 * thread may have written one already: its slots lie past the committed ones, where the
 * next commit writes them again.) */
void ff_batch_abandon(ff_file *f)
{
    if (f->n_batches)
        ff_bricks_stop(f);
    while (f->n_batches) {
        ff_commit_plan *p = ff_batch_pop(f);
        eng_wait(f->env->eng, &p->ticket);
        ff_batch_drop(f, p);
    }
}

/* Ends the oldest streaming batch: its frames are written hidden, after whatever is in the
 * file now, and no seek table; the next full commit's table reveals them (one table per
 * file, not one per brick). A failed batch takes the later ones with it: their blocks stay
 * dirty for the next commit to write. */
static int ff_batch_finish_one(ff_file *f)
{
    ff_commit_plan *p = ff_batch_pop(f);
    eng_wait(f->env->eng, &p->ticket);
    p->pos = f->phys_end;
    int rc;
    if (f->version >= FMT_VERSION_2) {
        if ((rc = ff_brick_finish(f, p)) == 0)
            ff_adopt_range(f, p);
    } else {
        rc = ff_write_frames(f, p);
        if (rc == 0)
            rc = ff_keep_pending(f, p);
        if (rc == 0)
            ff_adopt(f, p);
    }
    f->mtime_stale = 1;                /* put back at the release (ff_commit says why) */
    ff_batch_drop(f, p);
    if (rc < 0) {
        ff_commit_failed(f, rc);
        ff_batch_abandon(f);
    }
    return rc;
}

int ff_batch_finish(ff_file *f)
{
    int rc = 0;
    while (rc == 0 && f->n_batches)
        rc = ff_batch_finish_one(f);
    return rc;
}

/* Dirty blocks that no brick in flight holds: what a streaming writer gathered since its
 * last brick. */
uint64_t ff_unbricked(const ff_file *f)
{
    uint64_t held = 0;
    for (unsigned k = 0; k < f->n_batches; k++)
        for (uint64_t i = f->batches[k]->s; i < f->batches[k]->end; i++)
            held += f->blk[i].state == FF_DIRTY;
    return f->n_dirty - held;
}

int ff_batch_holds(const ff_file *f, uint64_t i)
{
    for (unsigned k = 0; k < f->n_batches; k++)
        if (i >= f->batches[k]->s && i < f->batches[k]->end)
            return 1;
    return 0;
}

/* A streaming writer's brick goes to the engine and the writer goes on filling the next
 * ones while it compresses: the file-level half of the ping-pong. Up to FF_MAX_BATCHES are
 * in flight, so one writer can keep every buffer set busy and spill the rest to software. */
static int ff_commit_stream(ff_file *f, ff_commit_plan *p)
{
    ff_commit_plan *batch = malloc(sizeof(*batch));
    if (!batch) {
        ff_plan_free(f->env, p);
        return -ENOMEM;
    }
    *batch = *p;
    batch->t.n_reveal = 0;             /* pending wrappers are the file's, not this batch's */
    batch->visible = 0;
    int rc = ff_brick_prepare(f, batch);
    if (rc == 0)
        rc = ff_submit(f, batch);
    if (rc < 0) {
        ff_batch_drop(f, batch);
        return rc;
    }
    f->batches[f->n_batches++] = batch;
    return 0;
}

int ff_commit(ff_file *f, int durable, int pressure)
{
    int full = !pressure || durable || f->rewrite_min < f->n_stored;
    /* Over budget, a writer ends its bricks in flight, and waits for the one it starts:
     * that is what frees memory, and every writer doing so bounds the total by mem_mb
     * however many files are written at once. */
    int over = f->env->dirty_bytes > f->env->opt.mem_bytes / 2;
    int rc = full || over ? ff_batch_finish(f)
             : f->n_batches == FF_MAX_BATCHES ? ff_batch_finish_one(f) : 0;
    if (rc < 0)
        return rc;
    if (f->rewrite_min == UINT64_MAX && f->n_pending == 0 && f->n_batches == 0 &&
        !(f->version >= FMT_VERSION_2 && f->v2.footerless)) {
        /* the footer that promises every block comes after the sync that makes it true */
        rc = durable ? ff_sync_for(f, durable) : 0;
        int promise = durable && f->version >= FMT_VERSION_2 && !f->env->opt.read_only;
        return rc == 0 && promise ? ff2_promise(f) : rc;
    }
    if (f->env->opt.read_only)
        return -EROFS;
    if (full && f->version >= FMT_VERSION_3 && (rc = ff_chain_commit(f, durable)) != 0)
        return rc < 0 ? rc : 0;
    if (full && f->version >= FMT_VERSION_3 && (rc = ff_rec_commit(f, durable)) != 0)
        return rc < 0 ? rc : 0;
    if (full && (rc = ff2_split_runs(f)) < 0)
        return rc;
    ff_commit_plan p = {0};
    rc = ff_plan(f, &p, pressure);
    int stream = !full && p.t.n_retire == 0;
    if (rc == 0 && stream && (p.end <= p.s || p.end < f->n_stored)) {
        ff_plan_free(f->env, &p);              /* nothing whole to stream yet */
        return 0;
    }
    if (rc == 0 && stream) {
        rc = ff_commit_stream(f, &p);
        return rc == 0 && over ? ff_batch_finish(f) : rc;
    }
    p.full = 1;
    if (rc == 0 && (rc = ff_submit(f, &p)) == 0) {
        eng_wait(f->env->eng, &p.ticket);
        rc = f->version >= FMT_VERSION_2 ? ff2_commit_write(f, &p, durable)
                                         : ff_commit_write(f, &p, durable);
    }
    if (rc == 0 && f->version >= FMT_VERSION_2) {
        ff_adopt_range(f, &p);
        f->env->n.commits++;
    } else if (rc == 0) {
        /* Committed: from here a failure to flip headers is finished by the next open. */
        ff_adopt(f, &p);
        f->env->n.commits++;
        /* a read may still decode a frame this retires (and punches); reveals only flip
         * wrapper headers, which no read looks at */
        if (p.t.n_retire)
            ff_io_exclusive(f);
        int flipped = fmt_apply_intents(f->fd, &p.t, 1);
        if (p.t.n_retire)
            pthread_rwlock_unlock(&f->io);
        if (flipped < 0)
            lg_printf(f->env->log, LG_ERR, "%s: cannot retire old frames yet: %s", ff_name(f),
                      strerror(-flipped));
        rc = flipped < 0 ? flipped : 0;
    } else if (p.planned) {
        ff_commit_failed(f, rc);
    }
    /* The backing file's mtime is put back at the release, not now: a change of its
     * attributes after a sync makes the backing filesystem's next sync of anything in the
     * directory a journal commit (a database's fsync of its directory, for one). */
    f->mtime_stale = 1;
    ff_plan_free(f->env, &p);
    if (rc == 0 && full)
        f->deferred_err = 0;
    return rc;
}
