#!/usr/bin/env bash
# sekka's CPU and system calls per request against Redis's, both measured over the same seconds:
# sekka (ID.NEXT, or CMD="SEG.NEXT bench") and redis-server (INCR) pinned together to core 0,
# each loaded by its own redis-benchmark (-c CONNECTIONS, default 25, -P P, default 1) pinned to
# core 1, for WINDOWS windows of SECONDS_PER seconds. IO chooses sekka's server.io (default
# auto). System calls are counted by perf stat on raw_syscalls:sys_enter over each window.
# FLOOR=1 runs bench/uring_floor.cc (built here with g++) in sekka's place: the CPU per request
# that answering at all costs on io_uring, below which no design of sekka's can go.
# Run one after the other (bench/run_cpu.sh), the two servers met different moments of this
# shared machine, and a server's CPU per request moved by up to 40% between rounds; side by
# side, what the machine does to one it does to the other. Each server is busier than when alone (they share a core),
# so both wake less often per request than in run_cpu.sh: the ratio, not the level, is the
# result. Not part of the test suite; every process started here is stopped by PID at exit;
# each load is bounded in count and in time.
#   P=1 WINDOWS=6 SECONDS_PER=8 bash bench/run_cpu_pair.sh
#   CMD="SEG.NEXT bench" P=1 WINDOWS=6 SECONDS_PER=8 bash bench/run_cpu_pair.sh
#   IO=epoll P=16 CONNECTIONS=500 bash bench/run_cpu_pair.sh
#   FLOOR=1 P=1 bash bench/run_cpu_pair.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
start_work cpu-pair
SEKKA="${SEKKA:-build/cli/sekka}"
WINDOWS="${WINDOWS:-6}"
SECONDS_PER="${SECONDS_PER:-8}"
CMD="${CMD:-ID.NEXT}"
CONNECTIONS="${CONNECTIONS:-25}"
case "$CMD" in
  ID.NEXT) label=id ;;
  "SEG.NEXT bench")
    label=segment
    "$SEKKA" segment create bench --step 1000 --data-dir "$WORK/s" > /dev/null
    ;;
  *) echo "CMD is \"ID.NEXT\" or \"SEG.NEXT bench\", not \"$CMD\"" >&2; exit 2 ;;
esac
if [ "${FLOOR:-0}" = 1 ]; then
  g++ -O2 -std=c++20 bench/uring_floor.cc -o "$WORK/floor" -luring
  SR=$(free_port); RR=$(free_port)
  taskset -c 0 "$WORK/floor" "$SR" &
  SP=$!; PIDS+=($!)
  taskset -c 0 redis-server --bind 127.0.0.1 --port "$RR" --save '' --appendonly no --dir "$WORK" \
    --daemonize no --loglevel warning > /dev/null &
  RP=$!; PIDS+=($!)
  wait_port "$SR"; wait_port "$RR"
else
  start_pinned_pair
fi
# Redis's counter starts id-sized, so that its replies are as long as sekka's ids (the clients
# share core 1: a shorter reply would let Redis's client send more).
redis-cli -p "$RR" SET x "$ID_SIZED" > /dev/null
served_redis() { redis-cli -p "$RR" GET x | tr -d '\r'; }
served_sekka() {
  if [ "${FLOOR:-0}" = 1 ]; then redis-cli -p "$SR" GET x | tr -d '\r'; return; fi
  curl -s "http://127.0.0.1:$SH/metrics" |
    awk '$0 ~ "^sekka_requests_total\\{protocol=\"resp\",command=\"'"$label"'\""  { n += $2 } END { printf "%d\n", n }'
}
limit=$((WINDOWS * SECONDS_PER + 20))
for who in redis sekka; do
  port=$([ $who = redis ] && echo "$RR" || echo "$SR")
  cmd=$([ $who = redis ] && echo "INCR x" || echo "$CMD")
  # shellcheck disable=SC2086
  taskset -c 1 timeout "$limit" redis-benchmark -p "$port" -c "$CONNECTIONS" -n 200000000 -P "${P:-1}" \
    $cmd > /dev/null 2>&1 &
  PIDS+=($!)
done
sleep 3  # both loads running
ratios=(); served=(); calls=()
for w in $(seq "$WINDOWS"); do
  r0=$(served_redis); s0=$(served_sekka); rc0=$(cpu_ticks "$RP"); sc0=$(cpu_ticks "$SP")
  perf stat -x, -e raw_syscalls:sys_enter -p "$RP" -o "$WORK/rsys" -- sleep "$SECONDS_PER" &
  rs=$!
  perf stat -x, -e raw_syscalls:sys_enter -p "$SP" -o "$WORK/ssys" -- sleep "$SECONDS_PER"
  wait "$rs"
  r1=$(served_redis); s1=$(served_sekka); rc1=$(cpu_ticks "$RP"); sc1=$(cpu_ticks "$SP")
  if [ $((r1 - r0)) -le 0 ] || [ $((s1 - s0)) -le 0 ]; then
    echo "window $w: a server answered no requests (redis $((r1 - r0)), sekka $((s1 - s0)))" >&2
    exit 1
  fi
  rsys=$(grep raw_syscalls "$WORK/rsys" | cut -d, -f1); ssys=$(grep raw_syscalls "$WORK/ssys" | cut -d, -f1)
  line=$(awk -v r=$((r1 - r0)) -v s=$((s1 - s0)) -v rc=$((rc1 - rc0)) -v sc=$((sc1 - sc0)) \
    -v rsys="$rsys" -v ssys="$ssys" 'BEGIN {
    rpr = rc / r * 1e6; spr = sc / s * 1e6
    printf "requests redis %d sekka %d (%.3f)  system calls per request redis %.3f sekka %.3f  ",
      r, s, s / r, rsys / r, ssys / s
    printf "ticks per million requests redis %.0f sekka %.0f  ratio %.3f", rpr, spr, spr / rpr }')
  echo "window $w: $line"
  ratios+=("${line##* }")
  served+=("$(awk -v r=$((r1 - r0)) -v s=$((s1 - s0)) 'BEGIN { printf "%.3f", s / r }')")
  calls+=("$(awk -v r=$((r1 - r0)) -v s=$((s1 - s0)) -v rsys="$rsys" -v ssys="$ssys" \
    'BEGIN { printf "%.3f", (ssys / s) / (rsys / r) }')")
done
median() { sort -n | awk '{ a[NR] = $1 } END { printf "%.3f", (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
echo "median CPU per request ratio $(printf '%s\n' "${ratios[@]}" | median)," \
  "requests served ratio $(printf '%s\n' "${served[@]}" | median)," \
  "system calls per request ratio $(printf '%s\n' "${calls[@]}" | median)" \
  "($WINDOWS windows, $SECONDS_PER s each, -P ${P:-1}, $CONNECTIONS connections, $([ "${FLOOR:-0}" = 1 ] && echo "the io_uring floor in sekka's place" || echo "sekka I/O ${IO:-auto}"))"
