#!/bin/bash
# t_adopt: mkfpgalz4fs --adopt formats a directory that holds files without changing any of
# them, and they read through the mount byte for byte; --compress-existing converts them in
# place (lz4 -d gives the original bytes; mode, owner, mtime and extended attributes kept;
# hard-linked files skipped), refuses a mounted store, and an interrupted run (kill -9 while a
# temporary exists) followed by a second run leaves every file intact and converted.
. "$(dirname "$0")/lib.sh"
need_binaries "$FSCK"

B=$BACKING
mkdir -p "$B/sub/deeper" "$B/empty-dir"
gen_file "$B/aa-big" 40000000 text 1          # first in name order: the run is killed in it
gen_file "$B/text" 300000 text 2
gen_file "$B/sub/mixed" 900000 mixed 3
head -c 150000 /dev/urandom >"$B/sub/random"
: >"$B/empty"
truncate -s 2000000 "$B/sparse" && printf 'end' >>"$B/sparse"
gen_file "$B/sub/deeper/odd name 'q'" 5000 text 4
for i in $(seq 1 40); do gen_file "$B/sub/deeper/small-$i" $((i * 997)) text $((i + 10)); done
ln -s text "$B/link"
ln "$B/sub/mixed" "$B/sub/mixed-hardlink"
chmod 640 "$B/text"
chmod 4755 "$B/sub/random"
chown 1234:5678 "$B/text"
setfattr -n user.color -v blue "$B/text"
setfattr -n user.empty "$B/sub/random"
setfattr -n trusted.secret -v 0x00ff10 "$B/sub/deeper/small-7"
touch -d '2001-02-03 04:05:06.123456789' "$B/text" "$B/sparse"
touch -h -d '2002-02-02 02:02:02' "$B/link"

# Listing of every entry but the top directory (formatting adds the superblock to it): type,
# mode, owner, mtime, link target; content checksums of regular files (as given by $2: cat
# for the mount, lz4d for converted backing files).
listing() {
    (cd "$1" && find . -mindepth 1 ! -name '.fpgalz4fs*' -printf '%p %y %m %U:%G %T@ %l\n' | sort)
}
contents() {
    local f
    (cd "$1" && find . -type f ! -name '.fpgalz4fs*' -print0 | sort -z | while IFS= read -r -d '' f; do
        printf '%s %s\n' "$("$2" "$f" | sha256sum | cut -d' ' -f1)" "$f"
    done)
}
plain() { cat "$1"; }
lz4d() { lz4 -d -c "$1" 2>/dev/null; }
xattrs() { (cd "$1" && getfattr -R -d -m - -e hex . 2>/dev/null | grep -v '^# file: ./.fpgalz4fs'); }

listing "$B" >"$WS/list.orig"
contents "$B" plain >"$WS/sums.orig"
xattrs "$B" >"$WS/xattr.orig"
ino_big=$(stat -c %i "$B/aa-big")

"$MKFS" -b 64K "$B" >"$WS/out" 2>&1
check_eq "without --adopt a directory with files is refused" 1 $?
check "the refusal names --adopt" grep -q -- "--adopt" "$WS/out"
"$MKFS" --adopt -b 64K "$B" >"$WS/out" 2>&1
check_eq "--adopt formats it" 0 $?
check "--adopt wrote the superblock" test -f "$B/.fpgalz4fs"
check "--adopt changed no file (metadata)" cmp "$WS/list.orig" <(listing "$B")
check "--adopt changed no file (content)" cmp "$WS/sums.orig" <(contents "$B" plain)
"$MKFS" --adopt "$B" >"$WS/out" 2>&1
check_eq "--adopt of a store is refused" 1 $?

check "mount the adopted store" mount_store
check "every file reads byte for byte through the mount" cmp "$WS/sums.orig" <(contents "$MNT" plain)
check "metadata through the mount" cmp "$WS/list.orig" <(listing "$MNT")
"$MKFS" --compress-existing "$B" >"$WS/out" 2>&1
check_eq "--compress-existing on a mounted store is refused" 1 $?
check "the refusal says why" grep -q "in use" "$WS/out"
check "unmount" umount_store
check "the refused run changed nothing" cmp "$WS/sums.orig" <(contents "$B" plain)

# ---- interrupted: kill -9 while the first file's temporary is being written
tmp_big=$(printf '.fpgalz4fs-convert.%x.tmp' "$ino_big")
spawn "$MKFS" --compress-existing "$B"
for _ in $(seq 1 2000); do
    [ -e "$B/$tmp_big" ] && break
    sleep 0.005
done
if [ -e "$B/$tmp_big" ]; then
    kill -KILL "$SPAWNED_PID"
    wait "$SPAWNED_PID" 2>/dev/null
    pass "conversion killed while writing $tmp_big"
else
    wait "$SPAWNED_PID" 2>/dev/null
    fail_check "conversion killed mid-way" "no temporary seen (the run ended first?)"
fi
check "after the kill: a stale temporary is there" test -e "$B/$tmp_big"
check "mount after the kill" mount_store
check "after the kill: every original file reads byte for byte" \
    cmp "$WS/sums.orig" <(contents "$MNT" plain | grep -v fpgalz4fs-convert)
check "unmount after the kill" umount_store

"$MKFS" --compress-existing "$B" >"$WS/run2.out" 2>"$WS/run2.err"
rc=$?
sed 's/^/    | /' "$WS/run2.out" "$WS/run2.err"
check_eq "second run: exit 0" 0 "$rc"
check "second run removed the stale temporary" grep -q "1 stale temporaries removed" "$WS/run2.out"
check "second run: 46 files converted, 2 hard-linked skipped" \
    grep -q "converted 46 files .* 2 hard-linked skipped, 0 failed" "$WS/run2.out"
check "hard links are named" grep -q "sub/mixed-hardlink: has 2 hard links: not converted" "$WS/run2.err"
check_eq "no temporary left" "" "$(find "$B" -name '.fpgalz4fs-convert.*')"

# every converted file decodes with lz4 -d to the original bytes
contents "$B" lz4d | grep -v ' ./sub/mixed' >"$WS/sums.lz4"
check "converted files decode with lz4 -d to the original bytes" \
    cmp <(grep -v ' ./sub/mixed' "$WS/sums.orig") "$WS/sums.lz4"
check_eq "hard links still one inode" "$(stat -c %i "$B/sub/mixed")" "$(stat -c %i "$B/sub/mixed-hardlink")"
check "hard-linked files left as they were" cmp <(grep ' ./sub/mixed' "$WS/sums.orig") <(contents "$B" plain | grep ' ./sub/mixed')
# directories the killed run wrote a temporary into (the top) have a new mtime; sub/ not
check "mode, owner, mtime kept (backing)" cmp "$WS/list.orig" <(listing "$B")
check "extended attributes kept" cmp "$WS/xattr.orig" <(xattrs "$B")
check_eq "set-uid bit kept" 4755 "$(stat -c %a "$B/sub/random")"
check_eq "owner kept" 1234:5678 "$(stat -c %u:%g "$B/text")"
check_eq "nanosecond mtime kept" 981173106.123456789 "$(stat -c %.9Y "$B/text")"
# (on disk: a version 2 file's apparent size counts the punched padding of its slots)
check_eq "converted file takes less disk space" yes \
    "$([ "$(($(stat -c %b "$B/aa-big") * $(stat -c %B "$B/aa-big")))" -lt 40000000 ] && echo yes)"
check "fsck finds the converted store clean" "$FSCK" -n "$B"

check "mount the converted store" mount_store
check "after conversion every file reads byte for byte through the mount" \
    cmp "$WS/sums.orig" <(contents "$MNT" plain)
check "after conversion the metadata through the mount" cmp "$WS/list.orig" <(listing "$MNT")
check "unmount the converted store" umount_store

"$MKFS" --compress-existing "$B" >"$WS/run3.out" 2>/dev/null
check_eq "a third run: exit 0" 0 $?
check "a third run converts nothing" grep -q "converted 0 files .* 46 already in the format" "$WS/run3.out"

# ---- --adopt --compress-existing in one go; refusals
D2="$WS/d2"
mkdir -p "$D2"
gen_file "$D2/a" 100000 text 9
"$MKFS" --adopt --compress-existing "$D2" >"$WS/out" 2>&1
check_eq "--adopt --compress-existing: exit 0" 0 $?
check "--adopt --compress-existing: converted" cmp <(gen_file "$WS/a.orig" 100000 text 9 && cat "$WS/a.orig") <(lz4 -d -c "$D2/a")
mkdir -p "$WS/d3"
echo x >"$WS/d3/f"
"$MKFS" --compress-existing "$WS/d3" >"$WS/out" 2>&1
check_eq "--compress-existing on a directory that is not a store: exit 1" 1 $?
check "it says so" grep -q "not a fpgalz4fs store" "$WS/out"
check_eq "and leaves the file alone" x "$(cat "$WS/d3/f")"
"$MKFS" --compress-existing -b 64K "$D2" >"$WS/out" 2>&1
check_eq "--compress-existing -b without --adopt: usage error" 2 $?

finish
