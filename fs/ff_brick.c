/* ff_brick: an appending writer's streaming bricks, written to their slots by the pool
 * thread that finished compressing them, while the writer goes on filling the next ones.
 *
 * A version 2 brick holds whole blocks at or past the committed ones, so where each frame
 * goes is known before it is made (FORMAT.md 9.3) and nothing the file's lock guards is
 * needed to write it: the brick keeps what the writer knew when it submitted it, and memory
 * adopts the slots when the writer finishes the brick (ff_batch_finish_one), under its lock.
 *
 * Bricks are written strictly in the order they were submitted, whoever writes them, so
 * that a crash leaves a prefix of them as before (FORMAT.md 11.2), and a brick never lands
 * before the one ahead of it has (which may zero what lies past the old end for a hole,
 * 11.1 step 4.0). A brick written here pads every slot up to the next one, its last one's
 * too; one its writer writes (ff2_stream_write) leaves its last slot unpadded, and the next
 * brick written here writes that padding first (ff_bricks.pad_at). A brick is left to the
 * writer's finish when it needs what only the writer may do: a live or pending journal
 * (decided when it is submitted), a block of zeros (a hole), or an I/O lock someone holds
 * exclusive (the descriptor or the bytes may be going away). The bricks behind it then wait
 * for that finish, which writes them too when they are ready by then. A brick whose write
 * failed stops the line: the writer's finish reports it and drops the bricks behind it
 * unwritten (their blocks stay dirty). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cred.h"
#include "ff_slots.h"

typedef enum {
    FF_BRICK_COMPRESSING,              /* in the engine */
    FF_BRICK_READY,                    /* compressed; waits for the bricks before it */
    FF_BRICK_WRITING,                  /* a thread writes it */
    FF_BRICK_WRITTEN,                  /* its slots are written: the finish adopts them */
    FF_BRICK_DECLINED,                 /* its turn came: the writer's finish writes it */
    FF_BRICK_FAILED,                   /* writing failed with rc */
} ff_brick_state;

struct ff_brick_s {
    ff_file *f;
    ff_commit_plan *p;
    uint64_t seq;
    ff_brick_state state;
    int rc;
    int writer_only;                   /* decided at submission: the finish writes it */
    uid_t charge;                      /* whose space its writes take (cred.h), CR_NONE:
                                          the daemon's */
    uint8_t marker[FMT_MARKER_LEN];    /* the file's marker, when block 0 is in the brick */
    int with_marker;
    ff2_frames fr;                     /* what was written, for the finish to adopt */
    uint64_t held;                     /* bytes of fr.buf (frames of blocks stored raw),
                                          counted in the env's dirty_bytes until freed */
    uint64_t tail;                     /* the end of the brick's last frame */
};

void ff_bricks_init(ff_bricks *b)
{
    *b = (ff_bricks){.seq = 0};
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->moved, NULL);
}

void ff_bricks_destroy(ff_bricks *b)
{
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->moved);
}

int ff_brick_prepare(ff_file *f, ff_commit_plan *p)
{
    p->bw = NULL;
    if (f->version < FMT_VERSION_2)
        return 0;
    ff_brick *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    *b = (ff_brick){.f = f, .p = p, .state = FF_BRICK_COMPRESSING, .charge = CR_NONE};
    if (f->env->opt.charge_owner && f->owner != 0)
        b->charge = f->owner;          /* as its writer's own writes (ff_lock_charged) */
    uint64_t after = f->n_batches ? f->batches[f->n_batches - 1]->end : f->n_stored;
    b->writer_only = f->v2.j_live || f->v2.j_pending || p->s != after || p->end <= p->s;
    if (p->s == 0 && f->n_stored == 0) {
        fmt2_marker_encode(f->version, f->bs, fmt2_rec_flags(f->rec_group, f->rec_flag),
                           f->env->sb.uuid, b->marker);
        b->with_marker = 1;
    }
    if (f->n_batches == 0) {           /* the line starts again behind the committed blocks */
        uint64_t at = 0, end;
        int rc = ff2_open_last(f, &at, &end);
        if (rc < 0) {
            free(b);
            return rc;
        }
        pthread_mutex_lock(&f->bw.lock);
        f->bw.next = f->bw.seq, f->bw.pad_at = at, f->bw.pad_end = end, f->bw.stopped = 0;
        pthread_mutex_unlock(&f->bw.lock);
    }
    p->bw = b;
    return 0;
}

void ff_brick_free(ff_file *f, ff_commit_plan *p)
{
    ff_brick *b = p->bw;
    if (!b)
        return;
    pthread_mutex_lock(&f->bw.lock);
    if (f->bw.ring[b->seq % FF_MAX_BATCHES] == b)
        f->bw.ring[b->seq % FF_MAX_BATCHES] = NULL;
    pthread_mutex_unlock(&f->bw.lock);
    f->env->dirty_bytes -= b->held;
    free(b->fr.v);
    free(b->fr.buf);
    free(b);
    p->bw = NULL;
}

void ff_bricks_stop(ff_file *f)
{
    pthread_mutex_lock(&f->bw.lock);
    f->bw.stopped = 1;
    pthread_mutex_unlock(&f->bw.lock);
}

/* The brick's frames, from the jobs alone (the file's block table may be reallocated by
 * the writer meanwhile). 1: a block is not the engine's to make (a hole). */
static int ff_brick_encode(ff_brick *b)
{
    ff_commit_plan *p = b->p;
    uint64_t n = p->end - p->s, raw = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t j = p->job_at[i];
        if (j >= p->n_jobs || ff_is_zero(p->jobs[j].src, p->jobs[j].len))
            return 1;
        if (!(p->comp_lead == FMT2_FRAME_LEAD && p->jobs[j].out_len < p->jobs[j].len))
            raw += p->jobs[j].len + FMT2_FRAME_OVERHEAD;
    }
    b->fr = (ff2_frames){calloc(n ? n : 1, sizeof(ff2_frame)), 0, malloc(raw ? raw : 1)};
    if (!b->fr.v || !b->fr.buf)
        return -ENOMEM;
    b->held = raw;                     /* memory like the engine's outputs (ff_submit) */
    b->f->env->dirty_bytes += raw;
    uint8_t *at = b->fr.buf;
    for (uint64_t i = 0; i < n; i++) {
        eng_job *jb = &p->jobs[p->job_at[i]];
        ff2_frame *e = &b->fr.v[b->fr.n++];
        *e = (ff2_frame){p->s + i, jb->len, 0, NULL, 0, 0};
        e->frame = ff2_frame_of_job(b->f, p, jb, at, &e->frame_len);
        if (e->frame == at)
            at += e->frame_len;
    }
    return 0;
}

/* Writes the brick: first the padding the slot before it lacks, then every slot with its
 * padding up to the next slot. 1: left to the writer's finish. */
static int ff_brick_write(ff_brick *b, uint64_t pad_at, uint64_t pad_end)
{
    ff_file *f = b->f;
    fmt2_geo g = ff2_geo(f);
    int rc = ff_brick_encode(b);
    if (rc != 0)
        return rc;
    if (pthread_rwlock_tryrdlock(&f->io) != 0)
        return 1;
    int fd = f->fd;                    /* steady while the I/O lock is held */
    uid_t was = b->charge != CR_NONE ? cr_charge(b->charge) : CR_NONE;
    /* the slot before the brick: unpadded (pad_end), or padded to its next slot's start by
     * the brick before, while this brick's first frame may go to that slot's page */
    const ff2_frame *first = &b->fr.v[0], *last = &b->fr.v[b->fr.n - 1];
    uint64_t at0 = fmt2_frame_place(g, first->block, first->len, first->frame_len);
    if (fd < 0)
        rc = 1;
    else if (pad_end || (pad_at && at0 != fmt2_slot_off(g, first->block)))
        rc = ff2_pad(f, pad_at, at0, 1);
    for (uint64_t k = 0; rc == 0 && k < b->fr.n; k++) {
        const ff2_frame *e = &b->fr.v[k], *nx = k + 1 < b->fr.n ? e + 1 : NULL;
        rc = fmt2_write_slot(fd, g, e->block, e->frame, e->frame_len, e->len, 0,
                             nx ? fmt2_frame_place(g, nx->block, nx->len, nx->frame_len)
                                : fmt2_slot_off(g, e->block + 1),
                             b->with_marker && e->block == 0 ? b->marker : NULL);
    }
    cr_restore(was);
    pthread_rwlock_unlock(&f->io);
    if (rc == 0)
        b->tail = fmt2_frame_place(g, last->block, last->len, last->frame_len) + last->frame_len;
    return rc;
}

/* Under the line's lock: writes every brick whose turn has come and that is ready, on this
 * thread, until one is not ready, is the writer's, or fails. */
static void ff_brick_drain(ff_bricks *w)
{
    for (;;) {
        ff_brick *h = w->ring[w->next % FF_MAX_BATCHES];
        if (!h || h->seq != w->next || h->state != FF_BRICK_READY)
            return;
        int rc = 1;
        if (!h->writer_only && !w->stopped) {
            uint64_t at = w->pad_at, end = w->pad_end;
            h->state = FF_BRICK_WRITING;
            pthread_mutex_unlock(&w->lock);
            rc = ff_brick_write(h, at, end);
            pthread_mutex_lock(&w->lock);
        }
        h->rc = rc < 0 ? rc : 0;
        h->state = rc == 0 ? FF_BRICK_WRITTEN : rc == 1 ? FF_BRICK_DECLINED : FF_BRICK_FAILED;
        pthread_cond_broadcast(&w->moved);
        if (rc != 0)
            return;                    /* the line waits for the writer's finish */
        w->pad_at = h->tail, w->pad_end = 0;   /* padded to the next slot's start */
        w->next++;
    }
}

/* The continuation of a brick's jobs (eng_submit_then), on the pool thread that finished
 * them: writes every brick whose turn has come, this one and those it held up. */
static void ff_brick_then(void *arg)
{
    ff_brick *b = arg;
    ff_bricks *w = &b->f->bw;
    pthread_mutex_lock(&w->lock);
    b->state = FF_BRICK_READY;
    pthread_cond_broadcast(&w->moved);
    ff_brick_drain(w);
    pthread_mutex_unlock(&w->lock);
}

void ff_brick_submit(ff_file *f, ff_commit_plan *p)
{
    ff_bricks *w = &f->bw;
    pthread_mutex_lock(&w->lock);
    p->bw->seq = w->seq++;
    w->ring[p->bw->seq % FF_MAX_BATCHES] = p->bw;
    pthread_mutex_unlock(&w->lock);
    eng_submit_then(f->env->eng, p->jobs, p->n_jobs, &p->ticket, ff_brick_then, p->bw);
}

/* A brick its writer wrote (ff2_stream_write): the line moves on behind it, and the bricks
 * ready by now are written here. */
static void ff_brick_wrote(ff_file *f, ff_brick *b)
{
    uint64_t at = 0, end;
    int rc = ff2_open_last(f, &at, &end);
    ff_bricks *w = &f->bw;
    pthread_mutex_lock(&w->lock);
    b->state = FF_BRICK_WRITTEN;
    if (rc == 0) {                     /* else the line stays stopped: the finish of the
                                          next brick writes it, padding the slot before */
        w->pad_at = at, w->pad_end = end;
        w->next = b->seq + 1;
        ff_brick_drain(w);
    }
    pthread_mutex_unlock(&w->lock);
}

int ff_brick_finish(ff_file *f, ff_commit_plan *p)
{
    ff_brick *b = p->bw;
    if (!b)
        return ff2_stream_write(f, p);
    ff_bricks *w = &f->bw;
    pthread_mutex_lock(&w->lock);
    /* every brick before it is finished, so its turn has come: a thread that took it may
     * still be writing it */
    while (b->state == FF_BRICK_READY && b->seq == w->next)
        ff_brick_drain(w);
    while (b->state == FF_BRICK_WRITING || b->state == FF_BRICK_COMPRESSING)
        pthread_cond_wait(&w->moved, &w->lock);
    if (b->state == FF_BRICK_READY)    /* the line stopped before it: it is the writer's */
        b->state = FF_BRICK_DECLINED;
    ff_brick_state s = b->state;
    pthread_mutex_unlock(&w->lock);
    if (s == FF_BRICK_FAILED)
        return b->rc;
    if (s == FF_BRICK_WRITTEN) {
        ff2_stream_adopt(f, &b->fr, p->end, b->tail, b->tail + 8);
        f->env->n.blocks_written += b->fr.n;   /* counted once stored, as the writer's */
        f->env->n.blocks_ahead += b->fr.n;
        return 0;
    }
    int rc = ff2_stream_write(f, p);   /* declined, or its turn never came (a failure) */
    if (rc == 0)
        ff_brick_wrote(f, b);
    return rc;
}
