#!/bin/bash
# t_crash: kill -9 of the daemon while processes append to and overwrite files with fsync (and
# close) after each step, extend a sparse file by holes and write pages into them (hole runs,
# docs/FORMAT.md 9.5.1, made and split), and commit one-row SQLite transactions (journal_mode
# DELETE and WAL),
# recording every acknowledged state in logs outside the mount. After each kill the dead mount
# is cleared and the store mounted again; then every file must read fully, hold at least its
# last acknowledged state and nothing but data that was written, each database must pass
# SQLite's integrity_check and hold every acknowledged row and none never begun, and every
# backing file must decode with the stock lz4.
. "$(dirname "$0")/lib.sh"
need_binaries

ROUNDS=${CRASH_ROUNDS:-5}
BLOCK_SIZE=64K
ACK="$WS/ack"
mkdir -p "$ACK"

PY="$WS/crash.py"
cat >"$PY" <<'PYEOF'
import hashlib, os, random, sqlite3, sys, time

PAGE = 4096

def page(stream, idx):
    """Byte content of page idx of an append stream: any prefix of the stream is valid."""
    if idx % 4 == 3:
        return hashlib.shake_256(b"%s/%d" % (stream.encode(), idx)).digest(PAGE)
    line = b"%s page %08d: the quick brown fox jumps over the lazy dog\n" % (stream.encode(), idx)
    return (line * (PAGE // len(line) + 1))[:PAGE]

def stream_bytes(stream, start, n):
    out = bytearray()
    idx = start // PAGE
    skip = start % PAGE
    while len(out) < n + skip:
        out += page(stream, idx)
        idx += 1
    return bytes(out[skip:skip + n])

LIMIT = 64 << 20                     # appenders stop growing a file past this
OVER_SIZE = 4 * 65536 + 1000          # overwritten file: 5 blocks of 64K, the last partial

def over_page(rnd, idx):
    line = b"round %06d page %04d overwritten content\n" % (rnd, idx)
    return (line * (PAGE // len(line) + 1))[:PAGE]

def over_content(rnd):
    n = (OVER_SIZE + PAGE - 1) // PAGE
    return b"".join(over_page(rnd, i) for i in range(n))[:OVER_SIZE]

def sparse_page(off, rnd):
    line = b"sparse page at %012d written in round %06d\n" % (off, rnd)
    return (line * (PAGE // len(line) + 1))[:PAGE]

def sparse_verify(f, got, log):
    """The sparse writer's file: every page zeros or a page naming its own offset and a round
    that began; the size and every page of an acknowledged round there (or newer)."""
    acked, acked_size, begun, writes = set(), 0, 0, []
    for line in open(log):
        p = line.split()
        if p[0] == "ack":                # a round cut by a kill has no ack: its pages may
            acked.add(int(p[1]))         # be lost, even when later rounds were acknowledged
            acked_size = int(p[2])
        elif p[0] == "begin":
            begun = int(p[1])
        elif p[0] == "w":
            writes.append((int(p[1]), int(p[2])))
    if len(got) < acked_size or len(got) % PAGE:
        return "size %d, acknowledged %d" % (len(got), acked_size)
    rounds = {}
    for i in range(0, len(got), PAGE):
        pg = got[i:i + PAGE]
        if pg.count(0) == PAGE:
            continue
        try:
            off, rd = int(pg[15:27]), int(pg[45:51])
        except ValueError:
            return "garbage page at %d" % i
        if off != i or rd > begun or sparse_page(off, rd) != pg:
            return "page at %d names offset %d round %d (begun %d)" % (i, off, rd, begun)
        rounds[i] = rd
    for rd, off in writes:
        if rd in acked and rounds.get(off, 0) < rd:
            return "page at %d of acknowledged round %d is %s" % (off, rd,
                   "zeros" if off not in rounds else "round %d" % rounds[off])
    return None

def log_line(path, text):
    with open(path, "a") as f:
        f.write(text + "\n")
        f.flush()

def last_ack(path, key):
    v = None
    try:
        for line in open(path):
            p = line.split()
            if len(p) == 2 and p[0] == key:
                v = int(p[1])
    except FileNotFoundError:
        pass
    return v

def rounds(log, r):
    """Round numbers after r, each logged as "begin R" before it is written."""
    while True:
        r += 1
        log_line(log, "begin %d" % r)
        yield r

def open_rw(path):
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        sys.exit(0)          # the daemon is gone

cmd, a = sys.argv[1], sys.argv[2:]

if cmd == "appender":
    # appends chunks to MNT/name, fsync (mode fsync) or close (mode close) after each one,
    # then records "ack LENGTH" in the log
    path, log, mode, seed = a[0], a[1], a[2], int(a[3])
    r = random.Random(seed)
    stream = os.path.basename(path)
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        size = 0
    fd = -1
    while True:
        n = r.choice([1, 17, 500, 4096, 8192, 30000, 65536, 70000, 140000])
        if size >= LIMIT:
            sys.exit(0)          # big enough: keep the suite's disk use and time small
        time.sleep(0.004)        # and a moderate rate
        try:
            if fd < 0:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            w = os.write(fd, stream_bytes(stream, size, n))
            size += w
            if mode == "fsync":
                os.fsync(fd)
            else:
                os.close(fd)
                fd = -1
        except OSError:
            sys.exit(0)      # the daemon is gone
        log_line(log, "ack %d" % size)

elif cmd == "overwriter":
    # rewrites the whole file with round r's content, fsync, records "ack r" (and "begin r")
    path, log = a
    fd = open_rw(path)
    for r in rounds(log, last_ack(log, "begin") or 0):
        try:
            data = over_content(r)
            # in a few page-aligned pieces, as applications do
            for off in range(0, OVER_SIZE, 24 * PAGE):
                os.pwrite(fd, data[off:off + 24 * PAGE], off)
            os.fsync(fd)
        except OSError:
            sys.exit(0)
        log_line(log, "ack %d" % r)

elif cmd == "sparse":
    # round r: the file grows by 3-20 blocks of 64K and some pages of holes (ftruncate), then
    # pages are written at its new end and into the holes, then fsync; "w R OFF" before each
    # write, "ack R SIZE" once the fsync returned. Every page names its offset and round.
    path, log, seed = a[0], a[1], int(a[2])
    rnd = random.Random(seed)
    fd = open_rw(path)
    try:
        size = os.fstat(fd).st_size
    except OSError:
        sys.exit(0)
    for r in rounds(log, last_ack(log, "begin") or 0):
        try:
            if size < LIMIT // 2:
                size += rnd.randint(3, 20) * 65536 + rnd.randint(0, 15) * PAGE
                os.ftruncate(fd, size)
            offs = [size - PAGE] + [rnd.randrange(size // PAGE) * PAGE for _ in range(3)]
            for off in offs:
                log_line(log, "w %d %d" % (r, off))
                os.pwrite(fd, sparse_page(off, r), off)
            os.fsync(fd)
        except OSError:
            sys.exit(0)
        log_line(log, "ack %d %d" % (r, size))
        time.sleep(0.01)

elif cmd == "sqlwriter":
    # one-row transactions through SQLite (journal_mode DELETE or WAL, synchronous FULL):
    # "begin N" before the commit of row N, "ack N" once it returned
    path, log, mode = a
    try:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=%s" % mode)
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT)")
        r = db.execute("SELECT coalesce(max(id), 0) FROM t").fetchone()[0]
    except sqlite3.Error:
        sys.exit(0)          # the daemon is gone
    for r in rounds(log, r):
        try:
            db.execute("BEGIN")
            db.execute("INSERT INTO t(id, v) VALUES(?, ?)", (r, "row %d " % r * 20))
            db.execute("COMMIT")
        except sqlite3.Error:
            sys.exit(0)
        log_line(log, "ack %d" % r)
        time.sleep(0.002)

elif cmd == "verify":
    # verify MNT ACKDIR: every file reads fully and holds an acceptable state
    mnt, ackdir = a
    bad = 0
    for name in sorted(os.listdir(ackdir)):
        if not name.endswith(".log"):
            continue
        f = name[:-4]
        log = os.path.join(ackdir, name)
        path = os.path.join(mnt, f)
        acked = last_ack(log, "ack")
        if f.startswith("sql"):
            # SQLite's own check, then every acknowledged row there and none never begun
            begun = last_ack(log, "begin") or 0
            try:
                db = sqlite3.connect(path)
                ok = db.execute("PRAGMA integrity_check").fetchone()[0]
                ids = [x[0] for x in db.execute("SELECT id FROM t ORDER BY id")]
                db.close()
            except sqlite3.Error as e:
                print("%s: %s" % (f, e)); bad += 1
                continue
            if ok != "ok" or ids != list(range(1, len(ids) + 1)) or \
                    len(ids) < (acked or 0) or len(ids) > begun:
                print("%s: integrity_check %s, %d rows, acknowledged %s, begun %d" %
                      (f, ok, len(ids), acked, begun)); bad += 1
            else:
                print("%s: %d rows, %s acknowledged: ok" % (f, len(ids), acked))
            continue
        try:
            with open(path, "rb") as fh:
                got = fh.read()
        except FileNotFoundError:
            if acked:
                print("%s: missing, but %s was acknowledged" % (f, acked)); bad += 1
            continue
        except OSError as e:
            print("%s: read failed: %s" % (f, e)); bad += 1
            continue
        if f.startswith("sparse"):
            why = sparse_verify(f, got, log)
            print("%s: %d bytes: %s" % (f, len(got), why or "ok")); bad += why is not None
            continue
        if f.startswith("over"):
            begun = last_ack(log, "begin") or 0
            lo = acked or 0
            if acked is not None and len(got) != OVER_SIZE:
                print("%s: size %d, want %d" % (f, len(got), OVER_SIZE)); bad += 1
                continue
            if len(got) > OVER_SIZE:
                print("%s: size %d, more than %d" % (f, len(got), OVER_SIZE)); bad += 1
                continue
            for i in range(0, len(got), PAGE):
                pg = got[i:i + PAGE]
                try:
                    rnd = int(pg[6:12])      # each page names its round
                except ValueError:
                    rnd = -1
                if not (max(lo, 1) <= rnd <= begun) or over_page(rnd, i // PAGE)[:len(pg)] != pg:
                    print("%s: page at %d holds round %d, acknowledged %d, begun %d" %
                          (f, i, rnd, lo, begun)); bad += 1
                    break
            else:
                print("%s: %d bytes, rounds acknowledged %d, begun %d: ok" % (f, len(got), lo, begun))
            continue
        acked = acked or 0
        if len(got) < acked:
            print("%s: %d bytes, but %d were acknowledged" % (f, len(got), acked)); bad += 1
            continue
        want = stream_bytes(f, 0, len(got))
        if got != want:
            d = next(i for i in range(len(got)) if got[i] != want[i])
            print("%s: wrong byte at %d (size %d, acknowledged %d)%s" %
                  (f, d, len(got), acked, " INSIDE the acknowledged part" if d < acked else ""))
            bad += 1
            continue
        print("%s: %d bytes, %d acknowledged: ok" % (f, len(got), acked))
    sys.exit(1 if bad else 0)

else:
    sys.exit("unknown command " + cmd)
PYEOF
py() { python3 "$PY" "$@"; }

WRITERS=()
start_writers() {
    local round=$1
    WRITERS=()
    spawn python3 "$PY" appender "$MNT/app-fsync-1" "$ACK/app-fsync-1.log" fsync $((round * 10 + 1)); WRITERS+=("$SPAWNED_PID")
    spawn python3 "$PY" appender "$MNT/app-fsync-2" "$ACK/app-fsync-2.log" fsync $((round * 10 + 2)); WRITERS+=("$SPAWNED_PID")
    spawn python3 "$PY" appender "$MNT/app-close" "$ACK/app-close.log" close $((round * 10 + 3)); WRITERS+=("$SPAWNED_PID")
    spawn python3 "$PY" overwriter "$MNT/over" "$ACK/over.log"; WRITERS+=("$SPAWNED_PID")
    spawn python3 "$PY" sparse "$MNT/sparse" "$ACK/sparse.log" $((round * 10 + 4)); WRITERS+=("$SPAWNED_PID")
    spawn python3 "$PY" sqlwriter "$MNT/sql-delete.db" "$ACK/sql-delete.db.log" DELETE; WRITERS+=("$SPAWNED_PID")
    spawn python3 "$PY" sqlwriter "$MNT/sql-wal.db" "$ACK/sql-wal.db.log" WAL; WRITERS+=("$SPAWNED_PID")
}
stop_writers() {
    local p i
    for p in "${WRITERS[@]}"; do
        # writers end by themselves once the daemon is gone (their calls fail)
        for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$p" 2>/dev/null; then
            say "writer $p still running 10 s after the kill; killing it"
            kill -KILL "$p" 2>/dev/null
        fi
        wait "$p" 2>/dev/null
    done
    WRITERS=()
}

check "format and mount" mount_store || finish
RANDOM=4242   # the kill moments are random but repeatable
for round in $(seq 1 "$ROUNDS"); do
    start_writers "$round"
    # let them write for a while: 0.5 to 4 s
    delay=$(( (RANDOM % 36) + 5 ))
    sleep "$(printf '%d.%d' $((delay / 10)) $((delay % 10)))"
    say "round $round: kill -9 of daemon $DAEMON_PID after ${delay}00 ms"
    check "round $round: kill -9 of the daemon" kill_daemon_only
    # Writers stop while the dead mount is still there: once it is gone, an open with
    # O_CREAT would land in the bare mountpoint directory and "acknowledge" data the store
    # never saw (it did, before this order was fixed).
    stop_writers
    clear_dead_mount
    check "round $round: the dead mount is gone" _lib_negate mountpoint -q "$MNT"
    check "round $round: nothing was written into the bare mountpoint" \
        test -z "$(ls -A "$MNT" 2>/dev/null)"
    acks=""
    for f in "$ACK"/*.log; do acks="$acks $(basename "$f" .log)=$(grep -c ack "$f")"; done
    say "round $round: acknowledged steps so far:$acks"
    if ! check "round $round: mount again" mount_store; then
        break
    fi
    check "round $round: every file reads fully and holds at least its acknowledged state" py verify "$MNT" "$ACK"
    check "round $round: lz4 -d of every backing file equals the mount" lz4_check "$BACKING" "$MNT"
    check "round $round: the daemon is alive" daemon_alive
done

check "unmount at the end" umount_store
check "every backing file decodes with lz4 after a clean unmount" lz4_decodes "$BACKING"
if check "final mount" mount_store; then
    check "final: every file holds at least its acknowledged state" py verify "$MNT" "$ACK"
    check "final unmount" umount_store
fi

finish
