/* A growing block compressed incrementally (eng_tail.h says why and how). The LZ4 block
 * format this relies on: each sequence is a token (high nibble: literal count, 15 = more
 * bytes follow, each added, 255 = yet another), the literals, then, except in the last
 * sequence, a 2-byte offset and the match length's extra bytes (low nibble 15 = more bytes
 * follow as for literals). */
#include "eng_tail.h"

#include <errno.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY   /* XXH32_state_t on the stack */
#include <xxhash.h>

#define ET_MAX_CAP (64u << 20)
/* Small appends compress worse than one pass over the whole (each ends in at least 5
 * literals, and a match cannot start in its last 12 bytes): the block is compressed from
 * scratch again once it has grown by this much or by as much as it held then, and when it
 * is full. That bounds the loss to the bytes added since, at an amortized cost of about
 * two compressions per byte. */
#define ET_REFRESH (64u << 10)
#define ET_MAX_ROOM 64u

struct eng_tail_s {
    uint32_t cap;
    uint8_t *raw;                      /* the input so far, at a fixed address: the LZ4
                                          stream refers to it as the next input's prefix */
    uint32_t raw_len;                  /* 0: nothing yet (or a failure: start over) */
    uint32_t fresh_len;                /* raw_len at the last compression from scratch */
    int comp_ok;                       /* comp is the block of raw[0, raw_len); 0 after
                                          eng_tail_adopt, until a fresh compression */
    uint8_t *comp_mem;                 /* lead bytes of room, then comp */
    uint8_t *comp;                     /* the block of raw[0, raw_len), trail bytes of room
                                          past its end (comp_cap counts neither room) */
    uint32_t comp_len, comp_cap;
    uint32_t last_seq;                 /* where comp's last (literals-only) sequence starts */
    uint32_t last_lits;                /* its literal count: raw's last last_lits bytes */
    uint8_t *scratch;                  /* the added bytes' own linked block */
    uint32_t scratch_cap, scratch_len; /* scratch_len: that block's length, 0: none made by
                                          the last call */
    LZ4_stream_t *lz;                  /* positioned after raw[0, raw_len) */
    XXH32_state_t *raw_st;             /* over raw[0, raw_len) */
    XXH32_state_t *comp_st;            /* over comp[0, last_seq): the part that never
                                          changes again */
};

typedef struct {
    uint32_t start;                    /* the token's offset */
    uint32_t lits;                     /* literal count */
    uint32_t lit_at;                   /* the literals' offset */
    uint32_t end;                      /* offset after the whole sequence */
    int last;                          /* literals only: the block ends with it */
} et_seq;

/* Reads the sequence at *at; 0, or -1 when the block is malformed there. */
static int et_seq_read(const uint8_t *b, uint32_t len, uint32_t at, et_seq *s)
{
    if (at >= len)
        return -1;
    uint8_t token = b[at];
    uint32_t p = at + 1;
    uint64_t lits = token >> 4;
    if (lits == 15) {
        uint8_t more;
        do {
            if (p >= len)
                return -1;
            more = b[p++];
            lits += more;
        } while (more == 255);
    }
    if (lits > len - p)
        return -1;
    *s = (et_seq){at, (uint32_t)lits, p, p + (uint32_t)lits, 0};
    if (s->end == len) {
        s->last = 1;
        return (token & 15) == 0 ? 0 : -1;
    }
    p = s->end + 2;
    if ((token & 15) == 15) {
        uint8_t more;
        do {
            if (p >= len)
                return -1;
            more = b[p++];
        } while (more == 255);
    }
    if (p > len)
        return -1;
    s->end = p;
    return 0;
}

/* The last sequence of b[from, len), from being the start of a sequence. */
static int et_last_seq(const uint8_t *b, uint32_t len, uint32_t from, et_seq *s)
{
    for (uint32_t at = from;; at = s->end) {
        if (et_seq_read(b, len, at, s) < 0)
            return -1;
        if (s->last)
            return 0;
    }
}

static uint32_t et_put_lits_len(uint8_t *out, uint32_t lits)
{
    uint32_t n = 0;
    for (lits -= 15; lits >= 255; lits -= 255)
        out[n++] = 255;
    out[n++] = (uint8_t)lits;
    return n;
}

size_t eng_tail_footprint(uint32_t cap)
{
    return (size_t)cap + 2 * ((size_t)LZ4_compressBound((int)cap) + 64) + 2 * ET_MAX_ROOM +
           sizeof(LZ4_stream_t);
}

eng_tail *eng_tail_new(uint32_t cap, uint32_t lead, uint32_t trail)
{
    if (cap == 0 || cap > ET_MAX_CAP || lead > ET_MAX_ROOM || trail > ET_MAX_ROOM)
        return NULL;
    eng_tail *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->cap = cap;
    /* the merged block may exceed one compression's bound by a sequence header */
    t->comp_cap = (uint32_t)LZ4_compressBound((int)cap) + 64;
    t->scratch_cap = t->comp_cap;
    t->raw = malloc(cap);
    t->comp_mem = malloc((size_t)lead + t->comp_cap + trail);
    t->comp = t->comp_mem ? t->comp_mem + lead : NULL;
    t->scratch = malloc(t->scratch_cap);
    t->lz = LZ4_createStream();
    t->raw_st = XXH32_createState();
    t->comp_st = XXH32_createState();
    if (!t->raw || !t->comp || !t->scratch || !t->lz || !t->raw_st || !t->comp_st) {
        eng_tail_free(t);
        return NULL;
    }
    return t;
}

void eng_tail_free(eng_tail *t)
{
    if (!t)
        return;
    free(t->raw);
    free(t->comp_mem);
    free(t->scratch);
    if (t->lz)
        LZ4_freeStream(t->lz);
    XXH32_freeState(t->raw_st);
    XXH32_freeState(t->comp_st);
    free(t);
}

void eng_tail_reset(eng_tail *t)
{
    t->raw_len = 0;
}

const uint8_t *eng_tail_input(const eng_tail *t, uint32_t *len)
{
    *len = t->raw_len;
    return t->raw_len ? t->raw : NULL;
}

/* Takes the block's last sequence as the point where the next call continues. */
static int et_mark_last(eng_tail *t, uint32_t from)
{
    et_seq s;
    if (et_last_seq(t->comp, t->comp_len, from, &s) < 0)
        return -1;
    XXH32_update(t->comp_st, t->comp + t->last_seq, s.start - t->last_seq);
    t->last_seq = s.start;
    t->last_lits = s.lits;
    return 0;
}

static int et_fresh(eng_tail *t, const uint8_t *src, uint32_t len)
{
    memcpy(t->raw, src, len);
    LZ4_resetStream_fast(t->lz);
    int n = LZ4_compress_fast_continue(t->lz, (const char *)t->raw, (char *)t->comp, (int)len,
                                       (int)t->comp_cap, 1);
    if (n <= 0)
        return -1;
    t->comp_len = (uint32_t)n;
    t->last_seq = 0;
    XXH32_reset(t->raw_st, 0);
    XXH32_update(t->raw_st, t->raw, len);
    XXH32_reset(t->comp_st, 0);
    t->raw_len = t->fresh_len = len;
    t->comp_ok = 1;
    return et_mark_last(t, 0);
}

/* Appends added[0, add) to the input and compresses it alone, linked to the input before
 * it: the added bytes' own block, in scratch. */
static int et_grow_piece(eng_tail *t, const uint8_t *added, uint32_t add)
{
    memcpy(t->raw + t->raw_len, added, add);
    int n = LZ4_compress_fast_continue(t->lz, (const char *)t->raw + t->raw_len,
                                       (char *)t->scratch, (int)add, (int)t->scratch_cap, 1);
    if (n <= 0)
        return -1;
    t->scratch_len = (uint32_t)n;
    XXH32_update(t->raw_st, t->raw + t->raw_len, add);
    t->raw_len += add;
    return 0;
}

/* Appends added[0, add): its linked block, and (unless the input was adopted without its
 * block) the block of the whole, whose new first sequence takes the old last literals in
 * front of the piece's own. */
static int et_grow(eng_tail *t, const uint8_t *added, uint32_t add)
{
    et_seq first;
    if (et_grow_piece(t, added, add) < 0)
        return -1;
    if (!t->comp_ok)
        return 0;
    uint32_t n = t->scratch_len, old_end = t->raw_len - add;
    if (et_seq_read(t->scratch, n, 0, &first) < 0)
        return -1;
    uint32_t lits = t->last_lits + first.lits, at = t->last_seq;
    uint32_t need = at + 2 + lits / 255 + t->last_lits + (n - first.lit_at);
    if (need > t->comp_cap)
        return -1;
    uint8_t *out = t->comp;
    uint8_t token = (uint8_t)((lits < 15 ? lits : 15) << 4 | (t->scratch[0] & 15));
    out[at++] = token;
    if (lits >= 15)
        at += et_put_lits_len(out + at, lits);
    memcpy(out + at, t->raw + old_end - t->last_lits, t->last_lits);
    at += t->last_lits;
    memcpy(out + at, t->scratch + first.lit_at, n - first.lit_at);
    t->comp_len = at + (n - first.lit_at);
    return et_mark_last(t, t->last_seq);
}

/* What a call returns: the block, its checksums, the piece it compressed alone. */
static int et_out(eng_tail *t, int rc, uint32_t reused, eng_tail_out *out)
{
    if (rc < 0) {
        t->raw_len = 0;
        return -EIO;
    }
    *out = (eng_tail_out){NULL, 0, 0, XXH32_digest(t->raw_st), reused,
                          t->scratch_len ? t->scratch : NULL, t->scratch_len};
    if (t->comp_ok) {
        XXH32_state_t st;
        XXH32_copyState(&st, t->comp_st);
        XXH32_update(&st, t->comp + t->last_seq, t->comp_len - t->last_seq);
        out->comp = t->comp, out->comp_len = t->comp_len, out->comp_sum = XXH32_digest(&st);
    }
    return 0;
}

int eng_tail_compress(eng_tail *t, const uint8_t *src, uint32_t len, eng_tail_out *out)
{
    if (len == 0 || len > t->cap)
        return -EINVAL;
    uint32_t reused = 0;
    int rc = 0;
    t->scratch_len = 0;
    int cont = t->raw_len && t->comp_ok && t->raw_len <= len &&
               memcmp(src, t->raw, t->raw_len) == 0;
    uint32_t grown = len - t->fresh_len;
    int refresh = len == t->cap || grown >= (t->fresh_len > ET_REFRESH ? t->fresh_len : ET_REFRESH);
    if (cont && len == t->raw_len)
        reused = len;
    else if (cont && !refresh)
        reused = t->raw_len, rc = et_grow(t, src + t->raw_len, len - t->raw_len);
    else
        rc = et_fresh(t, src, len);
    return et_out(t, rc, reused, out);
}

int eng_tail_adopt(eng_tail *t, const uint8_t *src, uint32_t len)
{
    if (len == 0 || len > t->cap)
        return -EINVAL;
    uint32_t dict = len < (64u << 10) ? len : 64u << 10;
    memcpy(t->raw, src, len);
    LZ4_resetStream_fast(t->lz);
    LZ4_loadDict(t->lz, (const char *)t->raw + len - dict, (int)dict);
    XXH32_reset(t->raw_st, 0);
    XXH32_update(t->raw_st, t->raw, len);
    t->raw_len = t->fresh_len = len;
    t->comp_ok = 0;
    t->scratch_len = 0;
    return 0;
}

int eng_tail_extend(eng_tail *t, const uint8_t *added, uint32_t n, eng_tail_out *out)
{
    if (t->raw_len == 0 || n == 0 || n > t->cap - t->raw_len)
        return -EINVAL;
    t->scratch_len = 0;
    uint32_t reused = t->raw_len;
    return et_out(t, et_grow(t, added, n), reused, out);
}
