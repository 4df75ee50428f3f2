/* chk: checking, repairing and measuring the backing files of a store, for the
 * administrator's tools (fsck.fpgalz4fs, fpgalz4fs-stat, mkfpgalz4fs --compress-existing).
 *
 * Everything is built on fmt.c (the format) so that the tools and the daemon read files the
 * same way. A check walks one backing file: marker, seek table at EOF (or, without one, the
 * frame walk), every block (checksum and decoding), every frame's header, wrapper, EndMark and
 * content checksum, and the header flips the last commit asked for. A repair never cuts
 * anything the frame walk accepts and never touches a block whose checksum fails: such a
 * block is reported (file, block, offset) and stays as it is. docs/TOOLS.md has the rules. */
#ifndef FPGALZ4FS_CHK_H
#define FPGALZ4FS_CHK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fmt.h"
#include "sb.h"

/* How much a check may write. */
typedef enum {
    CHK_CHECK = 0,                     /* write nothing */
    CHK_PREEN,                         /* what the daemon's open would repair by itself, and
                                          header patches a valid seek table vouches for */
    CHK_REPAIR,                        /* all of that, and a damaged marker of a file whose
                                          seek table is intact (makes a file the mount shows
                                          as foreign own again) */
} chk_mode;

typedef enum { CHK_OWN = 0, CHK_FOREIGN, CHK_NEWER } chk_kind;

/* Problems, as bits of chk_result.found / fixed. */
enum {
    CHK_P_INTENTS = 1u << 0,           /* header flips of an interrupted commit not done */
    CHK_P_TABLE = 1u << 1,             /* no valid seek table at EOF */
    CHK_P_TORN = 1u << 2,              /* bytes after the last whole item (a torn tail) */
    CHK_P_HEADER = 1u << 3,            /* frame header, wrapper, size word, EndMark or
                                          content checksum differs from what the table says */
    CHK_P_MARKER = 1u << 4,            /* marker damaged; the rest is an intact own file */
    CHK_P_BLOCK = 1u << 5,             /* a block whose checksum or decoding fails */
    CHK_P_WALK = 1u << 6,              /* the frame walk (and so lz4 -d) disagrees with the
                                          seek table; reads through the mount are right */
};
/* Problems no repair touches. */
#define CHK_P_UNREPAIRABLE (CHK_P_BLOCK | CHK_P_WALK)

typedef struct {
    chk_kind kind;
    uint32_t block_size;               /* own files */
    uint64_t file_len;                 /* backing bytes when the check started */
    uint64_t size;                     /* logical size (after a repair, what the mount shows) */
    uint64_t n_blocks;
    uint32_t found;                    /* CHK_P_* seen */
    uint32_t fixed;                    /* CHK_P_* repaired (a subset of found) */
    uint64_t bad_blocks;               /* blocks reported as CHK_P_BLOCK */
    uint64_t cut_bytes;                /* torn tail removed (or that a repair would remove) */
} chk_result;

/* Receives one line per finding or repair (no path, no newline). */
typedef void (*chk_say_fn)(void *ctx, const char *line);
/* Formats one such line and hands it to say (nothing when say is NULL). */
void chk_vsay(chk_say_fn say, void *ctx, const char *fmt, va_list ap);

/* Checks (and, as mode allows, repairs) the backing file open on fd (O_RDWR unless
 * CHK_CHECK), of the store whose superblock is store (NULL: unknown; then a version 2 file
 * whose marker a power loss took is not recognized, and counts as foreign). A version 2 file changed (ctime) after changed_after_ns, the time up to which
 * the store's clean mark (sb_mark_read) says every change is whole, may have been caught by
 * a power loss: its blocks written after its last sync are checked as the daemon's open
 * checks them (fmt2_check_fresh), and the file is cut before the first that is not whole. Returns 0, or -errno when the file could not be read or written at all. The
 * file's atime and mtime are put back after any write. */
int chk_file(int fd, const sb_super *store, chk_mode mode, uint64_t changed_after_ns,
             chk_say_fn say, void *ctx, chk_result *out);

/* What fpgalz4fs-stat reports of one backing file; reads only headers and seek tables. */
typedef struct {
    chk_kind kind;
    uint64_t logical;                  /* logical size (foreign: the file's size) */
    uint64_t apparent;                 /* st_size of the backing file */
    uint64_t disk;                     /* st_blocks * 512 */
    uint64_t blocks, raw_blocks, zero_blocks;
    int torn;                          /* own file without a valid seek table at EOF */
} chk_stat;

int chk_stat_file(int fd, chk_stat *out);

/* Calls fn for every regular file under the directory dirfd, depth first, not crossing into
 * other filesystems and leaving out the superblock and the clean mark (and their
 * temporaries) at the top. rel is the path relative to the top; dirfd_of is the descriptor of the file's directory and name its
 * name there. A directory that cannot be read is passed with st NULL and errno set. fn
 * returns 0 to go on, anything else to stop the walk (that value is returned). */
typedef int (*chk_walk_fn)(void *ctx, int dirfd_of, const char *name, const char *rel,
                           const struct stat *st);
int chk_walk(int dirfd, chk_walk_fn fn, void *ctx);

/* The name mkfpgalz4fs --compress-existing gives the converted copy of the file with inode
 * ino while it is being written: ".fpgalz4fs-convert.<ino in hex>.tmp". */
#define CHK_CONVERT_PREFIX ".fpgalz4fs-convert."
#define CHK_CONVERT_SUFFIX ".tmp"
void chk_convert_name(uint64_t ino, char *out, size_t cap);
/* True for a name of that pattern. */
int chk_is_convert_name(const char *name);

#endif
