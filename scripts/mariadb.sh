#!/usr/bin/env bash
# A throwaway MariaDB on 127.0.0.1 for tests (the ctest fixture `mariadb`), as root.
#   scripts/mariadb.sh start DIR   install a data dir in DIR, run it on a free port, make the
#                                  passwordless user sekka@127.0.0.1 and write the server's
#                                  base URI (mysql://sekka@127.0.0.1:PORT/) to DIR/uri
#   scripts/mariadb.sh halt DIR    stop the server (SIGTERM by its pid file; SIG=KILL to crash
#                                  it), keeping its data
#   scripts/mariadb.sh run DIR     run it again, on the same port, and wait until it answers
#   scripts/mariadb.sh stop DIR    stop it and remove DIR
# --no-defaults keeps Debian's /etc/mysql out; --skip-name-resolve (and the install's --force)
# keep it from asking DNS. --tmpdir keeps each server's temporary tables in its own DIR: in the
# shared /tmp, two installs side by side (a busy suite's stages) removed each other's, and the
# install failed ("Error on delete of '/tmp/#sql-temptable-...'").
set -euo pipefail
# shellcheck source=scripts/pidfile.sh
source "$(dirname "$0")/pidfile.sh"
cmd=${1:?start, halt, run or stop}
dir=${2:?directory}
client() { mariadb --no-defaults -S "$dir/sock" -u root "$@"; }
# Any failing step names itself and shows the server's logs before the fixture's cleanup
# removes them.
trap 'echo "mariadb.sh $cmd: \"$BASH_COMMAND\" failed (exit $?)" >&2; tail -n 80 "$dir/install.log" "$dir/err.log" >&2 2> /dev/null || true' ERR
free_port() {
  /usr/bin/python3 "$(dirname "$0")/../tests/free_port.py" > "$dir/port"
}
# Starts the server and waits until it answers. A port picked free can be taken by another
# process (another stage's fixture) before the server binds it: on that, and only when PICK is
# set (start; run keeps the port its URI names), it picks another port, five times at most.
run() {
  local pid
  for attempt in 1 2 3 4 5; do
    : > "$dir/err.log"
    mariadbd --no-defaults --datadir="$dir/data" --socket="$dir/sock" --port="$(cat "$dir/port")" \
      --bind-address=127.0.0.1 --skip-name-resolve --user=root --pid-file="$dir/pid" \
      --tmpdir="$dir/tmp" --log-error="$dir/err.log" --innodb-buffer-pool-size=64M \
      --innodb-flush-log-at-trx-commit=2 --max-connections=300 > /dev/null 2>&1 &
    pid=$!
    for _ in $(seq 600); do
      if client -e 'SELECT 1' > /dev/null 2>&1; then return 0; fi
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2> /dev/null; then
      echo "mariadb.sh: the server in $dir did not answer within 60 s" >&2
    elif [ -n "${PICK:-}" ] && [ "$attempt" -lt 5 ] && grep -q 'Address already in use' "$dir/err.log"; then
      echo "mariadb.sh: port $(cat "$dir/port") was taken before the server bound it; picking another" >&2
      free_port
      continue
    else
      echo "mariadb.sh: the server in $dir exited before it answered" >&2
    fi
    tail -n 20 "$dir/err.log" >&2
    exit 1
  done
}
halt() { TIMEOUT=${TIMEOUT:-300} halt_pidfile "$dir/pid"; }
case "$cmd" in
  start)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    free_port
    mkdir -p "$dir/tmp"
    # --force: without it the script looks up this host's name and "localhost" with resolveip
    # (a name lookup that can leave the machine) and fails when they do not resolve in time,
    # as it did on a busy machine twice.
    mariadb-install-db --no-defaults --force --datadir="$dir/data" --user=root \
      --auth-root-authentication-method=socket --skip-test-db --tmpdir="$dir/tmp" \
      > "$dir/install.log" 2>&1
    PICK=1 run
    client -e "CREATE USER 'sekka'@'127.0.0.1'; GRANT ALL PRIVILEGES ON *.* TO 'sekka'@'127.0.0.1';"
    echo "mysql://sekka@127.0.0.1:$(cat "$dir/port")/" > "$dir/uri"
    ;;
  run) run ;;
  halt) halt ;;
  stop)
    halt
    rm -rf "$dir"
    ;;
  *) echo "mariadb.sh: unknown command $cmd: allowed start, halt, run, stop" >&2; exit 2 ;;
esac
