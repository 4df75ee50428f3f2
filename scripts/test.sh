#!/usr/bin/env bash
# Installs, builds and runs every test: a normal build, then one with AddressSanitizer and
# UndefinedBehaviorSanitizer. Long forms of the randomized and crash tests: see README.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/install-deps.sh"
status=0
BUILD_DIR=$src/build "$src/scripts/build.sh"
(cd "$src/build" && ctest --output-on-failure) || status=1
BUILD_DIR=$src/build-asan "$src/scripts/build.sh" -DFPGALZ4FS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
# The Linux tree (when installed) is copied once, in the normal pass: under the sanitizers it
# would only take longer to find nothing new.
(cd "$src/build-asan" && ASAN_OPTIONS=detect_leaks=1 FPGALZ4FS_LINUX_TREE=0 \
    ctest --output-on-failure ${ASAN_CTEST_ARGS:-}) || status=1
if [ $status -ne 0 ]; then echo "fpgalz4fs tests: FAILED"; else echo "fpgalz4fs tests: all passed"; fi
exit $status
