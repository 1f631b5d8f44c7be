#!/usr/bin/env bash
# The README's test command on a busy machine (issue 39): two CPU hogs at normal priority
# (`sh -c 'while :; do :; done'` twice) beside `bash scripts/test.sh`, RUNS times in a row
# (default 3), each run's time and result printed. Exit status 1 if any run failed. The hogs are
# stopped by their PIDs when it ends, however it ends.
#   bash scripts/test_busy.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
hogs=()
stop_hogs() { for pid in "${hogs[@]}"; do kill "$pid" 2> /dev/null || true; done; }
trap stop_hogs EXIT
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  hogs+=($!)
done
status=0
for ((run = 1; run <= runs; run++)); do
  start=$SECONDS rc=0
  bash scripts/test.sh || rc=$?
  echo "=== busy run $run of $runs: exit $rc in $((SECONDS - start)) s (two hogs beside it)"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
