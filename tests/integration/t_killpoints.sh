#!/bin/bash
# t_killpoints: a kill -9 of the daemon after every one of its writes to a file, each state
# opened as the daemon opens it, must leave the file as the last step that had ended (with an
# fsync or a close; a step that ended without either may be lost, back to that one) or as a
# step begun by then: every commit is all or nothing (SPEC.md "Crash safety"). Where
# t_crash_mix kills at random moments, this builds every point from the daemon's record of
# its writes (tests/plshim.c): a kill -9 keeps every write made, in order, and nothing after.
# The steps (tests/killpoints.py) mix changes of a few bytes (page records, format version
# 4) with whole blocks, writes across blocks and past the end, with and without fsync, and
# in a growing file a log's lines appended alone and closed (links of the last block's
# chained frame, format version 5); the seeds run as version 7 (frames of whole blocks on
# their slots' pages besides), the grow seeds as version 4
# (records without chains), the first seed as version 3 too (neither) and as version 6 at
# 1 MiB blocks, four of them (slots on page boundaries). Half the steps change pages only,
# most in one hot block,
# and the file stays open across steps, so that its slot fills across fsyncs and is folded
# early (FORMAT.md 11.7, "Making room"; each seed of version 4 to 7 without a log's lines
# must see one). Odd seeds: a file
# that ends inside a block and grows; even seeds: 16 whole blocks that stay so (records in
# the last slot), and, as grow seeds, 16 whole blocks that grow (the commit that appends and
# rewrites in place: docs/FORMAT.md 14, item 9, fixed since).
#
# Long form: KILLPOINTS_SEEDS="1 2 3 4 5 6 7 8" KILLPOINTS_GROW_SEEDS="2 4 6 8"
# KILLPOINTS_STEPS=120. KILLPOINTS_KEEP=DIR keeps
# each wrong state's store there, with the steps' log.
. "$(dirname "$0")/lib.sh"
need_binaries "$BUILD_DIR/plcheck" "$BUILD_DIR/plshim.so"
SEEDS=${KILLPOINTS_SEEDS:-1 2}
GROW_SEEDS=${KILLPOINTS_GROW_SEEDS-4}
STEPS=${KILLPOINTS_STEPS:-40}
PY="$(dirname "$0")/../killpoints.py"
recorder_preload t_killpoints

# run_seed VER SEED [--grow]: KP_BS the store's block size (64K; 1M with 4 blocks: version
# 6's slots on page boundaries)
run_seed() {
    local ver=$1 seed=$2 grow=${3:-} id="v$1-s$2${3:+-grow}-${KP_BS:-64K}" m="$WS/mnt"
    local b="$WS/store-$id" base="$WS/base-$id" plog="$WS/plog-$id" log="$WS/steps-$id"
    local size=(--bs 65536 --blocks 16)
    [ "${KP_BS:-64K}" = 1M ] && size=(--bs 1048576 --blocks 4)
    mkdir -p "$b"
    format_store "$b" -b "${KP_BS:-64K}" >/dev/null || return 1
    cp -a "$b" "$base"
    LD_PRELOAD="$PRELOAD" PLSHIM_LOG="$plog" PLSHIM_ROOT="$b" \
        mount_at "$b" "$m" "engine=sw,file_version=$ver" ||
        { fail_check "v$ver seed $seed: mount" "$LAST_MOUNT_OUT"; return 1; }
    check "v$ver seed $seed${grow:+ (grows)}: $STEPS steps through the mount" \
        python3 "$PY" workload "$m" "$log" --seed "$seed" --steps "$STEPS" "${size[@]}" $grow
    local early links st
    st=$(stats "$m")
    early=$(stat_of "$st" records_folded_early)
    links=$(stat_of "$st" chain_links)
    local lines=0   # a growing file's lines appended alone: links of its chain (version 5)
    [ "$ver" -ge 5 ] && { [ $((seed % 2)) = 1 ] || [ -n "$grow" ]; } && lines=1
    [ "$ver" -ge 4 ] && [ "$lines" = 0 ] &&
        check_show "v$ver seed $seed: slots that ran low were folded early ($early)" \
            test "$early" -gt 0
    if [ "$lines" = 1 ]; then
        check_show "v$ver seed $seed: lines were committed as links of a chain ($links)" \
            test "$links" -gt 0
    fi
    check "v$ver seed $seed: unmount" umount_at "$m" "$DAEMON_PID"
    check "v$ver seed $seed: the recorder logged the daemon's writes" test -s "$plog"
    check_show "v$ver seed $seed: after each write the file is a step's state" \
        python3 "$PY" check "$base" "$plog" "$log" "$BUILD_DIR/plcheck" "$WS/work-$id" \
        ${KILLPOINTS_KEEP:+--keep "$KILLPOINTS_KEEP/$id"}
    [ -n "${KILLPOINTS_KEEP:-}" ] && mkdir -p "$KILLPOINTS_KEEP/$id" && cp "$log" "$KILLPOINTS_KEEP/$id/steps"
    rm -rf "$WS/work-$id" "$plog" "$b" "$base"
}

for seed in $SEEDS; do
    run_seed 7 "$seed"
done
for seed in $GROW_SEEDS; do
    run_seed 4 "$seed" --grow
done
run_seed 3 "$(set -- $SEEDS; echo "$1")"   # the first seed, whatever spaces divide them
KP_BS=1M run_seed 6 "$(set -- $SEEDS; echo "$1")"
finish
