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
 * and passes every other reply through untouched. */
#include "ops_internal.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static ssize_t op_io_read(int fd, void *buf, size_t len, void *userdata)
{
    struct op_fs *fs = userdata;
    ssize_t n = read(fd, buf, len);
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
    atomic_store(&fs->io_state, OP_IO_WAIT_INIT);
    int rc = fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se));
    if (rc != 0)
        atomic_store(&fs->io_state, OP_IO_DONE);
    return rc;
}
