#!/bin/bash
# t_dirs: directory listings, with and without handles. By default the daemon lets the kernel
# skip OPENDIR and RELEASEDIR (FUSE_CAP_NO_OPENDIR_SUPPORT) and each READDIR opens a stream
# of its own, positioned by the offset the kernel sends; with -o dir_handles every listing
# keeps a stream between requests. In both: a directory of DIRS_FILES entries with long names
# (many replies) lists every name once, telldir/seekdir return to where they were, two
# listings of one directory interleaved each see every name, rm -r removes a large directory
# while listing it, fsync of a directory works, and a directory removed behind the mount
# while a process holds it open lists as empty, as a removed directory does in the backing
# filesystem. Without handles no stream is held while a listing is open.
. "$(dirname "$0")/lib.sh"
need_binaries

N=${DIRS_FILES:-3000}
PY=/usr/bin/python3
cat >"$WS/dirs.py" <<'EOF'
import os, sys, time

def names(n):
    return sorted("%05d-%s" % (i, "n" * 120) for i in range(n))

def make(d, n):
    os.mkdir(d)
    for name in names(n):
        os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))

def same(d, n):
    got = sorted(os.listdir(d))
    if got != names(n):
        print("listing of %s: %d names, %d expected" % (d, len(got), n))
        return 1
    return 0

def interleaved(d, n):
    # two streams of one directory, read by turns
    a, b, got_a, got_b = os.scandir(d), os.scandir(d), [], []
    for x, y in zip(a, b):
        got_a.append(x.name), got_b.append(y.name)
    got_a += [x.name for x in a]
    got_b += [y.name for y in b]
    ok = sorted(got_a) == names(n) and sorted(got_b) == names(n)
    print("interleaved: %d and %d names" % (len(got_a), len(got_b)))
    return 0 if ok else 1

def hold(d, ready, go):
    # opens d, reads a few entries (the first reply), then holds it until told to go on
    it = os.scandir(d)
    first = [next(it).name for _ in range(5)]
    open(ready, "w").write("held")
    while not os.path.exists(go):
        time.sleep(0.05)
    rest = [e.name for e in it]
    return 0 if len(first) + len(rest) == len(os.listdir(d)) else 1

def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
    return 0

def gone(d, ready, go):
    # held open, never listed; the directory is removed behind the mount, then listed
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    open(ready, "w").write("held")
    while not os.path.exists(go):
        time.sleep(0.05)
    try:
        got = os.listdir(fd)
    except OSError as e:
        print("listing failed with", e)
        return 1
    print("listing gave", got)
    return 0 if got == [] else 1

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "make":
    make(args[0], int(args[1])); sys.exit(0)
if cmd in ("same", "interleaved"):
    sys.exit(globals()[cmd](args[0], int(args[1])))
if cmd in ("hold", "gone"):
    sys.exit(globals()[cmd](*args))
sys.exit(fsync_dir(args[0]))
EOF

# perl has telldir and seekdir: read a third, mark, read the rest twice from the mark
cat >"$WS/seek.pl" <<'EOF'
my ($d, $n) = @ARGV;
opendir(my $h, $d) or die "opendir: $!";
my $i = 0;
while ($i < $n / 3 && defined(my $e = readdir($h))) { $i++; }
my $pos = telldir($h);
my @a = readdir($h);
seekdir($h, $pos);
my @b = readdir($h);
closedir($h);
print scalar(@a), " and ", scalar(@b), " names after the mark\n";
exit((join("/", @a) eq join("/", @b) && @a > $n / 2) ? 0 : 1);
EOF

# wait_file FILE: up to 20 s for FILE to appear
wait_file() {
    local i
    for ((i = 0; i < 200; i++)); do [ -e "$1" ] && return 0; sleep 0.1; done
    return 1
}

for mode in default dir_handles; do
    BACKING="$WS/backing-$mode"
    MNT="$WS/mnt-$mode"
    BLOCK_SIZE=64K
    opts=""
    [ "$mode" = dir_handles ] && opts=dir_handles
    if ! check "[$mode] format and mount" mount_store "$opts"; then
        continue
    fi
    check "[$mode] make a directory of $N files with long names" $PY "$WS/dirs.py" make "$MNT/big" "$N"
    check "[$mode] it lists every name once" $PY "$WS/dirs.py" same "$MNT/big" "$N"
    check "[$mode] ls -f counts them" test "$(ls -f "$MNT/big" | grep -vc '^\.\.\?$')" -eq "$N"
    check "[$mode] telldir and seekdir return to the mark" perl "$WS/seek.pl" "$MNT/big" "$N"
    check "[$mode] two listings interleaved each see every name" \
        $PY "$WS/dirs.py" interleaved "$MNT/big" "$N"
    check "[$mode] fsync of a directory" $PY "$WS/dirs.py" fsync "$MNT/big"

    # a listing held open: without handles the daemon holds no stream for it
    rm -f "$WS/ready" "$WS/go"
    spawn $PY "$WS/dirs.py" hold "$MNT/big" "$WS/ready" "$WS/go"
    hpid=$!
    check "[$mode] a listing is held open after its first reply" wait_file "$WS/ready"
    held=$(stat_of "$(stats "$MNT")" dir_streams)
    if [ "$mode" = default ]; then
        check_eq "[$mode] no directory stream held for it" 0 "$held"
    else
        check_eq "[$mode] one directory stream held for it" 1 "$held"
    fi
    touch "$WS/go"
    check "[$mode] the held listing goes on to the end" wait "$hpid"

    # removed behind the mount while a process holds it open and before it was listed
    mkdir "$MNT/doomed" && touch "$MNT/doomed/f"
    rm -f "$WS/ready" "$WS/go"
    spawn $PY "$WS/dirs.py" gone "$MNT/doomed" "$WS/ready" "$WS/go"
    gpid=$!
    if check "[$mode] a directory held open" wait_file "$WS/ready"; then
        rm -r "$BACKING/doomed"
    fi
    touch "$WS/go"
    check "[$mode] it lists as empty after it was removed behind the mount" wait "$gpid"

    check "[$mode] rm -r of the large directory" rm -r "$MNT/big"
    check "[$mode] nothing left of it" test ! -e "$MNT/big" -a ! -e "$BACKING/big"
    check "[$mode] unmount" umount_store
done
finish
