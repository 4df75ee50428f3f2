#!/usr/bin/env python3
"""A reader of fpgalz4fs backing files of versions 2 to 7 (docs/FORMAT.md Part II),
written from docs/FORMAT.md alone, without the sources under fs/: it checks that the
document says enough for an outside reader (t_records runs it on files that hold page
records; version 5's chained last frame, 9.12, is decoded as its linked blocks). A change
of the format changes the document first, then this reader from it.
Usage: fmt_reader.py [--strict] BACKING > content
--strict: no in-memory recovery of a torn chain (11.4 step 3a, 10.1 step 8): a last slot
whose chain is not whole reads as damaged (EIO).
Exit status: 0 read; 3 newer version; 4 version 1; 5 some block is damaged (EIO, its bytes
shown as zeros); 6 read, but only after the in-memory recovery of a torn chain (11.4 step
3a: not a file at rest)."""
import os
import struct
import sys

# ---------------------------------------------------------------- XXH32
P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def xxh32(data, seed=0):
    data = bytes(data)
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + P1 + P2) & M32
        v2 = (seed + P2) & M32
        v3 = seed & M32
        v4 = (seed - P1) & M32
        nstripes = n // 16
        words = struct.unpack_from('<%dI' % (nstripes * 4), data, 0)
        for k in range(0, nstripes * 4, 4):
            v1 = (_rotl((v1 + words[k] * P2) & M32, 13) * P1) & M32
            v2 = (_rotl((v2 + words[k + 1] * P2) & M32, 13) * P1) & M32
            v3 = (_rotl((v3 + words[k + 2] * P2) & M32, 13) * P1) & M32
            v4 = (_rotl((v4 + words[k + 3] * P2) & M32, 13) * P1) & M32
        i = nstripes * 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & M32
    else:
        h = (seed + P5) & M32
    h = (h + n) & M32
    while i + 4 <= n:
        (w,) = struct.unpack_from('<I', data, i)
        h = (_rotl((h + w * P3) & M32, 17) * P4) & M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * P5) & M32, 11) * P1) & M32
        i += 1
    h ^= h >> 15
    h = (h * P2) & M32
    h ^= h >> 13
    h = (h * P3) & M32
    h ^= h >> 16
    return h


# ---------------------------------------------------------------- LZ4 block
class Corrupt(Exception):
    pass


def lz4_block_decode_into(src, out, limit):
    """Decode one raw LZ4 block, appending to the bytearray out, which may already hold
    bytes: they are the block's dictionary (a match offset may reach back past the start
    of this block's output into them, as linked blocks and LZ4_decompress_safe_usingDict
    with the dictionary right before the output allow; a 16-bit offset reaches at most
    65,535 bytes back). out never grows past limit bytes: anything else is Corrupt.
    Returns how many bytes this block decoded to."""
    src = bytes(src)
    n = len(src)
    start0 = len(out)
    i = 0
    while True:
        if i >= n:
            raise Corrupt('lz4: truncated')
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                if i >= n:
                    raise Corrupt('lz4: truncated literal length')
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        if i + lit > n:
            raise Corrupt('lz4: literals past input')
        if len(out) + lit > limit:
            raise Corrupt('lz4: output too long')
        out += src[i:i + lit]
        i += lit
        if i == n:
            break  # last sequence: literals only
        if i + 2 > n:
            raise Corrupt('lz4: truncated offset')
        off = src[i] | (src[i + 1] << 8)
        i += 2
        if off == 0 or off > len(out):
            raise Corrupt('lz4: bad offset')
        ml = token & 15
        if ml == 15:
            while True:
                if i >= n:
                    raise Corrupt('lz4: truncated match length')
                b = src[i]
                i += 1
                ml += b
                if b != 255:
                    break
        ml += 4
        if len(out) + ml > limit:
            raise Corrupt('lz4: output too long')
        start = len(out) - off
        if off >= ml:
            out += out[start:start + ml]
        else:
            while ml > 0:
                chunk = out[start:start + min(off, ml)]
                out += chunk
                ml -= len(chunk)
                start += len(chunk)
    return len(out) - start0


def lz4_block_decompress(src, out_len):
    """LZ4_decompress_safe into exactly out_len bytes; anything else: Corrupt."""
    out = bytearray()
    lz4_block_decode_into(src, out, out_len)
    if len(out) != out_len:
        raise Corrupt('lz4: decoded %d bytes, want %d' % (len(out), out_len))
    return bytes(out)


# ---------------------------------------------------------------- constants
LZ4_MAGIC = 0x184D2204
SKIP_MARKER = 0x184D2A5A
SKIP_PAD = 0x184D2A59
SKIP_FOOTER2 = 0x184D2A5E
SKIP_JOURNAL = 0x184D2A5F
FPLZ = 0x5A4C5046
REC_MAGIC = 0x43525046
BS_CODE = {65536: 4, 262144: 5, 1048576: 6, 4194304: 7}
MAX_VERSION = 7
FLG_FRAME = 0x7C   # 9.3: independent blocks
FLG_CHAIN = 0x5C   # 9.12: linked blocks (version 5)


def u32(b, o):
    return struct.unpack_from('<I', b, o)[0]


def u64(b, o):
    return struct.unpack_from('<Q', b, o)[0]


class F:
    def __init__(self, path):
        self.fh = open(path, 'rb')
        self.len = os.fstat(self.fh.fileno()).st_size

    def read(self, off, n):
        if off < 0 or n < 0 or off >= self.len:
            return b''
        self.fh.seek(off)
        return self.fh.read(n)


def hc_of(hdr4_13):
    return (xxh32(hdr4_13) >> 8) & 0xFF


# ---------------------------------------------------------------- frame parse
def parse_frame_header(b, bs, bd_code):
    """b: at least 19 bytes at the frame start. returns (cs, S, raw) or None."""
    if len(b) < 19:
        return None
    if u32(b, 0) != LZ4_MAGIC or b[4] != 0x7C or b[5] != (bd_code << 4):
        return None
    if b[14] != hc_of(b[4:14]):
        return None
    cs = u64(b, 6)
    w = u32(b, 15)
    S = w & 0x7FFFFFFF
    raw = bool(w >> 31)
    return cs, S, raw


def decode_chain_blocks(b, bs, want_len=None):
    """9.12 decoding of the linked blocks of a chain whose frame starts at b[0] (b: the
    slot's bytes, up to slot_len or the end of the file). Blocks start at 15.
    want_len given (a whole chain, 9.12 / 10 step 5): decode up to the EndMark, require
    every block checksum, every block to decode to >= 1 byte, pos = want_len at the
    EndMark, the content checksum, and the frame within bs + 31 bytes; returns
    (content, A, k) or raises Corrupt.
    want_len None (what a torn link leaves, 11.4 step 3a): take blocks until the first
    whose stored size is 0 or above bs, that does not lie in b, whose checksum fails, that
    does not decode, or that would make the decoded length reach bs; returns
    (content, A, k) of the blocks taken (k may be 0)."""
    strict = want_len is not None
    limit = want_len if strict else bs - 1
    out = bytearray()
    at = 15
    k = 0

    def stop(msg):
        if strict:
            raise Corrupt('chain block %d: %s' % (k + 1, msg))

    while True:
        if at + 4 > len(b):
            stop('no size word or EndMark within the slot')
            break
        w = u32(b, at)
        if w == 0:
            if not strict:
                break
            if k == 0:
                raise Corrupt('chain: EndMark before any block (k >= 1)')
            break
        S = w & 0x7FFFFFFF
        raw = bool(w >> 31)
        if not (1 <= S <= bs):
            stop('stored size %d not in 1..%d' % (S, bs))
            break
        if at + 8 + S > len(b):
            stop('runs past the slot')
            break
        data = b[at + 4:at + 4 + S]
        if u32(b, at + 4 + S) != xxh32(data):
            stop('block checksum')
            break
        pos0 = len(out)
        try:
            if raw:
                if pos0 + S > limit:
                    raise Corrupt('raw block past the content size')
                out += data      # raw bytes count as dictionary for the blocks after
            else:
                if lz4_block_decode_into(data, out, limit) < 1:
                    raise Corrupt('decodes to nothing')
        except Corrupt as e:
            del out[pos0:]
            stop('does not decode (%s)' % e)
            break
        k += 1
        at += 8 + S
    A = at - 15
    if strict:
        if 23 + A > bs + 31:
            raise Corrupt('chain: frame of %d bytes above bs + 31' % (23 + A))
        if len(out) != want_len:
            raise Corrupt('chain: blocks decode to %d bytes, content size %d'
                          % (len(out), want_len))
        if 23 + A > len(b):
            raise Corrupt('chain: content checksum past the slot')
        if u32(b, 19 + A) != xxh32(out):
            raise Corrupt('chain: content checksum')
    return bytes(out), A, k


class Reader:
    def __init__(self, path, strict=False):
        self.f = F(path)
        self.strict = strict
        self.salvaged = {}     # block -> content taken from a torn chain (11.4 step 3a)
        self.chain_cache = None   # (block, len, (content, A, k)) of a whole chain verified

    def err(self, msg):
        sys.stderr.write('reader: %s\n' % msg)

    # -------------------------------------------------------- identification
    def identify(self):
        f = self.f
        if f.len < 59:
            return 'foreign'
        m = f.read(0, 59)
        if not (u32(m, 0) == LZ4_MAGIC and u32(m, 19) == SKIP_MARKER and u32(m, 23) == 32
                and u32(m, 27) == FPLZ):
            return 'foreign'
        ver = u32(m, 31)
        if ver > MAX_VERSION:
            return 'newer'
        bs = u32(m, 35)
        if ver == 0 or bs not in BS_CODE:
            return 'foreign'
        hdr = bytes([0x78, BS_CODE[bs] << 4]) + b'\0' * 8
        empty = struct.pack('<I', LZ4_MAGIC) + hdr + bytes([hc_of(hdr)]) + b'\0' * 4
        if m[0:19] != empty:
            return 'foreign'
        self.version = ver
        self.bs = bs
        self.code = BS_CODE[bs]
        self.flags = u32(m, 39)
        # 9.3: version 6 at 1 MiB and 4 MiB blocks puts slot i >= 1 at i * (bs + 4096)
        self.paged = ver >= 6 and bs >= 1048576
        self.slot_len = bs + (4096 if self.paged else 64)
        # 9.3.1: version 7 may put a slot's frame at the slot's first 4 KiB boundary
        self.two = ver >= 7
        self.G = 4194304 // bs
        return 'own'

    def slot_off(self, i):
        if self.paged:
            return i * self.slot_len if i else 59
        return 59 + i * self.slot_len

    def slot_page(self, i):
        so = self.slot_off(i)
        return (so + 4095) // 4096 * 4096 if self.two and i else so

    def frame_off(self, i):
        """9.3.1: the slot's start when the LZ4 magic is there (or there is no second
        place), else its page boundary when the magic is there, else the start."""
        so, p = self.slot_off(i), self.slot_page(i)
        if p == so:
            return so
        b = self.f.read(so, 4)
        if len(b) == 4 and u32(b, 0) == LZ4_MAGIC:
            return so
        b = self.f.read(p, 4)
        return p if len(b) == 4 and u32(b, 0) == LZ4_MAGIC else so

    # -------------------------------------------------------- footer
    def footer_at(self, place, want_version, start=None):
        if start is None:
            start = place
        f = self.f
        b = f.read(place, 64)
        if len(b) != 64:
            return None
        if u32(b, 0) != SKIP_FOOTER2 or u32(b, 4) != 56 or u32(b, 56) != want_version:
            return None
        if u32(b, 60) != xxh32(b[8:60]):
            return None
        ft = dict(size=u64(b, 8), tail=u64(b, 16), j_off=u64(b, 24), j_len=u64(b, 32),
                  seq=u64(b, 40), fresh=u64(b, 48))
        n = -(-ft['size'] // self.bs)
        ft['n'] = n
        if ft['size'] > 2 ** 40 or ft['fresh'] > n:
            return None
        tail = ft['tail']
        if n == 0:
            if tail != 59:
                return None
        elif not (self.slot_off(n - 1) + 31 <= tail <= self.slot_off(n)):
            return None
        if tail > start:
            return None
        if ft['j_off'] == 0:
            if ft['j_len'] != 0:
                return None
        else:
            if not (ft['j_off'] >= tail and ft['j_len'] >= 28 and ft['j_len'] <= start
                    and ft['j_off'] <= start - ft['j_len']):
                return None
        return ft

    # -------------------------------------------------------- journal
    def journal(self, ft):
        """returns dict block -> ('frame', bytes) | ('hole', len), or None if damaged."""
        L = ft['j_len']
        if not (28 <= L <= 2 ** 32):
            return None
        j = self.f.read(ft['j_off'], L)
        if len(j) != L:
            return None
        if u32(j, 0) != SKIP_JOURNAL or u32(j, 4) != L - 8 or u64(j, 8) != ft['seq']:
            return None
        c = u32(j, 16)
        if u32(j, 20) != 0:
            return None
        if u32(j, L - 4) != xxh32(j[8:L - 4]):
            return None
        if 16 * c > L - 28:
            return None
        area_end = L - 4
        pos = 24 + 16 * c
        ents = {}
        last = -1
        for k in range(c):
            e = 24 + 16 * k
            blk, flen, ln = u64(j, e), u32(j, e + 8), u32(j, e + 12)
            if blk >= ft['n'] or blk <= last or not (1 <= ln <= self.bs):
                return None
            last = blk
            if pos + flen > area_end:
                return None
            if flen == 0:
                ents[blk] = ('hole', ln)
                continue
            fr = j[pos:pos + flen]
            h = parse_frame_header(fr, self.bs, self.code)
            if h is None:
                return None
            cs, S, raw = h
            if not (1 <= cs <= self.bs and 1 <= S <= self.bs) or (raw and S != cs):
                return None
            if 31 + S != flen or cs != ln:
                return None
            if u32(fr, 23 + S) != 0 or u32(fr, 19 + S) != xxh32(fr[19:19 + S]):
                return None
            ents[blk] = ('frame', bytes(fr))
            pos += flen
        if pos != area_end:
            return None
        return ents

    # -------------------------------------------------------- footer pair
    def pair(self):
        eof = self.f.len
        if eof < 59 + 128 or eof % 128:
            return None
        start = eof - 128
        cands = []
        for place in (eof - 128, eof - 64):
            # 9.10 rule 2: the rules of 9.7 with start = eof - 128
            ft = self.footer_at(place, 3, start)
            if ft is not None:
                cands.append(ft)
        cands.sort(key=lambda x: -x['seq'])
        for k, ft in enumerate(cands):
            if ft['j_len'] == 0:
                ents = {}
            else:
                ents = self.journal(ft)
                if ents is None:
                    continue
            older = None
            for o in cands:
                if o is ft or o['seq'] >= ft['seq'] or o['n'] != ft['n'] or o['j_len'] == 0:
                    continue
                older = self.journal(o)
            return ft, ents, older
        return None

    # -------------------------------------------------------- blocks
    def read_slot_frame(self, i, len_i, careful=True):
        """returns (decoded bytes, S, block checksum) of slot i's own frame,
        'run' if the slot does not hold a frame of block i but a run might, or raises Corrupt."""
        off = self.frame_off(i)
        head = self.f.read(off, 19)
        if len(head) < 19:
            raise Corrupt('slot %d: short' % i)
        if u32(head, 0) == 0:
            return 'run'
        if head[5] == 0x70 and self.G > 1:
            cs = u64(head, 6)
            if cs > self.bs and cs % self.bs == 0:
                return 'run'
        h = parse_frame_header(head, self.bs, self.code)
        if h is None:
            if u32(head, 0) == LZ4_MAGIC and head[4] == FLG_CHAIN:
                raise Corrupt('slot %d: a chained frame (FLG 0x5C) outside the last slot' % i)
            raise Corrupt('slot %d: bad header' % i)
        cs, S, raw = h
        if cs != len_i or not (1 <= S <= self.bs):
            raise Corrupt('slot %d: bad content size/size word' % i)
        b = self.f.read(off + 19, S + 4)
        if len(b) != S + 4:
            raise Corrupt('slot %d: short frame' % i)
        data = b[:S]
        bsum = u32(b, S)
        if bsum != xxh32(data):
            raise Corrupt('slot %d: block checksum' % i)
        return self.decode(data, raw, len_i, 'slot %d' % i), S, bsum

    def chain_head_ok(self, head, len_i=None):
        """the 15-byte header of a chain (9.12): magic, FLG 0x5C, BD, HC, and the
        content size len_i when given (1 <= len < bs in any case). Returns len or None."""
        if len(head) < 15 or u32(head, 0) != LZ4_MAGIC or head[4] != FLG_CHAIN \
                or head[5] != (self.code << 4) or head[14] != hc_of(head[4:14]):
            return None
        cs = u64(head, 6)
        if not (1 <= cs < self.bs) or (len_i is not None and cs != len_i):
            return None
        return cs

    def slot_bytes(self, i):
        so = self.slot_off(i)
        return self.f.read(so, min(self.slot_len, self.f.len - so))

    def read_chain(self, i, len_i, tail=None):
        """block i (the last) held as a whole chain (9.12, 10 step 5): content or Corrupt."""
        b = self.slot_bytes(i)
        if self.chain_head_ok(b[:15]) is None:
            raise Corrupt('block %d: bad chain header' % i)
        if u64(b, 6) != len_i:
            raise Corrupt('block %d: chain content size %d != %d' % (i, u64(b, 6), len_i))
        c = self.chain_cache
        try:
            if c is not None and c[0] == i and c[1] == len_i:
                content, A, k = c[2]
            else:
                content, A, k = decode_chain_blocks(b, self.bs, len_i)
        except Corrupt as e:
            raise Corrupt('block %d: %s' % (i, e))
        end = self.slot_off(i) + 23 + A
        if tail is not None and end > tail:
            raise Corrupt('block %d: chain ends at %d, past tail %d' % (i, end, tail))
        self.stats['chain_blocks'] = k
        if self.version < 5:
            self.err('note: a chain in a version %d file (9.2: this build\'s readers '
                     'accept one in any file of Part II)' % self.version)
        # 9.11 / 10 step 6 say where records lie behind a frame of 9.3 (pad = slot + 31 + S);
        # they say nothing of records behind a chain: show any we would skip.
        h = self.f.read(end, 12)
        if len(h) == 12 and u32(h, 0) == SKIP_PAD and u32(h, 8) == REC_MAGIC:
            self.err('note: block %d: a padding with the record magic follows the chain; '
                     'not applied (FORMAT.md names no records behind a chain)' % i)
        return content

    def decode(self, data, raw, len_i, what):
        if raw:
            if len(data) != len_i:
                raise Corrupt('%s: raw size' % what)
            return bytes(data)
        return lz4_block_decompress(data, len_i)

    def run_head(self, a):
        """if slot a begins with a run head whose end checks out: m, else None."""
        off = self.slot_off(a)
        b = self.f.read(off, 19)
        if len(b) < 19 or u32(b, 0) != LZ4_MAGIC or b[4] != 0x7C or b[5] != 0x70:
            return None
        if b[14] != hc_of(b[4:14]):
            return None
        cs = u64(b, 6)
        if cs % self.bs:
            return None
        m = cs // self.bs
        if not (2 <= m <= self.G) or u32(b, 15) != (cs | 0x80000000):
            return None
        e = self.f.read(off + 19 + cs, 20)
        if len(e) != 20:
            return None
        if u32(e, 0) != u32(e, 8) or u32(e, 4) != 0 or u32(e, 12) != SKIP_PAD \
                or u32(e, 16) + off + cs + 39 not in (self.slot_off(a + m),
                                                      self.slot_page(a + m)):
            return None
        return m

    def find_run(self, i):
        G = self.G
        g = (i // G) * G
        m = self.run_head(g)
        if m is not None and g + m > i:
            return (g, m)
        for a in range(i, g, -1):
            b = self.f.read(self.slot_off(a), 4)
            if len(b) == 4 and u32(b, 0) == 0 and self.frame_off(a) == self.slot_off(a):
                continue   # zeros, and no frame at its page (9.3.1) either
            m = self.run_head(a)
            if m is not None and a + m > i:
                return (a, m)
            break
        raise Corrupt('block %d: in no hole run' % i)

    def apply_records(self, i, content, S, bsum, len_i):
        """10 step 6 / 9.11."""
        pad = self.frame_off(i) + 31 + S
        h = self.f.read(pad, 12)
        if len(h) < 12 or u32(h, 0) != SKIP_PAD or u32(h, 8) != REC_MAGIC:
            return content, 0
        P = u32(h, 4)
        end = min(pad + 8 + P, self.slot_off(i + 1))   # 9.11: before the next slot
        at = pad + 8
        prev = bsum
        buf = bytearray(content)
        nrec = 0
        committed = self.flags >> 1                              # 9.11: commit groups
        while True:
            if at + 28 > end:
                break
            hd = self.f.read(at, 24)
            if len(hd) < 24:
                break
            magic, pv, grp, off, ln, word = struct.unpack_from('<6I', hd, 0)
            D = word & 0x7FFFFFFF
            raw = bool(word >> 31)
            if at + 28 + D > end:                                # rule 1
                break
            if magic != REC_MAGIC or pv != prev:                 # rule 2
                break
            if not (1 <= ln <= len_i - off and 1 <= D <= ln) \
                    or (raw and D != ln):                       # rule 3
                break
            if grp >> 31 or ((committed - grp) & 0x7FFFFFFF) >= (1 << 30):   # rule 5
                break
            rec = self.f.read(at, 28 + D)
            if len(rec) != 28 + D:
                break
            ck = u32(rec, 24 + D)
            if ck != xxh32(rec[:24 + D]):                        # rule 4
                break
            payload = rec[24:24 + D]
            if raw:
                newb = payload
            else:
                try:
                    newb = lz4_block_decompress(payload, ln)
                except Corrupt as e:
                    raise Corrupt('block %d: record at %d does not decode (%s)' % (i, at, e))
            buf[off:off + ln] = newb
            nrec += 1
            prev = ck
            at += 28 + D
        return bytes(buf), nrec

    def block(self, i, len_i, jents, n, tail):
        """content of block i (bytes) or raises Corrupt."""
        recs = self.version >= 4
        if i in self.salvaged:
            content = self.salvaged[i]
            if len(content) != len_i:
                raise Corrupt('block %d: salvaged %d bytes != %d' % (i, len(content), len_i))
            return content
        if i not in jents and i == n - 1:
            head = self.f.read(self.slot_off(i), 19)
            if len(head) == 19 and u32(head, 0) == LZ4_MAGIC and head[4] == FLG_CHAIN:
                # 10 step 5: the last block's frame says linked blocks: a chain (9.12);
                # no page records (10 step 6 binds them to a frame of 9.3 only)
                return self.read_chain(i, len_i, tail)
        if i in jents:
            kind, v = jents[i]
            if kind == 'hole':
                content = bytes(v)
                if len(content) != len_i:
                    raise Corrupt('block %d: journal hole length %d != %d' % (i, v, len_i))
                S, bsum = v, xxh32(content)
            else:
                fr = v
                cs, S, raw = parse_frame_header(fr, self.bs, self.code)
                if cs != len_i:
                    raise Corrupt('block %d: journal length %d != %d' % (i, cs, len_i))
                bsum = u32(fr, 19 + S)
                content = self.decode(fr[19:19 + S], raw, len_i, 'journal block %d' % i)
        else:
            r = self.read_slot_frame(i, len_i)
            if r == 'run':
                a, m = self.find_run(i)
                self.stats['run'] += 1
                return bytes(self.bs)   # no records behind runs (9.11 "Where")
            content, S, bsum = r
        if recs:
            content, nrec = self.apply_records(i, content, S, bsum, len_i)
            if nrec:
                self.stats['blocks_with_records'] += 1
                self.stats['records'] += nrec
        return content

    # -------------------------------------------------------- torn chain (11.4 step 3a)
    def torn_chain(self, i):
        """what a torn link leaves in slot i: (content, A, k) of the blocks that check, or
        None when the slot does not begin with the LZ4 magic, FLG 0x5C or 0x7C and the
        marker's BD (content size and HC are not looked at) or no block checks."""
        b = self.slot_bytes(i)
        if len(b) < 19 or u32(b, 0) != LZ4_MAGIC or b[4] not in (FLG_CHAIN, FLG_FRAME) \
                or b[5] != (self.code << 4):
            return None
        content, A, k = decode_chain_blocks(b, self.bs, None)
        if k == 0:
            return None
        return content, A, k

    def settle_chain(self, ft, jents):
        """11.4 step 3a, in memory (this reader does not write): after the footer (and its
        journals) were taken, look at the last slot; a torn link's blocks that check become
        the last block. Returns True when it changed the footer's state."""
        n = ft['n']
        if n == 0 or (n - 1) in jents:
            return False   # a journal's entry replaces the slot (a writer replays it first)
        bs = self.bs
        s = self.slot_off(n - 1)
        len_l = ft['size'] - (n - 1) * bs
        head = self.f.read(s, 19)
        if len(head) < 19 or u32(head, 0) != LZ4_MAGIC:
            return False   # no LZ4 frame header: nothing to do here (hole runs, damage)
        h = parse_frame_header(head, bs, self.code)
        if h is not None:
            cs, S, raw = h
            if cs == len_l and 1 <= S <= bs:
                e = self.f.read(s + 23 + S, 4)
                if len(e) == 4 and u32(e, 0) == 0:
                    return False   # a frame of 9.3 as every version writes
        elif not (head[4] in (FLG_CHAIN, FLG_FRAME) and head[5] == (self.code << 4)):
            return False   # no frame header of ours: the block reads as damaged
        why = 'not a whole chain of the footer\'s length'
        if head[4] == FLG_CHAIN and len_l < bs and self.chain_head_ok(head, len_l) is not None:
            try:
                r = decode_chain_blocks(self.slot_bytes(n - 1), bs, len_l)
                if s + 23 + r[1] <= ft['tail']:
                    self.chain_cache = (n - 1, len_l, r)
                    return False   # a whole chain of the footer's length
                why = 'the chain ends past tail'
            except Corrupt as e:
                why = str(e)
        if self.strict:
            return False   # block() reads it and says EIO
        t = self.torn_chain(n - 1)
        if t is None:
            return False   # not even one block checks: the block reads as EIO
        content, A, k = t
        self.err('last slot: a torn chain (%s): %d block(s) that check, %d bytes (footer: %d); '
                 'taken as the last block (11.4 step 3a, in memory)'
                 % (why, k, len(content), len_l))
        ft['size'] = (n - 1) * bs + len(content)
        ft['tail'] = s + 23 + A
        self.salvaged[n - 1] = content
        self.stats['chain_blocks'] = k
        return True

    # -------------------------------------------------------- slot walk (10.1)
    def walk(self):
        f = self.f
        bs, sl = self.bs, self.slot_len
        i, n, size, valid_end = 0, 0, 0, 59
        tentative = []
        bad = set()
        before_runs = None   # state before the first of the trailing runs
        failed = False       # stopped by step 6 (anything else fails) at slot i
        while True:
            so = self.slot_off(i)
            if so >= f.len:
                break
            m = min(sl, f.len - so)
            b = f.read(so, m)
            d = self.frame_off(i) - so   # 9.3.1: the frame at the slot's page
            parsed = None
            ok_sums = True
            # 10.1 step 8: a whole chain (9.12) is a frame of 23 + A bytes, never padded:
            # the walk accepts it as the last block and stops
            clen = self.chain_head_ok(b[:15])
            if clen is not None:
                try:
                    r = decode_chain_blocks(b, bs, clen)
                    self.chain_cache = (i, clen, r)
                    A = r[1]
                    before_runs = None
                    bad.update(tentative)
                    tentative = []
                    n, size, valid_end = i + 1, i * bs + clen, so + 23 + A
                    break
                except Corrupt:
                    pass
            h = parse_frame_header(b[d:], bs, self.code)
            if h is not None:
                cs, S, raw = h
                bd_ok = True
                if 1 <= cs <= bs and 1 <= S <= bs and not (raw and S != cs) \
                        and d + 31 + S <= m and u32(b, d + 23 + S) == 0:
                    parsed = (cs, S, raw)
                    data = b[d + 19:d + 19 + S]
                    if u32(b, d + 19 + S) != xxh32(data):
                        ok_sums = False
                    else:
                        try:
                            dec = self.decode(data, raw, cs, 'walk')
                            if u32(b, d + 27 + S) != xxh32(dec):
                                ok_sums = False
                        except Corrupt:
                            ok_sums = False
            if parsed is None:
                rm = self.run_head(i)
                if rm is not None and i % self.G + rm <= self.G:
                    cs = rm * bs
                    e = f.read(so + 19 + cs, 4)
                    zero_sum = xxh32(bytes(cs))
                    data_ok = f.read(so + 19, cs) == bytes(cs)
                    if u32(e, 0) == zero_sum and data_ok:
                        if before_runs is None:
                            before_runs = (n, size, valid_end, list(tentative))
                        n, size, valid_end = i + rm, (i + rm) * bs, so + 31 + cs
                        i += rm
                        continue
                failed = True
                break
            cs, S, raw = parsed
            fl = d + 31 + S   # where in the slot the frame ends
            padded = fl + 8 <= m and u32(b, fl) == SKIP_PAD and \
                so + fl + 8 + u32(b, fl + 4) in (self.slot_off(i + 1), self.slot_page(i + 1))
            if not ok_sums:
                if padded and cs == bs:
                    tentative.append(i)
                    i += 1
                    continue
                failed = True
                break
            # accept
            before_runs = None
            bad.update(tentative)
            tentative = []
            n, size, valid_end = i + 1, i * bs + cs, so + fl
            if cs < bs or not padded:
                break
            i += 1
        t = self.torn_chain(i) if failed and not self.strict else None
        if t is not None:
            # 10.1 step 8, in step 6 before stopping: the blocks that check of a torn chain
            # (11.4 step 3a) are the last block
            content, A, k = t
            before_runs = None
            bad.update(tentative)
            n, size, valid_end = i + 1, i * bs + len(content), self.slot_off(i) + 23 + A
            self.salvaged[i] = content
            self.stats['chain_blocks'] = k
            self.err('slot walk: slot %d holds a torn chain: %d block(s) that check, %d bytes '
                     '(10.1 step 8)' % (i, k, len(content)))
        if before_runs is not None:
            n, size, valid_end, _ = before_runs
        return dict(size=size, n=n, tail=valid_end, bad=bad)

    # -------------------------------------------------------- main
    def run(self, out):
        kind = self.identify()
        if kind == 'foreign':
            self.err('foreign file: shown byte for byte')
            self.f.fh.seek(0)
            out.write(self.f.fh.read())
            return 0
        if kind == 'newer':
            self.err('newer version: refused (EPROTO)')
            return 3
        if self.version == 1:
            self.err('version 1 (Part I) not supported by this reader')
            return 4
        self.stats = dict(run=0, blocks_with_records=0, records=0, chain_blocks=0)
        jents = {}
        bad = set()
        ft = self.footer_at(self.f.len - 64, 2) if self.f.len >= 123 else None
        how = 'footer'
        walk = False
        if ft is not None and ft['j_len']:
            j = self.journal(ft)
            if j is None:
                # 10 step 4: the footer does not count either; the slot walk reads the file
                self.err('journal damaged: the file is read by the slot walk')
                walk = True
            else:
                jents = j
        if walk:
            ft = self.walk()
            bad = ft['bad']
            how = 'slot walk (journal damaged)'
        elif ft is None:
            p = self.pair()
            if p is not None:
                ft, newer, older = p
                how = 'footer pair'
                if older:
                    jents.update(older)
                jents.update(newer)
            else:
                ft = self.walk()
                bad = ft['bad']
                how = 'slot walk'
        settled = False
        if not how.startswith('slot walk'):
            # 11.4 step 3a (the walk did it itself, 10.1 step 8)
            settled = self.settle_chain(ft, jents)
        size, n, bs = ft['size'], ft['n'], self.bs
        self.err('version %d, bs %d, %s: size %d, %d blocks, %d journal entries'
                 % (self.version, bs, how, size, n, len(jents)))
        rc = 0
        for i in range(n):
            len_i = bs if i < n - 1 else size - (n - 1) * bs
            try:
                if i in bad:
                    raise Corrupt('block %d: bad checksum (kept by the walk)' % i)
                out.write(self.block(i, len_i, jents, n, ft['tail']))
            except Corrupt as e:
                self.err('EIO: %s' % e)
                rc = 5
                out.write(bytes(len_i))   # placeholder so offsets stay right
        self.err('%(run)d blocks in hole runs, %(blocks_with_records)d blocks with '
                 '%(records)d page records applied' % self.stats
                 + (', last block a chain of %d linked blocks' % self.stats['chain_blocks']
                    if self.stats['chain_blocks'] else ''))
        if rc == 0 and (settled or self.salvaged):
            rc = 6
        return rc


def main():
    args = sys.argv[1:]
    strict = bool(args) and args[0] == '--strict'
    if strict:
        args = args[1:]
    if len(args) != 1:
        sys.stderr.write('usage: fmt_reader.py [--strict] BACKING\n')
        return 2
    r = Reader(args[0], strict)
    out = sys.stdout.buffer
    rc = r.run(out)
    out.flush()
    return rc


if __name__ == '__main__':
    sys.exit(main())
