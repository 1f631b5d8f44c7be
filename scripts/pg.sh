#!/usr/bin/env bash
# A throwaway PostgreSQL 15 on 127.0.0.1 for tests (the ctest fixture `postgres`).
#   scripts/pg.sh start DIR   initdb in DIR, start on a free port, write its URI to DIR/uri
#   scripts/pg.sh stop DIR    stop it (by its pid file) and remove DIR
set -euo pipefail
BIN=/usr/lib/postgresql/15/bin
cmd=${1:?start or stop}
dir=${2:?directory}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
  start)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
      chown postgres "$dir"
      chmod o+x "$(dirname "$dir")"  # PostgreSQL runs as postgres: the parent must be traversable
    fi
    port=$(/usr/bin/python3 "$(dirname "$0")/../tests/free_port.py")
    as_pg "$BIN/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync > "$dir/initdb.log"
    # In the configuration file, so that a plain `pg_ctl start` (tests restart it) keeps them.
    cat >> "$dir/data/postgresql.conf" << CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = off
max_connections = 300
CONF
    as_pg "$BIN/pg_ctl" -D "$dir/data" -w -l "$dir/server.log" start > /dev/null
    echo "postgres://postgres@127.0.0.1:$port/postgres" > "$dir/uri"
    ;;
  stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_pg "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop > /dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "pg.sh: unknown command $cmd: allowed start, stop" >&2; exit 2 ;;
esac
