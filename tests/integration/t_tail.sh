#!/bin/bash
# t_tail: a log appended a line at a time with `>>`, and files kept warm after their last
# close (fs/ff_tail.c, fs/ops_keep.c). The appended log reads back and decodes with `lz4 -d`
# at every step, its last block is compressed for what each close added (the counters
# tail_blocks and tail_bytes_kept), and kill -9 after the appends keeps every line. A kept
# file is still committed by a truncate made without a handle, gives its space back as soon
# as it is removed or renamed over, and 150 small files closed all stay kept, while the
# states of large files stay within a sixteenth of mem_mb. Runs at 64K and 1M blocks; then on
# a budget too small for a tail compressor, with files whose kept states outgrow a small
# mem_mb, and with four writers appending to 32 logs in turn on a budget for about nine
# compressors.
. "$(dirname "$0")/lib.sh"
need_binaries

# counter NAME: one counter of the mount's stats, as a number.
counter() { stats "$MNT" | awk -F= -v k="$1" '$1 == k { print $2 + 0 }'; }

# deleted_fds: descriptors the daemon holds on deleted backing files.
# the daemon's descriptors of deleted backing files (not what it inherited: a ctest run next
# to another in the same build directory hands it a log file the other one replaces)
deleted_fds() { ls -l "/proc/$DAEMON_PID/fd" 2>/dev/null | grep -F "$BACKING/" | grep -c '(deleted)'; }

# hold PATH: a process keeps an O_PATH descriptor on PATH (HOLD_PID), so that the kernel
# keeps the inode and sends no forget for it: a descriptor the daemon lets go of meanwhile
# went because of the unlink or the release, not because the kernel forgot the file.
hold() {
    rm -f "$WS/held"
    python3 -c 'import os, sys, time
fd = os.open(sys.argv[1], os.O_PATH)
open(sys.argv[2], "w").close()
time.sleep(120)' "$1" "$WS/held" &
    HOLD_PID=$!
    for ((i = 0; i < 200; i++)); do [ -e "$WS/held" ] && return 0; sleep 0.05; done
    return 1
}
unhold() { kill "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null; return 0; }

# no_deleted_fds: none within 3 s (the kernel sends a release on its own time, after close(2)
# returned), else what they are
no_deleted_fds() {
    for ((i = 0; i < 60; i++)); do
        [ "$(deleted_fds)" = 0 ] && return 0
        sleep 0.05
    done
    ls -l "/proc/$DAEMON_PID/fd" | grep -F "$BACKING/" | grep '(deleted)'
    return 1
}

run_size() {
    BLOCK_SIZE=$1
    BACKING="$WS/store-$1"
    MNT="$WS/mnt-$1"
    local lines=1500 i plain="$WS/plain-$1.log"
    check "mount ($1)" mount_store
    : >"$plain"
    local t0 k0
    t0=$(counter tail_blocks)
    k0=$(counter tail_bytes_kept)
    for ((i = 0; i < lines; i++)); do
        line="$(date +%s) line $i of the log: some words that repeat, $((i * 7919 % 1000))"
        echo "$line" >>"$MNT/app.log"
        echo "$line" >>"$plain"
        if [ $((i % 500)) = 499 ]; then
            check "log reads back after $((i + 1)) appends ($1)" cmp "$plain" "$MNT/app.log"
            check "lz4 -d of the backing file after $((i + 1)) appends ($1)" \
                bash -c "lz4 -d -c '$BACKING/app.log' | cmp - '$plain'"
        fi
    done
    local t1 k1
    t1=$(counter tail_blocks)
    k1=$(counter tail_bytes_kept)
    # every close but the first rewrites a block committed before; at 64K the log spans
    # several blocks, each new one's first commit going to the engine
    check "the tail compressor took the closes ($1: $((t1 - t0)) blocks)" \
        test $((t1 - t0)) -ge $((lines * 9 / 10))
    check "it compressed only what was added ($1: $((k1 - k0)) bytes kept)" \
        test $((k1 - k0)) -ge $((lines * 20))
    # reopening a file that is not kept decodes its last block at every append (1,500);
    # a few reads of pages the kernel evicted may decode
    check "no decode to reopen the log ($1: $(counter blocks_decoded))" \
        test "$(counter blocks_decoded)" -le $((lines / 100))

    # kill -9 right after the last close: everything acknowledged is there
    kill_daemon
    check "mount after kill -9 ($1)" mount_store
    check "the log survived kill -9 ($1)" cmp "$plain" "$MNT/app.log"

    # a truncate of a kept file without any handle is committed at once
    head -c 300000 /dev/urandom >"$WS/r-$1"
    cp "$WS/r-$1" "$MNT/r"
    truncate -s 1000 "$MNT/r"
    kill_daemon
    check "mount after truncate and kill -9 ($1)" mount_store
    check_eq "a truncate without a handle is committed ($1)" 1000 "$(stat -c %s "$MNT/r")"
    check "its bytes ($1)" cmp <(head -c 1000 "$WS/r-$1") "$MNT/r"

    # removal: the kept state's descriptor goes with the name
    head -c 2000000 /dev/urandom >"$MNT/big"
    cat "$MNT/big" >/dev/null
    check "hold the file's inode ($1)" hold "$MNT/big"
    rm "$MNT/big"
    check "rm gives the space back at once, while the kernel still holds the inode ($1)" \
        no_deleted_fds
    unhold
    head -c 2000000 /dev/urandom >"$MNT/big2"
    echo small >"$MNT/other"
    check "hold the renamed-over file's inode ($1)" hold "$MNT/big2"
    mv "$MNT/other" "$MNT/big2"
    check "renamed over, gone at once, while the kernel still holds the inode ($1)" \
        no_deleted_fds
    unhold
    check_eq "the name now holds the other file ($1)" small "$(cat "$MNT/big2")"

    # 150 small files written and closed are all kept for their next open (a build that kept
    # 64 let the others go), each holding a descriptor within the daemon's bound
    mkdir "$MNT/many"
    for ((i = 0; i < 150; i++)); do
        echo "file $i" >"$MNT/many/f$i"
    done
    check "150 kept after 150 closes ($1: $(counter files_kept), $(counter fds_open) fds)" \
        test "$(counter files_kept)" -ge 150 -a "$(counter fds_open)" -le "$(counter files_kept)"
    check "every one reads back ($1)" \
        bash -c "for i in \$(seq 0 149); do [ \"\$(cat '$MNT/many/f'\$i)\" = \"file \$i\" ] || exit 1; done"
    check "unmount ($1)" umount_store
    check "fsck at rest ($1)" "$FSCK" -n "$BACKING"
}

# Beyond the tail compressors' share of mem_mb (an eighth), appends go to the engine as
# before: with mem_mb=16 one compressor of a 1 MiB block (about 3 MiB) does not fit in 2 MiB.
budget() {
    BLOCK_SIZE=1M
    BACKING="$WS/store-budget"
    MNT="$WS/mnt-budget"
    local i plain="$WS/plain-budget.log"
    check "mount with mem_mb=16" mount_store mem_mb=16
    : >"$plain"
    for ((i = 0; i < 200; i++)); do
        echo "line $i of a log on a small budget" | tee -a "$plain" >>"$MNT/app.log"
    done
    check_eq "no tail compressor past the budget" 0 "$(counter tail_blocks)"
    check "the log reads back" cmp "$plain" "$MNT/app.log"
    check "unmount (budget)" umount_store
    check "lz4 -d of the log (budget)" bash -c "lz4 -d -c '$BACKING/app.log' | cmp - '$plain'"
}

# The kept states' memory: mem_mb=16 allows them 1 MiB, and 40 files of 1,024 blocks each
# (64 MiB at 64K blocks, all hole but the last byte) hold a block table of 32 KiB each, so
# fewer than 40 stay kept, the least recently closed going first; every one reads back.
kept_memory() {
    BLOCK_SIZE=64K
    BACKING="$WS/store-kept"
    MNT="$WS/mnt-kept"
    local i kept
    check "mount (kept memory)" mount_store mem_mb=16
    for ((i = 0; i < 40; i++)); do
        dd if=/dev/zero of="$MNT/f$i" bs=1 count=1 seek=$((64 * 1048576 - 1)) status=none ||
            fail_check "write f$i"
    done
    kept=$(counter files_kept)
    check "the kept states stay within mem_mb / 16 ($kept of 40 kept)" \
        test "$kept" -ge 8 -a "$kept" -lt 40
    check "every one reads back as 64 MiB" bash -c \
        "for i in \$(seq 0 39); do [ \$(stat -c %s '$MNT/f'\$i) = 67108864 ] || exit 1; done"
    check_eq "and holds what was written" "$(head -c 67108864 /dev/zero | sha256sum)" \
        "$(sha256sum <"$MNT/f39")"
    check "unmount (kept memory)" umount_store
}

# Four writers at once, each appending a line to each of its 8 logs in turn (32 logs), at
# 64K blocks with mem_mb=16: an eighth of it holds about nine tail compressors, so writers
# take them from logs not in use, while other writers take and use theirs (ff_tail_take;
# the TSan build runs this too).
writers() {
    BLOCK_SIZE=64K
    BACKING="$WS/store-writers"
    MNT="$WS/mnt-writers"
    local w r
    check "mount (writers)" mount_store mem_mb=16
    check "32 logs written" logs_fill "$WS/plain-writers" 0 32 1500
    for ((w = 0; w < 4; w++)); do
        (for ((r = 0; r < 6; r++)); do logs_round "$WS/plain-writers" $r $((w * 8)) 8; done) &
    done
    wait
    check "compressors were taken from logs not in use ($(counter tail_taken))" \
        test "$(counter tail_taken)" -gt 0
    check "the 32 logs read back" diff -r "$WS/plain-writers" "$MNT"
    check "unmount (writers)" umount_store
    check "fsck after the writers" "$FSCK" -n "$BACKING"
    check "lz4 -d of a log (writers)" \
        bash -c "lz4 -d -c '$BACKING/17.log' | cmp - '$WS/plain-writers/17.log'"
}

run_size 64K
run_size 1M
budget
kept_memory
writers
finish
