#!/bin/bash
# t_stat: fpgalz4fs-stat's numbers against independent computation: logical sizes from
# `lz4 -d | wc -c` of every own backing file and st_size of foreign ones, stored sizes from
# find's st_blocks and st_size, block counts from the sizes written (random data is stored
# raw, zeros are zero blocks); the same numbers from the backing directory, the mountpoint
# and a directory inside each; a torn file; per-file lines with -v; usage errors.
. "$(dirname "$0")/lib.sh"
need_binaries "$FSSTAT"
BLOCK_SIZE=64K
BS=65536

SRC="$WS/src"
mkdir -p "$SRC/sub"
gen_file "$SRC/text" 300000 text 1
head -c 200000 /dev/urandom >"$SRC/random"
head -c 200000 /dev/zero >"$SRC/zeros"
gen_file "$SRC/sub/mixed" 500000 mixed 2
gen_file "$SRC/sub/binary" 70000 binary 3
printf 'hi\n' >"$SRC/sub/small"
: >"$SRC/empty"

check "mount" mount_store
cp -r "$SRC/." "$MNT/"
check "unmount" umount_store
gen_file "$BACKING/plain.txt" 12345 text 4      # foreign: never went through the mount
gen_file "$BACKING/sub/plain2" 777 text 5

# row NAME OUTPUT: the numbers of one summary row: files logical disk apparent
row() { awk -v k="$1" '$1 == k { print $2, $3, $4, $5 }' "$2"; }

# Independent figures for the tree under $1 (a backing directory).
expected() {
    local dir=$1 kind f n_own=0 n_for=0 l_own=0 l_for=0 d_own=0 d_for=0 a_own=0 a_for=0 size disk
    while IFS= read -r -d '' f; do
        case "$f" in "$BACKING/.fpgalz4fs"*) continue ;; esac
        size=$(stat -c %s "$f")
        disk=$(($(stat -c %b "$f") * $(stat -c %B "$f")))
        if [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = 04224d18 ] && [ "$size" -ge 59 ]; then
            n_own=$((n_own + 1))
            l_own=$((l_own + $(lz4 -d -c "$f" 2>/dev/null | wc -c)))
            d_own=$((d_own + disk)); a_own=$((a_own + size))
        else
            n_for=$((n_for + 1))
            l_for=$((l_for + size)); d_for=$((d_for + disk)); a_for=$((a_for + size))
        fi
    done < <(find "$dir" -type f -print0)
    echo "own $n_own $l_own $d_own $a_own"
    echo "foreign $n_for $l_for $d_for $a_for"
    echo "total $((n_own + n_for)) $((l_own + l_for)) $((d_own + d_for)) $((a_own + a_for))"
}

compare_rows() {
    local out=$1 dir=$2 k
    expected "$dir" >"$WS/expected"
    for k in own foreign total; do
        check_eq "$(basename "$out"): $k row (files logical disk apparent)" \
            "$(awk -v k=$k '$1 == k { print $2, $3, $4, $5 }' "$WS/expected")" "$(row $k "$out")"
    done
}

"$FSSTAT" "$BACKING" >"$WS/backing.out"
check_eq "stat of the backing directory: exit 0" 0 $?
sed "s/^/    | /" "$WS/backing.out"
compare_rows "$WS/backing.out" "$BACKING"
check_eq "own files" 7 "$(row own "$WS/backing.out" | cut -d' ' -f1)"
check_eq "foreign files" 2 "$(row foreign "$WS/backing.out" | cut -d' ' -f1)"
blocks=$(( (300000 + BS - 1) / BS + (200000 + BS - 1) / BS * 2 + (500000 + BS - 1) / BS + 2 + 1 ))
# Raw and zero blocks counted independently: the stock lz4 with independent 64 KiB blocks
# stores a block uncompressed by the same rule (compression does not make it smaller).
read -r raw zero < <(python3 - "$SRC" <<'PY'
import os, struct, subprocess, sys
raw = zero = 0
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        path = os.path.join(root, name)
        data = open(path, 'rb').read()
        zero += sum(1 for i in range(0, len(data), 65536) if not data[i:i + 65536].strip(b'\0'))
        z = subprocess.run(['lz4', '-1', '-B4', '-BI', '-c', path], capture_output=True, check=True).stdout
        pos = 4 + 3                                   # magic, FLG, BD, HC (no content size)
        while True:
            w = struct.unpack_from('<I', z, pos)[0]
            if w == 0:
                break
            raw += w >> 31
            pos += 4 + (w & 0x7fffffff)
print(raw, zero)
PY
)
check "block counts: $blocks blocks, $raw raw, $zero zero" \
    grep -q "^blocks $blocks (stored raw $raw, zero $zero) in own files; 0 own files without a seek table" "$WS/backing.out"
ratio=$(python3 -c "import sys; l, d = map(int, sys.argv[1:]); print('%.2f%%' % (100.0 * d / l))" \
    $(row total "$WS/backing.out" | cut -d' ' -f2,3))
check_eq "total ratio is disk / logical" "$ratio" "$(awk '$1 == "total" { print $6 }' "$WS/backing.out")"

# ---- -v: one line per file, logical size = lz4 -d | wc -c
"$FSSTAT" -v "$BACKING" >"$WS/v.out"
check_eq "stat -v: exit 0" 0 $?
check_eq "-v: one line per file" 9 "$(awk 'NF == 6 && $5 ~ /%$/' "$WS/v.out" | wc -l)"
for f in text random zeros sub/mixed sub/binary sub/small empty; do
    check_eq "-v: $f logical" "own $(lz4 -d -c "$BACKING/$f" | wc -c) $(($(stat -c %b "$BACKING/$f") * 512)) $(stat -c %s "$BACKING/$f")" \
        "$(awk -v f="$f" 'NF == 6 && $6 == f { print $1, $2, $3, $4 }' "$WS/v.out")"
done
check_eq "-v: foreign file" "foreign 12345 $(($(stat -c %b "$BACKING/plain.txt") * 512)) 12345" \
    "$(awk 'NF == 6 && $6 == "plain.txt" { print $1, $2, $3, $4 }' "$WS/v.out")"

# ---- through the mountpoint: the same numbers, read from the backing directory
check "mount again" mount_store
"$FSSTAT" "$MNT" >"$WS/mnt.out"
check_eq "stat of the mountpoint: exit 0" 0 $?
check "mountpoint: names the backing directory" grep -q "a mount of fpgalz4fs; reading its backing directory $BACKING\$" "$WS/mnt.out"
for k in own foreign total; do
    check_eq "mountpoint: $k row" "$(row $k "$WS/backing.out")" "$(row $k "$WS/mnt.out")"
done
check_eq "mountpoint: logical size is what the mount shows" \
    "$(row total "$WS/mnt.out" | cut -d' ' -f2)" "$(find "$MNT" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')"
"$FSSTAT" "$MNT/sub" >"$WS/msub.out"
check_eq "stat of a directory inside the mount: exit 0" 0 $?
"$FSSTAT" "$BACKING/sub" >"$WS/bsub.out"
check_eq "stat of the same directory in the backing: exit 0" 0 $?
for k in own foreign total; do
    check_eq "subdirectory: $k row" "$(row $k "$WS/bsub.out")" "$(row $k "$WS/msub.out")"
done
compare_rows "$WS/bsub.out" "$BACKING/sub"
check "unmount again" umount_store

# ---- a torn own file (seek table gone) is measured from its frames
python3 - "$BACKING/text" <<'PY'
import struct, sys
p = sys.argv[1]
d = open(p, 'rb').read()
e, v, r = struct.unpack_from('<III', d, len(d) - 24)
open(p, 'r+b').truncate(len(d) - (8 + 12 * e + 8 * v + 16 * r + 32))
PY
"$FSSTAT" -v "$BACKING" >"$WS/torn.out"
check_eq "stat with a torn file: exit 0" 0 $?
check "torn file counted" grep -q "in own files; 1 own files without a seek table (torn)" "$WS/torn.out"
check_eq "torn file: logical size from its frames" "300000 torn" \
    "$(awk '$NF == "text" { print $2, $6 }' "$WS/torn.out")"

# ---- sizes through the mount after the kernel forgot the inode (the daemon answers from its
# own memory of closed files' sizes, fs/sizes.c): quick changes, each closed, then a forget
check "mount again" mount_store
: >"$MNT/grow"
want=0 bad=""
for i in $(seq 1 40); do
    case $((i % 4)) in
        0) truncate -s $((i * 7)) "$MNT/grow"; want=$((i * 7)) ;;
        1) printf x >>"$MNT/grow"; want=$((want + 1)) ;;
        2) head -c 3000 "$SRC/text" >"$MNT/grow"; want=3000 ;;
        3) truncate -s 2999 "$MNT/grow"; want=2999 ;;
    esac
    sync; echo 2 >/proc/sys/vm/drop_caches 2>/dev/null
    got=$(stat -c %s "$MNT/grow")
    [ "$got" = "$want" ] || bad="$bad step $i: $got, not $want;"
done
check_eq "every size after a forget is the file's" "" "$bad"
check "unmount again" umount_store

# ---- errors
"$FSSTAT" "$WS/absent" >/dev/null 2>"$WS/err"
check_eq "missing directory: exit 1" 1 $?
check "missing directory: says why" grep -q "No such file" "$WS/err"
"$FSSTAT" >/dev/null 2>&1
check_eq "no arguments: exit 2" 2 $?
"$FSSTAT" -x "$BACKING" >/dev/null 2>&1
check_eq "unknown option: exit 2" 2 $?
"$FSSTAT" "$BACKING" "$BACKING" >/dev/null 2>&1
check_eq "two directories: exit 2" 2 $?

finish
