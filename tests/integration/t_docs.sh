#!/bin/bash
# t_docs: every -o option the daemon's --help names is described in the man page
# (packaging/man/fpgalz4fs.8) and in README's option table, so that an option added to the
# daemon cannot be left out of the documents users read.
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
finish
