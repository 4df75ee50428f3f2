/* mt: what the kernel's table of mounts says of a store (/proc/self/mountinfo). */
#ifndef FPGALZ4FS_MOUNTS_H
#define FPGALZ4FS_MOUNTS_H

/* 1 if a FUSE mount whose source is `source` (the daemon's fsname: the backing directory) is
 * up, 0 if none is, -1 if the table cannot be read. */
int mt_source_mounted(const char *source);

#endif
