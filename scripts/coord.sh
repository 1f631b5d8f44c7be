#!/usr/bin/env bash
# Throwaway coordinators on 127.0.0.1 for tests (ctest fixtures `etcd` and `zookeeper`).
#   scripts/coord.sh etcd DIR   one etcd member on free ports; its client address -> DIR/endpoints
#   scripts/coord.sh zk DIR     one ZooKeeper server on a free port; its address -> DIR/endpoints
#   scripts/coord.sh stop DIR   stops what DIR/pid names (SIGTERM, then SIGKILL) and removes DIR
set -euo pipefail
cmd=${1:?etcd, zk or stop}
dir=${2:?directory}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
case "$cmd" in
  etcd)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir"
    client=$(free_port); peer=$(free_port)
    etcd --name m0 --data-dir "$dir/data" --logger=zap --log-level=warn \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "m0=http://127.0.0.1:$peer" > "$dir/log" 2>&1 &
    echo $! > "$dir/pid"
    for _ in $(seq 200); do
      curl -s "http://127.0.0.1:$client/health" 2> /dev/null | grep -q '"health":"true"' && break
      sleep 0.05
    done
    curl -s "http://127.0.0.1:$client/health" | grep -q '"health":"true"' || { cat "$dir/log" >&2; exit 1; }
    echo "127.0.0.1:$client" > "$dir/endpoints"
    ;;
  zk)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir/data"
    port=$(free_port)
    cat > "$dir/zoo.cfg" << CFG
tickTime=500
minSessionTimeout=1000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
CFG
    java -Xmx256m -XX:+UseSerialGC -cp /usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/netty-all.jar:/usr/share/java/metrics-core.jar:/usr/share/java/snappy-java.jar \
      org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" > "$dir/log" 2>&1 &
    echo $! > "$dir/pid"
    # A server that is still starting may accept and not answer: each try is bounded.
    ready() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && echo srvr >&3 && grep -q 'Mode: standalone' <&3"; }
    for _ in $(seq 200); do ready 2> /dev/null && break; sleep 0.05; done
    ready 2> /dev/null || { cat "$dir/log" >&2; exit 1; }
    echo "127.0.0.1:$port" > "$dir/endpoints"
    ;;
  stop)
    if [ -f "$dir/pid" ]; then
      pid=$(cat "$dir/pid")
      kill "$pid" 2> /dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.05; done
      kill -9 "$pid" 2> /dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "coord.sh: unknown command $cmd: allowed etcd, zk, stop" >&2; exit 2 ;;
esac
