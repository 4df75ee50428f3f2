/* Writes of an open file: dirty blocks in memory, growing and shrinking, emptying, writes,
 * truncate, fallocate, and when a write commits early. */
#include "ff_internal.h"
#include "fmt2.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bcache.h"
#include "fmt.h"

static int ff_batch_settle(ff_file *f);

/* ---- blocks in memory ---- */

int ff_reserve(ff_file *f, uint64_t n)
{
    if (n <= f->cap)
        return 0;
    uint64_t cap = f->cap ? f->cap : 16;
    while (cap < n)
        cap *= 2;
    /* calloc, not realloc and memset: a large table comes as fresh pages that stay
     * untouched until used, so a truncate that adds a large hole costs no time per block */
    ff_blk *b = calloc(cap, sizeof(*b));
    if (!b)
        return -ENOMEM;
    if (f->cap)
        memcpy(b, f->blk, f->cap * sizeof(*b));
    free(f->blk);
    uint64_t old_cap = f->cap;
    f->blk = b, f->cap = cap;
    return ff_rec_reserve(f, old_cap);
}

void ff_set_blocks(ff_file *f, uint64_t n)
{
    uint64_t used = n > f->n_blocks ? n : f->n_blocks;
    if (used > f->blk_hwm)
        f->blk_hwm = used;
    f->n_blocks = n;
}

void ff_changed(ff_file *f, uint64_t i)
{
    if (i < f->rewrite_min)
        f->rewrite_min = i;
}

void ff_drop_buf(ff_file *f, ff_blk *b)
{
    if (b->state == FF_DIRTY) {
        ff_buf_put(f, b->buf, b->host);
        b->buf = NULL, b->host = 0;
        f->n_dirty--;
        f->env->dirty_bytes -= f->bs;
    }
}

/* The buffer of clean block i moved out of the cache of decoded blocks, which holds its
 * content whole (a block rewritten or read before), instead of a copy; NULL otherwise. */
static uint8_t *ff_cached_buf(ff_file *f, uint64_t i)
{
    const ff_blk *b = &f->blk[i];
    if (b->off & FMT_ENTRY_ZERO)
        return NULL;                   /* zeros */
    uint8_t *buf = ff_buf_from_cache(f, b->off, (uint32_t)ff_blen(f, i));
    if (buf)
        f->env->n.cache_hits++;
    return buf;
}

/* Gives block i a buffer holding its current content (load=0: the caller overwrites all). */
static int ff_make_dirty(ff_file *f, uint64_t i, int load)
{
    ff_blk *b = &f->blk[i];
    if (b->state == FF_DIRTY)
        return 0;
    /* Only the block's first ff_blen bytes are ever read; ff_grow zeroes what it adds. Not
     * zeroing the whole block keeps a small file from costing a block-sized memset. */
    uint8_t host = 0;
    int stored = load && b->state == FF_CLEAN;
    uint8_t *buf = stored ? ff_cached_buf(f, i) : NULL;
    int loaded = buf != NULL;
    if (!buf && !(buf = ff_buf_get(f, &host)))
        return -ENOMEM;
    if (load && b->state != FF_CLEAN)
        memset(buf, 0, ff_blen(f, i));
    if (stored && !loaded && !ff_tail_load(f, i, buf, ff_blen(f, i))) {
        int rc = ff_block_read(f, i, buf, 0, ff_blen(f, i));
        if (rc < 0) {
            ff_buf_put(f, buf, host);
            return rc;
        }
    }
    b->filled = stored ? (uint32_t)ff_blen(f, i) : 0;
    b->state = FF_DIRTY, b->buf = buf, b->host = host;
    if (stored)
        ff_tail_loaded(f, i);
    else
        ff_tail_touch(f, i, 0);
    ff_rec_whole(f, i);
    f->n_dirty++;
    f->env->dirty_bytes += f->bs;
    ff_changed(f, i);
    return 0;
}

int ff_dirty_whole(ff_file *f, uint64_t i)
{
    int rc = ff_make_dirty(f, i, 1);
    if (rc == 0)
        ff_rec_whole(f, i), ff_tail_touch(f, i, 0);
    return rc;
}

static int ff_grow(ff_file *f, uint64_t size)
{
    uint64_t old_n = f->n_blocks, new_n = (size + f->bs - 1) / f->bs;
    uint64_t tail = f->size % f->bs;
    int rc = ff_reserve(f, new_n);
    if (rc == 0 && new_n > old_n && !tail)
        rc = ff_rec_leave_last(f);
    if (rc == 0 && tail && f->blk[old_n - 1].state != FF_ZERO)
        rc = ff_make_dirty(f, old_n - 1, 1);     /* a stored partial block changes length */
    if (rc < 0)
        return rc;
    if (tail && f->blk[old_n - 1].state == FF_DIRTY) {
        ff_rec_whole(f, old_n - 1);
        uint64_t grown = new_n > old_n || size % f->bs == 0 ? f->bs : size % f->bs;
        memset(f->blk[old_n - 1].buf + tail, 0, grown - tail);
        ff_tail_touch(f, old_n - 1, tail);
    }
    /* off and word stay: frames to retire; entries never used are zeros already */
    for (uint64_t i = old_n; i < new_n && i < f->blk_hwm; i++)
        f->blk[i].state = FF_ZERO, f->blk[i].buf = NULL;
    if (new_n > old_n)
        ff_changed(f, old_n);
    f->size = size;
    ff_set_blocks(f, new_n);
    return 0;
}

static int ff_shrink(ff_file *f, uint64_t size)
{
    uint64_t new_n = (size + f->bs - 1) / f->bs, tail = size % f->bs;
    /* a block left last loses its slot's padding, and with it any records there */
    int last_recs = f->rec_flag && new_n && new_n < f->n_blocks && new_n - 1 < f->n_stored;
    if ((tail || last_recs) && f->blk[new_n - 1].state != FF_ZERO) {
        int rc = ff_dirty_whole(f, new_n - 1);
        if (rc < 0)
            return rc;
    }
    for (uint64_t i = new_n; i < f->n_blocks; i++) {
        ff_drop_buf(f, &f->blk[i]);
        f->blk[i].state = FF_CLEAN;
    }
    if (new_n < f->n_stored || tail)
        ff_changed(f, tail ? new_n - 1 : new_n);
    f->size = size;
    ff_set_blocks(f, new_n);
    return 0;
}

/* An empty seek table at off, ending the file. */
static int ff_write_empty_table(int fd, uint64_t off)
{
    uint8_t table[8 + FMT_FOOTER_LEN];
    fmt_trailer empty = {0};
    fmt_trailer_encode(&empty, table);
    int rc = fmt_pwrite_all(fd, table, sizeof(table), off);
    if (rc == 0 && ftruncate(fd, (off_t)(off + sizeof(table))) < 0)
        rc = -errno;
    return rc;
}

/* Memory for a file that is its marker and an empty seek table, nothing else. */
void ff_set_empty(ff_file *f)
{
    ff_rec_reset(f);
    ff_set_blocks(f, 0);
    f->size = f->n_stored = 0;
    atomic_store(&f->run_hint, 0);
    f->rewrite_min = UINT64_MAX;
    f->tail_block = UINT64_MAX;
    f->n_pending = 0;
    f->table_start = FMT_MARKER_LEN;
    f->table_end = f->phys_end = FMT_MARKER_LEN + 8 + FMT_FOOTER_LEN;
    if (f->version >= FMT_VERSION_2)
        ff2_set_new(f);
}

/* Truncating to nothing (O_TRUNC, `cp` over a file) starts the file over: cut it back to its
 * marker, then write an empty seek table, so no old frame lingers as dead space. A crash in
 * between leaves the marker alone, which opens as an empty file: no old frame comes back. */
static int ff_empty_locked(ff_file *f)
{
    int rc = f->version >= FMT_VERSION_2 ? ff2_empty(f) : 0;
    if (f->version == 1 && ftruncate(f->fd, FMT_MARKER_LEN) < 0)
        return -errno;
    if (f->version == 1)
        rc = ff_write_empty_table(f->fd, FMT_MARKER_LEN);
    if (rc < 0)
        return rc;
    for (uint64_t i = 0; i < f->n_blocks; i++)
        ff_drop_buf(f, &f->blk[i]);
    /* New frames start again right after the marker, at the very offsets that name the old
     * blocks in the cache: without this a read could get an old block's decoded bytes. */
    bc_forget_file(f->env->cache, f->id);
    ff_set_empty(f);
    return 0;
}

/* Reads still decoding old frames finish first: their offsets are about to be reused. */
static int ff_empty(ff_file *f)
{
    ff_io_exclusive(f);
    int rc = ff_empty_locked(f);
    pthread_rwlock_unlock(&f->io);
    return rc;
}

/* Growing leaves the bricks in flight alone, so that a streaming writer keeps several in
 * the engine: a grown file changes only its partial last block, which a brick holds only
 * when a writer over the memory budget sent it alone. Shrinking may cut held blocks. */
static int ff_resize(ff_file *f, uint64_t size)
{
    int grows_held = size > f->size && f->size % f->bs && ff_batch_holds(f, f->n_blocks - 1);
    int rc = size < f->size ? ff_batch_finish(f) : grows_held ? ff_batch_settle(f) : 0;
    if (rc < 0 || size == f->size)
        return rc;
    if (size > ff_max_size(f))
        return -EFBIG;
    if (size == 0 && !f->env->opt.read_only)
        return ff_empty(f);
    return size > f->size ? ff_grow(f, size) : ff_shrink(f, size);
}

/* Commits early when dirty blocks pile up: an appending writer every brick of blocks (cheap:
 * nothing before its tail moves), anyone when the mount's memory budget is spent. */
/* A streaming commit that fails (a full disk) does not fail the write: the kernel would
 * take that as a failed write-back, fail close without sending the flush, and keep pages
 * it never wrote. The blocks stay in memory and close or fsync retries and reports the
 * error; only a writer over the memory budget gets it at once. */
static int ff_over_budget(const ff_file *f)
{
    uint64_t budget = f->env->opt.mem_bytes / 2;
    return f->env->dirty_bytes > budget || (uint64_t)f->n_dirty * f->bs > budget / 2;
}

static int ff_maybe_commit(ff_file *f)
{
    int appending = f->rewrite_min >= f->n_stored || f->rewrite_min + 1 == f->n_stored;
    int over = ff_over_budget(f);
    if (!over && (f->deferred_err || !(appending && ff_unbricked(f) >= FF_STREAM_BLOCKS)))
        return 0;
    int rc = ff_commit(f, 0, appending ? FF_COMMIT_STREAM : FF_COMMIT_MEMORY);
    if (rc < 0 && !over) {
        f->deferred_err = rc;
        return 0;
    }
    return rc;
}

/* Ends the streaming batches before a write touches their blocks or the size. A batch that
 * failed left its blocks dirty: as in ff_maybe_commit, the write goes on and close or
 * fsync reports the failure, unless the writer is over the memory budget. */
static int ff_batch_settle(ff_file *f)
{
    int rc = ff_batch_finish(f);
    if (rc < 0 && !ff_over_budget(f)) {
        f->deferred_err = rc;
        return 0;
    }
    return rc;
}

/* Where a write's bytes are: one piece of memory, or a payload that landed in block
 * buffers (ff_landing). */
typedef struct {
    const uint8_t *mem;
    ff_landing *land;
} ff_src;

/* Where the write's byte p lies, and in *c how many of the n from it on lie contiguously
 * there (all of them in memory, up to the end of its landing buffer otherwise). */
static const uint8_t *ff_src_at(const ff_src *src, size_t p, size_t n, size_t *c)
{
    if (src->mem) {
        *c = n;
        return src->mem + p;
    }
    size_t o = p % src->land->bs;
    *c = n < src->land->bs - o ? n : src->land->bs - o;
    return src->land->buf[p / src->land->bs] + o;
}

/* Copies n bytes of the write, from its byte p on, to dst. */
static void ff_src_copy(uint8_t *dst, const ff_src *src, size_t p, size_t n)
{
    for (size_t c = 0; n > 0; dst += c, p += c, n -= c) {
        const uint8_t *at = ff_src_at(src, p, n, &c);
        memcpy(dst, at, c);
    }
}

#define FF_PAGE 4096u                  /* what the kernel's write-back cache writes whole */

/* The first of n bytes of the write from p on that differs from old's, or n. */
static size_t ff_src_differs(const uint8_t *old, const ff_src *src, size_t p, size_t n)
{
    for (size_t done = 0, c = 0; done < n; done += c) {
        const uint8_t *at = ff_src_at(src, p + done, n - done, &c);
        if (memcmp(old + done, at, c) == 0)
            continue;
        size_t k = 0;
        while (old[done + k] == at[k])
            k++;
        return done + k;
    }
    return n;
}

/* Tells the tail tracking (ff_tail_touch) where a write of n bytes at boff into block i
 * changes it. With the kernel's write-back cache a write covers the page it begins in, so
 * an append to a log rewrites the bytes before it on that page as they were: those do not
 * count as changed. Only that page is compared, a page a write at most: a byte past it
 * counts as changed unless the tracking says the write is past it already. */
static void ff_write_touch(ff_file *f, uint64_t i, const ff_src *src, size_t p, uint64_t boff,
                           uint64_t n)
{
    if (i != f->low_block || boff >= f->low_at) {
        ff_tail_touch(f, i, boff);
        return;
    }
    uint64_t same = f->low_at - boff < n ? f->low_at - boff : n;
    uint64_t page = FF_PAGE - boff % FF_PAGE;
    if (same > page)
        same = page;
    uint64_t d = ff_src_differs(f->blk[i].buf + boff, src, p, (size_t)same);
    if (d < same || (same < n && boff + same < f->low_at))
        ff_tail_touch(f, i, boff + d);
}

/* Block i, which the write's bytes [p, p + bs) cover whole, takes the landing buffer that
 * holds them as its own; 0 when that is not where they lie or not a buffer it may use. A
 * block already dirty gives its old buffer to the landing in exchange. */
static int ff_land_block(ff_file *f, uint64_t i, const ff_src *src, size_t p)
{
    ff_landing *l = src->land;
    if (!l || l->bs != f->bs || p % l->bs || !l->buf[p / l->bs])
        return 0;
    size_t k = p / l->bs;
    ff_blk *b = &f->blk[i];
    if (b->state == FF_DIRTY && b->host != l->host[k])
        return 0;
    uint8_t *mine = l->buf[k];
    if (b->state == FF_DIRTY) {
        l->buf[k] = b->buf;
    } else {
        l->buf[k] = NULL;
        b->state = FF_DIRTY, b->host = l->host[k];
        f->n_dirty++;
        f->env->dirty_bytes += f->bs;
        ff_changed(f, i);
    }
    b->buf = mine, b->filled = f->bs;
    ff_rec_whole(f, i);
    ff_tail_touch(f, i, 0);
    f->env->n.writes_landed++;
    return 1;
}

static int ff_write_own(ff_file *f, const ff_src *src, size_t len, uint64_t off)
{
    int rc = 0;
    if (off + len > f->size)
        rc = ff_resize(f, off + len);
    for (size_t done = 0; rc == 0 && done < len;) {
        uint64_t pos = off + done, i = pos / f->bs, boff = pos % f->bs;
        uint64_t n = ff_blen(f, i) - boff;
        if (n > len - done)
            n = len - done;
        if (ff_batch_holds(f, i) && (rc = ff_batch_settle(f)) < 0)
            break;
        if (n == f->bs && ff_land_block(f, i, src, done)) {
            done += n;
            continue;
        }
        int first = f->blk[i].state != FF_DIRTY;
        rc = ff_make_dirty(f, i, !(boff == 0 && n == ff_blen(f, i)));
        if (rc == 0) {
            ff_blk *b = &f->blk[i];
            ff_write_touch(f, i, src, done, boff, n);
            ff_src_copy(b->buf + boff, src, done, n);
            ff_rec_range(f, i, boff, boff + n, first);
            b->filled = b->filled + n > f->bs ? f->bs : b->filled + (uint32_t)n;
            done += n;
        }
    }
    clock_gettime(CLOCK_REALTIME, &f->mtime);
    return rc < 0 ? rc : ff_maybe_commit(f);
}

/* A foreign file's bytes go through as they are, one landing buffer's worth at a time. */
static int ff_write_foreign(ff_file *f, const ff_src *src, size_t len, off_t off)
{
    int rc = 0;
    for (size_t done = 0; rc == 0 && done < len;) {
        size_t c;
        const uint8_t *at = ff_src_at(src, done, len - done, &c);
        ssize_t n = pwrite(f->fd, at, c, off + (off_t)done);
        rc = n < 0 ? (errno == EINTR ? 0 : -errno) : 0;
        done += n > 0 ? (size_t)n : 0;
    }
    return rc;
}

static int ff_write_src(ff_file *f, const ff_src *src, size_t len, off_t off)
{
    if (off < 0)
        return -EINVAL;
    int rc = ff_lock_charged(f);
    if (rc < 0)
        return rc;
    rc = f->foreign ? ff_write_foreign(f, src, len, off)
                    : ff_write_own(f, src, len, (uint64_t)off);
    ff_unlock_charged(f);
    return rc;
}

int ff_write(ff_file *f, const void *buf, size_t len, off_t off)
{
    ff_src src = {.mem = buf};
    return ff_write_src(f, &src, len, off);
}

int ff_write_landed(ff_file *f, ff_landing *l, size_t len, off_t off)
{
    ff_src src = {.land = l};
    return ff_write_src(f, &src, len, off);
}

int ff_truncate(ff_file *f, off_t size)
{
    if (size < 0)
        return -EINVAL;
    int rc = ff_lock_charged(f);
    if (rc < 0)
        return rc;
    if (f->foreign) {
        rc = ftruncate(f->fd, size) < 0 ? -errno : 0;
    } else {
        rc = ff_resize(f, (uint64_t)size);
        clock_gettime(CLOCK_REALTIME, &f->mtime);
        if (rc == 0)
            rc = ff_maybe_commit(f);
    }
    ff_unlock_charged(f);
    return rc;
}

static int ff_flush_locked(ff_file *f, int durable)
{
    return f->foreign ? (durable ? ff_sync_for(f, durable) : 0)
                      : ff_commit(f, durable, FF_COMMIT_FULL);
}

int ff_flush(ff_file *f, int durable)
{
    int rc = ff_lock_charged(f);
    if (rc < 0)
        return rc;
    rc = ff_flush_locked(f, durable);
    ff_unlock_charged(f);
    return rc;
}

int ff_flush_last(ff_file *f)
{
    int rc = ff_lock_charged(f);
    if (rc < 0)
        return rc;
    /* the last close: no records (the fold would rewrite their blocks at once), and the
     * records of this open folded, so that the file, kept, reads with lz4 -d */
    f->rec_off = 1;
    rc = ff_flush_locked(f, 0);
    if (rc == 0 && !f->foreign)
        rc = ff_rec_fold(f);
    f->rec_off = 0;
    if (rc == 0 && !f->foreign && f->version >= FMT_VERSION_2 && !f->env->opt.read_only)
        rc = ff2_pair_rest(f);
    ff_unlock_charged(f);
    return rc;
}

/* Zeroes [off, end) of an own file: whole blocks become holes, the edges are rewritten. */
static int ff_zero_range(ff_file *f, uint64_t off, uint64_t end)
{
    int rc = ff_batch_finish(f);
    if (rc < 0)
        return rc;
    if (end > f->size)
        end = f->size;
    while (off < end) {
        uint64_t i = off / f->bs, boff = off % f->bs, n = ff_blen(f, i) - boff;
        if (n > end - off)
            n = end - off;
        if (boff == 0 && n == ff_blen(f, i)) {
            ff_drop_buf(f, &f->blk[i]);
            f->blk[i].state = FF_ZERO;
            ff_changed(f, i);
        } else {
            if ((rc = ff_make_dirty(f, i, 1)) < 0)
                return rc;
            memset(f->blk[i].buf + boff, 0, n);
            ff_rec_range(f, i, boff, boff + n, 0);
            ff_tail_touch(f, i, boff);
        }
        off += n;
    }
    return 0;
}

int ff_fallocate(ff_file *f, int mode, off_t off, off_t len)
{
    if (off < 0 || len <= 0)
        return -EINVAL;
    int rc = ff_lock_charged(f), keep = mode & FALLOC_FL_KEEP_SIZE;
    if (rc < 0)
        return rc;
    uint64_t end = (uint64_t)off + (uint64_t)len;
    if (f->foreign) {
        rc = fallocate(f->fd, mode, off, len) < 0 ? -errno : 0;
    } else if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) ||
               (mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
        rc = ff_zero_range(f, (uint64_t)off, end);
        if (rc == 0 && !keep && end > f->size)
            rc = ff_resize(f, end);
    } else if ((mode & ~FALLOC_FL_KEEP_SIZE) == 0) {
        if (!keep && end > f->size)        /* space is not reserved: blocks are compressed */
            rc = ff_resize(f, end);
    } else {
        rc = -EOPNOTSUPP;
    }
    if (rc == 0 && !f->foreign) {
        clock_gettime(CLOCK_REALTIME, &f->mtime);
        rc = ff_maybe_commit(f);
    }
    ff_unlock_charged(f);
    return rc;
}

/* Version 2: the documented maximum (FORMAT.md). Version 1: its seek table holds at most
 * 2^32 - 1 entries. */
uint64_t ff_max_size(const ff_file *f)
{
    return f->version >= FMT_VERSION_2 ? FMT2_MAX_SIZE : (uint64_t)f->bs * UINT32_MAX;
}
