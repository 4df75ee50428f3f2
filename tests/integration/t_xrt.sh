#!/bin/bash
# t_xrt: the XRT backend (fpgalz4fs-xrt.so) through real mounts under XRT's noop shim
# (XCL_EMULATION_MODE=noop, XILINX_XRT pointing at a folder whose lib is the system's XRT
# library folder), with metadata-only xclbins from fpgalz4fs-mkxclbin:
#  - engine=xrt: the whole XRT call sequence runs, no kernel computes anything, so every card
#    output is caught by the sentinel check (fallback_error > 0, bricks_card = 0) and the tree
#    copied into the mount is intact and decodes with the stock lz4;
#  - engine=xrt,xrt_kernel_model=1: the reference kernel runs over the mapped XRT buffers when
#    a run completes: the tree is intact, bricks_card > 0, fallback_error = 0, the counters say
#    xrt-model and the log says the kernel is modelled;
#  - a busy card (xrt.ini noop_completion_delay_us) sends bricks to software (fallback_busy);
#  - runs that outlive card_timeout_ms are abandoned and their bricks redone in software;
#  - unmounting right after writes on a slow card, and with abandoned runs still on the card,
#    loses nothing and the daemon exits cleanly;
#  - a missing xclbin, a wrong kernel, a file that is not an xclbin, too many cus, no
#    XILINX_XRT, a broken XILINX_XRT and xrt_kernel_model=1 off the noop shim fail the mount
#    with the reason;
#  - engine=auto uses software and says why: without XILINX_XRT, without a card, and under the
#    noop shim (never an emulated device).
. "$(dirname "$0")/lib.sh"
need_binaries

PLUGIN="$BUILD_DIR/fpgalz4fs-xrt.so"
MKXCLBIN="$BUILD_DIR/fpgalz4fs-mkxclbin"
if [ ! -f "$PLUGIN" ] || [ ! -x "$MKXCLBIN" ]; then
    skip "the XRT backend was not built (no libxrt-dev when cmake ran): $PLUGIN"
    finish
fi
# XRT's library folder: where the plugin's libxrt_coreutil comes from.
XRT_LIBDIR=$(dirname "$(ldd "$PLUGIN" | awk '/libxrt_coreutil/ { print $3; exit }')")
if [ ! -e "$XRT_LIBDIR/libxrt_noop.so.2" ]; then
    skip "XRT's noop shim (libxrt_noop.so.2) is not next to libxrt_coreutil in $XRT_LIBDIR"
    finish
fi

XRTROOT="$WS/xrt"
mkdir -p "$XRTROOT"
ln -s "$XRT_LIBDIR" "$XRTROOT/lib"
XCLBIN="$WS/lz4.xclbin"
SRC="$WS/src"
unset XILINX_XRT XCL_EMULATION_MODE XRT_INI_PATH

# ------------------------------------------------------------------------------ helpers

# show_stats TEXT: a one-line summary of the engine counters.
show_stats() {
    show_counters "$1" backend bricks_card bricks_sw blocks_card blocks_sw fallback_busy \
        fallback_error fallback_small card_idle_us
}
# noop CMD...: runs CMD with XRT's noop shim in the environment (the daemon inherits it).
noop() { XILINX_XRT="$XRTROOT" XCL_EMULATION_MODE=noop "$@"; }
# badroot CMD...: XILINX_XRT names a folder without XRT's libraries.
badroot() { XILINX_XRT="$WS/empty" XCL_EMULATION_MODE=noop "$@"; }
# offnoop CMD...: XRT set up, but no emulation mode: a real card would be used.
offnoop() { XILINX_XRT="$XRTROOT" "$@"; }
# delayed US CMD...: as noop, with runs completing US microseconds after they start.
delayed() {
    local us=$1; shift
    printf '[Runtime]\nnoop_completion_delay_us=%s\n' "$us" >"$WS/xrt-$us.ini"
    XRT_INI_PATH="$WS/xrt-$us.ini" noop "$@"
}
# copy_tree: the test tree into the mount, compared with the original and with lz4 -d.
copy_tree() {
    cp -a "$SRC" "$MNT/tree" || return 1
    diff -r "$SRC" "$MNT/tree" || return 1
    lz4_check "$BACKING" "$MNT"
}
# verify_after_remount: a software mount of the same store reads the same tree.
verify_after_remount() {
    remount "engine=sw" || return 1
    diff -r "$SRC" "$MNT/tree"
}

# ------------------------------------------------------------------------------ 0. setup

say "== fpgalz4fs-mkxclbin"
check "mkxclbin writes an xclbin" "$MKXCLBIN" --cus 2 "$XCLBIN"
check "the xclbin is small and starts with xclbin2" \
    bash -c "[ \$(stat -c %s '$XCLBIN') -lt 16384 ] && [ \"\$(head -c 7 '$XCLBIN')\" = xclbin2 ]"
check_fails "mkxclbin --cus 0 is refused" "$MKXCLBIN" --cus 0 "$WS/x.xclbin"
check_fails "mkxclbin --kernel a-b is refused" "$MKXCLBIN" --kernel a-b "$WS/x.xclbin"
check_fails "mkxclbin without OUT is refused" "$MKXCLBIN" --cus 2
check_fails "mkxclbin into a missing folder fails" "$MKXCLBIN" "$WS/no/such/dir/x.xclbin"
check "mkxclbin --cus 1" "$MKXCLBIN" --cus 1 "$WS/one.xclbin"
check "mkxclbin --kernel otherKernel" "$MKXCLBIN" --kernel otherKernel "$WS/other.xclbin"

mkdir -p "$SRC/gen"
cp -r "$SRC_DIR/engine" "$SRC_DIR/fs" "$SRC_DIR/kernels" "$SRC/"
gen_file "$SRC/gen/text" $((6 << 20)) text 1
gen_file "$SRC/gen/mixed" $((3 << 20)) mixed 2
gen_file "$SRC/gen/binary" $((2 << 20)) binary 3
gen_file "$SRC/gen/random" $((1 << 20)) random
gen_file "$SRC/gen/zeros" $((1 << 20)) zeros
gen_file "$SRC/gen/small" 700 text 4

# ------------------------------------------------------------------------------ 1. no kernel

say "== engine=xrt under the noop shim: no kernel runs, every output is caught"
use_store plain
if check "mount engine=xrt,xclbin=OUT" noop mount_store "engine=xrt,xclbin=$XCLBIN"; then
    check "the test tree is intact" copy_tree
    S=$(stats "$MNT")
    show_stats "$S"
    check "backend=xrt" expect_counter "$S" backend = xrt
    check "fallback_error > 0 (every sentinel caught)" expect_counter "$S" fallback_error -gt 0
    check "bricks_card = 0 (no kernel ran)" expect_counter "$S" bricks_card -eq 0
    check "unmount" umount_store
    check "a software mount reads the same tree" verify_after_remount
    check "unmount" umount_store
fi

# ------------------------------------------------------------------------------ 2. the model

say "== engine=xrt,xrt_kernel_model=1: the reference kernel over the XRT buffers"
use_store model
if check "mount engine=xrt,xclbin=OUT,xrt_kernel_model=1" \
    noop mount_store "engine=xrt,xclbin=$XCLBIN,xrt_kernel_model=1"; then
    LOGM=$(last_log)
    check "the test tree is intact" copy_tree
    S=$(stats "$MNT")
    show_stats "$S"
    check "backend=xrt-model" expect_counter "$S" backend = xrt-model
    check "bricks_card > 0" expect_counter "$S" bricks_card -gt 0
    check "fallback_error = 0" expect_counter "$S" fallback_error -eq 0
    check "the log says the kernel is modelled" grep -q "MODELLED" "$LOGM"
    check "unmount" umount_store
    check "a software mount reads the same tree" verify_after_remount
    check "unmount" umount_store
fi

# ------------------------------------------------------------------------------ 3. busy card

say "== a busy card: runs complete 300 ms after they start"
use_store busy
if check "mount with noop_completion_delay_us=300000, cus=1, bufsets=1 (4 writers at once)" \
    delayed 300000 mount_store "engine=xrt,xclbin=$XCLBIN,xrt_kernel_model=1,cus=1,bufsets=1"; then
    for i in 1 2 3 4; do cp "$SRC/gen/text" "$MNT/text$i" & done
    wait
    for i in 1 2 3 4; do check "copy $i of a 6 MiB text file is intact" cmp "$SRC/gen/text" "$MNT/text$i"; done
    # two commits must meet within one 300 ms run; copies that ended far apart (a slow or
    # busy host) go again, at most 4 times, under new names
    for k in 1 2 3 4; do
        [ "$(stat_of "$(stats "$MNT")" fallback_busy)" -gt 0 ] && break
        for i in 1 2 3 4; do cp "$SRC/gen/text" "$MNT/again$k.$i" & done
        wait
        check "another round of 4 copies (until one finds the card busy) is intact" \
            bash -c "for i in 1 2 3 4; do cmp '$SRC/gen/text' '$MNT/again$k.'\$i || exit 1; done"
    done
    S=$(stats "$MNT")
    show_stats "$S"
    check "fallback_busy > 0 (bricks went to software while the card was busy)" \
        expect_counter "$S" fallback_busy -gt 0
    check "bricks_card > 0" expect_counter "$S" bricks_card -gt 0
    check "fallback_error = 0 (busy is not a fault)" expect_counter "$S" fallback_error -eq 0
    check "unmount" umount_store
fi

# ------------------------------------------------------------------------------ 4. in flight

say "== runs in flight at unmount, and runs that time out"
use_store flight
if check "mount with runs completing after 1 s" \
    delayed 1000000 mount_store "engine=xrt,xclbin=$XCLBIN,xrt_kernel_model=1"; then
    cp "$SRC/gen/text" "$MNT/a" & p1=$!
    cp "$SRC/gen/mixed" "$MNT/b" & p2=$!
    wait $p1 $p2
    LOGF=$(last_log)
    check "unmount right after the writes (runs in flight) ends the daemon" umount_store
    check "the daemon logged a clean unmount" grep -q "unmounted" "$LOGF"
    if check "mount again with software" mount_at "$BACKING" "$MNT" "engine=sw"; then
        check "a is intact" cmp "$SRC/gen/text" "$MNT/a"
        check "b is intact" cmp "$SRC/gen/mixed" "$MNT/b"
        check "unmount" umount_store
    fi
fi
use_store timeout
if check "mount with card_timeout_ms=200 and runs completing after 1 s" \
    delayed 1000000 mount_store "engine=xrt,xclbin=$XCLBIN,xrt_kernel_model=1,card_timeout_ms=200"; then
    check "a 6 MiB text file is intact" bash -c "cp '$SRC/gen/text' '$MNT/text' && cmp '$SRC/gen/text' '$MNT/text'"
    S=$(stats "$MNT")
    show_stats "$S"
    check "fallback_error > 0 (runs past card_timeout_ms were abandoned)" \
        expect_counter "$S" fallback_error -gt 0
    # a run that timed out keeps its buffer set until the card is done with it: the set is
    # written off, not refilled, and comes back once the run completes (after 1 s)
    check "sets_written_off > 0" expect_counter "$S" sets_written_off -gt 0
    for i in $(seq 1 30); do
        S=$(stats "$MNT")
        [ "$(stat_of "$S" sets_recovered)" -gt 0 ] && break
        sleep 0.1
    done
    show_counters "$S" sets_written_off sets_recovered
    check "sets_recovered > 0 (written-off sets back once their runs completed)" \
        expect_counter "$S" sets_recovered -gt 0
    check "another copy after the sets came back is intact" \
        bash -c "cp '$SRC/gen/mixed' '$MNT/mixed' && cmp '$SRC/gen/mixed' '$MNT/mixed'"
    check "unmount with abandoned runs still on the card" umount_store
fi

# ------------------------------------------------------------------------------ 5. refusals

say "== engine=xrt that cannot open fails the mount with the reason"
use_store refuse
check_show "a missing xclbin" noop mount_refused "engine=xrt,xclbin=$WS/missing.xclbin" \
    'missing.xclbin.*no such file'
check_show "an xclbin with another kernel" noop mount_refused "engine=xrt,xclbin=$WS/other.xclbin" \
    'no compute unit of kernel xilLz4Compress.*otherKernel'
echo "not an xclbin" >"$WS/text.xclbin"
check_show "a file that is not an xclbin" noop mount_refused "engine=xrt,xclbin=$WS/text.xclbin" \
    'not an xclbin'
check_show "no xclbin= option" noop mount_refused "engine=xrt" 'needs xclbin='
check_show "cus=2 with a one-CU xclbin" noop mount_refused "engine=xrt,xclbin=$WS/one.xclbin,cus=2" \
    'cus=2.*1 compute unit'
check_show "bufsets=17" noop mount_refused "engine=xrt,xclbin=$XCLBIN,bufsets=17" 'bufsets'
check_show "no XILINX_XRT" mount_refused "engine=xrt,xclbin=$XCLBIN" 'XILINX_XRT is not set'
check_show "XILINX_XRT without XRT's libraries" \
    badroot mount_refused "engine=xrt,xclbin=$XCLBIN" 'has no .*libxrt_noop'
check_show "xrt_kernel_model=1 off the noop shim" \
    offnoop mount_refused "engine=xrt,xclbin=$XCLBIN,xrt_kernel_model=1" 'only under .*noop'
check_show "xrt_kernel_model=1 without engine=xrt" noop mount_refused "engine=sw,xrt_kernel_model=1" \
    'xrt_kernel_model'

# ------------------------------------------------------------------------------ 6. auto

say "== engine=auto never picks XRT without a card"
use_store auto
# auto_sw ENV... : mounts engine=auto with the environment ENV, expects software and a log
# line that says why XRT was not used, matching $AUTO_WHY.
auto_sw() {
    if ! env "$@" "$DAEMON" "$BACKING" "$MNT" -o "engine=auto,xclbin=$XCLBIN,log=$WS/logs/auto.log"; then
        echo "engine=auto did not mount"
        return 1
    fi
    MOUNTED+=("$MNT")
    local s rc=0
    s=$(stats "$MNT")
    expect_counter "$s" backend = sw || rc=1
    grep "engine=auto" "$WS/logs/auto.log"
    grep -Eq "engine=auto: not xrt: .*$AUTO_WHY" "$WS/logs/auto.log" || { echo "no /$AUTO_WHY/ in the log"; rc=1; }
    grep -q "engine=auto: using software" "$WS/logs/auto.log" || rc=1
    umount_at "$MNT" "$(_lib_daemon_pid_of "$BACKING" "$MNT")" || rc=1
    rm -f "$WS/logs/auto.log"
    return $rc
}
format_store "$BACKING" >/dev/null
AUTO_WHY='XILINX_XRT is not set'
check_show "engine=auto without XILINX_XRT: software, and why" auto_sw -u XILINX_XRT
AUTO_WHY='no Alveo card'
check_show "engine=auto without a card: software, and why" auto_sw XILINX_XRT="$XRTROOT"
AUTO_WHY='emulated device, not a card'
check_show "engine=auto under the noop shim: software, and why" \
    auto_sw XILINX_XRT="$XRTROOT" XCL_EMULATION_MODE=noop

finish
