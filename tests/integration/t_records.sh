#!/bin/bash
# t_records: page records of format version 4 (docs/FORMAT.md 9.11, 11.7). A commit whose
# blocks changed in a few pages writes those pages as records behind the blocks' frames, in
# their own slots; reads apply them; the last release folds them into frames again, so that
# every file at rest decodes with lz4 -d. Checked: random 4 KiB writes with an fsync every
# few become records (counter page_records) and read back through the mount while the file
# is open, after a kill -9 of the daemon (an fsync's records are kept, the next release folds
# them: records_folded; a read-only mount reads them without folding, fsck counts them) and
# after the unmount (lz4 -d, fsck, the marker's flag cleared, the
# space back to what lz4 -1 takes); a shrink that leaves a block with records last; a
# version 3 file becomes version 4 at its first record; with file_version=3 nothing is.
. "$(dirname "$0")/lib.sh"
need_binaries

SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/base" $((4 << 20)) mixed 5

# rw.py FILE BASE MODEL SEED N EVERY [TRUNC]: copies BASE to FILE (fsync), then N random
# writes of 1-8 KiB (compressible) at random offsets, an fsync after every EVERY; after the
# last fsync MODEL holds what the file must read. Reads the file back through the mount
# before it closes it; TRUNC: a size to ftruncate to (and fsync) after the writes. With
# AVOID_LAST=BS in the environment the writes stay out of the last block of BS bytes (the
# last slot has no padding for records, and a commit that also writes a frame writes none).
RW_PY='
import os, random, sys
path, base, model, seed, n, every = sys.argv[1:7]
trunc = int(sys.argv[7]) if len(sys.argv) > 7 else None
r = random.Random(int(seed))
data = bytearray(open(base, "rb").read())
avoid = int(os.environ.get("AVOID_LAST", "0"))
room = len(data) - ((len(data) - 1) % avoid + 1 if avoid else 0)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
if os.fstat(fd).st_size != len(data):
    os.pwrite(fd, bytes(data), 0)
    os.fsync(fd)
words = [b"page ", b"record ", b"%05d " % r.randrange(99999), b"slot\n"]
for k in range(int(n)):
    ln = r.randint(1, 8192)
    off = r.randrange(room - ln)
    chunk = b"".join(r.choice(words) for _ in range(ln // 4 + 1))[:ln]
    os.pwrite(fd, chunk, off)
    data[off:off + ln] = chunk
    if (k + 1) % int(every) == 0:
        os.fsync(fd)
os.fsync(fd)
if trunc is not None:
    os.ftruncate(fd, trunc)
    os.fsync(fd)
    del data[trunc:]
open(model, "wb").write(bytes(data))
got = os.pread(fd, len(data) + 1, 0)
os.close(fd)
sys.exit(0 if got == bytes(data) else "the file reads back other bytes than were written")
'
records() { stat_of "$(stats "$MNT")" page_records; }
folded() { stat_of "$(stats "$MNT")" records_folded; }
# u32 at offset $2 of file $1
u32() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }
# the marker's records flag (bit 0 of its flags; bits 1-31 name the last commit group)
recflag() { echo $(($(u32 "$1" 39) & 1)); }

# records_round LABEL SEED N EVERY MIN MODEL: a fresh mount of $BACKING; N random writes to
# db with an fsync every EVERY go as at least MIN records (a commit in which one block
# changed in more than a quarter, two writes far apart in it, writes none: 216 of 400 at
# 64 KiB and 138 of 300 at 1 MiB when this was written); the file reads back through the
# mount, and after the unmount lz4 -d gives it and fsck finds nothing to repair
records_round() {
    local label=$1 seed=$2 n=$3 every=$4 min=$5 model=$6 before got
    local bs=$(($(numfmt --from=iec "$BLOCK_SIZE")))
    check "$label: mount ($BLOCK_SIZE blocks)" mount_store
    before=$(records)
    check "$label: random writes with an fsync every $every, none in the last block" \
        env AVOID_LAST="$bs" python3 -c "$RW_PY" "$MNT/db" "$SRC/base" "$model" "$seed" "$n" "$every"
    got=$(($(records) - before))
    check_show "$label: the changes went as records ($got)" test "$got" -ge "$min"
    # all or nothing: a commit in which one block changed in more than a quarter writes
    # every block as a frame, and no record
    before=$(records)
    check "$label: a page of block 1 and half of block 0, then fsync" python3 -c '
import os, sys
bs = int(sys.argv[3])
fd = os.open(sys.argv[1], os.O_RDWR)
m = bytearray(open(sys.argv[2], "rb").read())
for off, n in ((bs + 100, 15), (0, bs // 2)):
    chunk = (b"all or nothing\n" * (n // 15 + 1))[:n]
    os.pwrite(fd, chunk, off)
    m[off:off + n] = chunk
os.fsync(fd)
os.close(fd)
open(sys.argv[2], "wb").write(bytes(m))' "$MNT/db" "$model" "$bs"
    check_eq "$label: that commit wrote no record" "$before" "$(records)"
    check "$label: the file reads back" cmp "$model" "$MNT/db"
    check "$label: umount" umount_store
    check "$label: lz4 -d of the backing file is its content" cmp "$model" \
        <(lz4 -d -c "$BACKING/db" 2>/dev/null)
    check_show "$label: fsck finds nothing to repair" "$FSCK" "$BACKING"
}

BACKING="$WS/store"
BLOCK_SIZE=64K
records_round 64K 1 400 8 150 "$WS/model"
check_eq "the marker says version 7" 7 "$(u32 "$BACKING/db" 31)"
check_eq "its records flag is clear at rest" 0 "$(recflag "$BACKING/db")"
check_show "its flags name the last commit group of records" test "$(u32 "$BACKING/db" 39)" -ge 2
lz=$(lz4 -1 -c "$WS/model" | wc -c)
alloc=$(($(stat -c %b "$BACKING/db") * 512))
check_show "the space is back ($alloc bytes allocated, lz4 -1 takes $lz)" \
    test "$alloc" -le $((lz * 115 / 100 + 65536))

# an fsync's records survive a kill -9; the next release folds them
check "mount" mount_store
check "writes with an fsync every 4" python3 -c "$RW_PY" "$MNT/db" "$WS/model" "$WS/model" 2 200 4
python3 - "$MNT/db" "$WS/model" <<'EOF' &
import os, sys, time
# keeps the file open (no release) while the daemon is killed
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b"kept by an fsync\n", 123456)
os.fsync(fd)
m = bytearray(open(sys.argv[2], "rb").read())
m[123456:123456 + 17] = b"kept by an fsync\n"
open(sys.argv[2], "wb").write(bytes(m))
open(sys.argv[2] + ".ready", "w").close()
time.sleep(30)
EOF
holder=$!
for _ in $(seq 1 100); do [ -e "$WS/model.ready" ] && break; sleep 0.1; done
check_eq "the backing file's flag says records may be there" 1 "$(recflag "$BACKING/db")"
check "kill -9 of the daemon" kill_daemon
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
# a read-only mount folds nothing: its reads apply the records
check "mount read-only" mount_store ro
check "read-only, the file reads what the fsyncs promised" cmp "$WS/model" "$MNT/db"
check "umount" umount_store
check_eq "the records are still there (the flag stays)" 1 "$(recflag "$BACKING/db")"
check "lz4 -d of it lacks them (they lie in paddings it skips)" \
    _lib_negate cmp -s "$WS/model" <(lz4 -d -c "$BACKING/db" 2>/dev/null)
check "a reader written from docs/FORMAT.md alone reads them too" \
    cmp "$WS/model" <(python3 "$SRC_DIR/tests/fmt_reader.py" "$BACKING/db")
check "fsck (read-only) counts them and finds nothing wrong" \
    bash -c "'$FSCK' -n '$BACKING' | grep -q 'blocks hold page records'"
check "remount" mount_store
check "after the crash the file reads what the fsyncs promised" cmp "$WS/model" "$MNT/db"
check "umount" umount_store
check "lz4 -d of it is its content" cmp "$WS/model" <(lz4 -d -c "$BACKING/db" 2>/dev/null)
check_eq "the flag is clear again" 0 "$(recflag "$BACKING/db")"
check_show "fsck finds nothing to repair" "$FSCK" "$BACKING"

# a shrink to a block boundary leaves a block with records last: they stay content
check "mount" mount_store
check "writes, then a shrink to 40 blocks" \
    python3 -c "$RW_PY" "$MNT/db" "$WS/model" "$WS/model2" 3 100 2 $((40 * 65536))
check "it reads back" cmp "$WS/model2" "$MNT/db"
check "grown again by a hole" truncate -s $((50 * 65536)) "$MNT/db"
cp "$WS/model2" "$WS/model3" && truncate -s $((50 * 65536)) "$WS/model3"
check "it reads back" cmp "$WS/model3" "$MNT/db"
check "umount" umount_store
check "lz4 -d of it is its content" cmp "$WS/model3" <(lz4 -d -c "$BACKING/db" 2>/dev/null)

# 1 MiB blocks: several writes land in one block between two fsyncs, each range a record
BACKING="$WS/store-1M"
BLOCK_SIZE=1M
records_round 1M 6 300 6 100 "$WS/m1"
BACKING="$WS/store"
BLOCK_SIZE=64K

# a slot that runs low on room is folded by the next records commit that leaves its block
# alone (counter records_folded_early), so that every later commit still goes as records:
# before, the commit that found the slot full wrote every block it changed as a frame
commits() { stat_of "$(stats "$MNT")" record_commits; }
early() { stat_of "$(stats "$MNT")" records_folded_early; }
check "mount" mount_store
before=$(commits) early0=$(early)
check "80 pages of 4 KiB, in block 3 and block 9 by turns, an fsync after each" python3 -c '
import os, random, sys
r = random.Random(7)
fd = os.open(sys.argv[1], os.O_RDWR)
m = bytearray(open(sys.argv[2], "rb").read())
words = [b"page ", b"slot ", b"fold ", b"room\n"]
for k in range(80):
    for blk in ((3, 9)[k % 2],):
        off = blk * 65536 + r.randrange(16) * 4096
        page = b"".join(r.choice(words) + b"%d " % r.randrange(10 ** 6) for _ in range(600))[:4096]
        os.pwrite(fd, page, off)
        m[off:off + 4096] = page
    os.fsync(fd)
got = os.pread(fd, len(m) + 1, 0)
os.close(fd)
open(sys.argv[3], "wb").write(bytes(m))
sys.exit(0 if got == bytes(m) else "the file reads back other bytes than were written")
' "$MNT/db" "$WS/model3" "$WS/model4"
check_eq "every one of the 80 commits went as records" $((before + 80)) "$(commits)"
check_show "the two slots were folded early, several times ($(($(early) - early0)))" \
    test $(($(early) - early0)) -ge 4
check "it reads back" cmp "$WS/model4" "$MNT/db"
check "umount" umount_store
check "lz4 -d of it is its content" cmp "$WS/model4" <(lz4 -d -c "$BACKING/db" 2>/dev/null)
check_show "fsck finds nothing to repair" "$FSCK" "$BACKING"

# the last block of a file takes records too, once a commit that rewrote it in place after
# a record-sized change padded its slot (fio's file of whole blocks: most commits touched
# it, and went as frames; a database's last page, in a block of its own or not); they
# survive a kill -9, and a write past the end folds them first
last_block_round() {
    local name=$1 size=$2 before holder
    check "mount" mount_store
    before=$(commits)
    # a file of SIZE bytes, then 12 pages in its last block with an fsync after each; kept
    # open (no release) while the daemon is killed
    python3 -c '
import os, random, sys, time
r = random.Random(11)
size = int(sys.argv[4])
last = (size - 1) // 65536 * 65536
m = bytearray(open(sys.argv[2], "rb").read()[:size])
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, bytes(m), 0)
os.fsync(fd)
for k in range(12):
    off = last + r.randrange((size - last) // 4096) * 4096
    page = b"".join(b"last %d " % r.randrange(10 ** 6) for _ in range(600))[:4096]
    os.pwrite(fd, page, off)
    m[off:off + 4096] = page
    os.fsync(fd)
open(sys.argv[3], "wb").write(bytes(m))
open(sys.argv[3] + ".ready", "w").close()
time.sleep(30)
' "$MNT/$name" "$SRC/base" "$WS/m$name" "$size" &
    holder=$!
    for _ in $(seq 1 100); do [ -e "$WS/m$name.ready" ] && break; sleep 0.1; done
    check_show "$name: most of those commits went as records ($(($(commits) - before)) of 12)" \
        test $(($(commits) - before)) -ge 10
    check "$name: kill -9 of the daemon, the file open" kill_daemon
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
    check "$name: a reader written from docs/FORMAT.md alone reads the records in the last slot" \
        cmp "$WS/m$name" <(python3 "$SRC_DIR/tests/fmt_reader.py" "$BACKING/$name")
    check "$name: remount" mount_store
    check "$name: after the crash the file reads what the fsyncs promised" \
        cmp "$WS/m$name" "$MNT/$name"
    check "$name: a page in the last block, an fsync, then a write past the end" python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = bytearray(open(sys.argv[2], "rb").read())
at = (len(m) - 1) // 65536 * 65536
os.pwrite(fd, b"p" * 1000, at + 100)
m[at + 100:at + 1100] = b"p" * 1000
os.fsync(fd)
os.pwrite(fd, b"grown\n", len(m))
m += b"grown\n"
os.fsync(fd)
os.close(fd)
open(sys.argv[2], "wb").write(bytes(m))' "$MNT/$name" "$WS/m$name"
    check "$name: it reads back" cmp "$WS/m$name" "$MNT/$name"
    check "$name: umount" umount_store
    check "$name: lz4 -d of it is its content" cmp "$WS/m$name" \
        <(lz4 -d -c "$BACKING/$name" 2>/dev/null)
    check_show "$name: fsck finds nothing to repair" "$FSCK" "$BACKING"
}
last_block_round whole $((8 * 65536))
last_block_round partial $((7 * 65536 + 40000))

# a version 3 file takes records as version 4; file_version=3 writes none
check "mount with file_version=3" mount_store file_version=3
check "a version 3 file" cp "$SRC/base" "$MNT/v3"
before=$(records)
check "random writes under file_version=3" \
    python3 -c "$RW_PY" "$MNT/v3" "$SRC/base" "$WS/m3" 4 50 5
check_eq "no records" "$before" "$(records)"
check "umount" umount_store
check_eq "the file stays version 3" 3 "$(u32 "$BACKING/v3" 31)"
check "mount" remount ""
before=$(records)
check "random writes" python3 -c "$RW_PY" "$MNT/v3" "$WS/m3" "$WS/m4" 5 50 5
check_show "they went as records" test "$(records)" -gt "$before"
check "it reads back" cmp "$WS/m4" "$MNT/v3"
check "umount" umount_store
check_eq "the file is version 4 now" 4 "$(u32 "$BACKING/v3" 31)"
check "lz4 -d of it is its content" cmp "$WS/m4" <(lz4 -d -c "$BACKING/v3" 2>/dev/null)
check_show "fsck finds nothing to repair" "$FSCK" "$BACKING"
finish
