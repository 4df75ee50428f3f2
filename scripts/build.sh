#!/usr/bin/env bash
# Builds into BUILD_DIR (default build/); extra arguments go to cmake.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
make -C "$build" -j"$(nproc)" --no-print-directory
