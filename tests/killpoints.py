#!/usr/bin/env python3
"""A kill -9 at every write: the commit atomicity test (tests/integration/t_killpoints.sh).

  killpoints.py workload MNT LOG --seed S --steps N
      Steps on one file of a 64 KiB store through the mount: each writes a few ranges (10
      bytes to 150 KB: a page-record's change next to whole blocks, across blocks, past the
      end) with content unique to the step, then fsyncs or not, and closes or keeps the file
      open for the next step; the
      file's expected content after each step goes to LOG as a hash, with the step's
      monotonic start and end times.

  killpoints.py check BASE PLOG LOG PLCHECK WORK
      A kill -9 of the daemon keeps every write it made, in order, and nothing after (the
      page cache survives). From the daemon's record (tests/plshim.c) over the empty store
      BASE, builds the state after each write to the file, opens it as the daemon would
      (PLCHECK, with its repairs) and checks that the file reads as the state of the last
      step that had ended with an fsync or close by then, or of a step begun or ended
      (without either) since, or as such a step's state cut at a block boundary past the
      end of the file before it (an appending writer's blocks are written as they fill,
      and a file whose writer stopped partway shows those it wrote, as a POSIX filesystem
      may): a commit cut short anywhere leaves the file as it was before it or as it made
      it, never a mix of the two.
"""
import argparse, hashlib, json, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from powerloss import PL_SYNC, apply, read_plog  # noqa: E402

NAME = "f"
BS = 65536
HOT = 3


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def text(step, n):
    """n bytes unique to the step, about half as large under LZ4: records of a few KiB fill a
    slot's padding within a few fsyncs (a slot that runs low is folded early, FORMAT.md 11.7)."""
    lines = (b"step %06d %s\n" % (step, hashlib.md5(b"%d:%d" % (step, k)).hexdigest()[:24]
                                  .encode()) for k in range(n // 32 + 1))
    return b"".join(lines)[:n]


def prefixes(data, old_len):
    """The hashes of data cut at each block boundary past old_len (a writer stopped partway
    through what it appended)."""
    return [sha(data[:k]) for k in range(BS * (old_len // BS + 1), len(data), BS)]


def workload(a):
    rnd = random.Random(a.seed)
    path = os.path.join(a.mnt, NAME)
    log = open(a.log, "w")
    # an odd seed's file ends inside a block and grows; an even seed's keeps its 16 whole
    # blocks, or with --grow grows as well (FORMAT.md 14, item 9, fixed since).
    grow = a.seed % 2 == 1 or a.grow
    global BS
    BS = a.bs
    data = bytearray(text(0, a.blocks * BS + (1234 if a.seed % 2 else 0)))
    t0 = time.monotonic_ns()
    with open(path, "wb") as fh:
        fh.write(data)
    log.write(json.dumps({"step": 0, "sha": sha(data), "t0": t0, "t1": time.monotonic_ns(),
                          "prefixes": prefixes(data, 0)}) + "\n")
    fd = -1
    for step in range(1, a.steps + 1):
        t0 = time.monotonic_ns()
        before = len(data)
        if fd < 0:
            fd = os.open(path, os.O_RDWR)
        # in its second half, a growing file's steps are often a log's line: appended alone
        # and closed, which a version 5 file commits as a link of its last block's chained
        # frame (FORMAT.md 9.12, 11.8), the frame's end and footer written over (the first
        # half fills the hot slot with records)
        if grow and step > a.steps // 2 and rnd.random() < 0.4:
            chunk = text(step, rnd.choice([20, 60, 300, 2000]))
            os.pwrite(fd, chunk, len(data))
            data.extend(chunk)
            synced = rnd.random() < 0.2
            if synced:
                os.fsync(fd)
            os.close(fd)
            fd = -1
            log.write(json.dumps({"step": step, "sha": sha(data), "t0": t0,
                                  "t1": time.monotonic_ns(), "prefixes": prefixes(data, before),
                                  "committed": True}) + "\n")
            continue
        # half the steps change pages only (records), most of them in a hot block whose
        # slot fills, or in the last block (its slot padded by the commit that rewrote it);
        # the others mix them with whole blocks, across blocks, past the end
        pages = rnd.random() < 0.5
        for _ in range(rnd.randint(1, 4)):
            n = rnd.choice([10, 4096, 4096, 8192] if pages else
                           [10, 4096, 8192, 30000, 70000, 150000])
            off = rnd.randrange(len(data) + (BS if rnd.random() < 0.15 else 0))
            hot = rnd.random()
            if pages and hot < 0.5:
                off = HOT * BS + rnd.randrange(BS - n)
            elif pages and hot < 0.7 and len(data) - (len(data) - 1) // BS * BS > n:
                last = (len(data) - 1) // BS * BS               # the last block's slot
                off = last + rnd.randrange(len(data) - last - n)
            if not grow:
                off = min(off, len(data) - 1)
                n = min(n, len(data) - off)
            chunk = text(step, n)
            os.pwrite(fd, chunk, off)
            if off > len(data):
                data.extend(bytes(off - len(data)))
            data[off:off + n] = chunk
        synced = rnd.random() < 0.6
        if synced:
            os.fsync(fd)
        # the file stays open across some steps: a close folds its records, and a slot
        # fills only across the fsyncs of one open
        closed = rnd.random() < 0.2 or step == a.steps
        if closed:
            os.close(fd)
            fd = -1
        log.write(json.dumps({"step": step, "sha": sha(data), "t0": t0,
                              "t1": time.monotonic_ns(), "prefixes": prefixes(data, before),
                              "committed": synced or closed}) + "\n")
    log.close()
    return 0


def check(a):
    steps = [json.loads(line) for line in open(a.log)]
    ops = [op for op in read_plog(a.plog) if op[2] == NAME and op[0] != PL_SYNC]
    img, bad, n = bytearray(), 0, 0
    os.makedirs(a.work, exist_ok=True)
    for p in range(len(ops) + 1):
        if p:
            apply(img, ops[p - 1])
        tc_lo = ops[p - 1][1] if p else 0                      # the kill came after this
        tc_hi = ops[p][1] if p < len(ops) else float("inf")   # and before this
        done = [s for s in steps if s["t1"] <= tc_lo]
        begun = [s for s in steps if s["t0"] < tc_hi and s["t1"] > tc_lo]
        # a step that ended without fsync or close left its changes in the daemon's memory:
        # the kill may lose them, back to the last step that ended with a commit
        last = max([k for k, s in enumerate(done) if s.get("committed", True)], default=0)
        done = done[last:]
        allowed = {s["sha"] for s in done + begun} | ({sha(b"")} if not done else set())
        allowed |= {h for s in done[1:] + begun for h in s["prefixes"]}
        state, out = os.path.join(a.work, "state"), os.path.join(a.work, "out")
        shutil.rmtree(state, ignore_errors=True)
        shutil.copytree(a.base, state)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(state, NAME), "wb") as fh:
            fh.write(img)
        res = subprocess.run([a.plcheck, state, out, NAME], capture_output=True, text=True)
        words = res.stdout.split()
        got = sha(open(os.path.join(out, "0"), "rb").read()) if words[1:2] == ["ok"] else None
        n += 1
        if got not in allowed:
            bad += 1
            steps_named = [s["step"] for s in steps if s["sha"] == got]
            print("after write %d of %d: the file reads as %s; allowed: steps %s" % (
                p, len(ops), ("step %s" % steps_named) if steps_named else
                (res.stdout.strip() or "a state no step made"),
                [s["step"] for s in done + begun]))
            if a.keep:                 # as the kill left it, before the open's repairs
                kept = os.path.join(a.keep, "state-%d" % p)
                shutil.copytree(state, kept)
                with open(os.path.join(kept, NAME), "wb") as fh:
                    fh.write(img)
    print("%d states (a kill -9 after each write to the file), %d wrong" % (n, bad))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("workload")
    w.add_argument("mnt")
    w.add_argument("log")
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--steps", type=int, default=40)
    w.add_argument("--grow", action="store_true", help="even seeds grow the file too")
    w.add_argument("--bs", type=int, default=BS, help="the store's block size")
    w.add_argument("--blocks", type=int, default=16, help="whole blocks the file starts with")
    c = sub.add_parser("check")
    for x in ("base", "plog", "log", "plcheck", "work"):
        c.add_argument(x)
    c.add_argument("--keep", default="")
    a = ap.parse_args()
    return workload(a) if a.cmd == "workload" else check(a)


if __name__ == "__main__":
    sys.exit(main())
