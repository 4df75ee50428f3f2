#!/bin/bash
# t_engine: the compression engine through real mounts, with the emulated card.
#  - a large compressible copy with engine=emu,emu_card_mbps=200 reads back identical, its
#    backing file decodes with the stock lz4, bricks went both to the card and to software,
#    the counters say backend=emu and the daemon log calls the card emulated, and the card
#    read the writers' block buffers in place (blocks_direct);
#  - injected card errors and hangs (with a short card_timeout_ms) lose nothing, show up as
#    fallback_error, and the copy finishes;
#  - 400 small files from 8 parallel writers are identical, and card bricks held jobs of
#    several files (bricks_card < blocks_card);
#  - an unmount right after a large write (bricks still in flight on a slow card) loses
#    nothing;
#  - engine=auto picks software and says why; engine=xrt and engine=cuda fail the mount with
#    a clear message; out-of-range engine options are refused.
. "$(dirname "$0")/lib.sh"
need_binaries

SRC="$WS/src"
mkdir -p "$SRC"

# ------------------------------------------------------------------------------ helpers

# show_stats TEXT: a one-line summary of the engine counters.
show_stats() {
    show_counters "$1" backend bricks_card bricks_sw blocks_card blocks_sw fallback_busy \
        fallback_error fallback_small card_idle_us bytes_in bytes_out
}

# expect_lt TEXT KEY_A KEY_B: counter A < counter B
expect_lt() {
    local a b
    a=$(stat_of "$1" "$2")
    b=$(stat_of "$1" "$3")
    [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ] && return 0
    echo "expected $2 ($a) < $3 ($b)"
    printf '%s\n' "$1"
    return 1
}

# same_as_lz4 BACKING_FILE ORIGINAL: the stock lz4 decodes the backing file to the original.
same_as_lz4() {
    _lib_lz4d "$1" | cmp - "$2" || { cat "$WS/.lz4.err"; return 1; }
}

# timed CMD...: runs CMD and prints how long it took.
timed() {
    local t0 t1 rc
    t0=$(date +%s.%N)
    "$@"
    rc=$?
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v rc="$rc" 'BEGIN { printf "took %.2f s (exit status %d)\n", b - a, rc }'
    return $rc
}

# ------------------------------------------------------------------------------ data

say "generating data"
# ~190 MiB, compressible overall: 11 copies of 16 MiB of text, each behind a header of a
# different length so that no two copies line up on block boundaries (a block's output
# handed to the wrong block would not go unnoticed), with binary records, random bytes and
# zeros in between.
gen_file "$WS/text16" $((16 << 20)) text 11
gen_file "$WS/bin8" $((8 << 20)) binary 12
head -c $((3 << 20)) /dev/urandom >"$WS/rand3"
{
    for k in 1 2 3 4 5 6 7 8 9 10 11; do
        printf 'copy %d %*s\n' "$k" $((k * 977)) x
        cat "$WS/text16"
        [ "$k" = 3 ] && cat "$WS/bin8"
        [ "$k" = 5 ] && cat "$WS/rand3"
        [ "$k" = 6 ] && head -c $((2 << 20)) /dev/zero
    done
} >"$SRC/big"
rm -f "$WS/text16" "$WS/bin8" "$WS/rand3"
BIG_SIZE=$(stat -c %s "$SRC/big")
say "    big: $BIG_SIZE bytes"
# 64 MiB, for the fault-injection runs
head -c $((64 << 20)) "$SRC/big" >"$SRC/mid"

# 400 files of 4-20 KiB, distinct contents
mkdir -p "$SRC/small"
python3 - "$SRC/small" <<'PY'
import os, random, sys
d = sys.argv[1]
r = random.Random(4242)
words = "card brick block job queue fallback kernel stride frame lz4 ok error info warn".split()
for i in range(400):
    n = r.randint(4096, 20480)
    out = bytearray(b"file %04d\n" % i)
    while len(out) < n:
        out += (" ".join(r.choices(words, k=r.randint(3, 12))) + " %d\n" % r.randrange(10**6)).encode()
    with open(os.path.join(d, "f%04d" % i), "wb") as f:
        f.write(out[:n])
PY

check "fpgalz4fs --version lists emu among the backends" \
    bash -c "'$DAEMON' --version | sed -n 2p | grep -Eq '^backends:.* emu( |\$)'"

# ------------------------------------------------------------------------------ 1. big copy

say "== large copy, engine=emu,emu_card_mbps=100"
use_store big
# the card is slower than any writer, even under the sanitizers: bricks find it busy
if check "mount engine=emu,emu_card_mbps=100" mount_store "engine=emu,emu_card_mbps=100"; then
    LOG1=$(last_log)
    check_show "cp of $BIG_SIZE bytes" timed cp "$SRC/big" "$MNT/big"
    check "copy reads back identical (cmp)" cmp "$SRC/big" "$MNT/big"
    S=$(stats "$MNT")
    show_stats "$S"
    check "counters: backend=emu" expect_counter "$S" backend = emu
    check "counters: bricks_card > 0" expect_counter "$S" bricks_card -gt 0
    check "counters: bricks_sw > 0 (card and software both compressed bricks)" \
        expect_counter "$S" bricks_sw -gt 0
    check "counters: blocks_card > 0" expect_counter "$S" blocks_card -gt 0
    # the emulated card reads host memory: the writers' block buffers went to it in place
    check "counters: blocks_direct > 0 (block buffers read in place)" \
        expect_counter "$S" blocks_direct -gt 0
    check "counters: blocks_direct <= blocks_card" \
        bash -c "[ $(stat_of "$S" blocks_direct) -le $(stat_of "$S" blocks_card) ]"
    check "counters: bytes_in >= file size" expect_counter "$S" bytes_in -ge "$BIG_SIZE"
    # at most one extra block (the file's compressed zero block): nothing compressed twice
    check "counters: bytes_in <= file size + one block" \
        expect_counter "$S" bytes_in -le $((BIG_SIZE + (1 << 20)))
    check "counters: bytes_out < bytes_in" expect_lt "$S" bytes_out bytes_in
    check "counters: no card faults" expect_counter "$S" fallback_error -eq 0
    check "daemon log names the emulated card as such" grep -Eiq 'emulated' "$LOG1"
    check "unmount" umount_store
    check "lz4 -d of the backing file equals the original" same_as_lz4 "$BACKING/big" "$SRC/big"
    check "counters logged at unmount" grep -q 'bricks_card' "$LOG1"
    if check "mount again (engine=sw)" mount_at "$BACKING" "$MNT" "engine=sw"; then
        check "identical after remount" cmp "$SRC/big" "$MNT/big"
        check "unmount" umount_store
    fi
fi

# ------------------------------------------------------------------------------ 2. errors

# copy_until_fault: faults come from a seeded sequence, but how many runs reach the card in
# one copy depends on the machine's speed; copies go on (at most 8) until one shows
copy_until_fault() {
    local k
    for k in 1 2 3 4 5 6 7 8; do
        [ "$(stat_of "$(stats "$MNT")" fallback_error)" -gt 0 ] && return 0
        check "another copy (until a card fault shows)" \
            bash -c "timeout 120 cp '$SRC/mid' '$MNT/mid.$k' && cmp '$SRC/mid' '$MNT/mid.$k'"
    done
}

say "== injected card errors: engine=emu,emu_error_rate=0.1"
use_store err
BLOCK_SIZE=64K
if check "mount engine=emu,emu_error_rate=0.1 (64K blocks)" mount_store "engine=emu,emu_error_rate=0.1"; then
    check_show "cp of 64 MiB" timed cp "$SRC/mid" "$MNT/mid"
    check "copy reads back identical" cmp "$SRC/mid" "$MNT/mid"
    copy_until_fault
    S=$(stats "$MNT")
    show_stats "$S"
    check "counters: fallback_error > 0" expect_counter "$S" fallback_error -gt 0
    check "counters: bricks_card > 0" expect_counter "$S" bricks_card -gt 0
    check "unmount" umount_store
    check "lz4 -d of the backing file equals the original" same_as_lz4 "$BACKING/mid" "$SRC/mid"
fi
unset BLOCK_SIZE

# ------------------------------------------------------------------------------ 3. hangs

say "== card runs that hang: engine=emu,emu_hang_rate=0.05,card_timeout_ms=100"
use_store hang
BLOCK_SIZE=64K
if check "mount engine=emu,emu_hang_rate=0.05,card_timeout_ms=100 (64K blocks)" \
    mount_store "engine=emu,emu_hang_rate=0.05,card_timeout_ms=100"; then
    # the copy must finish: a generous bound (a liveness check, not a speed target)
    check_show "cp of 64 MiB finishes (within 120 s)" timed timeout 120 cp "$SRC/mid" "$MNT/mid"
    check "copy reads back identical" cmp "$SRC/mid" "$MNT/mid"
    copy_until_fault
    S=$(stats "$MNT")
    show_stats "$S"
    check "counters: fallback_error > 0" expect_counter "$S" fallback_error -gt 0
    check "unmount" umount_store
    check "lz4 -d of the backing file equals the original" same_as_lz4 "$BACKING/mid" "$SRC/mid"
fi
unset BLOCK_SIZE

# ------------------------------------------------------------------------------ 4. small files

say "== 400 small files from 8 parallel writers, engine=emu"
use_store small
if check "mount engine=emu" mount_store "engine=emu"; then
    mkdir -p "$MNT/small"
    S0=$(stats "$MNT")
    # 8 writers, 50 files each
    check "8 parallel cp of 50 files each" bash -c \
        "cd '$SRC/small' && ls | xargs -P 8 -n 50 cp -t '$MNT/small'"
    check "all 400 files identical" diff -r "$SRC/small" "$MNT/small"
    S=$(stats "$MNT")
    show_stats "$S"
    check "counters: bricks_card > 0" expect_counter "$S" bricks_card -gt 0
    check "counters: no small-job fallback for 4-20 KiB files" \
        expect_counter "$S" fallback_small -eq "$(stat_of "$S0" fallback_small)"
    check "card bricks held jobs of several files (bricks_card < blocks_card)" \
        expect_lt "$S" bricks_card blocks_card
    # each file is one block of data: one engine job per file, and the engine is handed
    # the files' bytes, nothing more
    jobs=$(( $(stat_of "$S" blocks_card) + $(stat_of "$S" blocks_sw) -
             $(stat_of "$S0" blocks_card) - $(stat_of "$S0" blocks_sw) ))
    bytes=$(( $(stat_of "$S" bytes_in) - $(stat_of "$S0" bytes_in) ))
    want=$(cat "$SRC"/small/* | wc -c)
    check_eq "one engine job per small file (400)" 400 "$jobs"
    check_eq "engine input is the small files' bytes ($want)" "$want" "$bytes"
    check "unmount" umount_store
    check "backing files decode with lz4 to the originals" lz4_check "$BACKING/small" "$SRC/small"
fi

# ------------------------------------------------------------------------------ 5. unmount

say "== unmount right after a large write, slow card (emu_card_mbps=40)"
use_store flight
if check "mount engine=emu,emu_card_mbps=40" mount_store "engine=emu,emu_card_mbps=40"; then
    D=$DAEMON_PID
    # a large file and a few smaller ones written at once, every writer closed, then the
    # unmount at once: fusermount3 -u waits for the releases, the daemon for the engine
    check "write files and unmount at once" bash -c "
        cp '$SRC/mid' '$MNT/mid' & a=\$!
        head -c 7777777 '$SRC/big' >'$MNT/part' & b=\$!
        cp -r '$SRC/small' '$MNT/small' & c=\$!
        wait \$a && wait \$b && wait \$c"
    S=$(stats "$MNT")
    show_stats "$S"
    check "unmount immediately" umount_at "$MNT" "$D"
    check "the daemon has exited" no_daemon_for "$BACKING"
    check "lz4 -d of mid equals the original" same_as_lz4 "$BACKING/mid" "$SRC/mid"
    if check "mount again" mount_at "$BACKING" "$MNT" "engine=emu"; then
        check "mid identical after remount" cmp "$SRC/mid" "$MNT/mid"
        check "part identical after remount" cmp <(head -c 7777777 "$SRC/big") "$MNT/part"
        check "small files identical after remount" diff -r "$SRC/small" "$MNT/small"
        check "unmount" umount_store
    fi
    # the same with a card that hangs: runs in flight at unmount time out and go to software
    if check "mount engine=emu,emu_hang_rate=0.2,card_timeout_ms=300" \
        mount_at "$BACKING" "$MNT" "engine=emu,emu_hang_rate=0.2,card_timeout_ms=300"; then
        D=$DAEMON_PID
        check "write a large file and unmount at once (hanging card)" bash -c \
            "cp '$SRC/big' '$MNT/big2' && fusermount3 -u '$MNT'"
        check "the daemon exits after that unmount" umount_at "$MNT" "$D"
        check "lz4 -d of big2 equals the original" same_as_lz4 "$BACKING/big2" "$SRC/big"
        if check "mount again" mount_at "$BACKING" "$MNT" "engine=sw"; then
            check "big2 identical after remount" cmp "$SRC/big" "$MNT/big2"
            check "unmount" umount_store
        fi
    fi
fi

# ------------------------------------------------------------------------------ 6. choice

say "== engine choice and option checks"
use_store choice
if check "mount engine=auto" mount_store "engine=auto"; then
    LOGA=$(last_log)
    S=$(stats "$MNT")
    check "engine=auto: backend=sw" expect_counter "$S" backend = sw
    check "engine=auto logs its choice and why" grep -Eiq 'auto.*(no|not|without).*(card|accelerator|device)' "$LOGA"
    echo hello >"$MNT/hello"
    check "engine=auto store works" test "$(cat "$MNT/hello")" = hello
    check "unmount" umount_store
fi
if check "mount with no engine option" mount_store ""; then
    S=$(stats "$MNT")
    check "default engine: backend=sw (auto never picks emu)" expect_counter "$S" backend = sw
    check "unmount" umount_store
fi

check_show "engine=xrt fails the mount with a clear message" mount_refused "engine=xrt" 'xrt'
check_show "engine=cuda fails the mount with a clear message" mount_refused "engine=cuda" 'cuda'
check_show "engine=bogus is refused" mount_refused "engine=bogus" 'engine'
check_show "bufsets=0 is refused" mount_refused "engine=emu,bufsets=0" 'bufsets'
check_show "bufsets=17 (more than the emulated card has) fails the mount with the reason" \
    mount_refused "engine=emu,bufsets=17" 'bufsets'
check_show "cus=17 (more than the emulated card has) fails the mount with the reason" \
    mount_refused "engine=emu,cus=17" 'cus'
check_show "emu_error_rate=2 is refused" mount_refused "engine=emu,emu_error_rate=2" 'emu_error_rate'
check_show "emu_hang_rate=-0.5 is refused" mount_refused "engine=emu,emu_hang_rate=-0.5" 'emu_hang_rate'
check_show "emu_card_mbps=0 is refused" mount_refused "engine=emu,emu_card_mbps=0" 'emu_card_mbps'
check_show "card_timeout_ms=abc is refused" mount_refused "engine=emu,card_timeout_ms=abc" 'card_timeout_ms'
if check "the store still mounts after the refusals" mount_store "engine=emu,bufsets=1"; then
    check "hello still there" test "$(cat "$MNT/hello")" = hello
    check "unmount" umount_store
fi

finish
