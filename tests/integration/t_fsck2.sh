#!/bin/bash
# t_fsck2: fsck.fpgalz4fs against damage injected into version 2 backing files (docs/FORMAT.md
# part II) written by a real mount (64K store), one file per kind of damage:
#   store A, repaired: a flipped byte in the footer, the footer cut off (of a plain file and of
#     a file with holes), the file cut in the middle of a slot, garbage from a slot on, an
#     interrupted in-place commit (a real journal named by the footer, its slot put back to
#     the old bytes); plus clean files, a file with holes, random garbage and a foreign file;
#   store B, reported and left: a flipped byte in a block's data, a frame header, a size
#     word, a content checksum, a padding header; a hole run (FORMAT.md 9.5.1) whose end is
#     damaged, and one whose data do not read as zeros;
#   store C: a valid footer naming a damaged journal;
#   store D: no footer and a bad block in the middle (the walk keeps it).
# For each store: -n names every damaged file and its problem, exits 4 and writes no byte;
# -y repairs what can be repaired (exit status per docs/TOOLS.md) and keeps mtimes; the
# files then read through a mount as expected (the original bytes, or EIO for the damaged
# block only), `lz4 -d` of every file without damage left equals the mount, and a second -n
# finds only what cannot be repaired. The daemon's open repairs damaged copies the same way
# (same content, same backing bytes; "repaired a torn file" / "finished an interrupted
# commit" in its log) and writes nothing to the files it cannot repair. Short form (< 1 min).
# t_fsck does the same for version 1 files.
. "$(dirname "$0")/lib.sh"
need_binaries "$FSCK"
BLOCK_SIZE=64K
BS=65536
# the interpreter itself: a version manager's python3 shim can take most of a second a start
PYTHON=$(python3 -c 'import sys; print(sys.executable)') || PYTHON=python3

# fmt2.py: reads the version 2 layout of a backing file (docs/FORMAT.md 9) and damages it.
cat >"$WS/fmt2.py" <<'PY'
import struct, sys

BS = 65536
SLOT = BS + 64
MARKER = 59
M32 = 0xffffffff
P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393

def rotl(x, r): return ((x << r) | (x >> (32 - r))) & M32

def xxh32(b, seed=0):
    n, i = len(b), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M32, (seed + P2) & M32, seed, (seed - P1) & M32]
        while i + 16 <= n:
            for k, w in enumerate(struct.unpack_from('<4I', b, i)):
                v[k] = rotl((v[k] + w * P2) & M32, 13) * P1 & M32
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M32
    else:
        h = (seed + P5) & M32
    h = (h + n) & M32
    while i + 4 <= n:
        h = rotl((h + struct.unpack_from('<I', b, i)[0] * P3) & M32, 17) * P4 & M32
        i += 4
    while i < n:
        h = rotl((h + b[i] * P5) & M32, 11) * P1 & M32
        i += 1
    h ^= h >> 15; h = h * P2 & M32; h ^= h >> 13; h = h * P3 & M32; h ^= h >> 16
    return h

def u32(b, o): return struct.unpack_from('<I', b, o)[0]
def slot(i): return MARKER + i * SLOT
def fat(d, i):                           # where slot i's frame starts: its start, or in
    p = (slot(i) + 4095) // 4096 * 4096  # version 7 its first page boundary (9.3.1)
    if i and u32(d, slot(i)) != 0x184D2204 and p + 4 <= len(d) and u32(d, p) == 0x184D2204:
        return p
    return slot(i)
def flen(d, i): return 31 + (u32(d, fat(d, i) + 15) & 0x7fffffff)

def footer(d):
    f = d[-64:]
    magic, plen, size, tail, j_off, j_len, seq, fresh, ver, sum_ = struct.unpack('<IIQQQQQQII', f)
    ok = magic == 0x184D2A5E and plen == 56 and ver == 2 and sum_ == xxh32(f[8:60])
    return dict(ok=ok, size=size, tail=tail, j_off=j_off, j_len=j_len, seq=seq, fresh=fresh)

def footer_bytes(size, tail, j_off, j_len, seq, fresh):
    p = struct.pack('<QQQQQQI', size, tail, j_off, j_len, seq, fresh, 2)
    return struct.pack('<II', 0x184D2A5E, 56) + p + struct.pack('<I', xxh32(p))

cmd, path = sys.argv[1], sys.argv[2]
a = [int(x) for x in sys.argv[3:]] if cmd != 'copy_slot' else None
d = bytearray(open(path, 'rb').read()) if cmd != 'slot' else None
if cmd == 'slot':                        # slot - I
    print(slot(a[0]))
elif cmd == 'flen':
    print(flen(d, a[0]))
elif cmd == 'fat':                       # fat PATH I: where slot I's frame starts
    print(fat(d, a[0]))
elif cmd == 'fend':                      # fend PATH I: where slot I's frame ends
    print(fat(d, a[0]) + flen(d, a[0]))
elif cmd == 'footer':                    # "ok size tail j_off j_len seq fresh"
    f = footer(d)
    print(' '.join(str(int(f[k])) for k in ('ok', 'size', 'tail', 'j_off', 'j_len', 'seq', 'fresh')))
elif cmd == 'flip':
    with open(path, 'r+b') as fh:
        fh.seek(a[0]); fh.write(bytes([d[a[0]] ^ 0x40]))
elif cmd == 'copy_slot':                 # copy_slot PATH FROM K: slot K's bytes from FROM
    src = bytearray(open(sys.argv[3], 'rb').read())
    k = int(sys.argv[4])
    with open(path, 'r+b') as fh:
        fh.seek(slot(k)); fh.write(src[slot(k):slot(k + 1)])
elif cmd == 'mkjournal':
    # The state a commit leaves when stopped after its footer and before its slot: a journal
    # (FORMAT.md 9.6, fmt2_journal_encode) at tail holding slot K's frame, a footer naming it
    # (seq + 1), and slot K damaged (as a rewrite cut short would leave it) unless a second
    # argument 1 says to keep it (the slot already holds the journal's frame).
    k, keep = a[0], len(a) > 1 and a[1] == 1
    f = footer(d)
    assert f['ok'] and f['j_len'] == 0 and slot(k + 1) < f['tail']
    fr = bytes(d[fat(d, k):fat(d, k) + flen(d, k)])
    jl = 24 + 16 + len(fr) + 4
    j = struct.pack('<IIQII', 0x184D2A5F, jl - 8, f['seq'] + 1, 1, 0)
    j += struct.pack('<QII', k, len(fr), BS) + fr
    j += struct.pack('<I', xxh32(j[8:]))
    t = f['tail']
    out = d[:t] + j + footer_bytes(f['size'], t, t, jl, f['seq'] + 1, f['fresh'])
    if not keep:
        out[fat(d, k) + 19 + 1000] ^= 0x40
    open(path, 'wb').write(out)
elif cmd == 'garble':                    # garble PATH OFF SEED: random bytes from OFF to EOF
    import random
    r = random.Random(a[1])
    d[a[0]:] = bytes(r.randrange(256) for _ in range(len(d) - a[0]))
    open(path, 'wb').write(d)
PY
fmt2() { "$PYTHON" "$WS/fmt2.py" "$@"; }

# view.py PATH [SIZE [BAD,...]]: PATH read block by block to stdout; a block that fails with
# EIO, or one named in BAD, is replaced by a marker. The same text for a mount (EIO) and for
# the original (BAD) means: the same bytes everywhere, EIO exactly there.
cat >"$WS/view.py" <<'PY'
import errno, os, sys
BS = 65536
path = sys.argv[1]
size = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != '-' else os.path.getsize(path)
bad = {int(x) for x in sys.argv[3].split(',') if x} if len(sys.argv) > 3 else set()
fd = os.open(path, os.O_RDONLY)
out = sys.stdout.buffer
for i in range((size + BS - 1) // BS + 1):
    if i in bad:
        out.write(b'\n<EIO block %d>\n' % i)
        continue
    try:
        b = os.pread(fd, BS, i * BS)
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        out.write(b'\n<EIO block %d>\n' % i)
        continue
    out.write(b[:max(0, size - i * BS)])
PY
view() { "$PYTHON" "$WS/view.py" "$@"; }

SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/base" 1300000 text 3                 # 20 blocks, the last partial
gen_file "$SRC/mixed" 700000 mixed 4
gen_file "$SRC/foreign.txt" 30000 text 5
head -c 100000 /dev/urandom >"$SRC/garbage"
# compresses well: a rewritten block's journal stays small enough to stay at rest (11.1)
"$PYTHON" -c "
import sys
l = b''.join(b'%06d: fpga lz4 block frame slot journal footer\n' % (i % 50) for i in range(50))
sys.stdout.buffer.write((l * 1000)[:1300000])" >"$SRC/rep"
{ head -c 100000 "$SRC/base"; head -c 900000 /dev/zero; printf 'the end'; } >"$SRC/holes"


# The stores the damaged files end up in, each with its own exit statuses:
#   A: repaired by -y (exit 1), then clean; with undamaged, holey and foreign files
#   B: reported and left: -y exits 4 and writes no byte
#   C: a valid footer naming a damaged journal (slots as the commit left them). Expected: a
#      problem (-n exits 4, "1 to repair") that -y repairs by dropping the journal (a settle:
#      the same footer without it, seq + 1, at tail), exit 1. This build prints the line but
#      counts no problem (fs/chk2.c chk2_report sets no bit for journal_bad) and fmt2_recover
#      (fs/fmt2_recover.c) does not settle, so -n and -y exit 0 and the journal stays: the checks of
#      store C on exit statuses, the summary and the second run fail until that is fixed.
#   D: no valid footer and a bad block in a padded slot before good ones: the walk keeps it;
#      the footer is repaired, the block is left (-y exits 1|4)
STORE_A="footer nofooter cut intent hole_nofooter garbled lostmarker"
STORE_B="data hdr word csum pad runend rundata"
STORE_C="jbad"
STORE_D="torn_bad"
CLEAN="clean mixed holes"
DAMAGED="$STORE_A $STORE_B $STORE_C $STORE_D"
LZ4_FAILS=" data hdr word csum pad runend rundata torn_bad "   # damage that stays: lz4 -d fails
TORN="footer nofooter cut hole_nofooter garbled torn_bad"
MTIME='2010-01-02 03:04:05.678901234'
MTIME_S=1262401445.678901234

# ---- write the files through a mount
check "mount a new store" mount_store
for n in footer nofooter cut garbled lostmarker data hdr word csum pad torn_bad clean; do
    cp "$SRC/base" "$MNT/$n"
done
cp "$SRC/mixed" "$MNT/mixed"
cp "$SRC/rep" "$MNT/intent"
cp "$SRC/rep" "$MNT/jbad"
for n in holes hole_nofooter runend rundata; do
    head -c 100000 "$SRC/base" >"$MNT/$n"
    truncate -s 1000000 "$MNT/$n"
    printf 'the end' >>"$MNT/$n"
done
check "unmount" umount_store
check "holes: the backing file is sparse" \
    test "$(($(stat -c %b "$BACKING/holes") * $(stat -c %B "$BACKING/holes")))" -lt 400000
check_eq "the helper reads the footer the daemon wrote (XXH32 agrees)" \
    "1 1300000" "$(fmt2 footer "$BACKING/clean" | cut -d' ' -f1,2)"

# ---- in-place commits with a journal: overwrite 10 bytes of block 10 with an fsync, so that
# the daemon writes a journal and a footer naming it (a small synced journal stays while the
# daemon holds the file, FORMAT.md 11.1; it drops it when it lets the file go, so the test
# builds the journal the daemon wrote by hand). intent: slot 10's old bytes put back (killed
# after the footer, before the slot was rewritten). jbad: a byte of the journal flipped (its
# slots are the new ones).
K=10
cp "$BACKING/intent" "$WS/intent.old"
check "mount again" mount_store
for n in intent jbad; do
    printf 'OVERWRITE!' | dd of="$MNT/$n" bs=1 seek=700000 conv=notrunc,fsync status=none
done
check "unmount after the overwrites" umount_store
"$PYTHON" -c "
d = bytearray(open('$SRC/rep', 'rb').read()); d[700000:700010] = b'OVERWRITE!'
open('$SRC/intent', 'wb').write(d)"
read -r ok _ _ j_off j_len _ < <(fmt2 footer "$BACKING/intent")
if [ "$ok" != 1 ] || [ "$j_len" = 0 ]; then
    say "intent: the daemon dropped its journal (j_len $j_len): journal built by hand"
    fmt2 mkjournal "$BACKING/intent" $K
fi
say "intent: slot $K put back"
cp "$BACKING/intent" "$WS/intent.new"
fmt2 copy_slot "$BACKING/intent" "$WS/intent.old" $K
check_fails "intent: slot $K differs from the journal's frame" cmp -s "$WS/intent.new" "$BACKING/intent"
read -r ok _ _ j_off j_len _ < <(fmt2 footer "$BACKING/jbad")
if [ "$ok" != 1 ] || [ "$j_len" = 0 ]; then
    say "jbad: the daemon settled its journal: journal built by hand"
    fmt2 mkjournal "$BACKING/jbad" $K 1
    read -r ok _ _ j_off j_len _ < <(fmt2 footer "$BACKING/jbad")
fi
fmt2 flip "$BACKING/jbad" $((j_off + 30))
for n in intent jbad; do
    read -r ok _ _ _ j_len _ < <(fmt2 footer "$BACKING/$n")
    check_eq "$n: a valid footer names a journal" "1 yes" "$ok $([ "$j_len" -gt 0 ] && echo yes)"
done

# ---- the stores, then the damage
keep_only() {    # keep_only DIR NAME...: removes every other file of the store DIR
    local d=$1 f
    shift
    for f in "$d"/*; do
        case " $* " in *" ${f##*/} "*) ;; *) rm -f "$f" ;; esac
    done
}
A="$WS/A" B="$WS/B" C="$WS/C" D="$WS/D"
for st in A B C D; do cp -a --sparse=always "$BACKING" "${!st}"; done
keep_only "$A" $STORE_A $CLEAN
keep_only "$B" $STORE_B
keep_only "$C" $STORE_C
keep_only "$D" $STORE_D
cp "$SRC/foreign.txt" "$SRC/garbage" "$A/"

s() { fmt2 slot - "$1"; }
fmt2 flip "$A/footer" $(($(stat -c %s "$A/footer") - 32))
truncate -s -64 "$A/nofooter" "$A/hole_nofooter"
CUT=$(($(s 7) + 1000))
truncate -s $CUT "$A/cut"
fmt2 garble "$A/garbled" "$(s 5)" 7
# a power loss that kept every write but the one that made the file (FORMAT.md 14): its
# marker reads as zeros
dd if=/dev/zero of="$A/lostmarker" bs=59 count=1 conv=notrunc status=none
fmt2 flip "$B/data" $(($(fmt2 fat "$B/data" 3) + 19 + 100))
fmt2 flip "$B/hdr" $(($(fmt2 fat "$B/hdr" 2) + 6))
fmt2 flip "$B/word" $(($(fmt2 fat "$B/word" 4) + 15 + 2))
fmt2 flip "$B/csum" $(($(fmt2 fend "$B/csum" 5) - 2))
fmt2 flip "$B/pad" $(($(fmt2 fend "$B/pad" 6) + 1))
# holes: blocks 2-14 are one hole run in slot 2; its EndMark, and a byte of its data
fmt2 flip "$B/runend" $(($(s 2) + 19 + 13 * BS + 4))
fmt2 flip "$B/rundata" $(($(s 2) + 19 + 5 * BS + 7))
fmt2 flip "$D/torn_bad" $(($(stat -c %s "$D/torn_bad") - 32))
fmt2 flip "$D/torn_bad" $(($(fmt2 fat "$D/torn_bad" 3) + 19 + 100))
for st in A B C D; do
    for n in $DAMAGED; do [ -e "${!st}/$n" ] && touch -d "$MTIME" "${!st}/$n"; done
done
# damaged copies of every file, in one store, for the daemon's own repair at open
DMG="$WS/dmg"
cp -a --sparse=always "$A" "$DMG"
cp -a --sparse=always "$B"/* "$C"/* "$D"/* "$DMG/"

# expected content after the repair: "FILE SIZE BAD-BLOCK" (a prefix of FILE; - for none)
expect() {
    case $1 in
        cut) echo "$SRC/base $((7 * BS)) -" ;;
        garbled) echo "$SRC/base $((5 * BS)) -" ;;
        intent | jbad) echo "$SRC/intent 1300000 -" ;;
        mixed) echo "$SRC/mixed 700000 -" ;;
        holes | hole_nofooter | rundata) echo "$SRC/holes 1000007 -" ;;
        runend) echo "$SRC/holes 1000007 $(seq -s, 2 14)" ;;
        data | torn_bad) echo "$SRC/base 1300000 3" ;;
        word) echo "$SRC/base 1300000 4" ;;
        *) echo "$SRC/base 1300000 -" ;;
    esac
}

# every file of the store but its clean mark and sizes file, which a mount rewrites at mount
# and unmount (FORMAT.md 1.5, 1.6): what is checked here is that no backing file changes
snapshot() { (cd "$1" && find . -type f ! -name .fpgalz4fs-clean ! -name .fpgalz4fs-sizes \
    -printf '%p %s %T@ %m\n' | sort &&
    find . -type f ! -name .fpgalz4fs-clean ! -name .fpgalz4fs-sizes -print0 | sort -z |
    xargs -0 sha256sum); }

# ---- check only (-n): exit 4, no byte written, every damaged file named with its problem
for st in A B C D; do
    d=${!st}
    snapshot "$d" >"$WS/$st.before"
    "$FSCK" -n "$d" >"$WS/$st.n.out" 2>&1
    check_eq "store $st: fsck -n exit 4" 4 "$?"
    check "store $st: fsck -n wrote nothing (contents, sizes, mtimes)" \
        cmp "$WS/$st.before" <(snapshot "$d")
    sed 's/^/    | /' "$WS/$st.n.out"
done
for st in A B C D; do
    d=${!st} v=STORE_$st
    for n in ${!v}; do check "fsck -n names $n" grep -q "^$d/$n: " "$WS/$st.n.out"; done
done
for n in $CLEAN foreign.txt garbage; do
    check_fails "fsck -n says nothing of $n" grep -q "^$A/$n: " "$WS/A.n.out"
done
nf="no valid footer: 20 blocks (1300000 bytes) found in their slots, 0 bytes after them to cut"
check "footer: a damaged footer reported, nothing to cut" grep -qx "$A/footer: $nf" "$WS/A.n.out"
check "nofooter: a missing footer reported, nothing to cut" grep -qx "$A/nofooter: $nf" "$WS/A.n.out"
# the last slot of this file keeps a padding after its frame (the in-place rewrite of its
# last block, a hole, left it; FORMAT.md 12): the walk ends at the frame, so that is cut
hcut=$(($(stat -c %s "$A/hole_nofooter") - $(fmt2 fend "$A/hole_nofooter" 15)))
check "hole_nofooter: the walk takes the holes" grep -qx \
    "$A/hole_nofooter: no valid footer: 16 blocks (1000007 bytes) found in their slots, $hcut bytes after them to cut" "$WS/A.n.out"
tail7=$(fmt2 fend "$DMG/clean" 6)
check "cut: torn tail reported (7 whole slots, the rest to cut)" grep -qx \
    "$A/cut: no valid footer: 7 blocks (458752 bytes) found in their slots, $((CUT - tail7)) bytes after them to cut" "$WS/A.n.out"
gcut=$(($(stat -c %s "$A/garbled") - $(fmt2 fend "$DMG/clean" 4)))
check "garbled: 5 whole slots, the garbage to cut" grep -qx \
    "$A/garbled: no valid footer: 5 blocks (327680 bytes) found in their slots, $gcut bytes after them to cut" "$WS/A.n.out"
check "intent: interrupted commit reported" grep -qx \
    "$A/intent: interrupted commit: 1 blocks differ from its journal: a repair rewrites them from it" "$WS/A.n.out"
check_fails "intent: -n reads block $K from the journal (no bad block)" grep -q "^$A/intent: block" "$WS/A.n.out"
check "data: bad block named with its slot" grep -qx \
    "$B/data: block 3 (slot at offset $(s 3)): block checksum mismatch" "$WS/B.n.out"
check "hdr: frame header reported" grep -q "^$B/hdr: block 2 (slot at offset $(s 2)): " "$WS/B.n.out"
check "word: size word reported" grep -q "^$B/word: block 4 (slot at offset $(s 4)): " "$WS/B.n.out"
check "csum: content checksum reported" grep -q \
    "^$B/csum: block 5 (slot at offset $(s 5)): content checksum mismatch" "$WS/B.n.out"
check "pad: padding reported" grep -q \
    "^$B/pad: block 6 (slot at offset $(s 6)): padding after the frame missing or wrong" "$WS/B.n.out"
for n in $STORE_B; do
    check_eq "$n: exactly one finding" 1 "$(grep -c "^$B/$n: " "$WS/B.n.out")"
done
check "jbad: damaged journal reported" grep -q "^$C/jbad: the journal of the last commit is damaged" "$WS/C.n.out"
check "torn_bad: footer reported" grep -qx "$D/torn_bad: $nf" "$WS/D.n.out"
check "torn_bad: the bad block the walk kept reported" grep -qx \
    "$D/torn_bad: block 3 (slot at offset $(s 3)): block checksum mismatch" "$WS/D.n.out"
summary() { echo "$1 files ($2 own, $3 foreign, 0 newer format), $4 repaired, $5 to repair, $6 unrepairable"; }
check "lostmarker: a lost marker reported" grep -qx \
    "$A/lostmarker: marker lost (a power loss kept later writes but not the file's first): the mount and a repair write it back" "$WS/A.n.out"
check "store A: -n summary" grep -q "$(summary 12 10 2 0 7 0)" "$WS/A.n.out"
check "runend: a damaged hole run reported" grep -qx \
    "$B/runend: block 2 (slot at offset $(s 2)): hole run: checksums, end or padding wrong" "$WS/B.n.out"
check "rundata: a hole run whose data are not zeros reported" grep -qx \
    "$B/rundata: block 2 (slot at offset $(s 2)): hole run: its data do not read as zeros" "$WS/B.n.out"
check "store B: -n summary" grep -q "$(summary 7 7 0 0 0 7)" "$WS/B.n.out"
check "store C: -n summary (a damaged journal is a problem to repair)" grep -q "$(summary 1 1 0 0 1 0)" "$WS/C.n.out"
check "store D: -n summary" grep -q "$(summary 1 1 0 0 1 1), 1 bad blocks" "$WS/D.n.out"

# ---- repair (-y)
declare -A Y_RC=([A]=1 [B]=4 [C]=1 [D]=5) N2_RC=([A]=0 [B]=4 [C]=0 [D]=4)
declare -A Y_WHY=([A]="all corrected" [B]="nothing repairable, errors left"
                  [C]="the journal dropped" [D]="footer corrected, bad block left")
for st in A B C D; do
    "$FSCK" -y "${!st}" >"$WS/$st.y.out" 2>&1
    check_eq "store $st: fsck -y exit ${Y_RC[$st]} (${Y_WHY[$st]})" "${Y_RC[$st]}" "$?"
    sed 's/^/    | /' "$WS/$st.y.out"
done
check "store A: -y summary" grep -q "$(summary 12 10 2 7 0 0)" "$WS/A.y.out"
check "lostmarker: -y wrote it back" grep -qx "$A/lostmarker: marker lost (a power loss): written back (block size 64K)" "$WS/A.y.out"
check "store D: -y summary" grep -q "$(summary 1 1 0 1 0 1), 1 bad blocks" "$WS/D.y.out"
check "cut: -y says cut" grep -q "^$A/cut: no valid footer: 7 blocks .* cut, footer rewritten" "$WS/A.y.out"
check "intent: -y rewrote the slot" grep -qx \
    "$A/intent: interrupted commit: 1 blocks differ from its journal: rewritten from it" "$WS/A.y.out"
check "store B: fsck -y changed no byte" cmp "$WS/B.before" <(snapshot "$B")
for st in A B C D; do
    for n in $DAMAGED; do
        [ -e "${!st}/$n" ] && check_eq "$n: mtime kept" "$MTIME_S" "$(stat -c %.9Y "${!st}/$n")"
    done
done
for n in foreign.txt garbage; do check "$n left alone" cmp "$SRC/$n" "$A/$n"; done

# ---- second check: only what cannot be repaired
for st in A B C D; do
    d=${!st}
    "$FSCK" -n "$d" >"$WS/$st.n2.out" 2>&1
    check_eq "store $st: second fsck -n exit ${N2_RC[$st]}" "${N2_RC[$st]}" "$?"
done
check "store A: second run names nothing" test "$(grep -c "^$A/" "$WS/A.n2.out")" = 0
check "store B: second run finds the same" cmp <(grep "^$B/" "$WS/B.n.out") <(grep "^$B/" "$WS/B.n2.out")
check "store C: second run names nothing" test "$(grep -c "^$C/" "$WS/C.n2.out")" = 0
check "store D: second run names the bad block only" cmp <(grep "^$D/torn_bad: block 3 " "$WS/D.n.out") \
    <(grep "^$D/" "$WS/D.n2.out")

# ---- read the repaired stores through a mount; lz4 -d of the repaired files
for st in A B C D; do
    d=${!st} m="$WS/m$st"
    check "mount store $st" mount_at "$d" "$m"
    for f in "$d"/*; do
        n=${f##*/}
        case " foreign.txt garbage " in *" $n "*) view "$m/$n" >"$WS/fsck.$n"; continue ;; esac
        read -r want size bad < <(expect "$n")
        bad=${bad#-}
        check_eq "$n: size through the mount" "$size" "$(stat -c %s "$m/$n")"
        check "$n: through the mount: the original bytes${bad:+, EIO for block $bad only}" \
            cmp <(view "$want" "$size" "$bad") <(view "$m/$n")
        view "$m/$n" >"$WS/fsck.$n"
        case $LZ4_FAILS in
            *" $n "*) check_fails "$n: lz4 -d fails (as reported)" _lib_lz4d "$f" ;;
            *) check "$n: lz4 -d of the backing file equals the mount" cmp <(_lib_lz4d "$f") "$m/$n" ;;
        esac
    done
    [ $st = A ] && check "foreign.txt reads byte for byte" cmp "$SRC/foreign.txt" "$m/foreign.txt"
    check "unmount store $st" umount_at "$m" "$DAEMON_PID"
done
check "store B: a mount that read every file wrote no byte" cmp "$WS/B.before" <(snapshot "$B")

# ---- the daemon's open repairs the damaged copies the same way
check "mount the damaged copies (no fsck)" mount_at "$DMG" "$WS/mDMG"
log=$(last_log)
for f in "$DMG"/*; do
    n=${f##*/}
    check "$n: the daemon's open gives what fsck -y gave" cmp "$WS/fsck.$n" <(view "$WS/mDMG/$n")
done
check "unmount the damaged copies" umount_at "$WS/mDMG" "$DAEMON_PID"
sed -n 's/^.*fpgalz4fs warning: /    # /p' "$log"
for n in $TORN; do
    check "$n: the log says repaired a torn file" grep -q "/$n: repaired a torn file" "$log"
done
check "intent: the log says finished an interrupted commit (1 block)" \
    grep -q "/intent: finished an interrupted commit (1 blocks rewritten from its journal" "$log"
# documented (FORMAT.md 14 item 3): the daemon ignores a damaged journal and says so
check "jbad: the log says the journal is damaged" grep -q "/jbad: the journal of the last commit is damaged" "$log"
check "lostmarker: the log says its marker was written again" \
    grep -q "/lostmarker: its marker never reached the disk (a power loss); written again" "$log"
for n in $TORN intent lostmarker; do
    [ -e "$A/$n" ] && f="$A/$n" || f="$D/$n"
    check "$n: backing file after the daemon's open is the one fsck -y wrote" cmp "$f" "$DMG/$n"
done
for n in $STORE_B; do
    check "$n: the daemon's open wrote nothing" cmp "$B/$n" "$DMG/$n"
done
for n in $DAMAGED; do
    check_eq "$n: the daemon kept the mtime" "$MTIME_S" "$(stat -c %.9Y "$DMG/$n")"
done

finish
