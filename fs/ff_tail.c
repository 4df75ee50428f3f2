/* The last block of a version 2 file, compressed for what was appended to it.
 *
 * A log written a line per open and close commits its partial last block at every close:
 * compressed anew, that block costs each line as much as the whole block (1 MiB stores: a
 * millisecond for a line near the block's end). The file's tail compressor (eng_tail.h)
 * keeps the block it compressed last, so a commit that only added bytes at the end
 * compresses and hashes those bytes, and a writer that reopens the file loads the block from
 * memory instead of decoding it. It is used only for a block that was committed before (a
 * file's first commit goes to the engine like any other block), and only within an eighth
 * of mem_mb over all files.
 *
 * That eighth holds about ten compressors at 1 MiB blocks (two at 4 MiB), fewer than the
 * files the daemon keeps after their close. A file that needs one when none is left takes
 * the least recently used file's, if that file is not in use: a server's logs appended in
 * turn would otherwise write all but the first ten's lines as whole blocks. The file that
 * lost its compressor has its block adopted again at its next append (ff_chain.c), for a
 * tenth of what compressing it, and writing it whole, costs.
 *
 * Lock order: f->lock, then env->tail_lock. Another file's compressor is taken with its
 * lock taken by trylock while env->tail_lock is held, so that nothing waits. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ff_internal.h"
#include "fmt2.h"

#define FF_TAIL_TAKE_TRIES 16u         /* files in use looked past per take: bounds its work */
#define FF_TAIL_RESERVE_TRIES 4u       /* takes per reservation */

static uint64_t ff_tail_budget(const ff_env *env)
{
    return env->opt.mem_bytes / 8;
}

/* Called with env->tail_lock held and f's lock (or its last reference) held. */
static void ff_tail_drop_locked(ff_file *f)
{
    lru_unlink(&f->env->tails, &f->tail_lru);
    eng_tail_free(f->tail);
    f->tail = NULL;
    f->tail_block = UINT64_MAX;
    atomic_fetch_sub(&f->env->tail_mem, eng_tail_footprint(f->bs));
}

/* Frees the compressor of the least recently used file that has one and is not in use,
 * never self's. Returns 1 when one was freed. */
static int ff_tail_take(ff_env *env, const ff_file *self)
{
    int took = 0;
    unsigned tries = 0;
    pthread_mutex_lock(&env->tail_lock);
    for (lru_node *at = env->tails.tail; at && !took && tries < FF_TAIL_TAKE_TRIES;
         at = at->prev, tries++) {
        ff_file *v = LRU_ENTRY(at, ff_file, tail_lru);
        if (v == self || pthread_mutex_trylock(&v->lock) != 0)
            continue;
        ff_tail_drop_locked(v);
        pthread_mutex_unlock(&v->lock);
        env->n.tail_taken++;
        took = 1;
    }
    pthread_mutex_unlock(&env->tail_lock);
    return took;
}

/* Reserves a compressor's memory within the budget, taking another file's if need be (a
 * few times at most: writers at once may each take the memory another freed). */
static int ff_tail_reserve(ff_file *f, uint64_t need)
{
    ff_env *env = f->env;
    for (unsigned k = 0; k < FF_TAIL_RESERVE_TRIES; k++) {
        if (atomic_fetch_add(&env->tail_mem, need) + need <= ff_tail_budget(env))
            return 1;
        atomic_fetch_sub(&env->tail_mem, need);
        if (need > ff_tail_budget(env) || !ff_tail_take(env, f))
            return 0;
    }
    return 0;
}

static void ff_tail_used(ff_file *f)
{
    pthread_mutex_lock(&f->env->tail_lock);
    lru_touch(&f->env->tails, &f->tail_lru);
    pthread_mutex_unlock(&f->env->tail_lock);
}

int ff_tail_wanted(ff_file *f, uint64_t i)
{
    if (f->version < FMT_VERSION_2 || i + 1 != f->n_blocks || f->blk[i].state != FF_DIRTY)
        return 0;
    if (f->tail) {
        ff_tail_used(f);
        return 1;
    }
    if (i >= f->n_stored)
        return 0;                      /* a new block: nothing yet to carry over */
    uint64_t need = eng_tail_footprint(f->bs);
    if (!ff_tail_reserve(f, need))
        return 0;
    eng_tail *t = eng_tail_new(f->bs, FMT2_FRAME_LEAD, FMT2_FRAME_TRAIL);
    if (!t) {
        atomic_fetch_sub(&f->env->tail_mem, need);
        return 0;
    }
    pthread_mutex_lock(&f->env->tail_lock);
    f->tail = t;
    lru_push(&f->env->tails, &f->tail_lru);
    pthread_mutex_unlock(&f->env->tail_lock);
    return 1;
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

/* Under env->tail_lock even for a file nobody else uses: another file taking its
 * compressor may hold its lock until then. */
void ff_tail_free(ff_file *f)
{
    pthread_mutex_lock(&f->env->tail_lock);
    if (f->tail)
        ff_tail_drop_locked(f);
    pthread_mutex_unlock(&f->env->tail_lock);
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
