#!/bin/bash
# t_posix: POSIX behaviour through a mount: open-file rename and unlink, several handles,
# truncate, holes, fallocate and punch hole, SEEK_DATA/SEEK_HOLE, O_APPEND, append+fsync
# rounds, mmap (shared writable too), xattrs, symlinks, hard links, permissions, owners,
# timestamps, directories, FIFOs, the reserved user.fpgalz4fs.* names and the stats counters.
. "$(dirname "$0")/lib.sh"
need_binaries

BLOCK_SIZE=64K
check "format and mount (64K blocks)" mount_store || finish
M="$MNT"

PY="$WS/px.py"
cat >"$PY" <<'PYEOF'
import errno, hashlib, mmap, os, stat, sys, time

def data(n, seed):
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.shake_256(b"%d-%d" % (seed, i)).digest(4096) if i % 3 == 0 else \
            (b"seed %d chunk %d: some compressible text " % (seed, i)) * 60
        i += 1
    return bytes(out[:n])

def readall(path):
    with open(path, "rb") as f:
        return f.read()

def expect(cond, msg):
    if not cond:
        print("FAILED:", msg)
        sys.exit(1)

def first_diff(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n if len(a) != len(b) else -1

def same(a, b, what):
    d = first_diff(a, b)
    expect(d < 0, "%s: contents differ at byte %d (lengths %d, %d)" % (what, d, len(a), len(b)))

def errno_of(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return e.errno
    return 0

cmd = sys.argv[1]
a = sys.argv[2:]

if cmd == "rename-open":
    src, dst = a
    d1, d2 = data(300000, 1), data(200000, 2)
    fd = os.open(src, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, d1)
    os.rename(src, dst)
    expect(not os.path.exists(src), "old name still exists after rename")
    os.write(fd, d2)                       # keeps writing after the rename
    got = os.pread(fd, 500000, 0)
    same(got, d1 + d2, "read through the descriptor after rename")
    os.close(fd)
    same(readall(dst), d1 + d2, "content under the new name")
    print("ok")

elif cmd == "unlink-open":
    path = a[0]
    d1, d2 = data(150000, 3), data(70001, 4)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, d1)
    os.fsync(fd)
    os.unlink(path)
    expect(not os.path.exists(path), "name still exists after unlink")
    os.write(fd, d2)
    st = os.fstat(fd)
    expect(st.st_nlink == 0, "st_nlink of an unlinked open file is %d" % st.st_nlink)
    expect(st.st_size == len(d1) + len(d2), "fstat size %d" % st.st_size)
    same(os.pread(fd, 300000, 0), d1 + d2, "read of the unlinked open file")
    os.ftruncate(fd, 1000)
    same(os.pread(fd, 300000, 0), d1[:1000], "read after truncate of the unlinked file")
    # a new file with the same name is a different file
    with open(path, "wb") as f:
        f.write(b"new file")
    same(os.pread(fd, 300000, 0), d1[:1000], "unlinked file after a new one took its name")
    os.close(fd)
    same(readall(path), b"new file", "the new file")
    os.unlink(path)
    print("ok")

elif cmd == "two-fds":
    path = a[0]
    fd1 = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fd2 = os.open(path, os.O_RDWR)
    d1, d2, d3 = data(100000, 5), data(100000, 6), data(5000, 7)
    os.pwrite(fd1, d1, 0)
    os.pwrite(fd2, d2, 100000)
    same(os.pread(fd1, 300000, 0), d1 + d2, "fd1 sees fd2's write")
    same(os.pread(fd2, 300000, 0), d1 + d2, "fd2 sees fd1's write")
    os.pwrite(fd2, d3, 50000)
    exp = bytearray(d1 + d2)
    exp[50000:55000] = d3
    same(os.pread(fd1, 300000, 0), bytes(exp), "fd1 sees fd2's overwrite")
    os.ftruncate(fd1, 123456)
    expect(os.fstat(fd2).st_size == 123456, "fd2 sees fd1's truncate: %d" % os.fstat(fd2).st_size)
    os.close(fd1)
    os.pwrite(fd2, b"tail", 123456)        # fd2 keeps working after fd1 closed
    os.close(fd2)
    same(readall(path), bytes(exp[:123456]) + b"tail", "content after both closed")
    print("ok")

elif cmd == "proc-writer":
    # writes region [i*chunk, (i+1)*chunk) for i = idx, idx+n, ... many times
    path, idx, n, chunk, rounds = a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4])
    fd = os.open(path, os.O_RDWR)
    for r in range(rounds):
        for i in range(idx, 32, n):
            os.pwrite(fd, data(chunk, 1000 + i + 100 * r), i * chunk)
    os.close(fd)

elif cmd == "proc-check":
    path, n, chunk, rounds = a[0], int(a[1]), int(a[2]), int(a[3])
    exp = b"".join(data(chunk, 1000 + i + 100 * (rounds - 1)) for i in range(32))
    same(readall(path), exp, "content written by %d processes" % n)
    print("ok")

elif cmd == "proc-see":
    # one process writes, another reads: what write() returned is visible to the other
    path = a[0]
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w); os.close(r2)
        rfd = os.open(path, os.O_RDONLY)
        ok = True
        for k in range(50):
            off = int.from_bytes(os.read(r, 8), "little")
            want = data(3000, 300 + k)
            got = os.pread(rfd, 3000, off)
            if got != want:
                ok = False
            os.write(w2, b"1" if got == want else b"0")
        os._exit(0 if ok else 1)
    os.close(r); os.close(w2)
    bad = 0
    for k in range(50):
        off = (k * 7919) % 400000
        os.pwrite(fd, data(3000, 300 + k), off)
        os.write(w, off.to_bytes(8, "little"))
        if os.read(r2, 1) != b"1":
            bad += 1
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    expect(bad == 0 and status == 0, "%d of 50 writes not seen by the other process" % bad)
    print("ok")

elif cmd == "ftruncate":
    path = a[0]
    d = data(200000, 8)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, d)
    os.ftruncate(fd, 70000)
    expect(os.fstat(fd).st_size == 70000, "size after ftruncate down")
    os.ftruncate(fd, 300000)
    same(os.pread(fd, 400000, 0), d[:70000] + bytes(230000), "ftruncate down then up")
    os.ftruncate(fd, 0)
    expect(os.pread(fd, 10, 0) == b"", "read after ftruncate 0")
    os.pwrite(fd, b"x", 65535)
    os.close(fd)
    same(readall(path), bytes(65535) + b"x", "write after ftruncate 0")
    print("ok")

elif cmd == "seek":
    path = a[0]
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    offs = sorted(set([0, 1, 4095, 65535, 65536, 65537, size // 2, size - 1] +
                      [size * k // 17 for k in range(17)]))
    for off in offs:
        if off < 0 or off >= size:
            continue
        for whence, name in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
            try:
                r = os.lseek(fd, off, whence)
            except OSError as e:
                if whence == os.SEEK_DATA and e.errno == errno.ENXIO:
                    # only valid when there is no data from off to the end
                    tail = os.pread(fd, size - off, off)
                    expect(tail.count(0) == len(tail),
                           "SEEK_DATA at %d gave ENXIO but data follows" % off)
                    continue
                expect(False, "%s at %d (size %d): %s" % (name, off, size, e))
            expect(off <= r <= size, "%s at %d returned %d (size %d)" % (name, off, r, size))
            if whence == os.SEEK_DATA:
                skipped = os.pread(fd, r - off, off) if r > off else b""
                expect(skipped.count(0) == len(skipped),
                       "SEEK_DATA at %d skipped non-zero bytes up to %d" % (off, r))
            else:
                if r < size:
                    pass  # a hole may be reported anywhere data are zero, or at EOF
    for off in (size, size + 1, size + 100000):
        for whence, name in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
            e = errno_of(os.lseek, fd, off, whence)
            expect(e == errno.ENXIO, "%s at %d past EOF (size %d): errno %d, want ENXIO" %
                   (name, off, size, e))
    os.close(fd)
    print("ok")

elif cmd == "append-fsync":
    path, rounds = a[0], int(a[1])
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    exp = bytearray()
    t0 = time.monotonic()
    for i in range(rounds):
        rec = b"record %06d %s\n" % (i, b"z" * (i % 97))
        os.write(fd, rec)
        os.fsync(fd)
        exp += rec
    dt = time.monotonic() - t0
    os.close(fd)
    print("%d append+fsync rounds took %.2f s" % (rounds, dt))
    same(readall(path), bytes(exp), "appended content")
    expect(dt <= 60, "%d rounds took %.1f s (limit 60 s)" % (rounds, dt))
    print("ok")

elif cmd == "mmap-read":
    path, ref = a
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        same(m[:], readall(ref), "mmap read")
    print("ok")

elif cmd == "mmap-write":
    path, expf = a
    d = data(300000, 9)
    with open(path, "wb") as f:
        f.write(d)
    exp = bytearray(d)
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    for k, off in enumerate((0, 4095, 65530, 131072, 299990)):
        patch = data(min(5000, 300000 - off), 40 + k)
        m[off:off + len(patch)] = patch
        exp[off:off + len(patch)] = patch
    m.flush()
    same(os.pread(fd, 400000, 0), bytes(exp), "read(2) of the mapped file after msync")
    m[10:20] = b"0123456789"                 # not flushed: munmap + close must keep it
    exp[10:20] = b"0123456789"
    m.close()
    os.close(fd)
    same(readall(path), bytes(exp), "read after munmap and close")
    with open(expf, "wb") as f:
        f.write(exp)
    print("ok")

elif cmd == "xattr-reserved":
    path = a[0]
    for name in ("user.fpgalz4fs.stats", "user.fpgalz4fs.foo", "user.fpgalz4fs.version"):
        e = errno_of(os.setxattr, path, name, b"1")
        expect(e == errno.EPERM, "setxattr %s: errno %d, want EPERM" % (name, e))
        e = errno_of(os.removexattr, path, name)
        expect(e == errno.EPERM, "removexattr %s: errno %d, want EPERM" % (name, e))
    print("ok")

elif cmd == "stats":
    text = sys.stdin.read()
    expect(text.endswith("\n"), "stats do not end with a newline")
    kv = {}
    for line in text.splitlines():
        expect("=" in line, "not key=value: %r" % line)
        k, v = line.split("=", 1)
        kv[k] = v
    want = ["backend", "bricks_card", "bricks_sw", "blocks_card", "blocks_sw", "fallback_busy",
            "fallback_error", "fallback_small", "card_idle_us", "bytes_in", "bytes_out"]
    missing = [k for k in want if k not in kv]
    expect(not missing, "missing keys: %s" % missing)
    expect(kv["backend"] != "", "empty backend")
    for k, v in kv.items():
        if k == "backend" or not v[:1].isdigit():
            continue
        expect(len(v) == 20 and v.isdigit(), "%s=%s is not 20 digits" % (k, v))
    for k in want[1:]:
        expect(len(kv[k]) == 20 and kv[k].isdigit(), "%s=%s is not 20 digits" % (k, kv[k]))
    expect(int(kv["bytes_in"]) > 0, "bytes_in is 0 after writes")
    print("backend=%s bytes_in=%d bytes_out=%d" % (kv["backend"], int(kv["bytes_in"]),
                                                    int(kv["bytes_out"])))
    print("ok")

elif cmd == "errno":
    # errno NAME OP ARGS...: the call must fail with that errno
    want = getattr(errno, a[0])
    op = a[1]
    fns = {"open-w": lambda p: os.close(os.open(p, os.O_WRONLY)),
           "open-r": lambda p: os.close(os.open(p, os.O_RDONLY)),
           "rmdir": os.rmdir, "unlink": os.unlink}
    e = errno_of(fns[op], *a[2:])
    expect(e == want, "%s %s: errno %d (%s), want %s" % (op, a[2:], e, os.strerror(e) if e else "ok", a[0]))
    print("ok")

else:
    sys.exit("unknown command " + cmd)
PYEOF

px() { python3 "$PY" "$@"; }

# ---------------------------------------------------------------- open files
check "rename of an open file, writing after" px rename-open "$M/ren-a" "$M/ren-b"
check "unlink of an open file, reading and writing after" px unlink-open "$M/unl"
check "two descriptors in one process" px two-fds "$M/twofd"

# two processes writing disjoint chunks of one file at once
head -c $((32 * 65536)) /dev/zero >"$M/twoproc" 2>/dev/null
two_procs() {
    px proc-writer "$M/twoproc" 0 2 65536 3 &
    local p1=$!
    px proc-writer "$M/twoproc" 1 2 65536 3 &
    local p2=$!
    wait $p1 || return 1
    wait $p2 || return 1
    px proc-check "$M/twoproc" 2 65536 3
}
check "two processes writing one file" two_procs
check "a write is visible to another process at once" px proc-see "$M/see"

# ---------------------------------------------------------------- truncate, holes
gen_file "$WS/t-src" 300000 text 11
cp "$WS/t-src" "$M/trunc"
truncate_checks() {
    truncate -s 100000 "$M/trunc" || return 1
    [ "$(stat -c %s "$M/trunc")" = 100000 ] || { echo "size after truncate down"; return 1; }
    cmp "$M/trunc" <(head -c 100000 "$WS/t-src") || return 1
    truncate -s 5000000 "$M/trunc" || return 1
    [ "$(stat -c %s "$M/trunc")" = 5000000 ] || { echo "size after truncate up"; return 1; }
    cmp "$M/trunc" <(head -c 100000 "$WS/t-src"; head -c 4900000 /dev/zero) || return 1
    truncate -s 65536 "$M/trunc" && cmp "$M/trunc" <(head -c 65536 "$WS/t-src")
}
check "truncate -s down and up" truncate_checks
check "ftruncate down, up, 0" px ftruncate "$M/ftrunc"

holes() {
    printf 'start' >"$M/holes" || return 1
    dd if="$WS/t-src" of="$M/holes" bs=1000 count=7 seek=3000 conv=notrunc status=none || return 1
    [ "$(stat -c %s "$M/holes")" = 3007000 ] || { echo "size $(stat -c %s "$M/holes")"; return 1; }
    cmp "$M/holes" <(printf 'start'; head -c 2999995 /dev/zero; head -c 7000 "$WS/t-src")
}
check "write past the end leaves a hole that reads as zeros" holes

fallocate_checks() {
    fallocate -l 5000000 "$M/falloc" || return 1
    [ "$(stat -c %s "$M/falloc")" = 5000000 ] || { echo "size after fallocate -l"; return 1; }
    cmp "$M/falloc" <(head -c 5000000 /dev/zero) || return 1
    gen_file "$WS/p-src" 400000 random 12
    cp "$WS/p-src" "$M/punch" || return 1
    fallocate -p -o 70000 -l 131072 "$M/punch" || return 1
    [ "$(stat -c %s "$M/punch")" = 400000 ] || { echo "punch hole changed the size"; return 1; }
    cmp "$M/punch" <(head -c 70000 "$WS/p-src"; head -c 131072 /dev/zero; tail -c +$((70000 + 131072 + 1)) "$WS/p-src")
}
check "fallocate -l and fallocate -p (punch hole reads zeros)" fallocate_checks
check "SEEK_DATA/SEEK_HOLE on a file with holes" px seek "$M/holes"
check "SEEK_DATA/SEEK_HOLE on a punched file" px seek "$M/punch"
check "SEEK_DATA/SEEK_HOLE on a text file" px seek "$M/trunc"

# ---------------------------------------------------------------- appends
appends() {
    local i
    : >"$M/appended"
    : >"$WS/appended"
    for i in $(seq 1 300); do
        echo "line $i of the append test" >>"$M/appended" || return 1
        echo "line $i of the append test" >>"$WS/appended"
    done
    cmp "$M/appended" "$WS/appended"
}
check "O_APPEND (>> 300 times)" appends
check_show "1000 append+fsync rounds (limit 60 s)" px append-fsync "$M/fsynced" 1000

# ---------------------------------------------------------------- mmap
gen_file "$WS/m-src" 1500000 mixed 13
cp "$WS/m-src" "$M/mapped"
check "mmap read" px mmap-read "$M/mapped" "$WS/m-src"
check "shared writable mmap" px mmap-write "$M/mmapw" "$WS/mmapw.expected"

# ---------------------------------------------------------------- metadata
check "setfattr user.test" setfattr -n user.test -v hello "$M/mapped"
check "getfattr user.test" test "$(getfattr --only-values -n user.test "$M/mapped" 2>/dev/null)" = hello
check "listxattr shows user.test" bash -c "getfattr -d '$M/mapped' | grep -q '^user.test='"
check "setfattr -x user.test" bash -c "setfattr -n user.gone -v 1 '$M/mapped' && setfattr -x user.gone '$M/mapped' && ! getfattr -n user.gone '$M/mapped' 2>/dev/null"
check "xattr on a directory" bash -c "mkdir '$M/xdir' && setfattr -n user.d -v dv '$M/xdir' && test \"\$(getfattr --only-values -n user.d '$M/xdir')\" = dv"

check "symlink" ln -s mapped "$M/sym"
check "readlink" test "$(readlink "$M/sym")" = mapped
check "reading through a symlink" cmp "$M/sym" "$WS/m-src"
check "long symlink target" bash -c "t=\$(printf 'x%.0s' \$(seq 1 1000)); ln -s \"\$t\" '$M/longsym' && test \"\$(readlink '$M/longsym')\" = \"\$t\""

hardlinks() {
    printf 'original' >"$M/hl-a" || return 1
    ln "$M/hl-a" "$M/hl-b" || return 1
    [ "$(stat -c %i "$M/hl-a")" = "$(stat -c %i "$M/hl-b")" ] || { echo "inode numbers differ: $(stat -c %i "$M/hl-a") $(stat -c %i "$M/hl-b")"; return 1; }
    [ "$(stat -c %h "$M/hl-a")" = 2 ] || { echo "link count $(stat -c %h "$M/hl-a")"; return 1; }
    printf ' and more' >>"$M/hl-b" || return 1
    [ "$(cat "$M/hl-a")" = "original and more" ] || { echo "write through one link not seen through the other: '$(cat "$M/hl-a")'"; return 1; }
    [ "$(stat -c %s "$M/hl-a")" = 17 ] || { echo "size through the other link: $(stat -c %s "$M/hl-a")"; return 1; }
    [ "$(stat -c %i "$BACKING/hl-a")" = "$(stat -c %i "$BACKING/hl-b")" ] || { echo "backing files are not hard links"; return 1; }
    return 0
}
check "hard links: same inode, writes seen through both" hardlinks

perms() {
    printf 'p' >"$M/perm" || return 1
    chmod 640 "$M/perm" && [ "$(stat -c %a "$M/perm")" = 640 ] || { echo "mode $(stat -c %a "$M/perm")"; return 1; }
    chmod 4755 "$M/perm" && [ "$(stat -c %a "$M/perm")" = 4755 ] || { echo "mode $(stat -c %a "$M/perm")"; return 1; }
    chmod 600 "$M/perm" && [ "$(stat -c %a "$BACKING/perm")" = 600 ] || { echo "backing mode $(stat -c %a "$BACKING/perm")"; return 1; }
    mkdir "$M/pdir" && chmod 711 "$M/pdir" && [ "$(stat -c %a "$M/pdir")" = 711 ]
}
check "chmod" perms
owners() {
    printf 'o' >"$M/owned" || return 1
    chown 1234:5678 "$M/owned" || return 1
    [ "$(stat -c %u:%g "$M/owned")" = 1234:5678 ] || { echo "owner in mount $(stat -c %u:%g "$M/owned")"; return 1; }
    [ "$(stat -c %u:%g "$BACKING/owned")" = 1234:5678 ] || { echo "owner in backing $(stat -c %u:%g "$BACKING/owned")"; return 1; }
    chown -h 4321:8765 "$M/sym" && [ "$(stat -c %u:%g "$M/sym")" = 4321:8765 ]
}
check "chown" owners

times() {
    printf 't' >"$M/timed" || return 1
    touch -d '2001-02-03 04:05:06' "$M/timed" || return 1
    [ "$(stat -c %Y "$M/timed")" = "$(date -d '2001-02-03 04:05:06' +%s)" ] || { echo "mtime $(stat -c %Y "$M/timed")"; return 1; }
    touch -a -d '2002-02-03 04:05:06' "$M/timed" || return 1
    [ "$(stat -c %X "$M/timed")" = "$(date -d '2002-02-03 04:05:06' +%s)" ] || { echo "atime $(stat -c %X "$M/timed")"; return 1; }
    gen_file "$WS/cpa" 100000 text 14
    touch -d '1999-12-31 23:59:58.5' "$WS/cpa"
    cp -a "$WS/cpa" "$M/cpa" || return 1
    [ "$(stat -c %.9Y "$M/cpa")" = "$(stat -c %.9Y "$WS/cpa")" ] || { echo "cp -a mtime $(stat -c %.9Y "$M/cpa") vs $(stat -c %.9Y "$WS/cpa")"; return 1; }
    # the kernel stamps times from a coarse clock: compare with a file stamped the same way
    local before now
    printf r >"$M/ref" || return 1
    before=$(stat -c %Y "$M/ref")
    echo more >>"$M/cpa" || return 1
    now=$(stat -c %Y "$M/cpa")
    [ "$now" -ge "$before" ] || { echo "mtime not updated by a write: $now < $before"; return 1; }
    return 0
}
check "timestamps (touch -d, touch -a, cp -a, write)" times

dirs() {
    mkdir -p "$M/d1/d2/d3" || return 1
    [ -d "$M/d1/d2/d3" ] && [ -d "$BACKING/d1/d2/d3" ] || return 1
    printf 'x' >"$M/d1/d2/f" || return 1
    px errno ENOTEMPTY rmdir "$M/d1/d2" || return 1
    rm "$M/d1/d2/f" && rmdir "$M/d1/d2/d3" "$M/d1/d2" "$M/d1" || return 1
    [ ! -e "$M/d1" ] && [ ! -e "$BACKING/d1" ]
}
check "mkdir -p, rmdir (ENOTEMPTY when not empty)" dirs
fifo() {
    mkfifo "$M/fifo" || return 1
    [ "$(stat -c %F "$M/fifo")" = fifo ] || return 1
    [ -p "$BACKING/fifo" ] || { echo "backing object is not a fifo"; return 1; }
    (echo through-the-fifo >"$M/fifo") &
    local got
    got=$(timeout 20 cat "$M/fifo")
    wait
    [ "$got" = through-the-fifo ] || { echo "read '$got'"; return 1; }
    mknod "$M/fifo2" p && [ -p "$M/fifo2" ]
}
check "mkfifo/mknod p" fifo
check "rename over an existing file" bash -c "printf A >'$M/ra' && printf B >'$M/rb' && mv '$M/ra' '$M/rb' && test \"\$(cat '$M/rb')\" = A && test ! -e '$M/ra'"
check "rename of a directory" bash -c "mkdir -p '$M/rd/sub' && printf q >'$M/rd/sub/f' && mv '$M/rd' '$M/rd2' && test \"\$(cat '$M/rd2/sub/f')\" = q"
locks() {
    : >"$M/lockf" || return 1
    # the holder says when it holds the lock and keeps it until told to let go
    rm -f "$WS/lock-held" "$WS/lock-release"
    flock "$M/lockf" sh -c "touch '$WS/lock-held'; i=0; while [ ! -e '$WS/lock-release' ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done" &
    local holder=$! i
    for i in $(seq 1 200); do [ -e "$WS/lock-held" ] && break; sleep 0.1; done
    [ -e "$WS/lock-held" ] || { echo "flock: the first lock was never taken"; touch "$WS/lock-release"; wait $holder; return 1; }
    if flock -n "$M/lockf" true; then echo "flock: a second exclusive lock was granted"; touch "$WS/lock-release"; wait $holder; return 1; fi
    python3 -c "
import fcntl, os, sys
fd = os.open('$M/lockf', os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
pid = os.fork()
if pid == 0:
    fd2 = os.open('$M/lockf', os.O_RDWR)
    try:
        fcntl.lockf(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
        os._exit(1)          # granted: wrong
    except OSError:
        os._exit(0)
_, st = os.waitpid(pid, 0)
sys.exit('fcntl: a conflicting lock was granted' if st else 0)
" || { touch "$WS/lock-release"; wait $holder; return 1; }
    touch "$WS/lock-release"
    wait $holder
}
check "flock and fcntl locks between processes" locks
check "statfs (df)" df "$M"
check "st_blocks of a compressible file below its size" bash -c "head -c 4000000 /dev/zero >'$M/zeroblocks' && test \$(( \$(stat -c %b '$M/zeroblocks') * 512 )) -lt 4000000"
check "O_TRUNC of an existing file" bash -c ": >'$M/mapped.copy' && cp '$M/mapped' '$M/mapped.copy' && : >'$M/mapped.copy' && test \$(stat -c %s '$M/mapped.copy') = 0"

# ---------------------------------------------------------------- reserved names, counters
check "setfattr/removexattr of user.fpgalz4fs.* gives EPERM (file)" px xattr-reserved "$M/mapped"
check "setfattr/removexattr of user.fpgalz4fs.* gives EPERM (root)" px xattr-reserved "$M"
check "setfattr user.fpgalz4fs.stats fails (command)" _lib_negate setfattr -n user.fpgalz4fs.stats -v 0 "$M"
stats() { getfattr --only-values -n user.fpgalz4fs.stats "$M" | px stats; }
check "stats attribute: keys and 20-digit values" stats

# ---------------------------------------------------------------- after a remount
cp "$M/mapped" "$WS/mapped.now"
cp "$M/ren-b" "$WS/ren-b.now"
CPA_MTIME=$(stat -c %.9Y "$M/cpa")
check "remount" remount
check "renamed open file after remount" cmp "$M/ren-b" "$WS/ren-b.now"
check "two-process file after remount" px proc-check "$M/twoproc" 2 65536 3
check "appended file after remount" cmp "$M/appended" "$WS/appended"
check "shared mmap writes after remount" cmp "$M/mmapw" "$WS/mmapw.expected"
check "mmap read after remount" px mmap-read "$M/mapped" "$WS/mapped.now"
check "xattr after remount" test "$(getfattr --only-values -n user.test "$M/mapped" 2>/dev/null)" = hello
check "symlink after remount" test "$(readlink "$M/sym")" = mapped
check "hard links after remount" bash -c "test \$(stat -c %i '$M/hl-a') = \$(stat -c %i '$M/hl-b') && test \$(stat -c %h '$M/hl-a') = 2 && test \"\$(cat '$M/hl-b')\" = 'original and more'"
check "mode after remount" test "$(stat -c %a "$M/perm")" = 600
check "owner after remount" test "$(stat -c %u:%g "$M/owned")" = 1234:5678
check "mtime after remount" test "$(stat -c %Y "$M/timed")" = "$(date -d '2001-02-03 04:05:06' +%s)"
check "mtime (ns) after a write, after remount" test "$(stat -c %.9Y "$M/cpa")" = "$CPA_MTIME"
check "fifo after remount" test -p "$M/fifo"
check "holes after remount" cmp "$M/holes" <(printf 'start'; head -c 2999995 /dev/zero; head -c 7000 "$WS/t-src")
check "punched file after remount" cmp "$M/punch" <(head -c 70000 "$WS/p-src"; head -c 131072 /dev/zero; tail -c +$((70000 + 131072 + 1)) "$WS/p-src")
check "lz4 -d of every file equals the mount" lz4_check "$BACKING" "$M"
check "no leftover hidden files in the backing dir" bash -c "! find '$BACKING' -name '.fuse_hidden*' | grep -q ."
check "unmount" umount_store

finish
