#!/usr/bin/env bash
# Installs, builds and runs every test: a normal build (and Release builds with gcc and clang,
# built only), then one with AddressSanitizer and UndefinedBehaviorSanitizer, then a subset
# under ThreadSanitizer. Long forms of the randomized and crash tests: see README.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/install-deps.sh"
status=0
BUILD_DIR=$src/build "$src/scripts/build.sh"
# Release with gcc and with clang, built only (tests included, not run): optimizing builds
# see warnings the others do not (-Werror=use-after-free once stopped gcc's at -O3), and
# -Werror makes each one a failure. Each compiler keeps its directory, so after the first
# run only what changed is built again.
for cc in gcc clang; do
    CC=$cc BUILD_DIR=$src/build-release-$cc "$src/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release ||
        { echo "Release build with $cc: FAILED"; status=1; }
done
# The package test (build, install, use, purge the .deb files) runs once, in this pass. The
# fuzzers fuzz for a fixed time each, so they run side by side after the rest.
(cd "$src/build" && FPGALZ4FS_PACKAGE_TEST=${FPGALZ4FS_PACKAGE_TEST:-1} \
    ctest --output-on-failure -E '^fuzz_run_') || status=1
(cd "$src/build" && ctest --output-on-failure -j3 -R '^fuzz_run_') || status=1
BUILD_DIR=$src/build-asan "$src/scripts/build.sh" -DFPGALZ4FS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
# The Linux tree (when installed) is copied once, in the normal pass: under the sanitizers it
# would only take longer to find nothing new. The power-loss states likewise: the normal pass
# checks about 10,000 of them for what they keep (1,800 random ones, and every state that
# loses one call alone or keeps one write alone); here 400 random ones (version 4 files, 100
# a workload, every kind of workload) run the same repair code under the sanitizers. The
# order of the writes, which the states that lose or keep one call test, is the same code
# with or without them. The benchmark
# driver's test (t_bench) runs in the normal pass only: its daemon calls are those of the
# other tests, and its own code is a measuring tool. This keeps the whole of this script
# under 40 minutes on 2 cores.
(cd "$src/build-asan" && ASAN_OPTIONS=detect_leaks=1 FPGALZ4FS_LINUX_TREE=0 FPGALZ4FS_PACKAGE_TEST=0 \
    FDS_FILES=3000 FDS_DAEMON_NOFILE=1200 POWERLOSS_FORMATS=7 POWERLOSS_STATES=100 \
    POWERLOSS_LOSE_ONE=0 POWERLOSS_KEEP_ONE=0 \
    ctest --output-on-failure -E '^integration_t_bench$' ${ASAN_CTEST_ARGS:-}) || status=1
# Third pass: ThreadSanitizer over the threaded parts (engine, daemon under concurrent load,
# files kept after their release), short forms only (a few minutes on 2 cores). Reports of
# the daemon (in the background) go to log files: any of them fails the pass.
# TSAN_CTEST_REGEX picks other tests.
BUILD_DIR=$src/build-tsan "$src/scripts/build.sh" -DFPGALZ4FS_TSAN=ON
tsan_logs=$src/build-tsan/tsan-logs
rm -rf "$tsan_logs" && mkdir -p "$tsan_logs"
(cd "$src/build-tsan" && FPGALZ4FS_LINUX_TREE=0 OPCHECK_OPS=1000 OPCHECK_SEEDS=1 \
    FDS_FILES=3000 FDS_DAEMON_NOFILE=1200 \
    TSAN_OPTIONS="halt_on_error=0 exitcode=66 log_path=$tsan_logs/tsan suppressions=$src/tests/tsan.supp" \
    ctest --output-on-failure -R "${TSAN_CTEST_REGEX:-^(unit_test_eng|unit_test_engine_card|unit_test_pool|integration_t_basic|integration_t_bricks|integration_t_land|integration_t_records|integration_t_opcheck|integration_t_race|integration_t_fds|integration_t_tail|integration_t_readahead|fuzz_replay_.*)\$}") || status=1
if ls "$tsan_logs"/tsan.* >/dev/null 2>&1; then
    echo "ThreadSanitizer reports:" && cat "$tsan_logs"/tsan.*
    status=1
fi
if [ $status -ne 0 ]; then echo "fpgalz4fs tests: FAILED"; else echo "fpgalz4fs tests: all passed"; fi
exit $status
