/* The last block of a version 2 file, compressed for what was appended to it.
 *
 * A log written a line per open and close commits its partial last block at every close:
 * compressed anew, that block costs each line as much as the whole block (1 MiB stores: a
 * millisecond for a line near the block's end). The file's tail compressor (eng_tail.h)
 * keeps the block it compressed last, so a commit that only added bytes at the end
 * compresses and hashes those bytes, and a writer that reopens the file loads the block from
 * memory instead of decoding it. It is used only for a block that was committed before (a
 * file's first commit goes to the engine like any other block), and only within an eighth
 * of mem_mb over all files. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ff_internal.h"
#include "fmt2.h"

static uint64_t ff_tail_budget(const ff_env *env)
{
    return env->opt.mem_bytes / 8;
}

int ff_tail_wanted(ff_file *f, uint64_t i)
{
    if (f->version < FMT_VERSION_2 || i + 1 != f->n_blocks || f->blk[i].state != FF_DIRTY)
        return 0;
    if (f->tail)
        return 1;
    if (i >= f->n_stored)
        return 0;                      /* a new block: nothing yet to carry over */
    uint64_t need = eng_tail_footprint(f->bs);
    if (atomic_fetch_add(&f->env->tail_mem, need) + need > ff_tail_budget(f->env)) {
        atomic_fetch_sub(&f->env->tail_mem, need);
        return 0;
    }
    f->tail = eng_tail_new(f->bs, FMT2_FRAME_LEAD, FMT2_FRAME_TRAIL);
    if (!f->tail)
        atomic_fetch_sub(&f->env->tail_mem, need);
    return f->tail != NULL;
}

int ff_tail_frame(ff_file *f, const uint8_t *raw, uint32_t len, uint8_t *out,
                  uint8_t **frame, uint32_t *frame_len)
{
    eng_tail_out o;
    f->tail_block = UINT64_MAX;        /* its input is no longer what block i holds on disk,
                                          until this commit is adopted */
    int rc = eng_tail_compress(f->tail, raw, len, &o);
    if (rc < 0)
        return rc;
    if (o.comp_len < len) {            /* the frame made around the block where it lies */
        *frame = fmt2_frame_wrap(o.comp, f->bs, len, o.comp_len, o.comp_sum, o.raw_sum);
        *frame_len = o.comp_len + FMT2_FRAME_OVERHEAD;
    } else {
        *frame = out;
        *frame_len = (uint32_t)fmt2_frame_encode_sums(out, f->bs, raw, len, o.comp, o.comp_len,
                                                      o.comp_sum, o.raw_sum);
    }
    f->env->n.tail_blocks++;
    f->env->n.tail_bytes_kept += o.reused;
    return 0;
}

int ff_tail_load(ff_file *f, uint64_t i, uint8_t *dst, uint64_t n)
{
    uint32_t len;
    const uint8_t *in = f->tail && f->tail_block == i ? eng_tail_input(f->tail, &len) : NULL;
    if (!in || len != n)
        return 0;
    memcpy(dst, in, n);
    return 1;
}

void ff_tail_free(ff_file *f)
{
    if (!f->tail)
        return;
    eng_tail_free(f->tail);
    f->tail = NULL;
    f->tail_block = UINT64_MAX;
    atomic_fetch_sub(&f->env->tail_mem, eng_tail_footprint(f->bs));
}

void ff_tail_touch(ff_file *f, uint64_t i, uint64_t lo)
{
    if (i == f->low_block && lo < f->low_at)
        f->low_at = (uint32_t)lo;
}

void ff_tail_loaded(ff_file *f, uint64_t i)
{
    f->low_block = i, f->low_at = UINT32_MAX;
}
