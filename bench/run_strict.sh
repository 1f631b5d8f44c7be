#!/usr/bin/env bash
# Strict ids, one run (docs/benchmarks.md, "Strict ids"): two `sekka serve` on one etcd
# (scripts/coord.sh), the first the leader of tag `chat`, the second its follower; redis-benchmark
# -c 50 sends, ROUNDS times and alternating, to
#   redis-server INCR (the peer), SEG.NEXT (a segment tag), STRICT.NEXT to the leader and to the
#   follower, and STRICT.BATCH chat 100 to each;
# with -P 1 and -P 16. Each line gives requests/s, p50 and p99 (ms); for the follower, the calls
# it made to the leader per request it forwarded (below 1: coalesced). Servers on core 0, the
# client on core 1. Every process started here is stopped at exit; every load is bounded.
#   ROUNDS=2 bash bench/run_strict.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-2}"
bash scripts/build.sh > /dev/null
SEKKA="$PWD/build/cli/sekka"
# shellcheck source=bench/lib.sh
source bench/lib.sh
start_work strict
stop_all() { # the servers first, then the etcd they use
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  bash scripts/coord.sh stop "$WORK/etcd" > /dev/null 2>&1 || true
  cleanup_work
}
trap stop_all EXIT
bash scripts/coord.sh etcd "$WORK/etcd" > /dev/null
COORD="etcd://$(cat "$WORK/etcd/endpoints")"

REDIS=$(free_port)
taskset -c 0 redis-server --bind 127.0.0.1 --port "$REDIS" --save '' --appendonly no --dir "$WORK" \
  --daemonize no --loglevel warning > /dev/null &
PIDS+=($!)
wait_port "$REDIS"
declare -A RESP HTTP
for name in leader follower; do
  RESP[$name]=$(free_port)
  HTTP[$name]=$(free_port)
  "$SEKKA" segment create bench --step 1000 --data-dir "$WORK/$name" > /dev/null
  taskset -c 0 "$SEKKA" serve --http "127.0.0.1:${HTTP[$name]}" --resp "127.0.0.1:${RESP[$name]}" \
    --data-dir "$WORK/$name" --worker-source etcd --coordinator "$COORD" --threads 1 \
    --strict-tags chat --log-level warn > /dev/null &
  PIDS+=($!)
  wait_port "${RESP[$name]}"
  # The first server asked leads the tag.
  redis-cli -p "${RESP[$name]}" STRICT.NEXT chat > /dev/null
done
# /metrics is made at most once a second (server/metrics.cc): wait past that before a read.
metric() {
  sleep 1.1
  curl -s "127.0.0.1:${HTTP[follower]}/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}
bench() { # port, pipeline, n, command...
  local port=$1 pipeline=$2 n=$3
  shift 3
  taskset -c 1 redis-benchmark -p "$port" -c 50 -n "$n" -P "$pipeline" --csv "$@" 2> /dev/null | csv
}
for round in $(seq "$ROUNDS"); do
  for pipeline in 1 16; do
    n=$((pipeline == 1 ? 100000 : 500000))
    echo "round $round -P $pipeline: requests/s p50 p99"
    echo "  redis-server INCR:        $(bench "$REDIS" "$pipeline" "$n" INCR x)"
    echo "  SEG.NEXT:                 $(bench "${RESP[leader]}" "$pipeline" "$n" SEG.NEXT bench)"
    echo "  STRICT.NEXT leader:       $(bench "${RESP[leader]}" "$pipeline" "$n" STRICT.NEXT chat)"
    echo "  STRICT.BATCH 100 leader:  $(bench "${RESP[leader]}" "$pipeline" "$((n / 10))" STRICT.BATCH chat 100)"
    f0=$(metric 'sekka_strict_requests_total{path="forwarded"}')
    l0=$(metric 'sekka_strict_requests_total{path="led"}')
    c0=$(metric sekka_strict_leader_calls_total)
    echo "  STRICT.NEXT follower:     $(bench "${RESP[follower]}" "$pipeline" "$n" STRICT.NEXT chat)"
    f1=$(metric 'sekka_strict_requests_total{path="forwarded"}')
    l1=$(metric 'sekka_strict_requests_total{path="led"}')
    c1=$(metric sekka_strict_leader_calls_total)
    # A follower that led any of them (the leader's lease lapsed) measured no forwarding.
    echo "    forwarded $((f1 - f0)), led there $((l1 - l0)); calls to the leader per forwarded" \
      "request: $(echo "$c1 $c0 $f1 $f0" | awk '{ printf "%.3f", ($1 - $2) / ($3 - $4 + 1e-9) }')"
    echo "  STRICT.BATCH 100 follower: $(bench "${RESP[follower]}" "$pipeline" "$((n / 10))" STRICT.BATCH chat 100)"
  done
done
