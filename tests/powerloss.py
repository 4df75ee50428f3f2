#!/usr/bin/env python3
"""The power-loss test's two halves (tests/integration/t_powerloss.sh runs both).

  powerloss.py workload MNT LOGDIR --seed S --writers W --ops N
      Writers (one process each, two files each) append, overwrite, truncate, reopen and
      fsync through the mount (more cuts to nothing with --zeros; holes punched and ranges
      zeroed with --falloc; appends of megabytes with --big; a log's lines, each appended and
      closed or synced, with --lines), writing self-describing
      64-byte records, and log every operation with its monotonic start and end times.

  powerloss.py check BASE PLOG LOGDIR PLCHECK WORK --states N --seed S
      Builds N states a power loss may leave from the daemon's record (tests/plshim.c) over
      the empty store BASE: for a crash point, every file gets all it was sent before its
      last sync, then any subset of what came after, in order (a write that is kept brings
      the earlier writes to the same 4 KiB pages with it, as the page cache writes a page
      whole), one write possibly torn at a 512-byte boundary of the device; with
      --lose-one, states that lose one truncate, fallocate or write alone; with --keep-one
      N, up to N states that keep one write alone (torn when it spans a sector boundary) of
      all its file's calls since the file's last sync. Opens each state as the daemon does
      (PLCHECK) and checks that every file opens and reads (after the automatic repair),
      that every record is one that was written there and is not older than what an
      acknowledged fsync promised, that the size is one the writer made possible, and that
      `lz4 -d` of the backing file gives the same bytes. Prints a summary; exits 1 on any
      failure, naming the state and the file.
"""
import argparse, concurrent.futures, ctypes, functools, json, multiprocessing, os, random
import shutil, struct, subprocess, sys, time, zlib

import lz4batch

REC = 64
MAGIC = b"PLR1"
PL_WRITE, PL_TRUNC, PL_FALLOC, PL_SYNC = 1, 2, 3, 4
FL_KEEP_SIZE, FL_PUNCH_HOLE, FL_ZERO_RANGE = 0x01, 0x02, 0x10


def record(fid, idx, ver):
    body = struct.pack("<4sIQQ", MAGIC, fid, idx, ver)
    fill = (b"%d.%d.%d;" % (fid, idx, ver) * 8)[:36]
    head = body + fill
    return head + struct.pack("<I", zlib.crc32(head))


def parse_record(b, fid, idx):
    """The version of a valid record for (fid, idx); 0 for zeros; None for anything else."""
    if b == bytes(REC):
        return 0
    magic, f, i, ver = struct.unpack_from("<4sIQQ", b)
    if magic != MAGIC or f != fid or i != idx or b != record(fid, idx, ver):
        return None
    return ver


# ------------------------------------------------------------------------------- workload

def fallocate(fd, mode, off, length):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if libc.fallocate(fd, mode, off, length) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def zero_range(rnd, fd, nrec):
    """A punched hole or a zeroed range over records, from somewhere in the file to maybe
    past its end (extending it when the mode does): the log entry's fields, and the size."""
    start = rnd.randrange(nrec)
    n = rnd.randint(1, 40) if rnd.random() < 0.6 else rnd.randint(200, 3000)
    mode = rnd.choice([FL_PUNCH_HOLE | FL_KEEP_SIZE, FL_ZERO_RANGE | FL_KEEP_SIZE,
                       FL_ZERO_RANGE])
    fallocate(fd, mode, start * REC, n * REC)
    keep = bool(mode & FL_KEEP_SIZE)
    return {"op": "zero", "start": start, "n": n, "keep": keep}, nrec if keep else max(nrec, start + n)


def writer(mnt, logdir, w, seed, n_ops, zeros, falloc, big, lines):
    rnd = random.Random(seed * 1000 + w)
    names = ["w%d_%d" % (w, k) for k in range(2)]
    fids = [w * 2 + k for k in range(2)]
    fds = [os.open(os.path.join(mnt, n), os.O_RDWR | os.O_CREAT, 0o644) for n in names]
    nrec = [0, 0]
    ver = 0
    log = open(os.path.join(logdir, "w%d.jsonl" % w), "w")

    def put(k, start, n, v):
        data = b"".join(record(fids[k], start + j, v) for j in range(n))
        os.pwrite(fds[k], data, start * REC)

    for _ in range(n_ops):
        k = rnd.randrange(2)
        r = rnd.random()
        ver += 1
        e = {"f": names[k], "fid": fids[k], "ver": ver}
        t0 = time.monotonic_ns()
        if lines and rnd.random() < lines:
            # a log's line: appended and closed (`>>`), or appended and synced, which a
            # version 5 file commits as a link of its last block's chained frame
            # (docs/FORMAT.md 11.8), the synced one then promised
            n = rnd.randint(1, 3)
            put(k, nrec[k], n, ver)
            e.update(op="write", start=nrec[k], n=n, t0=t0, t1=time.monotonic_ns())
            log.write(json.dumps(e) + "\n")
            nrec[k] += n
            ver += 1
            t0 = time.monotonic_ns()
            e = {"f": names[k], "fid": fids[k], "ver": ver}
            if rnd.random() < 0.4:
                os.fsync(fds[k])
                e.update(op="fsync")
            else:
                os.close(fds[k])
                fds[k] = os.open(os.path.join(mnt, names[k]), os.O_RDWR)
                e.update(op="reopen")
        elif falloc and nrec[k] and rnd.random() < falloc:
            z, nrec[k] = zero_range(rnd, fds[k], nrec[k])
            e.update(z)
        elif r < 0.38 or nrec[k] == 0:
            n = rnd.randint(1, 40) if rnd.random() < 0.85 else rnd.randint(200, 2500)
            if big and rnd.random() < big:
                n = rnd.randint(8000, 40000)   # 0.5-2.5 MiB: the writer streams bricks
            put(k, nrec[k], n, ver)
            e.update(op="write", start=nrec[k], n=n)
            nrec[k] += n
        elif r < 0.66:
            start = rnd.randrange(nrec[k])
            n = min(rnd.randint(1, 40) if rnd.random() < 0.85 else rnd.randint(200, 2500),
                    nrec[k] - start)
            put(k, start, n, ver)
            e.update(op="write", start=start, n=n)
        elif r < 0.86:
            (os.fsync if rnd.random() < 0.5 else os.fdatasync)(fds[k])
            e.update(op="fsync")
        elif r < 0.92:
            # shorter, a little longer, or longer by 3 to 20 blocks of 64 KiB of holes: hole
            # runs (docs/FORMAT.md 9.5.1) that later writes land in and split
            up = rnd.randint(1, 300) if rnd.random() < 0.5 else rnd.randint(3000, 20000)
            new = rnd.randint(0, nrec[k]) if rnd.random() < 0.7 else nrec[k] + up
            if zeros and rnd.random() < zeros:
                new = 0                # O_TRUNC, `>`: back to nothing (FORMAT.md 11.2)
            os.ftruncate(fds[k], new * REC)
            e.update(op="truncate", size=new)
            nrec[k] = new
        else:
            os.close(fds[k])
            fds[k] = os.open(os.path.join(mnt, names[k]), os.O_RDWR)
            e.update(op="reopen")
        e.update(t0=t0, t1=time.monotonic_ns())
        log.write(json.dumps(e) + "\n")
    for fd in fds:
        os.close(fd)
    log.close()


def workload(a):
    pids = []
    for w in range(a.writers):
        pid = os.fork()
        if pid == 0:
            try:
                writer(a.mnt, a.logdir, w, a.seed, a.ops, a.zeros, a.falloc, a.big, a.lines)
                os._exit(0)
            except Exception as ex:  # the test reads this line
                print("writer %d: %r" % (w, ex), file=sys.stderr)
                os._exit(1)
        pids.append(pid)
    bad = 0
    for pid in pids:
        bad |= os.waitpid(pid, 0)[1] != 0
    return 1 if bad else 0


# ------------------------------------------------------------------------------- the record

def read_plog(path):
    ops = []
    b = open(path, "rb").read()
    pos = 0
    while pos < len(b):
        magic, typ, seq, t, off, ln, mode, plen = struct.unpack_from("<4sIQQQQII", b, pos)
        if magic != b"PLOG":
            raise SystemExit("plog: bad record at %d" % pos)
        pos += 48
        p = b[pos:pos + plen].decode()
        pos += plen
        data = None
        if typ == PL_WRITE:
            data = b[pos:pos + ln]
            pos += ln
        ops.append((typ, t, p, off, ln, mode, data))
    return ops


def apply(img, op, torn_keep=None):
    """Applies one recorded call to a bytearray image of a file."""
    typ, _, _, off, ln, mode, data = op
    if typ == PL_WRITE:
        if torn_keep is not None:
            data = torn_keep(data, off)
            if data is None:
                return
            off, data = data
        end = off + len(data)
        if end > len(img):
            img.extend(bytes(end - len(img)))
        img[off:end] = data
    elif typ == PL_TRUNC:
        if off < len(img):
            del img[off:]
        else:
            img.extend(bytes(off - len(img)))
    elif typ == PL_FALLOC:
        end = off + ln
        if mode & (FL_PUNCH_HOLE | FL_ZERO_RANGE):
            lo, hi = min(off, len(img)), min(end, len(img))
            img[lo:hi] = bytes(hi - lo)
        if not mode & FL_KEEP_SIZE and end > len(img):
            img.extend(bytes(end - len(img)))


# ------------------------------------------------------------------------------- expectations

class FileHistory:
    """One file's operations (one writer: sequential), and what a crash at time tc allows."""

    def __init__(self, ops):
        self.ops = ops
        self.fid = ops[0]["fid"]
        # state after each op: versions per record (0: zeros), as a list
        self.states = []
        cur = []
        for e in ops:
            if e["op"] == "write":
                end = e["start"] + e["n"]
                if end > len(cur):
                    cur.extend([0] * (end - len(cur)))
                cur[e["start"]:end] = [e["ver"]] * e["n"]
            elif e["op"] == "truncate":
                cur = cur[:e["size"]] + [0] * max(0, e["size"] - len(cur))
            elif e["op"] == "zero":
                end = e["start"] + e["n"]
                if not e["keep"] and end > len(cur):
                    cur.extend([0] * (end - len(cur)))
                end = min(end, len(cur))
                cur[e["start"]:end] = [0] * max(0, end - e["start"])
            self.states.append(list(cur))

    def allowed(self, tc):
        """What a crash at tc allows, as an Allowed."""
        issued = -1
        while issued + 1 < len(self.ops) and self.ops[issued + 1]["t0"] <= tc:
            issued += 1
        acked = -1
        for j in range(issued + 1):
            if self.ops[j]["op"] == "fsync" and self.ops[j]["t1"] <= tc:
                acked = j
        return Allowed(self, issued, acked)


class Allowed:
    """The versions each record may hold after a crash: the version the last acknowledged
    fsync promised (base), any version a write issued after it put there (extra), and zeros
    where a later truncate or zeroing, or nothing written yet, allows them. Kept sparse: a
    state has tens of thousands of records and a handful of operations since its last sync."""

    def __init__(self, h, issued, acked):
        self.acked = acked
        self.base = h.states[acked] if acked >= 0 else []
        self.extra = {}
        # records from here on may be zeros (a truncate cut them, or nothing promised them)
        self.zero_from = len(self.base) if acked >= 0 else 0
        sizes = [len(self.base)]
        for j in range(acked + 1, issued + 1):
            e, st = h.ops[j], h.states[j]
            sizes.append(len(st))
            if e["op"] == "write":
                for r in range(e["start"], e["start"] + e["n"]):
                    self.extra.setdefault(r, set()).add(e["ver"])
            elif e["op"] == "zero":
                for r in range(e["start"], min(e["start"] + e["n"], len(st))):
                    self.extra.setdefault(r, set()).add(0)
            elif e["op"] == "truncate":
                self.zero_from = min(self.zero_from, e["size"])
        if acked < 0:
            sizes.append(0)
        self.lo, self.hi, self.acked_size = min(sizes), max(sizes), len(self.base)

    def versions(self, r):
        """The versions record r may hold (for messages and the slow path)."""
        ok = set(self.extra.get(r, ()))
        if r < len(self.base):
            ok.add(self.base[r])
        if r >= self.zero_from:
            ok.add(0)
        return ok


@functools.lru_cache(maxsize=1 << 18)
def expected(fid, idx, ver):
    """The bytes of record (fid, idx) at version ver (zeros for 0), kept: states repeat them."""
    return bytes(REC) if ver == 0 else record(fid, idx, ver)


def check_content(h, tc, data):
    """None when data is a state a crash at tc allows, else why not."""
    al = h.allowed(tc)
    if al.acked < 0 and data.count(0) == len(data):
        # never synced: the disk may have kept the file's length and none of its data (the
        # new file's first write, its marker, lost with the rest), as ext4 with
        # data=writeback may; zeros, never bytes nobody wrote
        return None
    if len(data) % REC:
        return "size %d is not a whole number of records" % len(data)
    n = len(data) // REC
    if not al.lo <= n <= al.hi:
        return "size %d records outside [%d, %d] (acked size %d)" % (
            n, al.lo, al.hi, al.acked_size)
    view, base, nbase, fid, zero = memoryview(data), al.base, len(al.base), h.fid, bytes(REC)
    for r in range(n):
        got = view[r * REC:(r + 1) * REC]
        # the common cases: a version allowed, compared without parsing
        if r < nbase and got == expected(fid, r, base[r]):
            continue
        if r >= al.zero_from and got == zero:
            continue
        if any(got == expected(fid, r, v) for v in al.extra.get(r, ())):
            continue
        v = parse_record(bytes(got), fid, r)
        if v is None:
            return "record %d is garbage (%r...)" % (r, bytes(got[:24]))
        ok = al.versions(r)
        if v not in ok:
            want = sorted(ok)
            return "record %d has version %d, allowed %s%s" % (
                r, v, want[:8], " (an fsync promised a newer one)" if v < min(want) else "")
    return None


# ------------------------------------------------------------------------------- states

def crash_points(ops, n, rnd):
    syncs = [i + 1 for i, op in enumerate(ops) if op[0] == PL_SYNC]
    pts = list(syncs)
    rnd.shuffle(pts)
    pts = pts[:n // 2]
    while len(pts) < n:
        pts.append(rnd.randint(1, len(ops)))
    return sorted(pts)


PAGE = 4096


def pages(op):
    typ, _, _, off, ln, _, _ = op
    return set(range(off // PAGE, (off + ln + PAGE - 1) // PAGE)) if typ == PL_WRITE else set()


def with_page_mates(ops, tail, chosen):
    """The page cache writes a page with every change made to it before: a write that
    reached the disk brings the earlier writes to its pages with it."""
    keep = set(chosen)
    for j in sorted(chosen, reverse=True):
        pj = pages(ops[j])
        for i in tail:
            if i < j and i not in keep and pages(ops[i]) & pj:
                keep.add(i)
                pj |= pages(ops[i])
    return sorted(keep)


def tear(rnd, kept=False):
    """A torn write: the disk wrote its sectors up to a 512-byte boundary of the device and
    not the rest (a write within one sector is whole or not at all; kept: whole)."""
    def keep(data, off):
        cuts = list(range((off // 512 + 1) * 512, off + len(data), 512))
        if not cuts:
            return None if not kept and rnd.random() < 0.5 else (off, data)
        return off, data[:rnd.choice(cuts) - off]
    return keep


def lost_alone(ops, rnd):
    """Crash points for states that lose one fallocate (a punch, a reservation) or one
    truncate alone and keep every other unsynced call of its file: the backing filesystem
    commits such changes of its extents and sizes in its journal, while a later overwrite of
    blocks already allocated goes to the disk on its own. For each such call that later
    calls of the same file follow before that file's next sync: a crash just before that
    sync, and two at random points after the first of those calls (the later calls may have
    left the file without a footer to trust)."""
    specs = []
    for f, op in enumerate(ops):
        if op[0] not in (PL_FALLOC, PL_TRUNC):
            continue
        nxt = [i for i in range(f + 1, len(ops)) if ops[i][2] == op[2]]
        end = next((i for i in nxt if ops[i][0] == PL_SYNC), len(ops))
        later = [i for i in nxt if i < end]
        if later:
            specs.append((end, "lose-one", f))
            for _ in range(2):
                specs.append((rnd.randint(later[0] + 1, end), "lose-one", f))
    return specs


def lost_write_alone(ops):
    """Crash points for states that lose one write alone and keep every other unsynced call
    of its file up to that file's next write, which they keep too: the disk wrote the later
    write first (a slot rewritten, and the journal and footer before it lost). Only where
    the two writes share no 4 KiB page: the page cache writes a page whole."""
    specs, by_file = [], {}
    for i, op in enumerate(ops):
        by_file.setdefault(op[2], []).append(i)
    for idx in by_file.values():
        for a, j in enumerate(idx):
            if ops[j][0] != PL_WRITE:
                continue
            k = next((k for k in idx[a + 1:] if ops[k][0] in (PL_WRITE, PL_SYNC)), None)
            if k is not None and ops[k][0] == PL_WRITE and not pages(ops[k]) & pages(ops[j]):
                specs.append((k + 1, "lose-one", j))
    return specs


def kept_alone(ops, rnd, cap):
    """Crash points for states that keep one write alone (torn at a sector boundary when it
    spans one) of its file's calls since that file's last sync, and lose the rest, the
    earlier ones too (the disk wrote that one first): a slot rewritten in place under a
    footer that does not know of it, a journal without the marker of a file never synced.
    Only writes that have earlier calls of their file to lose; at most cap of them, at
    random."""
    pending, cands = {}, []
    for i, op in enumerate(ops):
        p = op[2]
        if op[0] == PL_SYNC:
            pending[p] = 0
            continue
        if op[0] == PL_WRITE and pending.get(p, 0):
            cands.append(i)
        pending[p] = pending.get(p, 0) + 1
    rnd.shuffle(cands)
    return [(j + 1, "keep-one", j) for j in sorted(cands[:cap])]


class StateMaker:
    """Builds the state a crash at point c leaves, for crash points in increasing order:
    each file gets all it was sent before its last sync, then a part of the rest."""

    def __init__(self, ops, hist):
        self.ops, self.hist = ops, hist
        self.durable = {}                 # path -> bytearray: all before its last sync < c
        self.pending = {}                 # path -> op indices after its last sync
        self.applied_to = 0               # ops [0, applied_to) are in durable or pending

    def advance(self, c):
        for i in range(self.applied_to, c):
            typ, p = self.ops[i][0], self.ops[i][2]
            self.pending.setdefault(p, []).append(i)
            self.durable.setdefault(p, bytearray())
            if typ == PL_SYNC:
                for j in self.pending[p]:
                    apply(self.durable[p], self.ops[j])
                self.pending[p] = []
        self.applied_to = c

    def write(self, state, mode, drop, rnd):
        """Writes the files into state; returns their paths."""
        ops = self.ops
        files = sorted(p for p in self.durable if p in self.hist)
        for p in files:
            img = bytearray(self.durable[p])
            tail = [j for j in self.pending.get(p, []) if ops[j][0] != PL_SYNC]
            if mode == "lose-one":
                chosen = [j for j in tail if j != drop]
            elif mode == "keep-one":
                chosen = with_page_mates(ops, tail, [drop]) if drop in tail else []
            else:
                keep_p = {"none": 0.0, "all": 1.0, "half": 0.5}.get(mode, rnd.random())
                chosen = with_page_mates(ops, tail, [j for j in tail if rnd.random() < keep_p])
            torn_at = rnd.choice(chosen) if mode == "torn" and chosen else None
            if mode == "keep-one" and drop in chosen:
                torn_at = drop
            for j in chosen:
                apply(img, ops[j], tear(rnd, mode == "keep-one") if j == torn_at else None)
            os.makedirs(os.path.dirname(os.path.join(state, p)) or state, exist_ok=True)
            with open(os.path.join(state, p), "wb") as fh:
                fh.write(img)
        return files


def check_state(a, hist, state, out, files, tc, where):
    """Opens the files of a state as the daemon would; returns the failures."""
    res = subprocess.run([a.plcheck, state, out] + files, capture_output=True, text=True)
    if res.returncode != 0:
        return ["%s: plcheck: %s" % (where, res.stderr.strip())]
    failures, lines, decode = [], res.stdout.split("\n"), []
    for k, p in enumerate(files):
        words = lines[k].split(" ", 2) if k < len(lines) else ["?", "error", "no line"]
        at = "%s, file %s" % (where, p)
        if words[1] != "ok":
            failures.append("%s: %s" % (at, words[2]))
            continue
        data = open(os.path.join(out, str(k)), "rb").read()
        why = check_content(hist[p], tc, data)
        if why:
            failures.append("%s: %s" % (at, why))
            continue
        with open(os.path.join(state, p), "rb") as fh:
            if fh.read(4) != b"\x04\x22\x4d\x18" and not data.strip(b"\0"):
                continue               # the zeros of a file whose writes were all lost
        decode.append((at, os.path.join(state, p), data))
    return failures + lz4_check(decode, CHECKER.get("sep"))


def lz4_check(decode, sep):
    """The stock lz4 -d of each (where, backing file, what the mount read): one lz4 for all
    of them, a separator frame between each two (a process start costs more than the
    decoding), and one per file to name the file only when that fails."""
    if not decode:
        return []
    lz = lz4batch.decode([f for _, f, _ in decode], sep)
    if lz.returncode == 0 and lz.stdout == lz4batch.joined([d for _, _, d in decode], sep):
        return []
    failures = []
    for at, f, data in decode:
        lz = subprocess.run(["lz4", "-dc", f], capture_output=True)
        if lz.returncode != 0 or lz.stdout != data:
            failures.append("%s: lz4 -d of the backing file %s" % (
                at, "fails" if lz.returncode else "differs from what the mount reads"))
    return failures or ["lz4 -dcm of the files together differs from what the mount reads"]


def read_history(logdir):
    hist = {}
    for name in sorted(os.listdir(logdir)):
        if name.endswith(".jsonl"):
            per = {}
            for line in open(os.path.join(logdir, name)):
                e = json.loads(line)
                per.setdefault(e["f"], []).append(e)
            for f, es in per.items():
                hist[f] = FileHistory(es)
    return hist


def check(a):
    rnd = random.Random(a.seed)
    ops = read_plog(a.plog)
    hist = read_history(a.logdir)
    modes = ["none", "all", "half", "random", "torn"]
    specs = [(c, rnd.choice(modes), None) for c in crash_points(ops, a.states, rnd)]
    n_lose = 0
    if a.lose_one:
        lose = lost_alone(ops, random.Random(a.seed + 1)) + lost_write_alone(ops)
        n_lose = len(lose)
        specs += lose
    kept = kept_alone(ops, random.Random(a.seed + 2), a.keep_one)
    specs += kept
    specs.sort(key=lambda x: (x[0], x[2] is not None))
    maker = StateMaker(ops, hist)
    found, n_states, n_files = {}, 0, 0
    # The states are built one after the other (each from the one before, with one random
    # sequence, so that a seed always gives the same states); opening and checking one
    # (plcheck, the records, lz4 -d) runs in a worker process, in a folder of its own, while
    # the next states are built.
    jobs = max(1, a.jobs)
    slots = [(os.path.join(a.work, "state%d" % k), os.path.join(a.work, "out%d" % k))
             for k in range(jobs)]
    for _, out in slots:
        os.makedirs(out, exist_ok=True)
    busy = [None] * jobs
    CHECKER.update(a=a, hist=hist, sep=lz4batch.separator(a.work))
    ctx = multiprocessing.get_context("fork")

    def settle(k):
        """Waits for slot k's state; keeps it as it was before the open when it failed."""
        if busy[k] is None:
            return
        n, fut = busy[k]
        bad = fut.result()
        found[n] += bad
        if a.keep and bad and len(os.listdir(a.keep)) < 20:
            shutil.copytree(slots[k][0] + ".pre", os.path.join(a.keep, "state%d" % n))
        busy[k] = None

    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        for c, mode, drop in specs:
            maker.advance(c)
            tc = ops[c - 1][1]
            k = n_states % jobs
            settle(k)
            state, out = slots[k]
            shutil.rmtree(state, ignore_errors=True)
            shutil.copytree(a.base, state, symlinks=True)
            files = maker.write(state, mode, drop, rnd)
            n_states += 1
            found[n_states] = ["state %d (crash point %d): %s is missing after an fsync" % (
                n_states, c, p) for p in sorted(set(hist) - set(files))
                if hist[p].allowed(tc).acked >= 0]
            if not files:
                continue
            if a.keep:
                shutil.rmtree(state + ".pre", ignore_errors=True)
                shutil.copytree(state, state + ".pre")
            what = mode if drop is None else "call %d %s alone" % (
                drop, "kept" if mode == "keep-one" else "lost")
            where = "state %d (crash point %d/%d, %s)" % (n_states, c, len(ops), what)
            n_files += len(files)
            busy[k] = (n_states, pool.submit(check_worker, state, out, files, tc, where))
        for k in range(jobs):
            settle(k)
    failures = [f for n in sorted(found) for f in found[n]]
    print("powerloss: %d recorded calls, %d states (%d of them lose one call alone, %d keep "
          "one write alone), %d file checks, %d failures (%d workers)" % (
              len(ops), n_states, n_lose, len(kept), n_files, len(failures), jobs))
    for f in failures[:20]:
        print("  " + f)
    return 1 if failures else 0


# What every worker of check() shares, set before the workers fork.
CHECKER = {}


def check_worker(state, out, files, tc, where):
    return check_state(CHECKER["a"], CHECKER["hist"], state, out, files, tc, where)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("workload")
    w.add_argument("mnt")
    w.add_argument("logdir")
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--writers", type=int, default=3)
    w.add_argument("--ops", type=int, default=150)
    w.add_argument("--zeros", type=float, default=0.0,
                   help="the share of truncates that cut the file to nothing")
    w.add_argument("--falloc", type=float, default=0.0,
                   help="the share of operations that punch a hole or zero a range")
    w.add_argument("--big", type=float, default=0.0,
                   help="the share of appends that write 0.5-2.5 MiB at once")
    w.add_argument("--lines", type=float, default=0.0,
                   help="the share of operations that append a line and close the file")
    c = sub.add_parser("check")
    for x in ("base", "plog", "logdir", "plcheck", "work"):
        c.add_argument(x)
    c.add_argument("--states", type=int, default=500)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--keep", help="copy failing states (before the open) into this folder")
    c.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="states checked at once (default: the number of cores)")
    c.add_argument("--lose-one", action="store_true",
                   help="also states that lose one fallocate, truncate or write alone "
                   "(lost_alone, lost_write_alone)")
    c.add_argument("--keep-one", type=int, default=0, metavar="N",
                   help="also up to N states that keep one write alone (kept_alone)")
    a = ap.parse_args()
    return workload(a) if a.cmd == "workload" else check(a)


if __name__ == "__main__":
    sys.exit(main())
