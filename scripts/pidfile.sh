# Sourced by the throwaway-server scripts (mariadb.sh, redis.sh): stops the process a pid file
# names: SIGCONT first (a test may have stopped it), then ${SIG:-TERM}, then SIGKILL if it still
# runs after TIMEOUT tenths of a second (default 100); the pid file is removed. Nothing is
# signalled without one.
halt_pidfile() {
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  kill -CONT "$pid" 2> /dev/null || true
  kill -"${SIG:-TERM}" "$pid" 2> /dev/null || true
  for _ in $(seq "${TIMEOUT:-100}"); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2> /dev/null || true
  rm -f "$file"
}
