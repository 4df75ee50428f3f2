#!/bin/bash
# t_corrupt: damaged backing files (random byte flips, truncations) while unmounted, and while
# mounted with the daemon's caches cold (files opened before the damage, none of them read).
# Every read either returns exactly the original bytes or fails with EIO (never wrong bytes:
# every successfully read range is compared with the original), a read that fails has a log
# line naming the file and the block, and the daemon keeps serving every other file and
# block. Damage stays out of the 59-byte marker: a file whose marker is damaged is, by the
# format's rule (docs/FORMAT.md 2.2), a foreign file shown byte for byte.
#
# Long form: CORRUPT_SEEDS="$(seq 1 200)" (default: 6 seeds).
. "$(dirname "$0")/lib.sh"
need_binaries

SEEDS=${CORRUPT_SEEDS:-1 2 3 4 5 6}
BLOCK_SIZE=64K
BS=65536
ORIG="$WS/orig"
TEMPLATE="$WS/template"
mkdir -p "$ORIG"
gen_file "$ORIG/text" $((1536 * 1024 + 333)) text 11
gen_file "$ORIG/mixed" $((1024 * 1024)) mixed 12
gen_file "$ORIG/rand" $((512 * 1024 + 5)) random
gen_file "$ORIG/small" 3000 text 13
gen_file "$ORIG/control" $((700 * 1024)) text 14
FILES="text mixed rand small appended"

PY="$WS/corrupt.py"
cat >"$PY" <<'EOF'
import errno, json, os, random, sys

MARKER = 59

def damage(path, rnd, mode):
    """Flips bytes or truncates PATH (never inside the marker); returns what was done."""
    size = os.path.getsize(path)
    if mode == "trunc":
        new = rnd.randint(MARKER, size - 1)
        os.truncate(path, new)
        return "truncated %d -> %d" % (size, new)
    flips = []
    with open(path, "r+b") as f:
        for _ in range(rnd.randint(1, 6)):
            off = rnd.randint(MARKER, size - 1)
            f.seek(off)
            b = f.read(1)[0]
            f.seek(off)
            f.write(bytes([b ^ (1 << rnd.randrange(8))]))
            flips.append(off)
    return "flipped bytes at %s" % flips

def read_check(fd, orig, bs):
    """Reads fd block by block; returns (eio_blocks, problems)."""
    eio, bad = [], []
    n = (len(orig) + bs - 1) // bs
    for i in range(n + 1):
        want = orig[i * bs:(i + 1) * bs]
        try:
            got = os.pread(fd, bs, i * bs)
        except OSError as e:
            if e.errno == errno.EIO:
                eio.append(i)
            else:
                bad.append("block %d: %s" % (i, e))
            continue
        if got != want[:len(got)]:
            d = next(k for k in range(len(got)) if k >= len(want) or got[k] != want[k])
            bad.append("block %d: WRONG BYTES at offset %d" % (i, i * bs + d))
        elif len(got) < len(want):
            bad.append("block %d: short read (%d of %d bytes)" % (i, len(got), len(want)))
    return eio, bad

cmd = sys.argv[1]
if cmd == "damage":            # damage BACKINGFILE SEED MODE
    print(damage(sys.argv[2], random.Random(sys.argv[3]), sys.argv[4]))
elif cmd == "flip_at":         # flip_at FILE OFFSET
    with open(sys.argv[2], "r+b") as f:
        f.seek(int(sys.argv[3])); b = f.read(1)[0]
        f.seek(int(sys.argv[3])); f.write(bytes([b ^ 0x40]))
elif cmd == "check":
    # check MNT ORIG BACKING SEED OPENFIRST MODE NAME...: damages each NAME's backing file
    # (with the file already open through the mount when OPENFIRST is 1), then reads it
    # through the mount. Prints "eio NAME BLOCK" lines; exits 1 on wrong bytes.
    mnt, orig, backing, seed, openfirst, mode = sys.argv[2:8]
    names = sys.argv[8:]
    rnd = random.Random(seed)
    fds, done = {}, {}
    if openfirst == "1":
        for n in names:
            fds[n] = os.open(os.path.join(mnt, n), os.O_RDONLY)
    for n in names if mode != "none" else []:
        m = mode if mode != "any" else rnd.choice(["flip", "flip", "trunc"])
        done[n] = damage(os.path.join(backing, n), rnd, m)
        print("damage %s: %s" % (n, done[n]))
    wrong = 0
    for n in names:
        data = open(os.path.join(orig, n), "rb").read()
        try:
            fd = fds[n] if n in fds else os.open(os.path.join(mnt, n), os.O_RDONLY)
        except OSError as e:
            # a damaged file may be refused at open, never shown wrong
            print("open %s: %s" % (n, e))
            if e.errno != errno.EIO:
                wrong += 1
            continue
        eio, bad = read_check(fd, data, 65536)
        os.close(fd)
        for b in eio:
            print("eio %s %d" % (n, b))
        for b in bad:
            print("%s: %s" % (n, b))
            if "WRONG" in b or ("short" in b and "truncated" not in done.get(n, "truncated")):
                wrong += 1
    sys.exit(1 if wrong else 0)
EOF

# appended: many fsynced appends (many frames, retired frames, old trailers)
make_template() {
    mount_store || return 1
    cp "$ORIG"/text "$ORIG"/mixed "$ORIG"/rand "$ORIG"/small "$ORIG"/control "$MNT"/ || return 1
    python3 - "$MNT/appended" "$ORIG/appended" <<'EOF' || return 1
import os, sys, random
r = random.Random(5)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
out = open(sys.argv[2], "wb")
for i in range(60):
    d = (b"append %d " % i) * r.randint(100, 3000)
    os.write(fd, d); os.fsync(fd); out.write(d)
os.close(fd)
EOF
    umount_store || return 1
    cp -a "$BACKING" "$TEMPLATE"
}
check "write the files and keep their backing store as a template" make_template || finish

fresh_store() { rm -rf "$BACKING"; cp -a "$TEMPLATE" "$BACKING"; }

# log_names LOG NAME BLOCK: the daemon logged a line naming the file and the block
log_names() { grep -E "/$2: block $3 " "$1"; }

# eio_logged OUT LOG: every "eio NAME BLOCK" line of OUT has its log line
eio_logged() {
    local n b bad=0
    while read -r _ n b; do
        log_names "$2" "$n" "$b" >/dev/null || { echo "no log line for $n block $b"; bad=1; }
    done < <(grep '^eio ' "$1")
    return $bad
}

serves_control() { cmp "$ORIG/control" "$MNT/control"; }

# ------------------------------------------------------------------ a flip inside a raw block
fresh_store
mid=$(( $(stat -c %s "$BACKING/rand") / 2 ))
python3 "$PY" flip_at "$BACKING/rand" "$mid"
if check "mount after a flip in the middle of a random (raw-stored) file" mount_store; then
    LOG=$WS/logs/daemon-$LOG_SEQ.log
    check "every read of the damaged file is right or EIO" python3 - "$MNT/rand" "$ORIG/rand" <<'EOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); orig = open(sys.argv[2], "rb").read()
eio = 0
for i in range((len(orig) + 65535) // 65536):
    try:
        got = os.pread(fd, 65536, i * 65536)
    except OSError as e:
        assert e.errno == errno.EIO, e
        eio += 1; continue
    assert got == orig[i * 65536:(i + 1) * 65536], "wrong bytes in block %d" % i
print("eio blocks:", eio)
assert eio == 1, "expected exactly one block to fail, got %d" % eio
EOF
    blk=$(grep -oE '/rand: block [0-9]+ ' "$LOG" | head -n 1)
    check "the log names the file and the block" test -n "$blk"
    say "    log: $(grep -m1 '/rand: block' "$LOG")"
    check "cat of the damaged file fails (EIO), not wrong bytes" bash -c "! cat '$MNT/rand' >/dev/null"
    check "other files still served" serves_control
    check "the damaged file's size is still known" test "$(stat -c %s "$MNT/rand")" = "$(stat -c %s "$ORIG/rand")"
    check "counters count the corrupt block" bash -c "getfattr --only-values -n user.fpgalz4fs.stats '$MNT' | grep -Eq '^corrupt_blocks=0*[1-9]'"
    check "unmount" umount_store
fi

# ------------------------------------------------- a damaged footer and a damaged block
# With the footer damaged, open repairs the file from its slots. A block whose checksum fails
# in a slot that is followed by more slots is damage, not a torn tail: the repair must keep
# it (reads of it give EIO) and cut nothing, so the file keeps its size and its other blocks.
fresh_store
check "flip a block of text and its footer's checksum" python3 - "$BACKING/text" <<'EOF'
import struct, sys
path = sys.argv[1]
bs = 65536                                     # format version 2 to 7: block i's frame is in its
with open(path, "r+b") as f:                   # slot at 59 + i * (bs + 64) (9.3, 64 KiB blocks),
    data = f.read()                            # or from its first page boundary (9.3.1)
    n = len(data)
    assert struct.unpack_from("<I", data, 31)[0] in (2, 3, 4, 5, 6, 7), "not a version 2 to 7 file"
    at = 59 + 5 * (bs + 64)
    if struct.unpack_from("<I", data, at)[0] != 0x184D2204:
        at = (at + 4095) // 4096 * 4096
    assert struct.unpack_from("<I", data, at)[0] == 0x184D2204, "no frame in slot 5"
    off = at + 15 + 4 + 100                    # header, size word, then the block's data
    for at in (off, n - 4):                    # data of block 5; the footer's XXH32
        f.seek(at); f.write(bytes([data[at] ^ 0x10]))
EOF
if check "mount with a damaged footer and block" mount_store; then
    LOG=$WS/logs/daemon-$LOG_SEQ.log
    check "the size is kept" test "$(stat -c %s "$MNT/text")" = "$(stat -c %s "$ORIG/text")"
    check "block 5 gives EIO, every other block its bytes" python3 - "$MNT/text" "$ORIG/text" <<'EOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); orig = open(sys.argv[2], "rb").read()
eio = []
for i in range((len(orig) + 65535) // 65536):
    try:
        got = os.pread(fd, 65536, i * 65536)
    except OSError as e:
        assert e.errno == errno.EIO, e
        eio.append(i); continue
    assert got == orig[i * 65536:(i + 1) * 65536], "wrong bytes in block %d" % i
assert eio == [5], "EIO blocks %s, expected [5]" % eio
EOF
    check "the repair cut nothing" grep -q '/text: repaired .* 0 bytes cut' "$LOG"
    check "unmount" umount_store
fi

# ------------------------------------------------------------------ random damage, many seeds
nseeds=0; eio_total=0
for seed in $SEEDS; do
    nseeds=$((nseeds + 1))
    for phase in unmounted mounted; do
        fresh_store
        OUT=$WS/seed-$seed-$phase.out
        # pick two files for this seed
        set -- $FILES
        shift $((seed % 5)); a=${1:-text}
        set -- $FILES
        shift $(((seed * 3 + 1) % 5)); b=${1:-small}
        [ "$a" = "$b" ] && b=control-not
        names="$a"; [ "$b" != control-not ] && names="$a $b"
        if [ $phase = unmounted ]; then
            # damage first, then mount: the daemon has never seen the files
            for n in $names; do
                python3 "$PY" damage "$BACKING/$n" "$seed-$n" "$( [ $((seed % 3)) = 0 ] && echo trunc || echo flip)"
            done >"$OUT.damage"
            mount_store >/dev/null 2>&1 || { fail_check "seed $seed $phase: mount"; continue; }
            LOG=$WS/logs/daemon-$LOG_SEQ.log
            { cat "$OUT.damage"; python3 "$PY" check "$MNT" "$ORIG" "$BACKING" "$seed" 0 none $names; } >"$OUT" 2>&1
        else
            mount_store >/dev/null 2>&1 || { fail_check "seed $seed $phase: mount"; continue; }
            LOG=$WS/logs/daemon-$LOG_SEQ.log
            python3 "$PY" check "$MNT" "$ORIG" "$BACKING" "$seed" 1 any $names >"$OUT" 2>&1
        fi
        rc=$?
        eio_total=$((eio_total + $(grep -c '^eio ' "$OUT")))
        if [ $rc -ne 0 ]; then
            fail_check "seed $seed $phase ($names): never wrong bytes" "$(head -c 2000 "$OUT")"
        else
            pass "seed $seed $phase ($names): never wrong bytes ($(grep -c '^eio ' "$OUT") EIO blocks)"
        fi
        eio_logged "$OUT" "$LOG" >"$OUT.log" || fail_check "seed $seed $phase: each EIO has a log line" "$(cat "$OUT.log") $(cat "$OUT")"
        serves_control || fail_check "seed $seed $phase: the daemon still serves other files"
        daemon_alive || fail_check "seed $seed $phase: the daemon is alive"
        umount_store || fail_check "seed $seed $phase: unmount"
    done
done
say "random damage: $nseeds seeds, $eio_total blocks gave EIO"
check "some random damage gave EIO (the test reaches the corrupt-block path)" test "$eio_total" -gt 0

finish
