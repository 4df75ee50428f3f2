#!/bin/bash
# t_convert: fsck.fpgalz4fs --convert rewrites files of format version 1 as version 7 (the
# newest: version 2 with hole runs).
# Files written by a mount with -o file_version=1 (a small text file, a multi-MiB compressible
# file with an overwrite in its middle, a file with a hole made by truncate, an empty file, a
# hard-linked file) are version 1; without --convert fsck names them only under -v and changes
# nothing; fsck -y --convert converts all but the hard-linked one (exit 1), keeping content
# (through a new mount and with lz4 -d), mode, owner, mtime and extended attributes, and a
# second run finds nothing. A planted temporary and a conversion killed with kill -9 leave the
# originals intact and a rerun finishes. A file with a bad block, and one whose conversion
# fails, stay as they were and are named. A store whose superblock says format_version=1 still
# mounts, and its version 1 files read and append correctly (staying version 1).
. "$(dirname "$0")/lib.sh"
need_binaries "$FSCK"
BLOCK_SIZE=64K

# ver FILE: the format version in a backing file's marker (bytes 31..34)
ver() { od -An -tu4 -j31 -N4 "$1" | tr -d ' '; }
# listing DIR: path, mode, owner, mtime of every regular file but the store's own names
listing() { (cd "$1" && find . -type f ! -name '.fpgalz4fs*' -printf '%p %m %U:%G %T@\n' | sort); }
snapshot() { (cd "$1" && find . -type f -printf '%p %s %T@ %m\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
lz4d() { lz4 -d -c "$1" 2>/dev/null; }

SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/small.txt" 3000 text 1
gen_file "$SRC/big" 6000000 text 2
gen_file "$SRC/linked" 200000 mixed 3
printf 'OVERWRITTEN' | dd of="$SRC/big" bs=1 seek=700000 conv=notrunc status=none
{ printf 'start'; head -c $((3000000 - 8)) /dev/zero; printf 'end'; } >"$SRC/sparse"
: >"$SRC/empty"
FILES="small.txt big sparse empty"       # converted; sub/linked (two names) is not

# ---- store A: version 1 files
B=$BACKING
check "mount a new store with file_version=1" mount_store file_version=1
cp "$SRC/small.txt" "$SRC/linked" "$MNT/"
gen_file "$MNT/big" 6000000 text 2
printf 'OVERWRITTEN' | dd of="$MNT/big" bs=1 seek=700000 conv=notrunc status=none
printf 'start' >"$MNT/sparse" && truncate -s $((3000000 - 3)) "$MNT/sparse" && printf 'end' >>"$MNT/sparse"
: >"$MNT/empty"
mkdir "$MNT/sub" && mv "$MNT/linked" "$MNT/sub/linked" && ln "$MNT/sub/linked" "$MNT/linked2"
chmod 640 "$MNT/small.txt"
chmod 4755 "$MNT/big"
setfattr -n user.color -v blue "$MNT/small.txt"
touch -d '2001-02-03 04:05:06.123456789' "$MNT/small.txt" "$MNT/sparse"
check "unmount" umount_store
chown 1234:5678 "$B/small.txt"
for f in $FILES sub/linked; do
    check_eq "$f is version 1" 1 "$(ver "$B/$f")"
done
listing "$B" >"$WS/list.before"
snapshot "$B" >"$WS/snap.before"

# ---- without --convert: named under -v only, nothing changed
"$FSCK" -n -v "$B" >"$WS/nv.out" 2>&1
check_eq "fsck -n -v: exit 0" 0 $?
for f in $FILES; do
    check "fsck -n -v names $f as version 1" \
        grep -qx "$B/$f: format version 1: fsck --convert rewrites it as version 7" "$WS/nv.out"
done
# a file with two names is checked once, under the first name the walk meets
check "fsck -n -v names the hard-linked file as version 1" \
    grep -qxE "$B/(linked2|sub/linked): format version 1: fsck --convert rewrites it as version 7" "$WS/nv.out"
"$FSCK" -y "$B" >"$WS/y.out" 2>&1
check_eq "fsck -y without --convert: exit 0" 0 $?
check_eq "fsck -y without -v says nothing of version 1" "" "$(grep 'format version 1' "$WS/y.out")"
check "fsck without --convert changed nothing" cmp "$WS/snap.before" <(snapshot "$B")
"$FSCK" -n --convert "$B" >"$WS/out" 2>&1
check_eq "fsck -n --convert: usage error 16" 16 $?

# ---- an interrupted conversion of small.txt, simulated: its temporary is left behind
tmp_small=$(printf '.fpgalz4fs-convert.%x.tmp' "$(stat -c %i "$B/small.txt")")
head -c 5000 "$B/small.txt" >"$B/$tmp_small"

"$FSCK" -y --convert "$B" >"$WS/c.out" 2>&1
rc=$?
sed 's/^/    | /' "$WS/c.out"
check_eq "fsck -y --convert: exit 1 (corrected)" 1 "$rc"
for f in $FILES; do
    check "$f: converted" grep -q "^$B/$f: format version 1: converted to version 7" "$WS/c.out"
    check_eq "$f is version 7" 7 "$(ver "$B/$f")"
    check "$f: lz4 -d of the backing file gives the content" cmp "$SRC/$f" <(lz4d "$B/$f")
done
check "the hard-linked file is named (once, by the first of its names)" \
    test "$(grep -cE "^$B/(linked2|sub/linked): format version 1: has 2 hard links: not converted" "$WS/c.out")" = 1
check_eq "the hard-linked file is still version 1" 1 "$(ver "$B/sub/linked")"
check_eq "hard links still one inode" "$(stat -c %i "$B/sub/linked")" "$(stat -c %i "$B/linked2")"
check "the hard-linked file decodes with lz4 -d" cmp "$SRC/linked" <(lz4d "$B/sub/linked")
check "summary" grep -q "4 files converted to version 7 .*not converted: 1 hard-linked, 0 with problems left, 0 failed; 1 stale temporaries removed" "$WS/c.out"
check_eq "no temporary left" "" "$(find "$B" -name '.fpgalz4fs-convert.*')"
check "mode, owner, mtime kept" cmp "$WS/list.before" <(listing "$B")
check_eq "owner kept" 1234:5678 "$(stat -c %u:%g "$B/small.txt")"
check_eq "set-uid bit kept" 4755 "$(stat -c %a "$B/big")"
check_eq "nanosecond mtime kept" 981173106.123456789 "$(stat -c %.9Y "$B/small.txt")"
check_eq "extended attribute kept" blue "$(getfattr --only-values -n user.color "$B/small.txt" 2>/dev/null)"
"$FSCK" -n "$B" >"$WS/n2.out" 2>&1
check_eq "fsck -n after the conversion: exit 0" 0 $?
"$FSCK" -y --convert "$B" >"$WS/c2.out" 2>&1
check_eq "a second --convert: exit 0 (the hard-linked file is no error)" 0 $?
check "a second --convert converts nothing" grep -q " 0 files converted to version 7" "$WS/c2.out"

check "mount the converted store" mount_store
for f in $FILES sub/linked linked2; do
    s=$SRC/$(basename "$f"); [ "$f" = linked2 ] && s=$SRC/linked
    check "$f reads through the mount" cmp "$s" "$MNT/$f"
done
check_eq "size of the file with a hole" 3000000 "$(stat -c %s "$MNT/sparse")"
check_eq "owner through the mount" 1234:5678 "$(stat -c %u:%g "$MNT/small.txt")"
check_eq "mtime through the mount" 981173106.123456789 "$(stat -c %.9Y "$MNT/small.txt")"
printf 'more\n' >>"$MNT/small.txt"
printf 'more\n' >>"$MNT/linked2"
check "unmount" umount_store
check "append to a converted file" cmp <(cat "$SRC/small.txt"; printf 'more\n') <(lz4d "$B/small.txt")
check "append to the version 1 file" cmp <(cat "$SRC/linked"; printf 'more\n') <(lz4d "$B/sub/linked")
check_eq "the appended version 1 file stays version 1" 1 "$(ver "$B/sub/linked")"
check "fsck -n after the appends: exit 0" "$FSCK" -n "$B"

# ---- store B: kill -9 while a large file is being converted, then run again
B2="$WS/b2"
format_store "$B2" -b 64K >/dev/null
check "mount store B with file_version=1" mount_at "$B2" "$WS/m2" file_version=1
gen_file "$SRC/aa-big" 40000000 text 4
cp "$SRC/aa-big" "$SRC/small.txt" "$WS/m2/"
check "unmount store B" umount_at "$WS/m2" "$DAEMON_PID"
check_eq "aa-big is version 1" 1 "$(ver "$B2/aa-big")"
snapshot "$B2" >"$WS/b2.before"
tmp_big=$(printf '.fpgalz4fs-convert.%x.tmp' "$(stat -c %i "$B2/aa-big")")
spawn "$FSCK" -y --convert "$B2"
for _ in $(seq 1 4000); do
    [ -e "$B2/$tmp_big" ] && break
    sleep 0.005
done
if [ -e "$B2/$tmp_big" ]; then
    kill -KILL "$SPAWNED_PID"
    wait "$SPAWNED_PID" 2>/dev/null
    pass "fsck killed while writing $tmp_big"
    check "after the kill: the temporary is there" test -e "$B2/$tmp_big"
    check "after the kill: the originals are untouched" cmp "$WS/b2.before" \
        <(snapshot "$B2" | grep -v fpgalz4fs-convert)
else
    wait "$SPAWNED_PID" 2>/dev/null
    fail_check "fsck killed mid-way" "no temporary seen (the run ended first?)"
fi
check_eq "after the kill: aa-big is still version 1" 1 "$(ver "$B2/aa-big")"
check "after the kill: aa-big decodes with lz4 -d" cmp "$SRC/aa-big" <(lz4d "$B2/aa-big")
"$FSCK" -y --convert "$B2" >"$WS/b2.out" 2>&1
rc=$?
sed 's/^/    | /' "$WS/b2.out"
check_eq "rerun: exit 1" 1 "$rc"
check "rerun: the stale temporary removed, both converted" \
    grep -q "2 files converted to version 7 .* 0 failed; 1 stale temporaries removed" "$WS/b2.out"
check_eq "rerun: no temporary left" "" "$(find "$B2" -name '.fpgalz4fs-convert.*')"
check_eq "aa-big is version 7" 7 "$(ver "$B2/aa-big")"
check "aa-big: lz4 -d gives the content" cmp "$SRC/aa-big" <(lz4d "$B2/aa-big")
check "store B: fsck -n exit 0" "$FSCK" -n "$B2"
check "mount store B again" mount_at "$B2" "$WS/m2"
check "aa-big reads through the mount" cmp "$SRC/aa-big" "$WS/m2/aa-big"
check "small.txt reads through the mount" cmp "$SRC/small.txt" "$WS/m2/small.txt"
check "unmount store B" umount_at "$WS/m2" "$DAEMON_PID"

# ---- store D: files that are not converted: one with a bad block (a problem no repair
# touches), one whose conversion fails (its directory made immutable: no temporary can be made)
B4="$WS/b4"
format_store "$B4" -b 64K >/dev/null
check "mount store D with file_version=1" mount_at "$B4" "$WS/m4" file_version=1
gen_file "$SRC/bad" 300000 text 5
cp "$SRC/bad" "$SRC/small.txt" "$WS/m4/"
mkdir "$WS/m4/locked" && cp "$SRC/small.txt" "$WS/m4/locked/f"
check "unmount store D" umount_at "$WS/m4" "$DAEMON_PID"
# a flipped byte inside block 0's compressed data (the block starts after the 59-byte marker)
python3 -c 'import sys; p = sys.argv[1]; d = bytearray(open(p, "rb").read()); d[1000] ^= 0x40; open(p, "r+b").write(d)' "$B4/bad"
sum_bad=$(sha256sum <"$B4/bad")
want=5                                   # converted (1) | bad block left (4)
if chattr +i "$B4/locked" 2>/dev/null; then
    locked=1 want=13                     # | the failed conversion (8)
else
    locked=0
    skip "chattr +i does not work here: the failing conversion is not tried"
fi
"$FSCK" -y --convert "$B4" >"$WS/b4.out" 2>&1
rc=$?
[ $locked = 1 ] && chattr -i "$B4/locked"
sed 's/^/    | /' "$WS/b4.out"
check_eq "store D: exit $want" "$want" "$rc"
check "the file with a bad block is not converted, and says so" \
    grep -q "^$B4/bad: format version 1: not converted to version 7 (problems left" "$WS/b4.out"
check_eq "the file with a bad block is still version 1" 1 "$(ver "$B4/bad")"
check_eq "the file with a bad block is unchanged" "$sum_bad" "$(sha256sum <"$B4/bad")"
check_eq "small.txt beside them is converted" 7 "$(ver "$B4/small.txt")"
if [ $locked = 1 ]; then
    check "the failed conversion is reported" \
        grep -q "^$B4/locked/f: format version 1: not converted to version 7 (left as it was): " "$WS/b4.out"
    check_eq "the file whose conversion failed is still version 1" 1 "$(ver "$B4/locked/f")"
    check "the file whose conversion failed is intact" cmp "$SRC/small.txt" <(lz4d "$B4/locked/f")
    check "store D: summary" grep -q "1 files converted to version 7 .*not converted: 0 hard-linked, 1 with problems left, 1 failed" "$WS/b4.out"
fi
check_eq "store D: no temporary left" "" "$(find "$B4" -name '.fpgalz4fs-convert.*')"

# ---- store C: a superblock of format_version=1
cat >"$WS/sb.py" <<'PY'
# set-sb-version FILE V: rewrites the format_version line and recomputes the checksum line
# (XXH32, seed 0, of every byte before it; docs/FORMAT.md 1.3)
import sys
P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
M = 0xffffffff
def rotl(x, r): return ((x << r) | (x >> (32 - r))) & M
def xxh32(d, seed=0):
    n, i = len(d), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed & M, (seed - P1) & M]
        while i + 16 <= n:
            for k in range(4):
                v[k] = (rotl((v[k] + int.from_bytes(d[i:i + 4], 'little') * P2) & M, 13) * P1) & M
                i += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 4 <= n:
        h = (rotl((h + int.from_bytes(d[i:i + 4], 'little') * P3) & M, 17) * P4) & M
        i += 4
    while i < n:
        h = (rotl((h + d[i] * P5) & M, 11) * P1) & M
        i += 1
    h ^= h >> 15; h = (h * P2) & M; h ^= h >> 13; h = (h * P3) & M; h ^= h >> 16
    return h
cmd, path = sys.argv[1], sys.argv[2]
lines = open(path, 'rb').read().split(b'\n')
body = [l for l in lines if l and not l.startswith(b'checksum=')]
if cmd == 'check':          # the helper agrees with the store's own checksum line
    want = [l for l in lines if l.startswith(b'checksum=')][0]
    text = b''.join(l + b'\n' for l in body)
    sys.exit(0 if want == b'checksum=%08x' % xxh32(text) else 1)
body = [b'format_version=' + sys.argv[3].encode() if l.startswith(b'format_version=') else l
        for l in body]
text = b''.join(l + b'\n' for l in body)
open(path, 'wb').write(text + b'checksum=%08x\n' % xxh32(text))
PY
B3="$WS/b3"
format_store "$B3" -b 64K >/dev/null
check "the checksum helper agrees with mkfpgalz4fs" python3 "$WS/sb.py" check "$B3/.fpgalz4fs"
check "mount store C with file_version=1" mount_at "$B3" "$WS/m3" file_version=1
cp "$SRC/small.txt" "$WS/m3/log"
cp "$SRC/big" "$WS/m3/data"
check "unmount store C" umount_at "$WS/m3" "$DAEMON_PID"
check "set the superblock's format_version to 1" python3 "$WS/sb.py" set "$B3/.fpgalz4fs" 1
check_eq "the superblock says format_version=1" 1 "$(sed -n 's/^format_version=//p' "$B3/.fpgalz4fs")"
check "fsck -n accepts the version 1 store" "$FSCK" -n "$B3"
check "the version 1 store mounts" mount_at "$B3" "$WS/m3"
check "log reads" cmp "$SRC/small.txt" "$WS/m3/log"
check "data reads" cmp "$SRC/big" "$WS/m3/data"
printf 'appended line\n' >>"$WS/m3/log"
printf 'PATCH' | dd of="$WS/m3/data" bs=1 seek=123456 conv=notrunc status=none
head -c 100000 "$SRC/big" >>"$WS/m3/data"
check "unmount store C" umount_at "$WS/m3" "$DAEMON_PID"
cp "$SRC/big" "$WS/data.want"
printf 'PATCH' | dd of="$WS/data.want" bs=1 seek=123456 conv=notrunc status=none
head -c 100000 "$SRC/big" >>"$WS/data.want"
check_eq "log stays version 1" 1 "$(ver "$B3/log")"
check_eq "data stays version 1" 1 "$(ver "$B3/data")"
check "fsck -n after the appends: exit 0" "$FSCK" -n "$B3"
check "mount the version 1 store again" mount_at "$B3" "$WS/m3"
check "log: appended content" cmp <(cat "$SRC/small.txt"; printf 'appended line\n') "$WS/m3/log"
check "data: patched and appended content" cmp "$WS/data.want" "$WS/m3/data"
check "unmount store C" umount_at "$WS/m3" "$DAEMON_PID"
check "data: lz4 -d gives the content" cmp "$WS/data.want" <(lz4d "$B3/data")
check_eq "the superblock still says format_version=1" 1 "$(sed -n 's/^format_version=//p' "$B3/.fpgalz4fs")"

finish
