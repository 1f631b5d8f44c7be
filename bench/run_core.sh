#!/usr/bin/env bash
# The core benchmarks of docs/benchmarks.md, in one run: Google Benchmark (generator, clock and
# mutex references side by side) and hyperfine over `sekka gen -n 10000000`. Bounded: about
# two minutes. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build -j2 > /dev/null
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSEKKA_BUILD_BENCH=ON -DSEKKA_BUILD_TESTS=OFF \
  -DSEKKA_BUILD_CLI=OFF > /dev/null && cmake --build build-bench -j2 > /dev/null

echo "== Google Benchmark (median of 3)"
build-bench/bench/snowflake_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  2>&1 | grep -E '_median|^Run on|^Load'

WORK=$(mktemp -d)  # gen's worker lock dir for the run
trap 'rm -rf "$WORK"' EXIT
echo "== sekka gen -n 10000000 (ceiling 4,096,000 ids/s: 2.441 s) against start-up"
hyperfine --warmup 1 --runs 5 --style basic \
  "build/cli/sekka gen -n 10000000 --lock-dir $WORK > /dev/null" "build/cli/sekka gen -n 1 --lock-dir $WORK > /dev/null"

echo "== sekka bench"
build/cli/sekka bench --threads 2 --seconds 1
