#!/bin/bash
# t_security: the daemon never touches anything outside the backing directory (docs/SECURITY.md).
# Symlinks in the backing directory that point outside it are shown as symlinks and never
# followed by the daemon itself: a create through a dangling symlink, setxattr/getxattr,
# utimes and chown of a symlink, rename, link and unlink over symlinks, a symlink swapped in
# place of a directory while lookups race. The mountpoint sits deeper than the backing
# directory, so a relative target "../escape/..." names a different place for the daemon
# (from the backing directory: $WS/escape) than for the kernel (from the mount: nothing), and
# anything that reaches $WS/escape was done by the daemon. Also: `..` from the root stays at
# the mount root's parent, the reserved user.fpgalz4fs.* attributes cannot be set or removed
# (EPERM, for root and other users), and with allow_other a user's hard link, rename and
# mknod stay the user's. Creation as the calling user with its umask and default_permissions
# are in t_access.
#
# Long form: SECURITY_RACE_SECONDS=60 (the symlink/directory swap race; default 3 s).
. "$(dirname "$0")/lib.sh"
need_binaries

if [ "$(id -u)" != 0 ]; then
    skip "t_security needs root (to act as another user)"
    finish
fi
RACE_S=${SECURITY_RACE_SECONDS:-3}
U=65534
G=65534
as_user() { as_uid $U "$@"; }
SYSPY=/usr/bin/python3

ESC="$WS/escape"                     # outside the store: nothing may appear or change here
mkdir -p "$ESC/dir"
echo "outside secret" >"$ESC/secret"
echo "outside dir file" >"$ESC/dir/inside"
chmod 755 "$ESC" "$ESC/dir"
snapshot() { (cd "$ESC" && find . -printf '%p %y %m %u %g %s %T@ %n\n' | sort; getfattr -R -d -m - . 2>/dev/null); }
SNAP0=$(snapshot)
untouched() {
    local now
    now=$(snapshot)
    [ "$now" = "$SNAP0" ] && return 0
    diff <(printf '%s\n' "$SNAP0") <(printf '%s\n' "$now")
    return 1
}

MNT="$WS/m/deep/mnt"             # ../escape from the mount is $WS/m/deep/escape: absent
check "mount with allow_other,default_permissions" mount_store allow_other,default_permissions || finish
chmod 1777 "$MNT"

# backing-side symlinks (the backing directory's owner made them: trusted, never followed)
ln -s ../escape/secret "$BACKING/to_secret"
ln -s ../escape/newfile "$BACKING/dangling"
ln -s ../escape/dir "$BACKING/to_dir"

check_eq "a symlink pointing outside is shown as a symlink" "../escape/secret" "$(readlink "$MNT/to_secret")"
check "the kernel resolves it from the mount, where it names nothing" bash -c "! cat '$MNT/to_secret' 2>/dev/null"
check "O_NOFOLLOW open of the symlink fails with ELOOP" python3 -c "
import errno, os
try:
    os.open('$MNT/to_secret', os.O_RDONLY | os.O_NOFOLLOW)
except OSError as e:
    assert e.errno == errno.ELOOP, e
else:
    raise SystemExit('opened')"
check "a listing shows the symlinks as symlinks" bash -c "[ \"\$(find '$MNT' -maxdepth 1 -type l | wc -l)\" = 3 ]"

# create through a dangling symlink that the kernel does not know yet: the kernel has a
# negative entry for the name (looked up before the symlink existed), so CREATE reaches the
# daemon with a name that is now a dangling symlink in the backing directory
stat "$MNT/dangling2" >/dev/null 2>&1
ln -s ../escape/created "$BACKING/dangling2"
python3 -c "
import os
try:
    os.close(os.open('$MNT/dangling2', os.O_WRONLY | os.O_CREAT, 0o644))
except OSError as e:
    print('create:', e)" >"$WS/create.out" 2>&1
say "    create through a dangling symlink: $(cat "$WS/create.out")"
check "create through a dangling symlink creates nothing outside" test ! -e "$ESC/created"
check "the name is still the symlink in the backing directory" test -L "$BACKING/dangling2"
check "O_CREAT|O_EXCL on a dangling symlink fails (EEXIST), nothing outside" bash -c "
    ! python3 -c \"import os; os.open('$MNT/dangling', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\" 2>/dev/null &&
    test ! -e '$ESC/newfile'"

# metadata calls on the symlink itself
check "touch -h of a symlink changes the link, not its target" touch -h -d @1000000 "$MNT/to_secret"
check "chown -h of a symlink" chown -h 123:456 "$MNT/to_secret"
check_eq "the backing symlink got the owner" "123:456" "$(stat -c %u:%g "$BACKING/to_secret")"
setfattr -h -n trusted.sec -v 1 "$MNT/to_secret" 2>/dev/null
check "setxattr -h on a symlink does not reach its target" untouched
check "getxattr -h on a symlink does not read its target's attributes" bash -c "
    setfattr -n trusted.outside -v leak '$ESC/secret'
    out=\$(getfattr -h -d -m - '$MNT/to_secret' 2>/dev/null)
    setfattr -x trusted.outside '$ESC/secret'
    ! grep -q leak <<<\"\$out\""
SNAP0=$(snapshot)

# rename, link and unlink over symlinks
echo "inside data" >"$MNT/file"
check "rename of a file over a symlink replaces the symlink" mv -f "$MNT/file" "$MNT/to_secret"
check "the backing name is now a regular file" test -f "$BACKING/to_secret" -a ! -L "$BACKING/to_secret"
check_eq "the target outside is unchanged" "outside secret" "$(cat "$ESC/secret")"
ln -s ../escape/secret "$BACKING/to_secret2"
check "a hard link of a symlink links the symlink" ln -P "$MNT/to_secret2" "$MNT/hard"
check "the new name is a symlink in the backing directory" test -L "$BACKING/hard"
check "unlink of symlinks" rm -f "$MNT/to_secret2" "$MNT/hard" "$MNT/dangling" "$MNT/dangling2"
check "mv of a symlink to a directory moves the link" mv "$MNT/to_dir" "$MNT/to_dir2"
check "rename of a directory over a symlink fails (ENOTDIR) and keeps the symlink" bash -c "mkdir '$MNT/rdir' && ln -s ../escape/dir '$BACKING/to_dir3' && ! mv -T '$MNT/rdir' '$MNT/to_dir3' 2>/dev/null && test -L '$BACKING/to_dir3' && test -d '$BACKING/rdir'"
check "nothing outside changed (rename, link, unlink)" untouched

# a symlink swapped in place of a directory while lookups race
mkdir -p "$MNT/race"
echo "race file" >"$MNT/race/inside"
python3 - "$MNT/race" "$RACE_S" >"$WS/race.out" 2>&1 <<'EOF' &
import os, sys, time
d, secs = sys.argv[1], float(sys.argv[2])
end = time.time() + secs
seen = 0
while time.time() < end:
    for name in ("inside", "secret"):
        try:
            data = open(os.path.join(d, name), "rb").read()
            if b"outside" in data:
                print("READ OUTSIDE DATA through", name); sys.exit(1)
            seen += 1
        except OSError:
            pass
        try:
            os.listdir(d)
        except OSError:
            pass
print("reads:", seen)
EOF
RACER=$!
BG_PIDS+=("$RACER")
end=$((SECONDS + RACE_S))
swaps=0
while [ $SECONDS -lt $end ]; do
    mv -T "$BACKING/race" "$BACKING/race.real" && ln -s ../escape/dir "$BACKING/race"
    mv -T "$BACKING/race" "$BACKING/race.link" 2>/dev/null; rm -f "$BACKING/race.link"
    mv -T "$BACKING/race.real" "$BACKING/race"
    # the file "secret" exists only outside: put the symlink to $ESC in place for a moment
    ln -sfn ../escape "$BACKING/race.tmp" && mv -T "$BACKING/race.tmp" "$BACKING/racex" 2>/dev/null
    swaps=$((swaps + 1))
done
check "no read through the racing directory returned data from outside" wait "$RACER"
say "    $(cat "$WS/race.out"), $swaps swaps"
rm -f "$BACKING/racex"
check "nothing outside changed (race)" untouched

# `..` from the root
check_eq "stat of MNT/.. is the parent of the mountpoint" "$(stat -c %d:%i "$WS/m/deep")" "$(stat -c %d:%i "$MNT/..")"
check_eq "MNT/../.. stays outside the store, in the mountpoint's own tree" "$(stat -c %d:%i "$WS/m")" "$(stat -c %d:%i "$MNT/../..")"
check "openat(root fd, \"..\") is the mountpoint's parent" python3 -c "
import os
fd = os.open('$MNT', os.O_RDONLY | os.O_DIRECTORY)
p = os.open('..', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
assert os.fstat(p).st_ino == os.stat('$WS/m/deep').st_ino"

# reserved attributes
for who in root user; do
    run=""; [ $who = user ] && run=as_user
    echo x >"$MNT/attr-$who"; chmod 666 "$MNT/attr-$who"
    check "$who cannot set user.fpgalz4fs.stats (EPERM)" $run "$SYSPY" -c "
import errno, os
for name in ('user.fpgalz4fs.stats', 'user.fpgalz4fs.other'):
    for path in ('$MNT', '$MNT/attr-$who'):
        try:
            os.setxattr(path, name, b'1')
        except OSError as e:
            assert e.errno == errno.EPERM, (name, path, e)
        else:
            raise SystemExit('set ' + name)
        try:
            os.removexattr(path, name)
        except OSError as e:
            assert e.errno == errno.EPERM, (name, path, e)
        else:
            raise SystemExit('removed ' + name)"
done
check "no reserved attribute reached the backing files" bash -c "! getfattr -R -d -m 'user.fpgalz4fs' '$BACKING' 2>/dev/null | grep -q fpgalz4fs"

# allow_other: a user's hard link, rename and mknod stay the user's
check "user makes a file, a hard link, renames it and makes a fifo" as_user sh -c "
    umask 077; echo u >'$MNT/ufile' && ln '$MNT/ufile' '$MNT/ulink' && mv '$MNT/ulink' '$MNT/umoved' && mkfifo '$MNT/ufifo'"
check_eq "the user's names belong to the user in the backing directory" "$U:$G 600 $U:$G 600" \
    "$(stat -c '%u:%g %a' "$BACKING/umoved" "$BACKING/ufifo" | tr '\n' ' ' | sed 's/ $//')"
check "the user cannot rename root's file in the sticky root (EPERM)" bash -c "
    echo r >'$MNT/rootfile'; ! as_user mv '$MNT/rootfile' '$MNT/stolen' 2>/dev/null && test -f '$BACKING/rootfile'"
# File capabilities: the daemon answers the kernel's security.capability question (asked at
# every write) from memory once a file is known to have none; one set through the mount
# must be seen, and a write must drop it, as on any filesystem.
if command -v setcap >/dev/null; then
    cp /bin/true "$MNT/capprog" && chmod 755 "$MNT/capprog"
    echo x >>"$MNT/capprog"            # a write first: the file is known to have none
    check "setcap through the mount" setcap cap_net_raw+ep "$MNT/capprog"
    check_eq "getcap sees it" "cap_net_raw=ep" "$(getcap "$MNT/capprog" | awk '{print $2}')"
    check_eq "the backing file has it" "cap_net_raw=ep" "$(getcap "$BACKING/capprog" | awk '{print $2}')"
    echo x >>"$MNT/capprog"
    check_eq "a write drops it (through the mount)" "" "$(getcap "$MNT/capprog")"
    check_eq "a write drops it (the backing file)" "" "$(getcap "$BACKING/capprog")"
else
    skip "file capabilities: no setcap (Debian's libcap2-bin)"
fi
check "nothing outside changed (end)" untouched
check "unmount" umount_store

finish
