/* op: the FUSE low-level handlers of the daemon.
 *
 * Regular file data goes through ff_* (ffile.h); everything else is a passthrough to the
 * backing directory with *at() calls relative to descriptors obtained on demand from the
 * inode table. Each handler ends in exactly one fuse_reply_*; helpers return 0 or -errno.
 *
 * Lock order: in_inode.lock, then the ff_file's own lock (inside ff_* calls), then the
 * inode table's lock (a leaf). */
#ifndef FPGALZ4FS_OPS_H
#define FPGALZ4FS_OPS_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "dirs.h"
#include "eng.h"
#include "ffile.h"
#include "inode.h"
#include "log.h"
#include "sizes.h"

/* Where the session's I/O hooks are (ops_io.c). */
typedef enum {
    OP_IO_OFF,                         /* no hooks: libfuse reads and writes itself */
    OP_IO_WAIT_INIT,                   /* hooks on, INIT not seen yet */
    OP_IO_INIT_OFFERED,                /* the kernel offered KILLPRIV_V2; INIT not answered */
    OP_IO_DONE                         /* INIT answered: every request passes untouched */
} op_io_state;

/* The largest WRITE the kernel sends (INIT), and so the most a worker lands (ops_io.c) in
 * OP_LAND_MAX block buffers of the smallest block size (64 KiB). */
#define OP_MAX_WRITE (1u << 20)
#define OP_LAND_MAX 16u

/* What the handlers share; the daemon owns every member and passes this as userdata. */
struct op_fs {
    const char *backing;               /* absolute path of the backing directory, for logs */
    int root_fd;                       /* the backing directory, O_RDONLY|O_DIRECTORY */
    in_table *tab;                     /* inodes the kernel knows */
    ff_env *env;                       /* shared state of the regular files' format */
    eng_ctx *eng;                      /* the compression engine, for its counters */
    lg_log *log;                       /* where every non-trivial error leaves a line */
    int read_only;                     /* mounted -o ro: backing files are opened read-only */
    int acl;                           /* POSIX ACLs are kept and enforced (not -o noacl) */
    uid_t uid;                         /* the daemon's own ids: objects made for another */
    gid_t gid;                         /* caller are handed over to it with fchownat */
    double timeout;                    /* entry and attribute validity in the kernel, s */
    int charge;                        /* blocks a request makes are its caller's (cred.h) */
    struct fuse_session *se;           /* for asking the kernel to write back dirty pages */
    atomic_uint retained;              /* files kept after a failed last commit (in_inode) */
    pthread_mutex_t warm_lock;         /* the warm list (ops_keep.c): files kept for their */
    lru_list warm_list;                /* next open, most recently closed first */
    unsigned warm;                     /* how many */
    uint64_t warm_bytes;               /* the memory their states hold (ff_state_bytes) */
    uint64_t warm_budget;              /* the most they may hold: mem_mb / 16 */
    dr_bound dirs;                     /* directory streams held by open listings */
    int dir_handles;                   /* listings have handles (OPENDIR): -o dir_handles,
                                          or a kernel that cannot skip OPENDIR */
    sz_cache *sizes;                   /* logical sizes of closed files (NULL: none) */
    _Atomic uint64_t size_reads;       /* footers read for a size (counter size_reads) */
    blksize_t blksize;                 /* st_blksize of regular files: the store's block size */
    int direct_writes;                 /* new content is written past the page cache
                                          (ops_direct.c; -o nodirect_writes turns it off) */
    _Atomic uint64_t direct_opens;     /* handles opened so (counter direct_opens) */
    atomic_int io_state;               /* op_io_state (ops_io.c): every worker's hooks read
                                          it, the one answering INIT writes it */
    _Atomic uint64_t init_unique;      /* the INIT request being answered */
    atomic_int killpriv;               /* the kernel leaves set-id bits to the daemon
                                          (FUSE_HANDLE_KILLPRIV_V2; counter killpriv) */
    unsigned land_n;                   /* WRITE payloads land in this many block buffers per
                                          worker (ops_io.c); 0: they do not */
    pthread_key_t land_key;            /* each worker's landing (op_landing), once land_n */
};

/* Takes over the session's reads and writes of /dev/fuse (after fuse_session_mount, before
 * the loop) to claim FUSE_HANDLE_KILLPRIV_V2 where the kernel offers it (ops_io.c). 0, or
 * libfuse's error (the session then runs as before). */
int op_io_install(struct op_fs *fs);
/* The landing that holds the payload of the WRITE whose data libfuse passes as buf (it
 * points where libfuse would have put it), or NULL: the payload is at buf. */
ff_landing *op_io_landed(struct op_fs *fs, const char *buf);
/* Frees what op_io_install set up, after the session's loop ended. */
void op_io_free(struct op_fs *fs);

/* Lets open files close idle backing descriptors (ff_options.fd_max) and reopen them by
 * handle through fs's inode table; once fs->env and fs->tab are set. */
void op_bind_reopen(struct op_fs *fs);

/* Fills ops with every handler of the daemon. */
void op_fill(struct fuse_lowlevel_ops *ops);

/* Writes the user.fpgalz4fs.stats text (key=value lines, numbers in 20 digits) into buf;
 * returns its length (the text is cut at cap). */
size_t op_stats_text(struct op_fs *fs, char *buf, size_t cap);

#endif
