#!/usr/bin/env bash
# Thrift against RESP in one run (docs/benchmarks.md, "Thrift get_id against RESP ID.NEXT"):
# one `sekka serve` with one event loop on core 0 serving both protocols, and bench/rpc_load
# (the same closed-loop client for both) on core 1, alternating protocols ROUNDS times at each
# client count. Prints the CSV lines and the median Thrift/RESP ratio per client count.
# Everything runs on 127.0.0.1, each load is bounded in time, and the server is stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
SECONDS_EACH="${SECONDS_EACH:-5}"
bash scripts/build.sh > /dev/null
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSEKKA_BUILD_BENCH=ON -DSEKKA_BUILD_TESTS=OFF \
  -DSEKKA_BUILD_CLI=OFF > /dev/null && cmake --build build-bench -j2 --target rpc_load > /dev/null
LOAD="$PWD/build-bench/bench/rpc_load"
# shellcheck source=bench/lib.sh
source bench/lib.sh
start_work bench

RESP=$(free_port); THRIFT=$(free_port)
taskset -c 0 build/cli/sekka serve --http "" --resp "127.0.0.1:$RESP" --thrift "127.0.0.1:$THRIFT" \
  --data-dir "$WORK/sekka" --threads 1 --log-level warn > "$WORK/sekka.out" &
PIDS+=($!)
wait_port "$RESP" && wait_port "$THRIFT"

echo "protocol,clients,requests,seconds,rps,p50_us,p99_us"
for clients in 1 4 50; do
  for _ in $(seq "$ROUNDS"); do
    for protocol in resp thrift; do
      taskset -c 1 "$LOAD" --protocol "$protocol" --port "$( [ "$protocol" = resp ] && echo "$RESP" || echo "$THRIFT")" \
        --clients "$clients" --seconds "$SECONDS_EACH" | tee -a "$WORK/results.csv"
    done
  done
done
/usr/bin/python3 - "$WORK/results.csv" << 'PY'
import statistics, sys
rows = [l.strip().split(",") for l in open(sys.argv[1])]
for clients in sorted({int(r[1]) for r in rows}):
    resp = [float(r[4]) for r in rows if r[0] == "resp" and int(r[1]) == clients]
    thrift = [float(r[4]) for r in rows if r[0] == "thrift" and int(r[1]) == clients]
    ratios = [t / r for t, r in zip(thrift, resp)]
    print(f"clients {clients}: RESP median {statistics.median(resp):.0f}/s, Thrift median "
          f"{statistics.median(thrift):.0f}/s, Thrift/RESP median ratio {statistics.median(ratios):.3f}")
PY
