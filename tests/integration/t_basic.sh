#!/bin/bash
# t_basic: copy trees of files of edge sizes and kinds in and out of a mount, with cp -a,
# cat and diff -r; every backing file decodes with the stock lz4 to the logical content; all
# of it survives an unmount and a mount. Block sizes 64K and 1M. The daemon raises its soft
# limit of open files to the hard limit. Also the Linux source tree when
# /usr/src/linux-source-6.1.tar.xz is installed: its fs/, include/ and kernel/ (about 8,500
# files, the short form), or all of it with FPGALZ4FS_LINUX_TREE=full (78,579 files, about
# two minutes more); FPGALZ4FS_LINUX_TREE=0 leaves it out.
. "$(dirname "$0")/lib.sh"
need_binaries

SIZES="0 1 4095 65535 65536 65537 1048575 1048576 1048577 8388609"
KINDS="text binary zeros random"

# ---- the source tree, made once, outside any mount
SRC="$WS/src"
mkdir -p "$SRC/files" "$SRC/empty-dir" "$SRC/nested/a/b/c/empty" "$SRC/links" "$SRC/odd names"
seed=1
for k in $KINDS; do
    for s in $SIZES; do
        gen_file "$SRC/files/$k-$s" "$s" "$k" "$seed"
        seed=$((seed + 1))
    done
done
gen_file "$SRC/files/mixed-3M" 3145731 mixed 99
gen_file "$SRC/nested/a/b/c/deep.txt" 70000 text 7
gen_file "$SRC/odd names/with space & quote'.txt" 5000 text 8
printf 'no newline at end' >"$SRC/odd names/nonl"
ln -s ../files/text-65536 "$SRC/links/rel-link"
ln -s /etc/hostname "$SRC/links/abs-link"
ln -s does-not-exist "$SRC/links/dangling"
ln -s ../nested "$SRC/links/dir-link"
chmod 600 "$SRC/files/text-1"
chmod 755 "$SRC/files/binary-4095"
chmod 700 "$SRC/nested/a"
touch -d '2003-04-05 06:07:08.123456789' "$SRC/files/random-65537"
touch -h -d '2004-01-01 00:00:00' "$SRC/links/rel-link"
touch -d '2005-05-05 05:05:05' "$SRC/empty-dir"

# A listing of names, types, modes, sizes of non-directories, mtimes and link targets.
meta_listing() {
    (cd "$1" && find . -printf '%p|%y|%m|%T@|%l|' -a \( -type d -printf '-\n' -o -printf '%s\n' \) | sort)
}

same_meta() {
    diff <(meta_listing "$1") <(meta_listing "$2")
}

# cat every regular file of tree $2 (the mount) and compare with tree $1
cat_all_same() {
    local rel bad=0
    while IFS= read -r -d '' rel; do
        if ! cat "$2/$rel" | cmp -s - "$1/$rel"; then
            echo "cat differs: $rel"
            bad=1
        fi
    done < <(cd "$1" && find . -type f -print0)
    return $bad
}

# stored size (format version 2, FORMAT.md part II): the space the backing file uses
# (st_blocks) is near what `lz4 -1` makes of the same file at the same block size: 2% plus at
# most one 4 KiB page per block (each block has its own slot, whose partly used pages are the
# cost of rewriting a block in place) plus 64 KiB; its apparent size (what ls, cp and rsync
# see) is at most 1.01 x the logical size + 2 blocks. A sequential copy leaves no journal.
stored_near_lz4() {
    local b=$1 rel=$2 bs=$3 opt ref used app lim alim size nblk bsb
    case $bs in 64K) opt=-B4 ;; 256K) opt=-B5 ;; 1M) opt=-B6 ;; 4M) opt=-B7 ;; esac
    ref=$(lz4 -q -1 $opt -BI -c "$SRC/$rel" | wc -c)
    used=$(( $(stat -c %b "$b/$rel") * $(stat -c %B "$b/$rel") ))
    app=$(stat -c %s "$b/$rel")
    size=$(stat -c %s "$SRC/$rel")
    bsb=$(numfmt --from=iec "$bs")
    nblk=$(( (size + bsb - 1) / bsb ))
    lim=$(( ref + ref / 50 + nblk * 4096 + 65536 ))
    alim=$(( size + size / 100 + 2 * bsb ))
    echo "$rel: lz4 -1 $ref bytes; backing uses $used bytes (limit $lim), apparent size $app (limit $alim)"
    [ "$used" -le "$lim" ] && [ "$app" -le "$alim" ]
}

for bs in 64K 1M; do
    BACKING="$WS/backing-$bs"
    MNT="$WS/mnt-$bs"
    BLOCK_SIZE=$bs
    mkdir -p "$BACKING" "$MNT"
    if ! check "[$bs] format and mount" mount_store; then
        continue
    fi
    check "[$bs] cp -a into the mount" cp -a "$SRC" "$MNT/tree"
    check "[$bs] diff -r after cp -a" diff -r --no-dereference "$SRC" "$MNT/tree"
    check "[$bs] names, modes, sizes, mtimes, link targets kept" same_meta "$SRC" "$MNT/tree"
    check "[$bs] cat of every file" cat_all_same "$SRC" "$MNT/tree"
    check "[$bs] readlink" test "$(readlink "$MNT/tree/links/rel-link")" = ../files/text-65536
    check "[$bs] cat through a symlink" cmp "$MNT/tree/links/rel-link" "$SRC/files/text-65536"
    check "[$bs] lz4 -d of every backing file equals the mount" lz4_check "$BACKING/tree" "$MNT/tree"
    for f in text-8388609 binary-8388609 mixed-3M zeros-8388609 text-1048577; do
        check "[$bs] $f: space used near lz4 -1, apparent size near the logical size" stored_near_lz4 "$BACKING/tree" "files/$f" $bs
    done
    check "[$bs] backing keeps symlinks as symlinks" test -L "$BACKING/tree/links/dangling"
    check "[$bs] backing keeps empty dirs" test -d "$BACKING/tree/nested/a/b/c/empty"
    check "[$bs] superblock hidden from the mount" test ! -e "$MNT/.fpgalz4fs"
    check "[$bs] superblock not listed" bash -c "! ls -A '$MNT' | grep -qx .fpgalz4fs"

    # copy out again with cp -a and compare
    check "[$bs] cp -a out of the mount" cp -a "$MNT/tree" "$WS/out-$bs"
    check "[$bs] diff -r of the copy out" diff -r --no-dereference "$SRC" "$WS/out-$bs"
    check "[$bs] metadata of the copy out" same_meta "$SRC" "$WS/out-$bs"
    rm -rf "$WS/out-$bs"

    # a second copy inside the mount (read and write through the mount at once)
    check "[$bs] cp -a inside the mount" cp -a "$MNT/tree/files" "$MNT/files2"
    check "[$bs] diff -r of the copy inside" diff -r "$SRC/files" "$MNT/files2"

    # overwrite in place with cp (O_TRUNC of an existing file), shrinking and growing
    check "[$bs] cp over an existing larger file" cp "$SRC/files/text-4095" "$MNT/files2/text-8388609"
    check "[$bs] cp over an existing smaller file" cp "$SRC/files/random-1048577" "$MNT/files2/zeros-1"
    check "[$bs] shrunk content" cmp "$SRC/files/text-4095" "$MNT/files2/text-8388609"
    check "[$bs] grown content" cmp "$SRC/files/random-1048577" "$MNT/files2/zeros-1"

    check "[$bs] unmount" umount_store
    check "[$bs] lz4 -d of every backing file after unmount" lz4_decodes "$BACKING"
    if ! check "[$bs] mount again" mount_store; then
        continue
    fi
    check "[$bs] diff -r after remount" diff -r --no-dereference "$SRC" "$MNT/tree"
    check "[$bs] metadata after remount" same_meta "$SRC" "$MNT/tree"
    check "[$bs] overwritten files after remount" cmp "$SRC/files/text-4095" "$MNT/files2/text-8388609"
    check "[$bs] lz4 check after remount" lz4_check "$BACKING" "$MNT"
    check "[$bs] rm -r in the mount" rm -rf "$MNT/files2"
    check "[$bs] rm -r removed the backing files" test ! -e "$BACKING/files2"
    check "[$bs] unmount at the end" umount_store
done

# ---- the descriptor limit: every open file of the mount holds a backing descriptor, so the
# daemon raises its soft RLIMIT_NOFILE to the hard limit (a soft limit below it is set here
# for the daemon to inherit, as a login shell or a service manager would give it)
nofile_limits() { awk '/^Max open files/ { print $4, $5 }' "/proc/$1/limits"; }
BACKING="$WS/backing-nofile"
MNT="$WS/mnt-nofile"
BLOCK_SIZE=1M
mkdir -p "$BACKING" "$MNT"
hard=$(ulimit -Hn)
soft=$(ulimit -Sn)
low=256
[ "$hard" != unlimited ] && [ "$hard" -le "$low" ] && low=$((hard / 2))
ulimit -Sn "$low"
check "[nofile] mount with a soft limit of $low (hard $hard)" mount_store
mounted=$?
ulimit -Sn "$soft"
if [ $mounted = 0 ]; then
    lim=$(nofile_limits "$DAEMON_PID")
    say "    daemon's Max open files (soft hard): $lim"
    check "[nofile] the daemon's soft limit is its hard limit" test -n "$lim" -a "${lim% *}" = "${lim#* }"
    check "[nofile] the log names the limit" grep -q "open files: limit" "$(last_log)"
    check "[nofile] unmount" umount_store
fi

# ---- the Linux source tree
TARBALL=/usr/src/linux-source-6.1.tar.xz
if [ "${FPGALZ4FS_LINUX_TREE:-1}" = 0 ]; then
    skip "Linux source tree: FPGALZ4FS_LINUX_TREE=0 (the sanitizer pass leaves it to the normal one)"
elif [ -r "$TARBALL" ]; then
    BACKING="$WS/backing-linux"
    MNT="$WS/mnt-linux"
    BLOCK_SIZE=1M
    mkdir -p "$BACKING" "$MNT" "$WS/linux"
    top=$(tar -tJf "$TARBALL" | head -n1 | cut -d/ -f1)
    parts=("$top")
    [ "${FPGALZ4FS_LINUX_TREE:-1}" = full ] || parts=("$top/fs" "$top/include" "$top/kernel")
    if check "[linux] extract the tarball (${parts[*]})" tar -xJf "$TARBALL" -C "$WS/linux" "${parts[@]}"; then
        if check "[linux] mount" mount_store; then
            # compared after the remount below: read from the backing files, not the page cache
            check "[linux] cp -a of the source tree ($(find "$WS/linux" -type f | wc -l) files)" \
                cp -a "$WS/linux" "$MNT/linux"
            check "[linux] lz4 check of kernel/" lz4_check "$BACKING/linux/$top/kernel" "$MNT/linux/$top/kernel"
            check "[linux] unmount" umount_store
            if check "[linux] mount again" mount_store; then
                check "[linux] diff -r after remount" diff -r --no-dereference "$WS/linux" "$MNT/linux"
                check "[linux] unmount at the end" umount_store
            fi
        fi
    fi
    rm -rf "$WS/linux"
else
    skip "Linux source tree: $TARBALL is not installed (apt-get install linux-source-6.1)"
fi

finish
