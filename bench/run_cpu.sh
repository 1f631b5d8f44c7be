#!/usr/bin/env bash
# Where a pinned server's CPU goes (docs/benchmarks.md, "The server after issue 24"): sekka
# ID.NEXT against redis-server INCR, both on core 0 with the client (redis-benchmark -c 50) on
# core 1; per run, requests/s, the server's CPU ticks, its syscalls per request (perf stat on
# the syscall tracepoints: strace slows the server and hides its failed reads) and, from nstat,
# the TCP segments and ACKs the whole machine sent meanwhile. Not part of the test suite; every process started here is
# stopped by PID at exit; each load is bounded in count.
#   P=1 N=300000 ROUNDS=2 bash bench/run_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
start_work cpu
SEKKA="${SEKKA:-build/cli/sekka}"
start_pinned_pair
CALLS=$(printf 'syscalls:sys_enter_%s,' read recvfrom recvmsg write sendto epoll_wait epoll_ctl)
CALLS=${CALLS%,}
for round in $(seq "${ROUNDS:-2}"); do
  for who in redis sekka; do
    pid=$([ $who = redis ] && echo "$RP" || echo "$SP")
    port=$([ $who = redis ] && echo "$RR" || echo "$SR")
    cmd=$([ $who = redis ] && echo "INCR x" || echo "ID.NEXT")
    nstat -n > /dev/null; c0=$(cpu_ticks "$pid")
    perf stat -x, -o "$WORK/stat" -e "$CALLS" -p "$pid" & PS=$!
    sleep 0.3
    # shellcheck disable=SC2086
    r=$(taskset -c 1 redis-benchmark -p "$port" -c 50 -n "${N:-300000}" -P "${P:-1}" --csv $cmd 2> /dev/null | csv)
    c1=$(cpu_ticks "$pid")
    kill -INT $PS; wait $PS || true
    calls=$(awk -F, -v n="${N:-300000}" '/syscalls:/ && $1 / n >= 0.005 {
      sub(/syscalls:sys_enter_/, "", $3); printf "%s=%.2f ", $3, $1 / n }' "$WORK/stat")
    segs=$(nstat -z TcpOutSegs TcpExtDelayedACKs TcpExtTCPPureAcks TcpExtTCPHPAcks | awk 'NR > 1 { printf "%s=%s ", $1, $2 }')
    echo "round $round $who: $r  cpu ticks $((c1 - c0))  per request: $calls $segs"
  done
done
