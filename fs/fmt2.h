/* fmt2: the on-disk layout of format version 2 (docs/FORMAT.md, part II, is the authority).
 *
 *   marker   : as version 1 (fmt.h), with version 2
 *   slots    : block i is one LZ4 frame at the fixed offset FMT_MARKER_LEN + i * (bs + 64);
 *              the rest of every slot but the last is a skippable frame (FMT_SKIP_PAD) whose
 *              payload is punched, so a block is rewritten in place and read without a table
 *   holes    : a block of zeros is stored raw with its data punched: a few bytes on disk
 *   journal  : FMT_SKIP_JOURNAL, after the slots: the new frames of a commit that rewrites
 *              blocks in place, written (and synced when it must be) before the slots are
 *   footer   : the last 64 bytes (FMT_SKIP_FOOTER2): logical size, where the slots end,
 *              the journal to replay
 *   pair     : while an open file's durable commits follow one another, the last 128 bytes
 *              are two footer places written in turn (paired footers, format version 3 in
 *              the footer), so that a commit never overwrites the journal or footer that the
 *              one before it synced: one sync per commit instead of two
 *
 * Pure encoding and decoding plus positioned reads and writes; policy lives in ff_*.c. */
#ifndef FPGALZ4FS_FMT2_H
#define FPGALZ4FS_FMT2_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fmt.h"

#define FMT2_SLOT_EXTRA 64u                 /* slot = block size + this (versions 2 to 5) */
#define FMT2_PAGE 4096u                     /* version 6: large blocks' slots start on these */
#define FMT2_PAGE_MIN_BS (1u << 20)         /* the smallest block size whose slots do */
#define FMT2_FRAME_OVERHEAD 31u             /* header 15, size word 4, checksum 4, end 8 */
#define FMT2_FRAME_LEAD 19u                 /* a frame's header and size word */
#define FMT2_FRAME_TRAIL 12u                /* block checksum, EndMark, content checksum */
#define FMT2_HOLE_HEAD FMT2_FRAME_LEAD      /* what a hole writes before its punched data */
#define FMT2_HOLE_TAIL FMT2_FRAME_TRAIL     /* and after it */
#define FMT2_FOOTER_LEN 64u
#define FMT2_PAIR_LEN 128u                  /* the two footer places at the end of a file */
#define FMT2_FOOTER_V2 2u                   /* a footer that ends the file alone */
#define FMT2_FOOTER_PAIRED 3u               /* one of the two footer places */
#define FMT2_J_HEAD 24u                     /* journal: skippable header, seq, count, flags */
#define FMT2_J_ENTRY 16u                    /* journal entry: block, frame length, length */
#define FMT2_MAX_SIZE (1ull << 40)          /* largest logical size (1 TiB): a hole costs one
                                               small write per block, see FORMAT.md */
#define FMT_SKIP_PAD 0x184D2A59u            /* the unused rest of a slot */
#define FMT2_KILL_LEN 4u                    /* zero bytes a frame's write puts at the start of
                                               its padding's payload: no record of an older
                                               frame there is read as one of this frame */
#define FMT_SKIP_FOOTER2 0x184D2A5Eu
#define FMT_SKIP_JOURNAL 0x184D2A5Fu

typedef struct {
    uint64_t size;                          /* logical size */
    uint64_t n_blocks;                      /* ceil(size / bs); not stored */
    uint64_t tail;                          /* end of the last slot's extent: the journal,
                                               if any, and the footer come after it */
    uint64_t j_off, j_len;                  /* the journal to replay at open; 0, 0: none */
    uint64_t seq;                           /* commit number; the journal carries it too */
    uint64_t fresh;                         /* blocks >= fresh were all written since the
                                               last sync: no fsync promised them */
    int paired;                             /* one of the two footer places (version 3) */
} fmt2_footer;

/* One block of a journal: where it goes and its frame (NULL, 0 for a hole). */
typedef struct {
    uint64_t block;
    uint32_t len;                           /* logical bytes of the block */
    uint32_t frame_len;                     /* 0: a hole of len zero bytes */
    const uint8_t *frame;
} fmt2_jentry;

/* Where a file's slots lie (FORMAT.md 9.3): its block size and the spacing of its slots.
 * Everything that finds a slot takes one, made from the file's marker by fmt2_geo_of, so
 * that a version may place its slots otherwise without a change at every caller. Slot i
 * starts at base + i * (bs + extra), slot 0 right after the marker. */
typedef struct {
    uint32_t bs;                            /* block size */
    uint32_t extra;                         /* slot length beyond bs */
    uint32_t base;                          /* where slot i would start for i = 0 */
    uint32_t paged;                         /* version 7: a full block's frame may start at
                                               its slot's first page boundary */
} fmt2_geo;
/* The geometry of a file of this version (2..FMT_VERSION) and block size. Versions 2 to 5,
 * and 6 below 1 MiB blocks: slots bs + 64 bytes apart from the marker's end, so a frame
 * starts anywhere in a page and its slot's first and last page are partly used. Version 6
 * with blocks of 1 MiB or more: slot i >= 1 at i * (bs + 4 KiB), on a page boundary, so a
 * frame leaves half a page unused on average instead of one (FORMAT.md 9.3); smaller blocks
 * keep the old spacing, as 4 KiB would lengthen their files by 1.6 % (256 KiB) or 6 %. */
static inline fmt2_geo fmt2_geo_of(uint32_t version, uint32_t bs)
{
    if (version >= FMT_VERSION_6 && bs >= FMT2_PAGE_MIN_BS)
        return (fmt2_geo){bs, FMT2_PAGE, 0, version >= FMT_VERSION_7};
    return (fmt2_geo){bs, FMT2_SLOT_EXTRA, FMT_MARKER_LEN, version >= FMT_VERSION_7};
}
/* The distance between two slots (slot 0 may be shorter: it starts at the marker's end). */
static inline uint64_t fmt2_slot_len(fmt2_geo g) { return (uint64_t)g.bs + g.extra; }
static inline uint64_t fmt2_slot_off(fmt2_geo g, uint64_t i)
{
    return i ? g.base + i * fmt2_slot_len(g) : FMT_MARKER_LEN;
}
/* The slot whose extent holds offset off (>= FMT_MARKER_LEN). */
static inline uint64_t fmt2_slot_of(fmt2_geo g, uint64_t off)
{
    return off < fmt2_slot_off(g, 1) ? 0 : (off - g.base) / fmt2_slot_len(g);
}
/* Where the slots of n blocks end when the last one holds a frame of last_len bytes at its
 * slot's start. */
static inline uint64_t fmt2_slots_end(fmt2_geo g, uint64_t n, uint64_t last_len)
{
    return n ? fmt2_slot_off(g, n - 1) + last_len : FMT_MARKER_LEN;
}

/* Version 7 (FORMAT.md 9.3.1): the second place of slot i's frame, its slot's first page
 * boundary; the slot's start where there is none (slot 0, a slot that starts on a page,
 * versions before 7). A frame that starts mid-page leaves the part of its first page before
 * it allocated and unused, on average half a page a slot. */
static inline uint64_t fmt2_slot_page(fmt2_geo g, uint64_t i)
{
    uint64_t s = fmt2_slot_off(g, i);
    return g.paged && i ? (s + FMT2_PAGE - 1) & ~(uint64_t)(FMT2_PAGE - 1) : s;
}
/* Where a writer puts slot i's frame of frame_len bytes (0: a hole) for a block of len
 * bytes: at the page boundary when the block is whole and the frame fits there with its
 * padding header and kill word before the next slot, else at the slot's start. */
static inline uint64_t fmt2_frame_place(fmt2_geo g, uint64_t i, uint32_t len, uint32_t frame_len)
{
    uint64_t s = fmt2_slot_off(g, i), p = fmt2_slot_page(g, i);
    if (p != s && len == g.bs && frame_len &&
        p + frame_len + 8 + FMT2_KILL_LEN <= fmt2_slot_off(g, i + 1))
        return p;
    return s;
}
/* 1: an LZ4 frame's magic starts at off; 0: it does not (or the file ends first); <0: the
 * read failed. */
int fmt2_lz4_at(int fd, uint64_t off);
/* Where slot i's frame starts on the disk: the slot's start when an LZ4 frame's magic is
 * there or there is no second place, else the page boundary when one is there; the slot's
 * start again when neither holds one (a slot inside a hole run, damage) and when a read
 * fails (<0). */
int fmt2_frame_at(int fd, fmt2_geo g, uint64_t i, uint64_t *at);
/* Where a journal's entry e goes (fmt2_frame_place; a hole, frame_len 0, at its slot's
 * start). */
static inline uint64_t fmt2_jentry_place(fmt2_geo g, const fmt2_jentry *e)
{
    return fmt2_frame_place(g, e->block, e->len, e->frame_len);
}
/* Where the padding after journal entry e[k] (of n, in block order) ends in a file of
 * n_blocks whose last slot ends at tail: at the next slot's frame, the next entry's place
 * when that is the next block, else where the disk has it. */
uint64_t fmt2_jentry_end(int fd, fmt2_geo g, uint64_t n_blocks, uint64_t tail,
                         const fmt2_jentry *e, uint32_t n, uint32_t k);
/* Points the padding before slot i's frame at `to` (where slot i's frame is now): the
 * padding after block i - 1's frame, or after the hole run that holds block i - 1, when it
 * does not reach there already. Nothing for slot 0, nor where slot i - 1 holds no frame
 * that parses (damage, which reads as EIO: only lz4 -d needs the padding). <0: a read or
 * write failed. */
int fmt2_pad_before(int fd, fmt2_geo g, uint64_t i, uint64_t to);

/* The 8-byte header of a padding frame (FMT_SKIP_PAD) that is len bytes long in all
 * (len >= 8): its payload is the rest. */
static inline void fmt2_pad_header(uint8_t *out, uint64_t len)
{
    fmt_put32(out, FMT_SKIP_PAD);
    fmt_put32(out + 4, (uint32_t)(len - 8));
}

/* XXH32 of len zero bytes (the checksums of a hole). */
uint32_t fmt2_zero_sum(uint32_t len);
/* A hole's first FMT2_HOLE_HEAD bytes (frame header, raw size word) and its last
 * FMT2_HOLE_TAIL (block checksum, EndMark, content checksum: zsum, 0, zsum). */
void fmt2_hole_head(uint8_t *out, uint32_t bs, uint32_t len);
void fmt2_hole_tail(uint8_t *out, uint32_t zsum);

/* Encodes block data as a whole frame into out (room for len + FMT2_FRAME_OVERHEAD): the
 * compressed form when comp_len < len, else raw. Returns the frame length. */
size_t fmt2_frame_encode(uint8_t *out, uint32_t bs, const uint8_t *raw, uint32_t len,
                         const uint8_t *comp, uint32_t comp_len);
/* The same with the checksums already known: comp_sum = XXH32 of comp (unused when the
 * block is stored raw), raw_sum = XXH32 of raw. */
size_t fmt2_frame_encode_sums(uint8_t *out, uint32_t bs, const uint8_t *raw, uint32_t len,
                              const uint8_t *comp, uint32_t comp_len, uint32_t comp_sum,
                              uint32_t raw_sum);

/* Makes a frame of the comp_len compressed bytes at comp (comp_len < len) where they lie:
 * writes the FMT2_FRAME_LEAD bytes before comp and the FMT2_FRAME_TRAIL after them, which
 * the caller reserved, and returns the frame's start (comp - FMT2_FRAME_LEAD). Byte for byte
 * the frame fmt2_frame_encode_sums makes, without copying the block. */
uint8_t *fmt2_frame_wrap(uint8_t *comp, uint32_t bs, uint32_t len, uint32_t comp_len,
                         uint32_t comp_sum, uint32_t raw_sum);

/* Checks a frame's header, size word and EndMark in buf (avail bytes from the frame's
 * start); *len gets the block's logical length, *word its size word, *frame_len the whole
 * frame. verify also checks the block checksum. FMT_ERR_CORRUPT or FMT_ERR_CHECKSUM. */
fmt_error fmt2_frame_parse(const uint8_t *buf, size_t avail, uint32_t bs, int verify,
                           uint32_t *len, uint32_t *word, uint32_t *frame_len);

/* Writes slot i's frame and, when the slot goes on to `end`, the padding up to there
 * (its payload punched), in one write. frame NULL writes a hole of len zeros whose checksum
 * is zsum (fmt2_zero_sum(len)). marker, when not NULL and i is 0, is the file's marker,
 * written in the same write: a file whose first slot reached the disk has its marker, even
 * if the write that made the file was lost (FORMAT.md 11.5). */
int fmt2_write_slot(int fd, fmt2_geo g, uint64_t i, const uint8_t *frame, uint32_t frame_len,
                    uint32_t len, uint32_t zsum, uint64_t end, const uint8_t *marker);
/* The same for a frame (not a hole) rewritten in place, when the pages of slot i from
 * holes_from (a page boundary) on are known to be holes already (0: none known): punching
 * them again, or reserving what is allocated, would change the backing file's metadata,
 * which makes the next fdatasync a journal commit of the backing filesystem. footer, when
 * not NULL, is the encoded footer (FMT2_FOOTER_LEN bytes) that goes at end, after the slot:
 * in the same write when the frame reaches end, so a system call is saved and the kernel
 * copies it after the frame. */
int fmt2_rewrite_slot(int fd, fmt2_geo g, uint64_t i, const uint8_t *frame, uint32_t frame_len,
                      uint32_t len, uint64_t end, uint64_t holes_from, const uint8_t *footer);
/* Writes whole-block holes in slots [a, b), each followed by another slot. From a's slot on
 * the file must read as zeros already (the caller zeroes old bytes there first). runs 0
 * (version 2): one write of the bytes between two blocks' data per block. runs 1 (version
 * 3): the holes of each group form one hole run (FORMAT.md 9.5.1) where there are at least
 * two of them. The last one's padding reaches next, where slot b's frame goes. */
int fmt2_write_hole_run(int fd, fmt2_geo g, uint64_t a, uint64_t b, uint32_t zsum, int runs,
                        uint64_t next);

/* ---- hole runs, format version 3 (FORMAT.md 9.5.1; fmt2_run.c) ----
 * A run of m >= 2 whole-block holes a..a+m-1, all in one group of fmt2_run_group(bs) blocks
 * and never holding the file's last block, is one raw frame in slot a: its header says a
 * 4 MiB block size and m * bs bytes of content, its data are zeros that were never written,
 * and its padding reaches slot a + m. The slots inside it lie in its data. */
#define FMT2_RUN_SPAN (4u << 20)             /* the bytes of a group of blocks */
/* Blocks per group; 1 (4 MiB blocks): no runs. */
static inline uint64_t fmt2_run_group(uint32_t bs) { return FMT2_RUN_SPAN / bs; }
/* The size word memory keeps for a block inside a run (size 0: no frame of its own). */
#define FMT2_RUN_WORD FMT_RAW_BIT
/* The size word memory keeps for a last block whose frame is a chain (fmt2_chain.c): no
 * stored size has this bit (a block is at most 4 MiB). */
#define FMT2_CHAIN_WORD (1u << 30)
/* XXH32 of m * bs zero bytes: the run's block and content checksum. */
uint32_t fmt2_run_zero_sum(uint32_t bs, uint32_t m);
/* The first FMT2_HOLE_HEAD bytes of a run of m blocks. */
void fmt2_run_head(uint8_t out[FMT2_HOLE_HEAD], uint32_t bs, uint32_t m);
/* The m (2..group) of the run whose first FMT2_HOLE_HEAD bytes h holds, else 0. */
uint32_t fmt2_run_head_parse(const uint8_t *h, size_t avail, uint32_t bs);
/* Whether the run at block a of m blocks ends as it must: block checksum equal to the
 * content checksum (verify: both the zero sum), EndMark, padding header reaching a + m. */
int fmt2_run_tail_ok(int fd, fmt2_geo g, uint64_t a, uint32_t m, int verify);
/* Whether that run's data read as zeros (pages that are holes are not read). */
int fmt2_run_data_zero(int fd, fmt2_geo g, uint64_t a, uint32_t m);
/* Whether [lo, hi) of the backing file reads as zeros; holes of the backing file (SEEK_DATA)
 * are not read. */
int fmt2_reads_zero(int fd, uint64_t lo, uint64_t hi);
/* Writing a run: its head (fmt2_run_head at slot a), then its end (checksums, EndMark,
 * padding header); its data must read as zeros already. */
int fmt2_write_run_end(int fd, fmt2_geo g, uint64_t a, uint32_t m, uint64_t to);
/* Writes the end of the run at a of m blocks and the head of the run of m_next blocks that
 * follows it at a + m in one write (the padding between them as zeros): one write and one
 * extent of the backing file per group of a long hole instead of two. */
int fmt2_write_run_pair(int fd, fmt2_geo g, uint64_t a, uint32_t m, uint32_t m_next);
/* Whether block i, of len logical bytes, is stored in its slot as zeros: a single hole
 * (9.5; zsum: XXH32 of len zeros) or part of a hole run; 1 with the blocks that are, [*a,
 * *a + *m); 0: a frame of data (or damage); -EIO. */
int fmt2_slot_hole(int fd, fmt2_geo g, uint64_t i, uint32_t len, uint32_t zsum, uint64_t *a,
                   uint32_t *m);
/* The run that holds block i, whose slot does not begin with a frame of its own: *a, *m.
 * FMT_ERR_CORRUPT when there is none (a damaged slot), FMT_ERR_IO. */
fmt_error fmt2_run_find(int fd, fmt2_geo g, uint64_t i, uint64_t *a, uint32_t *m);

void fmt2_footer_encode(const fmt2_footer *ft, uint8_t out[FMT2_FOOTER_LEN]);
/* Reads and validates the footer ending at file_len; FMT_ERR_NO_TRAILER when absent or
 * damaged. */
fmt_error fmt2_footer_read(int fd, uint64_t file_len, fmt2_geo g, fmt2_footer *ft);
/* Writes the footer at off and cuts the file after it. */
int fmt2_footer_write(int fd, uint64_t off, const fmt2_footer *ft);
/* The same where the file is known to be at most len_now bytes long: no cut when the footer
 * reaches its end (the write leaves the length right). */
int fmt2_footer_put(int fd, uint64_t off, const fmt2_footer *ft, uint64_t len_now);
/* The paired footers at the end of a file of file_len bytes (a multiple of FMT2_PAIR_LEN)
 * that are valid, oldest first (*n: 0, 1 or 2). Their journals are not looked at. */
fmt_error fmt2_pair_read(int fd, uint64_t file_len, fmt2_geo g, fmt2_footer ft[2], int *n);
/* The footer that says what the file holds as far as footers tell, for a reader that does
 * not recover: the version 2 footer ending the file, else the newer paired footer (whose
 * journal is not looked at). FMT_ERR_NO_TRAILER when there is neither. */
fmt_error fmt2_footer_find(int fd, uint64_t file_len, fmt2_geo g, fmt2_footer *ft);
/* Where footer place k (0, 1) of a file whose pair ends at eof lies. */
static inline uint64_t fmt2_place_off(uint64_t eof, int k)
{
    return eof - FMT2_PAIR_LEN + (uint64_t)k * FMT2_FOOTER_LEN;
}
/* Writes ft (paired) into place k of the pair ending at eof, or, when ft is NULL, an empty
 * place: a 64-byte padding frame. Nothing is cut: the pair is the end of the file. */
int fmt2_place_write(int fd, uint64_t eof, int k, const fmt2_footer *ft);

size_t fmt2_journal_len(const fmt2_jentry *e, uint32_t n);
/* The journal of e[0..n) as pieces to write with pwritev, its frames where they lie: fills
 * head (FMT2_J_HEAD + n * FMT2_J_ENTRY bytes: the header and the entries) and sum (the
 * checksum), and iov (room for n + 2) with head, each frame, sum. Returns the pieces used. */
int fmt2_journal_iov(const fmt2_jentry *e, uint32_t n, uint64_t seq, uint8_t *head,
                     uint8_t sum[4], struct iovec *iov);
/* The same journal in one buffer of fmt2_journal_len bytes. */
void fmt2_journal_encode(const fmt2_jentry *e, uint32_t n, uint64_t seq, uint8_t *out);
/* Reads the journal at [off, off+len) into *buf (malloc'd) and checks it; the entries
 * point into *buf. FMT_ERR_NO_TRAILER when it is torn or not the one of this seq. */
fmt_error fmt2_journal_read(int fd, uint64_t off, uint64_t len, uint64_t seq, uint32_t bs,
                            uint64_t n_blocks, uint8_t **buf, fmt2_jentry **e, uint32_t *n);

/* Result of walking the slots from block 0 (repair, fsck). */
typedef struct {
    uint64_t n_blocks, size;
    uint64_t valid_end;                     /* end of the last frame taken */
    uint64_t bad_blocks;                    /* kept blocks whose checksum fails */
} fmt2_scan_result;

/* Takes slots while their frames parse; a frame with a bad block checksum is kept when a
 * good frame follows it (it reads as EIO), dropped as a torn tail when it is the last. */
fmt_error fmt2_scan(int fd, uint64_t file_len, fmt2_geo g, int verify, fmt2_scan_result *out);
/* Parses the frame of slot i (buf: a slot's worth of bytes from the slot's start);
 * FMT_ERR_CORRUPT when there is none. *flen: where in the slot the frame ends (its length,
 * plus the distance to the page boundary for a frame there, version 7). *padded: the
 * padding that a slot followed by another one carries is there, reaching exactly the start
 * or (version 7) the page boundary of the next slot. verify: the block and content
 * checksums hold. */
fmt_error fmt2_scan_slot(int fd, uint64_t file_len, fmt2_geo g, uint64_t i, int verify,
                         uint8_t *buf, uint32_t *len, uint32_t *flen, int *padded);
/* Whether slot i, whose bytes (want of them) are in buf, begins a hole run that is whole:
 * its length, else 0. verify also checks its checksums and that its data read as zeros. */
uint32_t fmt2_scan_run(int fd, fmt2_geo g, uint64_t i, int verify, const uint8_t *buf,
                       uint64_t want);

/* What opening a file found, and did when it may write: the one recovery of version 2
 * files, shared by the daemon's open and fsck. */
typedef struct {
    fmt2_footer ft;                         /* the state the file holds (after a repair) */
    uint64_t file_len;                      /* backing length after the recovery */
    int torn;                               /* no valid footer: the slots were walked */
    uint64_t cut;                           /* bytes after the last whole slot (cut when
                                               writing) */
    uint64_t bad_blocks;                    /* walked blocks kept with a bad checksum */
    int journal_bad;                        /* the footer names a journal that is damaged */
    int paired;                             /* the file ended with paired footers */
    uint32_t pair_journals;                 /* of their journals, how many were replayed */
    uint32_t replayed;                      /* slots that differed from the journal (and
                                               were rewritten when writing) */
    int settled;                            /* the footer was put back behind the slots */
    uint64_t unsynced;                      /* fmt2_check_fresh: blocks it checked */
    uint64_t unsynced_cut;                  /* of those, dropped: from the first one that
                                               was not whole to the end */
    uint8_t *jbuf, *jbuf_old;               /* not writing: the journals (two when paired */
    fmt2_jentry *je;                        /* footers name one each), whose frames a reader */
    uint64_t *jat;                          /* takes instead of the slots': entries by block, */
    uint32_t jn;                            /* the newer journal's where both hold one, and
                                               where each frame lies in the file (jat) */
    uint32_t chain_area;                    /* fmt2_chain_settle: the last slot holds a chain
                                               whose blocks take this many bytes; 0: not */
    int chain_fixed;                        /* it cut a torn link or put its end back */
    int chain_padded;                       /* it put back the padding from a whole chain
                                               to the tail (a pair link's write torn) */
    uint64_t pad_fixed;                     /* fmt2_check_fresh put back the padding of
                                               block pad_fixed - 1, the last synced one */
} fmt2_recovery;

/* Footer, journal replay and settling, or the walk and a new footer; then the last slot's
 * chain (fmt2_chain_settle). write 0 changes nothing (a read-only mount, fsck -n). zsum:
 * fmt2_zero_sum(bs) when known, else 0 (it is computed only if a hole is replayed).
 * crashed: a session that wrote the file may have ended in a crash (the clean mark, 1.5).
 * Returns FMT_OK or the error that stopped it. */
fmt_error fmt2_recover(int fd, uint64_t file_len, fmt2_geo g, int write, uint32_t zsum,
                       int crashed, fmt2_recovery *r);
void fmt2_recovery_free(fmt2_recovery *r);

/* A version 2 file whose marker never reached the disk (fmt2_lost.c): head (its first 59
 * bytes) reads as zeros, the write that made the file lost to a power loss that kept later
 * ones, and a version 2 file lies behind it (a footer at EOF, a whole frame in slot 0, and
 * for block size bs_hint: the head of a frame, a hole run or a journal at one of the first
 * FMT2_LOST_MARKER_SLOTS slots or of the last two slots' worth of bytes; there, a whole
 * journal or footer, the head of one that a torn write cut at the end of the file, or a
 * padding header that reaches a slot boundary behind a frame's or hole's end; or the end
 * of a hole that is the last block, at the end of the file).
 * Returns its block size (bs_hint tried first, then the four sizes), else 0; *version: the
 * version to read it as and write back, whose slot spacing what is left shows (from 1 MiB
 * blocks on, version 6's differs from that of versions 2 to 5: FMT_VERSION_5 for those). */
#define FMT2_LOST_MARKER_SLOTS 16u            /* first slots looked at for a head */
uint32_t fmt2_lost_marker(int fd, const uint8_t *head, uint64_t file_len, uint32_t bs_hint,
                          uint32_t *version);
/* The marker of a file of this version (2, 3 or 4) and block size bs in the store whose uuid
 * is given, with flags (FMT_MARKER_RECORDS, version 4 only). */
void fmt2_marker_encode(uint32_t version, uint32_t bs, uint32_t flags, const uint8_t uuid[16],
                        uint8_t out[FMT_MARKER_LEN]);
/* Writes the marker of such a file back, of the version fmt2_lost_marker gave (version 5
 * or 6 reads every file of versions 2 to 5 of the same slot spacing as it is), with
 * FMT_MARKER_RECORDS set: the lost marker may have said that slots hold records, and the
 * flag only makes the next last release look. The daemon's open and fsck both put it back
 * this way. 0 or -errno. */
int fmt2_restore_marker(int fd, uint32_t version, uint32_t bs, const uint8_t uuid[16]);

/* After fmt2_recover, for a file a power loss may have caught: the blocks at and after the
 * footer's fresh were written after the file's last sync, so a power loss may have kept the
 * footer that counts them and lost any of their slots. Each such slot is checked whole (its
 * frame, block checksums, padding); from the first that is not, the file is cut. When
 * writing and something was cut, or promise is set, the file is then synced and the footer
 * says every block is promised (fresh = n), so that no later open checks them again.
 * Otherwise r->ft says the same, in memory only. */
fmt_error fmt2_check_fresh(int fd, fmt2_geo g, int write, int promise, fmt2_recovery *r);

/* ---- the chained last frame (version 5, fmt2_chain.c, docs/FORMAT.md 9.12) ----
 * The last slot of a version 5 file may hold its partial block as a chain: one frame of
 * linked LZ4 blocks (FLG 0x5C), the first what a whole write of the block made, each later
 * one what an append added, compressed with the bytes before it as its dictionary. An append
 * writes its link over the frame's end (EndMark, content checksum) and the footer, and the
 * frame's header again: a few hundred bytes instead of the whole block twice. */
#define FMT2_FLG_CHAIN 0x5Cu                /* version 01, linked blocks, block checksums,
                                               content size, content checksum */
#define FMT2_CHAIN_LINK_OVERHEAD 16u        /* a link's size word and checksum, EndMark,
                                               content checksum */
typedef struct {
    uint32_t len;                           /* bytes decoded */
    uint32_t area;                          /* bytes of the blocks taken, from the first size
                                               word; the EndMark follows them */
    uint32_t blocks;
} fmt2_chain_info;

/* The 15-byte header of a chain of len bytes. */
void fmt2_chain_head(uint8_t out[FMT_FRAME_HEADER_LEN], uint32_t bs, uint32_t len);
/* A link: the n bytes added (comp: their linked block of comp_len bytes; NULL or not smaller:
 * stored raw) as a block, then the frame's end with raw_sum, the content checksum of the
 * whole block. Returns its length, n or comp_len + FMT2_CHAIN_LINK_OVERHEAD. */
size_t fmt2_chain_link(uint8_t *out, const uint8_t *added, uint32_t n, const uint8_t *comp,
                       uint32_t comp_len, uint32_t raw_sum);
/* Decodes the blocks at b (avail bytes, from the first size word) into dst (cap bytes), each
 * linked to the bytes before it, up to the EndMark. strict: every block must check (its
 * checksum, its decoding) and the EndMark must follow, else FMT_ERR_CORRUPT; not strict:
 * stops before the first block that does not. */
fmt_error fmt2_chain_decode(const uint8_t *b, size_t avail, uint32_t bs, uint8_t *dst,
                            uint32_t cap, int strict, fmt2_chain_info *out);
/* Parses a whole chain in buf (avail bytes from its start): header with FLG 0x5C and a
 * content size below bs, blocks, EndMark. verify also decodes it: the content size and
 * checksum hold (FMT_ERR_CHECKSUM). *len: its content size, *frame_len: its length. */
fmt_error fmt2_chain_parse(const uint8_t *buf, size_t avail, uint32_t bs, int verify,
                           uint32_t *len, uint32_t *frame_len);
/* The blocks of the frame in buf that check, decoded into dst (bs bytes), whatever its
 * content size, header checksum and end say: what a torn link leaves of a chain, or of the
 * frame the first link was turning into one, or that frame whole when a crash lost every
 * link behind it. FMT_ERR_CORRUPT when not even one does, and for a frame of 9.3 whose only
 * block checks but which is torn at its end. */
fmt_error fmt2_chain_prefix(const uint8_t *buf, size_t avail, uint32_t bs, uint8_t *dst,
                            fmt2_chain_info *out);
/* Whether the padding frame from end to `to` (>= end + 8) begins at end; when it does not,
 * writes its header there (with the kill word, 9.11, when kill and its payload holds it)
 * if write, and returns 1 (an error of the write in *err); 0 when it was right or no
 * padding fits. Recovery's repair of a padding that a crash kept from the disk. */
int fmt2_pad_mend(int fd, uint64_t end, uint64_t to, int kill, int write, fmt_error *err);
/* Whether the last slot of the file the footer ft describes (no journal, not paired) holds
 * a chain, or a frame a link was written behind: after a crash, fmt2_chain_settle may cut
 * it, so its size is the open's to say. */
int fmt2_chain_suspect(int fd, uint64_t file_len, fmt2_geo g, const fmt2_footer *ft);
/* The last step of fmt2_recover (the daemon's open and fsck): when the last slot holds a
 * chain, or a frame a link was written behind, checks it whole. A chain that does not end as
 * the footer says, after a crash (crashed, or the footer was lost: r->torn), is cut to its
 * blocks that check, its header, end and footer written again (write), or r->ft says so in
 * memory; without a crash it is damage, left as it is (its block reads as EIO). Sets
 * r->chain_area when the last slot holds a chain that reads. */
fmt_error fmt2_chain_settle(int fd, fmt2_geo g, int write, int crashed, fmt2_recovery *r);

/* ---- page records (version 4, fmt2_rec.c, docs/FORMAT.md 9.11) ----
 * A small change of a block is stored as a record in the padding of the block's own slot,
 * behind its frame, instead of a new frame: records follow one another from the start of
 * the padding's payload, each bound to the one before it (the first to the frame's block
 * checksum), and a reader applies them in order onto the frame's content. */
#define FMT2_REC_MAGIC 0x43525046u          /* "FPRC" */
#define FMT2_REC_HEAD 24u                   /* magic, prev, group, off, len, word */
#define FMT2_REC_OVERHEAD 28u               /* head and checksum */
#define FMT2_REC_GROUP_MASK 0x7FFFFFFFu     /* groups count modulo 2^31 */
/* Where a reader that read a slot's frame finds what tells it whether records follow: the
 * frame's end (EndMark, content checksum), the padding header and a record's head. */
#define FMT2_REC_PROBE (FMT_FRAME_END_LEN + 8u + FMT2_REC_HEAD)

typedef struct {
    uint32_t room;                          /* the padding's payload size P; 0: no padding */
    uint32_t used;                          /* bytes of it the chain of records takes */
    uint32_t chain;                         /* what the next record's prev must be */
    uint32_t count;                         /* records in the chain */
} fmt2_rec_state;

/* Encodes a record of commit group `group` of the bytes raw[0, len) at offset off of a block
 * into out (room for FMT2_REC_OVERHEAD + LZ4_COMPRESSBOUND(len)), compressed when that makes
 * it smaller. Returns its length; *sum is its checksum, the next record's prev. */
size_t fmt2_rec_encode(uint8_t *out, uint32_t prev, uint32_t group, uint32_t off,
                       const uint8_t *raw, uint32_t len, uint32_t *sum);
/* The commit group the marker's flags word names (flags >> 1), and the word for group g
 * with the records flag set or not. */
static inline uint32_t fmt2_rec_group_of(uint32_t flags) { return flags >> 1; }
static inline uint32_t fmt2_rec_flags(uint32_t g, int records)
{
    return (g & FMT2_REC_GROUP_MASK) << 1 | (records ? FMT_MARKER_RECORDS : 0);
}
/* Whether a record of group g counts when the marker names group committed: g is not later
 * (modulo 2^31, within half of it). */
static inline int fmt2_rec_group_ok(uint32_t g, uint32_t committed)
{
    return ((committed - g) & FMT2_REC_GROUP_MASK) < (1u << 30);
}
/* The chain of records in a padding's payload area[0, avail) applied onto dst (the block's
 * blen decoded bytes; NULL: only walked), its first prev being the frame's block checksum
 * bsum, records of groups after `group` (the marker's) not counting. st->used, chain and
 * count say what it found; the chain ends at the first bytes that are not its next record.
 * FMT_ERR_CORRUPT only for a whole record (its checksum good) whose data do not decode to
 * what it says. */
fmt_error fmt2_rec_apply(const uint8_t *area, size_t avail, uint32_t bsum, uint32_t group,
                         uint8_t *dst, uint32_t blen, fmt2_rec_state *st);
/* The records of a slot whose frame ends at end (in the slot of a file whose slots hold
 * padding), read from fd and applied onto dst as fmt2_rec_apply does. probe holds the
 * probe_len (at most FMT2_REC_PROBE) bytes read from end - FMT_FRAME_END_LEN, NULL to read
 * them here; fewer than all at the end of the file. Records end at or before lim, the next
 * slot's start (9.11). */
fmt_error fmt2_rec_load(int fd, uint64_t end, uint64_t lim, const uint8_t *probe,
                        size_t probe_len,
                        uint32_t bsum, uint32_t group, uint8_t *dst, uint32_t blen,
                        fmt2_rec_state *st);
/* Where the walk's footer goes behind last block n - 1 (len bytes), whose frame ends at
 * frame_end: after its slot's padding when that reaches the next slot and records there
 * count (the writer keeps them while the footer's tail is the next slot), else at
 * frame_end. */
uint64_t fmt2_rec_tail(int fd, fmt2_geo g, uint64_t n, uint32_t len, uint64_t frame_end);

/* Zeroes [off, off+len) of the backing file, deallocating what it can. */
int fmt2_zero(int fd, uint64_t off, uint64_t len);

#endif
