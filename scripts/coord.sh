#!/usr/bin/env bash
# Throwaway coordinators on 127.0.0.1 for tests (ctest fixtures `etcd` and `zookeeper`).
#   scripts/coord.sh etcd DIR   one etcd member on free ports; its client address -> DIR/endpoints
#   scripts/coord.sh etcd-tls DIR   the same over TLS with client certificates required and
#                               authentication on (user sekka, role readwrite on sekka/); its
#                               address -> DIR/endpoints, and DIR/access holds five lines: CA
#                               file, client certificate, its key, user, password
#   scripts/coord.sh zk DIR     one ZooKeeper server on a free port; its address -> DIR/endpoints
#   scripts/coord.sh stop DIR   stops what DIR/pid names (SIGTERM, then SIGKILL) and removes DIR
set -euo pipefail
cmd=${1:?etcd, etcd-tls, zk or stop}
dir=${2:?directory}
# await WHAT CHECK...: runs CHECK until it succeeds, for at most 60 s (a deadline for liveness,
# not a measure of speed); past it, prints DIR/log and "WHAT not ready within 60 s", and exits 1.
await() {
  local what=$1 end=$((SECONDS + 60))
  shift
  until "$@" 2> /dev/null; do
    if [ "$SECONDS" -ge "$end" ]; then
      cat "$dir/log" >&2
      echo "coord.sh: $what not ready within 60 s" >&2
      exit 1
    fi
    sleep 0.05
  done
}
free_port() { /usr/bin/python3 "$(dirname "$0")/../tests/free_port.py"; }
case "$cmd" in
  etcd | etcd-tls)
    "$0" stop "$dir" 2> /dev/null || true
    mkdir -p "$dir"
    client=$(free_port); peer=$(free_port)
    scheme=http; tls=()
    if [ "$cmd" = etcd-tls ]; then
      "$(dirname "$0")/test_certs.sh" "$dir/tls"
      scheme=https
      tls=(--cert-file "$dir/tls/server.crt" --key-file "$dir/tls/server.key"
        --trusted-ca-file "$dir/tls/ca.crt" --client-cert-auth --auth-token simple)
    fi
    # The least bcrypt cost etcd accepts: a test's login is not a product's (sekka_testlib.py).
    etcd --name m0 --data-dir "$dir/data" --logger=zap --log-level=warn --bcrypt-cost 4 "${tls[@]}" \
      --listen-client-urls "$scheme://127.0.0.1:$client" --advertise-client-urls "$scheme://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "m0=http://127.0.0.1:$peer" > "$dir/log" 2>&1 &
    echo $! > "$dir/pid"
    health=(curl -s --max-time 2 "$scheme://127.0.0.1:$client/health")
    [ "$cmd" = etcd-tls ] && health+=(--cacert "$dir/tls/ca.crt" --cert "$dir/tls/client.crt" --key "$dir/tls/client.key")
    healthy() { "${health[@]}" 2> /dev/null | grep -q '"health":"true"'; }
    await "etcd on 127.0.0.1:$client" healthy  # a quiet machine: under 1 s
    if [ "$cmd" = etcd-tls ]; then
      ctl() {
        etcdctl --endpoints "https://127.0.0.1:$client" --cacert "$dir/tls/ca.crt" \
          --cert "$dir/tls/client.crt" --key "$dir/tls/client.key" "$@" > /dev/null
      }
      ctl user add root:root-secret
      ctl user grant-role root root
      ctl user add sekka:sekka-secret
      ctl role add sekka
      ctl role grant-permission sekka --prefix=true readwrite sekka/
      ctl user grant-role sekka sekka
      ctl auth enable
      printf '%s\n' "$dir/tls/ca.crt" "$dir/tls/client.crt" "$dir/tls/client.key" sekka sekka-secret \
        > "$dir/access"
    fi
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
# Every test client connects from 127.0.0.1: ZooKeeper's limit of 60 connections per address
# refused a 33-holder contract case running beside another (-j2).
maxClientCnxns=0
CFG
    java -Xmx256m -XX:+UseSerialGC -cp /usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/netty-all.jar:/usr/share/java/metrics-core.jar:/usr/share/java/snappy-java.jar \
      org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" > "$dir/log" 2>&1 &
    echo $! > "$dir/pid"
    # A server that is still starting may accept and not answer: each try is bounded.
    ready() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && echo srvr >&3 && grep -q 'Mode: standalone' <&3"; }
    await "zookeeper on 127.0.0.1:$port" ready  # a quiet machine: about 1 s
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
  *) echo "coord.sh: unknown command $cmd: allowed etcd, etcd-tls, zk, stop" >&2; exit 2 ;;
esac
