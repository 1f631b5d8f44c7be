# Helpers shared by the benchmark scripts (sourced, not run). Each script keeps its own WORK dir
# and PIDS array; what is started here is added to PIDS, so the script's cleanup stops it.
# A temp dir in WORK and the PIDS array, both cleaned up at exit (the scripts whose cleanup has
# more to do keep their own).
start_work() {
  WORK=$(mktemp -d "/tmp/sekka-$1-XXXXXX")
  # The run's own worker lock dir: never the machine's /var/lib/sekka/workers, where root-owned
  # files would outlive the run (and the package test checks that every file there is sekka's).
  export SEKKA_WORKER_LOCK_DIR="$WORK/locks"
  PIDS=()
  trap cleanup_work EXIT
}
cleanup_work() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$WORK"
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2> /dev/null && return 0; sleep 0.05; done; return 1; }
# An id of the default layout has 18 digits: Redis counters start here when their replies must be
# as long as sekka's.
ID_SIZED=249780180292206592
# The CPU a process has used so far, all its threads: user + system, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# sekka serve (--threads 1, $SEKKA) and redis-server, both pinned to core 0 on free ports, for the
# CPU comparisons: sets SP and RP (their PIDs), SR and RR (their RESP ports) and SH (sekka's HTTP).
start_pinned_pair() {
  SH=$(free_port); SR=$(free_port); RR=$(free_port)
  taskset -c 0 "$SEKKA" serve --http "127.0.0.1:$SH" --resp "127.0.0.1:$SR" \
    --data-dir "$WORK/s" --threads 1 --io "${IO:-auto}" --log-level warn > /dev/null &
  SP=$!; PIDS+=($!)
  taskset -c 0 redis-server --bind 127.0.0.1 --port "$RR" --save '' --appendonly no --dir "$WORK" \
    --daemonize no --loglevel warning > /dev/null &
  RP=$!; PIDS+=($!)
  wait_port "$SR"; wait_port "$RR"; wait_port "$SH"
}
csv() { # redis-benchmark --csv line -> "rps p50 p99"
  tail -n 1 | tr -d '"' | awk -F, '{ printf "%s %s %s\n", $2, $5, $7 }'
}
# nginx with two workers on 127.0.0.1:PORT answering every path with a constant id as JSON: the
# HTTP peer (what a server that does no work at all can do).
start_nginx() {
  local port="$1"
  mkdir -p "$WORK/nginx/logs"
  cat > "$WORK/nginx/nginx.conf" << CONF
worker_processes 2;
error_log $WORK/nginx/logs/error.log warn;
pid $WORK/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fastcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  server {
    listen 127.0.0.1:$port;
    location / { default_type application/json; return 200 '{"id":"249780180292206592"}'; }
  }
}
CONF
  nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off; user root;' &
  PIDS+=($!)
}
