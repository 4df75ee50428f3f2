#!/bin/bash
# Runs one libFuzzer target for FUZZ_SECONDS (default 25) over its checked-in corpus.
#
#   run_fuzzer.sh FUZZER CORPUS_DIR WORK_DIR
#
# New inputs go to WORK_DIR/corpus (never into the checked-in corpus) and a crash leaves
# WORK_DIR/crash-* (add it to the corpus as a regression input once fixed). Exit status is
# libFuzzer's: 0 when no invariant broke. Long form: FUZZ_SECONDS=600.
set -u
fuzzer=$1 corpus=$2 work=$3
seconds=${FUZZ_SECONDS:-25}
mkdir -p "$work/corpus"
# the backing files of the corpus are up to ~150 KiB; leave room to grow past them
"$fuzzer" -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=2048 -timeout=60 \
    -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$corpus"
