#include "inode.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IN_MIN_BUCKETS 1024u

struct in_table {
    pthread_mutex_t lock;              /* hash, nlookup, pins, hashed; a leaf lock */
    struct in_inode **buckets;         /* chains of inodes by key */
    size_t n_buckets;                  /* a power of two */
    size_t n_hashed;                   /* inodes in the chains */
    uint64_t n_live;                   /* inodes allocated, hashed or not */
    struct in_inode *root;             /* the backing directory; never freed before the table */
    lru_list dfds;                     /* directories with a cached descriptor, most
                                          recently used first */
    unsigned n_dfd;                    /* their number, at most IN_DIR_FDS */
    int root_fd;                       /* owned by the caller */
    lg_log *log;                       /* owned by the caller */
};

/* A file handle as name_to_handle_at fills it, with room for the largest one. */
union in_handle_buf {
    struct file_handle fh;
    unsigned char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

static size_t in_hash(const struct in_key *k, size_t n_buckets)
{
    uint64_t h = (uint64_t)k->ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)k->dev * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    return (size_t)h & (n_buckets - 1);
}

static int in_key_eq(const struct in_key *a, const struct in_key *b)
{
    return a->dev == b->dev && a->ino == b->ino;
}

static struct in_inode *in_alloc(const struct in_key *key, mode_t type, const void *handle,
                                 unsigned handle_len)
{
    struct in_inode *n = calloc(1, sizeof(*n) + handle_len);
    if (!n)
        return NULL;
    n->key = *key;
    n->type = type;
    n->handle_len = handle_len;
    memcpy(n->handle, handle, handle_len);
    n->dir_fd = -1;
    pthread_mutex_init(&n->lock, NULL);
    return n;
}

static void in_free(struct in_inode *n)
{
    pthread_mutex_destroy(&n->lock);
    free(n);
}

/* Doubling keeps chains short for the ~100,000 inodes a tree copy makes known; a failed
 * allocation only leaves the chains longer. */
static void in_grow_locked(in_table *t)
{
    size_t nb = t->n_buckets * 2;
    struct in_inode **b = calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < t->n_buckets; i++) {
        struct in_inode *n = t->buckets[i];
        while (n) {
            struct in_inode *next = n->next;
            size_t h = in_hash(&n->key, nb);
            n->next = b[h];
            b[h] = n;
            n = next;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->n_buckets = nb;
}

static void in_insert_locked(in_table *t, struct in_inode *n)
{
    if (t->n_hashed >= t->n_buckets)
        in_grow_locked(t);
    size_t h = in_hash(&n->key, t->n_buckets);
    n->next = t->buckets[h];
    t->buckets[h] = n;
    n->hashed = 1;
    t->n_hashed++;
    t->n_live++;
}

static void in_unhash_locked(in_table *t, struct in_inode *n)
{
    struct in_inode **pp = &t->buckets[in_hash(&n->key, t->n_buckets)];
    while (*pp && *pp != n)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = n->next;
        t->n_hashed--;
    }
    n->next = NULL;
    n->hashed = 0;
}

static struct in_inode *in_find_locked(in_table *t, const struct in_key *key)
{
    struct in_inode *n = t->buckets[in_hash(key, t->n_buckets)];
    while (n && !in_key_eq(&n->key, key))
        n = n->next;
    return n;
}

/* The file handle of name in dirfd (flags: AT_EMPTY_PATH for dirfd itself; 0 for name,
 * a symlink not followed). */
static int in_handle_at(int dirfd, const char *name, int flags, union in_handle_buf *hb,
                        unsigned *len)
{
    int mount_id;
    hb->fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(dirfd, name, &hb->fh, &mount_id, flags) < 0)
        return -errno;
    *len = (unsigned)(sizeof(struct file_handle) + hb->fh.handle_bytes);
    return 0;
}

static int in_handle_of(int fd, union in_handle_buf *hb, unsigned *len)
{
    return in_handle_at(fd, "", AT_EMPTY_PATH, hb, len);
}

int in_table_new(int root_fd, lg_log *log, in_table **out)
{
    struct stat st;
    union in_handle_buf hb;
    unsigned len = 0;
    if (fstat(root_fd, &st) < 0)
        return -errno;
    int err = in_handle_of(root_fd, &hb, &len);
    if (err)
        return err;
    in_table *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->buckets = calloc(IN_MIN_BUCKETS, sizeof(*t->buckets));
    struct in_key key = {st.st_dev, st.st_ino};
    t->root = in_alloc(&key, st.st_mode & S_IFMT, &hb, len);
    if (!t->buckets || !t->root) {
        free(t->buckets);
        free(t->root);
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->n_buckets = IN_MIN_BUCKETS;
    t->root_fd = root_fd;
    t->log = log;
    t->root->nlookup = 1;              /* the kernel never forgets the root for good */
    in_insert_locked(t, t->root);
    *out = t;
    return 0;
}

/* Takes n's cached descriptor out of the cache; returns it for the caller to close. */
static int in_dfd_drop_locked(in_table *t, struct in_inode *n)
{
    int fd = n->dir_fd;
    if (fd >= 0) {
        lru_unlink(&t->dfds, &n->dfd);
        n->dir_fd = -1;
        t->n_dfd--;
    }
    return fd;
}

void in_table_free(in_table *t)
{
    if (!t)
        return;
    while (t->dfds.head)
        close(in_dfd_drop_locked(t, LRU_ENTRY(t->dfds.head, struct in_inode, dfd)));
    for (size_t i = 0; i < t->n_buckets; i++) {
        struct in_inode *n = t->buckets[i];
        while (n) {
            struct in_inode *next = n->next;
            in_free(n);
            n = next;
        }
    }
    /* Unhashed inodes still known to the kernel at unmount are few (a reused backing
     * inode number while the old object was cached) and die with the process. */
    free(t->buckets);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

struct in_inode *in_root(in_table *t)
{
    return t->root;
}

struct in_inode *in_get(in_table *t, fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return t->root;
    return (struct in_inode *)(uintptr_t)ino;
}

fuse_ino_t in_nodeid(in_table *t, const struct in_inode *n)
{
    if (n == t->root)
        return FUSE_ROOT_ID;
    return (fuse_ino_t)(uintptr_t)n;
}

int in_open(in_table *t, struct in_inode *n, int flags)
{
    int fd;
    if (n == t->root)
        fd = openat(t->root_fd, ".", flags | O_CLOEXEC);
    else
        fd = open_by_handle_at(t->root_fd, (struct file_handle *)n->handle, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* The inode of the object with attributes st and handle hb (on the root's device: the
 * callers check), with one more lookup reference. A hit whose handle differs is a backing
 * inode number reused by a new object after the old one was deleted: the stale entry leaves
 * the hash (it dies at its last forget) and the new object gets its own inode, so the kernel
 * never mixes the two. */
static int in_lookup_handle(in_table *t, const struct stat *st, const union in_handle_buf *hb,
                            unsigned len, struct in_inode **out)
{
    struct in_key key = {st->st_dev, st->st_ino};
    pthread_mutex_lock(&t->lock);
    struct in_inode *n = in_find_locked(t, &key);
    if (n && (n->handle_len != len || memcmp(n->handle, hb, len) != 0)) {
        in_unhash_locked(t, n);
        n = NULL;
    }
    if (!n) {
        n = in_alloc(&key, st->st_mode & S_IFMT, hb, len);
        if (!n) {
            pthread_mutex_unlock(&t->lock);
            return -ENOMEM;
        }
        in_insert_locked(t, n);
    }
    n->nlookup++;
    pthread_mutex_unlock(&t->lock);
    *out = n;
    return 0;
}

int in_lookup_fd(in_table *t, int fd, struct stat *st, struct in_inode **out)
{
    if (fstat(fd, st) < 0)
        return -errno;
    return in_lookup_stated(t, fd, st, out);
}

int in_lookup_stated(in_table *t, int fd, const struct stat *st, struct in_inode **out)
{
    union in_handle_buf hb;
    unsigned len = 0;
    if (st->st_dev != t->root->key.dev)
        return -EXDEV;
    int err = in_handle_of(fd, &hb, &len);
    return err ? err : in_lookup_handle(t, st, &hb, len, out);
}

/* By name, without opening it: two system calls instead of four (open, fstat, the handle,
 * close) for every lookup and every entry of a READDIRPLUS. The stat and the handle are of
 * the same object because the kernel holds the directory's lock across the request (shared
 * for lookups and listings, exclusive for whatever changes its names), and the daemon is
 * the backing directory's only writer. */
int in_lookup_at(in_table *t, int dirfd, const char *name, struct stat *st,
                 struct in_inode **out)
{
    if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (st->st_dev != t->root->key.dev)
        return -EXDEV;
    union in_handle_buf hb;
    unsigned len = 0;
    int err = in_handle_at(dirfd, name, 0, &hb, &len);
    return err ? err : in_lookup_handle(t, st, &hb, len, out);
}

/* Called with the table lock held: frees n when nothing refers to it any more. A borrowed
 * descriptor counts: the kernel does not forget a directory a request is using, but the
 * descriptor must not be closed under a borrower if it ever did. */
static void in_maybe_free_locked(in_table *t, struct in_inode *n)
{
    if (n == t->root || n->nlookup > 0 || n->pins > 0 || n->dir_users > 0)
        return;
    if (n->hashed)
        in_unhash_locked(t, n);
    int fd = in_dfd_drop_locked(t, n);
    if (fd >= 0)
        close(fd);
    t->n_live--;
    in_free(n);
}

/* Called with the table lock held: makes room for one more cached descriptor by dropping
 * the least recently used one nobody borrows; returns it (to close), -1 when none was
 * dropped, or -2 when every cached one is borrowed. */
static int in_dfd_room_locked(in_table *t)
{
    if (t->n_dfd < IN_DIR_FDS)
        return -1;
    for (lru_node *at = t->dfds.tail; at; at = at->prev) {
        struct in_inode *v = LRU_ENTRY(at, struct in_inode, dfd);
        if (v->dir_users == 0)
            return in_dfd_drop_locked(t, v);
    }
    return -2;
}

int in_dir_get(in_table *t, struct in_inode *n, in_dirfd *d)
{
    *d = (in_dirfd){t->root_fd, NULL, 0};
    if (n == t->root)
        return 0;
    pthread_mutex_lock(&t->lock);
    if (n->dir_fd < 0) {
        pthread_mutex_unlock(&t->lock);
        int fd = open_by_handle_at(t->root_fd, (struct file_handle *)n->handle,
                                   O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        pthread_mutex_lock(&t->lock);
        int old = n->dir_fd >= 0 ? fd : in_dfd_room_locked(t);   /* another get raced us */
        if (old == -2) {
            pthread_mutex_unlock(&t->lock);
            *d = (in_dirfd){fd, NULL, 1};
            return 0;
        }
        if (n->dir_fd < 0) {
            n->dir_fd = fd;
            t->n_dfd++;
            lru_push(&t->dfds, &n->dfd);
        }
        if (old >= 0)
            close(old);                /* not borrowed: no one else uses it */
    }
    n->dir_users++;
    lru_touch(&t->dfds, &n->dfd);
    *d = (in_dirfd){n->dir_fd, n, 0};
    pthread_mutex_unlock(&t->lock);
    return 0;
}

void in_dir_put(in_table *t, in_dirfd *d)
{
    if (d->owned)
        close(d->fd);
    if (d->n) {
        pthread_mutex_lock(&t->lock);
        d->n->dir_users--;
        in_maybe_free_locked(t, d->n);
        pthread_mutex_unlock(&t->lock);
    }
    d->fd = -1, d->n = NULL, d->owned = 0;
}

uint64_t in_forget(in_table *t, struct in_inode *n, uint64_t count)
{
    pthread_mutex_lock(&t->lock);
    n->nlookup = count >= n->nlookup ? 0 : n->nlookup - count;
    uint64_t left = n->nlookup;
    in_maybe_free_locked(t, n);
    pthread_mutex_unlock(&t->lock);
    return left;
}

uint64_t in_nlookup(in_table *t, struct in_inode *n)
{
    pthread_mutex_lock(&t->lock);
    uint64_t left = n->nlookup;
    pthread_mutex_unlock(&t->lock);
    return left;
}

struct in_inode *in_find_pin(in_table *t, dev_t dev, ino_t ino)
{
    struct in_key key = {dev, ino};
    pthread_mutex_lock(&t->lock);
    struct in_inode *n = in_find_locked(t, &key);
    if (n)
        n->pins++;
    pthread_mutex_unlock(&t->lock);
    return n;
}

void in_pin(in_table *t, struct in_inode *n)
{
    pthread_mutex_lock(&t->lock);
    n->pins++;
    pthread_mutex_unlock(&t->lock);
}

void in_unpin(in_table *t, struct in_inode *n)
{
    pthread_mutex_lock(&t->lock);
    if (n->pins > 0)
        n->pins--;
    in_maybe_free_locked(t, n);
    pthread_mutex_unlock(&t->lock);
}

/* The pinned inodes are gathered under the table lock and visited after it is dropped,
 * since the table lock is a leaf and fn runs under each inode's lock. */
void in_for_each_open(in_table *t, void (*fn)(struct in_inode *n, void *arg), void *arg)
{
    pthread_mutex_lock(&t->lock);
    size_t cap = 0, used = 0;
    for (size_t i = 0; i < t->n_buckets; i++)
        for (struct in_inode *n = t->buckets[i]; n; n = n->next)
            cap += n->pins > 0;
    struct in_inode **list = cap ? calloc(cap, sizeof(*list)) : NULL;
    for (size_t i = 0; list && i < t->n_buckets; i++)
        for (struct in_inode *n = t->buckets[i]; n; n = n->next)
            if (n->pins > 0) {
                n->pins++;
                list[used++] = n;
            }
    pthread_mutex_unlock(&t->lock);
    for (size_t i = 0; i < used; i++) {
        pthread_mutex_lock(&list[i]->lock);
        if (list[i]->file)
            fn(list[i], arg);
        pthread_mutex_unlock(&list[i]->lock);
        in_unpin(t, list[i]);
    }
    free(list);
}

uint64_t in_count(in_table *t)
{
    pthread_mutex_lock(&t->lock);
    uint64_t n = t->n_live;
    pthread_mutex_unlock(&t->lock);
    return n;
}
