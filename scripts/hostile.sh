#!/usr/bin/env bash
# The hostile-client campaign, long form (tests/hostile/hostile.py): every attack (slow senders,
# non-reading pipeliners, unauthenticated partial bulks, AUTH guessing, huge batches, silent
# unauthenticated connections) against a real `sekka serve` and Debian's redis-server, one after
# the other, each for --seconds per target, with connection counts times --scale; then
# tests/hostile/tls_http.py (half-finished and replayed TLS handshakes against redis-server's TLS
# port, /metrics floods against nginx). Records each server's peak RSS and a well-behaved
# client's latency and errors during each attack; writes DIR/result.json (and the servers' logs)
# and prints a Markdown table. Bounded: 6 attacks x 2 targets x (--seconds + ~2 s), then 3
# attacks x 2 targets x --seconds.
#
#   bash scripts/hostile.sh [--seconds N] [--scale X] [--out DIR] [other hostile.py flags]
#
# Defaults: 20 s, scale 1, DIR hostile-out. The binary is HOSTILE_SEKKA_BIN (default
# build/cli/sekka; build it first with scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=20 scale=1 out=hostile-out rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
bin=${HOSTILE_SEKKA_BIN:-build/cli/sekka}
if [ ! -x "$bin" ]; then
  echo "hostile.sh: $bin is not built (bash scripts/build.sh)" >&2
  exit 1
fi
HOSTILE_SEKKA_BIN=$(realpath "$bin") /usr/bin/python3 tests/hostile/hostile.py \
  --seconds "$seconds" --scale "$scale" --out "$out" ${rest[@]+"${rest[@]}"}
# The attacks that need TLS or HTTP peers (half-finished handshakes, replayed ClientHellos
# against redis-server's TLS port; /metrics floods against nginx): DIR/tls_http.json.
HOSTILE_SEKKA_BIN=$(realpath "$bin") /usr/bin/python3 tests/hostile/tls_http.py \
  --seconds "$seconds" --scale "$scale" --out "$out"
