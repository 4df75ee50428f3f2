#!/bin/bash
# t_cardfault: an emulated card that errors, hangs, vanishes (is pulled out) mid-run or returns
# wrong bytes (checked by the host, or by a card that checks itself) never stalls a writer
# and never corrupts a file. Each case copies files in while a probe writes
# and fsyncs 64 KiB steps, timing each step; the slowest step must stay under a generous
# bound (20 x (card_timeout_ms + the slowest step of the same probe on software alone)): the
# point is that nothing hangs, not speed. Files must read back identical through the mount
# and with lz4 -d, and the counters must show the faults (fallback_error > 0).
#
# Long form: CARDFAULT_MB=256 CARDFAULT_STEPS=2000 (bigger copies, longer probes).
. "$(dirname "$0")/lib.sh"
need_binaries

MB=${CARDFAULT_MB:-24}
STEPS=${CARDFAULT_STEPS:-150}
TIMEOUT_MS=100
BLOCK_SIZE=64K
SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/text" $((MB << 20)) text 7
gen_file "$SRC/mixed" $((MB << 19)) mixed 8
mkdir -p "$SRC/small"
for i in $(seq 1 40); do gen_file "$SRC/small/f$i" $((i * 3000 + 17)) text "$i"; done

stats() { getfattr --absolute-names --only-values -n user.fpgalz4fs.stats "$1"; }
stat_of() {
    local v
    v=$(printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -n 1)
    case $v in '' | *[!0-9]*) printf '%s\n' "$v" ;; *) printf '%s\n' $((10#$v)) ;; esac
}
expect_counter() {
    local v
    v=$(stat_of "$1" "$2")
    [ -n "$v" ] && [ "$v" "$3" "$4" ] 2>/dev/null && return 0
    echo "counter $2 is '$v', expected $3 $4"; printf '%s\n' "$1"; return 1
}

# probe FILE STEPS OUT: writes STEPS steps of 64 KiB (compressible, each different) with an
# fsync after each, writes the slowest step in ms to OUT, and the content's sha256 to OUT.sum.
PROBE="$WS/probe.py"
cat >"$PROBE" <<'EOF'
import hashlib, os, sys, time
path, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
h = hashlib.sha256()
worst = 0.0
for i in range(steps):
    line = b"step %08d: card fault probe, compressible text\n" % i
    data = (line * (65536 // len(line) + 1))[:65536]
    t = time.monotonic()
    os.write(fd, data)
    os.fsync(fd)
    worst = max(worst, time.monotonic() - t)
    h.update(data)
os.close(fd)
open(out, "w").write("%d\n" % int(worst * 1000 + 0.5))
open(out + ".sum", "w").write(h.hexdigest() + "\n")
EOF

# run_case NAME OPTS: mount a fresh store with OPTS, copy the sources in beside the probe, check.
WORST=0
run_case() {
    local name=$1 opts=$2 S
    rm -rf "$BACKING"; mkdir -p "$BACKING"
    check "$name: mount $opts" mount_store "$opts" || return 1
    spawn cp -r "$SRC" "$MNT/copy"; local cp_pid=$SPAWNED_PID
    check "$name: probe writes $STEPS fsynced steps" timeout 600 python3 "$PROBE" "$MNT/probe" "$STEPS" "$WS/$name.worst"
    check "$name: the copy finishes" wait "$cp_pid"
    WORST=$(cat "$WS/$name.worst" 2>/dev/null || echo 999999)
    say "    $name: slowest write+fsync step ${WORST} ms"
    check "$name: copy identical through the mount" diff -r "$SRC" "$MNT/copy"
    check_eq "$name: probe content" "$(cat "$WS/$name.worst.sum")" "$(sum_of "$MNT/probe")"
    S=$(stats "$MNT")
    say "    counters: $(printf '%s\n' "$S" | grep -E '^(backend|bricks_card|blocks_card|bricks_sw|fallback_error|fallback_busy|verify_failed)=' | sed 's/=0*\([0-9]\)/=\1/' | tr '\n' ' ')"
    CASE_STATS=$S
    check "$name: unmount" umount_store
    check "$name: lz4 -d of every backing file equals the original" lz4_check "$BACKING/copy" "$SRC"
    check "$name: lz4 -d of the probe" lz4_decodes "$BACKING"
}

# ---------------------------------------------------------------- baseline: software alone
run_case sw "engine=sw"
BASE=$WORST
BOUND=$((20 * (TIMEOUT_MS + BASE)))
say "bound for a step under card faults: 20 x ($TIMEOUT_MS + $BASE) = $BOUND ms"

slow_ok() { [ "$WORST" -le "$BOUND" ] || { echo "slowest step $WORST ms > bound $BOUND ms"; return 1; }; }

# ---------------------------------------------------------------- errors and hangs together
run_case faulty "engine=emu,emu_error_rate=0.3,emu_hang_rate=0.3,card_timeout_ms=$TIMEOUT_MS,emu_card_mbps=400"
check "faulty card: no step stalls (<= $BOUND ms)" slow_ok
check "faulty card: fallback_error > 0" expect_counter "$CASE_STATS" fallback_error -gt 0

# ---------------------------------------------------------------- a card that always hangs
run_case hung "engine=emu,emu_hang_rate=1,card_timeout_ms=$TIMEOUT_MS"
check "hung card: no step stalls (<= $BOUND ms)" slow_ok
check "hung card: fallback_error > 0" expect_counter "$CASE_STATS" fallback_error -gt 0
check "hung card: every brick went to software (bricks_card = 0)" expect_counter "$CASE_STATS" bricks_card -eq 0

# ---------------------------------------------------------------- a card pulled out mid-copy
run_case vanish "engine=emu,emu_vanish_after=20,card_timeout_ms=$TIMEOUT_MS,emu_card_mbps=400"
check "vanished card: no step stalls (<= $BOUND ms)" slow_ok
check "vanished card: fallback_error > 0" expect_counter "$CASE_STATS" fallback_error -gt 0
check "vanished card: the card compressed some bricks before it went" expect_counter "$CASE_STATS" bricks_card -gt 0
check "vanished card: at most 20 card bricks" expect_counter "$CASE_STATS" bricks_card -le 20

# ---------------------------------------------------------------- a card that returns wrong bytes
# Every run completes with plausible sizes and one wrong byte in a compressed block: the
# host decodes every block a card compressed before storing it, so the wrong ones are
# redone in software and counted, and every file still reads back identical.
run_case corrupt "engine=emu,emu_corrupt_rate=1,emu_card_mbps=400"
check "wrong card: verify_failed > 0" expect_counter "$CASE_STATS" verify_failed -gt 0
check "wrong card: the card's other blocks were used (blocks_card > verify_failed)" \
    bash -c "[ $(stat_of "$CASE_STATS" blocks_card) -gt $(stat_of "$CASE_STATS" verify_failed) ]"
check "wrong card: no fault fallback (the runs themselves completed)" expect_counter "$CASE_STATS" fallback_error -eq 0

# ---------------------------------------------------------------- a card that checks itself, wrong
# The same with a model of a card that checks its own output (as the CUDA backend's GPU
# does): the pool compares the card's sums instead of decoding. Half the runs are spoiled
# before the card's check, half after it (a fault on the way back, seen only by the sums).
run_case corrupt_checked "engine=emu,emu_corrupt_rate=1,emu_card_check=1,emu_card_mbps=400"
check "self-checking wrong card: verify_failed > 0" expect_counter "$CASE_STATS" verify_failed -gt 0
check "self-checking wrong card: every card block checked on the card" \
    bash -c "[ $(stat_of "$CASE_STATS" blocks_checked_on_card) -eq $(stat_of "$CASE_STATS" blocks_card) ]"
check "self-checking wrong card: the card's other blocks were used" \
    bash -c "[ $(stat_of "$CASE_STATS" blocks_card) -gt $(stat_of "$CASE_STATS" verify_failed) ]"

# ---------------------------------------------------------------- the card alone
# copy_case NAME OPTS: a fresh store mounted with OPTS, the tree copied in and compared, the
# card's blocks counted; the counters are left in S and the store mounted for more checks
# (the caller unmounts). Fails (1) when the mount fails.
copy_case() {
    rm -rf "$BACKING"; mkdir -p "$BACKING"
    check "$1: mount" mount_store "$2" || return 1
    check "$1: copy" cp -r "$SRC" "$MNT/copy"
    check "$1: copy identical" diff -r "$SRC" "$MNT/copy"
    S=$(stats "$MNT")
    check "$1: the card compressed" expect_counter "$S" blocks_card -gt 0
    return 0                           # mounted: the caller unmounts whatever failed
}

# card_only=1: a slow card's bricks wait for it; software takes none of them.
if copy_case card_only "engine=emu,card_only=1,emu_card_mbps=400"; then
    check "card_only: no brick went to software for want of a set (fallback_busy = 0)" \
        expect_counter "$S" fallback_busy -eq 0
    check "card_only: unmount" umount_store
fi

# card_fill_us: bricks that start at once (0) and bricks that may wait a long time to fill
# (a second): the data are right either way.
for fill in 0 1000000; do
    copy_case "card_fill_us=$fill" "engine=emu,card_fill_us=$fill,emu_card_mbps=400" &&
        check "card_fill_us=$fill: unmount" umount_store
done

# ---------------------------------------------------------------- option checks
check_fails "emu_corrupt_rate=2 is refused" mount_store "engine=emu,emu_corrupt_rate=2"
check "the refusal names the option" grep -q 'emu_corrupt_rate' <<<"$LAST_MOUNT_OUT"
check_fails "emu_vanish_after=-1 is refused" mount_store "engine=emu,emu_vanish_after=-1"
check "the refusal names the option" grep -q 'emu_vanish_after' <<<"$LAST_MOUNT_OUT"
check_fails "emu_vanish_after=x is refused" mount_store "engine=emu,emu_vanish_after=x"
check_fails "emu_card_check=2 is refused" mount_store "engine=emu,emu_card_check=2"
check "the refusal names the option" grep -q 'emu_card_check' <<<"$LAST_MOUNT_OUT"
check_fails "card_only=1 with engine=sw is refused" mount_store "engine=sw,card_only=1"
check "the refusal names the option" grep -q 'card_only' <<<"$LAST_MOUNT_OUT"
check_fails "card_only=2 is refused" mount_store "engine=emu,card_only=2"
check "the refusal names the option" grep -q 'card_only' <<<"$LAST_MOUNT_OUT"
check_fails "card_fill_us=1000001 is refused" mount_store "engine=emu,card_fill_us=1000001"
check "the refusal names the option" grep -q 'card_fill_us' <<<"$LAST_MOUNT_OUT"
check_fails "card_fill_us=x is refused" mount_store "engine=emu,card_fill_us=x"

finish
