/* tl_convert: rewriting one backing file of a store in place, crash-safely, through the
 * daemon's own writer. Shared by mkfpgalz4fs --compress-existing (a foreign file becomes an own
 * file) and fsck.fpgalz4fs --convert (an own file of format version 1 becomes version 2).
 *
 * The file is written (ff_create, ff_write, ff_release on the software engine, so in the
 * newest format) into the temporary chk_convert_name(inode) in the same directory; owner,
 * extended attributes, mode and times are copied, the temporary is synced, and it is renamed
 * over the original (atomic). Until that rename the original is untouched: an interrupted run
 * leaves a stale temporary, which the next run removes (tl_conv_remove_stale) before it
 * converts again. docs/TOOLS.md has the details. */
#ifndef FPGALZ4FS_TL_CONVERT_H
#define FPGALZ4FS_TL_CONVERT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "eng.h"
#include "ffile.h"
#include "sb.h"

/* How the source is read. */
typedef enum {
    TL_SRC_PLAIN = 0,                  /* its bytes as they are (a foreign file) */
    TL_SRC_OWN,                        /* through ff_open, read-only: its logical content
                                          (an own file of any version this build reads) */
} tl_src_kind;

typedef struct {
    eng_ctx *eng;
    ff_env *out_env;                   /* the writer: new files in the newest format */
    ff_env *in_env;                    /* the reader of own sources, read-only */
    uint8_t *buf;                      /* one chunk of the copy */
    /* Called with the logical bytes of the source dealt with (copied or a hole passed),
     * adding up to its size; may be NULL. */
    void (*progress)(void *ctx, uint64_t bytes);
    void *progress_ctx;
} tl_conv;

/* Opens the software engine and the writer (and reader) for files of the store sb. Returns 0,
 * or -1 with a message in err. */
int tl_conv_open(tl_conv *c, const sb_super *sb, char *err, size_t cap);
void tl_conv_close(tl_conv *c);

/* The format version the marker of the file open on fd names: 0 when it has no valid marker
 * (a foreign file, or an own file whose marker is damaged), a version newer than this build's
 * included. size is the file's size. Returns -errno when it cannot be read. */
int tl_file_version(int fd, uint64_t size);

/* For a walk over the store before converting: when name is of the temporaries' pattern,
 * unlinks it (never following it) and returns 1; 0 for any other name; -errno when the
 * unlink fails. */
int tl_conv_remove_stale(int dirfd, const char *name);

/* Rewrites the regular file name of the directory dirfd (rel: its path, for log lines) as
 * described above. src is a descriptor of it open for reading (not taken over), st its fstat
 * as it is now: if the file changes while it is copied (size, mtime or ctime), the copy is
 * dropped and -EBUSY returned. The directory's times are put back and it is synced after the
 * rename. Returns 0 with *stored set to the space the new backing file takes on disk
 * (st_blocks * 512: a version 2 file's apparent size counts the punched padding of its
 * slots), or -errno with the file left as it was and no temporary left behind. */
int tl_convert(tl_conv *c, int dirfd, const char *name, const char *rel, int src,
               const struct stat *st, tl_src_kind kind, uint64_t *stored);

#endif
