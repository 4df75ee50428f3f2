#!/bin/bash
# t_land: WRITE payloads land in block buffers (fs/ops_io.c): the daemon reads each request
# into libfuse's buffer up to the end of a WRITE's header and into block buffers past it.
# A whole block written at a block boundary becomes that block's buffer without a copy
# (counter writes_landed); every other write is copied from the landing as before, and every
# other request's bytes past that header go back behind it. Checked: copies at 64 KiB and
# 1 MiB blocks take the landing for nearly every block and read back identical; writes of
# odd sizes at odd offsets, a rewrite of blocks already dirty, and a foreign file read back
# identical; long names, a long symlink and a 3,200-byte extended attribute (requests whose
# arguments spill into the landing) come back whole; a 4 MiB store, whose blocks no request
# covers, lands nothing; after the unmount lz4 decodes every backing file and fsck is clean.
. "$(dirname "$0")/lib.sh"
need_binaries

SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/text" $((24 << 20)) mixed 7
# odd sizes at odd offsets, then whole blocks over blocks that are still dirty
ODD_PY='
import os, random, sys
data = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
r, off = random.Random(11), 0
while off < len(data):
    n = r.choice([1, 4095, 65536, 65537, 1 << 20, (1 << 20) + 3, 300000])
    os.pwrite(fd, data[off:off + n], off)
    off += n
for blk in (0, 5, 9):
    os.pwrite(fd, data[blk << 20:(blk + 1) << 20], blk << 20)
os.close(fd)
'

landed() { stat_of "$(stats "$MNT")" writes_landed; }

for bs in 64K 1M; do
    BACKING="$WS/store-$bs"
    BLOCK_SIZE=$bs
    check "mount ($bs blocks)" mount_store
    before=$(landed)
    check "$bs: cp of 24 MiB" cp "$SRC/text" "$MNT/text"
    n=$(($(landed) - before))
    blocks=$(((24 << 20) / $(numfmt --from=iec "$bs")))
    # cp writes past the page cache in max_write requests at block boundaries: every whole
    # block lands (the last request's may be cut by the kernel at the end of the file)
    check_show "$bs: the copy's blocks took their payload's buffer ($n of $blocks)" \
        test "$n" -ge $((blocks - 1))
    check "$bs: the copy reads back" cmp "$SRC/text" "$MNT/text"
    check "$bs: odd sizes at odd offsets" python3 -c "$ODD_PY" "$SRC/text" "$MNT/odd"
    check "$bs: they read back" cmp "$SRC/text" "$MNT/odd"
    check "$bs: dd through the page cache" dd if="$SRC/text" of="$MNT/dd" bs=1M status=none
    check "$bs: it reads back" cmp "$SRC/text" "$MNT/dd"
    check "unmount ($bs)" umount_store
    check "$bs: every backing file decodes with lz4" lz4_decodes "$BACKING"
    for f in text odd dd; do
        check "$bs: lz4 -d of $f is its content" cmp "$SRC/text" \
            <(lz4 -d -c "$BACKING/$f" 2>/dev/null)
    done
    check_show "$bs: fsck finds nothing to repair" "$FSCK" "$BACKING"
done

# requests whose arguments go past a WRITE's header, and a foreign file
BACKING="$WS/store-1M"
BLOCK_SIZE=1M
head -c $((3 << 20 | 777)) /dev/urandom >"$BACKING/foreign"
check "remount" mount_store
long=$(printf 'n%.0s' $(seq 1 250))
check "a file with a 250-byte name" cp "$SRC/text" "$MNT/$long"
check "it reads back" cmp "$SRC/text" "$MNT/$long"
check "rename to another long name" mv "$MNT/$long" "$MNT/${long%n}m"
target=$(printf 'd/%.0s' $(seq 1 1500))
check "a symlink with a 3,000-byte target" ln -s "$target" "$MNT/link"
check_eq "its target comes back whole" "$target" "$(readlink "$MNT/link")"
# as large as ext4 keeps without ea_inode (one 4 KiB block)
value=$(head -c 2400 /dev/urandom | base64 -w 0)
check "a 3,200-byte extended attribute" setfattr -n user.big -v "$value" "$MNT/text"
check_eq "it comes back whole" "$value" "$(getfattr --only-values -n user.big "$MNT/text")"
check "the foreign file overwritten with odd writes" \
    python3 -c "$ODD_PY" "$SRC/text" "$MNT/foreign"
check "it reads back" cmp "$SRC/text" "$MNT/foreign"
check "unmount" umount_store
check "the foreign file is the bytes written" cmp "$SRC/text" "$BACKING/foreign"

# a block larger than any request: nothing lands, everything is copied
BACKING="$WS/store-4M"
BLOCK_SIZE=4M
check "mount (4M blocks)" mount_store
check "4M: cp of 24 MiB" cp "$SRC/text" "$MNT/text"
check_eq "4M: nothing landed" 0 "$(landed)"
check "4M: it reads back" cmp "$SRC/text" "$MNT/text"
check "unmount (4M)" umount_store
check_show "4M: fsck finds nothing to repair" "$FSCK" "$BACKING"
finish
