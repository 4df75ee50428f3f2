#!/bin/bash
# ok and bad always succeed, so 'cond && ok ... || bad ...' reads as if-then-else here.
# shellcheck disable=SC2015
# mkfpgalz4fs: every refusal exits non-zero with a one-line reason and writes nothing; every
# success writes a superblock that says what was asked for; --force never deletes a file.
set -euo pipefail

BUILD_DIR=${BUILD_DIR:?set BUILD_DIR to the cmake build directory}
MKFS=$BUILD_DIR/mkfpgalz4fs
[[ -x $MKFS ]] || { echo "t_mkfs: $MKFS is missing; build first" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/t_mkfs.XXXXXX")
LOCK_PID=
cleanup() {
    [[ -n $LOCK_PID ]] && kill "$LOCK_PID" 2>/dev/null && wait "$LOCK_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAILED: $1" >&2; }

# A fresh empty directory for one case (called in $(...), so it keeps no counter).
fresh() { mktemp -d "$WORK/d.XXXXXX"; }

# expect_refusal NAME STATUS PATTERN ARGS...: exit status STATUS, one stderr line starting
# "mkfpgalz4fs: " and matching PATTERN (a grep -E expression).
expect_refusal() {
    local name=$1 want=$2 pattern=$3 status=0
    shift 3
    "$MKFS" "$@" >"$WORK/out" 2>"$WORK/err" || status=$?
    local lines
    lines=$(wc -l <"$WORK/err")
    if [[ $status -ne $want ]]; then
        bad "$name: exit status $status, expected $want ($(cat "$WORK/err"))"
    elif [[ $lines -ne 1 ]] || ! grep -q '^mkfpgalz4fs: ' "$WORK/err"; then
        bad "$name: expected one 'mkfpgalz4fs: ' line on stderr, got: $(cat "$WORK/err")"
    elif ! grep -Eq -- "$pattern" "$WORK/err"; then
        bad "$name: message does not match '$pattern': $(cat "$WORK/err")"
    else
        ok "$name"
    fi
}

# expect_success NAME ARGS...: exit 0 and a "formatted" line on stdout.
expect_success() {
    local name=$1 status=0
    shift
    "$MKFS" "$@" >"$WORK/out" 2>"$WORK/err" || status=$?
    if [[ $status -ne 0 ]]; then
        bad "$name: exit status $status ($(cat "$WORK/err"))"
        return 1
    fi
    if ! grep -Eq '^mkfpgalz4fs: formatted .*: block size [0-9]+[KM], uuid [0-9a-f-]{36}$' \
        "$WORK/out"; then
        bad "$name: unexpected output: $(cat "$WORK/out")"
        return 1
    fi
    ok "$name"
}

sb_value() { sed -n "s/^$2=//p" "$1/.fpgalz4fs" 2>/dev/null || true; }

# The checksum line is XXH32 (seed 0) of every byte before it.
check_superblock() {
    local name=$1 dir=$2 want_bs=$3 sb=$2/.fpgalz4fs
    local body sum
    if [[ ! -f $sb ]]; then
        bad "$name: no superblock"
        return
    fi
    [[ $(sb_value "$dir" block_size) == "$want_bs" ]] ||
        { bad "$name: block_size is '$(sb_value "$dir" block_size)', expected $want_bs"; return; }
    [[ $(sb_value "$dir" format_version) == 7 ]] || { bad "$name: format_version"; return; }
    [[ $(sb_value "$dir" uuid) =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]] ||
        { bad "$name: uuid '$(sb_value "$dir" uuid)' is not a v4 UUID"; return; }
    [[ $(sb_value "$dir" created) =~ ^[0-9]+$ ]] || { bad "$name: created"; return; }
    [[ $(tail -n 1 "$sb") =~ ^checksum=[0-9a-f]{8}$ ]] || { bad "$name: checksum line"; return; }
    if command -v xxhsum >/dev/null; then
        body=$(head -n -1 "$sb" | xxhsum -H0 - | cut -d' ' -f1)
        sum=$(sb_value "$dir" checksum)
        [[ $body == "$sum" ]] || { bad "$name: checksum $sum, body hashes to $body"; return; }
    fi
    ok "$name: superblock"
}

no_superblock() {
    if [[ -e $2/.fpgalz4fs || -e $2/.fpgalz4fs.tmp ]]; then
        bad "$1: a refusal wrote a superblock"
    else
        ok "$1: nothing written"
    fi
}

# --- usage errors (exit 2) ---
expect_refusal "no arguments" 2 'missing DIR'
expect_refusal "too many arguments" 2 'too many' "$(fresh)" "$(fresh)"
d=$(fresh)
for v in 128K 2M 8M 0 abc "" 64KB -1M 1G; do
    expect_refusal "bad block size '$v'" 2 'block size' -b "$v" "$d"
done
no_superblock "bad block sizes" "$d"
expect_refusal "-b without value" 2 'missing value' "$d" -b
expect_refusal "unknown long option" 2 "unknown option '--bogus'" --bogus "$d"
expect_refusal "unknown short option" 2 "unknown option '-x'" -x "$d"
expect_refusal "unknown short option in a cluster" 2 "unknown option '-q'" -qb 1M "$d"
no_superblock "unknown options" "$d"

# --- refusals (exit 1) ---
expect_refusal "missing directory" 1 'no such directory' "$WORK/absent"
[[ ! -e $WORK/absent ]] && ok "missing directory: not created" || bad "missing directory created"
touch "$WORK/plainfile"
expect_refusal "not a directory" 1 'not a directory' "$WORK/plainfile"

d=$(fresh)
echo data >"$d/user.txt"
expect_refusal "directory with a file" 1 "not empty.*user.txt" "$d"
no_superblock "directory with a file" "$d"
expect_refusal "directory with a file, --force" 1 "not empty" --force "$d"
no_superblock "directory with a file, --force" "$d"

d=$(fresh)
touch "$d/.hidden"
expect_refusal "directory with a hidden file" 1 "not empty" "$d"

d=$(fresh)
mkdir "$d/lost+found" "$d/sub"
expect_refusal "lost+found and a subdirectory" 1 "not empty.*sub" "$d"
no_superblock "lost+found and a subdirectory" "$d"

d=$(fresh)
ln -s /nonexistent "$d/link"
expect_refusal "directory with a dangling symlink" 1 "not empty" "$d"

# --- successes ---
d=$(fresh)
expect_success "empty directory" "$d" && check_superblock "empty directory" "$d" 1048576
[[ -z $(find "$d" -mindepth 1 ! -name .fpgalz4fs ! -name .fpgalz4fs-clean) ]] &&
    ok "empty directory: only the superblock and the clean mark" ||
    bad "empty directory: stray files: $(ls -A "$d")"
grep -Eqx 'clean [0-9]+' "$d/.fpgalz4fs-clean" && ok "a new store is marked clean (FORMAT.md 1.5)" ||
    bad "clean mark of a new store: $(cat "$d/.fpgalz4fs-clean" 2>&1)"

d=$(fresh)
mkdir "$d/lost+found"
expect_success "only lost+found" "$d" && check_superblock "only lost+found" "$d" 1048576

for pair in 64K:65536 256K:262144 1M:1048576 4M:4194304 262144:262144 4m:4194304; do
    d=$(fresh)
    expect_success "-b ${pair%%:*}" -b "${pair%%:*}" "$d" &&
        check_superblock "-b ${pair%%:*}" "$d" "${pair##*:}"
done
d=$(fresh)
expect_success "option after DIR" "$d" -b 64K && check_superblock "option after DIR" "$d" 65536

# --- an existing store ---
d=$(fresh)
"$MKFS" -b 256K "$d" >/dev/null || bad "setup: formatting a store"
uuid1=$(sb_value "$d" uuid)
echo "user data" >"$d/keep.txt"
mkdir "$d/subdir"
echo "more" >"$d/subdir/f"
cp "$d/.fpgalz4fs" "$WORK/sb.before" 2>/dev/null || : >"$WORK/sb.before"
expect_refusal "existing store" 1 'already a fpgalz4fs store' "$d"
cmp -s "$d/.fpgalz4fs" "$WORK/sb.before" && ok "existing store: superblock untouched" ||
    bad "existing store: superblock changed"
expect_refusal "existing store, -b 4M" 1 'already' -b 4M "$d"

expect_success "--force on a store" --force -b 4M "$d" && check_superblock "--force" "$d" 4194304
[[ $(sb_value "$d" uuid) != "$uuid1" ]] && ok "--force: new uuid" || bad "--force kept the uuid"
[[ $(cat "$d/keep.txt") == "user data" && $(cat "$d/subdir/f") == more ]] &&
    ok "--force: user files kept" || bad "--force: user files changed or lost"
[[ ! -e $d/.fpgalz4fs.tmp ]] && ok "--force: no temporary left" || bad "--force left a temporary"

# --- a store held by a daemon (the lock is a flock on the superblock) ---
d=$(fresh)
"$MKFS" "$d" >/dev/null || bad "setup: formatting a store"
cp "$d/.fpgalz4fs" "$WORK/sb.before" 2>/dev/null || : >"$WORK/sb.before"
# The holder execs into sleep with the locked descriptor, so killing it releases the lock.
(exec 9<"$d/.fpgalz4fs" && flock -x 9 && exec sleep 600) &
LOCK_PID=$!
for _ in $(seq 100); do
    flock -n -x "$d/.fpgalz4fs" true 2>/dev/null || break
    sleep 0.05
done
expect_refusal "--force on a mounted store" 1 'in use by a mounted daemon' --force "$d"
cmp -s "$d/.fpgalz4fs" "$WORK/sb.before" && ok "mounted store: superblock untouched" ||
    bad "mounted store: superblock changed"
kill "$LOCK_PID" 2>/dev/null || true
wait "$LOCK_PID" 2>/dev/null || true
LOCK_PID=
expect_success "--force once the store is free" --force "$d" &&
    check_superblock "--force once free" "$d" 1048576

# --- a store of a newer format is never rewritten ---
d=$(fresh)
body=$(printf '# fpgalz4fs superblock: do not edit (checked by the checksum line)\nformat_version=9\nblock_size=1048576\nuuid=0123abcd-4567-4890-a123-456789abcdef\ncreated=1\n')
printf '%s\nchecksum=%s\n' "$body" "$(printf '%s\n' "$body" | xxhsum -H0 - | cut -d' ' -f1)" \
    >"$d/.fpgalz4fs"
cp "$d/.fpgalz4fs" "$WORK/sb.before" 2>/dev/null || : >"$WORK/sb.before"
expect_refusal "--force on a newer store" 1 'newer format' --force "$d"
cmp -s "$d/.fpgalz4fs" "$WORK/sb.before" && ok "newer store: untouched" || bad "newer store changed"

# --- a damaged superblock can be rewritten with --force ---
d=$(fresh)
echo garbage >"$d/.fpgalz4fs"
expect_refusal "damaged superblock without --force" 1 'already' "$d"
expect_success "--force over a damaged superblock" --force -b 64K "$d" &&
    check_superblock "--force over damage" "$d" 65536

# --- help and version ---
status=0
"$MKFS" --version >"$WORK/out" 2>&1 || status=$?
[[ $status -eq 0 ]] && grep -Eq '^mkfpgalz4fs [0-9]+\.[0-9]+' "$WORK/out" &&
    ok "--version" || bad "--version: status $status, $(cat "$WORK/out")"
for opt in -h --help; do
    status=0
    "$MKFS" "$opt" >"$WORK/out" 2>&1 || status=$?
    [[ $status -eq 0 ]] && grep -q 'usage: mkfpgalz4fs' "$WORK/out" && ok "$opt" ||
        bad "$opt: status $status"
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
