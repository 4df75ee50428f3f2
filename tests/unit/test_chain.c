/* Unit tests of the chained last frame (format version 5, fs/fmt2_chain.c; docs/FORMAT.md
 * 9.12, 10.1 item 8, 11.4 step 3a): chains built link by link, as the writer makes them,
 * parse whole and decode back; and every state a crash can leave of a link (its block torn,
 * its end and footer lost, the header written alone, the first link behind a header that
 * still says FLG 0x7C, the footer gone) opens through fmt2_recover as the blocks that check,
 * with the frame's header, end and footer written again, or the same in memory when not
 * writing; and the same states of a link in a file that ends with a footer pair. Through
 * the per-file state (fs/ff_chain.c, fs/ff_tail.c): with the tail compressors' memory spent,
 * a file that appends takes the least recently used idle file's compressor and links, and
 * leaves a file in use (its lock taken) alone. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ff_internal.h"
#include "fixture.h"
#include "fmt2.h"

#define BS (64u << 10)
#define G fmt2_geo_of(FMT_VERSION_2, BS)  /* where its files' slots lie */
#define MAXL 8

/* A file of one block held as a chain: the data, where each of its blocks ends, and the
 * frame after each link (frames[k]: the blocks up to ends[k], whole). */
typedef struct {
    uint8_t *data;
    uint32_t ends[MAXL], n;
    uint8_t *frame;                    /* the frame after the last link */
    size_t frame_len;
    size_t area_at[MAXL];              /* the area after block k */
    char path[64];
    int fd;
} chain_case;

/* Builds the frame block by block with fmt2_chain_link, each link over the end of the one
 * before, as ff_chain_write does; compressed blocks reference the bytes before them. */
static void chain_build(chain_case *c, int random)
{
    c->data = fx_make_data(BS, random, 11, "request served in ms host app line ", 5);
    c->frame = calloc(1, BS + 1024);
    LZ4_stream_t *lz = LZ4_createStream();
    uint8_t *comp = malloc(LZ4_compressBound(BS));
    size_t at = FMT_FRAME_HEADER_LEN;
    for (uint32_t k = 0; k < c->n; k++) {
        uint32_t from = k ? c->ends[k - 1] : 0, n = c->ends[k] - from;
        int clen = LZ4_compress_fast_continue(lz, (const char *)c->data + from, (char *)comp,
                                              (int)n, LZ4_compressBound(BS), 1);
        assert_true(clen > 0);
        size_t link = fmt2_chain_link(c->frame + at, c->data + from, n, comp, (uint32_t)clen,
                                      XXH32(c->data, c->ends[k], 0));
        at += link - FMT_FRAME_END_LEN;
        c->area_at[k] = at - FMT_FRAME_HEADER_LEN;
    }
    fmt2_chain_head(c->frame, BS, c->ends[c->n - 1]);
    c->frame_len = at + FMT_FRAME_END_LEN;
    free(comp);
    LZ4_freeStream(lz);
}

/* The file: marker, the frame of n_links blocks in slot 0 (header saying len), and a footer
 * of size (0: none) right behind the frame's end. */
static void chain_file(chain_case *c, uint32_t blocks, uint32_t head_len, uint64_t size)
{
    snprintf(c->path, sizeof(c->path), "/tmp/test_chain.XXXXXX");
    c->fd = mkstemp(c->path);
    assert_true(c->fd >= 0);
    uint8_t m[FMT_MARKER_LEN], uuid[16] = {1, 2, 3};
    fmt2_marker_encode(FMT_VERSION_5, BS, 0, uuid, m);
    assert_int_equal(fmt_pwrite_all(c->fd, m, sizeof(m), 0), 0);
    size_t len = FMT_FRAME_HEADER_LEN + c->area_at[blocks - 1];
    uint8_t end[FMT_FRAME_END_LEN] = {0};
    fmt_put32(end + 4, XXH32(c->data, c->ends[blocks - 1], 0));
    uint8_t head[FMT_FRAME_HEADER_LEN];
    fmt2_chain_head(head, BS, head_len);
    assert_int_equal(fmt_pwrite_all(c->fd, head, sizeof(head), FMT_MARKER_LEN), 0);
    assert_int_equal(fmt_pwrite_all(c->fd, c->frame + FMT_FRAME_HEADER_LEN,
                                    len - FMT_FRAME_HEADER_LEN,
                                    FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN), 0);
    assert_int_equal(fmt_pwrite_all(c->fd, end, sizeof(end), FMT_MARKER_LEN + len), 0);
    if (size) {
        uint64_t tail = FMT_MARKER_LEN + len + FMT_FRAME_END_LEN;
        fmt2_footer ft = {size, 1, tail, 0, 0, 3, 0, 0};
        assert_int_equal(fmt2_footer_write(c->fd, tail, &ft), 0);
    }
}

static void chain_free(chain_case *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        unlink(c->path);
    }
    free(c->data);
    free(c->frame);
}

static uint64_t file_len(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return (uint64_t)st.st_size;
}

static void set_case(chain_case *c, uint32_t n, const uint32_t *ends)
{
    memset(c, 0, sizeof(*c));
    c->fd = -1, c->n = n;
    memcpy(c->ends, ends, n * sizeof(*ends));
}

static void expect_open_again(chain_case *c, uint32_t blocks);

/* The file opens (fmt2_recover, writing or not) as the first `blocks` blocks of the chain,
 * and, after a writing recovery, opens again whole without any repair. */
static void expect_open(chain_case *c, int write, uint32_t blocks, int fixed)
{
    fmt2_recovery r;
    uint64_t before = file_len(c->fd);
    assert_int_equal(fmt2_recover(c->fd, before, G, write, 0, 1, &r), FMT_OK);
    assert_int_equal(r.ft.n_blocks, 1);
    assert_int_equal(r.ft.size, c->ends[blocks - 1]);
    assert_int_equal(r.chain_area, c->area_at[blocks - 1]);
    assert_int_equal(r.chain_fixed, fixed);
    assert_int_equal(r.ft.tail, FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN + c->area_at[blocks - 1] +
                                    FMT_FRAME_END_LEN);
    fmt2_recovery_free(&r);
    if (!write) {
        assert_int_equal(file_len(c->fd), before);     /* nothing written */
        return;
    }
    expect_open_again(c, blocks);
}

/* After a writing recovery: the file opens whole without any repair, its frame the first
 * `blocks` blocks of the chain, decoding to the data. */
static void expect_open_again(chain_case *c, uint32_t blocks)
{
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(c->fd, file_len(c->fd), G, 1, 0, 1, &r), FMT_OK);
    assert_int_equal(r.chain_fixed, 0);
    assert_int_equal(r.settled, 0);
    assert_int_equal(r.ft.size, c->ends[blocks - 1]);
    fmt2_recovery_free(&r);
    /* the frame in the file is whole and decodes to the data */
    size_t flen = FMT_FRAME_HEADER_LEN + c->area_at[blocks - 1] + FMT_FRAME_END_LEN;
    uint8_t *buf = malloc(flen), *dec = malloc(BS);
    assert_int_equal(fmt_pread_all(c->fd, buf, flen, FMT_MARKER_LEN), 0);
    uint32_t len, fl;
    assert_int_equal(fmt2_chain_parse(buf, flen, BS, 1, &len, &fl), FMT_OK);
    assert_int_equal(fl, flen);
    fmt2_chain_info ci;
    assert_int_equal(fmt2_chain_decode(buf + FMT_FRAME_HEADER_LEN, flen - FMT_FRAME_HEADER_LEN, BS,
                                       dec, BS, 1, &ci), FMT_OK);
    assert_int_equal(ci.len, c->ends[blocks - 1]);
    assert_memory_equal(dec, c->data, ci.len);
    free(buf);
    free(dec);
}

static const uint32_t ENDS[] = {30000, 30061, 30200, 34000, 34001};

/* A file whose chain holds the first n of ENDS's blocks, of which the first `blocks` are on
 * disk under a header saying head_len and a footer of size (0: none). */
static void chain_setup(chain_case *c, uint32_t n, int random, uint32_t blocks, uint32_t head_len,
                        uint64_t size)
{
    set_case(c, n, ENDS);
    chain_build(c, random);
    chain_file(c, blocks, head_len, size);
}

/* A byte of the fifth block's data torn; returns where. */
static uint64_t tear_fifth(chain_case *c)
{
    uint8_t x = 0x55;
    uint64_t at = FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN + c->area_at[3] + 6;
    assert_int_equal(fmt_pwrite_all(c->fd, &x, 1, at), 0);
    return at;
}

static void test_chain_roundtrip(void **state)
{
    (void)state;
    for (int random = 0; random <= 1; random++) {
        chain_case c;
        set_case(&c, 5, ENDS);
        chain_build(&c, random);
        uint32_t len, fl;
        assert_int_equal(fmt2_chain_parse(c.frame, c.frame_len, BS, 1, &len, &fl), FMT_OK);
        assert_int_equal(len, ENDS[4]);
        assert_int_equal(fl, c.frame_len);
        uint8_t *dec = malloc(BS);
        fmt2_chain_info ci;
        assert_int_equal(fmt2_chain_prefix(c.frame, c.frame_len, BS, dec, &ci), FMT_OK);
        assert_int_equal(ci.blocks, 5);
        assert_int_equal(ci.len, ENDS[4]);
        assert_memory_equal(dec, c.data, ENDS[4]);
        /* a flipped byte in the last link: strict parse fails, the prefix stops before it */
        c.frame[FMT_FRAME_HEADER_LEN + c.area_at[3] + 4] ^= 1;
        assert_int_not_equal(fmt2_chain_parse(c.frame, c.frame_len, BS, 1, &len, &fl), FMT_OK);
        assert_int_equal(fmt2_chain_prefix(c.frame, c.frame_len, BS, dec, &ci), FMT_OK);
        assert_int_equal(ci.blocks, 4);
        assert_int_equal(ci.len, ENDS[3]);
        /* a content size that the blocks do not make: a checksum error, not a frame */
        c.frame[FMT_FRAME_HEADER_LEN + c.area_at[3] + 4] ^= 1;
        fmt2_chain_head(c.frame, BS, ENDS[4] - 1);
        assert_int_equal(fmt2_chain_parse(c.frame, c.frame_len, BS, 1, &len, &fl),
                         FMT_ERR_CHECKSUM);
        free(dec);
        chain_free(&c);
    }
}

/* A whole chain at rest: nothing to repair; read-only or not. */
static void test_chain_whole(void **state)
{
    (void)state;
    for (int write = 0; write <= 1; write++) {
        chain_case c;
        chain_setup(&c, 5, 0, 5, ENDS[4], ENDS[4]);
        expect_open(&c, write, 5, 0);
        chain_free(&c);
    }
}

/* The last link's block torn (a power loss kept part of its write): the four before it. */
static void test_chain_torn_link(void **state)
{
    (void)state;
    for (int write = 0; write <= 1; write++) {
        chain_case c;
        chain_setup(&c, 5, 0, 5, ENDS[4], ENDS[4]);
        tear_fifth(&c);
        expect_open(&c, write, 4, 1);
        chain_free(&c);
    }
}

/* The same damage in a file no crash caught (the clean mark says its last session ended
 * cleanly): damage, not a torn link; nothing is cut, the chain does not read. */
static void test_chain_damage_without_crash(void **state)
{
    (void)state;
    chain_case c;
    chain_setup(&c, 5, 0, 5, ENDS[4], ENDS[4]);
    uint64_t at = tear_fifth(&c), before = file_len(c.fd);
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(c.fd, before, G, 1, 0, 0, &r), FMT_OK);
    assert_int_equal(r.ft.size, ENDS[4]);
    assert_int_equal(r.chain_area, 0);
    assert_int_equal(r.chain_fixed, 0);
    assert_int_equal(r.settled, 0);
    assert_int_equal(file_len(c.fd), before);
    uint8_t back;
    assert_int_equal(fmt_pread_all(c.fd, &back, 1, at), 0);
    assert_int_equal(back, 0x55);
    fmt2_recovery_free(&r);
    chain_free(&c);
}

/* The header written, the link not (a kill between the two writes): the old blocks, whose
 * end and footer are still there, with the header put back. */
static void test_chain_header_alone(void **state)
{
    (void)state;
    chain_case c;
    chain_setup(&c, 5, 1, 4, ENDS[4], ENDS[3]);
    expect_open(&c, 1, 4, 1);
    chain_free(&c);
}

/* The link and footer written, the header not: the new blocks, the header put right. */
static void test_chain_link_alone(void **state)
{
    (void)state;
    chain_case c;
    chain_setup(&c, 5, 0, 5, ENDS[3], ENDS[4]);
    expect_open(&c, 1, 5, 1);
    chain_free(&c);
}

/* The first link behind a frame whose header still says FLG 0x7C (its header write lost):
 * both blocks count. */
static void test_chain_first_link_old_header(void **state)
{
    (void)state;
    chain_case c;
    chain_setup(&c, 2, 0, 2, ENDS[1], ENDS[1]);
    uint8_t head[FMT_FRAME_HEADER_LEN];
    fmt_frame_header(head, BS, ENDS[0], 1);            /* FLG 0x7C, the first block's size */
    assert_int_equal(fmt_pwrite_all(c.fd, head, sizeof(head), FMT_MARKER_LEN), 0);
    expect_open(&c, 1, 2, 1);
    chain_free(&c);
}

/* A power loss kept a link's footer and lost the links before it and every header write:
 * the slot holds the frame of 9.3 the block had before them, whole: that is the block. */
static void test_chain_links_lost(void **state)
{
    (void)state;
    chain_case c;
    chain_setup(&c, 5, 0, 1, ENDS[0], ENDS[4]);
    uint8_t head[FMT_FRAME_HEADER_LEN];
    fmt_frame_header(head, BS, ENDS[0], 1);
    assert_int_equal(fmt_pwrite_all(c.fd, head, sizeof(head), FMT_MARKER_LEN), 0);
    expect_open(&c, 1, 1, 1);
    chain_free(&c);
}

/* No footer (it went with a torn write): the walk takes the chain, whole or torn. */
static void test_chain_walk(void **state)
{
    (void)state;
    for (int torn = 0; torn <= 1; torn++) {
        chain_case c;
        chain_setup(&c, 5, 0, 5, ENDS[4], 0);
        uint8_t junk[40];
        memset(junk, 0xAB, sizeof(junk));
        assert_int_equal(fmt_pwrite_all(c.fd, junk, sizeof(junk), file_len(c.fd)), 0);
        if (torn)
            tear_fifth(&c);
        fmt2_recovery r;
        assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, 1, 0, 1, &r), FMT_OK);
        assert_int_equal(r.torn, 1);
        assert_int_equal(r.ft.size, ENDS[torn ? 3 : 4]);
        fmt2_recovery_free(&r);
        expect_open(&c, 1, torn ? 4 : 5, 0);
        chain_free(&c);
    }
}

/* A pair link (FORMAT.md 11.8): the chain's slot padded up to the pair's area, the two
 * halves padding, and the paired footer naming no journal in place 1 (place 0 empty), with
 * the size the header says. The open settles the pair and keeps the blocks that check; the
 * settled footer lies at the area, the end of the slot's padding. */
static void pair_file(chain_case *c, uint32_t blocks, uint64_t size)
{
    uint64_t fe = FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN + c->area_at[blocks - 1] +
                  FMT_FRAME_END_LEN;
    uint64_t area = fmt2_slot_off(G, 1), half = 1024;
    uint64_t eof = (area + 2 * half + 127) / 128 * 128 + 128;
    uint8_t pad[8 + 4] = {0};
    fmt2_pad_header(pad, area - fe);
    assert_int_equal(fmt_pwrite_all(c->fd, pad, sizeof(pad), fe), 0);
    fmt2_pad_header(pad, half);
    assert_int_equal(fmt_pwrite_all(c->fd, pad, 8, area), 0);
    fmt2_pad_header(pad, eof - 128 - area - half);
    assert_int_equal(fmt_pwrite_all(c->fd, pad, 8, area + half), 0);
    fmt2_footer ft = {size, 1, area, 0, 0, 7, 0, 1};
    assert_int_equal(fmt2_place_write(c->fd, eof, 0, NULL), 0);
    assert_int_equal(fmt2_place_write(c->fd, eof, 1, &ft), 0);
}

static void expect_pair_open(chain_case *c, uint32_t blocks, int fixed)
{
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(c->fd, file_len(c->fd), G, 1, 0, 1, &r), FMT_OK);
    assert_int_equal(r.ft.size, c->ends[blocks - 1]);
    assert_int_equal(r.ft.paired, 0);
    assert_int_equal(r.chain_fixed, fixed);
    uint64_t end = fixed ? FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN + c->area_at[blocks - 1] +
                               FMT_FRAME_END_LEN
                         : fmt2_slot_off(G, 1);
    assert_int_equal(r.ft.tail, end);
    assert_int_equal(file_len(c->fd), end + FMT2_FOOTER_LEN);
    fmt2_recovery_free(&r);
    expect_open_again(c, blocks);
}

static void test_chain_pair_link(void **state)
{
    (void)state;
    chain_case c;
    chain_setup(&c, 5, 0, 5, ENDS[4], 0);              /* whole: the pair settled */
    pair_file(&c, 5, ENDS[4]);
    expect_pair_open(&c, 5, 0);
    chain_free(&c);
    chain_setup(&c, 5, 0, 5, ENDS[4], 0);              /* the last link torn */
    pair_file(&c, 5, ENDS[4]);
    tear_fifth(&c);
    expect_pair_open(&c, 4, 1);
    chain_free(&c);
    chain_setup(&c, 5, 1, 4, ENDS[4], 0);              /* footer and header, not the link */
    pair_file(&c, 4, ENDS[4]);
    expect_pair_open(&c, 4, 1);
    chain_free(&c);
    chain_setup(&c, 5, 0, 5, ENDS[4], 0);              /* header and link, not the footer */
    pair_file(&c, 5, ENDS[3]);
    expect_pair_open(&c, 5, 1);
    chain_free(&c);
}

/* The link's write torn after the frame's end: the chain whole, the padding behind it to
 * the area missing, which lz4 -d needs: the open writes it back. */
static void test_chain_pair_pad_torn(void **state)
{
    (void)state;
    chain_case c;
    chain_setup(&c, 5, 0, 5, ENDS[4], 0);
    pair_file(&c, 5, ENDS[4]);
    uint64_t fe = FMT_MARKER_LEN + FMT_FRAME_HEADER_LEN + c.area_at[4] + FMT_FRAME_END_LEN;
    uint8_t zero[12] = {0}, pad[8];
    assert_int_equal(fmt_pwrite_all(c.fd, zero, sizeof(zero), fe), 0);
    fmt2_recovery r;
    assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, 0, 0, 1, &r), FMT_OK);
    assert_int_equal(r.chain_padded, 1);              /* found, not written */
    fmt2_recovery_free(&r);
    assert_int_equal(fmt_pread_all(c.fd, pad, sizeof(pad), fe), 0);
    assert_int_equal(fmt_get32(pad), 0);
    assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, 1, 0, 1, &r), FMT_OK);
    assert_int_equal(r.chain_padded, 1);
    assert_int_equal(r.ft.size, ENDS[4]);
    fmt2_recovery_free(&r);
    assert_int_equal(fmt_pread_all(c.fd, pad, sizeof(pad), fe), 0);
    assert_int_equal(fmt_get32(pad), FMT_SKIP_PAD);
    assert_int_equal(fmt_get32(pad + 4), fmt2_slot_off(G, 1) - fe - 8);
    assert_int_equal(fmt2_recover(c.fd, file_len(c.fd), G, 1, 0, 1, &r), FMT_OK);
    assert_int_equal(r.chain_padded, 0);
    fmt2_recovery_free(&r);
    chain_free(&c);
}

/* Two open files that were appended to, a tail compressor's memory for one: each append
 * is a link (ff_chain.c); the second file's takes the first's compressor, and with the
 * second in use (its lock held), the first's next append gets none and writes its block
 * whole. All read back. */
static void tail_file(fixture *fx, const char *path, const uint8_t *data, size_t n)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ff_file *f;
    assert_int_equal(ff_create(fx->env, fd, "t", &f), 0);
    assert_int_equal(ff_write(f, data, n, 0), 0);
    assert_int_equal(ff_release(f), 0);
}

static ff_file *tail_append(fixture *fx, ff_file *f, const char *path, const uint8_t *line,
                            size_t n, size_t at)
{
    if (!f)
        assert_int_equal(ff_open(fx->env, open(path, O_RDWR), "t", &f), 0);
    assert_int_equal(ff_write(f, line, n, (off_t)at), 0);
    assert_int_equal(ff_flush(f, 0), 0);
    return f;
}

static void test_tail_taken(void **state)
{
    (void)state;
    fixture *fx = fx_new(BS, "test_tail");
    /* room for one compressor: an env of its own with an eighth of mem_mb that small */
    ff_env_free(fx->env);
    sb_super sb;
    assert_int_equal(sb_init(&sb, BS), SB_OK);
    ff_options opt = {.mem_bytes = 8 * eng_tail_footprint(BS) + 8};
    fx->env = ff_env_new(fx->eng, &sb, &opt, NULL);
    assert_non_null(fx->env);
    char path2[sizeof(fx->path)] = "/tmp/test_tail_b.XXXXXX";
    close(mkstemp(path2));
    size_t n = BS + BS / 2, line = 40;
    uint8_t *data = fx_make_data(n + 4 * line, 0, 5, "GET /index.html 200 ms host ", 3);
    tail_file(fx, fx->path, data, n);
    tail_file(fx, path2, data, n);
    ff_stats s0, s1, s2;
    ff_env_stats(fx->env, &s0);
    ff_file *a = tail_append(fx, NULL, fx->path, data + n, line, n);
    ff_file *b = tail_append(fx, NULL, path2, data + n, line, n);
    ff_env_stats(fx->env, &s1);
    assert_int_equal(s1.chain_links - s0.chain_links, 2);
    assert_int_equal(s1.tail_taken - s0.tail_taken, 1);   /* b took a's */
    assert_null(a->tail);
    assert_non_null(b->tail);
    pthread_mutex_lock(&b->lock);                          /* b in use: not taken */
    tail_append(fx, a, fx->path, data + n + line, line, n + line);
    pthread_mutex_unlock(&b->lock);
    ff_env_stats(fx->env, &s2);
    assert_int_equal(s2.tail_taken, s1.tail_taken);
    assert_int_equal(s2.chain_links, s1.chain_links);      /* a's block written whole */
    assert_null(a->tail);
    assert_int_equal(ff_release(a), 0);
    assert_int_equal(ff_release(b), 0);
    fx_check_read(fx, O_RDONLY, data, n + 2 * line);
    fx_check_lz4f(fx, data, n + 2 * line);
    char keep[64];
    memcpy(keep, fx->path, sizeof(keep));
    memcpy(fx->path, path2, sizeof(fx->path));
    fx_check_read(fx, O_RDONLY, data, n + line);
    unlink(path2);
    memcpy(fx->path, keep, sizeof(fx->path));
    free(data);
    fx_free(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_roundtrip),
        cmocka_unit_test(test_chain_whole),
        cmocka_unit_test(test_chain_torn_link),
        cmocka_unit_test(test_chain_damage_without_crash),
        cmocka_unit_test(test_chain_header_alone),
        cmocka_unit_test(test_chain_link_alone),
        cmocka_unit_test(test_chain_first_link_old_header),
        cmocka_unit_test(test_chain_links_lost),
        cmocka_unit_test(test_chain_walk),
        cmocka_unit_test(test_chain_pair_link),
        cmocka_unit_test(test_chain_pair_pad_torn),
        cmocka_unit_test(test_tail_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
