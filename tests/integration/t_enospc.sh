#!/bin/bash
# t_enospc: the backing directory on a small tmpfs that fills up. Writers must get ENOSPC at
# write, fsync or close, never silently: every file whose writes, fsync and close all
# succeeded must read back intact (after a remount too), other files stay intact, an
# overwrite in the middle of a file that cannot be stored leaves the old content, the mount
# works again once space is freed, and nothing is left half-written (every backing file
# decodes with lz4 -d, every file opens and reads through the mount).
#
# Long form: ENOSPC_MB=256 (a bigger filesystem; default 24 MiB).
. "$(dirname "$0")/lib.sh"
need_binaries

SIZE_MB=${ENOSPC_MB:-24}
SMALL="$WS/small"
mkdir -p "$SMALL"
if ! mount -t tmpfs -o size=${SIZE_MB}m tmpfs "$SMALL"; then
    skip "cannot mount a tmpfs (not root?)"
    finish
fi
# lib.sh's cleanup unmounts every mount under the workspace, this tmpfs included
BACKING="$SMALL/store"
BLOCK_SIZE=64K
ORIG="$WS/orig"
mkdir -p "$ORIG"
gen_file "$ORIG/keep" $((3 << 20)) text 21
gen_file "$ORIG/over" $((2 << 20)) mixed 22
head -c $(((SIZE_MB + 8) << 20)) /dev/urandom >"$ORIG/big"

PY="$WS/enospc.py"
cat >"$PY" <<'EOF'
import errno, hashlib, json, os, random, sys

def rnd_bytes(seed, n):
    return random.Random(seed).randbytes(n)

def write_close(fd, writes):
    """Runs writes(fd), then closes fd (even after a failed write); returns None when all
    succeeded, else the first error (which must be ENOSPC, or EIO after an earlier ENOSPC)."""
    err = None
    try:
        writes(fd)
    except OSError as e:
        err = e.errno
    try:
        os.close(fd)
    except OSError as e:
        err = err or e.errno
    return err

def put(path, data, do_fsync=True, chunk=1 << 20):
    """Writes a whole file; returns None when write, fsync and close all succeeded, else the
    error, as write_close."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        return e.errno
    def writes(fd):
        for off in range(0, len(data), chunk):
            os.write(fd, data[off:off + chunk])
        if do_fsync:
            os.fsync(fd)
    return write_close(fd, writes)

cmd, mnt, state = sys.argv[1], sys.argv[2], sys.argv[3]
st = json.load(open(state)) if os.path.exists(state) else {"files": {}, "errors": {}}

def ack(name, data):
    st["files"][name] = hashlib.sha256(data).hexdigest()

def note_err(what, e):
    st["errors"][what] = errno.errorcode.get(e, str(e))

if cmd == "small":
    # many small files until the disk is full
    for i in range(100000):
        data = (b"small file %d " % i) * 50 + rnd_bytes(i, 3000)
        e = put(os.path.join(mnt, "small", "f%05d" % i), data, do_fsync=False)
        if e:
            note_err("small", e); print("small files: %d stored, then %s" % (i, errno.errorcode[e])); break
        ack("small/f%05d" % i, data)
elif cmd == "append":
    # append + fsync until full
    path = os.path.join(mnt, "appended")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    acked = bytearray()           # grows in place: a bytes += would copy it on every step
    for i in range(100000):
        d = rnd_bytes(1000 + i, 20000)
        try:
            os.write(fd, d); os.fsync(fd)
        except OSError as e:
            note_err("append", e.errno); print("append: %d bytes acknowledged, then %s" % (len(acked), errno.errorcode[e.errno])); break
        acked += d
    try:
        os.close(fd)
    except OSError:
        pass
    st["append_acked"] = hashlib.sha256(acked).hexdigest(); st["append_len"] = len(acked)
elif cmd == "overwrite":
    # pwrite into the middle of MNT/over (full disk), fsync, close
    path = os.path.join(mnt, "over")
    new = rnd_bytes(77, 700000)
    fd = os.open(path, os.O_WRONLY)
    err = write_close(fd, lambda fd: (os.pwrite(fd, new, 300000), os.fsync(fd)))
    st["over_err"] = err
    print("overwrite in the middle of a full disk:", errno.errorcode.get(err, "stored") if err else "stored")
elif cmd == "mkext":
    data = rnd_bytes(5, 300000)
    if put(os.path.join(mnt, "ext"), data) is None:
        ack("ext", data)
elif cmd == "extend":
    # extend, then shrink to a partial block (its last block is rewritten) on a full disk
    path = os.path.join(mnt, "ext")
    data = rnd_bytes(5, 300000)
    if True:
        try:
            os.truncate(path, 5000000)        # a hole: costs no data blocks
            os.truncate(path, 100001)         # the last block is rewritten
            fd = os.open(path, os.O_WRONLY)
            os.fsync(fd); os.close(fd)
            ack("ext", data[:100001])
            print("truncate on a full disk: stored")
        except OSError as ex:
            note_err("extend", ex.errno); print("truncate on a full disk:", errno.errorcode[ex.errno])
elif cmd == "closefail":
    # a file whose close fails on a full disk, then read back with the kernel's copy of its
    # pages dropped: the daemon must still serve what was written, never zeros
    name = sys.argv[4]
    data = rnd_bytes(91 + len(name), (1 << 20) + 12345)
    fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = write_close(fd, lambda fd: os.write(fd, data))
    st[name] = errno.errorcode.get(err, str(err)) if err else "stored"
    if err is None:
        ack(name, data)
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    got = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
    os.close(fd)
    print("%s: close gave %s; read back %d of %d bytes, %s" % (name, st[name], len(got), len(data),
          "equal" if got == data else "DIFFERENT (%d zero bytes)" % got.count(0)))
    st[name + "_sha"] = hashlib.sha256(data).hexdigest()
    json.dump(st, open(state, "w"))
    sys.exit(0 if got == data else 1)
elif cmd == "drop":
    # the file was removed on purpose: verify no longer expects it
    name = sys.argv[4]
    st["files"].pop(name, None)
    if name == "appended":
        st.pop("append_len", None)
elif cmd == "ack":
    # the file is now expected intact (its retained data were stored)
    name = sys.argv[4]
    st["files"][name] = st[name + "_sha"]
elif cmd == "verify":
    # every acknowledged file holds its content
    bad = 0
    for name, h in sorted(st["files"].items()):
        try:
            got = hashlib.sha256(open(os.path.join(mnt, name), "rb").read()).hexdigest()
        except OSError as e:
            print("%s: %s" % (name, e)); bad += 1; continue
        if got != h:
            print("%s: acknowledged content lost" % name); bad += 1
    if "append_len" in st:
        got = open(os.path.join(mnt, "appended"), "rb").read()[:st["append_len"]]
        if hashlib.sha256(got).hexdigest() != st["append_acked"]:
            print("appended: the fsynced prefix (%d bytes) is not intact" % st["append_len"]); bad += 1
    print("verified %d files, %d bad" % (len(st["files"]), bad))
    sys.exit(1 if bad else 0)
json.dump(st, open(state, "w"))
EOF
STATE="$WS/state.json"
py() { python3 "$PY" "$1" "$MNT" "$STATE" "${2:-}"; }

# fill_rest: takes the remaining space of the small filesystem with a file outside the store
fill_rest() { head -c $((SIZE_MB << 20)) /dev/zero >"$SMALL/filler" 2>/dev/null; return 0; }
free_space() { rm -f "$SMALL/filler"; }
avail_kb() { df -k --output=avail "$SMALL" | tail -n 1 | tr -d ' '; }

check "mount on a ${SIZE_MB} MiB tmpfs" mount_store || finish
cp "$ORIG/keep" "$MNT/keep"
cp "$ORIG/over" "$MNT/over"
py mkext
check "files written before the disk fills" cmp "$ORIG/keep" "$MNT/keep"

# ---------------------------------------------------------------- a big cp that fills it
check_fails "cp of $((SIZE_MB + 8)) MiB of incompressible data fails (reports the full disk)" \
    cp "$ORIG/big" "$MNT/big"
say "    space left: $(avail_kb) KiB"
check "other files intact after the failed cp" cmp "$ORIG/keep" "$MNT/keep"
check "the failed cp's file reads through the mount (a prefix of the source or EIO-free)" \
    bash -c "n=\$(stat -c %s '$MNT/big') && cmp -n \$n '$ORIG/big' '$MNT/big'"
rm -f "$MNT/big"
# within CMD...: CMD succeeds within 50 tries, 0.1 s apart (the daemon acts on some
# requests asynchronously)
within() {
    local i
    for i in $(seq 1 50); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
# the kernel forgets a deleted inode at once, and the daemon (asynchronously) closes it
space_back() { [ "$(avail_kb)" -gt 4096 ]; }
check "space comes back after rm" within space_back
check "a cp works again once space is freed" bash -c "cp '$ORIG/keep' '$MNT/keep2' && cmp '$ORIG/keep' '$MNT/keep2'"
rm -f "$MNT/keep2"

# ---------------------------------------------------------------- many small files
mkdir -p "$MNT/small"
check_show "small files until the disk is full" py small
check "small files: the last one failed with ENOSPC or EIO" grep -Eq '"small": "(ENOSPC|EIO)"' "$STATE"
check "acknowledged small files intact" py verify
rm -rf "$MNT/small"
python3 - "$STATE" <<'EOF'
import json, sys
st = json.load(open(sys.argv[1])); st["files"] = {k: v for k, v in st["files"].items() if not k.startswith("small/")}
json.dump(st, open(sys.argv[1], "w"))
EOF

# ---------------------------------------------------------------- append + fsync until full
check_show "append + fsync until the disk is full" py append
check "append: stopped with ENOSPC or EIO" grep -Eq '"append": "(ENOSPC|EIO)"' "$STATE"
check "append: every fsynced byte is intact" py verify

# ---------------------------------------------------------------- overwrite on a full disk
fill_rest
say "    space left: $(avail_kb) KiB"
check_show "overwrite in the middle of a file on a full disk" py overwrite
over_ok() {
    local e
    e=$(python3 -c "import json; print(json.load(open('$STATE'))['over_err'])")
    if [ "$e" = None ]; then
        python3 - "$ORIG/over" "$MNT/over" <<'EOF'
import random, sys
o = bytearray(open(sys.argv[1], "rb").read()); n = random.Random(77).randbytes(700000)
o[300000:1000000] = n
sys.exit(0 if open(sys.argv[2], "rb").read() == bytes(o) else 1)
EOF
    else
        cmp "$ORIG/over" "$MNT/over"
    fi
}
# ---------------------------------------------------------------- truncate/extend when full
check_show "create, extend and shrink a file on a full disk" py extend
check "other files intact on the full disk" cmp "$ORIG/keep" "$MNT/keep"

# ---------------------------------------------------------------- after a remount
check "unmount while full" umount_store
check "every backing file decodes with lz4 -d (nothing half-written)" lz4_decodes "$BACKING"
free_space
if check "mount again once space is freed" mount_store; then
    check "over: old content, or the new one when it was acknowledged" over_ok
    check "acknowledged files intact after the remount" py verify
    check "keep intact after the remount" cmp "$ORIG/keep" "$MNT/keep"
    check "every file opens and reads through the mount" bash -c "find '$MNT' -type f -print0 | xargs -0 -r cat >/dev/null"
    check "lz4 -d of every backing file equals the mount" lz4_check "$BACKING" "$MNT"
    rm -f "$MNT/appended" && py drop appended
    check "a new file can be written and read back" bash -c "cp '$ORIG/over' '$MNT/new' && cmp '$ORIG/over' '$MNT/new'"

    # ------------------------------------------------------------ a close that fails
    # The kernel keeps the size and pages of a file whose close failed; the daemon keeps
    # its unstored data until a later close commits them or the kernel forgets the inode.
    touch "$MNT/closefail1" "$MNT/closefail2"   # a create needs space for its header
    fill_rest
    check_show "closefail1: close fails on a full disk, reads back as written" py closefail closefail1
    check "closefail1: close reported the full disk" grep -Eq '"closefail1": "(ENOSPC|EIO)"' "$STATE"
    check_show "closefail2: the same, for a file the kernel will forget" py closefail closefail2
    check "the daemon says it keeps the unstored data" grep -q "stay in memory until" "$(last_log)"
    free_space
    # stored N: the log says "now stored" N times
    stored() { [ "$(grep -c 'now stored' "$(last_log)")" -ge "$1" ]; }
    # the release that follows a close reaches the daemon asynchronously
    check "closefail1: a later close stores it once space is back" \
        bash -c "cat '$MNT/closefail1' >/dev/null" && check "closefail1: the daemon stored it" within stored 1
    py ack closefail1
    forget_then_stored() { sync && echo 2 >/proc/sys/vm/drop_caches; sleep 0.5; stored 2; }
    # 50 tries, 30 s at most
    check "closefail2: stored when the kernel forgets the inode" within forget_then_stored
    py ack closefail2

    # A file whose close failed, then deleted while something holds its inode (an O_PATH
    # descriptor: no open, so no release, and no forget while it lasts): its kept data and
    # descriptor go with its last name, so its space comes back when rm returns.
    touch "$MNT/closefail3"
    fill_rest
    kept_before=$(grep -c "stay in memory until" "$(last_log)")
    check_show "closefail3: close fails on a full disk" py closefail closefail3
    check "closefail3: close reported the full disk" grep -Eq '"closefail3": "(ENOSPC|EIO)"' "$STATE"
    kept_more() { [ "$(grep -c 'stay in memory until' "$(last_log)")" -gt "$kept_before" ]; }
    check "closefail3: the daemon keeps its data" within kept_more
    check "closefail3: removing its last name drops the kept data at once, inode still held" \
        python3 -c '
import os, sys
path, log = sys.argv[1], sys.argv[2]
said = lambda: open(log).read().count("went with the deleted file")
held = os.open(path, os.O_PATH)
before = said()
os.unlink(path)
after = said()
os.close(held)
print("log lines before and after the unlink:", before, after)
sys.exit(0 if after == before + 1 else 1)' "$MNT/closefail3" "$(last_log)"
    py drop closefail3
    free_space
    check "unmount" umount_store
    check "mount again" mount_store
    check "files kept after a failed close are intact after a remount" py verify
    check "unmount" umount_store
fi

finish
