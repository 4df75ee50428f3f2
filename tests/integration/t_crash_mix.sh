#!/bin/bash
# t_crash_mix: kill -9 of the daemon at random moments while parallel writers append,
# overwrite, truncate, fsync, close and rename (write a temporary file, fsync, rename it over
# the target), each step acknowledged by its fsync, close or rename and recorded in a log
# outside the mount. After each kill: remount; every file must hold its last acknowledged
# state or the state of the step begun after it (SPEC.md "Crash safety"), and every backing
# file must read through the mount and decode with lz4 -d to the same bytes. Then the same
# with a slow emulated card (runs in flight at the kill), and kills during the repair of a
# large torn file.
#
# Long form: CRASH_MIX_ROUNDS=40 CRASH_MIX_CARD_ROUNDS=20 CRASH_MIX_REPAIR_ROUNDS=20.
. "$(dirname "$0")/lib.sh"
need_binaries

ROUNDS=${CRASH_MIX_ROUNDS:-4}
CARD_ROUNDS=${CRASH_MIX_CARD_ROUNDS:-2}
REPAIR_ROUNDS=${CRASH_MIX_REPAIR_ROUNDS:-3}
BLOCK_SIZE=64K
TORN_MB=${CRASH_MIX_TORN_MB:-96}
ACK="$WS/ack"
mkdir -p "$ACK"

PY="$WS/mix.py"
cat >"$PY" <<'PYEOF'
import hashlib, os, random, sys, time

def h(b):
    return hashlib.sha256(b).hexdigest()

def log(path, text):
    with open(path, "a") as f:
        f.write(text + "\n")

def content(seed, n):
    """Compressible bytes unique to seed."""
    line = b"seed %d: mixed crash writer line of text\n" % seed
    return (line * (n // len(line) + 1))[:n]

def load(path):
    """The model: last acknowledged content (from the log's ack lines) and the last begun."""
    acked = begun = None
    try:
        for line in open(path):
            p = line.split()
            if p[0] == "ack":
                acked = p[1]
            elif p[0] == "begin":
                begun = p[1]
    except FileNotFoundError:
        pass
    return acked, begun

def worker(mnt, ackdir, name, seed):
    """Random steps on MNT/name, each acknowledged (fsync, close or rename)."""
    r = random.Random(seed)
    path = os.path.join(mnt, name)
    logp = os.path.join(ackdir, name + ".log")
    try:
        data = bytearray(open(path, "rb").read())
    except FileNotFoundError:
        data = bytearray()
    except OSError:
        return
    step = 0
    while True:
        step += 1
        time.sleep(0.002)
        op = r.choice(["append", "append", "overwrite", "truncate", "rename"])
        new = bytearray(data)
        if op == "append":
            new += content(seed * 1000 + step, r.choice([100, 5000, 65536, 200000]))
        elif op == "overwrite" and new:
            off = r.randrange(len(new))
            chunk = content(seed * 1000 + step, r.choice([10, 4096, 70000, 300000]))
            new[off:off + len(chunk)] = chunk
        elif op == "truncate":
            new = new[:r.randrange(len(new) + 1)] if r.random() < 0.7 else new + bytes(r.randrange(200000))
        if len(new) > (16 << 20):
            new = new[:1 << 20]
        log(logp, "begin %s %d %s" % (h(new), len(new), op))
        try:
            if op == "rename":
                tmp = path + ".tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, new)
                os.fsync(fd)
                os.close(fd)
                os.rename(tmp, path)
            else:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                if op == "truncate":
                    os.ftruncate(fd, len(new))
                elif op == "append":
                    os.pwrite(fd, new[len(data):], len(data))
                else:
                    os.pwrite(fd, new[off:off + len(chunk)], off)
                if r.random() < 0.5:
                    os.fsync(fd)
                os.close(fd)
        except OSError:
            return                    # the daemon is gone
        data = new
        log(logp, "ack %s %d" % (h(new), len(new)))

def verify(mnt, ackdir):
    bad = 0
    for f in sorted(os.listdir(ackdir)):
        name = f[:-4]
        acked, begun = load(os.path.join(ackdir, f))
        try:
            got = h(open(os.path.join(mnt, name), "rb").read())
        except FileNotFoundError:
            got = h(b"") if acked is None else None
        except OSError as e:
            print("%s: %s" % (name, e)); bad += 1; continue
        ok = got in (acked, begun) or (acked is None and got == h(b""))
        print("%s: %s" % (name, "ok" if ok else "NOT an acknowledged or begun state"))
        bad += not ok
    return bad

if sys.argv[1] == "worker":
    worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
elif sys.argv[1] == "verify":
    sys.exit(1 if verify(sys.argv[2], sys.argv[3]) else 0)
PYEOF

WRITERS=()
start_writers() {
    local round=$1 i
    WRITERS=()
    for i in 1 2 3 4 5; do
        spawn python3 "$PY" worker "$MNT" "$ACK" "w$i" $((round * 100 + i))
        WRITERS+=("$SPAWNED_PID")
    done
}
stop_writers() {
    local p i
    for p in "${WRITERS[@]}"; do
        for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    WRITERS=()
}


# one round: writers, a kill at a random moment, remount, checks
crash_round() {
    local tag=$1 opts=$2 delay
    start_writers "$RANDOM"
    delay=$(( (RANDOM % 30) + 3 ))
    sleep "$(printf '%d.%d' $((delay / 10)) $((delay % 10)))"
    say "$tag: kill -9 after ${delay}00 ms ($(cat "$ACK"/*.log 2>/dev/null | grep -c '^ack') steps acknowledged so far)"
    check "$tag: kill -9 of the daemon" kill_daemon_only
    stop_writers
    clear_dead_mount
    check "$tag: nothing landed in the bare mountpoint" test -z "$(ls -A "$MNT" 2>/dev/null)"
    check "$tag: mount again" mount_store "$opts" || return 1
    check "$tag: every file holds its acknowledged (or next begun) state" python3 "$PY" verify "$MNT" "$ACK"
    check "$tag: lz4 -d of every backing file equals the mount" lz4_check "$BACKING" "$MNT"
}

RANDOM=777
check "format and mount" mount_store || finish
for round in $(seq 1 "$ROUNDS"); do
    crash_round "round $round" "" || break
done

# ---------------------------------------------------------------- card runs in flight
CARD="engine=emu,emu_card_mbps=5"
check "remount with a slow emulated card ($CARD)" remount "$CARD"
for round in $(seq 1 "$CARD_ROUNDS"); do
    crash_round "card round $round" "$CARD" || break
done
check "unmount" umount_store
check "every backing file decodes with lz4 -d after a clean unmount" lz4_decodes "$BACKING"

# ---------------------------------------------------------------- kills during a repair
rm -rf "$BACKING" "$ACK"; mkdir -p "$ACK"
gen_file "$WS/torn.src" $((TORN_MB << 20)) mixed 31
check "mount a fresh store" mount_store || finish
cp "$WS/torn.src" "$MNT/torn"
check "unmount" umount_store
full=$(stat -c %s "$BACKING/torn")
cp --sparse=always "$BACKING/torn" "$WS/torn.backing"
repaired_rounds=0
for round in $(seq 1 "$REPAIR_ROUNDS"); do
    # tear it: cut the seek table and part of the last frame
    cp --sparse=always "$WS/torn.backing" "$BACKING/torn"
    truncate -s $((full - 100000 - round * 777)) "$BACKING/torn"
    check "repair round $round: mount" mount_store || break
    spawn cat "$MNT/torn"
    # a few ms: the repair of this file (walk and verify every block, then the table) takes
    # tens of ms, so most kills land before or inside it
    delay=$(( (round * 7) % 25 ))
    sleep "0.0$(printf '%02d' "$delay")"
    check "repair round $round: kill -9 $delay ms into the open" kill_daemon_only
    LOGF=$WS/logs/daemon-$LOG_SEQ.log
    if grep -q 'repaired a torn file' "$LOGF"; then
        say "    the repair had finished"; repaired_rounds=$((repaired_rounds + 1))
    else
        say "    killed before the repair finished"
    fi
    clear_dead_mount
    check "repair round $round: mount again" mount_store || break
    check "repair round $round: the file reads as a prefix of the original, all but its last frame" \
        bash -c "n=\$(stat -c %s '$MNT/torn') && [ \$n -ge $(( (TORN_MB << 20) - 16 * 65536 * 2 )) ] && cmp -n \$n '$WS/torn.src' '$MNT/torn'"
    check "repair round $round: lz4 -d of the backing file equals the mount" lz4_check "$BACKING" "$MNT"
    check "repair round $round: unmount" umount_store
done
say "repair rounds whose repair had finished before the kill: $repaired_rounds of $REPAIR_ROUNDS"

finish
