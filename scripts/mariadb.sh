#!/usr/bin/env bash
# A throwaway MariaDB on 127.0.0.1 for tests (the ctest fixture `mariadb`), as root.
#   scripts/mariadb.sh start DIR   install a data dir in DIR, run it on a free port, make the
#                                  passwordless user sekka@127.0.0.1 and write the server's
#                                  base URI (mysql://sekka@127.0.0.1:PORT/) to DIR/uri
#   scripts/mariadb.sh halt DIR    stop the server (SIGTERM by its pid file; SIG=KILL to crash
#                                  it), keeping its data
#   scripts/mariadb.sh run DIR     run it again, on the same port, and wait until it answers
#   scripts/mariadb.sh stop DIR    stop it and remove DIR
# --no-defaults keeps Debian's /etc/mysql out; --skip-name-resolve keeps it from asking DNS.
set -euo pipefail
# shellcheck source=scripts/pidfile.sh
source "$(dirname "$0")/pidfile.sh"
cmd=${1:?start, halt, run or stop}
dir=${2:?directory}
client() { mariadb --no-defaults -S "$dir/sock" -u root "$@"; }
run() {
  mariadbd --no-defaults --datadir="$dir/data" --socket="$dir/sock" --port="$(cat "$dir/port")" \
    --bind-address=127.0.0.1 --skip-name-resolve --user=root --pid-file="$dir/pid" \
    --log-error="$dir/err.log" --innodb-buffer-pool-size=64M \
    --innodb-flush-log-at-trx-commit=2 --max-connections=300 > /dev/null 2>&1 &
  for _ in $(seq 600); do
    if client -e 'SELECT 1' > /dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "mariadb.sh: the server in $dir did not answer within 60 s (see $dir/err.log)" >&2
  exit 1
}
halt() { TIMEOUT=${TIMEOUT:-300} halt_pidfile "$dir/pid"; }
case "$cmd" in
  start)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' > "$dir/port"
    mariadb-install-db --no-defaults --datadir="$dir/data" --user=root \
      --auth-root-authentication-method=socket --skip-test-db > "$dir/install.log" 2>&1
    run
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
