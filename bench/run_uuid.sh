#!/usr/bin/env bash
# UUIDv7 and ULID ids/s (docs/benchmarks.md): sekka's generators (bench/uuid_bench, Google
# Benchmark) and the npm packages uuid (v7) and ulid (monotonicFactory) in the same run on the
# same machine, alternating ROUNDS times. Nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
bash scripts/setup.sh
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSEKKA_BUILD_BENCH=ON -DSEKKA_BUILD_TESTS=OFF \
  -DSEKKA_BUILD_CLI=OFF > /dev/null && cmake --build build-bench -j2 --target uuid_bench > /dev/null
for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  taskset -c 1 build-bench/bench/uuid_bench --benchmark_min_time=1 2>/dev/null |
    awk '/^BM_/ { print $1 "," $(NF) }'
  (cd tests/js && taskset -c 1 node uuid_bench.mjs 2)
done
