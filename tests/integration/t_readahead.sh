#!/bin/bash
# t_readahead: a sequential reader's next blocks are decoded by helper threads (fs/ff_ahead.c)
# and its replies are sent from the decoded-block cache. A cold `cat` reads back what was
# written, with most blocks decoded ahead (the counters readahead_blocks and blocks_decoded);
# a read of a file's first bytes starts nothing; holes read as zeros; readers of several files
# at once, more than the helpers' queue holds, all read right. While one thread rewrites pages
# in place and fsyncs, another reads the file with O_DIRECT (every read goes to the daemon)
# and must never see a page older than one already fsynced, nor an I/O error; a file emptied
# and written again under a reader never shows old bytes. No block is ever counted corrupt.
# Runs at 64K and 1M blocks, and at 1M with mem_mb=16 (a cache of 8 blocks); then a file of
# 1M blocks in a 64K store, whose blocks are larger than the cache's slots.
. "$(dirname "$0")/lib.sh"
need_binaries

counter() { stats "$MNT" | awk -F= -v k="$1" '$1 == k { print $2 + 0 }'; }

# race FILE SECONDS: the in-place rewrite race described above; prints what failed.
race() {
    python3 - "$1" "$2" <<'PY'
import mmap, os, random, sys, threading, time
path, secs = sys.argv[1], float(sys.argv[2])
size = os.path.getsize(path)
pages = size // 4096
done = {}                                  # page -> newest value fsynced
lock = threading.Lock()
stop = threading.Event()
errors = []

def writer():
    r = random.Random(7)
    fd = os.open(path, os.O_WRONLY)
    v = 1
    while not stop.is_set() and v < 250:
        batch = {r.randrange(pages): v for _ in range(16)}
        for p, val in batch.items():
            os.pwrite(fd, bytes([val]) * 4096, p * 4096)
        os.fsync(fd)
        with lock:
            done.update(batch)
        v += 1
    os.close(fd)

def reader():
    buf = mmap.mmap(-1, 1 << 20)
    while not stop.is_set():
        with lock:
            before = dict(done)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            for off in range(0, size, 1 << 20):
                n = os.preadv(fd, [buf], off)
                for k in range(0, n, 4096):
                    page = buf[k:k + 4096]
                    p = (off + k) // 4096
                    if page.count(page[0]) != 4096:
                        errors.append("page %d is torn" % p)
                    elif page[0] < before.get(p, 0):
                        errors.append("page %d: %d after %d was fsynced" % (p, page[0], before[p]))
        except OSError as e:
            errors.append("read failed: %s" % e)
        os.close(fd)
        if errors:
            stop.set()

t = [threading.Thread(target=writer), threading.Thread(target=reader)]
for x in t:
    x.start()
time.sleep(secs)
stop.set()
for x in t:
    x.join()
print("\n".join(errors[:5]) if errors else "ok")
sys.exit(1 if errors else 0)
PY
}

# refill FILE: empties the file and writes it again, 40 times, 1 MiB per write(2), each time
# with one byte value throughout (a higher one each time); an O_DIRECT reader meanwhile must
# only ever see pages of one value, and never a value from before the emptying that came
# before its read. Zeros may show only past what the writer had written when the read began,
# or when the file was emptied again during the read: the kernel writes back a write(2)'s
# pages in no set order, so the next round's later pages may reach the daemon first.
refill_race() {
    python3 - "$1" <<'PY'
import mmap, os, sys, threading
path = sys.argv[1]
size = 6 << 20
# generation, bytes written in it, generation whose truncating open has begun. The kernel
# checks a direct read against the size it knew when the read began: one that overlaps the
# open that empties the file gets the daemon's empty replies as zero-filled pages (a daemon
# -d trace: every READ of such a read answered with 0 bytes, the reader given a MiB of
# zeros). Zeros are what a file being emptied may read as; old bytes never are.
state = [0, 0, 0]
lock = threading.Lock()
errors = []
stop = threading.Event()

def writer():
    for v in range(1, 41):
        with lock:
            state[2] = v
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        with lock:
            state[:] = [v, 0, v]
        for off in range(0, size, 1 << 20):
            os.write(fd, bytes([v]) * (1 << 20))
            with lock:
                state[1] = off + (1 << 20)
        os.fsync(fd)
        os.close(fd)
    stop.set()

def reader():
    buf = mmap.mmap(-1, size)
    while not stop.is_set():
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        with lock:
            low, written, _ = state
        data = buf[:os.preadv(fd, [buf], 0)]
        os.close(fd)
        with lock:
            emptied = state[2] != low
        for k in range(0, len(data), 4096):
            page = data[k:k + 4096]
            if page.count(page[0]) != len(page):
                errors.append("page %d torn" % (k // 4096))
            elif page[0] < low and not (page[0] == 0 and (k >= written or emptied)):
                errors.append("page %d: %d after emptying for %d" % (k // 4096, page[0], low))
        if errors:
            stop.set()

t = [threading.Thread(target=writer), threading.Thread(target=reader)]
for x in t:
    x.start()
for x in t:
    x.join()
print("\n".join(errors[:5]) if errors else "ok")
sys.exit(1 if errors else 0)
PY
}

run_size() {
    local bs=$1 opts=${2:-} tag=$1${2:+-$2}
    BLOCK_SIZE=$bs
    BACKING="$WS/store-$tag"
    MNT="$WS/mnt-$tag"
    check "mount ($tag)" mount_store "$opts"
    gen_file "$WS/text-$tag" $((24 << 20)) text 3
    cp "$WS/text-$tag" "$MNT/text"
    # a sparse file: data, a 9 MiB hole, data
    gen_file "$WS/sparse-$tag" $((2 << 20)) mixed 4
    cp "$WS/sparse-$tag" "$MNT/sparse"
    truncate -s $((11 << 20)) "$WS/sparse-$tag" "$MNT/sparse"
    head -c $((1 << 20)) "$WS/text-$tag" >>"$WS/sparse-$tag"
    head -c $((1 << 20)) "$WS/text-$tag" >>"$MNT/sparse"
    local i
    for i in 1 2 3 4 5 6; do
        gen_file "$WS/f$i-$tag" $((6 << 20)) mixed "$i"
        cp "$WS/f$i-$tag" "$MNT/f$i"
    done
    check "remount cold ($tag)" remount

    head -c 100 "$MNT/text" >/dev/null
    check_eq "a read of the first bytes starts no read-ahead ($tag)" 0 "$(counter readahead_blocks)"
    check "cold cat reads back ($tag)" cmp "$WS/text-$tag" "$MNT/text"
    local blocks=$(((24 << 20) / $(numfmt --from=iec "$bs")))
    local ra dec
    ra=$(counter readahead_blocks)
    dec=$(counter blocks_decoded)
    say "    $blocks blocks: $ra decoded ahead, $dec by readers"
    check "most blocks were decoded ahead ($tag: $ra of $blocks)" test "$ra" -ge $((blocks / 2))
    check "readers decoded the rest ($tag: $dec)" test "$dec" -le $((blocks / 2))
    check "the sparse file reads back, hole and all ($tag)" cmp "$WS/sparse-$tag" "$MNT/sparse"

    local pids=()
    for i in 1 2 3 4 5 6; do
        cmp "$WS/f$i-$tag" "$MNT/f$i" &
        pids+=($!)
    done
    local bad=0
    for i in "${pids[@]}"; do
        wait "$i" || bad=$((bad + 1))
    done
    check_eq "six readers at once read right ($tag)" 0 "$bad"

    gen_file "$MNT/pages" $((8 << 20)) zeros
    check_show "in-place rewrites under an O_DIRECT reader ($tag)" race "$MNT/pages" 6
    gen_file "$MNT/refill" $((6 << 20)) zeros
    check_show "a file emptied and refilled under a reader ($tag)" refill_race "$MNT/refill"
    check_eq "no block counted corrupt ($tag)" 0 "$(counter corrupt_blocks)"
    check "unmount ($tag)" umount_store
    check "fsck clean ($tag)" "$FSCK" -n "$BACKING"
}

# A file keeps the block size it was written with: one of 1M blocks copied into a 64K store
# is read through cache slots of 64K (it must not be decoded into them), sequentially, in
# part and by several readers, before and after a rewrite through the mount.
larger_blocks() {
    BLOCK_SIZE=1M BACKING="$WS/store-big" MNT="$WS/mnt-big"
    check "mount a 1M store" mount_store
    # the daemon raises the mount's readahead, found by its device in the mount table, from
    # the kernel's 128 KiB so that a sequential reader asks for whole 1 MiB blocks
    check_eq "the mount's readahead is 1024 KiB" 1024 \
        "$(cat "/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb" 2>&1)"
    gen_file "$WS/big-src" $((9 << 20)) mixed 9
    cp "$WS/big-src" "$MNT/big"
    check "unmount the 1M store" umount_store
    BLOCK_SIZE=64K BACKING="$WS/store-small" MNT="$WS/mnt-small"
    format_store "$BACKING" -b 64K >/dev/null
    cp "$WS/store-big/big" "$BACKING/big"
    check "mount the 64K store holding a 1M-block file" mount_store
    check "a cold cat of the 1M-block file reads back" cmp "$WS/big-src" "$MNT/big"
    check "a part of it reads back" cmp <(dd if="$MNT/big" bs=4096 skip=300 count=700 status=none) \
        <(dd if="$WS/big-src" bs=4096 skip=300 count=700 status=none)
    local i pids=() bad=0
    for i in 1 2 3; do
        cmp "$WS/big-src" "$MNT/big" &
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait "$i" || bad=$((bad + 1))
    done
    check_eq "three readers of it at once read right" 0 "$bad"
    printf 'REWRITTEN' | dd of="$MNT/big" bs=1 seek=5000000 conv=notrunc,fsync status=none
    printf 'REWRITTEN' | dd of="$WS/big-src" bs=1 seek=5000000 conv=notrunc status=none
    check "remount" remount
    check "after a rewrite it reads back" cmp "$WS/big-src" "$MNT/big"
    check_eq "no block counted corrupt" 0 "$(counter corrupt_blocks)"
    check "unmount the 64K store" umount_store
}

run_size 64K
run_size 1M
run_size 1M mem_mb=16
larger_blocks
finish
