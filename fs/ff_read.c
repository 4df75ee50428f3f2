/* Reads of an open file: decoding stored blocks (in parallel, outside the file's lock),
 * the read plan, foreign reads and SEEK_DATA/SEEK_HOLE. */
#include "ff_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcache.h"
#include "fmt.h"
#include "fmt2.h"

/* Whether the slot whose size word lies at off is inside a hole run (version 3, FORMAT.md
 * 9.5.1), whose blocks read as zeros. The run found is kept for the reads that follow. */
static int ff_in_run(ff_file *f, uint64_t off)
{
    uint64_t base = FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN, a;
    uint64_t i = off >= base ? fmt2_slot_of(ff2_geo(f), off - FMT_FRAME_HEADER_LEN) : 0;
    uint32_t m;
    if (f->version < FMT_VERSION_2 || ff2_word_off(f, i) != off)
        return 0;                      /* not a slot: a journal's copy (read-only mounts) */
    uint64_t hint = atomic_load(&f->run_hint);
    if (hint && i >= hint >> 8 && i < (hint >> 8) + (hint & 0xFF))
        return 1;
    if (fmt2_run_find(f->fd, ff2_geo(f), i, &a, &m) != FMT_OK)
        return 0;
    atomic_store(&f->run_hint, a << 8 | m);
    return 1;
}

/* Version 4: the records in block i's slot (bsum the block checksum of its frame), applied
 * onto its decoded bytes; probe: the probe_len bytes after the frame's block checksum when
 * the frame was read from that slot, else NULL. A frame that a journal holds (a read-only
 * mount reads a journal's copies) takes the records of its block's slot when that slot holds
 * the same frame: records name the frame they follow by its block checksum. */
static fmt_error ff_rec_read(ff_file *f, uint64_t i, uint64_t at, uint32_t word, uint32_t bsum,
                             const uint8_t *probe, size_t probe_len, uint8_t *dst, uint64_t len)
{
    fmt2_rec_state st;
    /* at: where the slot's frame starts (9.3.1); UINT64_MAX, a journal's copy was read */
    if (at == UINT64_MAX && fmt2_frame_at(f->fd, ff2_geo(f), i, &at) < 0)
        return FMT_ERR_IO;
    uint64_t end = at + FMT2_FRAME_OVERHEAD + fmt_word_size(word);
    return fmt2_rec_load(f->fd, end, fmt2_slot_off(ff2_geo(f), i + 1), probe, probe_len, bsum,
                         f->rec_group, dst, (uint32_t)len, &st);
}

/* A chained last frame (version 5, FORMAT.md 9.12): its blocks from the one at `at`, each
 * linked to those before it, chain_area bytes of them (a read-only open of a chain a crash
 * left torn reads the blocks that check, which its end does not follow yet). f->chain_area
 * changes only with f->io held exclusive, which the caller holds shared. */
static fmt_error ff_decode_chain(ff_file *f, uint64_t at, uint8_t *dst, uint64_t len, int *rc_out)
{
    size_t want = f->chain_area;
    uint8_t *raw = malloc(want);
    ssize_t got = raw ? fmt_pread_upto(f->fd, raw, want, at) : -ENOMEM;
    fmt2_chain_info ci = {0, 0, 0};
    fmt_error err = FMT_OK;
    if (got >= 0)
        err = fmt2_chain_decode(raw, (size_t)got, f->bs, dst, (uint32_t)len, 0, &ci);
    if (got >= 0 && err == FMT_OK && (ci.len != len || ci.area != f->chain_area))
        err = FMT_ERR_CORRUPT;
    *rc_out = got < 0 ? (int)got : 0;
    free(raw);
    return err;
}

/* Decodes the stored block i, entry {off, word}, of len bytes into dst; *at, *rc and the
 * frame's error say what failed. Touches nothing of f that changes but the run hint, so a
 * read may call it without f->lock (holding f->io). */
static fmt_error ff_decode_raw(ff_file *f, uint64_t i, uint64_t off, uint32_t word, uint8_t *dst,
                               uint64_t len, uint64_t *at_out, int *rc_out)
{
    uint64_t at = *at_out = fmt_entry_off(&(fmt_entry){off, word});
    if (word == FMT2_CHAIN_WORD)
        return ff_decode_chain(f, at, dst, len, rc_out);
    uint8_t w[4];
    int slot = f->version >= FMT_VERSION_2 && at == ff2_word_off(f, i), rc = 0;
    uint64_t pos = 0;                  /* version 7: the frame may lie at the slot's page */
    if (slot && (rc = fmt2_frame_at(f->fd, ff2_geo(f), i, &pos)) == 0)
        *at_out = pos + FMT_FRAME_HEADER_LEN;
    uint64_t word_at = *at_out;
    /* a version 2 slot whose size word memory has not read yet */
    if (rc == 0 && word == 0)
        rc = fmt_pread_all(f->fd, w, sizeof(w), word_at);
    if (word == 0 && rc == 0)
        word = fmt_get32(w);
    if (rc == 0 && (fmt_word_size(word) == 0 || fmt_word_size(word) > f->bs) &&
        ff_in_run(f, at)) {
        memset(dst, 0, len);
        *rc_out = 0;
        return FMT_OK;
    }
    if (rc == 0 && (fmt_word_size(word) == 0 || fmt_word_size(word) > f->bs))
        rc = -EIO;
    /* no slot of a file holds records unless this open wrote some (the flag) or an earlier
     * session may have left some (ff2_load); what tells whether the frame's slot holds some
     * is read with the frame when the frame is the slot's */
    int recs = f->version >= FMT_VERSION_4 && (f->rec_flag || f->rec_old);
    size_t blen = fmt_block_len(word), want = blen;
    if (recs && slot)
        want += FMT2_REC_PROBE;
    uint8_t *raw = rc == 0 ? malloc(want) : NULL;
    ssize_t got = 0;
    if (rc == 0 && !raw)
        rc = -ENOMEM;
    if (rc == 0 && (got = fmt_pread_upto(f->fd, raw, want, word_at)) < (ssize_t)blen)
        rc = got < 0 ? (int)got : -EIO;
    fmt_error err = FMT_OK;
    if (rc == 0)
        err = fmt_get32(raw) != word ? FMT_ERR_CORRUPT
                                     : fmt_block_decode(word, raw + 4, dst, (uint32_t)len);
    if (rc == 0 && err == FMT_OK && recs)
        err = ff_rec_read(f, i, slot ? word_at - FMT_FRAME_HEADER_LEN : UINT64_MAX, word,
                          fmt_get32(raw + blen - 4), want > blen ? raw + blen : NULL,
                          (size_t)got - blen, dst, len);
    free(raw);
    *rc_out = rc;
    return err;
}

/* Decodes stored block i into dst; report counts the block and counts and logs a failure
 * (a reader's decode), else the caller reports nothing (read-ahead: the reader that wants
 * the block decodes it again and reports). */
static int ff_decode_block(ff_file *f, uint64_t i, uint64_t off, uint32_t word, uint8_t *dst,
                           uint64_t len, int report)
{
    if (off & FMT_ENTRY_ZERO) {
        memset(dst, 0, len);
        return 0;
    }
    uint64_t at;
    int rc;
    fmt_error err = ff_decode_raw(f, i, off, word, dst, len, &at, &rc);
    if (rc == 0 && err == FMT_OK) {
        if (report)
            f->env->n.blocks_decoded++;
        return 0;
    }
    if (report && rc != -ENOMEM) {
        f->env->n.corrupt_blocks++;
        lg_printf(f->env->log, LG_ERR, "%s: block %llu at offset %llu: %s", ff_name(f),
                  (unsigned long long)i, (unsigned long long)at,
                  rc < 0 ? "read failed" : fmt_error_name(err));
    }
    return rc < 0 ? rc : -EIO;
}

int ff_decode_quiet(ff_file *f, uint64_t i, uint64_t off, uint32_t word, uint8_t *dst,
                    uint64_t len)
{
    return ff_decode_block(f, i, off, word, dst, len, 0);
}

static int ff_decode_entry(ff_file *f, uint64_t i, uint64_t off, uint32_t word, uint8_t *dst,
                           uint64_t len)
{
    return ff_decode_block(f, i, off, word, dst, len, 1);
}

int ff_decode(ff_file *f, uint64_t i, uint8_t *dst)
{
    return ff_decode_entry(f, i, f->blk[i].off, f->blk[i].word, dst, ff_blen(f, i));
}

/* Part of a read that needs a stored block decoded. */
typedef struct {
    uint64_t i, off;                   /* block and its entry, as when the read began */
    uint32_t word, len;                /* entry word; the block's decoded length */
    uint32_t boff, n;                  /* the part wanted */
    uint8_t *dst;
} ff_rjob;

/* The part [boff, boff+n) of block i, with its entry as it stands now. */
static ff_rjob ff_rjob_at(const ff_file *f, uint64_t i, uint64_t boff, uint64_t n, uint8_t *dst)
{
    return (ff_rjob){i, f->blk[i].off, f->blk[i].word, (uint32_t)ff_blen(f, i), (uint32_t)boff,
                     (uint32_t)n, dst};
}

/* Serves [boff, boff+n) of block i from memory (dirty, zero or cached); 0 if it must be
 * decoded. Called with f->lock held. */
static int ff_read_memory(ff_file *f, uint64_t i, uint8_t *dst, uint64_t boff, uint64_t n)
{
    const ff_blk *b = &f->blk[i];
    if (b->state == FF_DIRTY)
        memcpy(dst, b->buf + boff, n);
    else if (b->state == FF_ZERO || (b->off & FMT_ENTRY_ZERO))
        memset(dst, 0, n);
    else if (bc_get(f->env->cache, f->id, b->off, dst, (uint32_t)boff, (uint32_t)n))
        f->env->n.cache_hits++;
    else
        return 0;
    return 1;
}

/* Decodes the block of a job that wants part of it into the cache, and copies the part. */
static int ff_decode_part(ff_file *f, const ff_rjob *j)
{
    uint32_t slot;
    uint8_t *tmp = bc_claim(f->env->cache, j->len, &slot), *own = NULL;
    if (!tmp && !(tmp = own = malloc(f->bs)))
        return -ENOMEM;                /* every cache slot is being sent: decode aside */
    int rc = ff_decode_entry(f, j->i, j->off, j->word, tmp, j->len);
    if (rc == 0)
        memcpy(j->dst, tmp + j->boff, j->n);
    if (!own && rc == 0)
        bc_publish(f->env->cache, slot, f->id, j->off, j->len);
    else if (!own)
        bc_unpin(f->env->cache, slot);
    free(own);
    return rc;
}

/* Decodes the listed blocks, whole ones straight into the reply, parts through the cache.
 * Called holding f->io shared, not f->lock: reads of one file decode in parallel. */
static int ff_read_decode(ff_file *f, const ff_rjob *jobs, uint64_t n_jobs)
{
    int rc = 0;
    for (uint64_t k = 0; rc == 0 && k < n_jobs; k++) {
        const ff_rjob *j = &jobs[k];
        /* a helper may have decoded the block since the plan, or be finishing it */
        if (ff_ahead_claim(f, j->off) >= 0 &&
            bc_get(f->env->cache, f->id, j->off, j->dst, j->boff, j->n)) {
            f->env->n.cache_hits++;
            continue;
        }
        if (j->boff == 0 && j->n == j->len) {
            rc = ff_decode_entry(f, j->i, j->off, j->word, j->dst, j->len);
            continue;
        }
        rc = ff_decode_part(f, j);
    }
    return rc;                         /* never short: FUSE takes a short read for the end */
}                                      /* of the file and zero-fills (or cuts) the rest */

void ff_io_exclusive(ff_file *f)
{
    pthread_rwlock_wrlock(&f->io);
    ff_ahead_cancel(f);
    atomic_store(&f->run_hint, 0);
}

/* Copies [boff, boff+n) of block i into dst, decoding through the cache when needed. */
int ff_block_read(ff_file *f, uint64_t i, uint8_t *dst, uint64_t boff, uint64_t n)
{
    if (ff_read_memory(f, i, dst, boff, n))
        return 0;
    ff_rjob j = ff_rjob_at(f, i, boff, n, dst);
    return ff_read_decode(f, &j, 1);
}

/* ---- the calls of an open file ---- */

static int ff_pread_foreign(ff_file *f, void *buf, size_t len, off_t off, size_t *got)
{
    ssize_t n;
    *got = 0;
    while (len && (n = pread(f->fd, (char *)buf + *got, len, off + (off_t)*got)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        *got += (size_t)n, len -= (size_t)n;
    }
    return 0;
}

/* Where the piece [boff, boff+n) of block i comes from: zeros and cached bytes are sent as
 * they lie (a cached slot stays pinned until ff_reply_done), dirty bytes are copied into
 * dst; 0 if the piece must be decoded into dst. Called with f->lock held. */
static int ff_read_piece(ff_file *f, uint64_t i, uint8_t *dst, uint64_t boff, uint64_t n,
                         ff_reply *r)
{
    const ff_blk *b = &f->blk[i];
    const uint8_t *at = dst;
    uint32_t slot;
    if (b->state == FF_DIRTY)
        memcpy(dst, b->buf + boff, n);
    else if (b->state == FF_ZERO || (b->off & FMT_ENTRY_ZERO))
        at = f->env->zeros;
    else if ((at = bc_pin(f->env->cache, f->id, b->off, (uint32_t)boff, (uint32_t)n, &slot)))
        r->pins[r->n_pins++] = slot, f->env->n.cache_hits++;
    else
        at = dst;
    r->iov[r->n++] = (struct iovec){(void *)at, n};
    return b->state == FF_DIRTY || at != dst;
}

/* Lays out the reply's pieces and lists the blocks left to decode into buf (r and jobs have
 * room for every block the read spans). Called with f->lock held. */
static uint64_t ff_read_plan(ff_file *f, uint8_t *buf, uint64_t len, uint64_t off, ff_rjob *jobs,
                             ff_reply *r)
{
    uint64_t n_jobs = 0;
    for (uint64_t got = 0; got < len;) {
        uint64_t pos = off + got, i = pos / f->bs, boff = pos % f->bs;
        uint64_t n = ff_blen(f, i) - boff;
        if (n > len - got)
            n = len - got;
        if (!ff_read_piece(f, i, buf + got, boff, n, r))
            jobs[n_jobs++] = ff_rjob_at(f, i, boff, n, buf + got);
        got += n;
    }
    return n_jobs;
}

static int ff_reply_alloc(ff_file *f, ff_reply *r, uint64_t span)
{
    *r = (ff_reply){0};
    r->cache = f->env->cache;
    if (span == 0)
        return 0;
    r->iov = malloc(span * sizeof(*r->iov));
    r->pins = malloc(span * sizeof(*r->pins));
    return r->iov && r->pins ? 0 : -ENOMEM;
}

void ff_reply_done(ff_reply *r)
{
    for (unsigned k = 0; k < r->n_pins; k++)
        bc_unpin(r->cache, r->pins[k]);
    free(r->iov);
    free(r->pins);
    *r = (ff_reply){0};
}

/* Called with f->lock held; returns with it released. */
static int ff_read_own(ff_file *f, uint8_t *buf, size_t len, uint64_t off, ff_reply *r)
{
    len = off >= f->size ? 0 : len > f->size - off ? (size_t)(f->size - off) : len;
    uint64_t span = len ? (off + len - 1) / f->bs - off / f->bs + 1 : 0;
    ff_rjob *jobs = span ? malloc(span * sizeof(*jobs)) : NULL;
    if ((span && !jobs) || ff_reply_alloc(f, r, span) < 0) {
        pthread_mutex_unlock(&f->lock);
        free(jobs);
        return -ENOMEM;
    }
    uint64_t n_jobs = ff_read_plan(f, buf, len, off, jobs, r);
    if (len)
        ff_ahead_plan(f, off / f->bs, (off + len - 1) / f->bs);
    if (n_jobs)
        pthread_rwlock_rdlock(&f->io);
    pthread_mutex_unlock(&f->lock);
    int rc = n_jobs ? ff_read_decode(f, jobs, n_jobs) : 0;
    if (n_jobs)
        pthread_rwlock_unlock(&f->io);
    free(jobs);
    r->len = rc == 0 ? len : 0;
    return rc;
}

int ff_read_reply(ff_file *f, void *buf, size_t len, off_t off, ff_reply *r)
{
    *r = (ff_reply){0};
    int rc = ff_lock(f);
    if (rc < 0)
        return rc;
    if (!f->foreign)
        return ff_read_own(f, buf, len, (uint64_t)off, r);
    rc = ff_reply_alloc(f, r, 1);
    if (rc == 0)
        rc = ff_pread_foreign(f, buf, len, off, &r->len);
    pthread_mutex_unlock(&f->lock);
    if (rc == 0)
        r->iov[r->n++] = (struct iovec){buf, r->len};
    return rc;
}

int ff_read(ff_file *f, void *buf, size_t len, off_t off, size_t *got)
{
    ff_reply r;
    int rc = ff_read_reply(f, buf, len, off, &r);
    size_t at = 0;
    for (unsigned k = 0; rc == 0 && k < r.n; at += r.iov[k++].iov_len)
        if (r.iov[k].iov_base != (uint8_t *)buf + at)
            memcpy((uint8_t *)buf + at, r.iov[k].iov_base, r.iov[k].iov_len);
    *got = rc == 0 ? r.len : 0;
    ff_reply_done(&r);
    return rc;
}

/* Whether block i reads as zeros; *next: the block after those known to be like it. A
 * stored block of a slotted file that memory knows nothing of is looked at in its slot
 * (a hole, or a hole run: the whole run at once), and memory keeps what was found. Called
 * with f->lock held. */
static int ff_block_is_hole(ff_file *f, uint64_t i, uint64_t *next)
{
    ff_blk *b = &f->blk[i];
    uint64_t a, word_off = ff2_word_off(f, i);
    uint32_t m, len = (uint32_t)ff_blen(f, i);
    *next = i + 1;
    if (b->state != FF_CLEAN || (b->off & FMT_ENTRY_ZERO) || f->version < FMT_VERSION_2 ||
        (b->off & FMT_OFFSET_MASK) != word_off || (b->word && !(b->word & FMT_RAW_BIT)))
        return b->state == FF_ZERO || (b->state == FF_CLEAN && (b->off & FMT_ENTRY_ZERO));
    int r = fmt2_slot_hole(f->fd, ff2_geo(f), i, len, ff2_zsum(f, len), &a, &m);
    if (r <= 0)
        return 0;                      /* data, or a failure: data is the safe answer */
    for (uint64_t j = i; j < a + m && j < f->n_blocks; j++)
        if (f->blk[j].state == FF_CLEAN && j < f->n_stored) {
            f->blk[j].off = ff2_word_off(f, j) | FMT_ENTRY_ZERO;
            f->blk[j].word = m > 1 ? FMT2_RUN_WORD : len | FMT_RAW_BIT;
        }
    *next = a + m;
    return 1;
}

off_t ff_lseek(ff_file *f, off_t off, int whence)
{
    off_t r = ff_lock(f);
    if (r < 0)
        return r;
    if (f->foreign) {
        r = lseek(f->fd, off, whence);
        r = r < 0 ? -errno : r;
    } else if (off < 0 || (uint64_t)off >= f->size) {
        r = -ENXIO;
    } else {
        int want_hole = whence == SEEK_HOLE;
        uint64_t i = (uint64_t)off / f->bs, next;
        while (i < f->n_blocks && ff_block_is_hole(f, i, &next) != want_hole)
            i = next;
        uint64_t at = i * f->bs > (uint64_t)off ? i * f->bs : (uint64_t)off;
        r = i < f->n_blocks ? (off_t)at : want_hole ? (off_t)f->size : -ENXIO;
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}
