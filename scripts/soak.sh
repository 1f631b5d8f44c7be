#!/usr/bin/env bash
# The soak (docs/reliability.md): the fault campaign's workload on the same cluster, without
# faults, for --minutes (default 10), with more clients (default 12) to load the machine.
# Reports requests and ids per second, latency p50/p99/p999 per minute, and each server's RSS
# and open files per minute; writes DIR/result.json and DIR/soak.svg (DIR default: soak-out).
#
#   bash scripts/soak.sh [--minutes N] [--clients N] [--coordinator etcd|zookeeper] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--soak --minutes 10 --clients 12 --out soak-out)
bash scripts/build.sh > /dev/null
SEKKA_BIN=${SEKKA_BIN:-build/cli/sekka} /usr/bin/python3 tests/faults/campaign.py "${args[@]}" "$@"
