#!/bin/bash
# t_cuda: the CUDA backend through a real mount, on a host with an NVIDIA GPU.
#  - fpgalz4fs --version lists cuda when the plugin loads;
#  - engine=auto picks cuda when a GPU is present (the log says which GPU);
#  - mem_mb's default with engine=cuda is 128 per core (more than 4 cores), as given otherwise;
#  - with engine=cuda, a mixed copy (text, binary records, random bytes, zeros; ~100 MiB)
#    reads back identical after a remount, every backing file decodes with the stock lz4,
#    the counters say backend=cuda and the card compressed blocks;
#  - engine=cuda,device=7 (no such GPU) fails the mount with the reason.
# Skips, saying why, where the plugin is not built or no GPU is usable (as on CI).
. "$(dirname "$0")/lib.sh"
need_binaries

stats() { getfattr --absolute-names --only-values -n user.fpgalz4fs.stats "$1"; }
stat_of() { printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -n 1 | sed 's/^0*\([0-9]\)/\1/'; }

if ! "$DAEMON" --version | grep -qw cuda; then
    skip "the cuda backend is not built or does not load: $("$DAEMON" --version | tail -n 1)"
    finish
fi
pass "fpgalz4fs --version lists cuda"

# engine=auto names the GPU it picked, or says why not: then there is nothing to test here.
mount_store "engine=auto" || { fail_check "engine=auto mounts" "$LAST_MOUNT_OUT"; finish; }
why=$(grep -h "engine=auto" "$WS/logs/daemon-$LOG_SEQ.log")
umount_store
if ! printf '%s\n' "$why" | grep -q "using cuda"; then
    skip "no usable CUDA GPU: $(printf '%s\n' "$why" | grep 'not cuda' | head -n 1)"
    finish
fi
say "$why"
pass "engine=auto picks cuda on a host with a GPU"

say "generating data"
SRC="$WS/src"
mkdir -p "$SRC"
gen_file "$SRC/text" $((48 << 20)) text 3
gen_file "$SRC/bin" $((24 << 20)) binary 4
head -c $((8 << 20)) /dev/urandom >"$SRC/rand"
head -c $((16 << 20)) /dev/zero >"$SRC/zero"
cat "$SRC/text" "$SRC/rand" "$SRC/bin" | head -c $((50 << 20)) >"$SRC/mixed"
gen_file "$SRC/small" 3000 text 5

copy_in() { cp "$SRC"/* "$MNT"/ && sync; }
same_tree() {
    local f
    for f in "$SRC"/*; do
        cmp "$f" "$MNT/$(basename "$f")" || return 1
    done
}
card_used() {
    local s
    s=$(stats "$MNT") || return 1
    printf '%s\n' "$s" | grep -E '^(backend|blocks_card|blocks_sw|fallback_error)='
    [ "$(stat_of "$s" backend)" = cuda ] && [ "$(stat_of "$s" blocks_card)" -gt 0 ]
}

# mem_mb's default with a GPU: 128 per online core with more than 4 cores (the card's
# buffer sets hold bricks besides the writers'), at most a sixteenth of the memory
check_eq "mem_mb by default with engine=cuda on $(getconf _NPROCESSORS_ONLN) cores" \
    "mem_mb $(default_mem_mb 128)" "$(mem_said engine=cuda)"
check_eq "mem_mb as given with engine=cuda" "mem_mb 512" "$(mem_said engine=cuda,mem_mb=512)"

check "mount with engine=cuda" mount_store "engine=cuda"
check "a ~150 MiB mixed copy goes in" copy_in
check_show "the GPU compressed blocks (backend=cuda)" card_used
check "the copy reads back identical" same_tree
check "unmount" umount_store
check "remount (software)" mount_store "engine=sw"
check "after a remount the copy reads back identical" same_tree
check_show "every backing file decodes with the stock lz4" lz4_check "$BACKING" "$MNT"
check "unmount" umount_store

refused() {
    if mount_at "$BACKING" "$MNT" "engine=cuda,device=7" 2>/dev/null; then
        umount_store
        return 1
    fi
    printf '%s\n' "$LAST_MOUNT_OUT"
    printf '%s\n' "$LAST_MOUNT_OUT" | grep -q "device=7"
}
check_show "engine=cuda,device=7 fails the mount with the reason" refused

finish
