#!/bin/bash
# t_badinput: what the daemon does with bad input: an unformatted directory, bad options, a
# second mount of one store, a corrupt block, a truncated backing file, foreign files, and a
# newer format version (in the superblock and in a file's marker).
. "$(dirname "$0")/lib.sh"
need_binaries

BLOCK_SIZE=64K

# Python helpers: walking LZ4 frames of a backing file, reading with an EIO-or-prefix rule.
PY="$WS/bad.py"
cat >"$PY" <<'PYEOF'
import errno, os, struct, sys

def u32(b, o):
    return struct.unpack_from("<I", b, o)[0]

def blocks(buf):
    """Yields (data_offset, stored_size, raw) for every data block of every LZ4 frame,
    skipping skippable frames, in file order."""
    pos = 0
    while pos + 4 <= len(buf):
        magic = u32(buf, pos)
        if 0x184D2A50 <= magic <= 0x184D2A5F:
            pos += 8 + u32(buf, pos + 4)
            continue
        if magic != 0x184D2204:
            return
        flg = buf[pos + 4]
        hlen = 4 + 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1
        bcheck = 4 if flg & 0x10 else 0
        ccheck = 4 if flg & 0x04 else 0
        pos += hlen
        while pos + 4 <= len(buf):
            word = u32(buf, pos)
            pos += 4
            if word == 0:
                pos += ccheck
                break
            size = word & 0x7FFFFFFF
            yield pos, size, bool(word & 0x80000000)
            pos += size + bcheck

cmd, a = sys.argv[1], sys.argv[2:]

if cmd in ("flip-in-block", "flip-in-last-block"):
    # flips one byte in the middle of the first (or last) data block of at least 64 bytes
    path = a[0]
    buf = bytearray(open(path, "rb").read())
    found = [b for b in blocks(buf) if b[1] >= 64]
    for off, size, raw in (found[-1:] if cmd == "flip-in-last-block" else found[:1]):
        if size >= 64:
            at = off + size // 2
            buf[at] ^= 0xFF
            with open(path, "r+b") as f:
                f.seek(at)
                f.write(bytes([buf[at]]))
            print("flipped byte %d (inside a %s block of %d bytes at %d) of %d" %
                  (at, "raw" if raw else "compressed", size, off, len(buf)))
            sys.exit(0)
    print("no data block found in", path)
    sys.exit(1)

elif cmd == "eio-or-prefix":
    # reads the file; an EIO is fine, data must be a prefix of the original; prints a summary
    path, orig, out = a
    want = open(orig, "rb").read()
    got = bytearray()
    err = 0
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            while True:
                b = os.read(fd, 1 << 16)
                if not b:
                    break
                got += b
        except OSError as e:
            err = e.errno
        os.close(fd)
    except OSError as e:
        err = e.errno
    open(out, "wb").write(got)
    if err == 0:
        open(out + ".eof", "w").close()   # the read reached the end of the file
    if err not in (0, errno.EIO):
        print("read failed with %s, want EIO or success" % errno.errorcode.get(err, err))
        sys.exit(1)
    if len(got) > len(want) or want[:len(got)] != bytes(got):
        n = min(len(got), len(want))
        d = next((i for i in range(n) if got[i] != want[i]), n)
        print("WRONG BYTES: read %d bytes (original %d), first difference at %d" %
              (len(got), len(want), d))
        sys.exit(1)
    print("read %d of %d bytes, then %s" % (len(got), len(want),
          "EIO" if err else "end of file"))

elif cmd == "read-range-ok":
    path, off, n = a[0], int(a[1]), int(a[2])
    fd = os.open(path, os.O_RDONLY)
    b = os.pread(fd, n, off)
    os.close(fd)
    print("read %d bytes at %d" % (len(b), off))

elif cmd == "set-marker-version":
    # sets the u32 after the first "FPLZ" marker magic in the first 128 bytes
    path, v = a[0], int(a[1])
    buf = open(path, "rb").read(128)
    i = buf.find(b"FPLZ")
    if i < 0:
        print("no marker magic in", path)
        sys.exit(1)
    with open(path, "r+b") as f:
        f.seek(i + 4)
        old = struct.unpack("<I", f.read(4))[0]
        f.seek(i + 4)
        f.write(struct.pack("<I", v))
    print("marker version at offset %d: %d -> %d" % (i + 4, old, v))

elif cmd == "set-sb-version":
    path, v = a[0], a[1]
    text = open(path, "rb").read()
    lines = text.split(b"\n")
    done = False
    for k, line in enumerate(lines):
        if line.startswith(b"format_version="):
            lines[k] = b"format_version=" + v.encode()
            done = True
    if not done:
        print("no format_version line in", path)
        sys.exit(1)
    open(path, "wb").write(b"\n".join(lines))

else:
    sys.exit("unknown command " + cmd)
PYEOF
py() { python3 "$PY" "$@"; }

# refused DESC WANT_REGEX BACKING MNT [ARGS...]: the daemon exits non-zero with a message
# (matching WANT_REGEX when not empty), leaves nothing mounted and no daemon running.
refused() {
    local want=$1 b=$2 m=$3; shift 3
    local out rc
    out=$(timeout 60 "$DAEMON" "$b" "$m" "$@" 2>&1)
    rc=$?
    echo "exit status $rc; output: $out"
    if [ $rc -eq 0 ]; then
        echo "the daemon accepted it"
        mountpoint -q "$m" && umount_at "$m" "$(_lib_daemon_pid_of "$b" "$m")"
        return 1
    fi
    [ $rc -eq 124 ] && { echo "timed out"; return 1; }
    [ -n "$out" ] || { echo "no message"; return 1; }
    if [ -n "$want" ] && ! printf '%s' "$out" | grep -qiE -- "$want"; then
        echo "message does not match /$want/"
        return 1
    fi
    if mountpoint -q "$m"; then
        echo "$m is mounted after a refusal"
        umount -l "$m"
        return 1
    fi
    sleep 0.2
    if _lib_daemon_pid_of "$b" "$m" >/dev/null; then
        echo "a daemon is left running"
        return 1
    fi
    return 0
}

# ---------------------------------------------------------------- command line
check "--version prints the version and the backends" bash -c "'$DAEMON' --version | head -n1 | grep -q '^fpgalz4fs ' && '$DAEMON' --version | sed -n 2p | grep -q '^backends: .*sw'"

mkdir -p "$WS/plain" "$WS/m-plain" "$WS/mnt2"
printf 'not a store' >"$WS/plain/somefile"
check "mount of an unformatted dir is refused, naming mkfpgalz4fs" refused mkfpgalz4fs "$WS/plain" "$WS/m-plain"
mkdir -p "$WS/plain-empty"
check "mount of an empty unformatted dir is refused, naming mkfpgalz4fs" refused mkfpgalz4fs "$WS/plain-empty" "$WS/m-plain"
check "mount of a missing backing dir is refused" refused "" "$WS/does-not-exist" "$WS/m-plain"
check "unformatted dir left untouched" bash -c "test \"\$(ls -A '$WS/plain')\" = somefile && test \"\$(ls -A '$WS/plain-empty')\" = ''"

check "format the store" format_store "$BACKING" -b 64K
check "engine=bogus is refused" refused "" "$BACKING" "$MNT" -o engine=bogus
check "mem_mb=abc is refused" refused "" "$BACKING" "$MNT" -o mem_mb=abc
check "sw_threads=-1 is refused" refused "" "$BACKING" "$MNT" -o sw_threads=-1
check "a missing mountpoint is refused" refused "" "$BACKING" "$WS/no/such/mnt"
check "mkfpgalz4fs refuses a non-empty dir" _lib_negate "$MKFS" "$WS/plain"
check "mkfpgalz4fs refuses an existing store" _lib_negate "$MKFS" "$BACKING"

# ---------------------------------------------------------------- what mount(8) passes
# fstab and mount.fuse3 pass options libfuse does not know: the daemon must accept them.
mount_with() {
    mount_store "$1" && test "$(ls -A "$MNT")" = "" && umount_store
}
for o in relatime,nodiratime strictatime,lazytime defaults,nofail,_netdev noauto,user rw,noatime,nodev,nosuid; do
    check "mount with -o $o" mount_with "$o"
done

# ---------------------------------------------------------------- mem_mb's default
# 256, or 64 per online core with more than 4 cores, at most a sixteenth of the memory
# (with engine=cuda 128 per core: t_cuda checks that one on a host with a GPU)
check_eq "mem_mb by default on $(getconf _NPROCESSORS_ONLN) cores (engine=sw)" \
    "mem_mb $(default_mem_mb 64)" "$(mem_said engine=sw)"
check_eq "mem_mb as given" "mem_mb 512" "$(mem_said mem_mb=512)"

# ---------------------------------------------------------------- umount; mount
# An unmount returns before its daemon has synced and let go of the store: a mount right after
# it waits for that daemon (up to 10 s, while no mount of the store is up) instead of calling
# the store mounted. The build before refused 7 of 15 such mounts on a busy machine.
gen_file "$WS/r.bin" 3000000 random 31
remount_at_once() {
    local i
    for ((i = 0; i < 10; i++)); do
        mount_store || return 1
        cp "$WS/r.bin" "$MNT/r$i" && fusermount3 -u "$MNT" || return 1
    done
    mount_store || return 1
    for ((i = 0; i < 10; i++)); do
        cmp "$WS/r.bin" "$MNT/r$i" && rm "$MNT/r$i" || return 1
    done
    umount_store
}
check "a mount right after each of 10 unmounts (umount; mount) finds the store free" remount_at_once

# ---------------------------------------------------------------- one daemon per store
if check "mount" mount_store; then
    FIRST_PID=$DAEMON_PID
    check "a second mount of the same store is refused" refused "" "$BACKING" "$WS/mnt2"
    check "the first mount still works" bash -c "echo still-here >'$MNT/alive' && test \"\$(cat '$MNT/alive')\" = still-here"
    check "the first daemon is alive" test -d "/proc/$FIRST_PID"

    # ------------------------------------------------------------ files for the damage tests
    gen_file "$WS/a.txt" 204800 text 21
    gen_file "$WS/b.txt" 204800 text 22
    gen_file "$WS/c.txt" 307200 text 23
    gen_file "$WS/d.txt" 307200 text 24
    gen_file "$WS/e.txt" 307200 mixed 25
    gen_file "$WS/v.txt" 100000 text 26
    gen_file "$WS/f.txt" 307200 text 27
    for f in a b c d e v f; do cp "$WS/$f.txt" "$MNT/$f.txt"; done
    check "unmount" umount_store
fi

# ---------------------------------------------------------------- a flipped byte
check "flip a byte inside a compressed block of a.txt" py flip-in-block "$BACKING/a.txt"
if check "mount after the damage" mount_store; then
    LOG1="$WS/logs/daemon-$LOG_SEQ.log"
    cat_eio() {
        local err
        err=$(cat "$MNT/a.txt" 2>&1 >/dev/null) && { echo "cat succeeded on a corrupt file"; return 1; }
        echo "cat: $err"
        printf '%s' "$err" | grep -qi "input/output error"
    }
    check "reading the corrupt file fails with EIO" cat_eio
    check "no wrong bytes: what can be read is a prefix of the original" py eio-or-prefix "$MNT/a.txt" "$WS/a.txt" "$WS/a.read"
    check "a block the damage does not touch still reads (last 64K block)" py read-range-ok "$MNT/a.txt" 196608 8192
    check "another file still reads fine" cmp "$MNT/b.txt" "$WS/b.txt"
    check "the daemon is alive after the EIO" daemon_alive
    check "the mount still answers" ls "$MNT"
    check "the log names the corrupt file" grep -q "a.txt" "$LOG1"
    check "unmount" umount_store
fi

# ---------------------------------------------------------------- truncated backing files
# c: the last 10 bytes cut (inside the trailer), d: 1000 bytes, e: half the file.
cut_and_date() {
    local f=$1 cut=$2 sz
    sz=$(stat -c %s "$BACKING/$f")
    truncate -s $((sz - cut)) "$BACKING/$f" || return 1
    touch -d '2010-10-10 10:10:10' "$BACKING/$f"
    echo "$f: $sz -> $((sz - cut)) bytes"
}
check "cut 10 bytes off c.txt" cut_and_date c.txt 10
check "cut 1000 bytes off d.txt" cut_and_date d.txt 1000
check "cut half of e.txt" cut_and_date e.txt $(( $(stat -c %s "$BACKING/e.txt") / 2 ))
# f: a flipped byte in its last block and no footer: a stat that walks the slots without
# checksums would keep that block, the repair at open drops it (a torn tail); what stat
# shows must be what reads find
check "flip a byte in f.txt's last block" py flip-in-last-block "$BACKING/f.txt"
check "cut f.txt's footer" cut_and_date f.txt 64
TORN_DATE=$(date -d '2010-10-10 10:10:10' +%s)
if check "mount after the cuts" mount_store; then
    for f in c d e f; do
        # the size stat shows before any open is the one the repair leaves (issue: a first
        # stat once showed the torn state's size, and reads then found another)
        size_before=$(stat -c %s "$MNT/$f.txt")
        check_show "$f.txt: reads with EIO or as a prefix of the original" py eio-or-prefix "$MNT/$f.txt" "$WS/$f.txt" "$WS/$f.read"
        if [ -e "$WS/$f.read.eof" ]; then
            check_eq "$f.txt: the size stat showed before the first open is what reads found" \
                "$(stat -c %s "$WS/$f.read")" "$size_before"
        fi
        check "$f.txt: stat size is at most the original" test "$(stat -c %s "$MNT/$f.txt")" -le "$(stat -c %s "$WS/$f.txt")"
        check "$f.txt: mtime kept by the repair" test "$(stat -c %Y "$MNT/$f.txt")" = "$TORN_DATE"
    done
    check "an undamaged file still reads" cmp "$MNT/b.txt" "$WS/b.txt"
    check "the daemon is alive" daemon_alive
    check "unmount" umount_store
    for f in c d e f; do
        after_repair() {
            local f=$1
            if [ -s "$WS/$f.read" ] || [ "$(stat -c %s "$WS/$f.txt")" = 0 ]; then
                _lib_lz4d "$BACKING/$f.txt" | cmp - "$WS/$f.read" || { cat "$WS/.lz4.err"; return 1; }
            else
                echo "nothing was read (EIO at once); not checking the backing file"
            fi
        }
        check "$f.txt: the backing file decodes with lz4 to what the mount showed" after_repair $f
        check "$f.txt: backing mtime kept" test "$(stat -c %Y "$BACKING/$f.txt")" = "$TORN_DATE"
    done
fi

# ---------------------------------------------------------------- foreign files
gen_file "$WS/plain.txt" 150000 text 31
gen_file "$WS/data.bin" 300000 random 32
gen_file "$WS/lz4src" 200000 text 33
lz4 -q -c "$WS/lz4src" >"$WS/real.lz4"
cp "$WS/plain.txt" "$WS/data.bin" "$WS/real.lz4" "$BACKING/"
mkdir -p "$BACKING/fdir"
cp "$WS/plain.txt" "$BACKING/fdir/nested.txt"
: >"$BACKING/empty-foreign"
if check "mount with foreign files" mount_store; then
    check "foreign text file shown byte for byte" cmp "$MNT/plain.txt" "$WS/plain.txt"
    check "foreign binary file shown byte for byte" cmp "$MNT/data.bin" "$WS/data.bin"
    check "a real .lz4 file is shown as its lz4 bytes, not decoded" cmp "$MNT/real.lz4" "$WS/real.lz4"
    check "foreign file in a subdir" cmp "$MNT/fdir/nested.txt" "$WS/plain.txt"
    check "empty foreign file" test -f "$MNT/empty-foreign" -a ! -s "$MNT/empty-foreign"
    check "foreign sizes in stat" test "$(stat -c %s "$MNT/data.bin")" = 300000
    check "lz4 -d of the .lz4 through the mount" bash -c "lz4 -q -d -c '$MNT/real.lz4' | cmp - '$WS/lz4src'"
    # writes pass through
    printf 'appended line\n' >>"$WS/plain.txt"
    check "append to a foreign file" bash -c "printf 'appended line\n' >>'$MNT/plain.txt'"
    printf 'MIDDLE' | dd of="$WS/data.bin" bs=1 seek=123456 conv=notrunc status=none
    check "overwrite inside a foreign file" bash -c "printf 'MIDDLE' | dd of='$MNT/data.bin' bs=1 seek=123456 conv=notrunc status=none"
    check "foreign file after the append (mount)" cmp "$MNT/plain.txt" "$WS/plain.txt"
    check "foreign file after the append (backing, still plain)" cmp "$BACKING/plain.txt" "$WS/plain.txt"
    check "foreign file after the overwrite (backing, still plain)" cmp "$BACKING/data.bin" "$WS/data.bin"
    check "unmount" umount_store
    check "foreign files after unmount are still plain" bash -c "cmp '$BACKING/plain.txt' '$WS/plain.txt' && cmp '$BACKING/data.bin' '$WS/data.bin' && cmp '$BACKING/real.lz4' '$WS/real.lz4'"
fi

# ---------------------------------------------------------------- newer format versions
# a file whose marker names a newer version: refused, never rewritten
check "set v.txt's marker version to 8" py set-marker-version "$BACKING/v.txt" 8
V_SUM=$(sum_of "$BACKING/v.txt")
if check "mount with a newer-version file" mount_store; then
    LOGV="$WS/logs/daemon-$LOG_SEQ.log"
    check "reading the newer-version file fails" _lib_negate cat "$MNT/v.txt"
    check "writing the newer-version file fails" _lib_negate bash -c "echo more >>'$MNT/v.txt'"
    check "truncating the newer-version file fails" _lib_negate truncate -s 0 "$MNT/v.txt"
    check "other files still read" cmp "$MNT/b.txt" "$WS/b.txt"
    check "the log names the newer-version file" grep -q "v.txt" "$LOGV"
    check "unmount" umount_store
fi
check "the newer-version file was not rewritten" test "$(sum_of "$BACKING/v.txt")" = "$V_SUM"

# a superblock with a newer format version (its checksum now mismatches too)
cp -p "$BACKING/.fpgalz4fs" "$WS/sb.orig"
check "set the superblock's format_version to 8" py set-sb-version "$BACKING/.fpgalz4fs" 8
SB_SUM=$(sum_of "$BACKING/.fpgalz4fs")
check "a store with a newer format version is refused" refused "" "$BACKING" "$MNT"
check "the superblock was not rewritten" test "$(sum_of "$BACKING/.fpgalz4fs")" = "$SB_SUM"
# a damaged superblock (one character changed in the uuid)
cp "$WS/sb.orig" "$BACKING/.fpgalz4fs"
sed -i 's/^\(uuid=.\)./\1z/' "$BACKING/.fpgalz4fs"
check "a superblock with a bad checksum is refused" refused "" "$BACKING" "$MNT"
cp -p "$WS/sb.orig" "$BACKING/.fpgalz4fs"
if check "the restored store mounts again" mount_store; then
    check "files intact after all of it" cmp "$MNT/b.txt" "$WS/b.txt"
    check "unmount" umount_store
fi

finish
