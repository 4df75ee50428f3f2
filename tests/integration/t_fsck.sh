#!/bin/bash
# t_fsck: fsck.fpgalz4fs against damage injected into backing files written by a real mount:
# flipped bytes in a block, a frame header, a wrapper, a size word, a content checksum, the
# seek table and its footer, the marker; truncations at several points; a deleted and a
# garbled seek table; an interrupted commit (its reveals undone); random garbage and plain
# foreign files. Each is detected by -n (which writes no byte), repaired by a repair run
# (mtime kept), after which the file reads through a mount as expected and decodes with
# lz4 -d, and a second run finds nothing. A flipped byte in a block is reported and left
# alone. A mounted store is refused; usage errors exit 16; on a terminal it asks.
# The damage is that of format version 1 (seek table, frames of several blocks), so every
# file here is written by mounts with -o file_version=1.
. "$(dirname "$0")/lib.sh"
need_binaries "$FSCK"
BLOCK_SIZE=64K

# fmt.py: reads the layout of a backing file (docs/FORMAT.md) and damages it.
cat >"$WS/fmt.py" <<'PY'
import struct, sys

def u32(b, o): return struct.unpack_from('<I', b, o)[0]
def u64(b, o): return struct.unpack_from('<Q', b, o)[0]

def table(d):
    f = len(d) - 32
    size, e, v, r = u64(d, f), u32(d, f + 8), u32(d, f + 12), u32(d, f + 16)
    start = len(d) - (8 + 12 * e + 8 * v + 16 * r + 32)
    ents = [(u64(d, start + 8 + 12 * i) & ((1 << 56) - 1), u32(d, start + 16 + 12 * i))
            for i in range(e)]
    reveals = [u64(d, start + 8 + 12 * e + 8 * i) for i in range(v)]
    return start, size, ents, reveals

def frames(d):
    start, size, ents, _ = table(d)
    out = []
    for i, (off, w) in enumerate(ents):
        end = off + 8 + (w & 0x7fffffff)
        if out and out[-1]['end'] == off:
            out[-1]['end'] = end
        else:
            out.append({'start': off - 15, 'end': end, 'first': i})
    for fr in out:
        fr['stop'] = fr['end'] + 8
        fr['content'] = u64(d, fr['start'] + 6)
    return out

def frame_len(d, pos):
    p = pos + 15
    while u32(d, p):
        p += 8 + (u32(d, p) & 0x7fffffff)
    return p + 8 - pos

cmd, path = sys.argv[1], sys.argv[2]
d = bytearray(open(path, 'rb').read())
a = [int(x) for x in sys.argv[3:]]
if cmd == 'tstart':
    print(table(d)[0])
elif cmd == 'fstart':
    print(frames(d)[a[0]]['start'])
elif cmd == 'fstop':
    print(frames(d)[a[0]]['stop'])
elif cmd == 'fcontent':
    print(frames(d)[a[0]]['content'])
elif cmd == 'nframes':
    print(len(frames(d)))
elif cmd == 'block':
    print(table(d)[2][a[0]][0])
elif cmd == 'expect_cut':
    # logical bytes a frame walk keeps when the file is cut at a[0]
    print(sum(fr['content'] for fr in frames(d) if fr['stop'] <= a[0]))
elif cmd == 'flip':
    d[a[0]] ^= 0x40
    open(path, 'r+b').write(d)
elif cmd == 'garble':
    import random
    start = table(d)[0]
    r = random.Random(a[0])
    d[start:] = bytes(r.randrange(256) for _ in range(len(d) - start))
    open(path, 'r+b').write(d)
elif cmd == 'unreveal':
    # a crash after the commit point and before the flips: wrappers back to hidden
    n = 0
    for r in table(d)[3]:
        if u32(d, r) == 0x184D2A5C and u32(d, r + 4) == 0 and u32(d, r + 8) == 0x184D2204:
            struct.pack_into('<I', d, r + 4, frame_len(d, r + 8))
            n += 1
    open(path, 'r+b').write(d)
    print(n)
PY
fmt() { python3 "$WS/fmt.py" "$@"; }

SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/base" 1300000 text 3
gen_file "$SRC/mixed" 2100000 mixed 4
gen_file "$SRC/foreign.txt" 30000 text 5
head -c 100000 /dev/urandom >"$SRC/garbage"

DAMAGED="hdr wrap csum word table footer notable garbled cut_trailer cut_frame cut_marker cut_early intent marker"

# ---- store A: one file per kind of damage
check "mount a new store" mount_store file_version=1
for n in $DAMAGED clean; do cp "$SRC/base" "$MNT/$n"; done
cp "$SRC/mixed" "$MNT/mixed"
# an overwrite in the middle: a commit that retires and reveals (for the interrupted commit)
printf 'OVERWRITTEN' | dd of="$MNT/intent" bs=1 seek=700000 conv=notrunc status=none
cp "$MNT/intent" "$SRC/intent"
check "unmount" umount_store
cp "$BACKING/clean" "$WS/orig"    # the undamaged layout, for expected sizes after cuts
cp "$SRC/foreign.txt" "$SRC/garbage" "$BACKING/"

B=$BACKING
fmt flip "$B/hdr" $(($(fmt fstart "$B/hdr" 1) + 6))
fmt flip "$B/wrap" $(($(fmt fstart "$B/wrap" 1) - 8 + 5))
fmt flip "$B/csum" $(($(fmt fstop "$B/csum" 0) - 2))
fmt flip "$B/word" $(($(fmt block "$B/word" 3) + 2))
fmt flip "$B/table" $(($(fmt tstart "$B/table") + 8 + 12 * 2 + 1))
fmt flip "$B/footer" $(($(stat -c %s "$B/footer") - 32))
truncate -s "$(fmt tstart "$B/notable")" "$B/notable"
fmt garble "$B/garbled" 7
cut_trailer=$(($(fmt tstart "$B/cut_trailer") + 20))
cut_frame=$(($(fmt fstart "$B/cut_frame" 1) + 100))
truncate -s $cut_trailer "$B/cut_trailer"
truncate -s $cut_frame "$B/cut_frame"
truncate -s 59 "$B/cut_marker"
truncate -s 75 "$B/cut_early"
check_eq "interrupted commit staged (wrappers hidden again)" yes \
    "$([ "$(fmt unreveal "$B/intent")" -gt 0 ] && echo yes)"
fmt flip "$B/marker" 5
for n in $DAMAGED; do touch -d '2010-01-02 03:04:05.678901234' "$B/$n"; done

# expected logical content of each file after the repair: "FILE SIZE" (a prefix of FILE)
expect() {
    case $1 in
        cut_trailer) echo "$SRC/base $(fmt expect_cut "$WS/orig" $cut_trailer)" ;;
        cut_frame) echo "$SRC/base $(fmt expect_cut "$WS/orig" $cut_frame)" ;;
        cut_marker | cut_early) echo "$SRC/base 0" ;;
        intent) echo "$SRC/intent $(stat -c %s "$SRC/intent")" ;;
        mixed) echo "$SRC/mixed $(stat -c %s "$SRC/mixed")" ;;
        *) echo "$SRC/base $(stat -c %s "$SRC/base")" ;;
    esac
}
check_eq "a cut inside frame 1 keeps frame 0 only" "$(fmt fcontent "$WS/orig" 0)" \
    "$(fmt expect_cut "$WS/orig" $cut_frame)"

snapshot() { (cd "$1" && find . -type f -printf '%p %s %T@ %m\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
snapshot "$B" >"$WS/snap.before"

# ---- check only
"$FSCK" -n "$B" >"$WS/n.out" 2>&1
rc=$?
check_eq "fsck -n on damage: exit 4" 4 "$rc"
snapshot "$B" >"$WS/snap.after"
check "fsck -n wrote nothing (contents, sizes, mtimes)" cmp "$WS/snap.before" "$WS/snap.after"
for n in $DAMAGED; do
    check "fsck -n names $n" grep -q "^$B/$n: " "$WS/n.out"
done
for n in clean mixed foreign.txt garbage; do
    check_fails "fsck -n says nothing of $n" grep -q "^$B/$n: " "$WS/n.out"
done
check "fsck -n: summary counts 16 own and 2 foreign files" \
    grep -q "18 files (16 own, 2 foreign, 0 newer format), 0 repaired, 14 to repair, 0 unrepairable" "$WS/n.out"
check "fsck -n: frame header reported" grep -q "^$B/hdr: frame header at offset .* damaged$" "$WS/n.out"
check "fsck -n: wrapper reported" grep -q "^$B/wrap: wrapper at offset" "$WS/n.out"
check "fsck -n: content checksum reported" grep -q "^$B/csum: end of the frame" "$WS/n.out"
check "fsck -n: size word reported" grep -q "^$B/word: block 3: size word" "$WS/n.out"
check "fsck -n: seek table reported" grep -q "^$B/table: no valid seek table" "$WS/n.out"
check "fsck -n: torn tail reported" grep -q "^$B/cut_frame: torn tail: [0-9]* bytes after offset" "$WS/n.out"
check "fsck -n: interrupted commit reported" grep -q "^$B/intent: interrupted commit" "$WS/n.out"
check "fsck -n: marker reported" grep -q "^$B/marker: marker damaged" "$WS/n.out"

# ---- preen (no -n, no -y, not a terminal): everything but the marker
"$FSCK" "$B" </dev/null >"$WS/p.out" 2>&1
rc=$?
check_eq "fsck (preen) repairs and leaves the marker: exit 1|4" 5 "$rc"
check "preen: 13 repaired, the marker left" grep -q "13 repaired, 1 to repair, 0 unrepairable" "$WS/p.out"
check "preen: marker untouched" cmp <(grep " ./marker$" "$WS/snap.before") <(snapshot "$B" | grep " ./marker$")

# ---- -y: the rest
"$FSCK" -y "$B" >"$WS/y.out" 2>&1
rc=$?
check_eq "fsck -y: exit 1 (corrected)" 1 "$rc"
check "fsck -y: marker rewritten" grep -q "^$B/marker: marker damaged: rewritten" "$WS/y.out"
"$FSCK" -n "$B" >"$WS/n2.out" 2>&1
rc=$?
check_eq "second run finds nothing: exit 0" 0 "$rc"
check "second run: summary" grep -q "18 files (16 own, 2 foreign, 0 newer format), 0 repaired, 0 to repair" "$WS/n2.out"

for n in $DAMAGED; do
    check_eq "$n: mtime kept" "1262401445.678901234" "$(stat -c %.9Y "$B/$n")"
done
for n in foreign.txt garbage; do
    check "$n left alone" cmp "$SRC/$n" "$B/$n"
done

check "mount the repaired store" mount_store
for n in $DAMAGED clean mixed; do
    read -r want size < <(expect "$n")
    check_eq "$n: size through the mount" "$size" "$(stat -c %s "$MNT/$n")"
    check "$n: content through the mount" cmp <(head -c "$size" "$want") "$MNT/$n"
    check "$n: lz4 -d of the backing file equals the mount" cmp <(_lib_lz4d "$B/$n") "$MNT/$n"
done
check "foreign.txt reads byte for byte" cmp "$SRC/foreign.txt" "$MNT/foreign.txt"

# ---- a mounted store is refused, and nothing is written
snapshot "$B" >"$WS/snap.mounted"
for opt in -n -y ""; do
    "$FSCK" $opt "$B" </dev/null >"$WS/m.out" 2>&1
    rc=$?
    check_eq "fsck $opt on a mounted store: exit 8" 8 "$rc"
    check "fsck $opt on a mounted store: says why" grep -q "store is in use (mounted" "$WS/m.out"
done
check "a refused fsck wrote nothing" cmp "$WS/snap.mounted" <(snapshot "$B")
check "umount" umount_store

# ---- store B: one flipped byte in a block is reported, never touched
B2="$WS/b2"
format_store "$B2" -b 64K >/dev/null
check "mount store B" mount_at "$B2" "$WS/m2" file_version=1
cp "$SRC/base" "$WS/m2/f"
check "unmount store B" umount_at "$WS/m2" "$DAEMON_PID"
blk2=$(fmt block "$B2/f" 2)
fmt flip "$B2/f" $((blk2 + 4 + 100))
snapshot "$B2" >"$WS/b2.before"
"$FSCK" -n "$B2" >"$WS/b2n.out" 2>&1
rc=$?
check_eq "bad block: fsck -n exit 4" 4 "$rc"
check "bad block: fsck -n changed no byte" cmp "$WS/b2.before" <(snapshot "$B2")
check "bad block: file and block named" \
    grep -q "^$B2/f: block 2 (logical bytes 131072..196607) at offset $blk2: checksum mismatch; not repairable" "$WS/b2n.out"
"$FSCK" -y "$B2" >"$WS/b2y.out" 2>&1
rc=$?
check_eq "bad block: fsck -y exit 4 (nothing to correct, error left)" 4 "$rc"
check "bad block: fsck -y changed no byte" cmp "$WS/b2.before" <(snapshot "$B2")
check "bad block: summary" grep -q "1 unrepairable, 1 bad blocks" "$WS/b2y.out"
check "mount store B again" mount_at "$B2" "$WS/m2"
check "bad block: blocks before it read" cmp <(head -c 131072 "$SRC/base") <(head -c 131072 "$WS/m2/f")
check "bad block: blocks after it read" cmp <(tail -c +196609 "$SRC/base") <(tail -c +196609 "$WS/m2/f")
check_fails "bad block: reading it fails" dd if="$WS/m2/f" of=/dev/null bs=65536 skip=2 count=1 status=none
check "unmount store B" umount_at "$WS/m2" "$DAEMON_PID"

# ---- one repair for both: a torn file (no seek table) whose last frame holds a bad block.
# The daemon's open walks the frames checking every block and cuts that frame as the torn
# tail; fsck -y must cut the same (before, its walk kept the frame and its bad block).
B4="$WS/b4" B4D="$WS/b4-daemon"
format_store "$B4" -b 64K >/dev/null
check "mount store D" mount_at "$B4" "$WS/m4" file_version=1
cp "$SRC/base" "$WS/m4/t"
check "unmount store D" umount_at "$WS/m4" "$DAEMON_PID"
last=$(($(fmt nframes "$B4/t") - 1))
lastblk=$(fmt block "$B4/t" $((($(stat -c %s "$SRC/base") - 1) / 65536)))
keep=$(fmt expect_cut "$B4/t" "$(fmt fstart "$B4/t" $last)")
truncate -s "$(fmt tstart "$B4/t")" "$B4/t"
fmt flip "$B4/t" $((lastblk + 4 + 10))
touch -d '2010-01-02 03:04:05.678901234' "$B4/t"
cp -a "$B4" "$B4D"
"$FSCK" -y "$B4" >"$WS/b4y.out" 2>&1
check_eq "torn with a bad last block: fsck -y exit 1 (corrected)" 1 "$?"
check "mount what fsck repaired" mount_at "$B4" "$WS/m4"
check_eq "fsck -y kept the frames before the bad one ($keep bytes)" "$keep" "$(stat -c %s "$WS/m4/t")"
check "and they read back" cmp <(head -c "$keep" "$SRC/base") "$WS/m4/t"
check "unmount" umount_at "$WS/m4" "$DAEMON_PID"
check "mount the damaged copy (the daemon's open repairs it)" mount_at "$B4D" "$WS/m4d"
check_eq "the daemon's open keeps as much as fsck -y" "$keep" "$(stat -c %s "$WS/m4d/t")"
check "unmount" umount_at "$WS/m4d" "$DAEMON_PID"
check "the backing file is the same after either repair" cmp "$B4/t" "$B4D/t"

# ---- on a terminal without -n or -y: asks for each file (answers y, then n)
B3="$WS/b3"
format_store "$B3" -b 64K >/dev/null
check "mount store C" mount_at "$B3" "$WS/m3" file_version=1
cp "$SRC/base" "$WS/m3/a" && cp "$SRC/base" "$WS/m3/b"
check "unmount store C" umount_at "$WS/m3" "$DAEMON_PID"
truncate -s "$(fmt tstart "$B3/a")" "$B3/a"
truncate -s "$(fmt tstart "$B3/b")" "$B3/b"
printf 'y\nn\n' | script -qec "$FSCK $B3" /dev/null | tr -d '\r' >"$WS/tty.out"
check_eq "on a terminal: exit 1|4 (one repaired, one declined)" 5 "${PIPESTATUS[1]}"
check "on a terminal: asked for a" grep -q "^$B3/a: repair? \[y/N\]" "$WS/tty.out"
check "on a terminal: asked for b" grep -q "^$B3/b: repair? \[y/N\]" "$WS/tty.out"
"$FSCK" -n "$B3" >"$WS/b3n.out" 2>&1
check_eq "on a terminal: b is still torn" 4 $?
check "on a terminal: only b is left" grep -q "2 own, .* 0 repaired, 1 to repair" "$WS/b3n.out"
check_fails "on a terminal: a was repaired" grep -q "^$B3/a: " "$WS/b3n.out"

# ---- operational and usage errors
status_of() { "$@" </dev/null >"$WS/e.out" 2>&1; echo $?; }
check_eq "no arguments: exit 16" 16 "$(status_of "$FSCK")"
check_eq "-n and -y: exit 16" 16 "$(status_of "$FSCK" -n -y "$B")"
check_eq "unknown option: exit 16" 16 "$(status_of "$FSCK" -q "$B")"
check_eq "two directories: exit 16" 16 "$(status_of "$FSCK" "$B" "$B2")"
check_eq "missing directory: exit 8" 8 "$(status_of "$FSCK" "$WS/absent")"
mkdir -p "$WS/plain"
check_eq "not a store: exit 8" 8 "$(status_of "$FSCK" "$WS/plain")"
check "not a store: says so" grep -q "not a fpgalz4fs store" "$WS/e.out"
cp "$B2/.fpgalz4fs" "$WS/sb.save"
echo garbage >"$B2/.fpgalz4fs"
check_eq "damaged superblock: exit 8" 8 "$(status_of "$FSCK" -n "$B2")"
cp "$WS/sb.save" "$B2/.fpgalz4fs"
check_eq "--help: exit 0" 0 "$(status_of "$FSCK" --help)"

finish
