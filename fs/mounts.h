/* mt: what the kernel's table of mounts says of a store (/proc/self/mountinfo). */
#ifndef FPGALZ4FS_MOUNTS_H
#define FPGALZ4FS_MOUNTS_H

/* 1 if a FUSE mount whose source is `source` (the daemon's fsname: the backing directory) is
 * up, 0 if none is, -1 if the table cannot be read. */
int mt_source_mounted(const char *source);
/* The device number of the newest mount on path; -1 if none. A stat of a FUSE mountpoint
 * would wait for the daemon's loop, which may not run yet. */
int mt_mount_dev(const char *path, unsigned *major, unsigned *minor);

#endif
