/* Extended attributes of the mount (setxattr, getxattr, listxattr, removexattr), the
 * counters under user.fpgalz4fs.stats, and the memory of attributes a file does not have.
 * Calls go through the /proc link of an O_PATH descriptor: it reaches every kind of object,
 * FIFOs and device nodes included, without opening it. */
#include "ops_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cred.h"

#define OP_XATTR_RESERVED "user.fpgalz4fs."
#define OP_XATTR_STATS "user.fpgalz4fs.stats"
#define OP_XATTR_MAX (64u * 1024u)     /* the largest value or list the VFS passes */

/* The SELinux label is not stored: a FUSE mount is labelled as a whole by the policy
 * (genfscon), never from its files' attributes. Nor are the ACLs of a noacl mount. Saying
 * so (EOPNOTSUPP) is what lets ls -l and cp stop asking every file of the mount for them:
 * they remember, per device, an attribute that is not supported. */
#define OP_XATTR_LABEL "security.selinux"
#define OP_XATTR_ACL "system.posix_acl_"

static int op_xattr_unsupported(const struct op_fs *fs, const char *name)
{
    if (!name)
        return 0;
    if (!fs->acl && strncmp(name, OP_XATTR_ACL, strlen(OP_XATTR_ACL)) == 0)
        return 1;
    return strcmp(name, OP_XATTR_LABEL) == 0;
}

/* Attributes nearly no file has and that are asked of every file: security.capability by the
 * kernel before every write(2) (to drop it, as a write must), the ACLs by ls -l and cp and
 * by the kernel's permission checks. Once the backing file said it has none of one, the
 * answer comes from memory until a call through the mount may change that (setxattr,
 * removexattr, chown, chmod). One set directly in the backing directory shows when the kernel forgets the
 * inode; a capability is dropped by the backing filesystem itself at the daemon's next
 * write of the file anyway. */
static const char *const op_xattr_rare[] = {"security.capability", "system.posix_acl_access",
                                            "system.posix_acl_default"};

/* The bit of name in in_inode.xattr_none, or 0 for a name not remembered. */
unsigned op_xattr_bit(const char *name)
{
    for (unsigned i = 0; name && i < sizeof(op_xattr_rare) / sizeof(op_xattr_rare[0]); i++)
        if (strcmp(name, op_xattr_rare[i]) == 0)
            return 1u << i;
    return 0;
}

/* 1 when the file is known to have no attribute of that bit; *gen says which state a
 * backing answer belongs to. */
static int op_xattr_absent(struct in_inode *n, unsigned bit, unsigned *gen)
{
    pthread_mutex_lock(&n->lock);
    int absent = (n->xattr_none & bit) != 0;
    *gen = n->xattr_gen;
    pthread_mutex_unlock(&n->lock);
    return absent;
}

/* The backing file said it has none: remembered unless a change came in between. */
static void op_xattr_none(struct in_inode *n, unsigned bit, unsigned gen)
{
    pthread_mutex_lock(&n->lock);
    if (n->xattr_gen == gen)
        n->xattr_none |= bit;
    pthread_mutex_unlock(&n->lock);
}

void op_xattr_changed(struct in_inode *n)
{
    pthread_mutex_lock(&n->lock);
    n->xattr_none = 0;
    n->xattr_gen++;
    pthread_mutex_unlock(&n->lock);
}

/* Attribute names are no path: the line reads "getxattr NAME on PATH". The mount's own
 * answer that it keeps no such attribute (op_xattr_unsupported) is no fault: ls -Z and cp
 * ask it of every file. */
static int op_log_xattr(struct op_fs *fs, const char *what, struct in_inode *n,
                        const char *name, int err)
{
    if (err == -EOPNOTSUPP && op_xattr_unsupported(fs, name))
        return err;
    char verb[300];
    snprintf(verb, sizeof(verb), "%s %s on", what, name ? name : "");
    return op_log(fs, name ? verb : what, n, NULL, err);
}

/* Extended attributes, through the /proc link of an O_PATH descriptor: it reaches every
 * kind of object, FIFOs and device nodes included, without opening it. */

size_t op_stats_text(struct op_fs *fs, char *buf, size_t cap)
{
    eng_stats es;
    ff_stats fst;
    memset(&es, 0, sizeof(es));
    memset(&fst, 0, sizeof(fst));
    if (fs->eng)
        eng_get_stats(fs->eng, &es);
    if (fs->env)
        ff_env_stats(fs->env, &fst);
    const struct {
        const char *key;
        uint64_t value;
    } rows[] = {
        {"bricks_card", es.bricks_card},       {"bricks_sw", es.bricks_sw},
        {"blocks_card", es.blocks_card},       {"blocks_sw", es.blocks_sw},
        {"fallback_busy", es.fallback_busy},   {"fallback_error", es.fallback_error},
        {"fallback_small", es.fallback_small}, {"card_idle_us", es.card_idle_us},
        {"sets_written_off", es.sets_written_off}, {"sets_recovered", es.sets_recovered},
        {"verify_failed", es.verify_failed}, {"blocks_direct", es.blocks_direct},
        {"blocks_checked_on_card", es.blocks_checked_on_card},
        {"host_parked", es.host_parked},
        {"bytes_in", es.bytes_in},   {"bytes_out", es.bytes_out},
        {"commits", fst.commits},    {"blocks_written", fst.blocks_written},
        {"blocks_copied", fst.blocks_copied}, {"blocks_decoded", fst.blocks_decoded},
        {"cache_hits", fst.cache_hits}, {"repairs", fst.repairs},
        {"corrupt_blocks", fst.corrupt_blocks}, {"fds_open", fst.fds_open},
        {"fd_closes", fst.fd_closes}, {"fd_reopens", fst.fd_reopens},
        {"tail_blocks", fst.tail_blocks}, {"tail_bytes_kept", fst.tail_bytes_kept},
        {"readahead_blocks", fst.readahead_blocks},
        {"pair_commits", fst.pair_commits}, {"blocks_ahead", fst.blocks_ahead},
        {"writes_landed", fst.writes_landed},
        {"page_records", fst.page_records}, {"record_commits", fst.record_commits},
        {"records_folded", fst.records_folded},
        {"records_folded_early", fst.records_folded_early},
        {"chain_links", fst.chain_links}, {"chain_primed", fst.chain_primed},
        {"tail_taken", fst.tail_taken},
        {"dir_streams", atomic_load(&fs->dirs.held)},
        {"dir_reopens", atomic_load(&fs->dirs.reopens)},
        {"direct_opens", atomic_load(&fs->direct_opens)},
        {"size_reads", atomic_load(&fs->size_reads)},
        {"files_kept", op_warm_count(fs)},
        {"killpriv", (uint64_t)atomic_load(&fs->killpriv)},
    };
    int len = snprintf(buf, cap, "backend=%s\n", fs->eng ? eng_backend_name(fs->eng) : "none");
    size_t pos = len < 0 ? 0 : (size_t)len;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]) && pos < cap; i++) {
        len = snprintf(buf + pos, cap - pos, "%s=%020llu\n", rows[i].key,
                       (unsigned long long)rows[i].value);
        pos += len < 0 ? 0 : (size_t)len;
    }
    return pos < cap ? pos : cap - 1;
}

static int op_is_reserved(const char *name)
{
    return strncmp(name, OP_XATTR_RESERVED, strlen(OP_XATTR_RESERVED)) == 0;
}

/* Opens n as O_PATH and writes its /proc link into proc; returns the descriptor. */
static int op_proc_open(struct op_fs *fs, struct in_inode *n, char proc[40])
{
    int fd = op_meta_fd(fs, n);
    if (fd >= 0)
        snprintf(proc, 40, "/proc/self/fd/%d", fd);
    return fd;
}

/* Sets name to value, or removes it. */
static int op_xattr_change(struct op_fs *fs, struct in_inode *n, const char *name, int remove,
                           const char *value, size_t size, int flags)
{
    char proc[40];
    if (op_is_reserved(name))
        return -EPERM;
    if (op_xattr_unsupported(fs, name))
        return -EOPNOTSUPP;
    int fd = op_proc_open(fs, n, proc);
    if (fd < 0)
        return fd;
    op_xattr_changed(n);               /* a getxattr meanwhile forgets what it read */
    int err = op_err(remove ? removexattr(proc, name) : setxattr(proc, name, value, size, flags));
    close(fd);
    return err;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    uid_t was = op_charge_caller(fs, req);
    int err = op_xattr_change(fs, n, name, 0, value, size, flags);
    cr_restore(was);
    fuse_reply_err(req, -op_log_xattr(fs, "setxattr", n, name, err));
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    int err = op_xattr_change(fs, n, name, 1, NULL, 0, 0);
    fuse_reply_err(req, -op_log_xattr(fs, "removexattr", n, name, err));
}

/* The backing file's attribute names less those not supported (a backing filesystem on a
 * host that runs SELinux gives every file a label); size 0 asks for an upper bound of the
 * length. Returns the length or -errno. */
static ssize_t op_list_supported(const struct op_fs *fs, const char *proc, char *buf,
                                 size_t size)
{
    ssize_t len = listxattr(proc, buf, size);
    if (len < 0)
        return -errno;
    if (size == 0)
        return len;
    size_t out = 0;
    for (size_t at = 0; at < (size_t)len;) {
        size_t one = strnlen(buf + at, (size_t)len - at) + 1;
        if (!op_xattr_unsupported(fs, buf + at)) {
            memmove(buf + out, buf + at, one);
            out += one;
        }
        at += one;
    }
    return (ssize_t)out;
}

/* Reads an attribute value (or, with list set, the name list) into buf; size 0 asks for
 * the length only. Returns the length or -errno. */
static ssize_t op_getxattr_inode(struct op_fs *fs, struct in_inode *n, const char *name,
                                 char *buf, size_t size)
{
    char proc[40];
    if (name && strcmp(name, OP_XATTR_STATS) == 0) {
        char text[OP_STATS_MAX];
        size_t len = op_stats_text(fs, text, sizeof(text));
        if (size && len > size)
            return -ERANGE;
        if (size)
            memcpy(buf, text, len);
        return (ssize_t)len;
    }
    if (op_xattr_unsupported(fs, name))
        return -EOPNOTSUPP;
    unsigned gen = 0, bit = op_xattr_bit(name);
    if (bit && op_xattr_absent(n, bit, &gen))
        return -ENODATA;
    int fd = op_proc_open(fs, n, proc);
    if (fd < 0)
        return fd;
    ssize_t len = name ? getxattr(proc, name, buf, size) : op_list_supported(fs, proc, buf, size);
    if (name && len < 0)
        len = -errno;
    close(fd);
    if (len == -ENODATA && bit)
        op_xattr_none(n, bit, gen);
    return len;
}

int op_xattr_has(struct op_fs *fs, struct in_inode *n, const char *name)
{
    return op_getxattr_inode(fs, n, name, NULL, 0) >= 0;
}

static void op_reply_xattr(fuse_req_t req, ssize_t len, const char *buf, size_t size)
{
    if (len < 0)
        fuse_reply_err(req, (int)-len);
    else if (size == 0)
        fuse_reply_xattr(req, (size_t)len);
    else
        fuse_reply_buf(req, buf, (size_t)len);
}

/* getxattr (name) and listxattr (name NULL) share one reply path. */
static void op_xattr_read(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size,
                          const char *what)
{
    struct op_fs *fs = op_fs(req);
    struct in_inode *n = in_get(fs->tab, ino);
    size_t cap = size < OP_XATTR_MAX ? size : OP_XATTR_MAX;
    char *buf = cap ? malloc(cap) : NULL;
    ssize_t len = (cap && !buf) ? -ENOMEM : op_getxattr_inode(fs, n, name, buf, cap);
    if (len < 0)
        op_log_xattr(fs, what, n, name, (int)len);
    op_reply_xattr(req, len, buf, cap);
    free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    op_xattr_read(req, ino, name, size, "getxattr");
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    op_xattr_read(req, ino, NULL, size, "listxattr");
}

void op_fill_xattr(struct fuse_lowlevel_ops *ops)
{
    ops->setxattr = op_setxattr;
    ops->getxattr = op_getxattr;
    ops->listxattr = op_listxattr;
    ops->removexattr = op_removexattr;
}
