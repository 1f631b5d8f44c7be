#!/usr/bin/env bash
# The fault campaign on real processes (docs/reliability.md): set-up and build as the README's
# commands do, then, per coordinator and seed, tests/faults/campaign.py: a 3-member etcd cluster
# (etcd-tls: over TLS, with client certificates and users) or ZooKeeper ensemble, or one Redis, a
# segment store (--store postgres|mariadb|redis; --peer leaf|tinyid runs that peer's allocation
# beside sekka on MariaDB) and 3 `sekka serve` on 127.0.0.1, 8 clients, a seeded nemesis, and the
# checker. Exit status 1 if any run found a failure.
#
#   bash scripts/faults.sh [--coordinator etcd|etcd-tls|zookeeper|redis] [--minutes N] [--seed S]...
#                          [--out DIR] [other campaign.py flags]
# Without --coordinator etcd and zookeeper run; each --seed adds a run (default: seed 1). Results go to
# DIR/<coordinator>-seed<S>/result.json (DIR default: faults-out). Every run is bounded by
# --minutes (default 20) plus at most a few minutes of set-up and recovery.
set -euo pipefail
cd "$(dirname "$0")/.."
coordinators=() seeds=() rest=() out=faults-out minutes=20
while [ $# -gt 0 ]; do
  case "$1" in
    --coordinator) coordinators+=("$2"); shift 2 ;;
    --seed) seeds+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
[ ${#coordinators[@]} -gt 0 ] || coordinators=(etcd zookeeper)
[ ${#seeds[@]} -gt 0 ] || seeds=(1)
bash scripts/build.sh > /dev/null
status=0
for c in "${coordinators[@]}"; do
  for s in "${seeds[@]}"; do
    echo "=== faults: $c, seed $s, $minutes min"
    SEKKA_BIN=${SEKKA_BIN:-build/cli/sekka} /usr/bin/python3 tests/faults/campaign.py --coordinator "$c" \
      --seed "$s" --minutes "$minutes" --out "$out/$c-seed$s" ${rest[@]+"${rest[@]}"} || status=1
  done
done
exit $status
