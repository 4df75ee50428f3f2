/* The daemon's store: the backing directory opened, its superblock read and locked, file
 * handles checked, before the fork; the clean mark (docs/FORMAT.md 1.4) and the sizes file
 * (1.6) at mount and at unmount. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dm.h"
#include "mounts.h"

#define DM_LOCK_WAIT_MS 10000          /* for the daemon of the last unmount to let go */
#define DM_LOCK_STEP_MS 20

static int dm_open_store(struct fs_daemon *dm)
{
    dm->backing = realpath(dm->opt.backing, NULL);
    if (!dm->backing)
        return dm_bad("%s: %s", dm->opt.backing, strerror(errno));
    dm->mountpoint = realpath(dm->opt.mountpoint, NULL);
    if (!dm->mountpoint)
        return dm_bad("%s: %s", dm->opt.mountpoint, strerror(errno));
    struct stat st;
    if (stat(dm->mountpoint, &st) == 0 && !S_ISDIR(st.st_mode))
        return dm_bad("%s: the mountpoint is not a directory", dm->mountpoint);
    dm->fs.root_fd = open(dm->backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dm->fs.root_fd < 0)
        return dm_bad("%s: %s", dm->backing, strerror(errno));
    return 0;
}

static int dm_read_super(struct fs_daemon *dm)
{
    sb_error e = sb_read(dm->fs.root_fd, &dm->sb);
    switch (e) {
    case SB_OK:
        return 0;
    case SB_ERR_MISSING:
        return dm_bad("%s is not an fpgalz4fs store (no %s); format it with mkfpgalz4fs",
                      dm->backing, SB_FILE_NAME);
    case SB_ERR_NEWER:
        return dm_bad("%s: format version %u is newer than this fpgalz4fs supports (%u)",
                      dm->backing, dm->sb.format_version, SB_FORMAT_VERSION);
    case SB_ERR_IO:
        return dm_bad("%s/%s: %s", dm->backing, SB_FILE_NAME, strerror(errno));
    case SB_ERR_NOT_REGULAR:
        return dm_bad("%s/%s: %s; refusing to follow or use it (remove it, then run "
                      "mkfpgalz4fs --force with the original block size)",
                      dm->backing, SB_FILE_NAME, sb_error_name(e));
    default:
        return dm_bad("%s/%s: the superblock is damaged (%s); fsck.fpgalz4fs cannot guess it, "
                      "run mkfpgalz4fs --force with the original block size",
                      dm->backing, SB_FILE_NAME, sb_error_name(e));
    }
}

/* An unmount returns before its daemon has synced and let go of the store: a mount right
 * after it (umount; mount) waits for that daemon, up to DM_LOCK_WAIT_MS, while no mount of
 * the store is up. A store that is mounted is refused at once. */
static sb_error dm_lock_wait(struct fs_daemon *dm)
{
    sb_error e = sb_lock(dm->fs.root_fd, &dm->lock_fd);
    const struct timespec step = {0, DM_LOCK_STEP_MS * 1000000L};
    for (int ms = 0; e == SB_ERR_LOCKED && ms < DM_LOCK_WAIT_MS; ms += DM_LOCK_STEP_MS) {
        if (mt_source_mounted(dm->backing) != 0)
            break;
        nanosleep(&step, NULL);
        e = sb_lock(dm->fs.root_fd, &dm->lock_fd);
    }
    return e;
}

static int dm_lock_store(struct fs_daemon *dm)
{
    sb_error e = dm_lock_wait(dm);
    if (e == SB_ERR_LOCKED)
        return dm_bad("%s is already mounted by another fpgalz4fs daemon (or checked by fsck)",
                      dm->backing);
    if (e != SB_OK)
        return dm_bad("%s: cannot lock the store: %s", dm->backing,
                      e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
    return 0;
}

/* Inodes are reopened by file handle (the daemon never keeps a descriptor per inode), which
 * needs a filesystem that exports handles and CAP_DAC_READ_SEARCH: check both up front. */
static int dm_check_handles(struct fs_daemon *dm)
{
    union {
        struct file_handle fh;
        unsigned char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } hb;
    int mount_id;
    hb.fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(dm->fs.root_fd, "", &hb.fh, &mount_id, AT_EMPTY_PATH) < 0)
        return dm_bad("%s: the backing filesystem does not support file handles (%s)",
                      dm->backing, strerror(errno));
    int fd = open_by_handle_at(dm->fs.root_fd, &hb.fh, O_PATH | O_CLOEXEC);
    if (fd < 0 && errno == EPERM)
        return dm_bad("reopening files by handle needs CAP_DAC_READ_SEARCH: run fpgalz4fs as "
                      "root");
    if (fd < 0)
        return dm_bad("%s: cannot reopen by file handle: %s", dm->backing, strerror(errno));
    close(fd);
    return 0;
}

/* Everything up to the fork happens in the foreground, so that a bad store or option is
 * reported on the terminal directly. */
int dm_prepare(struct fs_daemon *dm)
{
    if (dm_open_store(dm) || dm_read_super(dm) || dm_lock_store(dm) || dm_check_handles(dm))
        return -1;
    return 0;
}

static uint64_t dm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return sb_ns(ts);
}

/* The clean mark (docs/FORMAT.md 1.4): files changed after the time up to which it says every
 * change is whole, and before this mount, may have been caught by a power loss; their blocks
 * written after their last sync are checked at open. Before serving, the mark says dirty, so
 * that a mount that ends without unmounting is seen as such; only a mount that found the
 * store clean says clean again at its unmount (one that found it dirty cannot vouch for the
 * files it never opened). */
int dm_mark_dirty(struct fs_daemon *dm, ff_options *fo)
{
    int clean = 0;
    sb_error e = sb_mark_read(dm->fs.root_fd, &dm->whole_before, &clean);
    uint64_t now = dm_now_ns();
    if (e != SB_OK || dm->whole_before > now)   /* not a file, or the clock went back */
        dm->whole_before = 0, clean = 0;
    /* clean: no mount changed anything since; whatever else did (someone writing into the
     * backing files) is no power loss, and damage it did reads as EIO, never cut */
    fo->clean_ns = clean ? UINT64_MAX : dm->whole_before;
    fo->start_ns = clean ? 0 : now;
    if (dm->opt.read_only)
        return 0;
    e = e == SB_OK ? sb_mark_write(dm->fs.root_fd, dm->whole_before, 0) : e;
    if (e != SB_OK && unlinkat(dm->fs.root_fd, SB_CLEAN_NAME, 0) != 0 && errno != ENOENT)
        return dm_fail(dm, "%s/%s: cannot mark the store in use: %s", dm->backing,
                       SB_CLEAN_NAME, e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
    dm->started_clean = e == SB_OK && clean;
    return 0;
}

/* The sizes an unmount that left the store clean kept (docs/FORMAT.md 1.6): the lookups of
 * files unchanged since read no footer. None (a new store, a mount that ended otherwise) is
 * the normal case; a damaged file is ignored whole and costs footer reads, nothing else. */
void dm_sizes_load(struct fs_daemon *dm)
{
    struct stat st;
    uint64_t n = 0;
    if (!dm->fs.sizes || fstat(dm->fs.root_fd, &st) != 0)
        return;
    sz_error e = sz_load(dm->fs.sizes, dm->fs.root_fd, st.st_dev, &n);
    if (e == SZ_OK)
        lg_printf(dm->fs.log, LG_INFO, "%llu logical sizes read from %s",
                  (unsigned long long)n, SZ_FILE_NAME);
    else if (e != SZ_ERR_MISSING)
        lg_printf(dm->fs.log, LG_WARN, "%s/%s: %s; it is not used (sizes come from the "
                  "files' footers)", dm->backing, SZ_FILE_NAME,
                  e == SZ_ERR_IO ? strerror(errno) : sz_error_name(e));
}

/* Only after the syncfs of an unmount that leaves the store clean: every state the file
 * names is then on the disk, whole. */
static void dm_sizes_save(struct fs_daemon *dm)
{
    struct stat st;
    uint64_t n = 0;
    if (!dm->fs.sizes || fstat(dm->fs.root_fd, &st) != 0)
        return;
    sz_error e = sz_save(dm->fs.sizes, dm->fs.root_fd, st.st_dev, &n);
    if (e == SZ_OK)
        lg_printf(dm->fs.log, LG_INFO, "unmount: %llu logical sizes kept in %s",
                  (unsigned long long)n, SZ_FILE_NAME);
    else
        lg_printf(dm->fs.log, LG_WARN, "unmount: %s: %s; the next mount reads sizes from "
                  "the files", SZ_FILE_NAME, e == SZ_ERR_IO ? strerror(errno)
                                                           : sz_error_name(e));
}

/* After the last write: everything is synced, then the mark may say clean. */
void dm_mark_clean(struct fs_daemon *dm)
{
    if (!dm->started_clean)
        return;
    if (syncfs(dm->fs.root_fd) != 0) {
        lg_printf(dm->fs.log, LG_WARN, "unmount: syncfs: %s; the store stays marked in use",
                  strerror(errno));
        return;
    }
    dm_sizes_save(dm);                 /* the mark's write syncs the directory after it */
    sb_error e = sb_mark_write(dm->fs.root_fd, dm_now_ns(), 1);
    if (e != SB_OK)
        lg_printf(dm->fs.log, LG_WARN, "unmount: %s: %s; the store stays marked in use",
                  SB_CLEAN_NAME, e == SB_ERR_IO ? strerror(errno) : sb_error_name(e));
}
