#!/bin/bash
# t_docs: every -o option the daemon's --help names is described in the man page
# (packaging/man/fpgalz4fs.8) and in README's option table, and every long option of the
# tools' --help (mkfpgalz4fs, fsck.fpgalz4fs, fpgalz4fs-stat) in the tool's man page, so that
# an option added to a command cannot be left out of the documents users read.
. "$(dirname "$0")/lib.sh"
need_binaries

MAN="$SRC_DIR/packaging/man/fpgalz4fs.8"
README="$SRC_DIR/README.md"

# the names in the "fpgalz4fs options (-o):" part of --help: "name=...", "a, b"
help_options() {
    "$DAEMON" --help 2>&1 |
        awk '/^fpgalz4fs options/ {on = 1; next} on && /^$/ {exit} on && /^  [a-z]/ {print}' |
        sed -E 's/^  //; s/  .*//' | tr ',' '\n' | sed -E 's/^ +//; s/=.*//'
}
opts=$(help_options)
check "--help names the options" test "$(printf '%s\n' "$opts" | grep -c .)" -ge 20

documented_in() {
    local file=$1 o missing=""
    for o in $opts; do
        grep -qE "(^|[^a-z_])$o([^a-z_]|$)" "$file" || missing="$missing $o"
    done
    [ -z "$missing" ] || { echo "not in $file:$missing"; return 1; }
}
check "every option of --help is in the man page" documented_in "$MAN"
check "every option of --help is in README" documented_in "$README"

# file versions: the newest one the daemon takes is what --help, README and the man page
# name as the choices' last and as the default, and one more is refused
newest_version() {
    "$DAEMON" /nonexistent /nonexistent -o file_version=999 2>&1 |
        sed -nE 's/.*file_version=999: expected a whole number from 1 to ([0-9]+).*/\1/p'
}
newest=$(newest_version)
check "the daemon names its newest file version" test -n "$newest"
choices=$(seq -s '|' 1 "${newest:-1}")
help_versions() {
    "$DAEMON" --help 2>&1 | grep -qE "^  file_version=$(printf '%s' "$choices" | sed 's/|/\\|/g') .*" &&
        "$DAEMON" --help 2>&1 | grep -A1 -E '^  file_version=' | grep -qE "\($newest\)\$"
}
check "--help: file_version=$choices, default $newest" help_versions
readme_versions() {
    grep -E "^\| file_version=" "$README" | grep -qF "file_version=$(printf '%s' "$choices" | sed 's/|/\\|/g') |" &&
        grep -E "^\| file_version=" "$README" | grep -qE "\| $newest \|\$"
}
check "README: file_version=$choices, default $newest" readme_versions
man_versions() {
    awk '/^\.BI file_version= N/ {on = 1; next} on && /^\.TP/ {exit} on {print}' "$MAN" |
        grep -qx "Default: $newest\."
}
check "man page: file_version's default $newest" man_versions

# long options of a tool's --help, each found in its man page (roff writes - as \-)
long_options_in_man() {
    local bin=$1 page=$2 o esc missing=""
    for o in $("$bin" --help 2>&1 | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
        esc=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
        grep -qE -- "$esc([^a-z-]|$)" "$page" || missing="$missing $o"
    done
    [ -z "$missing" ] || { echo "not in $page:$missing"; return 1; }
}
check "mkfpgalz4fs: every long option is in its man page" \
    long_options_in_man "$MKFS" "$SRC_DIR/packaging/man/mkfpgalz4fs.8"
check "fsck.fpgalz4fs: every long option is in its man page" \
    long_options_in_man "$FSCK" "$SRC_DIR/packaging/man/fsck.fpgalz4fs.8"
check "fpgalz4fs-stat: every long option is in its man page" \
    long_options_in_man "$FSSTAT" "$SRC_DIR/packaging/man/fpgalz4fs-stat.1"
finish
