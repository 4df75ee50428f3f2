#!/bin/bash
# t_package: builds the Debian packages with packaging/build-deb, installs them, and uses the
# installed programs as an administrator would: mkfpgalz4fs from /usr/bin, mount -t
# fuse.fpgalz4fs (through fuse3's mount.fuse3), an /etc/fstab-style line, the man pages, fsck
# and the example mount unit. The packages are purged again at the end, whatever happens, so
# that nothing installed shadows the build tree the other tests use.
#
# A full package build is slow: the test runs only with FPGALZ4FS_PACKAGE_TEST=1 (as root on
# Debian 12; build-deb installs the build dependencies it needs with apt-get).

if [ "${FPGALZ4FS_PACKAGE_TEST:-0}" != 1 ]; then
    echo "SKIP: t_package builds and installs the Debian packages; set FPGALZ4FS_PACKAGE_TEST=1 to run it"
    exit 0
fi

SRC_DIR=${SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
# The programs under test are the installed ones: lib.sh's helpers (daemon lookup, clean-up)
# then follow /usr/bin/fpgalz4fs.
BUILD_DIR=/usr/bin
. "$SRC_DIR/tests/integration/lib.sh"

PKGS=(fpgalz4fs fpgalz4fs-xrt fpgalz4fs-cuda)
PKG_TOUCHED=0             # set once apt-get install has been tried: purge from then on

pkg_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# Purges every package of ours that is on the machine. Runs after lib.sh has unmounted
# everything, so no daemon of ours runs from a file being removed.
pkg_purge() {
    local p present=()
    [ "$PKG_TOUCHED" = 1 ] || return 0
    for p in "${PKGS[@]}"; do
        # anything dpkg holds of it, left-over configuration files included
        case "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" in
            ""|not-installed) ;;
            *) present+=("$p") ;;
        esac
    done
    [ ${#present[@]} -eq 0 ] && return 0
    say "purging ${present[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${present[@]}" >"$WS/.purge.out" 2>&1 ||
        { say "WARNING: apt-get purge ${present[*]} failed:"; cat "$WS/.purge.out"; }
}
eval "$(declare -f _lib_cleanup | sed '1s/_lib_cleanup/_lib_cleanup_mounts/')"
SHADOW=""                 # a stand-in daemon this test put under /usr/local/bin
_lib_cleanup() {
    _lib_cleanup_mounts
    [ -n "$SHADOW" ] && rm -f "$SHADOW"
    pkg_purge
}

if [ "$(id -u)" -ne 0 ]; then
    fail_check "run as root" "installing packages needs root"
    finish
fi
for p in "${PKGS[@]}"; do
    if pkg_installed "$p"; then
        # this test purges what it installs, and must not remove an installation it did not make
        fail_check "package $p not installed before the test" \
            "it is installed already; remove it first (apt-get purge ${PKGS[*]})"
        finish
    fi
done

# ----------------------------------------------------------------------------- build

DEBS="$WS/debs"
check "packaging/build-deb builds the packages (lintian: no errors)" \
    "$SRC_DIR/packaging/build-deb" "$DEBS"
shopt -s nullglob
core_deb=("$DEBS"/fpgalz4fs_*.deb)
xrt_deb=("$DEBS"/fpgalz4fs-xrt_*.deb)
cuda_deb=("$DEBS"/fpgalz4fs-cuda_*.deb)
shopt -u nullglob
if [ ${#core_deb[@]} -ne 1 ]; then
    fail_check "one fpgalz4fs .deb made" "found: $(ls "$DEBS" 2>&1)"
    finish
fi
pass "one fpgalz4fs .deb made: $(basename "${core_deb[0]}")"

# The XRT package is made whenever the source has the plugin (build-deb's rule, which then
# fails a build that cannot make it).
check_eq "one fpgalz4fs-xrt .deb made" 1 "${#xrt_deb[@]}"

# The CUDA package is made exactly where nvcc is installed (build-deb's rule).
if command -v nvcc >/dev/null || [ -n "${CUDACXX:-}" ] || [ -x /usr/local/cuda/bin/nvcc ]; then
    check_eq "nvcc is installed: one fpgalz4fs-cuda .deb made" 1 "${#cuda_deb[@]}"
else
    check_eq "no nvcc: no fpgalz4fs-cuda .deb" 0 "${#cuda_deb[@]}"
fi
if [ ${#cuda_deb[@]} -eq 1 ]; then
    cuda_contents=$(dpkg-deb -c "${cuda_deb[0]}")
    check "the CUDA package holds the plugin and depends on the same fpgalz4fs" bash -c '
        grep -q "/fpgalz4fs/fpgalz4fs-cuda.so$" <<<"$1" &&
        dpkg-deb -f "$2" Depends | grep -qE "fpgalz4fs \(= "' _ "$cuda_contents" "${cuda_deb[0]}"
fi

core_depends=$(dpkg-deb -f "${core_deb[0]}" Depends)
say "    fpgalz4fs Depends: $core_depends"
core_needs() {
    local want
    for want in fuse3 libfuse3-3 liblz4-1 libxxhash0; do
        grep -qE "(^|, )$want( |,|$)" <<<"$core_depends" || { echo "missing $want"; return 1; }
    done
    ! grep -qiE 'xrt|cuda' <<<"$core_depends" || { echo "depends on an accelerator runtime"; return 1; }
}
check "the core package depends on fuse3, libfuse3-3, liblz4-1, libxxhash0 and no accelerator runtime" core_needs
if [ ${#xrt_deb[@]} -eq 1 ]; then
    xrt_depends=$(dpkg-deb -f "${xrt_deb[0]}" Depends)
    say "    fpgalz4fs-xrt Depends: $xrt_depends"
    check "the XRT package depends on libxrt1 and the same fpgalz4fs" \
        grep -qE 'libxrt1.*fpgalz4fs \(= |fpgalz4fs \(= .*libxrt1' <<<"$xrt_depends"
fi

# ----------------------------------------------------------------------------- install

PKG_TOUCHED=1
check "apt-get install of the .deb files" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${core_deb[@]}" "${xrt_deb[@]}" "${cuda_deb[@]}"
for b in fpgalz4fs mkfpgalz4fs fpgalz4fs-bench; do
    check "/usr/bin/$b installed" test -x "/usr/bin/$b"
done
check_show "fpgalz4fs --version from /usr/bin" /usr/bin/fpgalz4fs --version
if [ ${#xrt_deb[@]} -eq 1 ]; then
    multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
    check "the XRT plugin installed in /usr/lib/$multiarch/fpgalz4fs" \
        test -f "/usr/lib/$multiarch/fpgalz4fs/fpgalz4fs-xrt.so"
    check "/usr/bin/fpgalz4fs-mkxclbin installed" test -x /usr/bin/fpgalz4fs-mkxclbin
    check "the installed daemon lists the xrt backend" \
        bash -c '/usr/bin/fpgalz4fs --version | sed -n 2p | grep -qw xrt'
fi

# ----------------------------------------------------------------------------- use

# Which programs must be there: fsck.fpgalz4fs and fpgalz4fs-stat are built by cmake/tools.cmake
# once their sources exist; until then the package cannot carry them.

check_show "mkfpgalz4fs from /usr/bin formats a store" /usr/bin/mkfpgalz4fs -b 64K "$BACKING"

gen_file "$WS/data.txt" $((3 * 1024 * 1024 + 12345)) text 7
mount_type() {
    mount -t fuse.fpgalz4fs "$BACKING" "$MNT" -o "allow_other,engine=sw,log=$WS/logs/mount-t.log" || return 1
    MOUNTED+=("$MNT")
    # the installed daemon, not the build's: unmounts wait for it to let go of the store
    DAEMON_PID=$(DAEMON=/usr/bin/fpgalz4fs _lib_daemon_pid_of "$BACKING" "$MNT") || DAEMON_PID=""
    [ -n "$DAEMON_PID" ] && DAEMON_PIDS+=("$DAEMON_PID")
    mountpoint -q "$MNT"
}
if check "mount -t fuse.fpgalz4fs STORE MNT -o allow_other,engine=sw" mount_type; then
    check_eq "the mount's type is fuse.fpgalz4fs" fuse.fpgalz4fs \
        "$(findmnt -n -o FSTYPE --mountpoint "$MNT")"
    check_eq "the mount's source is the store" "$BACKING" \
        "$(findmnt -n -o SOURCE --mountpoint "$MNT")"
    check "a file copied in" cp "$WS/data.txt" "$MNT/data.txt"
    check "reads back the same through the mount" cmp "$WS/data.txt" "$MNT/data.txt"
    check "the counters are readable" \
        bash -c "getfattr --only-values -n user.fpgalz4fs.stats '$MNT' | grep -q '^backend=sw$'"
    check "umount of the fuse.fpgalz4fs mount" umount_at "$MNT" "$DAEMON_PID"
    check "lz4 -d of the backing file gives the file back" \
        bash -c "lz4 -d -c '$BACKING/data.txt' | cmp - '$WS/data.txt'"
    check "the backing file is smaller than the file" \
        test "$(stat -c %s "$BACKING/data.txt")" -lt "$(stat -c %s "$WS/data.txt")"
fi

# The generic options mount(8) hands to mount.fuse3 from an fstab line: the atime family is
# common there, and the kernel gives FUSE mounts relatime anyway.
mount_generic() {
    mount -t fuse.fpgalz4fs "$BACKING" "$MNT" \
        -o "rw,nodev,nosuid,noexec,async,noatime,nodiratime,relatime,strictatime,lazytime,log=$WS/logs/generic.log" ||
        return 1
    MOUNTED+=("$MNT")
    # the installed daemon, not the build's: unmounts wait for it to let go of the store
    DAEMON_PID=$(DAEMON=/usr/bin/fpgalz4fs _lib_daemon_pid_of "$BACKING" "$MNT") || DAEMON_PID=""
    [ -n "$DAEMON_PID" ] && DAEMON_PIDS+=("$DAEMON_PID")
    mountpoint -q "$MNT" && cmp "$WS/data.txt" "$MNT/data.txt" && umount_at "$MNT" "$DAEMON_PID"
}
check "mount -t with the generic options rw,nodev,nosuid,noexec,async and the atime family" mount_generic

# The same through an fstab line (mount -T reads it instead of /etc/fstab).
printf '%s %s fuse.fpgalz4fs defaults,allow_other,log=%s 0 0\n' \
    "$BACKING" "$MNT" "$WS/logs/fstab.log" >"$WS/fstab"
mount_fstab() {
    mount -T "$WS/fstab" "$MNT" || return 1
    MOUNTED+=("$MNT")
    # the installed daemon, not the build's: unmounts wait for it to let go of the store
    DAEMON_PID=$(DAEMON=/usr/bin/fpgalz4fs _lib_daemon_pid_of "$BACKING" "$MNT") || DAEMON_PID=""
    [ -n "$DAEMON_PID" ] && DAEMON_PIDS+=("$DAEMON_PID")
    mountpoint -q "$MNT"
}
if check "mount of an fstab line 'STORE MNT fuse.fpgalz4fs defaults,allow_other 0 0'" mount_fstab; then
    check "the file is there after the remount" cmp "$WS/data.txt" "$MNT/data.txt"
    check "umount of the fstab mount" umount_at "$MNT" "$DAEMON_PID"
fi

# mount(8) runs its helpers with /usr/local/bin first in the path: another build of the
# daemon there (an earlier `cmake --install`, the demo) must not be the one a mount of the
# package's type runs. A stand-in that fails is put there when none is.
check "the package's mount helper is installed" test -x /usr/sbin/mount.fuse.fpgalz4fs
if [ ! -e /usr/local/bin/fpgalz4fs ]; then
    SHADOW=/usr/local/bin/fpgalz4fs
    printf '#!/bin/sh\necho "a daemon under /usr/local/bin ran" >&2\nexit 1\n' >"$SHADOW"
    chmod +x "$SHADOW"
fi
mount_shadowed() {
    mount -t fuse.fpgalz4fs "$BACKING" "$MNT" -o "log=$WS/logs/shadowed.log" || return 1
    MOUNTED+=("$MNT")
    DAEMON_PID=$(DAEMON=/usr/bin/fpgalz4fs _lib_daemon_pid_of "$BACKING" "$MNT") || DAEMON_PID=""
    [ -n "$DAEMON_PID" ] && DAEMON_PIDS+=("$DAEMON_PID")
    [ "$(readlink "/proc/$DAEMON_PID/exe")" = /usr/bin/fpgalz4fs ] &&
        cmp "$WS/data.txt" "$MNT/data.txt" && umount_at "$MNT" "$DAEMON_PID"
}
check "mount -t fuse.fpgalz4fs runs /usr/bin/fpgalz4fs with another fpgalz4fs in /usr/local/bin" \
    mount_shadowed
[ -n "$SHADOW" ] && rm -f "$SHADOW" && SHADOW=""

# an unmount returns before the daemon has let go of the store (it syncs and marks the
# store clean first): wait for its lock
store_free() {
    local i
    for ((i = 0; i < 200; i++)); do
        flock -n "$BACKING/.fpgalz4fs" true && return 0
        sleep 0.1
    done
    return 1
}
check "the daemon let go of the store after the unmount" store_free
check_show "fsck.fpgalz4fs -n on the clean store exits 0" /usr/bin/fsck.fpgalz4fs -n "$BACKING"
check_show "fpgalz4fs-stat on the store" /usr/bin/fpgalz4fs-stat "$BACKING"
# One flipped byte inside the first block's data (past the marker, the empty seek table of
# creation, the wrapper, the frame header and the size word): fsck -n must say so.
flip_byte() {
    python3 -c 'import sys; f=open(sys.argv[1],"r+b"); f.seek(4096); b=f.read(1); f.seek(4096); f.write(bytes([b[0]^0xff]))' "$1"
}
check "flip one byte in a block of the backing file" flip_byte "$BACKING/data.txt"
fsck_status() { /usr/bin/fsck.fpgalz4fs -n "$BACKING" >"$WS/fsck.out" 2>&1; echo $?; }
check_eq "fsck.fpgalz4fs -n exits 4 (errors left) on the store with the flipped byte" 4 "$(fsck_status)"

# ----------------------------------------------------------------------------- documents

# A dpkg configuration that drops man pages (path-exclude, as in minimal images) makes man
# -w fail whatever the package holds.
if grep -qs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg.d/*; then
    skip "dpkg is configured to leave out /usr/share/man: man pages not checked"
else
    pages=(fpgalz4fs mkfpgalz4fs fpgalz4fs-bench fsck.fpgalz4fs fpgalz4fs-stat fpgalz4fs-mkxclbin)
    for page in "${pages[@]}"; do
        check "man -w $page finds the installed page" man -w "$page"
    done
    check "every command in /usr/bin of the packages has a man page" bash -c '
        for b in $(dpkg -L '"${PKGS[*]}"' 2>/dev/null | grep "^/usr/bin/"); do
            man -w "$(basename "$b")" >/dev/null 2>&1 || { echo "no page for $b"; exit 1; }
        done'
fi
UNIT=/usr/share/doc/fpgalz4fs/examples/srv-data.mount
check "the example mount unit is installed" test -f "$UNIT"
check "the example unit mounts with Type=fuse.fpgalz4fs" grep -qx 'Type=fuse.fpgalz4fs' "$UNIT"
if command -v systemd-analyze >/dev/null; then
    verify_unit() {
        local out
        out=$(systemd-analyze verify "$UNIT" 2>&1)
        [ -z "$out" ] || { echo "$out"; return 1; }
    }
    check "systemd-analyze verify of the example unit is clean" verify_unit
else
    skip "no systemd-analyze: the example unit is not verified"
fi

# ----------------------------------------------------------------------------- purge

for m in $(_lib_our_mounts); do umount_at "$m"; done
pkg_purge
PKG_TOUCHED=0
for p in "${PKGS[@]}"; do
    check "$p is gone after apt-get purge" _lib_negate pkg_installed "$p"
done
check "/usr/bin/fpgalz4fs is gone after the purge" test ! -e /usr/bin/fpgalz4fs

finish
