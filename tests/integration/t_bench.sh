#!/usr/bin/env bash
# t_bench: the benchmark driver's quick form on small data produces its table, raw numbers
# and plot, well formed, and leaves no mount or temporary directory behind (also when it is
# interrupted). It never checks a speed: targets are the driver's business, not the tests'.
. "$(dirname "$0")/lib.sh"

BENCH="$BUILD_DIR/fpgalz4fs-bench"
need_binaries "$BENCH"
RES="$WS/results"
WORK="$WS/work"
mkdir -p "$WORK"

# Quick form of `all`: every row, the workloads and the engine included, on a few MiB of
# generated data.
check "all --quick runs" "$BENCH" all --quick --synthetic --mb 4 --engine-mb 4 --writers 20 \
    --fio-mb 4 --results "$RES" --workdir "$WORK"

for f in fs.md fs.csv targets.csv engine.md engine.csv; do
    check "$f written" test -s "$RES/$f"
done

# The targets: SPEC.md's 8, and the workloads' 34 for each of the two fpgalz4fs stores (1M,
# 64K): allocated and apparent size for 9 workloads, speed against passthrough_ll for 8 and
# for the 7 metadata rows over a tree of small files, and the daemon's write_bytes for a
# small overwrite.
NTARGETS=$((8 + 2 * 34))
targets_table_ok() {
    local rows
    rows=$(sed -n '/^### Targets/,$p' "$RES/fs.md" | grep -c '^| [a-z].* | \(met\|not met\|skipped: .*\) |$')
    [ "$rows" -eq $NTARGETS ] || { echo "expected $NTARGETS target rows with a verdict, got $rows"; return 1; }
    grep -q '^| target (SPEC.md "Performance") | measured | target | verdict |$' "$RES/fs.md"
}
check "fs.md has the targets table, $NTARGETS rows with verdicts" targets_table_ok

# Side by side: every write/read/small-files rival measured (fio rows may say skipped).
side_by_side_ok() {
    local r
    for r in "cp into the mount" "lz4 -1 into the backing fs" "cp into a plain directory" \
             "cat from the mount, daemon cache cold" "lz4 -d of the backing file" \
             "cp -r into the mount" "cp -r into a plain directory"; do
        grep -q "^| [a-z ]* | $r | [0-9][0-9.]* | " "$RES/fs.md" || { echo "no row: $r"; return 1; }
    done
}
check "fs.md has every side-by-side row with a median" side_by_side_ok

# The workloads, side by side: each of the 16 rows (9 workloads, 7 metadata commands over a
# tree) has a number for all four rivals (fpgalz4fs 1M and 64K, passthrough_ll, plain ext4 or
# a plain directory) and both ratios.
workloads_ok() {
    local rows
    local num=' [0-9][0-9.]* |' ratio=' [0-9][0-9.]*x |'
    # fpgalz4fs 1M and 64K, passthrough_ll, the same with fpgalz4fs's kernel settings (not
    # run for the four O_APPEND rows: its writeback mode breaks them), plain ext4; 4 ratios
    rows=$(sed -n '/^### Workloads$/,/^### Workloads: /p' "$RES/fs.md" |
           grep -c "^| [^|]* | [A-Za-z/]* |$num$num$num\($num\| skipped |\)$num$ratio$ratio\($ratio\| - |\)\{2\}\$")
    [ "$rows" -eq 16 ] || { echo "expected 16 workload rows with every rival measured, got $rows"; return 1; }
    rows=$(sed -n '/^### Workloads$/,/^### Workloads: /p' "$RES/fs.md" | grep -c "^| [^|]* | [A-Za-z/]* |$num$num$num$num$num")
    [ "$rows" -eq 12 ] || { echo "expected 12 rows with passthrough_ll wb,xattr,perm measured, got $rows"; return 1; }
    grep -q '^| sqlite-wal | fpgalz4fs 64K | [0-9]* | [0-9]* | [0-9]* | [0-9]* | ' "$RES/fs.md" ||
        { echo "no stored-size row"; return 1; }
    grep -q '^| passthrough_ll | [0-9.]* s | [0-9.]* s | [0-9]* | [0-9]* | - | [A-Z]* (as required) |$' \
        "$RES/fs.md" || { echo "no holes row for passthrough_ll"; return 1; }
    grep -q '^| fpgalz4fs 64K | [0-9.]* s | [0-9.]* s | [0-9]* | [0-9]* | [0-9]* | ' \
        "$RES/fs.md" || { echo "no holes row for fpgalz4fs 64K (the close timed)"; return 1; }
    grep -q '^| fpgalz4fs 1M | [0-9]* | [0-9]* | [0-9]* | [0-9]* |$' "$RES/fs.md" ||
        { echo "no write_bytes row"; return 1; }
}
check "fs.md has the workloads: speed, stored size, holes, write_bytes" workloads_ok

# fs.csv: the header, then row,rival,round,seconds,rate,unit with positive numbers (RFC 4180
# quoting: the labels hold commas).
csv_ok() {
    python3 - "$RES/fs.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows[0] == ["row", "rival", "round", "seconds", "rate", "unit"], rows[0]
assert len(rows) >= 10, "only %d lines" % len(rows)
for r in rows[1:]:
    assert len(r) == 6, r
    assert int(r[2]) >= 1 and float(r[3]) > 0 and float(r[4]) > 0, r
    assert r[5] in ("MB/s", "files/s", "IOPS", "tx/s", "appends/s", "edits/s"), r
PY
}
check "fs.csv well formed" csv_ok

targets_csv_ok() {
    python3 - "$RES/targets.csv" "$NTARGETS" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows[0] == ["target", "measured", "required", "comparison", "unit", "verdict"], rows[0]
n = int(sys.argv[2])
assert len(rows) == n + 1, "%d targets, expected %d" % (len(rows) - 1, n)
for r in rows[1:]:
    assert len(r) == 6 and r[3] in ("<=", ">=") and r[5] in ("met", "not_met", "skipped"), r
    float(r[2])
    if r[5] != "skipped":
        float(r[1])
PY
}
check "targets.csv well formed, $NTARGETS targets" targets_csv_ok
# in quick `all` every part runs: only fio may be missing
check_eq "no target skipped except for a missing tool" "" \
    "$(grep ',skipped$' "$RES/targets.csv" 2>&1)"

if command -v gnuplot >/dev/null; then
    check "fs.png is a PNG" bash -c "head -c 8 '$RES/fs.png' | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'"
else
    skip "gnuplot not installed: no plot to check"
fi

nothing_left() {
    local left
    left=$(ls -A "$WORK")
    [ -z "$left" ] || { echo "left in the work directory: $left"; return 1; }
    ! grep -qF "$WORK/" /proc/self/mounts || { echo "mount left"; return 1; }
}
check "no mount and no temporary directory left" nothing_left

# The parallel mode's quick form: 1, 2 and 4 writers, then as many cold readers, on
# fpgalz4fs and passthrough_ll; every cell a number, every file read back (the driver fails
# on a file that reads back wrong), the CSV one line per rival, count and round.
check "parallel --quick runs" "$BENCH" parallel --quick --synthetic --engine sw \
    --results "$RES" --workdir "$WORK"
parallel_ok() {
    local rows
    rows=$(grep -c '^| [124] |\( [0-9][0-9.]* |\)\{2\} [0-9.]*x |\( [0-9][0-9.]* |\)\{2\} [0-9.]*x | - | - |$' \
        "$RES/parallel.md")
    [ "$rows" -eq 3 ] || { echo "expected 3 rows with every cell measured, got $rows"; cat "$RES/parallel.md"; return 1; }
    [ "$(head -1 "$RES/parallel.csv")" = "rival,processes,round,write_mbps,cold_read_mbps" ] &&
        [ "$(grep -c '^\(fpgalz4fs\|passthrough_ll\),[124],1,[0-9.]*,[0-9.]*$' "$RES/parallel.csv")" -eq 6 ]
}
check "parallel.md and parallel.csv: every process count, both rivals" parallel_ok
check "... and nothing left" nothing_left

# Errors reachable from the command line: usage errors exit 2, with the usage line.
check_fails "unknown mode" "$BENCH" nosuchmode
usage_exit() {
    local rc out
    out=$("$BENCH" "$@" 2>&1); rc=$?
    [ $rc -eq 2 ] || { echo "exit $rc, expected 2: $out"; return 1; }
    grep -q '^usage: ' <<<"$out" || { echo "no usage line: $out"; return 1; }
}
check "bad --rounds is a usage error" usage_exit fs --rounds 0
check "bad --block is a usage error" usage_exit write --block 3M
check "unknown option is a usage error" usage_exit read --no-such-option
check "stray argument is a usage error" usage_exit small extra
check "missing option value is a usage error" usage_exit all --results
check "--help exits 0" "$BENCH" all --help
check "bad --max-procs is a usage error" usage_exit parallel --max-procs 0
check "an unknown --wl-rows row is a usage error" usage_exit workloads --wl-rows sqlite-wal,nosuch
check "an empty --fs-opts is a usage error" usage_exit workloads --fs-opts ""
check "parallel --help exits 0" "$BENCH" parallel --help

# Without the daemon next to it the driver says so and fails before touching anything.
mkdir -p "$WS/lonely"
cp "$BENCH" "$WS/lonely/"
lonely() {
    local out rc
    out=$("$WS/lonely/fpgalz4fs-bench" write --quick --workdir "$WORK" --results "$WS/r2" 2>&1); rc=$?
    [ $rc -eq 1 ] && grep -q 'must be built next to this program' <<<"$out" || { echo "rc $rc: $out"; return 1; }
}
check "no daemon next to the driver: clear error" lonely
check "... and nothing left" nothing_left

# An unwritable work directory: a clear error, nothing left mounted.
check_fails "work directory that does not exist" "$BENCH" write --quick --workdir "$WS/none/x" \
    --results "$WS/r3"

# Interrupted while mounted: the driver unmounts and removes its work directory.
interrupted() {
    "$BENCH" random --quick --synthetic --fio-secs 30 --results "$WS/r4" --workdir "$WORK" \
        >"$WS/int.out" 2>&1 &
    local pid=$! i
    for ((i = 0; i < 300; i++)); do
        grep -qF "$WORK/" /proc/self/mounts && break
        sleep 0.1
    done
    grep -qF "$WORK/" /proc/self/mounts || { echo "never mounted"; kill "$pid"; return 1; }
    sleep 1
    kill -TERM "$pid"
    wait "$pid"
    grep -q 'interrupted' "$WS/int.out" || { cat "$WS/int.out"; return 1; }
    nothing_left
}
if command -v fio >/dev/null; then
    check "SIGTERM while mounted: unmounted and cleaned up" interrupted
else
    skip "fio not installed: the interrupted run needs a long row"
fi

finish
