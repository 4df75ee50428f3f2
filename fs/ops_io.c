/* The session's own reads and writes of /dev/fuse (fuse_session_custom_io): they let the
 * daemon take FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot ask for.
 *
 * Why: a mount with extended attributes pays one GETXATTR(security.capability) round trip
 * per write(2) through the page cache, since the kernel asks before every write whether
 * there are privileges to drop, unless the filesystem says it drops them itself. With
 * KILLPRIV_V2 the kernel marks an inode that has no set-id bit once it has checked it, and
 * asks again only after its attributes change. The daemon then keeps the promise
 * (ops_file.c, ops.c): a write, truncation or fallocate by a caller other than root clears
 * the set-user-ID bit, and the set-group-ID bit of a group-executable file, at once; a chown
 * of the backing file clears them as Linux does for every filesystem; a capability
 * (security.capability) goes when the backing file is next written, truncated or chowned,
 * which the commit of any change does (the backing filesystem drops it then).
 *
 * How: INIT is the first request of the session. The read hook notes its unique id when the
 * kernel offers the flag; the write hook adds the flag to the INIT reply that libfuse built,
 * and passes every other reply through untouched.
 *
 * The read hook also lands WRITE payloads in block buffers. libfuse reads a request whole
 * into its own buffer, and the write handler copied the payload from there into the dirty
 * block: two copies of every byte written. Here each worker reads with two parts: libfuse's
 * buffer up to the end of a WRITE's header (fuse_in_header and fuse_write_in), then block
 * buffers of the store's block size (op_landing), as many as max_write needs. The kernel
 * copies a WRITE's payload into the block buffers, and ff_write_landed makes a buffer that
 * holds a whole block at a block boundary that block's own: its bytes are never copied in the
 * daemon (counter writes_landed). Any other request's bytes past that header are copied back
 * behind it, so libfuse sees them where it always did; a WRITE's payload is then not where
 * libfuse points (op_io_landed tells the handler). */
#include "ops_internal.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define OP_LAND_HDR (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))

/* One worker's block buffers for the payloads it reads. */
typedef struct {
    struct op_fs *fs;
    uint8_t *buf[OP_LAND_MAX];         /* fs->land_n of them; NULL: taken by a block */
    uint8_t host[OP_LAND_MAX];
    ff_landing view;                   /* what ff_write_landed sees of them */
    const char *param;                 /* where libfuse takes the WRITE payload last read to
                                          be; NULL after any other request */
} op_landing;

static void op_landing_free(void *arg)
{
    op_landing *l = arg;
    for (unsigned k = 0; k < l->fs->land_n; k++)
        if (l->buf[k])
            ff_land_put(l->fs->env, l->buf[k], l->host[k]);
    free(l);
}

/* This worker's landing, every buffer in place (new ones for those blocks took), or NULL:
 * the request is read as libfuse reads it. Either way no payload read before passes for the
 * next request's: libfuse reads every request into the same buffer. */
static op_landing *op_landing_ready(struct op_fs *fs, size_t len)
{
    op_landing *l = fs->land_n ? pthread_getspecific(fs->land_key) : NULL;
    if (l)
        l->param = NULL;
    if (!fs->land_n || len < OP_LAND_HDR + (size_t)fs->land_n * (size_t)fs->blksize)
        return NULL;
    if (!l && (l = calloc(1, sizeof(*l)))) {
        l->fs = fs;
        l->view = (ff_landing){l->buf, l->host, (uint32_t)fs->blksize, fs->land_n};
        if (pthread_setspecific(fs->land_key, l) != 0) {
            free(l);
            return NULL;
        }
    }
    for (unsigned k = 0; l && k < fs->land_n; k++)
        if (!l->buf[k] && !(l->buf[k] = ff_land_get(fs->env, &l->host[k])))
            return NULL;
    return l;
}

/* Reads one request, a WRITE's payload into the landing (see the top of this file). */
static ssize_t op_land_read(struct op_fs *fs, op_landing *l, int fd, char *buf)
{
    struct iovec iov[1 + OP_LAND_MAX];
    iov[0] = (struct iovec){buf, OP_LAND_HDR};
    for (unsigned k = 0; k < fs->land_n; k++)
        iov[1 + k] = (struct iovec){l->buf[k], (size_t)fs->blksize};
    ssize_t n = readv(fd, iov, (int)fs->land_n + 1);
    if (n <= (ssize_t)OP_LAND_HDR)
        return n;
    if (((const struct fuse_in_header *)(const void *)buf)->opcode == FUSE_WRITE) {
        l->param = buf + OP_LAND_HDR;
        return n;
    }
    size_t rest = (size_t)n - OP_LAND_HDR;
    for (unsigned k = 0; rest > 0; k++) {
        size_t c = rest < (size_t)fs->blksize ? rest : (size_t)fs->blksize;
        memcpy(buf + OP_LAND_HDR + (size_t)k * (size_t)fs->blksize, l->buf[k], c);
        rest -= c;
    }
    return n;
}

ff_landing *op_io_landed(struct op_fs *fs, const char *buf)
{
    op_landing *l = fs->land_n ? pthread_getspecific(fs->land_key) : NULL;
    return l && buf && l->param == buf ? &l->view : NULL;
}

static ssize_t op_io_read(int fd, void *buf, size_t len, void *userdata)
{
    struct op_fs *fs = userdata;
    op_landing *l = op_landing_ready(fs, len);
    ssize_t n = l ? op_land_read(fs, l, fd, buf) : read(fd, buf, len);
    if (atomic_load(&fs->io_state) != OP_IO_WAIT_INIT ||
        n < (ssize_t)(sizeof(struct fuse_in_header) + offsetof(struct fuse_init_in, flags) + 4))
        return n;
    const struct fuse_in_header *h = buf;
    struct fuse_init_in in;
    memcpy(&in, h + 1, offsetof(struct fuse_init_in, flags) + 4);
    if (h->opcode == FUSE_INIT && (in.flags & FUSE_HANDLE_KILLPRIV_V2)) {
        atomic_store(&fs->init_unique, h->unique);
        atomic_store(&fs->io_state, OP_IO_INIT_OFFERED);
    } else if (h->opcode == FUSE_INIT) {
        atomic_store(&fs->io_state, OP_IO_DONE); /* an older kernel checks and clears itself */
    }
    return n;
}

/* The INIT reply as libfuse built it, with the flag added. */
static ssize_t op_io_init_reply(struct op_fs *fs, int fd, const struct iovec *iov)
{
    struct fuse_init_out out;
    size_t len = iov[1].iov_len < sizeof(out) ? iov[1].iov_len : sizeof(out);
    memset(&out, 0, sizeof(out));
    memcpy(&out, iov[1].iov_base, len);
    out.flags |= FUSE_HANDLE_KILLPRIV_V2;
    struct iovec v[2] = {iov[0], {&out, len}};
    ssize_t n = writev(fd, v, 2);
    if (n >= 0)
        atomic_store(&fs->killpriv, 1);
    atomic_store(&fs->io_state, OP_IO_DONE);
    return n;
}

static ssize_t op_io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    struct op_fs *fs = userdata;
    if (atomic_load(&fs->io_state) == OP_IO_INIT_OFFERED && count == 2 &&
        iov[0].iov_len == sizeof(struct fuse_out_header) &&
        iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4) {
        const struct fuse_out_header *h = iov[0].iov_base;
        if (h->unique == atomic_load(&fs->init_unique) && h->error == 0)
            return op_io_init_reply(fs, fd, iov);
    }
    return writev(fd, iov, count);
}

int op_io_install(struct op_fs *fs)
{
    static const struct fuse_custom_io io = {.read = op_io_read, .writev = op_io_writev};
    unsigned n = fs->blksize > 0 && fs->blksize <= OP_MAX_WRITE
                     ? (unsigned)(OP_MAX_WRITE / fs->blksize) : 0;
    /* a block larger than max_write is never written whole by one request: no landing */
    if (n > 0 && n <= OP_LAND_MAX && pthread_key_create(&fs->land_key, op_landing_free) == 0)
        fs->land_n = n;
    atomic_store(&fs->io_state, OP_IO_WAIT_INIT);
    int rc = fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se));
    if (rc != 0)
        atomic_store(&fs->io_state, OP_IO_DONE);
    if (rc != 0)
        op_io_free(fs);
    return rc;
}

void op_io_free(struct op_fs *fs)
{
    if (!fs->land_n)
        return;
    op_landing *l = pthread_getspecific(fs->land_key);
    if (l)
        op_landing_free(l);
    pthread_key_delete(fs->land_key);
    fs->land_n = 0;
}
