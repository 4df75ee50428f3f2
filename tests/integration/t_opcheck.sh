#!/bin/bash
# t_opcheck: the randomized operation checker (tests/opcheck.c) against a mount, compared with
# a plain directory, on a 64K-block store; then the same trees after a remount. First it proves
# that the checker can fail: two plain directories, one corrupted mid-run, must give exit 1.
#
# Short form (CI): 3 seeds x 3000 operations. Long form:
#   OPCHECK_OPS=100000 OPCHECK_SEEDS="1 2 3 4 5" bash tests/integration/t_opcheck.sh
OPS=${OPCHECK_OPS:-3000}
SEEDS=${OPCHECK_SEEDS:-"1 2 3"}
# the long form needs more than the default watchdog time (about 1 ms per operation here)
n_seeds=$(echo $SEEDS | wc -w)
export TEST_TIMEOUT=${TEST_TIMEOUT:-$(( 840 > OPS * n_seeds / 250 + 600 ? 840 : OPS * n_seeds / 250 + 600 ))}
. "$(dirname "$0")/lib.sh"
need_binaries "$OPCHECK"

FILES=${OPCHECK_FILES:-8}
BLOCK_SIZE=64K
BLOCK_BYTES=65536

# ---------------------------------------------------------------- the checker itself
mkdir -p "$WS/self-a" "$WS/self-b" "$WS/self-c" "$WS/self-d"
check "opcheck: two plain directories agree" "$OPCHECK" --mount "$WS/self-a" --ref "$WS/self-b" --seed 7 --ops 1500 --block-size $BLOCK_BYTES
inject() {
    local out rc
    out=$("$OPCHECK" --mount "$WS/self-c" --ref "$WS/self-d" --seed 7 --ops 1500 --block-size $BLOCK_BYTES --inject-fault 300 2>&1)
    rc=$?
    printf '%s\n' "$out" | head -n 3
    [ $rc -eq 1 ] || { echo "exit status $rc, want 1"; return 1; }
    printf '%s\n' "$out" | grep -q '^opcheck: FAIL seed=7 step=[0-9]* op=.* file=.* offset=[0-9]*' || { echo "no FAIL line"; return 1; }
}
check "opcheck: a corrupted reference mid-run is reported (exit 1)" inject

# ---------------------------------------------------------------- against the mount
check "format and mount (64K blocks)" mount_store || finish
for seed in $SEEDS; do
    mkdir -p "$MNT/oc-$seed" "$WS/ref-$seed"
    t0=$(date +%s)
    check "opcheck seed=$seed ops=$OPS" "$OPCHECK" --mount "$MNT/oc-$seed" --ref "$WS/ref-$seed" \
        --seed "$seed" --ops "$OPS" --files "$FILES" --block-size $BLOCK_BYTES
    say "    (seed $seed took $(( $(date +%s) - t0 )) s)"
done
check "lz4 -d of every backing file equals the mount" lz4_check "$BACKING" "$MNT"
check "daemon alive" daemon_alive
if check "remount" remount; then
    for seed in $SEEDS; do
        check "seed=$seed: the tree after remount equals the reference" diff -r "$WS/ref-$seed" "$MNT/oc-$seed"
    done
    check "unmount" umount_store
fi

finish
