/* What stays of a regular file after its last handle is released.
 *
 * Normally its state is committed and freed. Two kinds of files keep it (in_inode.retained):
 *
 * - OP_KEEP_FAILED, a file whose last commit failed (a full disk): with the writeback cache
 *   the kernel keeps the size and pages that were written until it forgets the inode, and a
 *   page it evicts would then read back as zeros. The state stays, serving reads and trying
 *   its commit again at every later release, until the kernel forgets the inode, its last
 *   name is removed, or unmount.
 *   At most OP_RETAIN_MAX files are kept, holding one descriptor each; their unstored
 *   blocks stay counted against mem_mb.
 * - OP_KEEP_WARM, a file committed whole, kept for its next open: a log appended with `>>`
 *   or a file edited in turns is opened and closed again at once, and reopening it would
 *   cost a descriptor, its footer, and the decoding of the block it goes on writing (the
 *   tail compressor, ff_tail.c, lives in the state too). At most OP_WARM_MAX files, and
 *   states of at most op_fs.warm_budget bytes (mem_mb / 16: a state's block table grows
 *   with its file, 32 bytes a block), least recently closed first out; their descriptors
 *   are bounded with every other open file's (ff_fds.c). Nothing of theirs is unstored, so
 *   dropping one loses nothing. A server's logs appended in turn each had their state let
 *   go before their next line when they were more than were kept, and that line decoded its
 *   block again: 24 logs of 1.9 MB made 1,100-1,200 lines a second with 16 kept, 2,300-2,400
 *   with 64; 100 such logs 1,135-1,230 with 64 and 1,902-1,991 with 1,024
 *   (docs/BENCHMARKS.md).
 *
 * A kept state holds a pin on its inode (the retention's pin), given back when it ends. A
 * warm state is never open: an open takes it over (op_unwarm) under the inode's lock, so
 * under that lock OP_KEEP_WARM means a state with no handle. */
#include "ops_internal.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

#define OP_RETAIN_MAX 64
#define OP_WARM_MAX 1024

/* No name reaches the backing file any more (unlinked, or renamed over): once its last
 * handle is gone nothing can read it, so it is not worth a commit, least of all on a full
 * disk, where writing it would take the space its deletion was meant to free. */
static int op_deleted(ff_file *f)
{
    struct stat st;
    return ff_fstat(f, &st) == 0 && st.st_nlink == 0;
}

/* ---- the warm list, most recently closed first (fs->warm_lock) ---- */

static void op_warm_unlink(struct op_fs *fs, struct in_inode *n)
{
    pthread_mutex_lock(&fs->warm_lock);
    lru_unlink(&fs->warm_list, &n->warm);
    fs->warm--;
    fs->warm_bytes -= n->warm_bytes;
    pthread_mutex_unlock(&fs->warm_lock);
}

/* n->lock held: its state does not change while it is weighed. */
static void op_warm_push(struct op_fs *fs, struct in_inode *n)
{
    n->warm_bytes = ff_state_bytes(n->file);
    pthread_mutex_lock(&fs->warm_lock);
    lru_push(&fs->warm_list, &n->warm);
    fs->warm++;
    fs->warm_bytes += n->warm_bytes;
    pthread_mutex_unlock(&fs->warm_lock);
}

/* More are kept than the bounds allow. warm_lock held. */
static int op_warm_over(const struct op_fs *fs)
{
    return fs->warm > OP_WARM_MAX || (fs->warm > 0 && fs->warm_bytes > fs->warm_budget);
}

unsigned op_warm_count(struct op_fs *fs)
{
    pthread_mutex_lock(&fs->warm_lock);
    unsigned n = fs->warm;
    pthread_mutex_unlock(&fs->warm_lock);
    return n;
}

/* Ends n's retention, of either kind: its pin goes back. n->lock held. */
static void op_end_keep(struct op_fs *fs, struct in_inode *n)
{
    if (n->retained == OP_KEEP_WARM)
        op_warm_unlink(fs, n);
    else
        atomic_fetch_sub(&fs->retained, 1);
    n->retained = OP_KEEP_NONE;
    in_unpin(fs->tab, n);
}

/* Frees n's shared state, ending its retention if it had one. Called with n->lock held and
 * a pin of the caller's own (a handle's, a forget's, unmount's), so that dropping the
 * retention's pin here cannot free n; *err keeps an earlier error, else takes the final
 * commit's. */
void op_free_file(struct op_fs *fs, struct in_inode *n, int *err)
{
    int deleted = op_deleted(n->file), rerr = 0, kind = n->retained;
    struct stat st = {0};
    uint64_t size = 0;
    if (deleted)
        ff_discard(n->file);
    else
        rerr = ff_release_stat(n->file, &st, &size);
    if (!deleted && !rerr)
        sz_put(fs->sizes, &st, size);  /* the state the daemon just left it in */
    if (!*err)
        *err = rerr;
    n->file = NULL;
    n->size_valid = 0;                 /* coarse ctimes may not tell the commit apart */
    if (kind == OP_KEEP_NONE)
        return;
    op_end_keep(fs, n);
    if (kind == OP_KEEP_WARM)
        return;
    if (deleted)
        lg_printf(fs->log, LG_INFO, "inode %ju: the data kept after a failed close went with "
                  "the deleted file", (uintmax_t)n->key.ino);
    else
        lg_printf(fs->log, rerr ? LG_ERR : LG_INFO, "inode %ju: the data kept after a failed "
                  "close %s%s", (uintmax_t)n->key.ino, rerr ? "are lost: " : "are now stored",
                  rerr ? strerror(-rerr) : "");
}

/* Keeps n's state after a failed last commit, when there is room; returns 1 if kept (the
 * retention then holds the releasing handle's pin). */
static int op_retain(struct op_fs *fs, struct in_inode *n, int err)
{
    if (ff_is_foreign(n->file))
        return 0;
    if (atomic_fetch_add(&fs->retained, 1) >= OP_RETAIN_MAX) {
        atomic_fetch_sub(&fs->retained, 1);
        return 0;
    }
    n->retained = OP_KEEP_FAILED;
    lg_printf(fs->log, LG_WARN, "inode %ju: commit failed at its last close (%s): the "
              "unstored data stay in memory until a later commit succeeds or the kernel "
              "forgets the inode", (uintmax_t)n->key.ino, strerror(-err));
    return 1;
}

/* A committed file stays warm for its next open (an open took it out of the list); returns
 * 1 if kept (the retention then holds the releasing handle's pin). */
static int op_keep_warm(struct op_fs *fs, struct in_inode *n)
{
    if (n->retained != OP_KEEP_NONE || fs->read_only || ff_is_foreign(n->file))
        return 0;
    n->retained = OP_KEEP_WARM;
    op_warm_push(fs, n);
    return 1;
}

/* The last handle is gone: commit, then free the state or keep it. Called with n->lock
 * held; returns 1 when the releasing handle's pin now belongs to a new retention. */
int op_close_file(struct op_fs *fs, struct in_inode *n, int *err)
{
    int deleted = op_deleted(n->file);
    *err = deleted ? 0 : ff_flush_last(n->file);
    if (*err && n->retained == OP_KEEP_FAILED)
        return 0;                      /* kept already, by the retention's own pin */
    if (*err ? op_retain(fs, n, *err) : !deleted && op_keep_warm(fs, n))
        return 1;
    op_free_file(fs, n, err);
    return 0;
}

/* Drops the least recently closed warm files beyond the bounds. Called with no inode lock
 * held: a file's lock comes before the list's. */
void op_warm_trim(struct op_fs *fs)
{
    for (;;) {
        pthread_mutex_lock(&fs->warm_lock);
        struct in_inode *n =
            op_warm_over(fs) ? LRU_ENTRY(fs->warm_list.tail, struct in_inode, warm) : NULL;
        if (n)
            in_pin(fs->tab, n);        /* the list's entry may end meanwhile */
        pthread_mutex_unlock(&fs->warm_lock);
        if (!n)
            return;
        pthread_mutex_lock(&n->lock);
        int err = 0;
        if (n->retained == OP_KEEP_WARM)   /* not taken by an open meanwhile */
            op_free_file(fs, n, &err);
        pthread_mutex_unlock(&n->lock);
        in_unpin(fs->tab, n);
    }
}

/* A warm file's commit failed without a handle (a truncate on a full disk): the caller got
 * the error, and the stored state, which the kernel still shows, is what stays. n->lock
 * held, and a reference of the kernel's (the request's inode). */
void op_drop_warm(struct op_fs *fs, struct in_inode *n)
{
    if (n->retained != OP_KEEP_WARM)
        return;
    int err = 0;
    in_pin(fs->tab, n);
    op_free_file(fs, n, &err);
    in_unpin(fs->tab, n);
}

/* An open of a warm file takes the state over: its handle's pin keeps it from here. */
void op_unwarm(struct op_fs *fs, struct in_inode *n)
{
    if (n->retained == OP_KEEP_WARM)
        op_end_keep(fs, n);
}

/* A lookup between the forget and here has given the kernel the retained size again: the
 * state must then stay for that inode. A lookup after the check, made while n->lock is
 * held, reads the attributes once the state is gone and sees the stored size. */
void op_end_retention(struct op_fs *fs, struct in_inode *n)
{
    pthread_mutex_lock(&n->lock);
    int err = 0;
    if (n->retained && n->open_count == 0 && n->file && in_nlookup(fs->tab, n) == 0)
        op_free_file(fs, n, &err);
    pthread_mutex_unlock(&n->lock);
}

/* The name just removed was n's last: a kept state of either kind goes now, with its
 * descriptor, so that the space of the deleted file is given back at once, not at the
 * kernel's forget. The kernel sends that forget on its own schedule, and anything that holds
 * the inode (an O_PATH descriptor, a busy dentry) delays it; nothing can open the file again
 * meanwhile, so data a failed close kept are no use to anyone. */
void op_drop_removed(struct op_fs *fs, struct in_inode *n)
{
    pthread_mutex_lock(&n->lock);
    int err = 0;
    if (n->retained != OP_KEEP_NONE && n->open_count == 0 && n->file && op_deleted(n->file))
        op_free_file(fs, n, &err);
    pthread_mutex_unlock(&n->lock);
}

int op_keeps_any(struct op_fs *fs)
{
    pthread_mutex_lock(&fs->warm_lock);
    int any = fs->warm > 0;
    pthread_mutex_unlock(&fs->warm_lock);
    return any || atomic_load(&fs->retained) > 0;
}
