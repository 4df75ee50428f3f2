/* What the version 2 writer's files share (docs/FORMAT.md, part II): the commit
 * (ff_slots.c), the footer pair (ff_pair.c), opening and repair (ff_load2.c). Internal to
 * fs/; everything else goes through ffile.h and ff_internal.h. */
#ifndef FPGALZ4FS_FF_SLOTS_H
#define FPGALZ4FS_FF_SLOTS_H

#include "ff_internal.h"
#include "fmt2.h"

/* The frame of each block a plan writes, encoded once: journal and slot get the same bytes. */
typedef struct {
    uint64_t block;
    uint32_t len;                      /* logical length */
    uint32_t frame_len;                /* 0 for a hole */
    uint8_t *frame;                    /* into ff2_frames.buf, or where it was made in
                                          place: the plan's engine outputs, the file's tail
                                          compressor */
    int from_tail;                     /* made by the file's tail compressor (ff_tail.c) */
    int in_run;                        /* a hole written as part of a hole run */
} ff2_frame;

typedef struct {
    ff2_frame *v;
    uint64_t n;
    uint8_t *buf;
} ff2_frames;

typedef struct {
    uint64_t n, size, tail, fresh;
    int shrink, durable;
    uint64_t fresh_pre;                /* what a footer written before this commit's sync
                                          says: a power loss before the sync returns may keep
                                          the footer and lose blocks written since the last
                                          one, which the check at open then finds */
} ff2_target;


/* ---- ff_slots.c ---- */

/* The frame of a block the engine compressed for plan p: made where the engine left it
 * (the plan left room around it), or encoded into out (a block stored raw). Reads no state
 * of f but its block size. */
uint8_t *ff2_frame_of_job(const ff_file *f, const ff_commit_plan *p, eng_job *jb, uint8_t *out,
                          uint32_t *frame_len);
/* Memory takes the state a streaming brick's slots [.., n) left: no footer, the last slot
 * ending at tail, the backing file at least reached bytes long. */
void ff2_stream_adopt(ff_file *f, const ff2_frames *fr, uint64_t n, uint64_t tail,
                      uint64_t reached);

/* Where in its slot stored block i's frame ends: its length (the size word read when memory
 * does not know it), plus, in version 7, the distance to the slot's page when it lies there. */
int ff2_stored_frame_len(ff_file *f, uint64_t i, uint64_t *len);
/* Where stored block i's frame starts on the disk: its slot's start, or in version 7 its
 * slot's page (fmt2_frame_at; read from the disk each time). */
int ff2_frame_pos(ff_file *f, uint64_t i, uint64_t *pos);
/* Where the stored last slot's frame ends (*at) and the next slot begins (*end), when that
 * block is clean and so ends unpadded; *end 0 otherwise. */
int ff2_open_last(ff_file *f, uint64_t *at, uint64_t *end);
/* A padding frame over [at, end) (at least 8 bytes), its payload punched when punch. */
int ff2_pad(ff_file *f, uint64_t at, uint64_t end, int punch);
/* A sync (FF_DURABLE_* says which); every journal before it is dead once it returns. */
int ff2_sync_for(ff_file *f, int durable);
int ff2_sync(ff_file *f);
/* Starts writing the file's dirty pages out (slots rewritten after a sync) without waiting. */
void ff2_start_writeback(ff_file *f);
/* The journal entries of the blocks fr rewrites in place; *promised: one of them was. */
fmt2_jentry *ff2_jentries(const ff_file *f, const ff2_frames *fr, uint32_t *n_out,
                          int *promised);
/* Reserves the space the entries' new frames need in their slots. */
int ff2_reserve_slots(ff_file *f, const fmt2_jentry *e, uint32_t n);
/* Writes the journal of the entries at at (seq + 1), its frames from where they lie, and the
 * after_len bytes of after (what goes right behind it: a footer, a padding header) in one
 * pwritev. */
int ff2_pwrite_journal(ff_file *f, const fmt2_jentry *e, uint32_t n, uint64_t at,
                       const uint8_t *after, size_t after_len);
/* Writes the journal of the entries at at (seq + 1) and the footer ft right after it, in
 * one write, and cuts the file after the footer. */
int ff2_write_journal(ff_file *f, const fmt2_jentry *e, uint32_t n, uint64_t at,
                      const fmt2_footer *ft);
/* Rewrites the slots of the blocks fr rewrites in place, reads held off; then footer (an
 * encoded footer, or NULL) at tail, in the last slot's write when that slot is rewritten. */
int ff2_write_in_place(ff_file *f, const ff2_frames *fr, uint64_t n, uint64_t tail,
                       const uint8_t *footer);
/* The footer of the next commit (seq + 1). */
fmt2_footer ff2_footer(const ff_file *f, uint64_t size, uint64_t tail, uint64_t j_off,
                       uint64_t j_len, uint64_t fresh);
/* A footer without journal right behind the slots, the file cut after it. */
int ff2_settle(ff_file *f, uint64_t size, uint64_t tail, uint64_t fresh);

/* ---- ff_pair.c (FORMAT.md 11.6) ---- */

/* Whether the commit's journal goes into the footer pair. */
int ff2_pair_wanted(const ff_file *f, const ff2_frames *fr, const ff2_target *t);
/* A durable in-place commit through the pair: one sync. t->tail becomes the area's start. */
int ff2_commit_pair(ff_file *f, const ff2_frames *fr, ff2_target *t);
/* A durable commit that only appended opens the pair; 1: it does not (the caller settles). */
int ff2_commit_open_pair(ff_file *f, const ff2_frames *fr, ff2_target *t);

#endif
