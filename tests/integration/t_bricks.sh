#!/bin/bash
# t_bricks: an appending writer's streaming bricks are written to their slots by the pool
# thread that compressed them (fs/ff_brick.c), in order, while the writer goes on. Large
# sequential copies (text, random data stored raw, several writers at once) must go that way
# (counter blocks_ahead) and read back identical; a file whose stream holds blocks of zeros
# (holes, which the writer's own commit writes) mixes both ways in one stream; every backing
# file decodes with the stock lz4 and passes fsck after the unmount; a kill -9 in the middle
# of a stream leaves a file that opens and reads as a prefix of what was written.
. "$(dirname "$0")/lib.sh"
need_binaries
BLOCK_SIZE=64K

SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/text" $((40 << 20)) text 1
head -c $((24 << 20)) /dev/urandom >"$SRC/random"
# text, 3 MiB of zeros (48 whole blocks: holes), text, zeros, text with a partial last block
{
    gen_file "$WS/part" $((5 << 20)) text 2 && cat "$WS/part"
    head -c $((3 << 20)) /dev/zero
    gen_file "$WS/part" $((6 << 20)) mixed 3 && cat "$WS/part"
    head -c $((1 << 20)) /dev/zero
    gen_file "$WS/part" $((4 << 20 | 12345)) text 4 && cat "$WS/part"
} >"$SRC/holes"
for i in 1 2 3 4; do gen_file "$SRC/par$i" $((12 << 20)) mixed $((10 + i)); done

check "mount" mount_store
before=$(stats "$MNT")
check "cp of 40 MiB of text" cp "$SRC/text" "$MNT/text"
check "cp of 24 MiB of random data" cp "$SRC/random" "$MNT/random"
after=$(stats "$MNT")
ahead=$(($(stat_of "$after" blocks_ahead) - $(stat_of "$before" blocks_ahead)))
# 64 MiB at 64 KiB blocks: 1,024 blocks; the last brick of each file goes with its close,
# and a brick goes the writer's way only when its I/O lock was taken at that moment
check_show "most blocks written by the pool ($ahead of 1024)" test "$ahead" -ge 900
check "text reads back" cmp "$SRC/text" "$MNT/text"
check "random reads back" cmp "$SRC/random" "$MNT/random"

check "dd of a stream with holes in it" dd if="$SRC/holes" of="$MNT/holes" bs=1M status=none
ahead=$(($(stat_of "$(stats "$MNT")" blocks_ahead) - $(stat_of "$after" blocks_ahead)))
# 304 whole blocks, 64 of them zeros: the bricks that hold one (a hole) are written by the
# writer's commit, the others by the pool, in one stream
check_show "both ways in one stream ($ahead of 304 blocks by the pool)" \
    test "$ahead" -gt 100 -a "$ahead" -le 240
check "the stream with holes reads back" cmp "$SRC/holes" "$MNT/holes"

pids=()
for i in 1 2 3 4; do cp "$SRC/par$i" "$MNT/par$i" & pids+=($!); done
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
check "4 writers at once" test $ok -eq 1
for i in 1 2 3 4; do check "writer $i reads back" cmp "$SRC/par$i" "$MNT/par$i"; done

check "unmount" umount_store
check "every backing file decodes with lz4" lz4_decodes "$BACKING"
for f in text random holes par1 par4; do
    check "lz4 -d of $f is its content" cmp "$SRC/$f" <(lz4 -d -c "$BACKING/$f" 2>/dev/null)
done
check_show "fsck finds nothing to repair" "$FSCK" "$BACKING"

check "mount again" mount_store
for f in text random holes par1 par2 par3 par4; do
    check "$f reads back after a remount" cmp "$SRC/$f" "$MNT/$f"
done

# kill -9 while a writer streams: the file opens after the remount, and what it holds is a
# prefix of what was written (the slots that reached the backing file whole, in order)
dd if="$SRC/text" of="$MNT/killed" bs=1M status=none &
writer=$!
for ((i = 0; i < 200; i++)); do
    [ "$(stat -c %s "$BACKING/killed" 2>/dev/null || echo 0)" -gt $((4 << 20)) ] && break
    sleep 0.02
done
kill_daemon_only
wait "$writer" 2>/dev/null
clear_dead_mount
check "mount after kill -9" mount_store
got=$(stat -c %s "$MNT/killed")
check_show "the killed stream kept $got bytes, a prefix" \
    cmp -n "$got" "$SRC/text" "$MNT/killed"
check "unmount" umount_store
check_show "fsck after the remount" "$FSCK" "$BACKING"
finish
