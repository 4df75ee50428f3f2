#!/bin/bash
# t_access: -o allow_other,default_permissions (files and directories are created as the
# calling user, with the caller's umask, and permissions are enforced) and -o ro (every write
# fails with EROFS and nothing in the backing directory changes, repairs included).
. "$(dirname "$0")/lib.sh"
need_binaries

if [ "$(id -u)" != 0 ]; then
    skip "t_access needs root (to act as another user)"
    finish
fi

U=65534
G=65534
# as_user CMD...: runs CMD as uid/gid 65534 without supplementary groups
as_user() { as_uid $U "$@"; }
# a python the unprivileged user can run (not one under /root)
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=$(command -v python3)

# errno_as_user WANT OP PATH: the operation, run as the unprivileged user, fails with WANT
cat >"$WS/op.py" <<'PYEOF'
import errno, os, sys
want, op, path = sys.argv[1], sys.argv[2], sys.argv[3]
ops = {
    "open-w": lambda: os.close(os.open(path, os.O_WRONLY)),
    "open-a": lambda: os.close(os.open(path, os.O_WRONLY | os.O_APPEND)),
    "open-r": lambda: os.close(os.open(path, os.O_RDONLY)),
    "create": lambda: os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)),
    "trunc": lambda: os.truncate(path, 0),
    "unlink": lambda: os.unlink(path),
    "mkdir": lambda: os.mkdir(path),
    "rmdir": lambda: os.rmdir(path),
    "chmod": lambda: os.chmod(path, 0o600),
    "chown": lambda: os.chown(path, 1, 1),
    "utime": lambda: os.utime(path, (1, 1)),
    "setxattr": lambda: os.setxattr(path, "user.x", b"1"),
    "removexattr": lambda: os.removexattr(path, "user.keep"),
    "symlink": lambda: os.symlink("target", path),
    "link": lambda: os.link(path, path + ".lnk"),
    "rename": lambda: os.rename(path, path + ".moved"),
    "mkfifo": lambda: os.mkfifo(path),
    "listdir": lambda: os.listdir(path),
}
try:
    ops[op]()
    e = 0
except OSError as ex:
    e = ex.errno
if e != getattr(errno, want):
    print("%s %s: got %s, want %s" % (op, path, errno.errorcode.get(e, "success") if e else "success", want))
    sys.exit(1)
PYEOF
chmod 644 "$WS/op.py"
errno_is() { python3 "$WS/op.py" "$@"; }
errno_as_user() { as_user "$SYSPY" "$WS/op.py" "$@"; }

# ---------------------------------------------------------------- allow_other
if check "mount with allow_other,default_permissions" mount_store allow_other,default_permissions; then
    mkdir "$MNT/pub" && chmod 1777 "$MNT/pub"
    printf 'root data\n' >"$MNT/pub/rootfile" && chmod 644 "$MNT/pub/rootfile"
    printf 'secret\n' >"$MNT/pub/secret" && chmod 600 "$MNT/pub/secret"

    check "user creates a file" as_user sh -c "umask 027; printf 'mine\n' >'$MNT/pub/ufile'"
    check "user creates a directory" as_user sh -c "umask 027; mkdir '$MNT/pub/udir' && printf 'x' >'$MNT/pub/udir/inner'"
    check "user creates a symlink" as_user ln -s ufile "$MNT/pub/ulink"
    check "user creates a fifo" as_user mkfifo "$MNT/pub/ufifo"
    check_eq "file owner in the mount" "$U:$G" "$(stat -c %u:%g "$MNT/pub/ufile")"
    check_eq "file owner in the backing dir" "$U:$G" "$(stat -c %u:%g "$BACKING/pub/ufile")"
    check_eq "file mode follows the caller's umask (mount)" 640 "$(stat -c %a "$MNT/pub/ufile")"
    check_eq "file mode follows the caller's umask (backing)" 640 "$(stat -c %a "$BACKING/pub/ufile")"
    check_eq "directory owner in the mount" "$U:$G" "$(stat -c %u:%g "$MNT/pub/udir")"
    check_eq "directory owner in the backing dir" "$U:$G" "$(stat -c %u:%g "$BACKING/pub/udir")"
    check_eq "directory mode follows the caller's umask" 750 "$(stat -c %a "$MNT/pub/udir")"
    check_eq "file in the user's directory: owner in backing" "$U:$G" "$(stat -c %u:%g "$BACKING/pub/udir/inner")"
    check_eq "symlink owner in the backing dir" "$U:$G" "$(stat -c %u:%g "$BACKING/pub/ulink")"
    check_eq "fifo owner in the backing dir" "$U:$G" "$(stat -c %u:%g "$BACKING/pub/ufifo")"
    check "user reads its file back" as_user sh -c "test \"\$(cat '$MNT/pub/ufile')\" = mine"
    check "user appends to its file" as_user sh -c "printf 'more\n' >>'$MNT/pub/ufile'"
    check "user's file content" test "$(cat "$MNT/pub/ufile")" = "$(printf 'mine\nmore')"

    check "user cannot write a root-owned 0644 file (EACCES)" errno_as_user EACCES open-w "$MNT/pub/rootfile"
    check "user cannot append to it (EACCES)" errno_as_user EACCES open-a "$MNT/pub/rootfile"
    check "user cannot truncate it (EACCES)" errno_as_user EACCES trunc "$MNT/pub/rootfile"
    check "user can read a 0644 root file" as_user cat "$MNT/pub/rootfile"
    check "user cannot read a 0600 root file (EACCES)" errno_as_user EACCES open-r "$MNT/pub/secret"
    check "user cannot chmod a root file (EPERM)" errno_as_user EPERM chmod "$MNT/pub/rootfile"
    check "user cannot delete a root file in a sticky dir (EPERM)" errno_as_user EPERM unlink "$MNT/pub/rootfile"
    check "user cannot create in a root 0755 dir (EACCES)" errno_as_user EACCES create "$MNT/nope"
    check "root file unchanged" test "$(cat "$MNT/pub/rootfile")" = "root data"
    mkdir "$MNT/closed" && chmod 700 "$MNT/closed"
    check "user cannot list a 0700 root dir (EACCES)" errno_as_user EACCES listdir "$MNT/closed"
    check "unmount" umount_store
fi

# ---------------------------------------------------------------- POSIX ACLs
# Kept in the backing file and enforced by the kernel: an entry that denies a user denies it
# (the build before showed it in getfacl and let the user read); a default ACL is inherited,
# and replaces the umask as POSIX.1e says; chmod moves the mask. -o noacl refuses them with
# EOPNOTSUPP, and the SELinux label is never stored (ls -l stops asking for either).
acl_mode_as_user() {   # acl_mode_as_user UMASK PATH: a file made by the user, its mode
    as_user sh -c "umask $1; printf x >'$2'" && stat -c %a "$2"
}
if check "mount with allow_other (ACLs on by default)" mount_store allow_other; then
    mkdir "$MNT/acl" && chmod 755 "$MNT/acl"
    printf 'for all but one
' >"$MNT/acl/f" && chmod 644 "$MNT/acl/f"
    check "user reads a 0644 file before any ACL" as_user cat "$MNT/acl/f"
    check "setfacl denies the user" setfacl -m u:$U:--- "$MNT/acl/f"
    check "the ACL is in the backing file" bash -c "getfacl -n '$BACKING/acl/f' 2>/dev/null | grep -q '^user:$U:---'"
    check "an entry that denies the user is enforced (EACCES)" errno_as_user EACCES open-r "$MNT/acl/f"
    check "ls -l marks the file with an ACL" bash -c "ls -l '$MNT/acl/f' | grep -q '^-rw-r--r--+'"
    printf 'private
' >"$MNT/acl/g" && chmod 600 "$MNT/acl/g"
    check "setfacl grants the user read" setfacl -m u:$U:r "$MNT/acl/g"
    check "an entry that grants the user is enforced" as_user cat "$MNT/acl/g"
    check "chmod 600 takes the mask's read away" chmod 600 "$MNT/acl/g"
    check_eq "the mask follows chmod" "mask::---" "$(getfacl -c "$MNT/acl/g" 2>/dev/null | grep '^mask')"
    check "the user cannot read once the mask denies (EACCES)" errno_as_user EACCES open-r "$MNT/acl/g"
    mkdir "$MNT/acl/shared" && chmod 777 "$MNT/acl/shared"
    check "a default ACL on a directory" setfacl -d -m u::rwx,g::rwx,o::rwx "$MNT/acl/shared"
    check_eq "with a default ACL the umask does not apply" 666 "$(acl_mode_as_user 077 "$MNT/acl/shared/u1")"
    chmod 777 "$MNT/acl"
    check_eq "without one it does" 600 "$(acl_mode_as_user 077 "$MNT/acl/u2")"
    check "a subdirectory inherits the default ACL" bash -c "mkdir '$MNT/acl/shared/sub' && getfacl -c '$MNT/acl/shared/sub' 2>/dev/null | grep -q '^default:group::rwx'"
    user_setfacl_fails() { ! as_user setfacl -m u:$U:rw "$MNT/acl/f" 2>/dev/null; }
    check "the user cannot change a root file's ACL" user_setfacl_fails
    check "...and it still denies the user" bash -c "getfacl -n '$MNT/acl/f' 2>/dev/null | grep -q '^user:$U:---'"
    check "setting the SELinux label fails with EOPNOTSUPP" bash -c "setfattr -n security.selinux -v x '$MNT/acl/f' 2>&1 | grep -q 'not supported'"
    check "reading it fails with EOPNOTSUPP" bash -c "getfattr -n security.selinux '$MNT/acl/f' 2>&1 | grep -q 'not supported'"
    check "ls -Z works" bash -c "ls -Z '$MNT/acl' >/dev/null"
    check "the mount's own 'not supported' is not logged as an error" \
        bash -c "! grep -E 'security\.selinux.*not supported' '$(last_log)'"
    setfattr -n security.selinux -v x "$BACKING/acl/f" 2>/dev/null
    check "a label in the backing file is not listed" bash -c "! getfattr -d -m - '$MNT/acl/f' 2>/dev/null | grep -q selinux"
    check "unmount" umount_store
fi
if check "mount -o noacl" mount_store allow_other,noacl; then
    check "setfacl fails with EOPNOTSUPP under noacl" bash -c "setfacl -m u:$U:r '$MNT/acl/g' 2>&1 | grep -q 'not supported'"
    check "an ACL set before is not listed" bash -c "! getfattr -d -m - '$MNT/acl/f' 2>/dev/null | grep -q posix_acl"
    check "ls -l asks no file for an ACL" bash -c "strace -f -e trace=getxattr -o '$WS/ls.trace' ls -l '$MNT/acl' >/dev/null && [ \$(grep -c 'posix_acl_access' '$WS/ls.trace') -le 1 ]"
    check "unmount" umount_store
fi

# without allow_other the user sees nothing of the mount
if check "mount without allow_other" mount_store ""; then
    check "another user is refused without allow_other (EACCES)" errno_as_user EACCES listdir "$MNT/pub"
    check "unmount" umount_store
fi

# ---------------------------------------------------------------- ro
RO_B="$WS/ro-backing"
RO_M="$WS/ro-mnt"
BACKING=$RO_B
MNT=$RO_M
BLOCK_SIZE=64K
mkdir -p "$RO_B" "$RO_M"
if check "mount a store to fill" mount_store; then
    gen_file "$WS/ro-a" 300000 text 3
    gen_file "$WS/ro-b" 200000 mixed 4
    gen_file "$WS/ro-c" 300000 text 5
    cp "$WS/ro-a" "$MNT/a"
    mkdir -p "$MNT/dir/sub"
    cp "$WS/ro-b" "$MNT/dir/b"
    cp "$WS/ro-c" "$MNT/torn"
    ln -s a "$MNT/link"
    mkfifo "$MNT/fifo"
    setfattr -n user.keep -v 1 "$MNT/a"
    check "unmount the filled store" umount_store
    # make one file torn (cut off its tail): an rw mount would repair it, ro must not
    truncate -s -777 "$RO_B/torn"
    sleep 1.1   # so that any write would show as a new mtime or ctime
    listing_before=$(cd "$RO_B" && find . -printf '%p %y %m %U %G %s %T@ %C@ %l\n' | sort; cd "$RO_B" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
    if check "mount -o ro" mount_store ro; then
        check "read a file under ro" cmp "$MNT/a" "$WS/ro-a"
        check "read a file in a subdir under ro" cmp "$MNT/dir/b" "$WS/ro-b"
        torn_read() {
            # EIO, or a prefix of the original: never wrong bytes
            python3 - "$MNT/torn" "$WS/ro-c" <<'PY'
import sys
try:
    got = open(sys.argv[1], "rb").read()
except OSError as e:
    print("read failed:", e); sys.exit(0)
want = open(sys.argv[2], "rb").read()
if want[:len(got)] != got or len(got) > len(want):
    print("wrong bytes: read %d bytes that are not a prefix of the original" % len(got)); sys.exit(1)
print("read a prefix of %d bytes" % len(got))
PY
        }
        check "read the torn file under ro (EIO or a prefix)" torn_read
        check "create fails with EROFS" errno_is EROFS create "$MNT/new"
        check "open for writing fails with EROFS" errno_is EROFS open-w "$MNT/a"
        check "append fails with EROFS" errno_is EROFS open-a "$MNT/a"
        check "truncate fails with EROFS" errno_is EROFS trunc "$MNT/a"
        check "unlink fails with EROFS" errno_is EROFS unlink "$MNT/a"
        check "mkdir fails with EROFS" errno_is EROFS mkdir "$MNT/newdir"
        check "rmdir fails with EROFS" errno_is EROFS rmdir "$MNT/dir/sub"
        check "chmod fails with EROFS" errno_is EROFS chmod "$MNT/a"
        check "chown fails with EROFS" errno_is EROFS chown "$MNT/a"
        check "utime fails with EROFS" errno_is EROFS utime "$MNT/a"
        check "setxattr fails with EROFS" errno_is EROFS setxattr "$MNT/a"
        check "removexattr fails with EROFS" errno_is EROFS removexattr "$MNT/a"
        check "symlink fails with EROFS" errno_is EROFS symlink "$MNT/newlink"
        check "link fails with EROFS" errno_is EROFS link "$MNT/a"
        check "rename fails with EROFS" errno_is EROFS rename "$MNT/a"
        check "mkfifo fails with EROFS" errno_is EROFS mkfifo "$MNT/newfifo"
        check "shell redirection fails" _lib_negate sh -c "echo x >'$MNT/dir/b'"
        check "readlink under ro" test "$(readlink "$MNT/link")" = a
        check "xattr readable under ro" test "$(getfattr --only-values -n user.keep "$MNT/a" 2>/dev/null)" = 1
        check "stats readable under ro" getfattr --only-values -n user.fpgalz4fs.stats "$MNT"
        check "unmount ro" umount_store
    fi
    listing_after=$(cd "$RO_B" && find . -printf '%p %y %m %U %G %s %T@ %C@ %l\n' | sort; cd "$RO_B" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
    same_listing() { diff <(printf '%s\n' "$listing_before") <(printf '%s\n' "$listing_after"); }
    check "ro mount left the backing dir unchanged (contents, modes, owners, sizes, mtimes, ctimes)" same_listing
fi

finish
