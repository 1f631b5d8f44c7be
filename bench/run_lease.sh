#!/usr/bin/env bash
# Worker-id leases in steady state (docs/benchmarks.md): coordinator calls per second of a
# `sekka serve` on etcd and on ZooKeeper (from its sekka_coordinator_calls_total over WINDOW
# seconds) and the mean latency of storing an hwm (a fenced etcd txn, plus the data dir),
# on plain etcd and on etcd with TLS, client certificates and a user (scripts/coord.sh etcd-tls),
# and id generation on each against a `local` server in the same run
# (redis-benchmark ID.NEXT -P 16, ID.BATCH 1000). Everything runs on 127.0.0.1, is bounded, and is
# stopped by PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
WINDOW="${WINDOW:-30}"
bash scripts/build.sh > /dev/null
SEKKA="$PWD/build/cli/sekka"
WORK=$(mktemp -d /tmp/sekka-lease-bench-XXXXXX)
export SEKKA_WORKER_LOCK_DIR="$WORK/locks"  # the run's own, not the machine's
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  bash scripts/coord.sh stop "$WORK/etcd" || true
  bash scripts/coord.sh stop "$WORK/etcd-tls" || true
  bash scripts/coord.sh stop "$WORK/zk" || true
  wait 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh
bash scripts/coord.sh etcd "$WORK/etcd"
bash scripts/coord.sh etcd-tls "$WORK/etcd-tls"
mapfile -t ACCESS < "$WORK/etcd-tls/access"
bash scripts/coord.sh zk "$WORK/zk"
declare -A HTTP RESP
for kind in local etcd etcd-tls zookeeper; do
  HTTP[$kind]=$(free_port); RESP[$kind]=$(free_port)
  flags=()
  [ "$kind" = etcd-tls ] && flags=(--worker-source etcd --coordinator "etcd://$(cat "$WORK/etcd-tls/endpoints")")
  [ "$kind" = etcd ] && flags=(--worker-source etcd --coordinator "etcd://$(cat "$WORK/etcd/endpoints")")
  [ "$kind" = zookeeper ] && flags=(--worker-source zookeeper --coordinator "zookeeper://$(cat "$WORK/zk/endpoints")")
  # Each server is a host of its own: a host's lock dir serves one source of worker ids.
  env=(SEKKA_WORKER_LOCK_DIR="$WORK/$kind-locks")
  [ "$kind" = etcd-tls ] && env+=(SEKKA_WORKER_TLS_CA_FILE="${ACCESS[0]}" SEKKA_WORKER_TLS_CERT_FILE="${ACCESS[1]}"
    SEKKA_WORKER_TLS_KEY_FILE="${ACCESS[2]}" SEKKA_WORKER_USERNAME="${ACCESS[3]}" SEKKA_WORKER_PASSWORD="${ACCESS[4]}")
  env "${env[@]}" "$SEKKA" serve --http "127.0.0.1:${HTTP[$kind]}" --resp "127.0.0.1:${RESP[$kind]}" \
    --data-dir "$WORK/$kind" --threads 1 --log-level warn "${flags[@]}" > /dev/null &
  PIDS+=($!)
done
sleep 2
metric() { curl -s "http://127.0.0.1:${HTTP[$1]}/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
calls() { metric "$1" sekka_coordinator_calls_total; }
echo "== coordinator calls in steady state (lease TTL 10 s), over $WINDOW s after 5 s of warm-up"
sleep 3
e0=$(calls etcd); t0=$(calls etcd-tls); z0=$(calls zookeeper)
declare -A PSUM PCOUNT
for kind in etcd etcd-tls; do
  PSUM[$kind]=$(metric "$kind" sekka_hwm_persist_seconds_sum); PCOUNT[$kind]=$(metric "$kind" sekka_hwm_persist_seconds_count)
done
sleep "$WINDOW"
e1=$(calls etcd); t1=$(calls etcd-tls); z1=$(calls zookeeper)
echo "etcd: $((e1 - e0)) calls in $WINDOW s = $(echo "$e1 $e0 $WINDOW" | awk '{ printf "%.2f", ($1 - $2) / $3 }') calls/s"
echo "etcd-tls: $((t1 - t0)) calls in $WINDOW s = $(echo "$t1 $t0 $WINDOW" | awk '{ printf "%.2f", ($1 - $2) / $3 }') calls/s"
for kind in etcd etcd-tls; do
  sum=$(metric "$kind" sekka_hwm_persist_seconds_sum); count=$(metric "$kind" sekka_hwm_persist_seconds_count)
  echo "$kind: $((count - PCOUNT[$kind])) hwms stored, mean $(echo "$sum ${PSUM[$kind]} $count ${PCOUNT[$kind]}" | awk '{ printf "%.2f", 1000 * ($1 - $2) / ($3 - $4) }') ms each (fenced txn + data dir)"
done
echo "zookeeper: $((z1 - z0)) calls in $WINDOW s = $(echo "$z1 $z0 $WINDOW" | awk '{ printf "%.2f", ($1 - $2) / $3 }') calls/s (the C client's own session pings come on top: one per TTL/3)"
echo "== id generation: redis-benchmark -c 50 -P 16 -n 2000000 ID.NEXT, then ID.BATCH 1000 (rps), 3 rounds"
for round in 1 2 3; do
  line="round $round"
  for kind in local etcd zookeeper; do
    n=$(redis-benchmark -p "${RESP[$kind]}" -c 50 -P 16 -n 2000000 --csv ID.NEXT 2> /dev/null | tail -n 1 | tr -d '"' | awk -F, '{ print $2 }')
    b=$(redis-benchmark -p "${RESP[$kind]}" -c 4 -n 10000 --csv ID.BATCH 1000 2> /dev/null | tail -n 1 | tr -d '"' | awk -F, '{ print $2 }')
    line="$line  $kind: ID.NEXT $n, ID.BATCH $b"
  done
  echo "$line"
done
