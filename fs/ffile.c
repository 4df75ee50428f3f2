/* Per-file state and the commit protocol. docs/FORMAT.md explains why each step is ordered
 * as it is; in short: new frames are written hidden at the end of the file, then a seek table
 * that lists what this commit reveals and retires, then (after a sync when anything is
 * retired, so a crash can never lose the old data before the new is on disk) the headers are
 * flipped. Open completes an interrupted commit from the seek table, or rebuilds the table
 * from the visible frames when the table itself is torn. */
#include "ffile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bcache.h"
#include "fmt.h"

#define FF_FRAME_MAX_BLOCKS 16u        /* bounds a frame (and a retired skippable) */
#define FF_STREAM_BLOCKS 8u            /* an appending writer commits every brick of blocks */
#define FF_MAX_BATCHES 4u              /* a writer's bricks in the engine at once: enough to
                                          keep every buffer set busy and spill to software */
#define FF_MAX_BLOCK (4u << 20)

enum { FF_CLEAN = 0, FF_DIRTY, FF_ZERO };

typedef struct ff_plan_s ff_commit_plan;

struct ff_file_s;
static int ff_batch_finish(struct ff_file_s *f);
static int ff_batch_holds(const struct ff_file_s *f, uint64_t i);
static int ff_batch_settle(struct ff_file_s *f);

/* Why a commit runs: close/flush/fsync, a streaming writer's brick, or the memory budget. */
enum { FF_COMMIT_FULL = 0, FF_COMMIT_STREAM, FF_COMMIT_MEMORY };

typedef struct {
    uint64_t off;                      /* stored position and FMT_ENTRY_ZERO (blocks < n_stored) */
    uint32_t word;                     /* stored size word (blocks < n_stored) */
    uint32_t filled;                   /* FF_DIRTY: bytes of buf known to be final (loaded or
                                          written); a streaming commit skips blocks not full */
    uint8_t state;                     /* FF_CLEAN: as stored; FF_DIRTY: buf; FF_ZERO: zeros */
    uint8_t *buf;                      /* block_size bytes while FF_DIRTY */
} ff_blk;

typedef struct {
    _Atomic uint64_t commits, blocks_written, blocks_copied, blocks_decoded, cache_hits,
        repairs, corrupt_blocks;
} ff_counters;

struct ff_env_s {
    eng_ctx *eng;                      /* compresses dirty blocks */
    lg_log *log;
    bc_cache *cache;                   /* decoded blocks, half of mem_mb */
    ff_options opt;
    sb_super sb;                       /* block size and UUID for new files */
    uint8_t *zeros;                    /* FF_MAX_BLOCK zero bytes (never touched: no RSS) */
    _Atomic uint64_t next_id;          /* names files in the cache */
    _Atomic uint64_t dirty_bytes;      /* memory held by dirty blocks of every file and by
                                          compressed outputs in flight */
    ff_counters n;
};

/* Lock order: ff_file.lock, then the cache's lock (inside bc_*), then the log's. */
struct ff_file_s {
    ff_env *env;
    pthread_mutex_t lock;              /* serialises every call on this file */
    pthread_rwlock_t io;               /* reads decode stored blocks holding it shared,
                                          without the lock above; whatever destroys stored
                                          bytes or reuses their offsets (retiring frames,
                                          starting the file over) holds it exclusive */
    int fd;                            /* the backing file, owned */
    char name[256];                    /* for log lines */
    uint64_t id;                       /* cache key, unique per open state */
    int foreign;                       /* no marker: bytes pass through */
    uint32_t bs;                       /* block size from the file's own marker */
    uint64_t size;                     /* logical size */
    uint64_t n_blocks;                 /* ceil(size / bs) */
    uint64_t cap;                      /* allocated entries of blk */
    ff_blk *blk;
    uint64_t n_stored;                 /* blocks covered by the committed frames */
    uint64_t rewrite_min;              /* lowest block that changed since the commit */
    uint64_t phys_end;                 /* backing file length */
    uint64_t table_start, table_end;   /* where the newest seek table lies */
    uint64_t *pending;                 /* hidden wrappers written since the newest table */
    uint32_t n_pending, pending_cap;
    ff_commit_plan *batches[FF_MAX_BATCHES];   /* streaming commits in the engine, oldest
                                                  first; they cover consecutive blocks */
    unsigned n_batches;
    uint8_t *zero_comp;                /* a whole zero block, compressed once */
    uint32_t zero_comp_len;
    uint32_t n_dirty;                  /* blocks in FF_DIRTY */
    int deferred_err;                  /* a streaming commit failed; the next full commit
                                          (close, fsync) retries and reports it */
    struct timespec mtime;             /* logical modification time */
};

static uint64_t ff_blen(const ff_file *f, uint64_t i)
{
    return i + 1 < f->n_blocks ? f->bs : f->size - i * f->bs;
}

static int ff_is_zero(const uint8_t *p, size_t n)
{
    return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

ff_env *ff_env_new(eng_ctx *eng, const sb_super *sb, const ff_options *opt, lg_log *log)
{
    ff_env *env = calloc(1, sizeof(*env));
    if (!env)
        return NULL;
    env->eng = eng, env->log = log, env->opt = *opt, env->sb = *sb;
    uint64_t slots = opt->mem_bytes / 2 / sb->block_size;
    env->cache = bc_new(sb->block_size, (uint32_t)(slots < 2 ? 2 : slots > 4096 ? 4096 : slots));
    env->zeros = calloc(1, FF_MAX_BLOCK);
    if (!env->cache || !env->zeros) {
        ff_env_free(env);
        return NULL;
    }
    atomic_init(&env->next_id, 1);
    return env;
}

void ff_env_free(ff_env *env)
{
    if (!env)
        return;
    bc_free(env->cache);
    free(env->zeros);
    free(env);
}

void ff_env_stats(ff_env *env, ff_stats *o)
{
    o->commits = env->n.commits, o->blocks_written = env->n.blocks_written;
    o->blocks_copied = env->n.blocks_copied, o->blocks_decoded = env->n.blocks_decoded;
    o->cache_hits = env->n.cache_hits, o->repairs = env->n.repairs;
    o->corrupt_blocks = env->n.corrupt_blocks;
}

/* ---- blocks in memory ---- */

static int ff_reserve(ff_file *f, uint64_t n)
{
    if (n <= f->cap)
        return 0;
    uint64_t cap = f->cap ? f->cap : 16;
    while (cap < n)
        cap *= 2;
    ff_blk *b = realloc(f->blk, cap * sizeof(*b));
    if (!b)
        return -ENOMEM;
    memset(b + f->cap, 0, (cap - f->cap) * sizeof(*b));
    f->blk = b, f->cap = cap;
    return 0;
}

static void ff_changed(ff_file *f, uint64_t i)
{
    if (i < f->rewrite_min)
        f->rewrite_min = i;
}

static void ff_drop_buf(ff_file *f, ff_blk *b)
{
    if (b->state == FF_DIRTY) {
        free(b->buf);
        b->buf = NULL;
        f->n_dirty--;
        f->env->dirty_bytes -= f->bs;
    }
}

/* Decodes the stored block i, entry {off, word}, of len bytes into dst. Touches nothing of
 * f that changes, so a read may call it without f->lock (holding f->io). */
static int ff_decode_entry(ff_file *f, uint64_t i, uint64_t off, uint32_t word, uint8_t *dst,
                           uint64_t len)
{
    if (off & FMT_ENTRY_ZERO) {
        memset(dst, 0, len);
        return 0;
    }
    uint64_t at = fmt_entry_off(&(fmt_entry){off, word});
    uint8_t *raw = malloc(fmt_block_len(word));
    if (!raw)
        return -ENOMEM;
    int rc = fmt_pread_all(f->fd, raw, fmt_block_len(word), at);
    fmt_error err = FMT_OK;
    if (rc == 0)
        err = fmt_get32(raw) != word ? FMT_ERR_CORRUPT
                                     : fmt_block_decode(word, raw + 4, dst, (uint32_t)len);
    free(raw);
    if (rc < 0 || err != FMT_OK) {
        f->env->n.corrupt_blocks++;
        lg_printf(f->env->log, LG_ERR, "%s: block %llu at offset %llu: %s", f->name,
                  (unsigned long long)i, (unsigned long long)at,
                  rc < 0 ? "read failed" : fmt_error_name(err));
        return rc < 0 ? rc : -EIO;
    }
    f->env->n.blocks_decoded++;
    return 0;
}

static int ff_decode(ff_file *f, uint64_t i, uint8_t *dst)
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

/* Decodes the listed blocks, whole ones straight into the reply, parts through the cache.
 * Called holding f->io shared, not f->lock: reads of one file decode in parallel. */
static int ff_read_decode(ff_file *f, const ff_rjob *jobs, uint64_t n_jobs)
{
    uint8_t *tmp = NULL;
    int rc = 0;
    for (uint64_t k = 0; rc == 0 && k < n_jobs; k++) {
        const ff_rjob *j = &jobs[k];
        if (j->boff == 0 && j->n == j->len) {
            rc = ff_decode_entry(f, j->i, j->off, j->word, j->dst, j->len);
            continue;
        }
        if (!tmp && !(tmp = malloc(f->bs))) {
            rc = -ENOMEM;
            break;
        }
        rc = ff_decode_entry(f, j->i, j->off, j->word, tmp, j->len);
        if (rc == 0) {
            bc_put(f->env->cache, f->id, j->off, tmp, j->len);
            memcpy(j->dst, tmp + j->boff, j->n);
        }
    }
    free(tmp);
    return rc;                         /* never short: FUSE takes a short read for the end */
}                                      /* of the file and zero-fills (or cuts) the rest */

/* Copies [boff, boff+n) of block i into dst, decoding through the cache when needed. */
static int ff_block_read(ff_file *f, uint64_t i, uint8_t *dst, uint64_t boff, uint64_t n)
{
    if (ff_read_memory(f, i, dst, boff, n))
        return 0;
    ff_rjob j = ff_rjob_at(f, i, boff, n, dst);
    return ff_read_decode(f, &j, 1);
}

/* Gives block i a buffer holding its current content (load=0: the caller overwrites all). */
static int ff_make_dirty(ff_file *f, uint64_t i, int load)
{
    ff_blk *b = &f->blk[i];
    if (b->state == FF_DIRTY)
        return 0;
    /* Only the block's first ff_blen bytes are ever read; ff_grow zeroes what it adds. Not
     * zeroing the whole block keeps a small file from costing a block-sized memset. */
    uint8_t *buf = malloc(f->bs);
    if (!buf)
        return -ENOMEM;
    if (load && b->state != FF_CLEAN)
        memset(buf, 0, ff_blen(f, i));
    if (load && b->state == FF_CLEAN) {
        int rc = ff_block_read(f, i, buf, 0, ff_blen(f, i));
        if (rc < 0) {
            free(buf);
            return rc;
        }
    }
    b->filled = load && b->state == FF_CLEAN ? (uint32_t)ff_blen(f, i) : 0;
    b->state = FF_DIRTY, b->buf = buf;
    f->n_dirty++;
    f->env->dirty_bytes += f->bs;
    ff_changed(f, i);
    return 0;
}

static int ff_grow(ff_file *f, uint64_t size)
{
    uint64_t old_n = f->n_blocks, new_n = (size + f->bs - 1) / f->bs;
    uint64_t tail = f->size % f->bs;
    int rc = ff_reserve(f, new_n);
    if (rc == 0 && tail && f->blk[old_n - 1].state != FF_ZERO)
        rc = ff_make_dirty(f, old_n - 1, 1);     /* a stored partial block changes length */
    if (rc < 0)
        return rc;
    if (tail && f->blk[old_n - 1].state == FF_DIRTY) {
        uint64_t grown = new_n > old_n || size % f->bs == 0 ? f->bs : size % f->bs;
        memset(f->blk[old_n - 1].buf + tail, 0, grown - tail);
    }
    for (uint64_t i = old_n; i < new_n; i++)       /* off and word stay: frames to retire */
        f->blk[i].state = FF_ZERO, f->blk[i].buf = NULL;
    if (new_n > old_n)
        ff_changed(f, old_n);
    f->size = size, f->n_blocks = new_n;
    return 0;
}

static int ff_shrink(ff_file *f, uint64_t size)
{
    uint64_t new_n = (size + f->bs - 1) / f->bs, tail = size % f->bs;
    if (tail && f->blk[new_n - 1].state != FF_ZERO) {
        int rc = ff_make_dirty(f, new_n - 1, 1);
        if (rc < 0)
            return rc;
    }
    for (uint64_t i = new_n; i < f->n_blocks; i++) {
        ff_drop_buf(f, &f->blk[i]);
        f->blk[i].state = FF_CLEAN;
    }
    if (new_n < f->n_stored || tail)
        ff_changed(f, tail ? new_n - 1 : new_n);
    f->size = size, f->n_blocks = new_n;
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
static void ff_set_empty(ff_file *f)
{
    f->size = f->n_blocks = f->n_stored = 0;
    f->rewrite_min = UINT64_MAX;
    f->n_pending = 0;
    f->table_start = FMT_MARKER_LEN;
    f->table_end = f->phys_end = FMT_MARKER_LEN + 8 + FMT_FOOTER_LEN;
}

/* Truncating to nothing (O_TRUNC, `cp` over a file) starts the file over: cut it back to its
 * marker, then write an empty seek table, so no old frame lingers as dead space. A crash in
 * between leaves the marker alone, which opens as an empty file: no old frame comes back. */
static int ff_empty_locked(ff_file *f)
{
    if (ftruncate(f->fd, FMT_MARKER_LEN) < 0)
        return -errno;
    int rc = ff_write_empty_table(f->fd, FMT_MARKER_LEN);
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
    pthread_rwlock_wrlock(&f->io);
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
    if (size == 0 && !f->env->opt.read_only)
        return ff_empty(f);
    return size > f->size ? ff_grow(f, size) : ff_shrink(f, size);
}

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

/* What one commit writes and retires. */
struct ff_plan_s {
    uint64_t s, end;                   /* blocks [s, end) are written anew */
    uint64_t size;                     /* logical size the seek table records */
    fmt_trailer t;                     /* the new seek table with its intents */
    uint64_t pos;                      /* where the next bytes go */
    uint8_t *stage;                    /* one frame, wrapped, before it is written: held only
                                          while frames are written, not while the engine
                                          compresses, so bricks in flight cost no more */
    size_t stage_cap;                  /* bytes the largest frame of this plan may need */
    int planned;                       /* ff_plan succeeded: a failure may leave bytes to cut */
    int visible;                       /* frames are written revealed: nothing is retired */
    uint32_t comp_stride;              /* eng_bound(longest block of the plan) */
    eng_job *jobs;                     /* one per changed block, compressed by the engine */
    uint8_t *comp;                     /* the jobs' outputs, comp_stride apart */
    uint64_t comp_bytes;               /* their size, counted in the env's dirty_bytes */
    uint32_t *job_at;                  /* block i - s -> its job, or UINT32_MAX */
    uint32_t n_jobs;
    eng_ticket ticket;                 /* the jobs in the engine */
};

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
    eng_job j = {f->env->zeros, f->bs, out, eng_bound(f->bs), 0};
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
        int job = k->state == FF_DIRTY || (k->state == FF_ZERO && !ff_is_zero_template(f, i));
        p->job_at[i - p->s] = job ? p->n_jobs++ : UINT32_MAX;
    }
    p->comp = malloc((size_t)(p->n_jobs ? p->n_jobs : 1) * p->comp_stride);
    if (!p->comp)
        return -ENOMEM;
    /* Outputs in flight count against the same budget as dirty blocks, so that many
     * streaming writers commit (and wait) before memory outgrows mem_mb. */
    p->comp_bytes = (uint64_t)p->n_jobs * p->comp_stride;
    f->env->dirty_bytes += p->comp_bytes;
    for (uint64_t i = p->s; i < p->end; i++) {
        uint32_t j = p->job_at[i - p->s];
        if (j != UINT32_MAX)
            p->jobs[j] = (eng_job){f->blk[i].state == FF_DIRTY ? f->blk[i].buf : f->env->zeros,
                                   (uint32_t)ff_blen(f, i), p->comp + (size_t)j * p->comp_stride,
                                   p->comp_stride, 0};
    }
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
    p->s = r < f->n_stored ? ff_frame_first(f, r) : base;
    p->end = f->n_blocks;
    /* Under pressure a writer keeps its partial last block in memory, and a streaming
     * writer every block from the first one not yet filled (the kernel's writeback need not
     * send blocks whole or in order): writing them now would retire them at the next. */
    if (pressure && f->size % f->bs && p->end - 1 >= base && p->end - 1 > p->s)
        p->end--;
    for (uint64_t i = p->s; pressure == FF_COMMIT_STREAM && i < p->end; i++) {
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
    p->stage_cap = 8 + FMT_FRAME_HEADER_LEN + FMT_FRAME_END_LEN +
                   (size_t)(n < FF_FRAME_MAX_BLOCKS ? n : FF_FRAME_MAX_BLOCKS) *
                       (p->comp_stride + FMT_BLOCK_OVERHEAD);
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

static int ff_write_trailer(ff_file *f, ff_commit_plan *p)
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
static void ff_adopt(ff_file *f, ff_commit_plan *p)
{
    for (uint64_t i = p->s; i < p->end; i++) {
        ff_blk *b = &f->blk[i];
        ff_drop_buf(f, b);
        b->off = p->t.entries[i].off, b->word = p->t.entries[i].word, b->state = FF_CLEAN;
    }
    f->n_stored = p->end;
    /* A brick ends after the writer went on: a block changed before the brick's range
     * meanwhile (a header patched behind the data) is still to be written. */
    if (f->rewrite_min >= p->s)
        f->rewrite_min = p->end < f->n_blocks ? p->end : UINT64_MAX;
    f->phys_end = p->pos;
}

static void ff_restore_mtime(ff_file *f)
{
    struct timespec ts[2] = {{0, UTIME_OMIT}, f->mtime};
    (void)futimens(f->fd, ts);
}

static int ff_sync(ff_file *f)
{
    return fdatasync(f->fd) < 0 ? -errno : 0;
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
        rc = ff_sync(f);
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
    /* Everything before phys_end is intact: cut what this commit added. */
    lg_printf(f->env->log, LG_ERR, "%s: commit failed: %s", f->name, strerror(-rc));
    if (ftruncate(f->fd, (off_t)f->phys_end) < 0)
        lg_printf(f->env->log, LG_ERR, "%s: cannot cut a failed commit: %s", f->name,
                  strerror(errno));
}

static void ff_batch_drop(ff_env *env, ff_commit_plan *p)
{
    ff_plan_free(env, p);
    free(p);
}

static ff_commit_plan *ff_batch_pop(ff_file *f)
{
    ff_commit_plan *p = f->batches[0];
    memmove(f->batches, f->batches + 1, --f->n_batches * sizeof(*f->batches));
    return p;
}

/* Waits for every brick in flight and drops it unwritten: its blocks stay dirty. */
static void ff_batch_abandon(ff_file *f)
{
    while (f->n_batches) {
        ff_commit_plan *p = ff_batch_pop(f);
        eng_wait(f->env->eng, &p->ticket);
        ff_batch_drop(f->env, p);
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
    int rc = ff_write_frames(f, p);
    if (rc == 0)
        rc = ff_keep_pending(f, p);
    if (rc == 0)
        ff_adopt(f, p);
    ff_restore_mtime(f);
    ff_batch_drop(f->env, p);
    if (rc < 0) {
        ff_commit_failed(f, rc);
        ff_batch_abandon(f);
    }
    return rc;
}

static int ff_batch_finish(ff_file *f)
{
    int rc = 0;
    while (rc == 0 && f->n_batches)
        rc = ff_batch_finish_one(f);
    return rc;
}

/* Dirty blocks that no brick in flight holds: what a streaming writer gathered since its
 * last brick. */
static uint64_t ff_unbricked(const ff_file *f)
{
    uint64_t held = 0;
    for (unsigned k = 0; k < f->n_batches; k++)
        for (uint64_t i = f->batches[k]->s; i < f->batches[k]->end; i++)
            held += f->blk[i].state == FF_DIRTY;
    return f->n_dirty - held;
}

static int ff_batch_holds(const ff_file *f, uint64_t i)
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
    int rc = ff_submit(f, batch);
    if (rc < 0) {
        ff_batch_drop(f->env, batch);
        return rc;
    }
    f->batches[f->n_batches++] = batch;
    return 0;
}

static int ff_commit(ff_file *f, int durable, int pressure)
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
    if (f->rewrite_min == UINT64_MAX && f->n_pending == 0 && f->n_batches == 0)
        return durable ? ff_sync(f) : 0;
    if (f->env->opt.read_only)
        return -EROFS;
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
    if (rc == 0 && (rc = ff_submit(f, &p)) == 0) {
        eng_wait(f->env->eng, &p.ticket);
        rc = ff_commit_write(f, &p, durable);
    }
    if (rc == 0) {
        /* Committed: from here a failure to flip headers is finished by the next open. */
        ff_adopt(f, &p);
        f->env->n.commits++;
        /* a read may still decode a frame this retires (and punches); reveals only flip
         * wrapper headers, which no read looks at */
        if (p.t.n_retire)
            pthread_rwlock_wrlock(&f->io);
        int flipped = fmt_apply_intents(f->fd, &p.t, 1);
        if (p.t.n_retire)
            pthread_rwlock_unlock(&f->io);
        if (flipped < 0)
            lg_printf(f->env->log, LG_ERR, "%s: cannot retire old frames yet: %s", f->name,
                      strerror(-flipped));
        rc = flipped < 0 ? flipped : 0;
    } else if (p.planned) {
        ff_commit_failed(f, rc);
    }
    ff_restore_mtime(f);
    ff_plan_free(f->env, &p);
    if (rc == 0 && full)
        f->deferred_err = 0;
    return rc;
}

/* ---- opening, repair ---- */

static void ff_take_table(ff_file *f, fmt_trailer *t)
{
    f->size = t->size;
    f->n_blocks = f->n_stored = t->n_entries;
    for (uint64_t i = 0; i < t->n_entries; i++)
        f->blk[i] = (ff_blk){.off = t->entries[i].off, .word = t->entries[i].word, .state = FF_CLEAN};
}

/* Header flips are not synced: a machine crash can keep bytes appended after a durable seek
 * table (a later streaming commit) and lose the flips that table asked for. Finishing the
 * last intact table's flips before walking the frames brings its state back. */
static void ff_finish_last_table(ff_file *f, uint64_t file_len)
{
    fmt_scan_result sr;
    fmt_trailer t;
    if (f->env->opt.read_only || fmt_scan(f->fd, file_len, f->bs, 0, &sr) != FMT_OK)
        return;
    if (sr.last_table_end && fmt_trailer_read(f->fd, sr.last_table_end, f->bs, &t) == FMT_OK) {
        int n = fmt_apply_intents(f->fd, &t, 1);
        if (n > 0)
            lg_printf(f->env->log, LG_WARN, "%s: finished %d header flips of the last intact "
                      "seek table", f->name, n);
        fmt_trailer_free(&t);
    }
    fmt_trailer_free(&sr.table);
}

/* Rebuilds the seek table of a torn file from its visible frames (verifying every block),
 * cuts the torn tail, and writes the table back, keeping the file's mtime. */
static int ff_repair(ff_file *f, uint64_t file_len)
{
    fmt_scan_result sr;
    ff_finish_last_table(f, file_len);
    fmt_error err = fmt_scan(f->fd, file_len, f->bs, 1, &sr);
    if (err != FMT_OK)
        return -fmt_errno(err);
    int rc = ff_reserve(f, sr.table.n_entries);
    if (rc == 0) {
        ff_take_table(f, &sr.table);
        f->phys_end = sr.valid_end;
        if (f->env->opt.read_only) {
            lg_printf(f->env->log, LG_WARN, "%s: torn (seek table missing or damaged); not "
                      "repaired on a read-only mount", f->name);
        } else {
            ff_commit_plan p = {.s = f->n_stored, .end = f->n_stored, .size = f->size,
                                .pos = sr.valid_end};
            p.t.entries = calloc(f->n_stored ? f->n_stored : 1, sizeof(fmt_entry));
            rc = p.t.entries ? ff_write_trailer(f, &p) : -ENOMEM;
            if (rc == 0) {
                f->table_start = sr.valid_end, f->table_end = f->phys_end = p.pos;
                f->env->n.repairs++;
                lg_printf(f->env->log, LG_WARN, "%s: repaired a torn file: seek table rebuilt "
                          "from %llu blocks, %llu bytes cut after offset %llu", f->name,
                          (unsigned long long)f->n_stored,
                          (unsigned long long)(file_len - sr.valid_end),
                          (unsigned long long)sr.valid_end);
            }
            fmt_trailer_free(&p.t);
            ff_restore_mtime(f);
        }
    }
    fmt_trailer_free(&sr.table);
    return rc;
}

static int ff_load_own(ff_file *f, uint64_t file_len)
{
    fmt_trailer t;
    fmt_error err = fmt_trailer_read(f->fd, file_len, f->bs, &t);
    if (err == FMT_ERR_NO_TRAILER)
        return ff_repair(f, file_len);
    if (err != FMT_OK)
        return -fmt_errno(err);
    int rc = ff_reserve(f, t.n_entries);
    if (rc == 0) {
        ff_take_table(f, &t);
        f->phys_end = f->table_end = file_len;
        f->table_start = t.start;
        if (!f->env->opt.read_only && (rc = fmt_apply_intents(f->fd, &t, 1)) > 0) {
            lg_printf(f->env->log, LG_WARN, "%s: finished an interrupted commit (%d headers)",
                      f->name, rc);
            ff_restore_mtime(f);
        }
        rc = rc < 0 ? rc : 0;
    }
    fmt_trailer_free(&t);
    return rc;
}

/* Reads the marker: 1 for an own file (f->bs set), 0 for a foreign one, or -errno. */
static int ff_identify(int fd, uint64_t file_len, uint32_t *bs, const char *name, lg_log *log)
{
    uint8_t head[FMT_MARKER_LEN];
    fmt_marker m;
    if (file_len < FMT_MARKER_LEN)
        return 0;
    int rc = fmt_pread_all(fd, head, sizeof(head), 0);
    if (rc < 0)
        return rc;
    fmt_error err = fmt_marker_decode(head, sizeof(head), &m);
    if (err == FMT_ERR_NEWER)
        lg_printf(log, LG_ERR, "%s: file format version %u is newer than this fpgalz4fs "
                  "supports (%u); refusing it", name, m.version, FMT_VERSION);
    if (err != FMT_OK)
        return err == FMT_ERR_FOREIGN ? 0 : -fmt_errno(err);
    *bs = m.block_size;
    return 1;
}

static ff_file *ff_new(ff_env *env, int fd, const char *name)
{
    ff_file *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->env = env, f->fd = fd, f->id = env->next_id++;
    f->rewrite_min = UINT64_MAX;
    snprintf(f->name, sizeof(f->name), "%s", name ? name : "?");
    pthread_mutex_init(&f->lock, NULL);
    pthread_rwlock_init(&f->io, NULL);
    return f;
}

static void ff_free(ff_file *f)
{
    ff_batch_finish(f);                /* the engine must let go of our buffers */
    for (uint64_t i = 0; i < f->n_blocks; i++)
        ff_drop_buf(f, &f->blk[i]);
    bc_forget_file(f->env->cache, f->id);
    close(f->fd);
    pthread_mutex_destroy(&f->lock);
    pthread_rwlock_destroy(&f->io);
    free(f->blk);
    free(f->pending);
    free(f->zero_comp);
    free(f);
}

int ff_open(ff_env *env, int fd, const char *name, ff_file **out)
{
    struct stat st;
    ff_file *f = ff_new(env, fd, name);
    if (!f) {
        close(fd);
        return -ENOMEM;
    }
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0)
        f->mtime = st.st_mtim;
    if (rc == 0 && (rc = ff_identify(fd, (uint64_t)st.st_size, &f->bs, f->name, env->log)) == 0)
        f->foreign = 1;
    else if (rc == 1)
        rc = ff_load_own(f, (uint64_t)st.st_size);
    if (rc < 0) {
        ff_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

/* A new file is written whole in one call (marker and empty seek table) and set up from
 * what was written, without reading it back: creating many small files is all overhead. */
int ff_create(ff_env *env, int fd, const char *name, ff_file **out)
{
    fmt_marker m = {FMT_VERSION, env->sb.block_size, {0}};
    memcpy(m.uuid, env->sb.uuid, sizeof(m.uuid));
    uint8_t head[FMT_MARKER_LEN + 8 + FMT_FOOTER_LEN];
    fmt_trailer empty = {0};
    fmt_marker_encode(&m, head);
    fmt_trailer_encode(&empty, head + FMT_MARKER_LEN);
    struct stat st;
    int rc = fmt_pwrite_all(fd, head, sizeof(head), 0);
    if (rc == 0 && fstat(fd, &st) < 0)
        rc = -errno;
    if (rc == 0 && (uint64_t)st.st_size > sizeof(head) && ftruncate(fd, sizeof(head)) < 0)
        rc = -errno;
    ff_file *f = rc == 0 ? ff_new(env, fd, name) : NULL;
    if (!f) {
        close(fd);
        return rc < 0 ? rc : -ENOMEM;
    }
    f->mtime = st.st_mtim;
    f->bs = env->sb.block_size;
    ff_set_empty(f);
    *out = f;
    return 0;
}

void ff_discard(ff_file *f)
{
    pthread_mutex_lock(&f->lock);
    ff_batch_abandon(f);               /* the engine must let go of our buffers */
    pthread_mutex_unlock(&f->lock);
    ff_free(f);
}

int ff_release(ff_file *f)
{
    pthread_mutex_lock(&f->lock);
    int rc = f->foreign ? 0 : ff_commit(f, 0, FF_COMMIT_FULL);
    pthread_mutex_unlock(&f->lock);
    ff_free(f);
    return rc;
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

/* Copies what memory holds of the read into buf and lists the blocks left to decode (room
 * for every block the read spans). Called with f->lock held. */
static uint64_t ff_read_plan(ff_file *f, uint8_t *buf, uint64_t len, uint64_t off, ff_rjob *jobs)
{
    uint64_t n_jobs = 0;
    for (uint64_t got = 0; got < len;) {
        uint64_t pos = off + got, i = pos / f->bs, boff = pos % f->bs;
        uint64_t n = ff_blen(f, i) - boff;
        if (n > len - got)
            n = len - got;
        if (!ff_read_memory(f, i, buf + got, boff, n))
            jobs[n_jobs++] = ff_rjob_at(f, i, boff, n, buf + got);
        got += n;
    }
    return n_jobs;
}

/* Called with f->lock held; returns with it released. */
static int ff_read_own(ff_file *f, uint8_t *buf, size_t len, uint64_t off, size_t *got)
{
    *got = 0;
    len = off >= f->size ? 0 : len > f->size - off ? (size_t)(f->size - off) : len;
    uint64_t span = len ? (off + len - 1) / f->bs - off / f->bs + 1 : 0;
    ff_rjob *jobs = span ? malloc(span * sizeof(*jobs)) : NULL;
    if (span && !jobs) {
        pthread_mutex_unlock(&f->lock);
        return -ENOMEM;
    }
    uint64_t n_jobs = ff_read_plan(f, buf, len, off, jobs);
    if (n_jobs)
        pthread_rwlock_rdlock(&f->io);
    pthread_mutex_unlock(&f->lock);
    int rc = n_jobs ? ff_read_decode(f, jobs, n_jobs) : 0;
    if (n_jobs)
        pthread_rwlock_unlock(&f->io);
    free(jobs);
    *got = rc == 0 ? len : 0;
    return rc;
}

int ff_read(ff_file *f, void *buf, size_t len, off_t off, size_t *got)
{
    pthread_mutex_lock(&f->lock);
    if (!f->foreign)
        return ff_read_own(f, buf, len, (uint64_t)off, got);
    int rc = ff_pread_foreign(f, buf, len, off, got);
    pthread_mutex_unlock(&f->lock);
    return rc;
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

static int ff_write_own(ff_file *f, const uint8_t *buf, size_t len, uint64_t off)
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
        rc = ff_make_dirty(f, i, !(boff == 0 && n == ff_blen(f, i)));
        if (rc == 0) {
            ff_blk *b = &f->blk[i];
            memcpy(b->buf + boff, buf + done, n);
            b->filled = b->filled + n > f->bs ? f->bs : b->filled + (uint32_t)n;
            done += n;
        }
    }
    clock_gettime(CLOCK_REALTIME, &f->mtime);
    return rc < 0 ? rc : ff_maybe_commit(f);
}

int ff_write(ff_file *f, const void *buf, size_t len, off_t off)
{
    if (off < 0)
        return -EINVAL;
    pthread_mutex_lock(&f->lock);
    int rc = 0;
    if (f->foreign) {
        size_t done = 0;
        while (rc == 0 && done < len) {
            ssize_t n = pwrite(f->fd, (const char *)buf + done, len - done, off + (off_t)done);
            rc = n < 0 ? (errno == EINTR ? 0 : -errno) : 0;
            done += n > 0 ? (size_t)n : 0;
        }
    } else {
        rc = ff_write_own(f, buf, len, (uint64_t)off);
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int ff_truncate(ff_file *f, off_t size)
{
    if (size < 0)
        return -EINVAL;
    pthread_mutex_lock(&f->lock);
    int rc;
    if (f->foreign) {
        rc = ftruncate(f->fd, size) < 0 ? -errno : 0;
    } else {
        rc = ff_resize(f, (uint64_t)size);
        clock_gettime(CLOCK_REALTIME, &f->mtime);
        if (rc == 0)
            rc = ff_maybe_commit(f);
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int ff_flush(ff_file *f, int durable)
{
    pthread_mutex_lock(&f->lock);
    int rc = f->foreign ? (durable && fdatasync(f->fd) < 0 ? -errno : 0)
                        : ff_commit(f, durable, FF_COMMIT_FULL);
    pthread_mutex_unlock(&f->lock);
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
        }
        off += n;
    }
    return 0;
}

int ff_fallocate(ff_file *f, int mode, off_t off, off_t len)
{
    if (off < 0 || len <= 0)
        return -EINVAL;
    pthread_mutex_lock(&f->lock);
    int rc = 0, keep = mode & FALLOC_FL_KEEP_SIZE;
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
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int ff_block_is_hole(const ff_file *f, uint64_t i)
{
    const ff_blk *b = &f->blk[i];
    return b->state == FF_ZERO || (b->state == FF_CLEAN && (b->off & FMT_ENTRY_ZERO));
}

off_t ff_lseek(ff_file *f, off_t off, int whence)
{
    pthread_mutex_lock(&f->lock);
    off_t r;
    if (f->foreign) {
        r = lseek(f->fd, off, whence);
        r = r < 0 ? -errno : r;
    } else if (off < 0 || (uint64_t)off >= f->size) {
        r = -ENXIO;
    } else {
        int want_hole = whence == SEEK_HOLE;
        uint64_t i = (uint64_t)off / f->bs;
        while (i < f->n_blocks && ff_block_is_hole(f, i) != want_hole)
            i++;
        uint64_t at = i * f->bs > (uint64_t)off ? i * f->bs : (uint64_t)off;
        r = i < f->n_blocks ? (off_t)at : want_hole ? (off_t)f->size : -ENXIO;
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

uint64_t ff_size(ff_file *f)
{
    struct stat st;
    pthread_mutex_lock(&f->lock);
    uint64_t size = f->size;
    if (f->foreign)
        size = fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    pthread_mutex_unlock(&f->lock);
    return size;
}

int ff_is_foreign(const ff_file *f) { return f->foreign; }
int ff_fd(const ff_file *f) { return f->fd; }

void ff_get_mtime(ff_file *f, struct timespec *out)
{
    pthread_mutex_lock(&f->lock);
    *out = f->mtime;
    pthread_mutex_unlock(&f->lock);
}

void ff_set_mtime(ff_file *f, const struct timespec *ts)
{
    pthread_mutex_lock(&f->lock);
    f->mtime = *ts;
    if (!f->foreign)
        ff_restore_mtime(f);
    pthread_mutex_unlock(&f->lock);
}

int ff_stat_size(ff_env *env, int fd, uint64_t *size, int *own)
{
    struct stat st;
    uint32_t bs = 0;
    if (fstat(fd, &st) < 0)
        return -errno;
    int rc = ff_identify(fd, (uint64_t)st.st_size, &bs, "?", env->log);
    *own = rc == 1;
    *size = (uint64_t)st.st_size;
    if (rc <= 0)
        return rc;
    fmt_trailer t;
    fmt_error err = fmt_trailer_read(fd, (uint64_t)st.st_size, bs, &t);
    if (err == FMT_ERR_NO_TRAILER) {
        fmt_scan_result sr;
        if ((err = fmt_scan(fd, (uint64_t)st.st_size, bs, 0, &sr)) == FMT_OK)
            t = sr.table;
    }
    if (err != FMT_OK)
        return -fmt_errno(err);
    *size = t.size;
    fmt_trailer_free(&t);
    return 0;
}
