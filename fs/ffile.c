/* Per-file state: the mount's environment, opening and closing a file, and the small
 * getters. The rest of ff_* lies in ff_read.c, ff_write.c, ff_commit.c and ff_repair.c;
 * ff_internal.h says which file holds what. */
#include "ff_internal.h"
#include "fmt2.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcache.h"
#include "fmt.h"

ff_env *ff_env_new(eng_ctx *eng, const sb_super *sb, const ff_options *opt, lg_log *log)
{
    ff_env *env = calloc(1, sizeof(*env));
    if (!env)
        return NULL;
    env->eng = eng, env->log = log, env->opt = *opt, env->sb = *sb;
    pthread_mutex_init(&env->fd_lock, NULL);
    pthread_mutex_init(&env->tail_lock, NULL);
    uint64_t slots = opt->mem_bytes / 2 / sb->block_size;
    env->cache = bc_new(sb->block_size, (uint32_t)(slots < 2 ? 2 : slots > 4096 ? 4096 : slots));
    env->zeros = calloc(1, FF_MAX_BLOCK);
    env->ahead = opt->ahead_threads ? ff_ahead_new(env, opt->ahead_threads) : NULL;
    int bufs = ff_bufs_init(env);
    if (!env->cache || !env->zeros || (opt->ahead_threads && !env->ahead) || bufs < 0) {
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
    ff_ahead_free(env->ahead);
    ff_bufs_free(env);
    bc_free(env->cache);
    free(env->zeros);
    pthread_mutex_destroy(&env->fd_lock);
    pthread_mutex_destroy(&env->tail_lock);
    free(env);
}

void ff_env_stats(ff_env *env, ff_stats *o)
{
    o->commits = env->n.commits, o->blocks_written = env->n.blocks_written;
    o->blocks_copied = env->n.blocks_copied, o->blocks_decoded = env->n.blocks_decoded;
    o->cache_hits = env->n.cache_hits, o->repairs = env->n.repairs;
    o->corrupt_blocks = env->n.corrupt_blocks;
    o->fds_open = ff_env_fds(env);
    o->fd_closes = env->n.fd_closes, o->fd_reopens = env->n.fd_reopens;
    o->tail_blocks = env->n.tail_blocks, o->tail_bytes_kept = env->n.tail_bytes_kept;
    o->readahead_blocks = env->n.readahead_blocks;
    o->pair_commits = env->n.pair_commits;
    o->blocks_ahead = env->n.blocks_ahead;
    o->writes_landed = env->n.writes_landed;
    o->page_records = env->n.page_records, o->records_folded = env->n.records_folded;
    o->records_folded_early = env->n.records_folded_early;
    o->chain_links = env->n.chain_links;
    o->chain_primed = env->n.chain_primed;
    o->tail_taken = env->n.tail_taken;
    o->record_commits = env->n.record_commits;
}

void ff_fd_name(int fd, char *buf, size_t cap)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = fd >= 0 ? readlink(proc, buf, cap - 1) : -1;
    if (n > 0)
        buf[n] = '\0';
    else
        snprintf(buf, cap, "(a file whose descriptor is closed)");
}

/* Looked up when a line needs it, not at every open and create: most files never get one,
 * and the readlink would be a system call more for each. */
const char *ff_name(ff_file *f)
{
    pthread_mutex_lock(&f->name_lock);
    if (!f->name[0])
        ff_fd_name(f->fd, f->name, sizeof(f->name));
    pthread_mutex_unlock(&f->name_lock);
    return f->name;
}

static ff_file *ff_new(ff_env *env, int fd, const char *name)
{
    ff_file *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->env = env, f->fd = fd, f->id = env->next_id++;
    f->tail_block = UINT64_MAX;
    f->low_block = UINT64_MAX;
    f->rewrite_min = UINT64_MAX;
    f->fsuid_was = CR_NONE;
    snprintf(f->name, sizeof(f->name), "%s", name ? name : "");
    pthread_mutex_init(&f->name_lock, NULL);
    pthread_mutex_init(&f->lock, NULL);
    pthread_rwlock_init(&f->io, NULL);
    ff_bricks_init(&f->bw);
    ff_fds_add(f);
    return f;
}

static void ff_free(ff_file *f)
{
    ff_batch_finish(f);                /* the engine must let go of our buffers */
    ff_ahead_forget(f);                /* and the read-ahead helpers of f itself */
    for (uint64_t i = 0; i < f->n_blocks; i++)
        ff_drop_buf(f, &f->blk[i]);
    bc_forget_file(f->env->cache, f->id);
    ff_tail_free(f);
    ff_rec_free(f);
    ff_fds_remove(f);
    if (f->fd >= 0)
        close(f->fd);
    pthread_mutex_destroy(&f->lock);
    pthread_mutex_destroy(&f->name_lock);
    pthread_rwlock_destroy(&f->io);
    ff_bricks_destroy(&f->bw);
    free(f->blk);
    free(f->pending);
    free(f->zero_comp);
    free(f);
}

/* A version 2 file whose marker a power loss took (ff_identify): the marker goes back, or on
 * a read-only mount the file is read as what it is. Returns 1 (an own file) or -errno. */
static int ff_restore_marker(ff_file *f)
{
    if (!f->env->opt.read_only) {
        int rc = fmt2_restore_marker(f->fd, f->version, f->bs, f->env->sb.uuid);
        if (rc < 0)
            return rc;
        ff_restore_mtime(f);
    }
    lg_printf(f->env->log, LG_WARN, "%s: its marker never reached the disk (a power loss); %s",
              ff_name(f), f->env->opt.read_only ? "read as the version 2 file it is"
                                               : "written again");
    f->env->n.repairs++;
    return 1;
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
    if (rc == 0) {
        f->mtime = st.st_mtim;
        f->owner = st.st_uid;
        f->ctime_ns = sb_ns(st.st_ctim);
    }
    if (rc == 0)
        rc = ff_identify(fd, (uint64_t)st.st_size, env->sb.block_size, &f->bs, &f->version,
                         f->name[0] ? f->name : NULL, env->log);
    if (rc == 2)
        rc = ff_restore_marker(f);
    if (rc == 0)
        f->foreign = 1;
    else if (rc == 1)
        rc = ff_load_own(f, (uint64_t)st.st_size);
    if (rc >= 0 && !f->foreign && f->rec_old)
        (void)ff_rec_fold_open(f);
    if (rc < 0) {
        ff_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

/* The first bytes of a new file: its marker and an empty seek table or footer. */
static size_t ff_new_file(const ff_env *env, uint8_t *out)
{
    if (ff_new_version(env) != FMT_VERSION_1)
        return ff2_new_file(env, out);
    fmt_marker m = {FMT_VERSION_1, env->sb.block_size, {0}, 0};
    memcpy(m.uuid, env->sb.uuid, sizeof(m.uuid));
    fmt_trailer empty = {0};
    fmt_marker_encode(&m, out);
    fmt_trailer_encode(&empty, out + FMT_MARKER_LEN);
    return FMT_MARKER_LEN + 8 + FMT_FOOTER_LEN;
}

/* A new file is written whole in one call (marker and empty table) and set up from what was
 * written, without reading it back: creating many small files is all overhead. */
int ff_create(ff_env *env, int fd, const char *name, ff_file **out)
{
    struct stat st;
    return ff_create_stat(env, fd, name, out, &st);
}

int ff_create_stat(ff_env *env, int fd, const char *name, ff_file **out, struct stat *stp)
{
    uint8_t head[FMT_MARKER_LEN + FMT2_FOOTER_LEN + 8 + FMT_FOOTER_LEN];
    size_t len = ff_new_file(env, head);
    struct stat st;
    int rc = fmt_pwrite_all(fd, head, len, 0);
    if (rc == 0 && fstat(fd, &st) < 0)
        rc = -errno;
    if (rc == 0 && (uint64_t)st.st_size > len && ftruncate(fd, (off_t)len) < 0)
        rc = -errno;
    ff_file *f = rc == 0 ? ff_new(env, fd, name) : NULL;
    if (!f) {
        close(fd);
        return rc < 0 ? rc : -ENOMEM;
    }
    f->mtime = st.st_mtim;
    f->owner = st.st_uid;
    f->bs = env->sb.block_size;
    f->version = ff_new_version(env);
    ff_set_empty(f);
    *stp = st;
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

int ff_release_stat(ff_file *f, struct stat *st, uint64_t *size)
{
    struct stat now;
    if (st)
        st->st_ino = 0;
    int rc = ff_lock_charged(f);
    if (rc == 0) {
        f->rec_off = 1;
        rc = f->foreign ? 0 : ff_commit(f, 0, FF_COMMIT_FULL);
        if (rc == 0 && !f->foreign)
            rc = ff_rec_fold(f);
        if (rc == 0 && !f->foreign && f->version >= FMT_VERSION_2 && !f->env->opt.read_only)
            rc = ff2_release(f);
        if (f->mtime_stale)
            ff_restore_mtime(f);
        if (rc == 0 && st && fstat(f->fd, &now) == 0)
            *st = now, *size = f->foreign ? (uint64_t)now.st_size : f->size;
        ff_unlock_charged(f);
    }
    ff_free(f);
    return rc;
}

int ff_release(ff_file *f)
{
    return ff_release_stat(f, NULL, NULL);
}

uint64_t ff_size(ff_file *f)
{
    struct stat st;
    if (f->foreign)
        return ff_fstat(f, &st) == 0 ? (uint64_t)st.st_size : 0;
    pthread_mutex_lock(&f->lock);
    uint64_t size = f->size;
    pthread_mutex_unlock(&f->lock);
    return size;
}

int ff_is_foreign(const ff_file *f) { return f->foreign; }

uint64_t ff_state_bytes(const ff_file *f)
{
    return sizeof(*f) + (uint64_t)f->cap * sizeof(*f->blk);
}

void ff_set_owner(ff_file *f, uid_t uid)
{
    pthread_mutex_lock(&f->lock);
    f->owner = uid;
    pthread_mutex_unlock(&f->lock);
}

void ff_get_mtime(ff_file *f, struct timespec *out)
{
    pthread_mutex_lock(&f->lock);
    *out = f->mtime;
    pthread_mutex_unlock(&f->lock);
}

int ff_set_times(ff_file *f, const struct timespec tv[2])
{
    int rc = ff_lock(f);
    if (rc < 0)
        return rc;
    /* The kernel's writeback cache sends the mtime alone at every close of a writer: an own
     * file keeps it in memory, as after a commit, and its release puts it back (one system
     * call less per close). A foreign file's mtime is the backing file's own. */
    if (tv[0].tv_nsec == UTIME_OMIT && tv[1].tv_nsec != UTIME_OMIT && !f->foreign &&
        !f->env->opt.read_only) {
        f->mtime = tv[1], f->mtime_stale = 1;
        pthread_mutex_unlock(&f->lock);
        return 0;
    }
    if (tv[1].tv_nsec != UTIME_OMIT)
        f->mtime = tv[1], f->mtime_stale = 0;
    rc = futimens(f->fd, tv) < 0 ? -errno : 0;
    pthread_mutex_unlock(&f->lock);
    return rc;
}

void ff_set_mtime(ff_file *f, const struct timespec *ts)
{
    if (ff_lock(f) < 0)
        return;                        /* logged; nothing to restore it onto */
    f->mtime = *ts;
    if (!f->foreign)
        ff_restore_mtime(f);
    pthread_mutex_unlock(&f->lock);
}

int ff_stat_size(ff_env *env, int fd, uint64_t *size, int *own)
{
    struct stat st;
    uint32_t bs = 0, version = 0;
    if (fstat(fd, &st) < 0)
        return -errno;
    int rc = ff_identify(fd, (uint64_t)st.st_size, env->sb.block_size, &bs, &version, "?",
                         env->log);
    *own = rc >= 1;
    if (rc == 2) {                     /* a guess: the open puts the marker back */
        ff2_stat_size(fd, (uint64_t)st.st_size, fmt2_geo_of(version, bs), 0, size);
        return 1;
    }
    *size = (uint64_t)st.st_size;
    if (rc <= 0)
        return rc;
    if (version >= FMT_VERSION_2)
        return ff2_stat_size(fd, (uint64_t)st.st_size, fmt2_geo_of(version, bs),
                             ff2_may_have_lost_power(env, sb_ns(st.st_ctim)), size);
    fmt_trailer t;
    fmt_error err = fmt_trailer_read(fd, (uint64_t)st.st_size, bs, &t);
    int torn = err == FMT_ERR_NO_TRAILER;
    if (torn) {
        fmt_scan_result sr;
        if ((err = fmt_scan(fd, (uint64_t)st.st_size, bs, 0, &sr)) == FMT_OK)
            t = sr.table;
    }
    if (err != FMT_OK)
        return -fmt_errno(err);
    *size = t.size;
    fmt_trailer_free(&t);
    return torn;                       /* a torn file: the repair at open decides */
}
