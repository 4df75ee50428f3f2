#!/bin/bash
# t_chain: a log's lines appended one `>>` at a time are committed as links of the last
# block's chained frame (format version 5, docs/FORMAT.md 9.12 and 11.8): the counter
# chain_links counts them, the log reads back and decodes with the stock `lz4 -d` after
# every few lines, reopening it after an unmount goes on linking, and a log that outgrows a
# chain's budget is written whole again. A kill -9 after the appends keeps every line; a
# link torn on disk (as a crash leaves one) opens, read-only, as the lines before it, and
# fsck -n reports it, fsck -y repairs it, and the mount then reads the same. Anything but an
# append (an overwrite inside the last block, a truncate) is committed whole, and reads back.
# Under file_version=4 no chain is written; a version 4 file written to under the default
# becomes version 5 at its first link. A line to each of more logs than the daemon keeps
# the state of is a link too. Runs at 64K and 1M blocks.
. "$(dirname "$0")/lib.sh"
need_binaries

counter() { stats "$MNT" | awk -F= -v k="$1" '$1 == k { print $2 + 0 }'; }
marker_version() { od -An -tu4 -j31 -N4 "$1" | tr -d ' '; }

# lines FILE PLAIN FROM N: N lines appended to both, one `>>` each
lines() {
    local i
    for ((i = $3; i < $3 + $4; i++)); do
        line="$i: GET /api/v1/items/$((i * 7919 % 1000)) 200 $((i % 97)) ms"
        echo "$line" >>"$1"
        echo "$line" >>"$2"
    done
}

# fsync_lines FILE PLAIN FROM N PID: N lines appended to both, each followed by fsync of
# FILE; prints the bytes the daemon PID wrote (wchar) meanwhile
fsync_lines() {
    python3 - "$@" <<'EOF'
import os, sys
path, plain, first, n, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def wchar():
    with open("/proc/%s/io" % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith("wchar"))
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
w0 = wchar()
with open(plain, "ab") as p:
    for i in range(first, first + n):
        line = b"%d: POST /api/v1/orders/%d 201 %d ms\n" % (i, i * 7919 % 1000, i % 89)
        os.write(fd, line)
        os.fsync(fd)
        p.write(line)
print(wchar() - w0)
os.close(fd)
EOF
}

# tail_write FILE same|changed: one write of the file's last 10 bytes (as they are, or
# changed) and 30 more, then close
tail_write() {
    python3 - "$1" "$2" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
end = os.fstat(fd).st_size
last = os.pread(fd, 10, end - 10)
head = last if sys.argv[2] == "same" else bytes(b ^ 0x20 for b in last)
os.pwrite(fd, head + b"appended by one write at -10\n", end - 10)
os.close(fd)
EOF
}

run_size() {
    BLOCK_SIZE=$1
    BACKING="$WS/store-$1"
    MNT="$WS/mnt-$1"
    local plain="$WS/plain-$1.log" l0
    check "mount ($1)" mount_store
    # a log that already holds some of a block, as a kept log does
    seq 1 9000 | sed 's/^/old line /' >"$plain"
    cp "$plain" "$MNT/app.log"
    l0=$(counter chain_links)
    lines "$MNT/app.log" "$plain" 0 200
    check "200 lines read back ($1)" cmp "$plain" "$MNT/app.log"
    check "lz4 -d of the backing file after 200 lines ($1)" \
        bash -c "lz4 -d -c '$BACKING/app.log' | cmp - '$plain'"
    check "the lines were committed as links ($1: $(($(counter chain_links) - l0)) of 200)" \
        test $(($(counter chain_links) - l0)) -ge 190
    check_eq "the file is version 7 ($1)" 7 "$(marker_version "$BACKING/app.log")"

    # after an unmount the chain is read from disk, checked whole, and linked to again
    check "unmount ($1)" umount_store
    check "fsck at rest ($1)" "$FSCK" -n "$BACKING"
    check "mount again ($1)" mount_store
    check "the log reads back after a remount ($1)" cmp "$plain" "$MNT/app.log"
    l0=$(counter chain_links)
    lines "$MNT/app.log" "$plain" 200 100
    check "links after a remount, the first too ($1: $(($(counter chain_links) - l0)))" \
        test $(($(counter chain_links) - l0)) -ge 99
    check "300 lines read back ($1)" cmp "$plain" "$MNT/app.log"

    # not an append: an overwrite inside the last block, then a line; a truncate, then one
    local size
    size=$(stat -c %s "$plain")
    printf 'XXXX' | dd of="$MNT/app.log" bs=1 seek=$((size - 30)) conv=notrunc status=none
    printf 'XXXX' | dd of="$plain" bs=1 seek=$((size - 30)) conv=notrunc status=none
    lines "$MNT/app.log" "$plain" 300 1
    check "an overwrite in the last block, then a line ($1)" cmp "$plain" "$MNT/app.log"
    truncate -s $((size - 100)) "$MNT/app.log"
    truncate -s $((size - 100)) "$plain"
    lines "$MNT/app.log" "$plain" 301 20
    check "a truncate into the last block, then lines ($1)" cmp "$plain" "$MNT/app.log"
    check "lz4 -d after the overwrite and the truncate ($1)" \
        bash -c "lz4 -d -c '$BACKING/app.log' | cmp - '$plain'"
    # one write that starts before the end: a link when the bytes before the end are written
    # as they were (as the kernel's write-back cache sends a page), else the block whole
    l0=$(counter chain_links)
    tail_write "$MNT/app.log" same; tail_write "$plain" same
    check_eq "a write of the same last bytes and more is a link ($1)" $((l0 + 1)) \
        "$(counter chain_links)"
    tail_write "$MNT/app.log" changed; tail_write "$plain" changed
    check_eq "a write that changes the last bytes and appends is not ($1)" $((l0 + 1)) \
        "$(counter chain_links)"
    check "both read back ($1)" cmp "$plain" "$MNT/app.log"

    # a chain's links are bounded: past the budget the block is written whole again
    local big="$WS/bigline"
    head -c 3000 /dev/urandom | base64 -w 0 >"$big"; echo >>"$big"
    for ((i = 0; i < 30; i++)); do
        cat "$big" >>"$MNT/app.log"; cat "$big" >>"$plain"
    done
    check "incompressible lines past a chain's budget read back ($1)" cmp "$plain" "$MNT/app.log"

    # lines each followed by fsync: links and a sync each, about the line written, not the
    # block (through the journal, then in its slot: a few KiB a line or more)
    local wrote
    l0=$(counter chain_links)
    wrote=$(fsync_lines "$MNT/app.log" "$plain" 500 100 "$DAEMON_PID")
    check "100 fsync'd lines were committed as links ($1: $(($(counter chain_links) - l0)))" \
        test $(($(counter chain_links) - l0)) -ge 95
    check "an fsync'd line wrote under 1 KiB on average ($1: $wrote bytes for 100)" \
        test "$wrote" -lt 102400
    check "the fsync'd lines read back ($1)" cmp "$plain" "$MNT/app.log"
    fsync_lines "$MNT/app.log" "$plain" 600 20 "$DAEMON_PID" >/dev/null
    kill_daemon
    check "mount after kill -9 past fsync'd lines ($1)" mount_store
    check "the fsync'd lines survived kill -9 ($1)" cmp "$plain" "$MNT/app.log"

    # kill -9 right after the last line: every line is there
    lines "$MNT/app.log" "$plain" 400 50
    kill_daemon
    check "mount after kill -9 ($1)" mount_store
    check "the log survived kill -9 ($1)" cmp "$plain" "$MNT/app.log"
    lines "$MNT/app.log" "$plain" 450 5
    check "unmount after the kill ($1)" umount_store
    check "lz4 -d after the kill ($1)" bash -c "lz4 -d -c '$BACKING/app.log' | cmp - '$plain'"
    check "fsck after the kill ($1)" "$FSCK" -n "$BACKING"
}

# The last link torn on disk, as a power loss may leave it: the lines before it.
torn_link() {
    BLOCK_SIZE=64K
    BACKING="$WS/store-torn"
    MNT="$WS/mnt-torn"
    local plain="$WS/plain-torn.log" before="$WS/before-torn.log"
    check "mount (torn)" mount_store
    : >"$plain"
    lines "$MNT/app.log" "$plain" 0 50
    cp "$plain" "$before"
    lines "$MNT/app.log" "$plain" 50 1
    # a crash (the store's clean mark stays dirty: the sizes it keeps are not trusted), then
    # the last link's data torn: 16 bytes before its block checksum, EndMark, content
    # checksum and the footer, which end the file
    kill_daemon
    local len
    len=$(stat -c %s "$BACKING/app.log")
    printf '\xff\xff\xff\xff' | dd of="$BACKING/app.log" bs=1 seek=$((len - 64 - 12 - 8)) \
        conv=notrunc status=none
    "$FSCK" -n "$BACKING" >"$WS/fsck-n.out" 2>&1
    check "fsck -n reports the torn chain" grep -q "chained frame ends torn" "$WS/fsck-n.out"
    check "mount read-only (torn)" mount_store ro
    check_eq "read-only, stat gives the size of the lines before the torn one" \
        "$(stat -c %s "$before")" "$(stat -c %s "$MNT/app.log")"
    check "read-only, the log reads as the lines before the torn one" cmp "$before" "$MNT/app.log"
    check "unmount (torn, read-only)" umount_store
    "$FSCK" -y "$BACKING" >"$WS/fsck-y.out" 2>&1
    check "fsck -y repairs it" grep -q "the frame's end and the footer rewritten" "$WS/fsck-y.out"
    check "fsck -n is clean after the repair" "$FSCK" -n "$BACKING"
    check "lz4 -d after the repair" bash -c "lz4 -d -c '$BACKING/app.log' | cmp - '$before'"
    check "mount (torn, repaired)" mount_store
    check "the log reads as the lines before the torn one" cmp "$before" "$MNT/app.log"
    lines "$MNT/app.log" "$before" 51 10
    check "and takes more lines" cmp "$before" "$MNT/app.log"
    check "unmount (torn, repaired)" umount_store
}

# A new file synced at once is in the footer pair (FORMAT.md 11.6, opening the pair); the
# fsync'd lines after it are pair links (11.8): links whose footer goes into the pair's
# place, so the backing file keeps its length. They read back, survive kill -9, and the
# file at rest decodes with lz4 -d.
pair_links() {
    BLOCK_SIZE=$1
    BACKING="$WS/store-pair-$1"
    MNT="$WS/mnt-pair-$1"
    local plain="$WS/plain-pair-$1.log" l0 p0 len0
    check "mount (pair, $1)" mount_store
    seq 1 300 | sed 's/^/first line /' >"$plain"
    python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, open(sys.argv[2], "rb").read()); os.fsync(fd); os.close(fd)' "$MNT/db.wal" "$plain"
    # the first line after the open is written whole (the tail compressor starts from the
    # block then), through the pair; the 60 after it are links
    fsync_lines "$MNT/db.wal" "$plain" 0 1 "$DAEMON_PID" >/dev/null
    p0=$(counter pair_commits); l0=$(counter chain_links)
    len0=$(stat -c %s "$BACKING/db.wal")
    fsync_lines "$MNT/db.wal" "$plain" 1 60 "$DAEMON_PID" >/dev/null
    check_eq "the fsync'd lines in the pair kept the backing file's length ($1)" "$len0" \
        "$(stat -c %s "$BACKING/db.wal")"
    check "they were links ($1: $(($(counter chain_links) - l0)) of 60)" \
        test $(($(counter chain_links) - l0)) -ge 58
    check_eq "and no pair commit ($1)" "$p0" "$(counter pair_commits)"
    check "the pair links read back ($1)" cmp "$plain" "$MNT/db.wal"
    kill_daemon
    check "mount after kill -9 past pair links ($1)" mount_store
    check "the pair links survived kill -9 ($1)" cmp "$plain" "$MNT/db.wal"
    fsync_lines "$MNT/db.wal" "$plain" 61 5 "$DAEMON_PID" >/dev/null
    check "unmount (pair, $1)" umount_store
    check "fsck after the pair links ($1)" "$FSCK" -n "$BACKING"
    check "lz4 -d after the pair links ($1)" \
        bash -c "lz4 -d -c '$BACKING/db.wal' | cmp - '$plain'"
}

# 72 logs, a line to each in turn. mem_mb=256, the default up to 4 cores: its eighth holds
# the tail compressors of about ten logs at 1 MiB blocks, so a writer takes the least
# recently used log's (tail_taken; before that, the lines of all but ten logs were written
# whole), and that log's next line finds its compressor empty: it takes the block as loaded
# (chain_primed), so the line is a link all the same. (72 was more than the 64 files a
# build before kept the state of; now they are all kept, and the compressors taken are
# what makes each line start from a loaded block.)
many_logs() {
    BLOCK_SIZE=1M
    BACKING="$WS/store-many"
    MNT="$WS/mnt-many"
    local l0 p0 t0 r n=72
    check "mount (many logs)" mount_store mem_mb=256
    check "72 logs written" logs_fill "$WS/plain-many" 0 $n 3000
    l0=$(counter chain_links); p0=$(counter chain_primed); t0=$(counter tail_taken)
    for ((r = 0; r < 10; r++)); do
        logs_round "$WS/plain-many" $r 0 $n || fail_check "round $r to the 72 logs"
    done
    check "720 lines to 72 logs in turn were links ($(($(counter chain_links) - l0)))" \
        test $(($(counter chain_links) - l0)) -ge 710
    check "after the block was taken as loaded ($(($(counter chain_primed) - p0)))" \
        test $(($(counter chain_primed) - p0)) -ge 600
    check "with compressors taken from logs not in use ($(($(counter tail_taken) - t0)))" \
        test $(($(counter tail_taken) - t0)) -ge 300
    check "the 72 logs read back" diff -r "$WS/plain-many" "$MNT"
    check "unmount (many logs)" umount_store
    check "fsck after the many logs" "$FSCK" -n "$BACKING"
    check "lz4 -d of a log" bash -c "lz4 -d -c '$BACKING/7.log' | cmp - '$WS/plain-many/7.log'"
}

# file_version=4 writes no chain; the default turns a version 4 file into version 5.
versions() {
    BLOCK_SIZE=64K
    BACKING="$WS/store-v4"
    MNT="$WS/mnt-v4"
    local plain="$WS/plain-v4.log"
    check "mount with file_version=4" mount_store file_version=4
    : >"$plain"
    lines "$MNT/app.log" "$plain" 0 50
    check_eq "no link under file_version=4" 0 "$(counter chain_links)"
    check "unmount (v4)" umount_store
    check_eq "the file is version 4" 4 "$(marker_version "$BACKING/app.log")"
    check "mount with the default file_version" mount_store
    lines "$MNT/app.log" "$plain" 50 50
    check "links into the version 4 file ($(counter chain_links))" test "$(counter chain_links)" -ge 40
    check "it reads back" cmp "$plain" "$MNT/app.log"
    check "unmount (v5)" umount_store
    check_eq "the file is version 5 now" 5 "$(marker_version "$BACKING/app.log")"
    check "lz4 -d of it" bash -c "lz4 -d -c '$BACKING/app.log' | cmp - '$plain'"
}

run_size 64K
run_size 1M
pair_links 64K
pair_links 1M
many_logs
torn_link
versions
finish
