#!/usr/bin/env bash
# Segment stores side by side, one run (docs/benchmarks.md, "Segment stores"): SQLite,
# PostgreSQL, MariaDB (sekka's table, and Leaf's in place) and Redis (appendfsync always), each
# started here on 127.0.0.1 by the test scripts (scripts/pg.sh, mariadb.sh, redis.sh):
#   1. in-process segment ids/s on that store (bench/segment_bench.cc with SEKKA_BENCH_STORE),
#      and how many ids each store round trip gave;
#   2. `SEG.NEXT` over RESP from a `sekka serve` on that store against a redis-server's `INCR`,
#      same settings (redis-benchmark -c 50, -P 1 and -P 16), both pinned to core 0 and the
#      client to core 1, alternating, ROUNDS times; the server's store fetches per request.
# Every process started here is stopped by PID (or its script's pid file) at exit; every load is
# bounded in count.
#   ROUNDS=2 bash bench/run_stores.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-2}"
bash scripts/build.sh > /dev/null
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSEKKA_BUILD_BENCH=ON -DSEKKA_BUILD_TESTS=OFF \
  -DSEKKA_BUILD_CLI=OFF > /dev/null && cmake --build build-bench -j2 --target segment_bench > /dev/null
SEKKA="$PWD/build/cli/sekka"
# shellcheck source=bench/lib.sh
source bench/lib.sh
start_work stores
chmod 755 "$WORK"
stop_stores() {
  bash scripts/pg.sh stop "$WORK/pg" > /dev/null 2>&1 || true
  bash scripts/mariadb.sh stop "$WORK/mariadb" > /dev/null 2>&1 || true
  bash scripts/redis.sh stop "$WORK/redis" > /dev/null 2>&1 || true
  cleanup_work
}
trap stop_stores EXIT
bash scripts/pg.sh start "$WORK/pg" > /dev/null
bash scripts/mariadb.sh start "$WORK/mariadb" > /dev/null
bash scripts/redis.sh start "$WORK/redis" > /dev/null
MY=$(cat "$WORK/mariadb/uri")
mariadb --no-defaults -S "$WORK/mariadb/sock" -u root -e "CREATE DATABASE ids; CREATE DATABASE leaf;
  CREATE TABLE leaf.leaf_alloc (biz_tag VARCHAR(128) NOT NULL DEFAULT '', max_id BIGINT NOT NULL
  DEFAULT 1, step INT NOT NULL, description VARCHAR(256) DEFAULT NULL, update_time TIMESTAMP NOT
  NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag)) ENGINE=InnoDB"
declare -A STORES=(
  [sqlite]="sqlite:$WORK/segments.db"
  [postgres]="$(cat "$WORK/pg/uri")"
  [mariadb]="${MY}ids"
  [mariadb-leaf]="${MY}leaf?schema=leaf"
  [redis]="$(cat "$WORK/redis/uri")/0"
)
ORDER=(sqlite postgres mariadb mariadb-leaf redis)

echo "== in-process: segment ids/s from each store (one thread, NextId), ids per round trip"
for name in "${ORDER[@]}"; do
  out=$(SEKKA_BENCH_STORE="${STORES[$name]}" taskset -c 0 build-bench/bench/segment_bench \
    --benchmark_filter='BM_SegmentNextId/real_time/threads:1$' --benchmark_min_time=2 2>&1)
  rate=$(echo "$out" | awk '/BM_SegmentNextId/ { for (i = 1; i <= NF; i++) if ($i ~ /items_per_second=/) { sub("items_per_second=", "", $i); print $i } }')
  echo "$name: $rate ids/s; $(echo "$out" | grep 'store round trips')"
done

REDIS=$(free_port)
taskset -c 0 redis-server --bind 127.0.0.1 --port "$REDIS" --save '' --appendonly no --dir "$WORK" \
  --daemonize no --loglevel warning > /dev/null &
RP=$!; PIDS+=($!)
wait_port "$REDIS"
echo "== redis-benchmark -c 50: SEG.NEXT from a sekka on each store against redis-server INCR"
for name in "${ORDER[@]}"; do
  uri="${STORES[$name]}"
  "$SEKKA" segment create bench --step 1000 --segment-store "$uri" > /dev/null 2>&1 || true
  port=$(free_port); http=$(free_port)
  taskset -c 0 "$SEKKA" serve --http "127.0.0.1:$http" --resp "127.0.0.1:$port" \
    --data-dir "$WORK/sekka-$name" --segment-store "$uri" --threads 1 --log-level warn > /dev/null &
  SP=$!; PIDS+=($!)
  wait_port "$port"
  for round in $(seq "$ROUNDS"); do
    for pipeline in 1 16; do
      n=$((pipeline == 1 ? 200000 : 2000000))
      r=$(taskset -c 1 redis-benchmark -p "$REDIS" -c 50 -n "$n" -P "$pipeline" --csv INCR x 2> /dev/null | csv)
      f0=$(curl -s "127.0.0.1:$http/metrics" | awk '/^sekka_segment_fetches_total/ { s += $2 } END { print s + 0 }')
      c0=$(cpu_ticks "$SP")
      s=$(taskset -c 1 redis-benchmark -p "$port" -c 50 -n "$n" -P "$pipeline" --csv SEG.NEXT bench 2> /dev/null | csv)
      c1=$(cpu_ticks "$SP")
      f1=$(curl -s "127.0.0.1:$http/metrics" | awk '/^sekka_segment_fetches_total/ { s += $2 } END { print s + 0 }')
      echo "$name round $round -P $pipeline  INCR: $r  SEG.NEXT: $s  ratio $(echo "$s $r" | awk '{ printf "%.3f", $1 / $4 }')  store fetches $((f1 - f0)) for $n requests  sekka CPU ticks $((c1 - c0))"
    done
  done
  kill "$SP"; wait "$SP" 2> /dev/null || true
done
