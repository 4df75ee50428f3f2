/* fmt: the on-disk format of one own file (docs/FORMAT.md is the authority).
 *
 *   marker   : an empty LZ4 frame, then a skippable frame (FMT_SKIP_MARKER) holding the
 *              format magic, version, block size and store UUID
 *   frames   : LZ4 frames with independent blocks, block checksums and content size; a
 *              block that does not shrink is stored raw (bit 31 of its size word)
 *   hidden   : FMT_SKIP_HIDDEN frames wrap frames being committed; revealing them sets the
 *              wrapper's size to 0, after which the frames inside are visible to any decoder
 *   dead     : a retired frame's header is overwritten with FMT_SKIP_DEAD and its length
 *   trailer  : the last bytes of the file: a FMT_SKIP_TRAILER frame with the seek table
 *              (one entry per block), the commit's reveal and retire lists and a footer
 *
 * Everything here is pure encoding and decoding plus a few positioned reads and writes on a
 * descriptor; policy (when to commit, what to retire) lives in ff_commit.c. */
#ifndef FPGALZ4FS_FMT_H
#define FPGALZ4FS_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/types.h>

#define FMT_VERSION 7u                      /* newest file format this build reads and writes */
#define FMT_VERSION_1 1u                    /* the seek-table layout of this file (fmt.c) */
#define FMT_VERSION_2 2u                    /* slots, journal and footer (fmt2.c) */
#define FMT_VERSION_3 3u                    /* version 2 with hole runs (fmt2_run.c) */
#define FMT_VERSION_4 4u                    /* version 3 with page records (fmt2_rec.c) */
#define FMT_VERSION_5 5u                    /* version 4 with a chained last frame (fmt2_chain.c) */
#define FMT_VERSION_6 6u                    /* version 5, large blocks' slots on pages (fmt2.h) */
#define FMT_VERSION_7 7u                    /* version 6, full blocks' frames on pages (fmt2.h) */
#define FMT_LZ4_MAGIC 0x184D2204u
#define FMT_SKIP_MARKER 0x184D2A5Au         /* skippable magics (0x184D2A50..5F) used here */
#define FMT_SKIP_TRAILER 0x184D2A5Bu
#define FMT_SKIP_HIDDEN 0x184D2A5Cu
#define FMT_SKIP_DEAD 0x184D2A5Du
#define FMT_MARKER_MAGIC 0x5A4C5046u        /* "FPLZ" */
#define FMT_FOOTER_MAGIC 0x52545A46u        /* "FZTR" */
#define FMT_EMPTY_FRAME_LEN 19u             /* header with content size + EndMark */
#define FMT_MARKER_PAYLOAD 32u
#define FMT_MARKER_LEN (FMT_EMPTY_FRAME_LEN + 8u + FMT_MARKER_PAYLOAD)   /* 59 */
#define FMT_FRAME_HEADER_LEN 15u            /* magic, FLG, BD, content size, HC */
#define FMT_BLOCK_OVERHEAD 8u               /* size word + block checksum */
#define FMT_ENDMARK_LEN 4u
#define FMT_FRAME_END_LEN 8u                /* EndMark + content checksum of a data frame */
#define FMT_MAX_SIZE (1ull << 56)           /* largest logical size a seek table may claim */
#define FMT_ENTRY_LEN 12u                   /* seek table entry: u64 offset|flags, u32 word */
#define FMT_REVEAL_LEN 8u
#define FMT_RETIRE_LEN 16u
#define FMT_FOOTER_LEN 32u
#define FMT_RAW_BIT 0x80000000u             /* block stored uncompressed */
#define FMT_ENTRY_ZERO (1ull << 63)         /* entry flag: the block is all zeros (a hole) */
#define FMT_OFFSET_MASK ((1ull << 56) - 1)

#define FMT_LIST_ERRORS(X)                                                                  \
    X(FMT_OK, "no error")                                                                   \
    X(FMT_ERR_IO, "read or write failed (errno kept)")                                      \
    X(FMT_ERR_FOREIGN, "not an fpgalz4fs file")                                             \
    X(FMT_ERR_NEWER, "file format version is newer than this build")                       \
    X(FMT_ERR_CHECKSUM, "block checksum mismatch")                                          \
    X(FMT_ERR_CORRUPT, "structure damaged")                                                 \
    X(FMT_ERR_NO_TRAILER, "seek table missing or damaged")                                  \
    X(FMT_ERR_NOMEM, "out of memory")

#define FMT_ENUM_ITEM(name, text) name,
typedef enum { FMT_LIST_ERRORS(FMT_ENUM_ITEM) } fmt_error;
#undef FMT_ENUM_ITEM

const char *fmt_error_name(fmt_error e);
/* Turns a format error into the errno an application sees. */
int fmt_errno(fmt_error e);

typedef struct {
    uint32_t version;                       /* format version of the file */
    uint32_t block_size;                    /* logical bytes per block */
    uint8_t uuid[16];                       /* the store the file was written in */
    uint32_t flags;                         /* FMT_MARKER_RECORDS, version 4 only */
} fmt_marker;

/* Marker flag (version 4): slots may hold page records (docs/FORMAT.md 9.11) that a writer
 * has not folded into their frames yet; the next last release looks at every slot. */
#define FMT_MARKER_RECORDS 1u
#define FMT_MARKER_FLAGS_OFF 39u            /* the marker's flags word */

/* One seek table entry: where a block's size word lies, and the word itself. */
typedef struct {
    uint64_t off;                           /* file offset of the size word | FMT_ENTRY_ZERO */
    uint32_t word;                          /* stored size, FMT_RAW_BIT when stored raw */
} fmt_entry;

typedef struct {
    uint64_t off;                           /* file offset of a frame to retire */
    uint64_t len;                           /* its total length */
} fmt_retire;

/* A decoded trailer. Arrays are malloc'd; fmt_trailer_free releases them. */
typedef struct {
    uint64_t size;                          /* logical size of the file */
    uint32_t n_entries;                     /* = ceil(size / block size) */
    fmt_entry *entries;
    uint32_t n_reveal;
    uint64_t *reveal;                       /* hidden wrappers this commit revealed */
    uint32_t n_retire;
    fmt_retire *retire;                     /* frames this commit retired */
    uint64_t start;                         /* file offset of the trailer frame */
} fmt_trailer;

static inline uint32_t fmt_word_size(uint32_t word) { return word & ~FMT_RAW_BIT; }
static inline uint64_t fmt_entry_off(const fmt_entry *e) { return e->off & FMT_OFFSET_MASK; }
/* On-disk bytes of a block: size word, data, checksum. */
static inline uint64_t fmt_block_len(uint32_t word) { return FMT_BLOCK_OVERHEAD + fmt_word_size(word); }

void fmt_put32(uint8_t *p, uint32_t v);
void fmt_put64(uint8_t *p, uint64_t v);
uint32_t fmt_get32(const uint8_t *p);
uint64_t fmt_get64(const uint8_t *p);

/* BD code for a block size; 0 when not one of 64K, 256K, 1M, 4M. */
uint8_t fmt_bd_code(uint32_t block_size);

void fmt_marker_encode(const fmt_marker *m, uint8_t out[FMT_MARKER_LEN]);
/* FMT_OK, FMT_ERR_FOREIGN (not ours, including a plain .lz4 file), FMT_ERR_NEWER. */
fmt_error fmt_marker_decode(const uint8_t *buf, size_t len, fmt_marker *m);

/* Data frames carry a content checksum (XXH32 of the frame's decoded bytes, seed 0): the
 * lz4 1.9.4 command line tool loses the next frame's first bytes after a frame of more than
 * 64 KiB that has block checksums and no content checksum. The marker's empty frame has none. */
void fmt_frame_header(uint8_t out[FMT_FRAME_HEADER_LEN], uint32_t block_size, uint64_t content,
                      int content_checksum);
/* Parses a frame header; returns its length (7..19) or 0 if it is not a valid header. */
size_t fmt_frame_header_parse(const uint8_t *buf, size_t len, uint32_t *block_size,
                              int *has_csize, uint64_t *csize, int *block_checksum,
                              int *content_checksum);

/* Writes a block's on-disk bytes (word, data, checksum) into out (fmt_block_len bytes).
 * data is the compressed block when out_len < len, otherwise raw is stored. */
size_t fmt_block_encode(uint8_t *out, const uint8_t *raw, uint32_t len, const uint8_t *comp,
                        uint32_t comp_len);
/* Decodes a block from its on-disk bytes (after the size word: data then checksum) into dst,
 * which must receive exactly expect bytes. */
fmt_error fmt_block_decode(uint32_t word, const uint8_t *data, uint8_t *dst, uint32_t expect);

/* Trailer encoding: bytes needed, then the encoding itself. */
size_t fmt_trailer_len(uint32_t n_entries, uint32_t n_reveal, uint32_t n_retire);
void fmt_trailer_encode(const fmt_trailer *t, uint8_t *out);
/* Reads the trailer that ends at file_len. FMT_ERR_NO_TRAILER when absent or damaged. */
fmt_error fmt_trailer_read(int fd, uint64_t file_len, uint32_t block_size, fmt_trailer *t);
void fmt_trailer_free(fmt_trailer *t);

/* Result of walking a file's frames from the marker on, the frames being the truth. */
typedef struct {
    fmt_trailer table;                      /* rebuilt entries and size (no reveal/retire) */
    uint64_t valid_end;                     /* end of the last item that parsed whole */
    int torn;                               /* something after valid_end did not parse */
    uint64_t last_table_end;                /* end of the last seek table passed, or 0 */
} fmt_scan_result;

/* Walks every frame and skippable frame after the marker. verify also checks every
 * block's checksum (reads all data): a frame with a bad block is cut as a torn tail when it
 * is the last whole item, and kept (its bad blocks read as EIO) when a whole item follows it.
 * Visible blocks become the table. */
fmt_error fmt_scan(int fd, uint64_t file_len, uint32_t block_size, int verify,
                   fmt_scan_result *out);

/* Writes an 8-byte skippable header (magic, size) at off. */
int fmt_write_skip_header(int fd, uint64_t off, uint32_t magic, uint32_t size);

/* Gives [off, off+len) back to the backing filesystem (whole 4 KiB pages inside it only);
 * the bytes then read as zeros. Only ever used inside a skippable frame's payload. */
void fmt_punch(int fd, uint64_t off, uint64_t len);

/* Completes a commit from its trailer: reveals its wrappers and retires its frames (both
 * idempotent). Returns the number of headers it had to change, or -errno. */
int fmt_apply_intents(int fd, const fmt_trailer *t, int punch);

/* pread/pwrite of exactly len bytes; -errno on failure, -EIO on a short read. */
int fmt_pread_all(int fd, void *buf, size_t len, uint64_t off);
/* Up to len bytes at off, fewer only at the end of the file: how many, or -errno. */
ssize_t fmt_pread_upto(int fd, void *buf, size_t len, uint64_t off);
int fmt_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* The same for pieces written as one call (iov is consumed): what belongs together reaches
 * the disk in one write, so a power loss keeps all of it or a torn prefix of it. */
int fmt_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off);

#endif
