#!/bin/bash
# t_reserve: a user of an allow_other mount stops at the backing filesystem's reserved blocks,
# as on the filesystem itself, although the daemon runs as root (docs/SECURITY.md, "Reserved
# blocks and quotas"). The store lies on a small ext4 image with a quarter of it reserved.
# A user's incompressible writes end in ENOSPC while the reserve is still free; so do the
# user's new directories and long symlinks, once the unreserved blocks are gone; root,
# through the same mount, still writes into the reserve. The daemon keeps no
# CAP_SYS_RESOURCE in any thread. Where the kernel has quotas (CONFIG_QUOTA), a user's hard
# block limit holds through the mount too (EDQUOT); elsewhere that part is skipped, saying so.
. "$(dirname "$0")/lib.sh"
need_binaries "$FSCK"

if [ "$(id -u)" != 0 ]; then
    skip "t_reserve needs root (loop mounts, acting as another user)"
    finish
fi
if ! command -v mkfs.ext4 >/dev/null; then
    skip "no mkfs.ext4"
    finish
fi
U=65534
SYSPY=/usr/bin/python3
EXT="$WS/ext"
mkdir -p "$EXT"
# ext_mount IMG [OPTS]: the image on $EXT (lib.sh's cleanup unmounts it, like every mount
# under the workspace)
ext_mount() { mount -o "loop${2:+,$2}" "$1" "$EXT"; }
new_image() {
    truncate -s 48M "$1" && mkfs.ext4 -q -F -m 25 -N 1024 "$@" >/dev/null
}
IMG="$WS/ext.img"
if ! new_image "$IMG" || ! ext_mount "$IMG"; then
    skip "cannot make or loop-mount an ext4 image"
    finish
fi
# free bytes: all of them (f_bfree), and those outside the reserve (f_bavail)
free_all() { $SYSPY -c "import os,sys; s=os.statvfs(sys.argv[1]); print(s.f_bfree*s.f_frsize)" "$EXT"; }
free_avail() { $SYSPY -c "import os,sys; s=os.statvfs(sys.argv[1]); print(s.f_bavail*s.f_frsize)" "$EXT"; }
RESERVE=$(($(free_all) - $(free_avail)))
say "reserved: $RESERVE bytes of $(free_all) free"

BACKING="$EXT/store"
check "mount with allow_other" mount_store allow_other || finish
chmod 1777 "$MNT"

# ---------------------------------------------------------------- capabilities
# Every thread's effective, permitted and bounding sets hold only what fs/cred.c keeps:
# CHOWN 0, DAC_OVERRIDE 1, DAC_READ_SEARCH 2, FOWNER 3, FSETID 4, SETUID 7, IPC_LOCK 14,
# SYS_ADMIN 21, MKNOD 27, SETFCAP 31. CAP_SYS_RESOURCE is bit 24.
KEEP=$(( (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 7) | (1 << 14) | (1 << 21) | (1 << 27) | (1 << 31) ))
only_kept() {
    local st set v bad=0
    for st in /proc/"$DAEMON_PID"/task/*/status; do
        for set in CapEff CapPrm CapBnd; do
            v=$(awk -v s="$set:" '$1 == s {print $2}' "$st")
            [ -n "$v" ] && (( (16#$v & ~KEEP) == 0 && !((16#$v >> 24) & 1) )) && continue
            echo "$st: $set ${v:-missing}"; bad=1
        done
    done
    return $bad
}
check "the daemon is known" test -n "$DAEMON_PID"
check "every thread of the daemon keeps only the capabilities it uses" only_kept
check "the log says the capabilities were cut" grep -q "capabilities cut" "$WS"/logs/daemon-*.log

# ---------------------------------------------------------------- a user fills the disk
as_uid $U dd if=/dev/urandom of="$MNT/fill" bs=1M count=64 conv=fsync >"$WS/dd.out" 2>&1
rc=$?
check "the user's 64 MiB on a 48 MiB filesystem fail (exit $rc)" test $rc -ne 0
check "with ENOSPC" grep -q "No space left on device" "$WS/dd.out"
left=$(free_all)
check "the reserve is still free: $left bytes free, reserve $RESERVE" test "$left" -ge $((RESERVE * 3 / 4))
check "the user's file is there and reads" as_uid $U sh -c "test -f '$MNT/fill' && cat '$MNT/fill' >/dev/null"
# What the failed commit cut is free again: the user fills it with ever smaller files (each
# failure must be ENOSPC) until not even one byte fits. Then a directory, which takes a block,
# and a symlink whose target does not fit in the inode, which takes one too, fail.
cat >"$WS/fill.py" <<'PY'
import errno, os, sys
d, n, size = sys.argv[1], 0, 1 << 20
while size >= 1:
    p = os.path.join(d, "f%d" % n)
    try:
        with open(p, "wb") as f:
            f.write(os.urandom(size))
            os.fsync(f.fileno())
        n += 1
    except OSError as e:
        if e.errno != errno.ENOSPC:
            sys.exit("%s: %s" % (p, e))
        if os.path.exists(p):
            os.unlink(p)
        size //= 2
print(n, "files")
PY
check "the user fills what is left outside the reserve, with ENOSPC at the end" \
    as_uid $U $SYSPY "$WS/fill.py" "$MNT"
# enospc CMD...: CMD fails, saying ENOSPC
enospc() { ! "$@" 2>"$WS/err" && grep -q "No space left on device" "$WS/err" || { cat "$WS/err"; return 1; }; }
check "the user's mkdir stops at the reserve" enospc as_uid $U mkdir "$MNT/udir"
check "the user's long symlink stops at the reserve" \
    enospc as_uid $U ln -s "/$(printf 'x%.0s' $(seq 1 200))" "$MNT/ulink"
check "the reserve is still free after those" test "$(free_all)" -ge $((RESERVE * 3 / 4))

# ---------------------------------------------------------------- root may use it
head -c $((4 << 20)) /dev/urandom >"$WS/rootdata"
check "root writes 4 MiB into the reserve through the mount" \
    dd if="$WS/rootdata" of="$MNT/rootfile" bs=1M conv=fsync status=none
check "root's file reads back" cmp "$WS/rootdata" "$MNT/rootfile"
check "root's mkdir uses the reserve" mkdir "$MNT/rootdir"
check "the user can still delete, and then write again" \
    as_uid $U sh -c "rm -f '$MNT'/f* && echo again >'$MNT/small' && test \"\$(cat '$MNT/small')\" = again"
check "unmount" umount_store
check "fsck finds the store clean" "$FSCK" -n "$BACKING"
umount "$EXT" || umount -l "$EXT"

# ---------------------------------------------------------------- quotas
QIMG="$WS/quota.img"
if ! command -v setquota >/dev/null; then
    skip "quotas: no setquota (Debian's quota package)"
elif ! new_image "$QIMG" -O quota -E quotatype=usrquota || ! ext_mount "$QIMG" usrquota; then
    skip "quotas: this kernel cannot mount ext4 with quotas (CONFIG_QUOTA)"
else
    BACKING="$EXT/store"
    check "quota: mount with allow_other" mount_store allow_other || finish
    chmod 1777 "$MNT"
    check "quota: a 4 MiB hard limit for the user" setquota -u $U 0 4096 0 0 "$EXT"
    as_uid $U dd if=/dev/urandom of="$MNT/q" bs=1M count=8 conv=fsync >"$WS/q.out" 2>&1
    rc=$?
    check "quota: the user's 8 MiB fail (exit $rc)" test $rc -ne 0
    check "quota: with EDQUOT" grep -q "Disk quota exceeded" "$WS/q.out"
    check "quota: root is not limited" dd if="$WS/rootdata" of="$MNT/rq" bs=1M conv=fsync status=none
    check "quota: unmount" umount_store
fi
finish
