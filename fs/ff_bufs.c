/* Block buffers a card reads where they lie (seed 004: zero-copy host buffers).
 *
 * When the engine's card can read host memory in place (eng_host_direct), a dirty block of
 * the store's block size lives in memory from eng_host_alloc, and its compression job says
 * src_host: the card's DMA takes the block from there, and the host copies nothing into the
 * card's buffer sets. Such memory is slow to get (a GPU pins it page by page), so buffers
 * come back to a pool instead of the system and are used again; the pool keeps at most
 * mem_mb of them, the most the writers' dirty blocks hold at once by their budget. Other
 * block sizes (files made with another store's block size), engines without such a card,
 * and a failed allocation use malloc, as before. */
#include <stdlib.h>

#include "ff_internal.h"

int ff_bufs_init(ff_env *env)
{
    pthread_mutex_init(&env->buf_lock, NULL);
    env->buf_direct = env->eng && eng_host_direct(env->eng);
    env->buf_cap = env->buf_direct ? env->opt.mem_bytes / env->sb.block_size : 0;
    env->buf_free = env->buf_cap ? calloc(env->buf_cap, sizeof(*env->buf_free)) : NULL;
    if (env->buf_cap && !env->buf_free)
        return -1;
    return 0;
}

void ff_bufs_free(ff_env *env)
{
    for (size_t i = 0; i < env->buf_n; i++)
        eng_host_free(env->eng, env->buf_free[i], env->sb.block_size);
    free(env->buf_free);
    env->buf_free = NULL, env->buf_n = env->buf_cap = 0;
    pthread_mutex_destroy(&env->buf_lock);
}

uint8_t *ff_buf_get(ff_file *f, uint8_t *host)
{
    if (f->bs == f->env->sb.block_size)
        return ff_land_get(f->env, host);
    *host = 0;
    return malloc(f->bs);
}

void ff_buf_put(ff_file *f, uint8_t *buf, uint8_t host)
{
    if (host)
        ff_land_put(f->env, buf, host);
    else
        free(buf);
}

/* A buffer of the store's block size, of the kind its dirty blocks use. */
uint8_t *ff_land_get(ff_env *env, uint8_t *host)
{
    uint32_t bs = env->sb.block_size;
    uint8_t *buf = NULL;
    *host = (uint8_t)env->buf_direct;
    if (*host) {
        pthread_mutex_lock(&env->buf_lock);
        if (env->buf_n > 0)
            buf = env->buf_free[--env->buf_n];
        pthread_mutex_unlock(&env->buf_lock);
        if (!buf)
            buf = eng_host_alloc(env->eng, bs);
    }
    if (!buf)
        *host = 0, buf = malloc(bs);
    return buf;
}

void ff_land_put(ff_env *env, uint8_t *buf, uint8_t host)
{
    if (!host) {
        free(buf);
        return;
    }
    pthread_mutex_lock(&env->buf_lock);
    int kept = env->buf_n < env->buf_cap;
    if (kept)
        env->buf_free[env->buf_n++] = buf;
    pthread_mutex_unlock(&env->buf_lock);
    if (!kept)
        eng_host_free(env->eng, buf, env->sb.block_size);
}

/* Dirty buffers of the card's memory (the only ones with host set) stay where the card
 * reads them; other block sizes do not fit the cache's slots. */
int ff_buf_moves(const ff_file *f)
{
    return !f->env->buf_direct && f->bs == f->env->sb.block_size;
}

uint8_t *ff_buf_from_cache(ff_file *f, uint64_t key, uint32_t len)
{
    return ff_buf_moves(f) ? bc_take(f->env->cache, f->id, key, len) : NULL;
}

void ff_buf_to_cache(ff_file *f, ff_blk *b, uint64_t key, uint32_t len)
{
    if (!ff_buf_moves(f))
        bc_put(f->env->cache, f->id, key, b->buf, len);
    else
        b->buf = bc_adopt(f->env->cache, f->id, key, b->buf, len);
}
