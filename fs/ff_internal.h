/* Private to the ff_* files: the state of an open file and the functions they share.
 *
 * The commit protocols: docs/FORMAT.md explains why each step is ordered as it is. Version
 * 2 (every new file, ff_slots.c): each block has its slot; appends and holes go to their
 * slots, in-place rewrites go to a journal named by the footer first. Version 1: new frames
 * are written hidden at the end of the file, then a seek table that lists what this commit
 * reveals and retires, then (after a sync when anything is retired) the headers are flipped.
 * Open completes an interrupted commit (journal or seek table), or rebuilds from the slots
 * or visible frames when the footer or table itself is torn.
 *
 * Which file holds what:
 *   ffile.c      the mount's environment (ff_env_*), ff_open, ff_create, ff_release,
 *                ff_discard, the small getters (ff_size, ff_fd, mtime), ff_stat_size
 *   ff_read.c    decoding stored blocks, the read plan, ff_read, foreign reads, ff_lseek
 *   ff_ahead.c   read-ahead: helper threads decode a sequential reader's next blocks
 *   ff_bufs.c    dirty blocks' buffers: a pool of memory the card reads in place
 *   ff_write.c   dirty blocks in memory, grow/shrink/resize/empty, ff_write, ff_truncate,
 *                ff_fallocate, ff_flush, early commits (memory budget, streaming bricks)
 *   ff_commit.c  the plan of a commit, engine jobs, frames, the seek table, adopting what
 *                was written, ff_commit, and the streaming batches in the engine
 *   ff_repair.c  loading an own file's seek table, finishing interrupted commits,
 *                rebuilding the table of a torn file, reading the marker
 *   ff_slots.c   version 2: commits, streaming bricks, rollback (ff_slots.h: what the
 *                three version 2 files share)
 *   ff_pair.c    version 2: the footer pair (durable in-place commits, one sync each)
 *   ff_load2.c   version 2: opening, repair, release, the size of a closed file
 *   ff_fds.c     bounded backing descriptors: idle files close theirs, reopen on use */
#ifndef FPGALZ4FS_FF_INTERNAL_H
#define FPGALZ4FS_FF_INTERNAL_H

#include <pthread.h>
#include <string.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "bcache.h"
#include "cred.h"
#include "eng_tail.h"
#include "ffile.h"
#include "fmt.h"
#include "fmt2.h"
#include "lru.h"

#define FF_FRAME_MAX_BLOCKS 16u        /* bounds a frame (and a retired skippable) */
#define FF_STREAM_BLOCKS 8u            /* an appending writer commits every brick of blocks */
#define FF_MAX_BATCHES 4u              /* a writer's bricks in the engine at once: enough to
                                          keep every buffer set busy and spill to software */
#define FF_MAX_BLOCK (4u << 20)

/* FF_ZERO is 0: an entry never used (all zero bytes, ff_reserve) is a block of zeros not yet
 * stored, so that extending a file by a large hole touches no memory per block. */
enum { FF_ZERO = 0, FF_CLEAN, FF_DIRTY };

typedef struct ff_plan_s ff_commit_plan;

/* What a version 4 file's page records (ff_rec.c) know of block i. */
#define FF_REC_RANGES 4u               /* a dirty block's changed ranges kept apart */
typedef struct {
    uint32_t lo[FF_REC_RANGES], hi[FF_REC_RANGES];  /* FF_DIRTY: the bytes changed since
                                          the block was last committed lie in the n ranges
                                          [lo, hi) (disjoint, not touching); n = 0: anywhere
                                          (a zeroed entry: the whole block) */
    uint64_t end;                      /* known: where the frame ends (the padding follows) */
    uint32_t room, used, chain;        /* known: the slot's padding payload, the bytes its
                                          records take, the next record's prev */
    uint8_t n;
    uint8_t known;                     /* read from the slot since it was last written */
    uint8_t low;                       /* known: its padding ran low; the next records
                                          commit folds it if the block is clean then */
} ff_rec;
typedef struct ff_brick_s ff_brick;

/* The streaming bricks a pool thread writes where it compressed them (ff_brick.c), in the
 * order they were submitted; under ff_bricks.lock, never with the file's lock held by a
 * pool thread. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t moved;              /* a brick reached an end state */
    ff_brick *ring[FF_MAX_BATCHES];    /* in flight, by seq % FF_MAX_BATCHES */
    uint64_t seq;                      /* the next brick submitted gets this */
    uint64_t next;                     /* the brick to write next: none after it is written
                                          before it is */
    uint64_t pad_at, pad_end;          /* the slot before the next brick's first ends at
                                          pad_at and is not padded yet (pad_end 0: it is) */
    int stopped;                       /* the bricks in flight are being dropped: none is
                                          written any more */
} ff_bricks;

/* Why a commit runs: close/flush/fsync, a streaming writer's brick, or the memory budget. */
enum { FF_COMMIT_FULL = 0, FF_COMMIT_STREAM, FF_COMMIT_MEMORY };

typedef struct {
    uint64_t off;                      /* stored position and FMT_ENTRY_ZERO (blocks < n_stored) */
    uint32_t word;                     /* stored size word (blocks < n_stored) */
    uint32_t filled;                   /* FF_DIRTY: bytes of buf known to be final (loaded or
                                          written); a streaming commit skips blocks not full */
    uint8_t state;                     /* FF_CLEAN: as stored; FF_DIRTY: buf; FF_ZERO: zeros */
    uint8_t host;                      /* buf is the card's to read in place (ff_bufs.c) */
    uint8_t *buf;                      /* block_size bytes while FF_DIRTY */
} ff_blk;

/* What memory knows of a version 2 file's tail (fmt2.h). */
typedef struct {
    uint64_t tail;                     /* where the last slot's extent ends */
    uint64_t eof;                      /* backing file length, or more, never less (a
                                          failed commit reads it back): footers skip the
                                          cut that would not change it */
    uint64_t seq;                      /* the footer's commit number */
    uint64_t fresh;                    /* blocks >= fresh nobody was promised: rewritten in
                                          place without a synced journal */
    uint64_t disk_fresh;               /* what the footer at rest says of it, never more:
                                          the next open trusts the blocks below it */
    uint64_t promised;                 /* blocks an fsync promised: fresh never drops below */
    uint64_t size;                     /* logical size the footer records */
    uint64_t j_off, j_len;             /* the journal the footer names */
    int j_live;                        /* that journal was synced and slots were written
                                          after it: it is needed until the next sync */
    int footerless;                    /* streamed slots overwrote the footer */
    int j_pending;                     /* the footer names a journal whose slots were not all
                                          written (a full disk): they are redone before
                                          anything else touches the file */
    uint64_t jp_n, jp_tail;            /* that footer's block count and tail */
    int paired;                        /* the file ends with the footer pair (FORMAT.md
                                          11.6) of eof, whose journal area begins at area */
    int place;                         /* the place (0, 1) of the pair's newer footer */
    uint64_t area, half;               /* the area is two halves of half bytes: each
                                          commit's journal goes into the one that does not
                                          hold the journal of the commit before */
    uint32_t zsum;                     /* XXH32 of a whole block of zeros, once known */
} ff2_state;

typedef struct {
    _Atomic uint64_t commits, blocks_written, blocks_copied, blocks_decoded, cache_hits,
        repairs, corrupt_blocks, fd_closes, fd_reopens, tail_blocks, tail_bytes_kept,
        readahead_blocks, pair_commits, blocks_ahead, writes_landed, page_records,
        record_commits, records_folded, records_folded_early, chain_links,
        chain_primed, tail_taken;
} ff_counters;

typedef struct ff_ahead_s ff_ahead;

struct ff_env_s {
    eng_ctx *eng;                      /* compresses dirty blocks */
    lg_log *log;
    bc_cache *cache;                   /* decoded blocks, half of mem_mb */
    ff_ahead *ahead;                   /* read-ahead helpers (ff_ahead.c); NULL: none */
    ff_options opt;
    sb_super sb;                       /* block size and UUID for new files */
    uint8_t *zeros;                    /* FF_MAX_BLOCK zero bytes (never touched: no RSS) */
    _Atomic uint64_t next_id;          /* names files in the cache */
    _Atomic uint64_t dirty_bytes;      /* memory held by dirty blocks of every file and by
                                          compressed outputs in flight */
    _Atomic uint64_t tail_mem;         /* reserved by the files' tail compressors (ff_tail.c),
                                          at most an eighth of mem_mb */
    pthread_mutex_t tail_lock;         /* the list below and every file's tail_lru, and a
                                          file's tail while another file takes it */
    lru_list tails;                    /* files holding a tail compressor, most recently
                                          used first (ff_tail.c) */
    ff_counters n;
    ff_reopen_fn reopen;               /* gives a parked file its descriptor back */
    void *reopen_ctx;
    pthread_mutex_t fd_lock;           /* the fields below and every file's fd_state and
                                          lru links (ff_fds.c) */
    lru_list lru;                      /* files in FF_FD_OPEN, most recently used first */
    uint64_t n_fds;                    /* descriptors held by files (OPEN and HELD) */
    pthread_mutex_t buf_lock;          /* the pool of block buffers below (ff_bufs.c) */
    int buf_direct;                    /* the engine's card reads host memory in place */
    uint8_t **buf_free;                /* block buffers from eng_host_alloc, kept for reuse */
    size_t buf_n, buf_cap;             /* in the pool; at most mem_mb of them */
};

/* A file's backing descriptor (ff_fds.c). */
enum { FF_FD_HELD = 0, FF_FD_OPEN, FF_FD_PARKED };

/* Lock order: ff_file.lock, then ff_file.io, then the read-ahead queue's lock (ff_ahead.c),
 * then the cache's lock (inside bc_*), then the log's. */
struct ff_file_s {
    ff_env *env;
    pthread_mutex_t lock;              /* serialises every call on this file */
    pthread_rwlock_t io;               /* reads decode stored blocks holding it shared,
                                          without the lock above; whatever destroys stored
                                          bytes or reuses their offsets (retiring frames,
                                          starting the file over) holds it exclusive */
    int fd;                            /* the backing file, owned; -1 while parked: use it
                                          only after ff_lock (or with f->io held) */
    int fd_state;                      /* FF_FD_* (env->fd_lock) */
    lru_node lru;                      /* on env->lru while FF_FD_OPEN (env->fd_lock) */
    void *reopen_arg;                  /* the caller's name for the file, for env->reopen */
    int reopen_flags;                  /* open(2) flags the descriptor was opened with */
    uid_t owner;                       /* the backing file's owner: its blocks are the
                                          owner's (opt.charge_owner, cred.h) */
    uid_t fsuid_was;                   /* the locking thread's fsuid while it writes as
                                          the owner; CR_NONE otherwise */
    pthread_mutex_t name_lock;         /* name, filled at the first log line (ff_name) */
    char name[256];                    /* for log lines: the backing path, or "" until then */
    uint64_t id;                       /* cache key, unique per open state */
    int foreign;                       /* no marker: bytes pass through */
    uint32_t bs;                       /* block size from the file's own marker */
    uint32_t version;                  /* the file's format version: 1, 2 or 3 */
    ff2_state v2;                      /* version 2 only */
    uint64_t size;                     /* logical size */
    uint64_t n_blocks;                 /* ceil(size / bs) */
    uint64_t cap;                      /* allocated entries of blk */
    uint64_t blk_hwm;                  /* entries at and past it were never used: zero
                                          bytes (FF_ZERO, no frame) */
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
    ff_bricks bw;
    uint8_t *zero_comp;                /* a whole zero block, compressed once */
    uint32_t zero_comp_len;
    uint32_t n_dirty;                  /* blocks in FF_DIRTY */
    int deferred_err;                  /* a streaming commit failed; the next full commit
                                          (close, fsync) retries and reports it */
    eng_tail *tail;                    /* compresses the last block as it grows (ff_tail.c);
                                          NULL until a full commit of version 2 needs it;
                                          set and cleared with env->tail_lock too */
    lru_node tail_lru;                 /* on env->tails while tail is set */
    ff_rec *rec;                       /* version 3 and 4: per block, cap entries; NULL
                                          until a block changes in place (ff_rec.c) */
    int rec_flag;                      /* the marker says slots may hold records */
    uint32_t rec_group;                /* the last commit group of records the marker names:
                                          later groups' records do not count (changed with
                                          f->io exclusive) */
    int rec_old;                       /* slots nobody here wrote may hold records (the
                                          flag at the open, or a session that may have
                                          ended in a crash changed the file): every slot
                                          is walked and folded */
    int rec_new;                       /* this open made the file version 4 */
    uint64_t *rec_low, n_rec_low, cap_rec_low;  /* the blocks whose rec[].low is set */
    int rec_off;                       /* the commit is the last before a release: no
                                          records, which the fold would rewrite at once */
    uint64_t tail_block;               /* the block whose committed content is the tail's
                                          input; UINT64_MAX: none */
    uint64_t low_block;                /* the block whose changes low_at tracks: its buffer */
    uint32_t low_at;                   /* was loaded with its committed content, and no byte
                                          below low_at changed since (UINT32_MAX: none did);
                                          what tells an append from a rewrite (ff_chain.c) */
    uint32_t chain_area;               /* version 5: the stored last block's frame is a chain
                                          (word FMT2_CHAIN_WORD) whose blocks take this many
                                          bytes from its first size word */
    uint32_t chain_links;              /* bytes its links added since it was written whole */
    struct timespec mtime;             /* logical modification time */
    int mtime_stale;                   /* the backing file's mtime is that of its last
                                          write, not mtime: put back at the release, and
                                          before an fsync (ff_sync_for); while the file is
                                          open its attributes come from memory */
    uint64_t ctime_ns;                 /* the backing file's ctime when it was opened */
    uint64_t ra_next;                  /* the block after the last read: a read starting
                                          there is sequential (ff_ahead.c) */
    uint64_t ra_upto;                  /* blocks below it were queued for read-ahead */
    _Atomic uint64_t run_hint;         /* the hole run a read found last: first block << 8 |
                                          length; 0: none. Cleared by ff_io_exclusive */
};

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
    uint32_t comp_stride;              /* eng_bound(longest block of the plan): room for
                                          one job's output */
    uint32_t comp_lead;                /* room before each output (and FMT2_FRAME_TRAIL
                                          after it) for the frame made around it where it
                                          lies (version 2: fmt2_frame_wrap); 0 */
    uint32_t comp_step;                /* from one job's output to the next */
    eng_job *jobs;                     /* one per changed block, compressed by the engine */
    uint8_t *comp;                     /* the jobs' outputs, comp_stride apart */
    uint64_t comp_bytes;               /* their size, counted in the env's dirty_bytes */
    uint32_t *job_at;                  /* block i - s -> its job, or UINT32_MAX */
    uint32_t n_jobs;
    eng_ticket ticket;                 /* the jobs in the engine */
    int full;                          /* not a streaming brick (close, fsync, flush, memory):
                                          its file's last block may go to the tail
                                          compressor */
    ff_brick *bw;                      /* a streaming brick a pool thread writes; NULL: its
                                          finish writes it (ff_brick.c) */
};

/* The format version of a new file: the mount's file_version, else the newest. */
static inline uint32_t ff_new_version(const ff_env *env)
{
    return env->opt.file_version ? env->opt.file_version : FMT_VERSION;
}

/* Decoded length of block i: bs, or less for the last block. */
/* Where a version 2 (or later) file's slots lie. */
static inline fmt2_geo ff2_geo(const ff_file *f) { return fmt2_geo_of(f->version, f->bs); }
static inline uint64_t ff_blen(const ff_file *f, uint64_t i)
{
    return i + 1 < f->n_blocks ? f->bs : f->size - i * f->bs;
}

static inline int ff_is_zero(const uint8_t *p, size_t n)
{
    return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* ff_tail.c: the last block of a version 2 file, compressed for what was appended */
#define FF_JOB_TAIL (UINT32_MAX - 1)   /* ff_commit_plan.job_at: compressed by ff_tail_frame */
int ff_tail_wanted(ff_file *f, uint64_t i);
/* The block's frame: made where the tail compressor left the block (valid until the file's
 * next ff_tail_frame) or, for a block stored raw, in out (room for len + 31). */
int ff_tail_frame(ff_file *f, const uint8_t *raw, uint32_t len, uint8_t *out,
                  uint8_t **frame, uint32_t *frame_len);
int ff_tail_load(ff_file *f, uint64_t i, uint8_t *dst, uint64_t n);
void ff_tail_free(ff_file *f);

/* ff_read.c */
int ff_decode(ff_file *f, uint64_t i, uint8_t *dst);
/* Decodes stored block i with entry {off, word} into dst, logging and counting nothing (a
 * failure is left to the reader that will want the block); the caller holds f->io. */
int ff_decode_quiet(ff_file *f, uint64_t i, uint64_t off, uint32_t word, uint8_t *dst,
                    uint64_t len);
/* Takes f->io exclusive: no read decodes, and no read-ahead of f is queued or will decode
 * what this caller is about to destroy or move. */
void ff_io_exclusive(ff_file *f);
int ff_block_read(ff_file *f, uint64_t i, uint8_t *dst, uint64_t boff, uint64_t n);

/* ff_write.c */
int ff_reserve(ff_file *f, uint64_t n);
/* f->n_blocks becomes n: entries below the larger of the two count as used. */
void ff_set_blocks(ff_file *f, uint64_t n);
void ff_changed(ff_file *f, uint64_t i);
void ff_drop_buf(ff_file *f, ff_blk *b);
void ff_set_empty(ff_file *f);
/* Stored block i becomes dirty with its content, counted as changed whole. */
int ff_dirty_whole(ff_file *f, uint64_t i);

/* ff_bufs.c: a dirty block's buffer; *host says it is the card's to read in place */
int ff_bufs_init(ff_env *env);
void ff_bufs_free(ff_env *env);
uint8_t *ff_buf_get(ff_file *f, uint8_t *host);
void ff_buf_put(ff_file *f, uint8_t *buf, uint8_t host);
/* A rewrite moves buffers, not bytes, between dirty blocks and the cache of decoded blocks
 * when both are plain memory of the store's block size: ff_buf_from_cache takes the cached
 * content (len bytes) of the stored block key, NULL when the cache cannot give it whole;
 * ff_buf_to_cache caches dirty block b's content (len bytes, now stored as key), leaving in
 * b->buf what ff_drop_buf then frees (the cache's old buffer, or the same one, copied). */
uint8_t *ff_buf_from_cache(ff_file *f, uint64_t key, uint32_t len);
void ff_buf_to_cache(ff_file *f, ff_blk *b, uint64_t key, uint32_t len);
/* Whether ff_buf_to_cache moves the buffer (1) or copies it (0). */
int ff_buf_moves(const ff_file *f);

/* ff_tail.c: ff_tail_touch: dirty block i changed from byte lo on (lo 0: anywhere);
 * ff_tail_loaded: it was just given its committed content. */
void ff_tail_touch(ff_file *f, uint64_t i, uint64_t lo);
void ff_tail_loaded(ff_file *f, uint64_t i);

/* ff_chain.c: appends to the last block of a version 5 file as links of its chain
 * (FORMAT.md 9.12, 11.8). ff_chain_commit: 1 when the commit was made so, 0 when it is not
 * one that can be (the caller commits as usual), or -errno. ff_chain_loaded: the open found
 * the last slot holding a chain of area bytes. */
int ff_chain_commit(ff_file *f, int durable);
void ff_chain_loaded(ff_file *f, uint32_t area);

/* ff_rec.c: page records (version 4). ff_rec_range: dirty block i changed in [lo, hi)
 * (first: it was not dirty before); ff_rec_whole: it changed anywhere; ff_rec_forget: its
 * slot was written; ff_rec_reset: every slot was. ff_rec_commit: 1 when the commit's every
 * change went as records (and the sync, when durable), 0 when a commit must follow for
 * what is left, or -errno. ff_rec_fold: at the last release, every record into frames. */
int ff_rec_reserve(ff_file *f, uint64_t old_cap);
void ff_rec_range(ff_file *f, uint64_t i, uint64_t lo, uint64_t hi, int first);
void ff_rec_whole(ff_file *f, uint64_t i);
void ff_rec_forget(ff_file *f, uint64_t i);
void ff_rec_reset(ff_file *f);
int ff_rec_commit(ff_file *f, int durable);
int ff_rec_fold(ff_file *f);
/* Before the file grows past its last stored block: that block's records are folded by the
 * commit that appends (its slot's padding gives way to the next slot). */
int ff_rec_leave_last(ff_file *f);
/* Whether a commit that rewrites last block n - 1 in place after a change records could have
 * taken pads its slot to the next (FORMAT.md 11.7): the slot then takes records too. */
int ff_rec_pads_last(const ff_file *f, uint64_t n);
/* At the open of a file whose marker said records may be there (an earlier session ended
 * without its release): they are folded now, so that the file reads with lz4 -d again as
 * after any recovery; a failure is logged and leaves them to the release. */
int ff_rec_fold_open(ff_file *f);
void ff_rec_free(ff_file *f);

/* ff_ahead.c: read-ahead (locking rules at the top of the file) */
ff_ahead *ff_ahead_new(ff_env *env, unsigned threads);
void ff_ahead_free(ff_ahead *a);       /* accepts NULL */
/* After the plan of a read of blocks [first, last], with f->lock held: a sequential reader
 * gets the blocks after last queued for decoding into the cache. */
void ff_ahead_plan(ff_file *f, uint64_t first, uint64_t last);
/* A reader holding f->io shared is about to decode the block stored at off: 1 if a helper
 * was decoding it and has finished, 0 if no helper had it (either way the cache may hold
 * it now); -1 if it was still waiting for a helper, which now leaves it to the reader. */
int ff_ahead_claim(ff_file *f, uint64_t off);
/* With f->io exclusive: no job of f will decode. */
void ff_ahead_cancel(ff_file *f);
/* Before f is freed, holding neither of its locks: no job refers to f after this. */
void ff_ahead_forget(ff_file *f);

/* ff_commit.c */
int ff_commit(ff_file *f, int durable, int pressure);
int ff_write_trailer(ff_file *f, ff_commit_plan *p);
void ff_restore_mtime(ff_file *f);
/* fdatasync, or with FF_DURABLE_ALL fsync with the logical mtime put back first. */
int ff_sync_for(ff_file *f, int durable);
int ff_batch_finish(ff_file *f);
void ff_batch_abandon(ff_file *f);
int ff_batch_holds(const ff_file *f, uint64_t i);
/* Version 3: a block to be rewritten in place, or left last by a shrink, that lies in a hole
 * run takes the run's other blocks with it as single holes (ff_slots.c). */
int ff2_split_runs(ff_file *f);
/* Offset of block i's size word in its slot (ff_slots.c). */
uint64_t ff2_word_off(const ff_file *f, uint64_t i);
/* XXH32 of len zero bytes, kept for len = bs (ff_slots.c). */
uint32_t ff2_zsum(ff_file *f, uint32_t len);
uint64_t ff_unbricked(const ff_file *f);

/* ff_repair.c */
int ff_load_own(ff_file *f, uint64_t file_len);
int ff_identify(int fd, uint64_t file_len, uint32_t store_bs, uint32_t *bs, uint32_t *version,
                const char *name, lg_log *log);

/* ffile.c: the file's backing path for log lines; the caller holds f->lock or f->io, so
 * that the descriptor stays. */
const char *ff_name(ff_file *f);
void ff_fd_name(int fd, char *buf, size_t cap);

/* ff_fds.c */
int ff_lock(ff_file *f);               /* f->lock, with the descriptor open; on an error
                                          (it could not be reopened) the lock is not held */
void ff_fds_add(ff_file *f);           /* a new file's descriptor counts (FF_FD_HELD) */
void ff_fds_remove(ff_file *f);        /* before the descriptor is closed for good */
int ff_lock_charged(ff_file *f);       /* ff_lock, and the thread writes as f->owner */
void ff_unlock_charged(ff_file *f);    /* the thread's fsuid back, then f->lock */

/* ff_slots.c, ff_pair.c, ff_load2.c: version 2 */
int ff2_commit_write(ff_file *f, ff_commit_plan *p, int durable);
int ff2_stream_write(ff_file *f, ff_commit_plan *p);
/* ff_brick.c: streaming bricks written by the thread that compressed them */
void ff_bricks_init(ff_bricks *b);
void ff_bricks_destroy(ff_bricks *b);
/* Under the file's lock, before p's jobs are built: whether a pool thread will write the
 * brick p (p->bw set) or its finish will (ff2_stream_write). */
int ff_brick_prepare(ff_file *f, ff_commit_plan *p);
/* Submits p's jobs; the brick is written once they and the bricks before it are. */
void ff_brick_submit(ff_file *f, ff_commit_plan *p);
/* After eng_wait, under the file's lock, in submission order: memory adopts what a pool
 * thread wrote, or the brick is written here (ff2_stream_write). 0, or the write's error. */
int ff_brick_finish(ff_file *f, ff_commit_plan *p);
/* Forgets p's brick (the plan is being freed). */
void ff_brick_free(ff_file *f, ff_commit_plan *p);
/* The bricks in flight are to be dropped unwritten (ff_batch_abandon): none is written from
 * here on, until the next brick after they are gone. */
void ff_bricks_stop(ff_file *f);

int ff2_load(ff_file *f, uint64_t file_len);
size_t ff2_new_file(const ff_env *env, uint8_t *out);   /* FMT_MARKER_LEN + FMT2_FOOTER_LEN */
void ff2_set_new(ff_file *f);
int ff2_empty(ff_file *f);
void ff2_rollback(ff_file *f);
int ff2_promise(ff_file *f);
int ff2_release(ff_file *f);
int ff2_pair_rest(ff_file *f);     /* ff_pair.c: a pair over one block left at the last close */
int ff2_stat_size(int fd, uint64_t file_len, fmt2_geo g, int check_fresh, uint64_t *size);
int ff2_may_have_lost_power(const ff_env *env, uint64_t ctime_ns);
uint64_t ff_max_size(const ff_file *f);

#endif
