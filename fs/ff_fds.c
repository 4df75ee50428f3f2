/* Bounded backing descriptors: an open file keeps its descriptor while it is used; past
 * opt.fd_max descriptors, the least recently used idle files close theirs and reopen it,
 * through the environment's reopen function, the next time they are used.
 *
 * Why: every file open through the mount would otherwise hold a descriptor, so users of an
 * allow_other mount could open files until the daemon's open-file limit is reached, and
 * then no other user could open, create or even stat anything. With a bound, what one user
 * holds open costs memory (the small ff_file state), not the daemon's descriptors.
 *
 * Each file's descriptor is in one of three states (f->fd_state, under env->fd_lock):
 *   FF_FD_HELD    open and never closed for idleness: no reopen function was given, its
 *                 last name is gone (nothing could reopen it by handle), or ff_hold_fd
 *   FF_FD_OPEN    open, on the LRU list, closable while idle
 *   FF_FD_PARKED  closed (f->fd is -1); ff_lock reopens it
 * Idle means: nothing dirty, no brick in the engine, no read decoding (f->io free); a file
 * with unstored data always keeps its descriptor.
 *
 * Lock order: f->lock, then env->fd_lock. Closing another file's descriptor takes that
 * file's lock and io lock with trylock while holding env->fd_lock, so it never waits. */
#include "ff_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FF_FD_TRIM_TRIES 16u           /* busy files looked past per trim: bounds its work */

/* Called with env->fd_lock held and victim's two locks taken: closes its descriptor unless
 * it is busy or unlinked. Returns 1 when the descriptor was closed. */
static int ff_park_locked(ff_env *env, ff_file *v)
{
    if (v->n_dirty || v->n_batches || v->deferred_err)
        return 0;
    struct stat st;
    if (fstat(v->fd, &st) == 0 && st.st_nlink == 0) {
        lru_unlink(&env->lru, &v->lru); /* no name is left to reopen it by */
        v->fd_state = FF_FD_HELD;
        return 0;
    }
    lru_unlink(&env->lru, &v->lru);
    (void)ff_name(v);                  /* a failed reopen's line still names it */
    close(v->fd);
    v->fd = -1;
    v->fd_state = FF_FD_PARKED;
    env->n_fds--;
    env->n.fd_closes++;
    return 1;
}

/* Called with env->fd_lock held: closes idle descriptors from the cold end until the count
 * is within the bound, never self's, looking past at most FF_FD_TRIM_TRIES busy ones. */
static void ff_trim_locked(ff_env *env, const ff_file *self)
{
    unsigned tries = 0;
    lru_node *at = env->lru.tail;
    while (env->opt.fd_max && env->n_fds > env->opt.fd_max && at && tries < FF_FD_TRIM_TRIES) {
        ff_file *v = LRU_ENTRY(at, ff_file, lru);
        lru_node *prev = at->prev;
        int closed = 0;
        if (v != self && pthread_mutex_trylock(&v->lock) == 0) {
            /* a file with bricks in flight is not parked: its I/O lock is left alone, which
             * a pool thread writing a brick would find taken (ff_brick.c) */
            if (!v->n_dirty && !v->n_batches && pthread_rwlock_trywrlock(&v->io) == 0) {
                ff_ahead_cancel(v);    /* no helper may use the descriptor after this */
                closed = ff_park_locked(env, v);
                pthread_rwlock_unlock(&v->io);
            }
            pthread_mutex_unlock(&v->lock);
        }
        tries += !closed;
        at = prev;
    }
}

void ff_fds_add(ff_file *f)
{
    ff_env *env = f->env;
    pthread_mutex_lock(&env->fd_lock);
    f->fd_state = FF_FD_HELD;
    env->n_fds++;
    pthread_mutex_unlock(&env->fd_lock);
}

void ff_fds_remove(ff_file *f)
{
    ff_env *env = f->env;
    pthread_mutex_lock(&env->fd_lock);
    if (f->fd_state == FF_FD_OPEN)
        lru_unlink(&env->lru, &f->lru);
    if (f->fd_state != FF_FD_PARKED)
        env->n_fds--;
    f->fd_state = FF_FD_PARKED;
    pthread_mutex_unlock(&env->fd_lock);
}

void ff_set_reopen_arg(ff_file *f, void *arg, int flags)
{
    ff_env *env = f->env;
    pthread_mutex_lock(&f->lock);
    f->reopen_arg = arg, f->reopen_flags = flags;
    pthread_mutex_lock(&env->fd_lock);
    if (f->fd_state == FF_FD_HELD && env->reopen && env->opt.fd_max) {
        f->fd_state = FF_FD_OPEN;
        lru_push(&env->lru, &f->lru);
        ff_trim_locked(env, f);
    }
    pthread_mutex_unlock(&env->fd_lock);
    pthread_mutex_unlock(&f->lock);
}

/* Called with f->lock held: reopens a parked descriptor and marks the file recently used. */
static int ff_fd_ready(ff_file *f)
{
    ff_env *env = f->env;
    if (f->fd_state == FF_FD_PARKED) {
        int fd = env->reopen(env->reopen_ctx, f->reopen_arg, f->reopen_flags);
        if (fd < 0) {
            lg_printf(env->log, LG_ERR, "%s: cannot reopen the backing file: %s", ff_name(f),
                      strerror(-fd));
            return fd == -ENOENT || fd == -ESTALE ? -EIO : fd;
        }
        f->fd = fd;
        env->n.fd_reopens++;
    }
    pthread_mutex_lock(&env->fd_lock);
    if (f->fd_state == FF_FD_PARKED) {
        f->fd_state = FF_FD_OPEN;
        env->n_fds++;
        lru_push(&env->lru, &f->lru);
        ff_trim_locked(env, f);
    } else if (f->fd_state == FF_FD_OPEN) {
        lru_touch(&env->lru, &f->lru);
    }
    pthread_mutex_unlock(&env->fd_lock);
    return 0;
}

int ff_lock(ff_file *f)
{
    pthread_mutex_lock(&f->lock);
    int rc = ff_fd_ready(f);
    if (rc < 0)
        pthread_mutex_unlock(&f->lock);
    return rc;
}

/* Blocks a write allocates are charged to the file's owner, not to the daemon's root: a
 * user's file stops at ext4's reserve and at the user's quota (cred.h). */
int ff_lock_charged(ff_file *f)
{
    int rc = ff_lock(f);
    if (rc == 0 && f->env->opt.charge_owner && f->owner != 0)
        f->fsuid_was = cr_charge(f->owner);
    return rc;
}

void ff_unlock_charged(ff_file *f)
{
    cr_restore(f->fsuid_was);
    f->fsuid_was = CR_NONE;
    pthread_mutex_unlock(&f->lock);
}

int ff_hold_fd(ff_file *f)
{
    int rc = ff_lock(f);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&f->env->fd_lock);
    if (f->fd_state == FF_FD_OPEN)
        lru_unlink(&f->env->lru, &f->lru);
    f->fd_state = FF_FD_HELD;
    pthread_mutex_unlock(&f->env->fd_lock);
    pthread_mutex_unlock(&f->lock);
    return 0;
}

int ff_dup_fd(ff_file *f)
{
    int rc = ff_lock(f);
    if (rc < 0)
        return rc;
    int fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
    rc = fd < 0 ? -errno : fd;
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int ff_with_fd(ff_file *f, int (*fn)(int fd, void *arg), void *arg)
{
    int rc = ff_lock(f);
    if (rc < 0)
        return rc;
    rc = fn(f->fd, arg);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int ff_fstat(ff_file *f, struct stat *st)
{
    int rc = ff_lock(f);
    if (rc < 0)
        return rc;
    rc = fstat(f->fd, st) < 0 ? -errno : 0;
    pthread_mutex_unlock(&f->lock);
    return rc;
}

void ff_env_set_reopen(ff_env *env, ff_reopen_fn fn, void *ctx)
{
    env->reopen = fn, env->reopen_ctx = ctx;
}

uint64_t ff_env_fds(ff_env *env)
{
    pthread_mutex_lock(&env->fd_lock);
    uint64_t n = env->n_fds;
    pthread_mutex_unlock(&env->fd_lock);
    return n;
}
