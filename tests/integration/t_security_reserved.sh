#!/bin/bash
# t_security_reserved: names beginning with ".fpgalz4fs" at the top of a store belong to the
# store (the superblock, its temporary, the conversion temporaries), and root's tools write
# there (docs/SECURITY.md, "Reserved names"). Through a mount, at its root only, such names
# are invisible (lookup ENOENT, not listed) and nobody, root included, may make them: create,
# mknod, mkdir, symlink, link and rename to or from them fail. A symlink planted directly in
# the backing directory under such a name, pointing at a victim file, is never written
# through by mkfpgalz4fs (--force, --adopt, --compress-existing) or fsck.fpgalz4fs -y, and a
# superblock that is a symlink is refused by every one of them and by the daemon.
. "$(dirname "$0")/lib.sh"
need_binaries "$FSCK"

if [ "$(id -u)" != 0 ]; then
    skip "t_security_reserved needs root (to act as another user)"
    finish
fi
U=65534
G=65534
as_user() { as_uid $U "$@"; }
SYSPY=/usr/bin/python3

VICTIM="$WS/victim"                  # root's file outside the store: must never change
NEW="$WS/created-by-root"            # the target of a dangling symlink: must never appear
# each part starts from a fresh victim, so that one tool's failure does not show in the next
fresh_victim() {
    rm -f "$VICTIM" "$NEW"
    echo "root's own file" >"$VICTIM"
    chmod 644 "$VICTIM"
}
fresh_victim
VSUM=$(sum_of "$VICTIM")
victim_unchanged() {
    [ "$(sum_of "$VICTIM")" = "$VSUM" ] && [ ! -L "$VICTIM" ] && return 0
    echo "the victim changed:"; cat "$VICTIM"
    return 1
}
nothing_created() { test ! -e "$NEW"; }
# a store's superblock is a valid, regular file
sb_regular() { test -f "$1/.fpgalz4fs" -a ! -L "$1/.fpgalz4fs" && "$FSCK" -n "$1" >/dev/null; }
NAMES=".fpgalz4fs .fpgalz4fs.tmp .fpgalz4fs-convert.1f.tmp .fpgalz4fs-other"

# ---------------------------------------------------------------- through a mount
mkdir -p "$BACKING"
format_store "$BACKING" >/dev/null
echo "planted by the backing directory's owner" >"$BACKING/.fpgalz4fs-planted"
check "mount with allow_other,default_permissions" mount_store allow_other,default_permissions || finish
chmod 1777 "$MNT"
mkdir -m 1777 "$MNT/sub"

# Every reserved name at the root: invisible, and no call can make it (EPERM; ENOENT for a
# source that does not exist as far as the kernel knows). In a subdirectory they are plain
# names.
cat >"$WS/reserved.py" <<'EOF'
import errno, os, stat, sys
mnt, names = sys.argv[1], sys.argv[2:]
bad = []
src = os.path.join(mnt, "src-%d" % os.getpid())     # the caller's own file, to link and rename
open(src, "w").close()
def expect(what, errnos, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        if e.errno not in errnos:
            bad.append("%s: %s" % (what, e))
    else:
        bad.append("%s: succeeded" % what)
for n in names:
    p = os.path.join(mnt, n)
    expect("stat " + n, (errno.ENOENT,), os.lstat, p)
    expect("create " + n, (errno.EPERM,), lambda: os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)))
    expect("mknod fifo " + n, (errno.EPERM,), os.mknod, p, stat.S_IFIFO | 0o644)
    expect("mkdir " + n, (errno.EPERM,), os.mkdir, p)
    expect("symlink " + n, (errno.EPERM,), os.symlink, "/etc/passwd", p)
    expect("link to " + n, (errno.EPERM,), os.link, src, p)
    expect("rename to " + n, (errno.EPERM,), os.rename, src, p)
    expect("rename from " + n, (errno.ENOENT, errno.EPERM), os.rename, p, os.path.join(mnt, "got"))
    expect("unlink " + n, (errno.ENOENT,), os.unlink, p)
listed = [n for n in os.listdir(mnt) if n.startswith(".fpgalz4fs")]
if listed:
    bad.append("listed at the root: %s" % listed)
for n in names:
    q = os.path.join(mnt, "sub", n)
    try:
        os.close(os.open(q, os.O_WRONLY | os.O_CREAT, 0o644))
        os.rename(q, q + ".moved")
        os.unlink(q + ".moved")
    except OSError as e:
        bad.append("in a subdirectory, %s: %s" % (n, e))
os.unlink(src)
if bad:
    sys.exit("\n".join(bad))
EOF
for who in root user; do
    run=""; [ $who = user ] && run=as_user
    check "$who: reserved names at the root are invisible and cannot be made" \
        $run "$SYSPY" "$WS/reserved.py" "$MNT" $NAMES
done
check "the backing directory's own reserved name is hidden (lookup)" test ! -e "$MNT/.fpgalz4fs-planted"
check "the backing directory's own reserved name is not listed" bash -c "! ls -A '$MNT' | grep -q '^\\.fpgalz4fs'"
check_eq "no reserved name was made in the backing directory (the store's own: superblock, clean mark)" \
    ".fpgalz4fs .fpgalz4fs-clean .fpgalz4fs-planted" \
    "$(cd "$BACKING" && ls -A | grep '^\.fpgalz4fs' | tr '\n' ' ' | sed 's/ $//')"
check_fails "the attack: a user cannot plant .fpgalz4fs.tmp -> victim through the mount" \
    as_user ln -s "$VICTIM" "$MNT/.fpgalz4fs.tmp"
check "nothing was planted in the backing directory" test ! -L "$BACKING/.fpgalz4fs.tmp"
check "unmount" umount_store

# ---------------------------------------------------------------- mkfpgalz4fs --force
# Each part has a store of its own, so that a tool that fails one part leaves the next
# part's store as it should be.
plant() { rm -f "$1" && ln -s "$2" "$1"; }
new_store() { mkdir -p "$WS/$1" && format_store "$WS/$1" >/dev/null && echo "$WS/$1"; }
fresh_victim
S=$(new_store force)
plant "$S/.fpgalz4fs.tmp" "$VICTIM"
check "mkfpgalz4fs --force with .fpgalz4fs.tmp -> victim" "$MKFS" --force "$S"
check "mkfpgalz4fs --force did not write the victim" victim_unchanged
check "the superblock is a regular file again" sb_regular "$S"
check "the planted temporary is gone" test ! -L "$S/.fpgalz4fs.tmp"
S=$(new_store force-dangling)
plant "$S/.fpgalz4fs.tmp" "$NEW"
check "mkfpgalz4fs --force with a dangling .fpgalz4fs.tmp" "$MKFS" --force "$S"
check "mkfpgalz4fs --force created nothing through it" nothing_created

# a fresh format of a directory holding only a planted temporary (mkfpgalz4fs ignores it)
mkdir -p "$WS/fresh"
plant "$WS/fresh/.fpgalz4fs.tmp" "$VICTIM"
check "mkfpgalz4fs of a directory with .fpgalz4fs.tmp -> victim" "$MKFS" "$WS/fresh"
check "a fresh format did not write the victim" victim_unchanged
check "the fresh superblock is a regular file" sb_regular "$WS/fresh"

# ---------------------------------------------------------------- fsck.fpgalz4fs -y
fresh_victim
S=$(new_store fsck)
echo "some data" >"$S/plain"                        # a foreign file for fsck to look at
plant "$S/.fpgalz4fs.tmp" "$VICTIM"
"$FSCK" -y "$S" >"$WS/fsck.out" 2>&1
rc=$?
check "fsck -y with .fpgalz4fs.tmp -> victim runs (exit $rc)" test $rc -le 1
check "fsck -y did not write the victim" victim_unchanged
check "fsck -y left the planted name a symlink (not followed)" test -L "$S/.fpgalz4fs.tmp"

# ---------------------------------------------------------------- a superblock that is a symlink
fresh_victim
BACKING=$(new_store sb-symlink)
cp "$BACKING/.fpgalz4fs" "$VICTIM.sb" && VSBSUM=$(sum_of "$VICTIM.sb")
plant "$BACKING/.fpgalz4fs" "$VICTIM.sb"         # even a valid superblock elsewhere
check_fails "fsck refuses a superblock that is a symlink" "$FSCK" -n "$BACKING"
check_fails "mkfpgalz4fs --force refuses a superblock that is a symlink" "$MKFS" --force "$BACKING"
check_fails "mkfpgalz4fs --compress-existing refuses a superblock that is a symlink" "$MKFS" --compress-existing "$BACKING"
check "the mount refuses a superblock that is a symlink" mount_refused "" "symlink or not a regular file"
check_eq "the superblock's target is unchanged" "$VSBSUM" "$(sum_of "$VICTIM.sb")"
check "the superblock is still the symlink" test -L "$BACKING/.fpgalz4fs"

# ---------------------------------------------------------------- conversion
fresh_victim
# --adopt --compress-existing of a directory with files and a planted superblock temporary;
# then --compress-existing with planted conversion temporaries (at the top and deeper) named
# for the very files it converts.
C="$WS/conv"
mkdir -p "$C/sub"
gen_file "$C/a" 300000 text 1
gen_file "$C/sub/b" 200000 mixed 2
cp "$C/a" "$WS/a.orig" && cp "$C/sub/b" "$WS/b.orig"
plant "$C/.fpgalz4fs.tmp" "$VICTIM"
check "mkfpgalz4fs --adopt --compress-existing with .fpgalz4fs.tmp -> victim" "$MKFS" --adopt --compress-existing "$C"
check "--adopt did not write the victim" victim_unchanged
check "the adopted store's superblock is a regular file" sb_regular "$C"
check "the file was converted (lz4 -d gives it back)" bash -c "lz4 -q -d -c '$C/a' | cmp - '$WS/a.orig'"

fresh_victim
D="$WS/conv2"
mkdir -p "$D/sub"
cp "$WS/a.orig" "$D/a" && cp "$WS/b.orig" "$D/sub/b"
check "mkfpgalz4fs --adopt (no conversion)" "$MKFS" --adopt "$D"
plant "$D/$(printf '.fpgalz4fs-convert.%x.tmp' "$(stat -c %i "$D/a")")" "$VICTIM"
plant "$D/sub/$(printf '.fpgalz4fs-convert.%x.tmp' "$(stat -c %i "$D/sub/b")")" "$NEW"
check "mkfpgalz4fs --compress-existing with planted conversion temporaries" "$MKFS" --compress-existing "$D"
check "--compress-existing did not write the victim" victim_unchanged
check "--compress-existing created nothing through a dangling temporary" nothing_created
check "both files were converted" bash -c "lz4 -q -d -c '$D/a' | cmp - '$WS/a.orig' && lz4 -q -d -c '$D/sub/b' | cmp - '$WS/b.orig'"
check "no temporary is left" bash -c "[ -z \"\$(find '$D' -name '.fpgalz4fs-convert.*')\" ]"

finish
