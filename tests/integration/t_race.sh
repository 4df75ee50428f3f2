#!/bin/bash
# t_race: many threads read, write, truncate, rename, reopen and fsync the same and different
# files of a mount at once (tests/race.c), checked against a model while they run; then the
# final content is compared with the model after an unmount and a mount, and every backing
# file must decode with the stock lz4 to what the mount shows. First it proves that the
# checker can fail: on a plain directory it passes, and with a fault injected it must fail.
#
# Runs on a 64K-block store with the smallest memory budget (commits under memory pressure while
# others read), and on the emulated card (bricks from many files at once).
#
# Short form (CI): 8 threads, RACE_SECONDS=8 per mount. Long form:
#   RACE_SECONDS=600 RACE_THREADS=16 RACE_SEEDS="1 2" BUILD_DIR=build bash tests/integration/t_race.sh
SECS=${RACE_SECONDS:-8}
THREADS=${RACE_THREADS:-8}
SEEDS=${RACE_SEEDS:-1}
n_seeds=$(echo $SEEDS | wc -w)
export TEST_TIMEOUT=${TEST_TIMEOUT:-$(( 840 > SECS * n_seeds * 2 + 600 ? 840 : SECS * n_seeds * 2 + 600 ))}
. "$(dirname "$0")/lib.sh"
RACE="$BUILD_DIR/race"
need_binaries "$RACE"
BLOCK_SIZE=64K

# ---------------------------------------------------------------- the checker itself
mkdir -p "$WS/self-ok" "$WS/self-bad"
check "race: a plain directory passes" "$RACE" --dir "$WS/self-ok" --seconds 2 --threads 4 --seed 3
inject() {
    local out rc
    out=$("$RACE" --dir "$WS/self-bad" --seconds 5 --threads 4 --seed 3 --inject-fault 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E 'FAIL|injected' | head -n 3
    [ $rc -eq 1 ] || { echo "exit status $rc, want 1"; return 1; }
    printf '%s\n' "$out" | grep -q '^race: FAIL seed=3 thread=[0-9]* op=.* file=shared-0' ||
        { echo "no FAIL line naming the shared file"; return 1; }
}
check "race: a fault injected behind the model is reported (exit 1)" inject

# ---------------------------------------------------------------- against mounts
# run_race NAME OPTS: one run per seed on a fresh directory of the mount, its model kept
# outside; after a remount each directory must equal its model.
run_race() {
    local name=$1 opts=$2 seed
    check "$name: mount ($opts)" mount_store "$opts" || return 1
    for seed in $SEEDS; do
        mkdir -p "$MNT/$name-$seed" "$WS/model-$name-$seed"
        check_show "$name: race seed=$seed, $THREADS threads, $SECS s" "$RACE" --dir "$MNT/$name-$seed" \
            --model "$WS/model-$name-$seed" --seconds "$SECS" --threads "$THREADS" --seed "$seed"
    done
    check "$name: daemon alive" daemon_alive
    if check "$name: remount" remount; then
        for seed in $SEEDS; do
            check "$name: seed=$seed: after remount the files equal the model" \
                diff -r "$WS/model-$name-$seed" "$MNT/$name-$seed"
        done
        check "$name: lz4 -d of every backing file equals the mount" lz4_check "$BACKING" "$MNT"
    fi
    check "$name: unmount" umount_store
}

run_race sw "mem_mb=16"
rm -rf "$BACKING" && mkdir -p "$BACKING"
run_race emu "engine=emu,cus=2,mem_mb=16"

finish
