#!/usr/bin/env bash
# Installs what fpgalz4fs needs to build, run and test, from Debian 12 packages.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libfuse3-dev fuse3 liblz4-dev lz4 libxxhash-dev xxhash
      libcmocka-dev attr python3 util-linux psmisc xz-utils libcap-dev libcap2-bin)
# the benchmark driver's rivals and its plot: random I/O (fio), gnuplot without X; the
# workloads' SQLite transactions (the sqlite3 shell)
pkgs+=(fio gnuplot-nox sqlite3)
# t_reserve: ext4 images (e2fsprogs) and, on kernels with quotas, a user's limit (setquota)
pkgs+=(e2fsprogs quota)
# t_growth counts the daemon's syncs (strace); t_access sets ACLs (setfacl, getfacl)
pkgs+=(strace acl)
# the man pages are checked with man -l and man -w (packaging/, t_package)
pkgs+=(man-db)
# the XRT backend plugin and its tests under XRT's noop shim (libxrt-dev brings libxrt1 with
# libxrt_noop.so.2; xbutil for the docs' card checks)
pkgs+=(libxrt-dev libxrt-utils)
# the libFuzzer targets (tests/fuzz/): clang and its fuzzer runtime (libclang_rt.fuzzer)
pkgs+=(clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi
# fuse3's mount.fuse3 and allow_other for non-root users read this file.
if [ -f /etc/fuse.conf ] && ! grep -q '^user_allow_other' /etc/fuse.conf; then
    echo user_allow_other >> /etc/fuse.conf
fi
