#!/bin/bash
# t_sizes: the sizes file (docs/FORMAT.md 1.6). An unmount that leaves the store clean keeps
# the logical sizes of the files it knows in .fpgalz4fs-sizes, so that the next mount answers
# stat, ls -l and du of unchanged files without reading their footers (counter size_reads).
# Checked: the sizes read back right with no footer read; a file changed through a mount, or
# behind it in the backing directory, is read again (its state moved); a damaged, truncated,
# symlinked or FIFO sizes file is not used and costs nothing but footer reads; a mount that
# ends with a kill -9, or that found the store dirty, or a read-only one, writes no sizes
# file; the name is hidden in the mount and cannot be made there; fsck passes it by.
. "$(dirname "$0")/lib.sh"
need_binaries

N=40
BLOCK_SIZE=64K
mkdir -p "$WS/src"
for i in $(seq 1 $N); do
    head -c $((i * i * 997 % 300000)) /dev/urandom | base64 -w 100 >"$WS/src/f$i"
done
: >"$WS/src/empty"
SIZES=$BACKING/.fpgalz4fs-sizes

# the size of every file in the mount against the source
sizes_right() {
    local f bad=0
    for f in "$WS"/src/*; do
        [ "$(stat -c %s "$MNT/${f##*/}")" = "$(stat -c %s "$f")" ] || { echo "${f##*/}"; bad=1; }
    done
    return $bad
}
reads() { stat_of "$(stats "$MNT")" size_reads; }

check "mount" mount_store || finish
check "copy $((N + 1)) files in" cp "$WS"/src/* "$MNT/"
check "unmount" umount_store
check "a clean unmount leaves the sizes file" test -f "$SIZES"
check "the log says how many sizes it kept" grep -q "logical sizes kept in .fpgalz4fs-sizes" "$(last_log)"

check "mount again" mount_store || finish
check "the log says how many sizes it read" grep -q "logical sizes read from .fpgalz4fs-sizes" "$(last_log)"
check "every size is right" sizes_right
check_eq "no footer was read for them (size_reads)" 0 "$(reads)"
check "and the content reads back" diff -r "$WS/src" "$MNT"
check "the name is hidden in the mount" bash -c "! ls -A '$MNT' | grep -q fpgalz4fs"
check_fails "and cannot be made there" touch "$MNT/.fpgalz4fs-sizes"
cat "$WS/src/f3" >>"$WS/src/f7"
cat "$WS/src/f3" >>"$MNT/f7"
check "unmount after an append" umount_store

check "mount after the append" mount_store || finish
check "every size is right, the appended file's too" sizes_right
check_eq "no footer was read (the unmount kept the new state)" 0 "$(reads)"
check "unmount" umount_store

# a file changed behind the mount: its ctime moves, so its entry no longer counts
touch "$BACKING/f5"
check "mount after a touch in the backing directory" mount_store || finish
check "every size is right" sizes_right
check_eq "the touched file's footer alone was read" 1 "$(reads)"
check "unmount" umount_store

# damage of every kind: the file is not used, the sizes come from the footers
printf 'X' | dd of="$SIZES" bs=1 seek=60 conv=notrunc status=none
check "mount with a damaged sizes file" mount_store || finish
check "the log says it is not used" grep -q "fpgalz4fs-sizes: checksum mismatch; it is not used" "$(last_log)"
check "every size is right" sizes_right
check_eq "every footer was read" $((N + 1)) "$(reads)"
check "unmount" umount_store
check "mount" mount_store || finish
check "every size is right" sizes_right
check_eq "the unmount before wrote a good sizes file again: no footer read" 0 "$(reads)"
check "unmount" umount_store
truncate -s 100 "$SIZES"
check "mount with a cut sizes file" mount_store || finish
check "every size is right" sizes_right
check_eq "every footer was read" $((N + 1)) "$(reads)"
check "unmount" umount_store
echo "not a victim" >"$WS/victim"
rm -f "$SIZES"
ln -s "$WS/victim" "$SIZES"
check "mount with a symlink for a sizes file" mount_store || finish
check "the log says it is not a regular file" grep -q "fpgalz4fs-sizes: not a regular file" "$(last_log)"
check "every size is right" sizes_right
check "unmount" umount_store
check_eq "the link's target is untouched" "not a victim" "$(cat "$WS/victim")"
check "the link itself was replaced by a sizes file" test -f "$SIZES" -a ! -L "$SIZES"
rm -f "$SIZES"
mkfifo "$SIZES"
check "mount with a FIFO for a sizes file (it is not opened for reading: no hang)" \
    mount_store || finish
check "the log says it is not a regular file" grep -q "fpgalz4fs-sizes: not a regular file" "$(last_log)"
check "every size is right" sizes_right
check "unmount" umount_store
check "the FIFO was replaced by a sizes file" test -f "$SIZES" -a ! -p "$SIZES"

# a mount killed with -9: nothing is written, and what it changed is read from the files
check "mount" mount_store || finish
before=$(stat -c %y "$SIZES")
cat "$WS/src/f2" >>"$WS/src/f9"
cat "$WS/src/f2" >>"$MNT/f9"
check "an append reads back" cmp "$WS/src/f9" "$MNT/f9"
kill_daemon
check_eq "a killed mount writes no sizes file" "$before" "$(stat -c %y "$SIZES")"
check "mount after the kill" mount_store || finish
check "every size is right, the appended file's too" sizes_right
check_eq "the appended file's footer alone was read" 1 "$(reads)"
check "unmount" umount_store
check_eq "a mount that found the store dirty writes no sizes file" "$before" \
    "$(stat -c %y "$SIZES")"

# read-only: read, never written
rm -f "$SIZES"
printf 'clean %s\n' "$(date +%s%N)" >"$BACKING/.fpgalz4fs-clean"
check "mount -o ro" mount_store ro || finish
check "every size is right" sizes_right
check "unmount" umount_store
check "a read-only mount writes no sizes file" test ! -e "$SIZES"
check "mount" mount_store || finish
check "every size is right" sizes_right
check "unmount" umount_store
check "fsck -n finds nothing to say of the sizes file" bash -c \
    "'$FSCK' -n '$BACKING' >'$WS/fsck.out' 2>&1; ! grep -q fpgalz4fs-sizes '$WS/fsck.out'"
finish
