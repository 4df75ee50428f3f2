# lib.sh: helpers for the integration tests, sourced by every tests/integration/t_*.sh.
#
# Gives each test a private workspace under ${TMPDIR:-/tmp} ($WS, with $BACKING and $MNT),
# mounts and unmounts stores, counts checks, and on EXIT/INT/TERM always unmounts what the
# test mounted, kills the daemons it started and removes the workspace, even after a failure.
# The test ends with `finish`, which prints "N passed, M failed" and exits non-zero on any
# failure.
#
# Environment: BUILD_DIR (default SRC_DIR/build), SRC_DIR (default: the checkout holding
# this file),
# FS_EXTRA_OPTS (extra -o options for every mount, e.g. engine=emu), TEST_TIMEOUT (seconds
# before the watchdog aborts the test's mounts and stops it; default 840), KEEP_WS=1 (keep the
# workspace for inspection).

set -u
set -o pipefail

SRC_DIR=${SRC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD_DIR=${BUILD_DIR:-$SRC_DIR/build}
MKFS="$BUILD_DIR/mkfpgalz4fs"
DAEMON="$BUILD_DIR/fpgalz4fs"
OPCHECK="$BUILD_DIR/opcheck"
FSCK="$BUILD_DIR/fsck.fpgalz4fs"
FSSTAT="$BUILD_DIR/fpgalz4fs-stat"
FS_EXTRA_OPTS=${FS_EXTRA_OPTS:-}
TEST_TIMEOUT=${TEST_TIMEOUT:-840}
T_NAME=$(basename "$0" .sh)

PASS_COUNT=0
FAIL_COUNT=0
FAILED_NAMES=()
LIB_FINISHED=0
DAEMON_PIDS=()          # every daemon pid this test started
BG_PIDS=()              # background helpers started with spawn
MOUNTED=()              # every mountpoint this test mounted
LAST_MOUNT_OPTS=""
LAST_MOUNT_OUT=""       # stdout+stderr of the last mount attempt
DAEMON_PID=""           # pid of the daemon of the current mount
LOG_SEQ=0

# python3 found directly: where python3 is a version manager's shim (pyenv's is a shell
# script that runs a dozen more), each call costs more processes than the test's own work.
# The interpreter the shim picks now is put first in PATH; the same interpreter either way.
if _lib_py=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null) &&
    [ -x "$_lib_py/python3" ]; then
    PATH="$_lib_py:$PATH"
fi
unset _lib_py

WS=$(mktemp -d "${TMPDIR:-/tmp}/fpgalz4fs-$T_NAME.XXXXXX") || { echo "cannot make a workspace" >&2; exit 1; }
chmod 755 "$WS"
BACKING="$WS/backing"
MNT="$WS/mnt"
mkdir -p "$BACKING" "$MNT" "$WS/logs"

say() { printf '%s\n' "$*"; }

# ------------------------------------------------------------------------------- cleanup

# _lib_runs_daemon PID: PID runs the daemon binary. A builtin test of /proc/PID/exe against
# the binary (same file), not a readlink: the scans below run at every mount and unmount, and
# a fork per process of the machine made them most of the tests' own CPU time.
_lib_runs_daemon() { [ "/proc/$1/exe" -ef "$DAEMON" ] 2>/dev/null; }

# _lib_cmdline PID: the process's arguments joined by spaces (no fork).
_lib_cmdline() {
    local -a a
    mapfile -d '' -t a <"/proc/$1/cmdline" 2>/dev/null || return 1
    printf '%s' "${a[*]}"
}

# Daemons started from this workspace: the recorded pids, and any process running the daemon
# binary with a path of this workspace on its command line.
_lib_our_daemons() {
    local p args
    for p in "${DAEMON_PIDS[@]}"; do
        # a recorded pid counts only while it still runs the daemon binary (pids are reused)
        _lib_runs_daemon "$p" && echo "$p"
    done
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        _lib_runs_daemon "$p" || continue
        args=$(_lib_cmdline "$p") || continue
        [[ "$args" == *"$WS/"* ]] && echo "$p"
    done | sort -u
}

# FUSE mounts under this workspace (mountpoints).
_lib_our_mounts() {
    awk -v ws="$WS/" '$2 ~ "^"ws { print $2 }' /proc/self/mounts 2>/dev/null | sed 's/\\040/ /g'
}

# Aborts the FUSE connections of our mounts (unblocks anything stuck on a hung daemon). Reads
# only /proc (a stat of a hung mount would block): the connection directory is named by the
# mount's device number, which mountinfo gives as 0:MINOR for FUSE.
_lib_abort_connections() {
    local c
    for c in $(awk -v ws="$WS/" '$5 ~ "^"ws { for (i = 7; i <= NF; i++) if ($i == "-") break;
                                               if ($(i + 1) ~ /^fuse/) { split($3, d, ":"); print d[2] } }' /proc/self/mountinfo); do
        [ -w "/sys/fs/fuse/connections/$c/abort" ] && echo 1 >"/sys/fs/fuse/connections/$c/abort" 2>/dev/null
    done
}

_lib_cleanup() {
    local m p i
    [ -n "${WATCHDOG_PID:-}" ] && kill "$WATCHDOG_PID" 2>/dev/null
    cd / || true
    for p in "${BG_PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
    done
    for m in "${MOUNTED[@]}" $(_lib_our_mounts); do
        if mountpoint -q "$m" 2>/dev/null; then
            fusermount3 -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || true
        fi
    done
    # give daemons a moment to exit after a clean unmount
    for i in 1 2 3 4 5 6 7 8 9 10; do
        [ -z "$(_lib_our_daemons)" ] && break
        sleep 0.2
    done
    for m in $(_lib_our_mounts); do
        umount -l "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true
    done
    for p in $(_lib_our_daemons); do
        kill -TERM "$p" 2>/dev/null
    done
    sleep 0.2
    for p in $(_lib_our_daemons); do
        kill -KILL "$p" 2>/dev/null
    done
    for m in $(_lib_our_mounts); do
        umount -l "$m" 2>/dev/null || true
    done
    if [ "${KEEP_WS:-0}" = 1 ]; then
        say "workspace kept: $WS"
    elif [ -z "$(_lib_our_mounts)" ]; then
        rm -rf "$WS"
    else
        say "WARNING: mounts remain under $WS; workspace not removed" >&2
    fi
}

_lib_on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    if [ "$LIB_FINISHED" != 1 ]; then
        FAIL_COUNT=$((FAIL_COUNT + 1))
        FAILED_NAMES+=("script ended early (exit status $rc)")
        say "FAIL: $T_NAME ended before finish (exit status $rc)"
        _lib_show_logs
        _lib_cleanup
        _lib_summary
        exit 1
    fi
    _lib_cleanup
    if [ "$FAIL_COUNT" -gt 0 ]; then exit 1; fi
    exit "$rc"
}

_lib_on_signal() {
    say "FAIL: $T_NAME interrupted by signal $1"
    exit 1   # runs the EXIT trap
}

trap _lib_on_exit EXIT
trap '_lib_on_signal INT' INT
trap '_lib_on_signal TERM' TERM

# The watchdog: after TEST_TIMEOUT seconds it aborts our FUSE connections (so that nothing
# stays blocked on a hung daemon) and stops the test, whose trap then cleans up.
_lib_watchdog() {
    local parent=$1 sp
    sleep "$TEST_TIMEOUT" </dev/null >/dev/null 2>&1 &
    sp=$!
    trap 'kill $sp 2>/dev/null; exit 0' TERM
    wait $sp
    echo "WATCHDOG: $T_NAME ran past ${TEST_TIMEOUT}s; aborting its mounts and killing its daemons" >&2
    _lib_abort_connections
    # a killed daemon ends its connection, so nothing stays blocked on it
    for p in $(_lib_our_daemons); do kill -KILL "$p" 2>/dev/null; done
    kill -TERM "$parent" 2>/dev/null
    sleep 20 </dev/null >/dev/null 2>&1 &
    sp=$!
    wait $sp
    _lib_abort_connections
    for p in $(_lib_our_daemons); do kill -KILL "$p" 2>/dev/null; done
}
_lib_watchdog $$ &
WATCHDOG_PID=$!
disown "$WATCHDOG_PID" 2>/dev/null || true

# ------------------------------------------------------------------------------- checks

# check NAME CMD...: runs CMD (a command or a shell function, in this shell); passes when it
# exits 0. On failure prints the name, the command, its status and the tail of its output.
check() {
    local name=$1; shift
    local out="$WS/.check.out" rc
    "$@" >"$out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        PASS_COUNT=$((PASS_COUNT + 1))
        say "ok: $name"
    else
        FAIL_COUNT=$((FAIL_COUNT + 1))
        FAILED_NAMES+=("$name")
        say "FAIL: $name"
        say "    command: $*"
        say "    exit status: $rc"
        if [ -s "$out" ]; then
            say "    output (last 25 lines):"
            tail -n 25 "$out" | sed 's/^/    | /'
        fi
    fi
    rm -f "$out"
    return $rc
}

# check_show NAME CMD...: as check, and also prints the command's output when it passes.
check_show() {
    local name=$1; shift
    local out="$WS/.check_show.out" rc
    "$@" >"$out" 2>&1
    rc=$?
    sed 's/^/    | /' "$out"
    rm -f "$out"
    check "$name" _lib_status $rc
}
_lib_status() { return "$1"; }

# check_fails NAME CMD...: passes when CMD exits non-zero.
check_fails() {
    local name=$1; shift
    check "$name" _lib_negate "$@"
}
_lib_negate() {
    "$@"
    local rc=$?
    if [ $rc -eq 0 ]; then
        echo "expected a failure, but the command succeeded"
        return 1
    fi
    return 0
}

# check_eq NAME EXPECTED ACTUAL
check_eq() {
    check "$1" _lib_eq "$2" "$3"
}
_lib_eq() {
    if [ "$1" != "$2" ]; then
        echo "expected: '$1'"
        echo "actual:   '$2'"
        return 1
    fi
}

# pass NAME / fail_check NAME WHY: record a result computed by the test itself.
pass() { PASS_COUNT=$((PASS_COUNT + 1)); say "ok: $1"; }
fail_check() {
    FAIL_COUNT=$((FAIL_COUNT + 1)); FAILED_NAMES+=("$1")
    say "FAIL: $1"; shift; [ $# -gt 0 ] && say "    $*"
    return 0
}

skip() { say "SKIP: $*"; }

_lib_show_logs() {
    local f
    for f in "$WS"/logs/*.log; do
        [ -s "$f" ] || continue
        say "---- last lines of daemon log $(basename "$f"):"
        tail -n 30 "$f" | sed 's/^/    # /'
    done
}

_lib_summary() {
    if [ "$FAIL_COUNT" -gt 0 ]; then
        say "failed checks in $T_NAME:"
        local n
        for n in "${FAILED_NAMES[@]}"; do say "  - $n"; done
    fi
    say "$PASS_COUNT passed, $FAIL_COUNT failed"
}

# finish: prints the summary and exits (non-zero when a check failed).
finish() {
    LIB_FINISHED=1
    [ "$FAIL_COUNT" -gt 0 ] && _lib_show_logs
    trap - EXIT INT TERM
    _lib_cleanup
    _lib_summary
    if [ "$FAIL_COUNT" -gt 0 ]; then exit 1; fi
    exit 0
}

# spawn CMD...: runs an external command in the background, its output in a file of the
# workspace (never on the test's stdout, so that a leftover cannot hold the test's pipe);
# sets SPAWNED_PID. Whatever is still running at the end is killed.
SPAWN_SEQ=0
spawn() {
    SPAWN_SEQ=$((SPAWN_SEQ + 1))
    "$@" </dev/null >"$WS/logs/bg-$SPAWN_SEQ.out" 2>&1 &
    SPAWNED_PID=$!
    BG_PIDS+=("$SPAWNED_PID")
}

# ------------------------------------------------------------------------------- binaries

# recorder_preload TEST: sets PRELOAD for a daemon run with the power-loss test's recorder
# (tests/plshim.c): a sanitized daemon wants its runtime first, and the recorder carries none;
# under ThreadSanitizer TEST is skipped (the preload cannot go with it).
recorder_preload() {
    PRELOAD=$BUILD_DIR/plshim.so
    if ldd "$DAEMON" | grep -q libasan; then
        PRELOAD="$(ldd "$DAEMON" | awk '/libasan/ { print $3 }'):$PRELOAD"
    elif ldd "$DAEMON" | grep -q libtsan; then
        skip "$1 does not run under ThreadSanitizer (the recorder's preload)"
        finish
    fi
}

need_binaries() {
    local b
    for b in "$MKFS" "$DAEMON" "$@"; do
        if [ ! -x "$b" ]; then
            fail_check "binary present: $b" "not built (BUILD_DIR=$BUILD_DIR)"
            finish
        fi
    done
}

# as_uid UID CMD...: runs CMD as user and group UID with no supplementary groups (tests that
# need root to act as another user of an allow_other mount)
as_uid() {
    local u=$1; shift
    setpriv --reuid="$u" --regid="$u" --clear-groups env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# ------------------------------------------------------------------------------- stores

# format_store [BACKING] [mkfs args...]: mkfpgalz4fs on an empty directory.
format_store() {
    local b=${1:-$BACKING}; shift || true
    mkdir -p "$b"
    "$MKFS" "$@" "$b"
}

_lib_daemon_pid_of() {
    # the daemon serving backing $1 on $2: the daemon binary with those arguments
    local p args
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        _lib_runs_daemon "$p" || continue
        args=$(_lib_cmdline "$p") || continue
        case "$args" in
            *" $1 $2 "*|*" $1 $2") echo "$p"; return 0 ;;
        esac
    done
    return 1
}

# mount_at BACKING MNT [OPTS]: mounts (the daemon backgrounds itself and returns once the mount
# is up), with a log file in the workspace unless OPTS names one. Sets DAEMON_PID and
# LAST_MOUNT_OUT. Returns the daemon's exit status.
mount_at() {
    local b=$1 m=$2 opts=${3:-} o rc
    mkdir -p "$m"
    o=$opts
    case ",$o," in
        *,log=*) ;;
        *) LOG_SEQ=$((LOG_SEQ + 1)); o="${o:+$o,}log=$WS/logs/daemon-$LOG_SEQ.log" ;;
    esac
    [ -n "$FS_EXTRA_OPTS" ] && o="$o,$FS_EXTRA_OPTS"
    LAST_MOUNT_OUT=$("$DAEMON" "$b" "$m" -o "$o" 2>&1)
    rc=$?
    DAEMON_PID=""
    if [ $rc -eq 0 ]; then
        MOUNTED+=("$m")
        DAEMON_PID=$(_lib_daemon_pid_of "$b" "$m") || DAEMON_PID=""
        [ -n "$DAEMON_PID" ] && DAEMON_PIDS+=("$DAEMON_PID")
        if ! mountpoint -q "$m"; then
            echo "daemon exited 0 but $m is not a mountpoint" >&2
            return 1
        fi
    else
        [ -n "$LAST_MOUNT_OUT" ] && printf '%s\n' "$LAST_MOUNT_OUT" >&2
    fi
    return $rc
}

# mount_store [OPTS]: formats $BACKING (with $BLOCK_SIZE when set) if it is not a store yet,
# and mounts it on $MNT.
mount_store() {
    LAST_MOUNT_OPTS=${1:-}
    if [ ! -e "$BACKING/.fpgalz4fs" ]; then
        format_store "$BACKING" ${BLOCK_SIZE:+-b "$BLOCK_SIZE"} >/dev/null || return 1
    fi
    mount_at "$BACKING" "$MNT" "$LAST_MOUNT_OPTS"
}

# umount_at MNT [PID]: fusermount3 -u, then waits (up to 60 s) for the daemon to exit so that
# everything it wrote is in the backing directory. Falls back to umount -l.
umount_at() {
    local m=$1 pid=${2:-} i rc=0
    if mountpoint -q "$m"; then
        if ! fusermount3 -u "$m" 2>"$WS/.umount.err"; then
            sleep 0.5
            if ! fusermount3 -u "$m" 2>>"$WS/.umount.err"; then
                cat "$WS/.umount.err" >&2
                umount -l "$m" 2>/dev/null
                rc=1
            fi
        fi
    fi
    if [ -n "$pid" ]; then
        for ((i = 0; i < 600; i++)); do
            [ -d "/proc/$pid" ] || break
            # a zombie counts as gone
            [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
            sleep 0.1
        done
        if [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
            echo "daemon $pid still running 60 s after unmount" >&2
            rc=1
        fi
    fi
    return $rc
}

umount_store() {
    umount_at "$MNT" "$DAEMON_PID"
}

# remount [OPTS]: unmount and mount again with OPTS (default: the last mount's options).
remount() {
    local o=${1-$LAST_MOUNT_OPTS}
    umount_store || return 1
    LAST_MOUNT_OPTS=$o
    mount_at "$BACKING" "$MNT" "$o"
}

# kill_daemon: kill -9 of the current daemon, then clears the dead mount.
# kill -9 of the daemon, leaving its dead mount in place: calls into it fail (ENOTCONN)
# instead of landing in the bare mountpoint directory, so writers can be stopped first.
kill_daemon_only() {
    local pid=${1:-$DAEMON_PID} i
    [ -n "$pid" ] || return 1
    kill -KILL "$pid" 2>/dev/null
    # gone, or a zombie whose other threads are gone too: only then are its descriptors,
    # and the store lock with them, released (a zombie leader alone says nothing of its
    # threads still exiting)
    for ((i = 0; i < 200; i++)); do
        [ -d "/proc/$pid" ] || break
        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] &&
            [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -le 1 ] && break
        sleep 0.05
    done
    return 0
}

clear_dead_mount() {
    fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
    mountpoint -q "$MNT" && umount -l "$MNT" 2>/dev/null
    return 0
}

kill_daemon() {
    kill_daemon_only "$@" && clear_dead_mount
}

daemon_alive() {
    [ -n "$DAEMON_PID" ] && [ -d "/proc/$DAEMON_PID" ] &&
        [ "$(awk '{print $3}' "/proc/$DAEMON_PID/stat" 2>/dev/null)" != Z ]
}

# ------------------------------------------------------------------------------- content

# lz4 -d -c FILE to stdout; stderr (progress and warnings, one line each) into $WS/.lz4.err.
# Fails when lz4 fails or says that it stopped before the end ("followed by undecodable data").
_lib_lz4d() {
    lz4 -d -c "$1" 2>"$WS/.lz4.raw"
    local rc=$?
    tr '\r' '\n' <"$WS/.lz4.raw" | grep -v '^ *$' | grep -v 'decoded [0-9]* bytes' | grep -v '^\*\*\*' >"$WS/.lz4.err"
    [ $rc -eq 0 ] || return $rc
    ! grep -qi 'undecodable' "$WS/.lz4.err"
}

# lz4_check BACKING MNT: for every regular file under MNT, `lz4 -d -c BACKING/rel` must equal
# MNT/rel. Prints every mismatch (first 20) and returns non-zero when there was one. Each file
# is read through MNT first: after a crash the first open repairs a torn file or finishes an
# interrupted commit (SPEC.md "Crash safety": it decodes "perhaps after the automatic
# repair"), and lz4 -d must not read the backing file while that open is rewriting it.
lz4_check() {
    local b=$1 m=$2 rel bad=0 n=0
    _lib_lz4_batch check "$b" "$m" && return 0
    while IFS= read -r -d '' rel; do
        rel=${rel#./}
        n=$((n + 1))
        cat "$m/$rel" >/dev/null 2>&1
        if ! _lib_lz4d "$b/$rel" | cmp -s - "$m/$rel"; then
            bad=$((bad + 1))
            if [ $bad -le 20 ]; then
                echo "lz4 -d of backing file differs from the mount: $rel (mount $(stat -c %s "$m/$rel") bytes, lz4 -d $(lz4 -q -d -c "$b/$rel" 2>/dev/null | wc -c) bytes) $(head -c 300 "$WS/.lz4.err" | tr '\n' ' ')"
            fi
        fi
    done < <(cd "$m" && find . -type f -print0)
    echo "lz4_check: $n files, $bad differ"
    [ $bad -eq 0 ]
}

# _lib_lz4_batch check BACKING MNT | decodes BACKING: what lz4_check and lz4_decodes ask, with
# one lz4 for many files (tests/lz4batch.py); fails when anything differs or does not decode,
# and the callers' loops then run a file at a time and name the files.
_lib_lz4_batch() {
    python3 "$SRC_DIR/tests/lz4batch.py" "$@" "$WS"
}

# lz4_decodes BACKING: every regular file of BACKING except the superblock decodes with lz4
# to its end.
lz4_decodes() {
    local b=$1 rel bad=0 n=0
    _lib_lz4_batch decodes "$b" && return 0
    while IFS= read -r -d '' rel; do
        rel=${rel#./}
        case "$rel" in .fpgalz4fs*) continue ;; esac
        n=$((n + 1))
        if ! _lib_lz4d "$b/$rel" >/dev/null; then
            bad=$((bad + 1))
            [ $bad -le 20 ] && echo "lz4 -d fails on $rel: $(head -c 300 "$WS/.lz4.err" | tr '\n' ' ')"
        fi
    done < <(cd "$b" && find . -type f -print0)
    echo "lz4_decodes: $n files, $bad fail"
    [ $bad -eq 0 ]
}

# gen_file PATH SIZE KIND [SEED]: deterministic content. KIND: text, binary, zeros, random,
# mixed (text with random and zero stretches).
gen_file() {
    local path=$1 size=$2 kind=$3 seed=${4:-1}
    case "$kind" in
        zeros) head -c "$size" /dev/zero >"$path" ;;
        random) head -c "$size" /dev/urandom >"$path" ;;
        *)
            python3 - "$path" "$size" "$kind" "$seed" <<'PY'
import random, sys
path, size, kind, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = random.Random(seed)
words = ("the of and to in is for on that with this from by at are be log error warn info "
         "debug request response block frame brick card kernel compress stream file data "
         "value index table 0 1 2 42 1000 0x7fff /usr/lib/x86_64-linux-gnu").split()
out = bytearray()
if kind == "text":
    while len(out) < size:
        line = " ".join(r.choices(words, k=r.randint(3, 14)))
        out += ("%d: %s\n" % (len(out), line)).encode()
elif kind == "binary":
    # structured binary: little-endian records, small counters, some repetition
    while len(out) < size:
        rec = bytearray()
        for _ in range(16):
            rec += r.randrange(0, 1 << 16).to_bytes(4, "little")
        rec += bytes(r.randrange(0, 32))
        out += rec * r.randint(1, 4)
elif kind == "mixed":
    while len(out) < size:
        c = r.randrange(3)
        n = r.randint(1, 70000)
        if c == 0:
            out += " ".join(r.choices(words, k=n // 5 + 1)).encode()
        elif c == 1:
            out += r.randbytes(n)
        else:
            out += bytes(n)
else:
    sys.exit("gen_file: unknown kind " + kind)
with open(path, "wb") as f:
    f.write(out[:size])
PY
            ;;
    esac
}

# logs_fill PLAIN FIRST COUNT LINES: logs FIRST..FIRST+COUNT-1 of LINES numbered lines each,
# written into $MNT and into the plain directory PLAIN at once.
logs_fill() {
    local plain=$1 first=$2 count=$3 lines=$4 k
    mkdir -p "$plain" || return 1
    for ((k = first; k < first + count; k++)); do
        seq 1 "$lines" | sed "s/^/log $k line /" | tee "$plain/$k.log" >"$MNT/$k.log" || return 1
    done
}

# logs_round PLAIN ROUND FIRST COUNT: one line appended to each of those logs in turn, each
# `>>` opening and closing its log as a server's logger does (and to the plain copies).
logs_round() {
    local plain=$1 r=$2 first=$3 count=$4 k
    for ((k = first; k < first + count; k++)); do
        echo "round $r to log $k" | tee -a "$plain/$k.log" >>"$MNT/$k.log" || return 1
    done
}

# sha256 of a file, or "ERR" when it cannot be read.
sum_of() {
    sha256sum <"$1" 2>/dev/null | awk '{print $1}' || echo ERR
}

# A listing of a tree with content checksums, modes, owners, sizes and mtimes (ns), sorted.
tree_listing() {
    local d=$1
    (cd "$d" && find . -printf '%p %y %m %U %G %s %T@\n' | sort) || return 1
    (cd "$d" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum) || return 1
}

# ---- helpers of the tests that mount several stores and read the engine counters

# use_store NAME: a fresh backing directory and mountpoint (BACKING, MNT) for one part of a
# test.
use_store() {
    BACKING="$WS/backing-$1"
    MNT="$WS/mnt-$1"
    mkdir -p "$BACKING" "$MNT"
}

# the log file of the last mount made through lib.sh
last_log() { printf '%s\n' "$WS/logs/daemon-$LOG_SEQ.log"; }

# mem_mb's default for PER_CORE MiB per core: 256, or PER_CORE per online core with more than
# 4 cores, at most a sixteenth of the memory (fs/daemon.c dm_default_mem_mb).
default_mem_mb() {
    local cores want cap
    cores=$(getconf _NPROCESSORS_ONLN)
    want=$(( cores > 4 ? $1 * cores : 256 ))
    cap=$(( $(getconf _PHYS_PAGES) * $(getconf PAGESIZE) >> 24 ))
    [ "$want" -gt "$cap" ] && want=$cap
    [ "$want" -lt 256 ] && want=256
    echo "$want"
}
# The mem_mb a mount with options $1 says it uses (its log's mount line).
mem_said() { mount_store "$1" && grep -o "mem_mb [0-9]*" "$(last_log)" | tail -1; umount_store; }

# no_daemon_for BACKING: no daemon of this test still serves that backing directory.
no_daemon_for() {
    local p
    for p in $(_lib_our_daemons); do
        if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$1 "; then
            echo "daemon $p still runs for $1"
            return 1
        fi
    done
    return 0
}

# stats MNT: the counters, one key=value a line.
stats() { getfattr --absolute-names --only-values -n user.fpgalz4fs.stats "$1"; }

# stat_of TEXT KEY: a counter's value (numbers without their zero padding).
stat_of() {
    local v
    v=$(printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -n 1)
    case $v in
        '' | *[!0-9]*) printf '%s\n' "$v" ;;
        *) printf '%s\n' $((10#$v)) ;;
    esac
}

# show_counters TEXT KEY...: a one-line summary of those counters.
show_counters() {
    local text=$1 k line=""
    shift
    for k in "$@"; do
        line="$line $k=$(stat_of "$text" "$k")"
    done
    say "    counters:$line"
}

# expect_counter TEXT KEY OP VALUE (OP: -gt -ge -eq -lt ...; or = for strings)
expect_counter() {
    local v
    v=$(stat_of "$1" "$2")
    if [ "$3" = "=" ]; then
        [ "$v" = "$4" ] && return 0
    else
        [ -n "$v" ] && [ "$v" "$3" "$4" ] 2>/dev/null && return 0
    fi
    echo "counter $2 is '$v', expected $3 $4"
    printf '%s\n' "$1"
    return 1
}

# mount_refused OPTS PATTERN: mounting $BACKING (through mount_store) with OPTS fails, says
# something matching PATTERN, and leaves nothing mounted and no daemon behind.
mount_refused() {
    local opts=$1 pat=$2
    if mount_store "$opts" 2>/dev/null; then
        echo "mount with -o $opts succeeded"
        umount_store
        return 1
    fi
    echo "refused: $LAST_MOUNT_OUT"
    if mountpoint -q "$MNT"; then
        echo "$MNT is mounted after a refused mount"
        return 1
    fi
    if ! printf '%s\n' "$LAST_MOUNT_OUT" | grep -Eiq -- "$pat"; then
        echo "the message does not match /$pat/"
        return 1
    fi
    no_daemon_for "$BACKING"
}
