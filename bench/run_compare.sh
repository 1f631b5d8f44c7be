#!/usr/bin/env bash
# Speed before and after a change, in one run: an earlier `sekka` binary (BASE, built from an
# older commit) and this tree's, side by side with the same peers as bench/run_server.sh
# (redis-server for RESP, nginx for HTTP), alternating within each round:
#   bash bench/run_compare.sh /path/to/old/sekka
# RESP servers are pinned to core 0 and the client to core 1. Every process started here is
# stopped by PID at exit; every load is bounded in count or time. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${1:?usage: bench/run_compare.sh OLD_SEKKA_BINARY}"
ROUNDS="${ROUNDS:-3}"
bash scripts/build.sh > /dev/null
NEW="$PWD/build/cli/sekka"
# shellcheck source=bench/lib.sh
source bench/lib.sh
start_work compare

OLD_RESP=$(free_port); NEW_RESP=$(free_port); OLD_HTTP=$(free_port); NEW_HTTP=$(free_port)
REDIS=$(free_port); NGINX=$(free_port)
for who in old new; do
  bin=$([ $who = old ] && echo "$BASE" || echo "$NEW")
  "$bin" segment create bench --step 1000 --data-dir "$WORK/$who" > /dev/null
done
taskset -c 0 "$BASE" serve --http "127.0.0.1:$(free_port)" --resp "127.0.0.1:$OLD_RESP" \
  --data-dir "$WORK/old" --threads 1 --log-level warn > /dev/null &
PIDS+=($!)
taskset -c 0 "$NEW" serve --http "127.0.0.1:$(free_port)" --resp "127.0.0.1:$NEW_RESP" \
  --data-dir "$WORK/new" --threads 1 --log-level warn > /dev/null &
PIDS+=($!)
"$BASE" serve --http "127.0.0.1:$OLD_HTTP" --resp "" --data-dir "$WORK/old-http" --threads 2 \
  --log-level warn > /dev/null &
PIDS+=($!)
"$NEW" serve --http "127.0.0.1:$NEW_HTTP" --resp "" --data-dir "$WORK/new-http" --threads 2 \
  --log-level warn > /dev/null &
PIDS+=($!)
taskset -c 0 redis-server --bind 127.0.0.1 --port "$REDIS" --save '' --appendonly no --dir "$WORK" \
  --daemonize no --loglevel warning > /dev/null &
PIDS+=($!)
start_nginx "$NGINX"
for p in "$OLD_RESP" "$NEW_RESP" "$OLD_HTTP" "$NEW_HTTP" "$REDIS" "$NGINX"; do wait_port "$p"; done
redis-cli -p "$REDIS" SET idsized "$ID_SIZED" > /dev/null

echo "== redis-benchmark -c 50 (rps p50_ms p99_ms); servers on core 0, client on core 1; $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
  for pipeline in 1 16; do
    n=$((pipeline == 1 ? 300000 : 2000000))
    rb() { taskset -c 1 redis-benchmark -p "$1" -c 50 -n "$n" -P "$pipeline" --csv "${@:2}" 2> /dev/null | csv; }
    r=$(rb "$REDIS" INCR idsized)
    o=$(rb "$OLD_RESP" ID.NEXT); w=$(rb "$NEW_RESP" ID.NEXT)
    os=$(rb "$OLD_RESP" SEG.NEXT bench); ws=$(rb "$NEW_RESP" SEG.NEXT bench)
    echo "round $round -P $pipeline  redis INCR: $r | ID.NEXT old: $o new: $w | SEG.NEXT old: $os new: $ws"
    echo "  ratios  ID.NEXT new/old $(echo "$w $o" | awk '{ printf "%.3f", $1 / $4 }')  new/redis $(echo "$w $r" | awk '{ printf "%.3f", $1 / $4 }')  SEG.NEXT new/old $(echo "$ws $os" | awk '{ printf "%.3f", $1 / $4 }')  new/redis $(echo "$ws $r" | awk '{ printf "%.3f", $1 / $4 }')"
  done
done

echo "== ID.BATCH 1000, 4 clients (ids/s; ceiling 4,096,000)"
for who in old new; do
  port=$([ $who = old ] && echo "$OLD_RESP" || echo "$NEW_RESP")
  rps=$(redis-benchmark -p "$port" -c 4 -n 20000 --csv ID.BATCH 1000 2> /dev/null | csv | awk '{ print $1 }')
  echo "$who: $(echo "$rps" | awk '{ printf "%.0f ids/s", $1 * 1000 }')"
done

echo "== wrk -t2 -c50 -d5s /v1/id (requests/s): nginx constant, old, new (2 loops each)"
for round in $(seq "$ROUNDS"); do
  g=$(wrk -t2 -c50 -d5s "http://127.0.0.1:$NGINX/v1/id" | awk '/Requests\/sec/ { print $2 }')
  o=$(wrk -t2 -c50 -d5s "http://127.0.0.1:$OLD_HTTP/v1/id" | awk '/Requests\/sec/ { print $2 }')
  w=$(wrk -t2 -c50 -d5s "http://127.0.0.1:$NEW_HTTP/v1/id" | awk '/Requests\/sec/ { print $2 }')
  echo "round $round  nginx: $g  old: $o  new: $w  new/old $(echo "$w $o" | awk '{ printf "%.3f", $1 / $2 }')  new/nginx $(echo "$w $g" | awk '{ printf "%.3f", $1 / $2 }')"
done

echo "== sekka gen -n 10000000 (ceiling 2.441 s): old against new"
hyperfine --warmup 1 --runs 5 --style basic "$BASE gen -n 10000000 > /dev/null" \
  "$NEW gen -n 10000000 --lock-dir $WORK/gen > /dev/null 2>&1"
