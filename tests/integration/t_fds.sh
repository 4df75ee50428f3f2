#!/bin/bash
# t_fds: users holding files open cannot use up the daemon's descriptors (docs/SECURITY.md,
# "Open files"). Several processes of one user hold more files open through an allow_other
# mount than the daemon's open-file limit allows descriptors; while they do, another user's
# stat, read and create still work, every held file still reads and writes what it should
# (its idle descriptor was closed and is reopened by handle), and a held file whose name is
# removed (unlink, rename over it) stays readable and writable through its handle. The
# daemon's counters show descriptors closed and reopened, and never more held than its bound.
# The same user also holds more directories open than the daemon keeps streams for: each
# still lists its entries (its stream closed, then opened again at its position), and the
# streams held stay within that bound. That bound is for listings with handles: the mount
# uses -o dir_handles, as a kernel that cannot skip OPENDIR does; by default a listing holds
# no stream between requests (t_dirs).
#
# FDS_FILES files in FDS_PROCS processes (default 21000 in 3: more than the 20,000 a daemon
# could hold before); FDS_DAEMON_NOFILE, when set, is the daemon's open-file limit (hard and
# soft), to try small bounds quickly.
. "$(dirname "$0")/lib.sh"
need_binaries

if [ "$(id -u)" != 0 ]; then
    skip "t_fds needs root (to act as other users)"
    finish
fi
FILES=${FDS_FILES:-21000}
PROCS=${FDS_PROCS:-3}
HOLDER=65534                           # holds the files open
OTHER=65533                            # must still be served meanwhile
SYSPY=/usr/bin/python3

mkdir -p "$BACKING"
format_store "$BACKING" -b 64K >/dev/null
mount_daemon() {
    if [ -n "${FDS_DAEMON_NOFILE:-}" ]; then
        (ulimit -Sn "$FDS_DAEMON_NOFILE" && ulimit -Hn "$FDS_DAEMON_NOFILE" &&
            mount_store allow_other,default_permissions,dir_handles) || return 1
        LOG_SEQ=$((LOG_SEQ + 1))       # the subshell's mount named the next log
        DAEMON_PID=$(_lib_daemon_pid_of "$BACKING" "$MNT") && DAEMON_PIDS+=("$DAEMON_PID")
        MOUNTED+=("$MNT")
    else
        mount_store allow_other,default_permissions,dir_handles
    fi
}
check "mount with allow_other" mount_daemon || finish
bound=$(sed -n 's/.*open files keep at most \([0-9]*\) backing descriptors.*/\1/p' "$(last_log)" | tail -1)
dbound=$(sed -n 's/.*backing descriptors, open directories \([0-9]*\).*/\1/p' "$(last_log)" | tail -1)
limit=$(awk '/^Max open files/ { print $5 }' "/proc/$DAEMON_PID/limits")
say "daemon: open-file limit $limit, at most $bound descriptors for open files"
check "the daemon states its bound below its limit" test -n "$bound" -a "$bound" -lt "$limit"
# more directories than the descriptors the open files leave: a daemon whose directory
# streams were unbounded runs out
DIRS=$((limit - bound + 500))
check "$FILES files are more than the daemon's limit ($limit)" test "$FILES" -gt "$limit"
check "the daemon states its bound on directory streams" test -n "$dbound"
chmod 1777 "$MNT"
mkdir -m 755 "$MNT/shared"
echo "root's shared file" >"$MNT/shared/readme"
chmod 644 "$MNT/shared/readme"
mkdir -m 1777 "$MNT/other"

# A holder creates its files, opens every one, says so, then waits for go: it reads each
# back, rewrites one byte in every seventh through its handle, reads those again, and
# reports what differs.
cat >"$WS/holder.py" <<'EOF'
import os, sys, time
d, n, ready, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.makedirs(d)
def body(i):
    return (b"%s file %d " % (d.encode(), i)) * (1 + i % 300)
fds = []
for i in range(n):
    p = os.path.join(d, "f%d" % i)
    with open(p, "wb") as f:
        f.write(body(i))
    fds.append(os.open(p, os.O_RDWR))
open(ready, "w").write("%d\n" % len(fds))
while not os.path.exists(go):
    time.sleep(0.05)
bad = []
for i, fd in enumerate(fds):
    want = bytearray(body(i))
    if os.pread(fd, len(want) + 1, 0) != want:
        bad.append("f%d read" % i)
    if i % 7 == 0:
        os.pwrite(fd, b"#", 3)
        want[3:4] = b"#"
        if os.pread(fd, len(want) + 1, 0) != want:
            bad.append("f%d after a write" % i)
for fd in fds:
    os.close(fd)
print("bad:", len(bad), bad[:10])
sys.exit(1 if bad else 0)
EOF
# A directory holder makes DIRS directories of two files each, opens every one, says so, then
# waits for go and lists each through its handle.
cat >"$WS/dirholder.py" <<'EOF'
import os, sys, time
d, n, ready, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.makedirs(d)
fds = []
for i in range(n):
    p = os.path.join(d, "d%d" % i)
    os.mkdir(p)
    for k in ("a", "b%d" % i):
        open(os.path.join(p, k), "w").close()
    fds.append(os.open(p, os.O_RDONLY | os.O_DIRECTORY))
open(ready, "w").write("%d\n" % len(fds))
while not os.path.exists(go):
    time.sleep(0.05)
bad = [i for i, fd in enumerate(fds) if sorted(os.listdir(fd)) != ["a", "b%d" % i]]
for fd in fds:
    os.close(fd)
print("bad:", len(bad), bad[:10])
sys.exit(1 if bad else 0)
EOF
per=$(( (FILES + PROCS - 1) / PROCS ))
chmod 777 "$WS"                        # the holders say they are ready there
pids=()
for p in $(seq 1 "$PROCS"); do
    spawn as_uid $HOLDER $SYSPY "$WS/holder.py" "$MNT/h$p" "$per" "$WS/ready.$p" "$WS/go"
    pids+=("$SPAWNED_PID")
done
spawn as_uid $HOLDER $SYSPY "$WS/dirholder.py" "$MNT/dirs" "$DIRS" "$WS/dready" "$WS/go"
dpid=$SPAWNED_PID
pids+=("$dpid")
for ((i = 0; i < 3000; i++)); do
    n=$(ls "$WS"/ready.* "$WS"/dready 2>/dev/null | wc -l)
    [ "$n" -eq "$((PROCS + 1))" ] && break
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || break
    sleep 0.2
done
held=$(cat "$WS"/ready.* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
check "$PROCS processes hold $held files open (more than the limit $limit)" test "$held" -gt "$limit"
check_eq "and one holds $DIRS directories open (more than the $dbound streams kept, and than the $((limit - bound)) descriptors the files leave)" "$DIRS" "$(cat "$WS/dready" 2>/dev/null)"
sed "s/^/    | /" "$WS"/logs/bg-*.out 2>/dev/null | head -20

# While they are held: the other user is served.
check "other user: stat" as_uid $OTHER stat "$MNT/shared/readme"
check_eq "other user: read" "root's shared file" "$(as_uid $OTHER cat "$MNT/shared/readme")"
check "other user: create" as_uid $OTHER sh -c "echo mine >'$MNT/other/new' && test \"\$(cat '$MNT/other/new')\" = mine"
check "other user: list a directory of held files" as_uid $OTHER ls "$MNT/h1"
stats=$(getfattr --only-values -n user.fpgalz4fs.stats "$MNT" 2>/dev/null)
stat_of() { printf '%s\n' "$stats" | sed -n "s/^$1=0*\([0-9]\)/\1/p"; }
say "    | fds_open $(stat_of fds_open), fd_closes $(stat_of fd_closes), fd_reopens $(stat_of fd_reopens)"
check "descriptors held stay within the bound" test "$(stat_of fds_open)" -le "$bound"
check "idle descriptors were closed" test "$(stat_of fd_closes)" -gt 0
say "    | dir_streams $(stat_of dir_streams)"
check "directory streams held stay within their bound" test "$(stat_of dir_streams)" -le "$dbound"

# A held file loses its name (unlink; rename over it): its handle still reads and writes.
cat >"$WS/orphan.py" <<'EOF'
import os, sys
d = sys.argv[1]
bad = []
for how in ("unlink", "rename"):
    names = [os.path.join(d, "%s%d" % (how, i)) for i in range(40)]
    fds = []
    for i, p in enumerate(names):
        with open(p, "wb") as f:
            f.write(b"%s %d " % (how.encode(), i) * 50)
        fds.append(os.open(p, os.O_RDWR))
    # touch some of the held files of the holders, so these go cold
    for i, p in enumerate(names):
        if how == "unlink":
            os.unlink(p)
        else:
            open(p + ".new", "wb").write(b"replacement")
            os.rename(p + ".new", p)
    for i, fd in enumerate(fds):
        os.pwrite(fd, b"!", 0)
        want = b"!" + (b"%s %d " % (how.encode(), i) * 50)[1:]
        if os.pread(fd, len(want) + 1, 0) != want:
            bad.append("%s%d" % (how, i))
        os.close(fd)
print("bad:", bad)
sys.exit(1 if bad else 0)
EOF
check "files that lost their names stay readable and writable through their handles" \
    as_uid $OTHER $SYSPY "$WS/orphan.py" "$MNT/other"

touch "$WS/go"
for p in "${!pids[@]}"; do
    [ "${pids[$p]}" = "$dpid" ] && continue
    check "holder $((p + 1)): every held file reads and writes what it should" wait "${pids[$p]}"
done
check "every held directory lists its entries through its handle" wait "$dpid"
stats=$(getfattr --only-values -n user.fpgalz4fs.stats "$MNT" 2>/dev/null)
say "    | fds_open $(stat_of fds_open), fd_closes $(stat_of fd_closes), fd_reopens $(stat_of fd_reopens)"
check "closed descriptors were reopened when used" test "$(stat_of fd_reopens)" -gt 0
say "    | dir_streams $(stat_of dir_streams), dir_reopens $(stat_of dir_reopens)"
check "closed directory streams were opened again to list" test "$(stat_of dir_reopens)" -gt 0
check_eq "no file failed to reopen" 0 "$(grep -c 'cannot reopen' "$(last_log)")"
check "unmount" umount_store
# what was written through reopened descriptors is in the store, in standard frames
check_eq "lz4 -d decodes a file rewritten through a reopened descriptor" \
    "$(printf '%s' "$MNT" | head -c 3)#" "$(lz4 -dc "$BACKING/h1/f7" | head -c 4)"
finish
