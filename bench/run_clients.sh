#!/usr/bin/env bash
# The clients' cost per id from their buffer against one ID.NEXT round trip per id, and
# nextId() latency while 4 threads (tasks) draw 100,000 ids/s together (docs/benchmarks.md,
# "Clients"). One `sekka serve` on 127.0.0.1 (core 0), each language's benchmark on core 1 in
# turn: Python (python3-redis as the round trip), Node.js (ioredis), Java (its own RESP
# connection: the JDK has no Redis client), C++ (its own), Go (a plain socket: its standard
# library has no Redis client). Bounded: each language runs for well under a minute. Prints
# one JSON line per language.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build -j2 > /dev/null
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSEKKA_BUILD_BENCH=ON -DSEKKA_BUILD_TESTS=OFF \
  -DSEKKA_BUILD_CLI=OFF > /dev/null && cmake --build build-bench -j2 --target client_bench > /dev/null
start_work clients
PORT=$(free_port)
taskset -c 0 build/cli/sekka serve --http "" --resp "127.0.0.1:$PORT" --data-dir "$WORK/data" \
  > /dev/null 2> "$WORK/serve.log" &
PIDS+=($!)
wait_port "$PORT"
ADDRESS="127.0.0.1:$PORT"
taskset -c 1 timeout 300 /usr/bin/python3 clients/python/bench/bench_client.py "$ADDRESS"
(cd clients/node && taskset -c 1 timeout 300 node bench/bench.mjs "$ADDRESS")
mkdir -p "$WORK/java"
javac --release 17 -d "$WORK/java" clients/java/src/main/java/io/sekka/client/*.java \
  clients/java/bench/io/sekka/client/Bench.java
taskset -c 1 timeout 300 java -cp "$WORK/java" io.sekka.client.Bench "$ADDRESS"
taskset -c 1 timeout 300 build-bench/bench/client_bench "$ADDRESS"
(cd clients/go && GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GOCACHE="$WORK/go-cache" \
  go build -o "$WORK/clientbench" ./internal/clientbench)
taskset -c 1 timeout 300 "$WORK/clientbench" "$ADDRESS"
