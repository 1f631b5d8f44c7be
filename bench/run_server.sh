#!/usr/bin/env bash
# Server benchmarks of docs/benchmarks.md, every peer in the same run, all on 127.0.0.1:
#   1. redis-benchmark against `sekka serve` (ID.NEXT) and a redis-server (INCR), same settings
#      (50 clients; no pipelining, then -P 16), alternating, ROUNDS times;
#   2. ID.BATCH 1000 throughput against the layout ceiling;
#   3. wrk against /v1/id and against an nginx returning a constant body (same core count);
#   4. one client's latency per id: in-process, sekka over RESP, a Redis Lua snowflake,
#      PostgreSQL nextval.
# Every process started here is stopped by PID at exit; every load is bounded in count or time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
bash scripts/build.sh > /dev/null
SEKKA="$PWD/build/cli/sekka"
WORK=$(mktemp -d /tmp/sekka-bench-XXXXXX)
export SEKKA_WORKER_LOCK_DIR="$WORK/locks"  # the run's own, not the machine's
chmod 755 "$WORK"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  if [ -f "$WORK/pg/postmaster.pid" ]; then
    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$WORK/pg" -m fast stop > /dev/null 2>&1 || true
  fi
  wait 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh

SEKKA_HTTP=$(free_port); SEKKA_RESP=$(free_port); SEKKA_RESP_BP=$(free_port); REDIS=$(free_port); NGINX=$(free_port); PG=$(free_port)
# Each peer is matched core for core: one event loop against the single-threaded redis-server,
# two against nginx's two workers (the default, one per core on this machine).
"$SEKKA" segment create bench --step 1000 --data-dir "$WORK/sekka" > /dev/null
"$SEKKA" segment create steady --step 1000 --data-dir "$WORK/sekka" > /dev/null
"$SEKKA" segment create bench --step 1000 --data-dir "$WORK/sekka-bp" > /dev/null
# The RESP comparison is pinned: both servers on core 0, the benchmark client on core 1, so the
# scheduler's placement does not decide the result.
taskset -c 0 "$SEKKA" serve --http "127.0.0.1:$(free_port)" --resp "127.0.0.1:$SEKKA_RESP" \
  --data-dir "$WORK/sekka" --threads 1 --log-level warn > "$WORK/sekka-resp.out" &
SEKKA_PID=$!
PIDS+=($!)
# The same with busy polling (server.busy_poll_us, off by default): see docs/benchmarks.md.
taskset -c 0 "$SEKKA" serve --http "127.0.0.1:$(free_port)" --resp "127.0.0.1:$SEKKA_RESP_BP" \
  --data-dir "$WORK/sekka-bp" --threads 1 --busy-poll-us 50 --log-level warn > /dev/null &
PIDS+=($!)
"$SEKKA" serve --http "127.0.0.1:$SEKKA_HTTP" --resp "" --data-dir "$WORK/sekka2" --threads 2 \
  --log-level warn > /dev/null &
PIDS+=($!)
taskset -c 0 redis-server --bind 127.0.0.1 --port "$REDIS" --save '' --appendonly no --dir "$WORK" \
  --daemonize no --loglevel warning > /dev/null &
REDIS_PID=$!
PIDS+=($!)
start_nginx "$NGINX"
wait_port "$SEKKA_RESP"; wait_port "$SEKKA_RESP_BP"; wait_port "$SEKKA_HTTP"; wait_port "$REDIS"; wait_port "$NGINX"

# INCR on a fresh counter answers with a few digits; ID.NEXT with 18. "idsized" starts at an
# id-sized value so that both replies have the same length: both are reported.
redis-cli -p "$REDIS" SET idsized "$ID_SIZED" > /dev/null
echo "== redis-benchmark, 50 clients (rps p50_ms p99_ms), $ROUNDS rounds, sekka --threads 1; servers on core 0, client on core 1"
for round in $(seq "$ROUNDS"); do
  for pipeline in 1 16; do
    n=$((pipeline == 1 ? 300000 : 2000000))
    r=$(taskset -c 1 redis-benchmark -p "$REDIS" -c 50 -n "$n" -P "$pipeline" --csv INCR counter 2> /dev/null | csv)
    c0=$(cpu_ticks "$REDIS_PID")
    b=$(taskset -c 1 redis-benchmark -p "$REDIS" -c 50 -n "$n" -P "$pipeline" --csv INCR idsized 2> /dev/null | csv)
    c1=$(cpu_ticks "$REDIS_PID"); c2=$(cpu_ticks "$SEKKA_PID")
    s=$(taskset -c 1 redis-benchmark -p "$SEKKA_RESP" -c 50 -n "$n" -P "$pipeline" --csv ID.NEXT 2> /dev/null | csv)
    c3=$(cpu_ticks "$SEKKA_PID")
    p=$(taskset -c 1 redis-benchmark -p "$SEKKA_RESP_BP" -c 50 -n "$n" -P "$pipeline" --csv ID.NEXT 2> /dev/null | csv)
    echo "round $round -P $pipeline  redis INCR small: $r  redis INCR id-sized: $b  sekka ID.NEXT: $s  busy-poll: $p  ratios to id-sized: $(echo "$s $b $p" | awk '{ printf "%.3f busy-poll %.3f", $1 / $4, $7 / $4 }')  server CPU ticks redis $((c1 - c0)) sekka $((c3 - c2)) ratio $(echo "$((c3 - c2)) $((c1 - c0))" | awk '{ printf "%.3f", $1 / $2 }')"
  done
done

echo "== redis-benchmark, 50 clients: SEG.NEXT (segment ids from SQLite) against INCR, $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
  for pipeline in 1 16; do
    n=$((pipeline == 1 ? 300000 : 2000000))
    c0=$(cpu_ticks "$REDIS_PID")
    r=$(taskset -c 1 redis-benchmark -p "$REDIS" -c 50 -n "$n" -P "$pipeline" --csv INCR counter 2> /dev/null | csv)
    c1=$(cpu_ticks "$REDIS_PID"); c2=$(cpu_ticks "$SEKKA_PID")
    s=$(taskset -c 1 redis-benchmark -p "$SEKKA_RESP" -c 50 -n "$n" -P "$pipeline" --csv SEG.NEXT bench 2> /dev/null | csv)
    c3=$(cpu_ticks "$SEKKA_PID")
    p=$(taskset -c 1 redis-benchmark -p "$SEKKA_RESP_BP" -c 50 -n "$n" -P "$pipeline" --csv SEG.NEXT bench 2> /dev/null | csv)
    echo "round $round -P $pipeline  redis INCR: $r  sekka SEG.NEXT: $s  busy-poll: $p  ratios: $(echo "$s $r $p" | awk '{ printf "%.3f busy-poll %.3f", $1 / $4, $7 / $4 }')  server CPU ticks redis $((c1 - c0)) sekka $((c3 - c2)) ratio $(echo "$((c3 - c2)) $((c1 - c0))" | awk '{ printf "%.3f", $1 / $2 }')"
  done
done

echo "== a steady 100,000 segment ids/s for 30 s: store allocations"
SEKKA_RESP_HTTP=$(sed -n 's|.*HTTP on http://[^:]*:\([0-9]*\).*|\1|p' "$WORK/sekka-resp.out")
/usr/bin/python3 bench/segment_rate.py "$SEKKA_RESP" "$SEKKA_RESP_HTTP" steady 100000

echo "== ID.BATCH 1000 (ids/s against the ceiling of 4,096,000)"
for clients in 1 4; do
  rps=$(redis-benchmark -p "$SEKKA_RESP" -c "$clients" -n 20000 --csv ID.BATCH 1000 2> /dev/null | csv | awk '{ print $1 }')
  echo "clients $clients: $rps batches/s = $(echo "$rps" | awk '{ printf "%.0f ids/s = %.1f%% of the ceiling", $1 * 1000, $1 * 1000 / 40960 }')"
done

echo "== wrk -t2 -c50 -d5s (requests/s), nginx 2 workers, sekka --threads 2"
for round in $(seq "$ROUNDS"); do
  n=$(wrk -t2 -c50 -d5s "http://127.0.0.1:$NGINX/v1/id" | awk '/Requests\/sec/ { print $2 }')
  s=$(wrk -t2 -c50 -d5s "http://127.0.0.1:$SEKKA_HTTP/v1/id" | awk '/Requests\/sec/ { print $2 }')
  echo "round $round  nginx constant: $n   sekka /v1/id: $s   ratio: $(echo "$s $n" | awk '{ printf "%.3f", $1 / $2 }')"
done

echo "== one client, latency per id (microseconds)"
inproc=$("$SEKKA" bench --threads 1 --seconds 1 --json | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; print("%.4f" % (1e6 / r["ids_per_second"]))')
echo "in-process NextId (sekka layout, capped): $inproc"
resp=$(redis-benchmark -p "$SEKKA_RESP" -c 1 -n 50000 --csv ID.NEXT 2> /dev/null | tail -n 1 | tr -d '"' | awk -F, '{ print $3 * 1000 }')
echo "sekka ID.NEXT over RESP: $resp"
LUA='local t = redis.call("TIME"); local ms = t[1] * 1000 + math.floor(t[2] / 1000) - 1735689600000; local seq = redis.call("INCR", "seq:" .. ms) % 4096; redis.call("PEXPIRE", "seq:" .. ms, 10); return ms * 4194304 + seq'
SHA=$(redis-cli -p "$REDIS" SCRIPT LOAD "$LUA")
lua=$(redis-benchmark -p "$REDIS" -c 1 -n 50000 --csv EVALSHA "$SHA" 0 2> /dev/null | tail -n 1 | tr -d '"' | awk -F, '{ print $3 * 1000 }')
echo "Redis Lua snowflake (TIME + INCR) over RESP: $lua"
mkdir -p "$WORK/pg" && chown postgres "$WORK/pg"
runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$WORK/pg" -U postgres --auth=trust --no-sync > /dev/null
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$WORK/pg" -w -l "$WORK/pg/log" \
  -o "-p $PG -k $WORK/pg -c listen_addresses=127.0.0.1 -c fsync=off" start > /dev/null
/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p "$PG" -U postgres -qc 'CREATE SEQUENCE ids' > /dev/null
echo 'SELECT nextval('"'"'ids'"'"');' > "$WORK/nextval.sql"
pg=$(/usr/lib/postgresql/15/bin/pgbench -h 127.0.0.1 -p "$PG" -U postgres -n -c 1 -T 5 -f "$WORK/nextval.sql" postgres 2> /dev/null | awk '/latency average/ { print $4 * 1000 }')
echo "PostgreSQL nextval (pgbench, prepared off, fsync off): $pg"
