/* in: the daemon's inode table.
 *
 * Every object the kernel knows (every nodeid it holds a lookup reference on) is one
 * in_inode, keyed by the backing object's (st_dev, st_ino) so that hard links share one
 * inode, as they do on the backing filesystem. An inode keeps a file handle
 * (name_to_handle_at), never a descriptor: the open-file limit is far below the number of
 * objects a `cp -a` makes known, so a descriptor is obtained on demand with
 * open_by_handle_at and closed after the operation. The long-lived descriptors are the one
 * owned by an open regular file's ff_file (one per inode, shared by every handle of it) and
 * the bounded cache of directory descriptors (in_dir_get).
 *
 * The fuse nodeid of an inode is its address; the root (FUSE_ROOT_ID) is the backing
 * directory itself.
 *
 * Lock order: in_inode.lock, then (inside ff_* calls) the ff_file's own lock. The table
 * lock is a leaf: nothing else is taken while it is held, and it may be taken while an
 * in_inode.lock is held. */
#ifndef FPGALZ4FS_INODE_H
#define FPGALZ4FS_INODE_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "ffile.h"
#include "lru.h"

typedef struct in_table in_table;

struct in_key {
    dev_t dev;                         /* backing st_dev */
    ino_t ino;                         /* backing st_ino */
};

struct in_inode {
    struct in_key key;                 /* identity of the backing object; never changes */
    mode_t type;                       /* S_IFMT bits of the backing object; never changes */
    struct in_inode *next;             /* hash chain (table lock) */
    int hashed;                        /* still findable by key: a backing inode number
                                          reused by a new object unhashes the stale entry
                                          (table lock) */
    uint64_t nlookup;                  /* kernel lookup references (table lock) */
    unsigned pins;                     /* open handles keeping the inode alive (table lock) */

    pthread_mutex_t lock;              /* protects the fields below; held across ff_open,
                                          ff_release and temporary opens, so that one backing
                                          file never has two ff_file states at once */
    unsigned open_count;               /* open handles of a regular file */
    unsigned writers;                  /* those of them opened for writing: only while
                                          there are some can the kernel hold dirty pages */
    unsigned direct_handles;           /* open handles that bypass the page cache
                                          (ops_direct.c) */
    ff_file *file;                     /* shared open state while open_count > 0 or while
                                          retained, else NULL */
    int retained;                      /* OP_KEEP_*: the file outlives its last release
                                          (ops_keep.c): it holds data whose commit failed,
                                          or is kept warm for its next open; the retention
                                          holds one pin */
    lru_node warm;                     /* on the warm list (op_fs.warm_lock) */
    uint64_t warm_bytes;               /* what its state held when it was kept warm */
    int size_valid;                    /* the cached logical size below is filled */
    off_t size_key;                    /* backing st_size the cached size was read at */
    struct timespec size_ctim;         /* backing st_ctim the cached size was read at */
    uint64_t size;                     /* cached logical size of a closed regular file */
    int dir_fd;                        /* a directory's cached O_PATH descriptor, or -1
                                          (table lock; in_dir_get) */
    unsigned dir_users;                /* borrowers of dir_fd right now (table lock) */
    lru_node dfd;                      /* on the cache's list while dir_fd >= 0 (table
                                          lock) */
    unsigned xattr_none;               /* well-known attributes known absent (ops.c) */
    unsigned xattr_gen;                /* bumped by every call that may change that */

    unsigned handle_len;               /* bytes used in handle; never changes */
    unsigned char handle[];            /* struct file_handle from name_to_handle_at; never
                                          changes */
};

/* root_fd stays owned by the caller and open for the table's whole life. */
int in_table_new(int root_fd, lg_log *log, in_table **out);
/* Frees every inode; open files must have been released (in_release_all). */
void in_table_free(in_table *t);

struct in_inode *in_root(in_table *t);
/* nodeid <-> inode. in_get trusts the kernel: a nodeid is only ever one we handed out and
 * that it has not forgotten. */
struct in_inode *in_get(in_table *t, fuse_ino_t ino);
fuse_ino_t in_nodeid(in_table *t, const struct in_inode *n);

/* A descriptor for the inode's backing object (flags as open(2): O_PATH, O_RDONLY, ...);
 * returns the descriptor or -errno. The caller closes it. */
int in_open(in_table *t, struct in_inode *n, int flags);

/* A directory's O_PATH descriptor, borrowed: most requests name a parent directory, and
 * opening it by handle for each of them cost an open_by_handle_at and a close per request.
 * The table keeps at most IN_DIR_FDS of them (least recently used first out), one per
 * directory inode, closed when the inode is freed; the root's is the table's root_fd. A
 * directory removed while cached keeps a descriptor to the dead directory, where every
 * name lookup fails with ENOENT, as the kernel would answer. */
#define IN_DIR_FDS 64u
typedef struct {
    int fd;
    struct in_inode *n;                /* the inode whose cached descriptor this is, or NULL */
    int owned;                         /* not cached (the cache was all in use): closed by put */
} in_dirfd;
/* 0 or -errno. Every successful get is followed by one in_dir_put. */
int in_dir_get(in_table *t, struct in_inode *n, in_dirfd *d);
void in_dir_put(in_table *t, in_dirfd *d);

/* Finds or adds the inode of the object open at fd (any kind of descriptor, O_PATH
 * included), fills *st with fstat, and adds one lookup reference. Returns 0 or -errno. */
int in_lookup_fd(in_table *t, int fd, struct stat *st, struct in_inode **out);
/* The same for name in the directory dirfd (symlinks are not followed). */
int in_lookup_at(in_table *t, int dirfd, const char *name, struct stat *st,
                 struct in_inode **out);
/* in_lookup_fd for a descriptor whose attributes the caller has just read into st. */
int in_lookup_stated(in_table *t, int fd, const struct stat *st, struct in_inode **out);

/* Drops n lookup references; frees the inode when none are left and no handle pins it.
 * Returns the references left (n may be gone when that is 0 and nothing pinned it). */
uint64_t in_forget(in_table *t, struct in_inode *n, uint64_t count);

/* The kernel's lookup references now (they may change as soon as the call returns). */
uint64_t in_nlookup(in_table *t, struct in_inode *n);

/* The inode of the backing object (dev, ino), pinned (in_unpin), if the table has it. */
struct in_inode *in_find_pin(in_table *t, dev_t dev, ino_t ino);

/* Open handles pin an inode: it outlives a forget until the last release. */
void in_pin(in_table *t, struct in_inode *n);
void in_unpin(in_table *t, struct in_inode *n);

/* Calls fn on every inode that has an open file (with the inode lock held), for unmount. */
void in_for_each_open(in_table *t, void (*fn)(struct in_inode *n, void *arg), void *arg);

/* Number of inodes in the table, for the log. */
uint64_t in_count(in_table *t);

#endif
