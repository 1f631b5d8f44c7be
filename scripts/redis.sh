#!/usr/bin/env bash
# A throwaway redis-server on 127.0.0.1 for tests (the ctest fixture `redis`), durable as sekka
# asks (appendonly yes, appendfsync always), with 100,000 databases (each case takes one).
#   scripts/redis.sh start DIR   run it on a free port, write its URI (redis://127.0.0.1:PORT) to
#                                DIR/uri
#   scripts/redis.sh stop DIR    stop it (by its pid file) and remove DIR
set -euo pipefail
cmd=${1:?start or stop}
dir=${2:?directory}
case "$cmd" in
  start)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly yes --appendfsync always --dir "$dir" \
      --databases 100000 --pidfile "$dir/pid" --daemonize yes --logfile "$dir/log" > /dev/null
    for _ in $(seq 100); do
      if redis-cli -h 127.0.0.1 -p "$port" PING 2> /dev/null | grep -q PONG; then break; fi
      sleep 0.1
    done
    echo "redis://127.0.0.1:$port" > "$dir/uri"
    ;;
  stop)
    if [ -f "$dir/pid" ]; then
      pid=$(cat "$dir/pid")
      kill -CONT "$pid" 2> /dev/null || true
      kill "$pid" 2> /dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2> /dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "redis.sh: unknown command $cmd: allowed start, stop" >&2; exit 2 ;;
esac
