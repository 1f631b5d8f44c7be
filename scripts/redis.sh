#!/usr/bin/env bash
# A throwaway redis-server on 127.0.0.1 for tests (the ctest fixture `redis`), durable as sekka
# asks (appendonly yes, appendfsync always), with 100,000 databases (each case takes one).
#   scripts/redis.sh start DIR   run it on a free port, write its URI (redis://127.0.0.1:PORT) to
#                                DIR/uri (PERSIST=no: no AOF, as a cache would run)
#   scripts/redis.sh halt DIR    stop it (SIGTERM by its pid file; SIG=KILL to crash it), keeping
#                                its data
#   scripts/redis.sh run DIR     run it again on the same port and files
#   scripts/redis.sh stop DIR    stop it and remove DIR
set -euo pipefail
# shellcheck source=scripts/pidfile.sh
source "$(dirname "$0")/pidfile.sh"
cmd=${1:?start, halt, run or stop}
dir=${2:?directory}
run() {
  local port
  port=$(cat "$dir/port")
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly "$(cat "$dir/aof")" \
    --appendfsync always --dir "$dir" --databases 100000 --pidfile "$dir/pid" \
    --daemonize yes --logfile "$dir/log" > /dev/null
  for _ in $(seq 100); do
    if redis-cli -h 127.0.0.1 -p "$port" PING 2> /dev/null | grep -q PONG; then return 0; fi
    sleep 0.1
  done
  echo "redis.sh: the server in $dir did not answer within 10 s (see $dir/log)" >&2
  exit 1
}
halt() { TIMEOUT=${TIMEOUT:-100} halt_pidfile "$dir/pid"; }
case "$cmd" in
  start)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    /usr/bin/python3 "$(dirname "$0")/../tests/free_port.py" > "$dir/port"
    [ "${PERSIST:-yes}" = no ] && echo no > "$dir/aof" || echo yes > "$dir/aof"
    run
    echo "redis://127.0.0.1:$(cat "$dir/port")" > "$dir/uri"
    ;;
  run) run ;;
  halt) halt ;;
  stop)
    halt
    rm -rf "$dir"
    ;;
  *) echo "redis.sh: unknown command $cmd: allowed start, halt, run, stop" >&2; exit 2 ;;
esac
