/* Writes the seed corpora of the fuzz targets, made by the real writer (fs/ff_*.c, fs/sb.c):
 *
 *   fuzz_gen_corpus OUT_DIR      creates OUT_DIR/{fmt,repair,sb}/ seed files
 *
 * Backing files: empty, small, multi-block, raw, sparse, rewritten (retired frames and
 * reveal lists), caught mid-stream (hidden frames after the table), cut at several points,
 * with a damaged block, foreign (text and a plain .lz4 file) and of a newer version.
 * Superblocks: valid ones of each block size and damaged variants; sizes files (for the sb
 * target too). Kept small: 64K blocks of
 * compressible data. Run again only when the format changes; the corpus is checked in.
 *
 * The writer writes format version 3 only (version 2 with hole runs), so the backing files
 * it makes are named v3-* (a slot per block makes them about 64 KiB per block, however well
 * they compress; v3-own-sparse holds two hole runs). The seeds named v2-* were made by the
 * version 2 writer, those without a prefix by the version 1 writer; both stay in the
 * corpus, since files of every version must keep being read. Slot layout extras: a journal
 * left at rest (an in-place rewrite, one entry a hole), a commit caught between its footer
 * and its slot, cuts through footer, journal and slots, and files that end with the footer
 * pair. The chained last frame (version 5): a log appended a line per commit (a chain of
 * three blocks in its last slot), the same with its last link torn, and, for the fmt target
 * alone, chains of one and of three blocks on their own (v5-chain-frame-*, made by
 * fmt2_chain_head and fmt2_chain_link as the link writer makes them). */
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <lz4frame.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ffile.h"
#include "sizes.h"
#include "fmt.h"
#include "fmt2.h"

#define GC_BS (64u << 10)
#define GC_G fmt2_geo_of(FMT_VERSION_2, GC_BS)  /* where its files' slots lie */
#define GC_V "v3-"                      /* names of the files this writer makes */

typedef struct {
    const char *out;                   /* corpus root */
    eng_ctx *eng;
    lg_log *log;
    ff_env *env64, *env256;
} gc_ctx;

static void gc_die(const char *what)
{
    fprintf(stderr, "fuzz_gen_corpus: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void gc_save(const gc_ctx *c, const char *dir, const char *name, const void *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", c->out, dir);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        gc_die(path);
    snprintf(path, sizeof(path), "%s/%s/%s", c->out, dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(buf, 1, len, fp) != len || fclose(fp) != 0)
        gc_die(path);
}

/* A backing file seed goes to both file targets. */
static void gc_save_file(const gc_ctx *c, const char *name, const void *buf, size_t len)
{
    gc_save(c, "fmt", name, buf, len);
    gc_save(c, "repair", name, buf, len);
}

static uint8_t *gc_bytes(int fd, size_t *len)
{
    off_t end = lseek(fd, 0, SEEK_END);
    uint8_t *buf = malloc(end > 0 ? (size_t)end : 1);
    if (end < 0 || !buf || (end && fmt_pread_all(fd, buf, (size_t)end, 0) < 0))
        gc_die("read back");
    *len = (size_t)end;
    return buf;
}

/* Text-like bytes that compress well, different for each offset. */
static void gc_fill(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)("fpgalz4fs seed corpus line "[(i + seed) % 27] + ((i / 4096 + seed) % 3));
}

static void gc_random(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
}

static ff_file *gc_create(ff_env *env, int *fd)
{
    ff_file *f = NULL;
    *fd = memfd_create("seed", MFD_CLOEXEC);
    int dfd = *fd < 0 ? -1 : dup(*fd);
    if (dfd < 0 || ff_create(env, dfd, "seed", &f) != 0)
        gc_die("ff_create");
    return f;
}

static void gc_write(ff_file *f, const uint8_t *buf, size_t len, off_t off)
{
    if (ff_write(f, buf, len, off) != 0)
        gc_die("ff_write");
}

static void gc_close_save(const gc_ctx *c, ff_file *f, int fd, const char *name)
{
    size_t len;
    if (ff_release(f) != 0)
        gc_die("ff_release");
    uint8_t *b = gc_bytes(fd, &len);
    gc_save_file(c, name, b, len);
    free(b);
    close(fd);
}

/* Puts slots [first, last) of the file as it was (old) back into b, as a commit caught before
 * it rewrote them would have left them; either copy may be the longer. */
static void gc_old_slots(uint8_t *b, size_t len, const uint8_t *old, size_t old_len,
                         uint64_t first, uint64_t last)
{
    uint64_t end = old_len < len ? old_len : len;
    for (uint64_t i = first; i < last && fmt2_slot_off(GC_G, i) < end; i++) {
        uint64_t at = fmt2_slot_off(GC_G, i), n = fmt2_slot_len(GC_G);
        memcpy(b + at, old + at, at + n > end ? end - at : n);
    }
}

static void gc_simple(const gc_ctx *c)
{
    int fd;
    uint8_t *buf = malloc(5 * GC_BS);   /* the 256K file takes 300000 bytes */
    ff_file *f = gc_create(c->env64, &fd);
    gc_close_save(c, f, fd, GC_V "own-empty");
    f = gc_create(c->env64, &fd);
    gc_write(f, (const uint8_t *)"hello, fpgalz4fs\n", 17, 0);
    gc_close_save(c, f, fd, GC_V "own-small");
    f = gc_create(c->env64, &fd);
    gc_fill(buf, 3 * GC_BS + 1000, 1);
    gc_write(f, buf, 3 * GC_BS + 1000, 0);
    gc_close_save(c, f, fd, GC_V "own-blocks");
    f = gc_create(c->env64, &fd);
    gc_random(buf, 3000, 7);
    gc_write(f, buf, 3000, 0);
    gc_close_save(c, f, fd, GC_V "own-raw");
    f = gc_create(c->env64, &fd);
    gc_fill(buf, 5000, 3);
    gc_write(f, buf, 5000, 2 * GC_BS + 100);
    if (ff_truncate(f, 5 * GC_BS + 10) != 0)
        gc_die("ff_truncate");
    gc_close_save(c, f, fd, GC_V "own-sparse");
    f = gc_create(c->env256, &fd);
    gc_fill(buf, 300000, 5);
    gc_write(f, buf, 300000, 0);
    gc_close_save(c, f, fd, GC_V "own-256k");
    free(buf);
}

/* A file rewritten in the middle: its table carries reveal and retire lists. Also saves cut
 * copies of it and one with a damaged block. */
static void gc_rewritten(const gc_ctx *c)
{
    int fd;
    size_t len;
    uint8_t *buf = malloc(4 * GC_BS);
    ff_file *f = gc_create(c->env64, &fd);
    gc_fill(buf, 4 * GC_BS, 9);
    gc_write(f, buf, 4 * GC_BS, 0);
    if (ff_flush(f, 0) != 0)
        gc_die("ff_flush");
    gc_fill(buf, 2000, 11);
    gc_write(f, buf, 2000, GC_BS + 500);
    if (ff_release(f) != 0)
        gc_die("ff_release");
    uint8_t *b = gc_bytes(fd, &len);
    gc_save_file(c, GC_V "own-rewritten", b, len);
    static const size_t cuts[] = {FMT_MARKER_LEN, FMT_MARKER_LEN + 30, 0, 1, 20, 45};
    char name[64];
    for (size_t i = 0; i < sizeof(cuts) / sizeof(*cuts); i++) {
        size_t keep = i < 2 ? cuts[i] : cuts[i] == 0 ? len / 2 : len - cuts[i];
        snprintf(name, sizeof(name), GC_V "torn-rewritten-%zu", keep);
        gc_save_file(c, name, b, keep);
    }
    b[FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN + 4 + 3] ^= 0x40;   /* block 0's data */
    gc_save_file(c, GC_V "damaged-block", b, len);
    free(b);
    close(fd);
    free(buf);
}

/* An in-place rewrite of three blocks (one of them now zeros: a hole) whose journal stays at
 * rest; the same with the slots put back as they were (the commit stopped after its footer),
 * and cuts of it through the footer and the journal. */
static void gc_journal(const gc_ctx *c)
{
    int fd;
    size_t len, old_len;
    uint8_t *buf = malloc(3 * GC_BS + 500);
    ff_file *f = gc_create(c->env64, &fd);
    gc_fill(buf, 3 * GC_BS + 500, 31);
    gc_write(f, buf, 3 * GC_BS + 500, 0);
    if (ff_flush(f, 1) != 0)
        gc_die("ff_flush");
    uint8_t *old = gc_bytes(fd, &old_len);
    gc_fill(buf, 100, 33);
    gc_write(f, buf, 100, 10);
    memset(buf, 0, GC_BS);
    gc_write(f, buf, GC_BS, GC_BS);
    gc_write(f, buf, 7, 3 * GC_BS + 3);
    if (ff_release(f) != 0)
        gc_die("ff_release");
    uint8_t *b = gc_bytes(fd, &len);
    gc_save_file(c, GC_V "journal-at-rest", b, len);
    gc_old_slots(b, len, old, old_len, 0, 4);   /* tail, journal and footer stay new */
    gc_save_file(c, GC_V "interrupted-commit", b, len);
    static const size_t cuts[] = {1, 40, 64, 65, 200};
    char name[64];
    for (size_t i = 0; i < sizeof(cuts) / sizeof(*cuts); i++) {
        snprintf(name, sizeof(name), GC_V "interrupted-cut-%zu", cuts[i]);
        gc_save_file(c, name, b, len - cuts[i]);
    }
    free(b);
    free(old);
    close(fd);
    free(buf);
}

/* Durable rewrites in place, one after the other: the file ends with the footer pair
 * (FORMAT.md 9.10) while it is open. Saved as it is then, with the newer journal damaged (a
 * commit whose sync did not return), and with the slots put back as they were before both
 * commits (both journals to replay). */
#define GC_PAIR_CHANGE (GC_BS / 4 + 1000)

static void gc_pair(const gc_ctx *c)
{
    int fd;
    size_t len, old_len;
    uint8_t *buf = malloc(3 * GC_BS);
    ff_file *f = gc_create(c->env64, &fd);
    gc_fill(buf, 3 * GC_BS, 41);
    gc_write(f, buf, 3 * GC_BS, 0);
    if (ff_flush(f, 1) != 0)
        gc_die("ff_flush");
    uint8_t *old = gc_bytes(fd, &old_len), *mid = NULL;
    gc_save_file(c, GC_V "pair-opened", old, old_len);   /* its footer names no journal */
    /* changes larger than a page record takes (a quarter of a block), so that each durable
     * commit goes through the pair's journal (FORMAT.md 9.11, 11.6) */
    for (int k = 0; k < 3; k++) {
        gc_fill(buf, GC_PAIR_CHANGE, 43 + (uint64_t)k);
        gc_write(f, buf, GC_PAIR_CHANGE, (off_t)(GC_BS + 1000 * (uint64_t)k));
        if (k == 1)
            gc_write(f, buf, GC_PAIR_CHANGE, 2 * GC_BS + 7);
        if (ff_flush(f, 1) != 0)
            gc_die("ff_flush");
        if (k == 1)
            mid = gc_bytes(fd, &len);
    }
    uint8_t *b = gc_bytes(fd, &len);
    gc_save_file(c, GC_V "pair-open", b, len);
    /* both places full: the commit before's footer not yet cleared (FORMAT.md 11.6 step 6) */
    for (size_t i = len - FMT2_PAIR_LEN; i < len; i++)
        b[i] |= mid[i];
    gc_save_file(c, GC_V "pair-two-footers", b, len);
    free(mid);
    gc_old_slots(b, len, old, old_len, 1, 3);
    gc_save_file(c, GC_V "pair-interrupted", b, len);
    fmt2_footer pl[2];
    int n = 0;
    if (fmt2_pair_read(fd, len, GC_G, pl, &n) != FMT_OK || n < 1)
        gc_die("no footer pair");
    b[pl[n - 1].j_off + pl[n - 1].j_len / 2] ^= 0x40;
    gc_save_file(c, GC_V "pair-newer-torn", b, len);
    free(b);
    free(old);
    gc_close_save(c, f, fd, GC_V "pair-released");
    free(buf);
}

/* An appending writer caught between streaming commits: hidden frames after the table. */
static void gc_streaming(const gc_ctx *c)
{
    int fd;
    size_t len;
    uint8_t *buf = malloc(GC_BS);
    ff_file *f = gc_create(c->env64, &fd);
    for (unsigned i = 0; i < 10; i++) {
        gc_fill(buf, GC_BS, 20 + i);
        gc_write(f, buf, GC_BS, (off_t)i * GC_BS);
    }
    uint8_t *b = gc_bytes(fd, &len);
    gc_save_file(c, GC_V "torn-streaming", b, len);
    gc_save_file(c, GC_V "torn-streaming-cut", b, len - 7);
    free(b);
    gc_close_save(c, f, fd, GC_V "own-streamed");
    free(buf);
}

/* A frame of 9.12 holding the n bytes at src in blocks ending at ends[0..k), the first
 * compressed alone, each later one with the bytes before it as its dictionary (what the tail
 * compressor does for a link), raw where that is not smaller. Returns its length. */
static size_t gc_chain_frame(uint8_t *out, const uint8_t *src, const uint32_t *ends, int k)
{
    uint8_t comp[8192];
    LZ4_stream_t *st = LZ4_createStream();
    size_t at = FMT_FRAME_HEADER_LEN;
    uint32_t pos = 0;
    if (!st)
        gc_die("LZ4_createStream");
    fmt2_chain_head(out, GC_BS, ends[k - 1]);
    for (int j = 0; j < k; j++) {
        uint32_t n = ends[j] - pos, dict = pos < 65536u ? pos : 65536u;
        int comp_len;
        if (j == 0) {
            comp_len = LZ4_compress_default((const char *)src, (char *)comp, (int)n, sizeof(comp));
        } else {
            LZ4_loadDict(st, (const char *)src + pos - dict, (int)dict);
            comp_len = LZ4_compress_fast_continue(st, (const char *)src + pos, (char *)comp,
                                                  (int)n, sizeof(comp), 1);
        }
        if (comp_len <= 0)
            gc_die("LZ4 compression");
        at += fmt2_chain_link(out + at, src + pos, n, comp, (uint32_t)comp_len,
                              XXH32(src, ends[j], 0)) - FMT_FRAME_END_LEN;
        pos = ends[j];
    }
    LZ4_freeStream(st);
    return at + FMT_FRAME_END_LEN;
}

/* Appends closed one at a time (a log's >> lines): from the second on, each a link of the
 * last block's chain. Saved as it is, with its last link torn (the frame's end and the
 * footer not written), and chains alone, of one block and of three (the second compressed
 * with the first as its dictionary, the third raw bytes). */
static void gc_chain(const gc_ctx *c)
{
    int fd;
    size_t len;
    uint8_t line[64], buf[4096 + 3 * 64], frame[sizeof(buf) + 128];
    ff_file *f = gc_create(c->env64, &fd);
    gc_fill(buf, 3000, 51);
    gc_write(f, buf, 3000, 0);
    uint64_t end = 3000;
    for (int k = 0; k < 3; k++) {
        if (ff_flush(f, 0) != 0)
            gc_die("ff_flush");
        int n = snprintf((char *)line, sizeof(line), "appended line %d, closed at once\n", k);
        gc_write(f, line, (size_t)n, (off_t)end);
        end += (uint64_t)n;
    }
    if (ff_release(f) != 0)
        gc_die("ff_release");
    uint8_t *b = gc_bytes(fd, &len);
    uint32_t clen = 0, flen = 0;
    if (fmt2_chain_parse(b + fmt2_slot_off(GC_G, 0), len - fmt2_slot_off(GC_G, 0), GC_BS, 1,
                         &clen, &flen) != FMT_OK || clen != end)
        gc_die("the appends made no chain");
    gc_save_file(c, "v5-chain-appended", b, len);
    /* the last link torn in its block checksum, the frame's end and the footer lost */
    gc_save_file(c, "v5-chain-torn", b, fmt2_slot_off(GC_G, 0) + flen - 10);
    free(b);
    close(fd);
    gc_fill(buf, 4096 + 64, 53);
    gc_random(buf + 4096 + 64, 2 * 64, 55);
    static const uint32_t one[] = {4000}, three[] = {4096, 4096 + 64, 4096 + 3 * 64};
    gc_save(c, "fmt", "v5-chain-frame-1", frame, gc_chain_frame(frame, buf, one, 1));
    gc_save(c, "fmt", "v5-chain-frame-3", frame, gc_chain_frame(frame, buf, three, 3));
}

static void gc_foreign(const gc_ctx *c)
{
    static const char text[] = "just a plain file, not one of ours\n";
    gc_save_file(c, "foreign-text", text, sizeof(text) - 1);
    gc_save_file(c, "foreign-empty", "", 0);
    uint8_t src[5000], dst[8192];
    gc_fill(src, sizeof(src), 2);
    LZ4F_preferences_t prefs = {.frameInfo = {.contentChecksumFlag = LZ4F_contentChecksumEnabled}};
    size_t n = LZ4F_compressFrame(dst, sizeof(dst), src, sizeof(src), &prefs);
    if (LZ4F_isError(n))
        gc_die("LZ4F_compressFrame");
    gc_save_file(c, "foreign-lz4", dst, n);
    /* an own marker of a newer version, then the small file's rest */
    int fd;
    ff_file *f = gc_create(c->env64, &fd);
    gc_write(f, (const uint8_t *)"newer\n", 6, 0);
    if (ff_release(f) != 0)
        gc_die("ff_release");
    uint8_t *b = gc_bytes(fd, &n);
    fmt_put32(b + 31, FMT_VERSION + 1);
    gc_save_file(c, GC_V "newer-version", b, n);
    free(b);
    close(fd);
}

static void gc_superblocks(const gc_ctx *c)
{
    static const uint32_t sizes[] = {64u << 10, 256u << 10, 1u << 20, 4u << 20};
    char text[SB_MAX_TEXT], name[64];
    size_t n = 0;
    for (size_t i = 0; i < 4; i++) {
        sb_super sb;
        if (sb_init(&sb, sizes[i]) != SB_OK || !(n = sb_format(&sb, text, sizeof(text))))
            gc_die("sb_format");
        snprintf(name, sizeof(name), "valid-%s", sb_block_size_name(sizes[i]));
        gc_save(c, "sb", name, text, n);
    }
    gc_save(c, "sb", "torn", text, n / 2);
    text[40] ^= 1;
    gc_save(c, "sb", "bad-checksum", text, n);
    static const char newer[] = "format_version=2\nsome_future_key=1\n";
    char buf[256];
    int len = snprintf(buf, sizeof(buf), "%schecksum=%08x\n", newer,
                       (unsigned)XXH32(newer, sizeof(newer) - 1, 0));
    gc_save(c, "sb", "newer", buf, (size_t)len);
    static const char dup[] = "format_version=1\nblock_size=65536\nblock_size=65536\n"
                              "uuid=aeb7abff-6f26-4ef1-9726-0b979f62fb74\ncreated=-5\n";
    len = snprintf(buf, sizeof(buf), "%schecksum=%08x", dup, (unsigned)XXH32(dup, sizeof(dup) - 1, 0));
    gc_save(c, "sb", "duplicate-key", buf, (size_t)len);
}

/* Sizes files (fs/sizes.c) for the sb target: empty, three entries, and a cut one. */
static void gc_sizes(const gc_ctx *c)
{
    sz_cache *z = sz_new(64);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!z || sz_export(z, 1, &buf, &len) != SZ_OK)
        gc_die("sz_export");
    gc_save(c, "sb", "sizes-empty", buf, len);
    free(buf);
    for (int i = 0; i < 3; i++) {
        struct stat st = {0};
        st.st_dev = 1, st.st_ino = (ino_t)(12 + i), st.st_size = 123 + 4096 * i;
        st.st_ctim.tv_sec = 1795000000 + i, st.st_ctim.tv_nsec = 5000 * i;
        sz_put(z, &st, (uint64_t)(10 + 70000 * i));
    }
    if (sz_export(z, 1, &buf, &len) != SZ_OK)
        gc_die("sz_export");
    gc_save(c, "sb", "sizes-three", buf, len);
    gc_save(c, "sb", "sizes-cut", buf, len - 20);
    free(buf);
    sz_free(z);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gen_corpus OUT_DIR\n");
        return 2;
    }
    gc_ctx c = {.out = argv[1]};
    char err[256];
    eng_config cfg = {.backend = ENG_BACKEND_SW, .sw_threads = 1};
    sb_super sb64, sb256;
    ff_options opt = {.mem_bytes = 64u << 20};
    if (mkdir(c.out, 0755) < 0 && errno != EEXIST)
        gc_die(c.out);
    if (!(c.eng = eng_open(&cfg, err, sizeof(err))) || !(c.log = lg_open(NULL, 1, "gen")) ||
        sb_init(&sb64, 64u << 10) != SB_OK || sb_init(&sb256, 256u << 10) != SB_OK)
        gc_die("set-up");
    c.env64 = ff_env_new(c.eng, &sb64, &opt, c.log);
    c.env256 = ff_env_new(c.eng, &sb256, &opt, c.log);
    if (!c.env64 || !c.env256)
        gc_die("ff_env_new");
    gc_simple(&c);
    gc_rewritten(&c);
    gc_journal(&c);
    gc_pair(&c);
    gc_streaming(&c);
    gc_chain(&c);
    gc_foreign(&c);
    gc_superblocks(&c);
    gc_sizes(&c);
    ff_env_free(c.env64);
    ff_env_free(c.env256);
    eng_close(c.eng);
    lg_close(c.log);
    return 0;
}
