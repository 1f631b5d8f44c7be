#!/usr/bin/env bash
# A fleet on one coordinator (docs/reliability.md, "A fleet"): set-up and build as the README's
# commands do, then tests/faults/fleet.py per coordinator: N `sekka serve` on 127.0.0.1 on a
# 3-member etcd cluster and on a 3-server ZooKeeper ensemble, started at once, restarted in a
# rolling wave and then all at once, with clients drawing ids from a sample of them and a checker
# for repeated ids and worker ids. Exit status 1 if any run failed.
#
#   bash scripts/fleet.sh [--coordinator etcd|zookeeper]... [--servers N] [--out DIR] [fleet.py flags]
# Without --coordinator both run; N defaults to 200. Results go to DIR/<coordinator>/result.json
# (DIR default: fleet-out). Each phase is bounded (fleet.py --phase-timeout, 300 s).
set -euo pipefail
cd "$(dirname "$0")/.."
coordinators=() rest=() out=fleet-out servers=200
while [ $# -gt 0 ]; do
  case "$1" in
    --coordinator) coordinators+=("$2"); shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
[ ${#coordinators[@]} -gt 0 ] || coordinators=(etcd zookeeper)
bash scripts/build.sh > /dev/null
# Every server holds a few descriptors: raised to the hard limit.
ulimit -n "$(ulimit -Hn)"
status=0
for c in "${coordinators[@]}"; do
  echo "=== fleet: $servers servers on $c"
  SEKKA_BIN=${SEKKA_BIN:-build/cli/sekka} /usr/bin/python3 tests/faults/fleet.py --coordinator "$c" \
    --servers "$servers" --out "$out/$c" ${rest[@]+"${rest[@]}"} || status=1
done
exit $status
