/* Appends to the last block of a version 5 file, committed as links of its chained frame
 * (docs/FORMAT.md 9.12 and 11.8).
 *
 * A log appended a line per open and close commits its partial last block at every close.
 * Rewritten whole (through the journal, then in its slot), that block costs each line the
 * compressed block twice, hashed and copied: hundreds of KiB for a 60-byte line at 1 MiB
 * blocks. When the commit only added bytes behind what the last block held, and the file
 * ends with that block's frame and the footer, the added bytes are compressed alone with
 * the block as their dictionary (the tail compressor, eng_tail.h) and written as one more
 * linked LZ4 block over the frame's end, followed by the frame's new end and the footer,
 * and the frame's header says the new length: about the line, twice. The blocks already
 * there are never written again, so a crash at any point leaves them, and the open keeps
 * every link that checks (fmt2_chain_settle). A chain compresses worse than one block, so
 * once its links hold ff_chain_budget bytes the next commit writes the block whole again.
 * An fsync after an append is a link too, then one sync. In a file that ends with the footer
 * pair (durable commits one after the other), the link's footer goes into the pair's place
 * instead of behind the frame: the file keeps its length, since ext4 makes an fdatasync
 * after a change of length a commit of its journal. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bcache.h"
#include "ff_slots.h"

/* Link bytes after which the block is written whole again: what a chain may cost beyond
 * one compression of its block stays within the format's growth bound (64 KiB) with room
 * for the pages its frame and footer leave partly used. */
static uint32_t ff_chain_budget(uint32_t bs)
{
    return bs / 4 < (32u << 10) ? bs / 4 : (32u << 10);
}

/* The committed length of the last block (the footer's size). */
static uint32_t ff_chain_old_len(const ff_file *f)
{
    return (uint32_t)(f->v2.size - (f->n_blocks - 1) * (uint64_t)f->bs);
}

/* The block's side of a link: only bytes appended to a partial last block that was loaded
 * as committed, with nothing else pending. */
static int ff_chain_block_able(const ff_file *f)
{
    uint64_t n = f->n_blocks, i = n - 1;
    if (f->version < FMT_VERSION_3 || ff_new_version(f->env) < FMT_VERSION_5 || n == 0 ||
        n != f->n_stored || f->rewrite_min != i || f->n_dirty != 1 || f->n_batches ||
        f->n_pending)
        return 0;
    const ff_blk *b = &f->blk[i];
    uint64_t old_len = ff_chain_old_len(f), len = ff_blen(f, i);
    return b->state == FF_DIRTY && !(b->off & FMT_ENTRY_ZERO) && b->word != FMT2_RUN_WORD &&
           old_len > 0 && len > old_len && len < f->bs && f->low_block == i &&
           f->low_at >= old_len;
}

/* The tail compressor holds the block's committed bytes, as the link compresses the added
 * ones with them. A writer that opened the file again (its state not kept, or the
 * compressor's memory given to another file) has only the block as loaded, unchanged below
 * its committed length: the compressor adopts those bytes (kept, hashed, their last 64 KiB
 * made the dictionary; a tenth of compressing them), and the append is a link all the same.
 * 0: no compressor to be had. */
static int ff_chain_primed(ff_file *f, uint64_t i, uint32_t old_len)
{
    uint32_t in_len;
    if (!ff_tail_wanted(f, i))         /* keeps f's compressor, or finds it one */
        return 0;
    if (f->tail_block == i && eng_tail_input(f->tail, &in_len) && in_len == old_len)
        return 1;
    f->tail_block = UINT64_MAX;
    if (eng_tail_adopt(f->tail, f->blk[i].buf, old_len) < 0)
        return 0;
    f->tail_block = i;
    f->env->n.chain_primed++;
    return 1;
}

/* The file's side: it ends with that block's frame and a footer (no journal), or with a
 * footer pair (FORMAT.md 9.10) behind that slot. */
static int ff_chain_file_able(const ff_file *f)
{
    const ff2_state *v = &f->v2;
    uint64_t n = f->n_blocks, i = n - 1;
    /* records lie only in a last slot padded to the next one (FORMAT.md 9.11): its frame
     * alone would not be the block */
    int recs = f->rec_flag || f->rec_old;
    if (v->footerless || v->j_pending ||
        (recs && v->tail >= fmt2_slot_off(ff2_geo(f), n) &&
         !(f->rec && f->rec[i].known && f->rec[i].used == 0)))
        return 0;
    if (v->paired)
        return v->area == fmt2_slot_off(ff2_geo(f), n);
    return !(v->j_live || v->j_len || v->eof != v->tail + FMT2_FOOTER_LEN);
}

/* The footer's fresh after a commit that wrote block i in place without a sync (ff_slots.c,
 * ff2_fresh_after): i joins the fresh suffix when it ends right below it. */
static uint64_t ff_chain_fresh(const ff_file *f, uint64_t i)
{
    uint64_t b = f->v2.fresh < f->n_stored ? f->v2.fresh : f->n_stored;
    if (i + 1 == b)
        b = i;
    return b < f->v2.promised ? f->v2.promised : b;
}

/* Version 3 and 4 files say 5 before their first chain (FORMAT.md 16). */
static int ff_chain_version(ff_file *f)
{
    uint8_t v[4];
    if (f->version >= FMT_VERSION_5)
        return 0;
    fmt_put32(v, FMT_VERSION_5);
    int rc = fmt_pwrite_all(f->fd, v, sizeof(v), FMT_MARKER_FLAGS_OFF - 8);
    if (rc == 0)
        f->version = FMT_VERSION_5;
    return rc;
}

/* What follows the frame's new end at `at`, in the link's write: the footer (the file ends
 * there), or, in a file that ends with a footer pair, the padding frame up to the pair's
 * area and the kill word (FORMAT.md 9.4), the footer then going into the pair's newer place.
 * Its length. */
static size_t ff_chain_after(const ff_file *f, uint64_t at, const fmt2_footer *ft,
                             uint8_t out[FMT2_FOOTER_LEN])
{
    if (!f->v2.paired) {
        fmt2_footer_encode(ft, out);
        return FMT2_FOOTER_LEN;
    }
    uint64_t pad = f->v2.area - at;
    fmt2_pad_header(out, pad);
    memset(out + 8, 0, FMT2_KILL_LEN);
    return pad >= 8 + FMT2_KILL_LEN ? 8 + FMT2_KILL_LEN : 8;
}

/* Header, then link, frame end and what follows (ff_chain_after) in one write over the
 * frame's old end (and over the padding that followed it when it had shrunk in place or
 * the slot is padded to a pair's area); then a cut when the old footer lay further, or the
 * pair's footer. */
static int ff_chain_put(ff_file *f, uint8_t *link, size_t link_len, uint64_t frame_len,
                        const fmt2_footer *ft)
{
    uint64_t i = f->n_blocks - 1, at = fmt2_slot_off(ff2_geo(f), i), end = at + frame_len;
    uint32_t old_len = ff_chain_old_len(f), len = (uint32_t)ff_blen(f, i);
    uint64_t new_end = end - FMT_FRAME_END_LEN + link_len;
    uint8_t head[FMT_FRAME_HEADER_LEN], after[FMT2_FOOTER_LEN];
    struct iovec iov[2] = {{link, link_len}, {after, ff_chain_after(f, new_end, ft, after)}};
    fmt2_chain_head(head, f->bs, len);
    int rc = fmt_pwrite_all(f->fd, head, sizeof(head), at);
    if (rc == 0 && (rc = fmt_pwritev_all(f->fd, iov, 2, end - FMT_FRAME_END_LEN)) < 0) {
        /* a full disk: the frame's old end is still there, so its old header goes back
         * (an overwrite, which needs no space); the open would repair it otherwise */
        if (f->blk[i].word == FMT2_CHAIN_WORD)
            fmt2_chain_head(head, f->bs, old_len);
        else
            fmt_frame_header(head, f->bs, old_len, 1);
        (void)fmt_pwrite_all(f->fd, head, sizeof(head), at);
    }
    if (rc == 0 && f->v2.paired)
        return fmt2_place_write(f->fd, f->v2.eof, f->v2.place, ft);
    if (rc == 0 && new_end + FMT2_FOOTER_LEN < f->v2.eof &&
        ftruncate(f->fd, (off_t)(new_end + FMT2_FOOTER_LEN)) < 0)
        rc = -errno;
    return rc;
}

/* The link's write (ff_chain_put) and memory's new state; links: the bytes the chain's
 * links held before. The footer's tail is the frame's new end, or in a pair the area (the
 * slot padded up to it, as a pair commit that rewrites the last block leaves it). */
static int ff_chain_write(ff_file *f, const eng_tail_out *o, uint64_t frame_len, uint32_t links)
{
    uint64_t i = f->n_blocks - 1, end = fmt2_slot_off(ff2_geo(f), i) + frame_len;
    uint32_t old_len = ff_chain_old_len(f), len = (uint32_t)ff_blen(f, i);
    ff_blk *b = &f->blk[i];
    uint8_t *link = malloc(len - old_len + FMT2_CHAIN_LINK_OVERHEAD);
    if (!link)
        return -ENOMEM;
    size_t link_len = fmt2_chain_link(link, b->buf + old_len, len - old_len, o->piece,
                                      o->piece_len, o->raw_sum);
    uint64_t new_end = end - FMT_FRAME_END_LEN + link_len, fresh = ff_chain_fresh(f, i);
    uint64_t tail = f->v2.paired ? f->v2.area : new_end;
    fmt2_footer ft = ff2_footer(f, f->size, tail, 0, 0, fresh);
    ft.paired = f->v2.paired;
    ff_io_exclusive(f);
    int rc = ff_chain_put(f, link, link_len, frame_len, &ft);
    free(link);
    if (rc == 0) {
        /* cached when that moves the buffer; a card's buffer would be copied, and the tail
         * compressor, which holds the block, gives the next append its bytes anyway */
        bc_forget(f->env->cache, f->id, ff2_word_off(f, i));
        if (ff_buf_moves(f))
            ff_buf_to_cache(f, b, ff2_word_off(f, i), len);
        ff_drop_buf(f, b);
        b->state = FF_CLEAN, b->off = ff2_word_off(f, i);
        f->chain_links = links + (uint32_t)link_len;
        b->word = FMT2_CHAIN_WORD;
        f->chain_area = (uint32_t)(frame_len - FMT2_FRAME_OVERHEAD + FMT_BLOCK_OVERHEAD) +
                        (uint32_t)link_len - FMT_FRAME_END_LEN;
        f->v2.seq++, f->v2.tail = tail;
        if (!f->v2.paired)
            f->v2.eof = tail + FMT2_FOOTER_LEN;
        /* no live journal; j_off stays on the half the pair's place may still name on the
         * disk until the next sync, so that the next pair commit writes the other one */
        f->v2.j_len = 0;
        f->v2.size = f->size, f->v2.fresh = f->v2.disk_fresh = fresh;
        f->tail_block = i, f->rewrite_min = UINT64_MAX;
    } else {
        bc_forget_file(f->env->cache, f->id);
    }
    pthread_rwlock_unlock(&f->io);
    return rc;
}

/* A file in the footer pair (durable rewrites one after the other, or a durable append
 * that laid the pair out) links in the pair: the link's footer goes into the place of the
 * pair's newer footer, over it, so the file keeps its length, and an fsync of the backing
 * file that follows needs no journal commit of the backing filesystem for it. That newer
 * footer may name the journal of the commit before, whose slots only a sync puts on the
 * disk: that sync comes first (FORMAT.md 11.8). */
static int ff_chain_pair_ready(ff_file *f)
{
    if (!f->v2.paired || !f->v2.j_live)
        return 0;
    int rc = ff2_sync(f);
    if (rc == 0)
        f->v2.j_live = 0;
    return rc;
}

/* The link itself, then, for an fsync, the sync: memory then takes every block as promised,
 * as after a durable commit's footer and sync (FORMAT.md 11.1 step 5). */
static int ff_chain_link(ff_file *f, uint64_t frame_len, uint32_t links, int durable)
{
    uint64_t i = f->n_blocks - 1;
    uint32_t old_len = ff_chain_old_len(f), len = (uint32_t)ff_blen(f, i);
    eng_tail_out o;
    f->tail_block = UINT64_MAX;        /* until the link is on disk */
    if (eng_tail_extend(f->tail, f->blk[i].buf + old_len, len - old_len, &o) < 0)
        return 0;                      /* the tail compressor starts over: a whole commit */
    int rc = ff_chain_version(f);
    if (rc == 0)
        rc = ff_chain_write(f, &o, frame_len, links);
    if (rc < 0) {
        eng_tail_reset(f->tail);
        return rc;
    }
    f->env->n.commits++;
    f->env->n.chain_links++;
    f->env->n.tail_blocks++;
    f->env->n.tail_bytes_kept += old_len;
    f->mtime_stale = 1, f->deferred_err = 0;
    if (durable && (rc = ff_sync_for(f, durable)) < 0)
        return rc;
    if (durable)
        f->v2.fresh = f->v2.promised = f->n_stored;
    return 1;
}

int ff_chain_commit(ff_file *f, int durable)
{
    if (!ff_chain_block_able(f) || !ff_chain_file_able(f))
        return 0;
    uint64_t i = f->n_blocks - 1, frame_len;
    uint32_t old_len = ff_chain_old_len(f), len = (uint32_t)ff_blen(f, i);
    uint32_t links = f->blk[i].word == FMT2_CHAIN_WORD ? f->chain_links : 0;
    int rc = ff2_stored_frame_len(f, i, &frame_len);
    if (rc < 0)
        return rc;
    uint64_t grown = frame_len + (len - old_len) + FMT2_CHAIN_LINK_OVERHEAD - FMT_FRAME_END_LEN;
    if (fmt2_slot_off(ff2_geo(f), i) + frame_len > f->v2.tail ||
        grown > f->bs + FMT2_FRAME_OVERHEAD ||
        links + (len - old_len) + FMT2_CHAIN_LINK_OVERHEAD > ff_chain_budget(f->bs)) {
        if (f->tail)                   /* written whole, compressed from scratch */
            eng_tail_reset(f->tail);
        return 0;
    }
    if (!ff_chain_primed(f, i, old_len))
        return 0;
    if ((rc = ff_chain_pair_ready(f)) < 0)
        return rc;
    return ff_chain_link(f, frame_len, links, durable);
}

void ff_chain_loaded(ff_file *f, uint32_t area)
{
    uint64_t i = f->n_stored - 1;
    uint8_t w[4];
    f->blk[i].word = FMT2_CHAIN_WORD;
    f->chain_area = area;
    /* its links: what follows its first block (unknown: all of it, so that the next append
     * writes the block whole) */
    f->chain_links = fmt_pread_all(f->fd, w, sizeof(w), ff2_word_off(f, i)) == 0 &&
                             fmt_block_len(fmt_get32(w)) <= area
                         ? area - (uint32_t)fmt_block_len(fmt_get32(w))
                         : area;
}
