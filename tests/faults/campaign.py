#!/usr/bin/python3
"""A fault campaign (or, with --soak, a soak) against real `sekka serve` processes on
127.0.0.1. Run it through scripts/faults.sh or scripts/soak.sh, which set up and build first.

Starts a 3-member etcd cluster (etcd-tls: over TLS, with client certificates and users) or
ZooKeeper ensemble, or one Redis; a segment store with shared tags (--store: PostgreSQL, MariaDB,
or the Redis that is the coordinator); with --peer, the peers' own servers beside sekka's
(peers.py: Leaf's or tinyid's allocation on MariaDB's rows, Leaf's snowflake servers on the
ZooKeeper ensemble, CosId instances on Redis); and --servers sekka nodes; runs --clients client processes for
--minutes while the nemesis injects faults (none with --soak); then stops everything, judges the
history (checker.py) and writes result.json (and soak.json) into --out. Exit status 1 when the
checker finds a failure."""

import argparse
import json
import multiprocessing
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))  # sekka_testlib

import checker  # noqa: E402
import cluster  # noqa: E402
import proxy  # noqa: E402
import soak as soak_report  # noqa: E402
from nemesis import Nemesis  # noqa: E402
import peers  # noqa: E402
from sekka_testlib import (LEAF_TABLE, SEKKA, TINYID_TABLE, Mariadb, Postgres,  # noqa: E402
                           RedisStore)
from workload import STRICT_TAG, client_main  # noqa: E402

TAGS = ["orders", "users", "messages"]
LEASE_TTL_S = 3  # short, so that pauses past the TTL are short (--lease-ttl)


class Recorder:
    """events.jsonl, written by several threads."""

    def __init__(self, path):
        self.file = open(path, "a")
        self.lock = threading.Lock()

    def __call__(self, event):
        with self.lock:
            self.file.write(json.dumps(event) + "\n")
            self.file.flush()

    def close(self):
        self.file.close()


class Supervisor:
    """Keeps every node running, as systemd's Restart=always would: a process that exits on its
    own is recorded and started again 1 s later. An exit counts as expected when the nemesis
    killed it, or when the process refused to start (exit status 1 before it was ever ready:
    the contract's answer to a clock far behind the stored hwm)."""

    def __init__(self, nodes, record):
        self.nodes = nodes
        self.record = record
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.was_ready = {n.index: False for n in nodes}
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def start(self, node):
        with self.lock:
            if node.proc is not None and node.proc.poll() is None:
                return  # started already (the nemesis and this loop may both try)
            node.start()
            self.was_ready[node.index] = False
            self.record({"type": "start", "server": node.index, "t": time.monotonic(),
                         "incarnation": node.incarnation, "offset": node.offset})

    def kill(self, node):
        with self.lock:
            node.kill()
            self.record({"type": "exit", "server": node.index, "t": time.monotonic(),
                         "status": "SIGKILL (nemesis)", "expected": True})
            node.proc = None

    def loop(self):
        while not self.stopping.wait(0.25):
            for node in self.nodes:
                with self.lock:
                    proc = node.proc
                    if proc is None:
                        continue
                    code = proc.poll()
                    if code is None:
                        if not self.was_ready[node.index] and node.ready():
                            self.was_ready[node.index] = True
                        continue
                    refused = code == 1 and not self.was_ready[node.index]
                    status = f"signal {-code}" if code < 0 else f"exit status {code}"
                    self.record({"type": "exit", "server": node.index, "t": time.monotonic(),
                                 "status": status, "expected": refused,
                                 "log": node.last_log_line()})
                    node.proc = None
                if not self.stopping.wait(1.0):
                    self.start(node)


def sample_usage(nodes, record, stopping, every_s):
    while not stopping.wait(every_s):
        servers = {}
        for n in nodes:
            u = n.usage()
            if u:
                servers[n.index] = [u[0], u[1], n.incarnation]
        record({"type": "usage", "t": time.monotonic(), "servers": servers})


def open_store(args, base):
    """The segment store and the URI sekka's servers and `segment create` use; with a peer, its
    table made as the peer's own scripts make it, which sekka then serves in place."""
    if args.store == "postgres":
        store = Postgres(os.path.join(base, "pg"))
        return store, store.uri
    if args.store == "redis":
        store = RedisStore(os.path.join(base, "redis"))
        return store, store.uri
    store = Mariadb(os.path.join(base, "mariadb"))
    table = next((p for p in args.peer if p in peers.SEGMENT_PEERS), None)
    if table == "leaf":
        store.sql(LEAF_TABLE)
    elif table == "tinyid":
        store.sql(TINYID_TABLE)
    return store, store.uri + (f"?schema={table}" if table else "")


def run(args):
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    history = os.path.join(out, "history")
    shutil.rmtree(history, ignore_errors=True)
    os.makedirs(history)
    base = tempfile.mkdtemp(prefix="sekka-faults-")
    # The nodes' host lock dir: this run's own, as its cluster is. Never the host's
    # /var/lib/sekka/workers, nor one kept from an earlier run (the suite's per-test dir), which
    # that run's cluster bound to its id space (a run with Leaf's layout was refused there).
    os.environ["SEKKA_WORKER_LOCK_DIR"] = os.path.join(base, "locks")
    record = Recorder(os.path.join(history, "events.jsonl"))
    coord = store = beside = None
    nodes = []
    links = None
    stopping = threading.Event()
    supervisor = None
    clients = []
    try:
        t_setup = time.monotonic()
        store, store_uri = open_store(args, base)
        if args.coordinator == "zookeeper":
            coord = cluster.ZooKeeperEnsemble(os.path.join(base, "zk"))
        elif args.coordinator == "redis":
            coord = cluster.RedisCoordinator(store)
        else:
            coord = cluster.EtcdCluster(os.path.join(base, "etcd"),
                                        tls=args.coordinator == "etcd-tls")
        for tag in TAGS:
            subprocess.run([SEKKA, "segment", "create", tag, "--step", "200", "--segment-store",
                            store_uri], check=True, capture_output=True)
        source = args.coordinator.removesuffix("-tls")  # etcd-tls: etcd over TLS, with a user
        flags = ["--worker-source", source, "--coordinator", coord.uri,
                 "--lease-ttl", f"{args.lease_ttl}s", "--segment-store", store_uri,
                 "--log-level", "warn"]
        if "cosid-redis" in args.peer:
            flags += ["--machines-store", f"{store.uri}?schema=cosid"]
        if args.transport:
            # Each server reaches every member through its own proxies (proxy.py).
            links = [proxy.Link(coord.client_ports, args.seed * 1000 + i)
                     for i in range(args.servers)]
            scheme = coord.uri.split("://", 1)[0]
            nodes = [cluster.Node(i, base, [
                f"{scheme}://" + ",".join(f"127.0.0.1:{p}" for p in links[i].ports)
                if f == coord.uri else f for f in flags] + peers.server_flags(args.peer, i),
                env=coord.server_env) for i in range(args.servers)]
            for n in nodes:  # named, so that the nemesis can lend one node another's name
                n.worker_name = f"sekka-node-{n.index}"
        else:
            nodes = [cluster.Node(i, base, flags + peers.server_flags(args.peer, i),
                                  env=coord.server_env) for i in range(args.servers)]
        beside = peers.Peers(args.peer, store, coord, TAGS[0], args.short)
        supervisor = Supervisor(nodes, record)
        for n in nodes:
            supervisor.start(n)
        if not cluster.wait_for(lambda: all(n.ready() for n in nodes), 60):
            raise RuntimeError("the sekka servers were not ready within 60 s: " +
                               "; ".join(n.last_log_line() for n in nodes))
        declare_strict_tag(source, coord, nodes)
        supervisor.thread.start()
        roles = {p: "coordinator" for p in coord.client_ports}
        for link in links or []:
            roles.update({p: "coordinator" for p in link.ports})
        roles[store.port] = store.name

        def record_fds(when):
            record({"type": "fds", "when": when, "t": time.monotonic(),
                    "servers": {n.index: n.fd_breakdown(roles) for n in nodes}})

        record_fds("start")
        print(f"faults: {args.coordinator} x{coord.size}, {store.name}"
              f"{' with ' + ', '.join(args.peer) + ' beside' if args.peer else ''}, "
              f"{args.servers} sekka "
              f"servers ready in {time.monotonic() - t_setup:.1f} s; "
              f"{'soak' if args.soak else 'campaign'} of {args.minutes} min, seed {args.seed}, "
              f"{args.clients} clients"
              f"{f' at {args.rate} requests/s each' if args.rate else ''}", flush=True)
        sampler = threading.Thread(target=sample_usage,
                                   args=(nodes, record, stopping, 10 if args.soak else 5),
                                   daemon=True)
        sampler.start()
        t0 = time.monotonic()
        deadline = t0 + args.minutes * 60
        record({"type": "campaign", "t0": t0, "deadline": deadline, "seed": args.seed,
                "coordinator": args.coordinator, "store": args.store, "peer": args.peer,
                "servers": args.servers,
                "clients": args.clients, "soak": args.soak, "tags": TAGS})
        servers = [(n.http_port, n.resp_port) for n in nodes]
        ctx = multiprocessing.get_context("fork")
        clients = [ctx.Process(target=client_main,
                               args=(c, args.seed, servers, TAGS, args.timeout, history, deadline,
                                     args.rate))
                   for c in range(args.clients)]
        for c in clients:
            c.start()
        beside.start(nodes, record, deadline, stopping)
        if not args.soak:
            Nemesis(args.seed, nodes, coord, store, record, args.lease_ttl, not args.short,
                    supervisor, links, args.kinds.split(",") if args.kinds else None
                    ).run(deadline - 10)
        for c in clients:
            c.join(timeout=max(1, deadline - time.monotonic() + 30))
            if c.is_alive():
                c.kill()
        record_fds("end")
    finally:
        for c in clients:
            if c.is_alive():
                c.kill()
        stopping.set()
        if supervisor is not None:
            supervisor.stopping.set()
            if supervisor.thread.is_alive():
                supervisor.thread.join(timeout=10)
        if beside is not None:
            beside.stop()
        for n in nodes:
            n.stop()
        for link in links or []:
            link.stop()
        if coord is not None:
            coord.stop()
        if store is not None:
            store.stop()
        record.close()
        if args.keep:
            print(f"faults: kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)

    result = checker.check(history, TAGS)
    result.update({"coordinator": args.coordinator, "store": args.store, "peer": args.peer,
                   "seed": args.seed, "minutes": args.minutes,
                   "servers": args.servers, "clients": args.clients})
    if args.soak:
        result["soak"] = soak_report.per_minute(checker.History(history))
        with open(os.path.join(out, "soak.svg"), "w") as f:
            f.write(soak_report.svg(result["soak"], f"sekka soak: {args.minutes:g} min, "
                                    f"{args.clients} clients, {args.servers} servers, "
                                    f"{args.coordinator}"))
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print_summary(result)
    return 1 if result["failures"] else 0


def print_summary(r):
    print(f"faults: {r['requests']} requests, {r['ids_checked']} ids checked, "
          f"{r['repeated_ids']} repeated, {r['segment_order_violations']} out of order, "
          f"{r['strict_requests']} strict requests with {r['strict_order_violations']} out of "
          "real-time order, "
          f"{r['undocumented_errors']} undocumented errors, {r['malformed_replies']} malformed")
    if r["peer_ranges"] or r["machine_holds"]:
        print(f"  peers: {r['peer_ranges']} ranges ({r['peer_ids']} ids), "
              f"{r['peer_overlaps']} shared with sekka or each other; {r['machine_holds']} "
              f"machine id holdings, {r['machine_overlaps']} held twice at once")
    for kind, v in r["faults"].items():
        print(f"  {kind:28} x{v['count']:<3} unavailable median {v['unavailable_median_s']} s "
              f"max {v['unavailable_max_s']} s; ready again median {v['recovery_median_s']} s "
              f"max {v['recovery_max_s']} s" + (f"; {v['unrecovered']} NOT RECOVERED"
                                               if v["unrecovered"] else "")
              + (f"; strict ids unavailable max {v['strict_unavailable_max_s']} s"
                 if v.get("strict_unavailable_max_s") is not None else ""))
    for s, u in r["resources"].items():
        print(f"  server {s} (process {u['process']}): RSS {u['rss_kib'][0]} -> "
              f"{u['rss_kib'][1]} KiB, fds {u['fds'][0]} -> {u['fds'][1]}")
    for s, when in r["fds"].items():
        print(f"  server {s} open files at start {when.get('start')}, at end {when.get('end')}")
    for e in r["server_exits"]:
        if not e["expected"] or "refused" in str(e.get("log")):
            print(f"  server {e['server']} exit: {e['status']}: {e.get('log')}")
    if "soak" in r:
        for m in r["soak"]["minutes"]:
            print(f"  minute {m['minute']}: {m['requests_per_s']} req/s, {m['ids_per_s']} ids/s, "
                  f"p50 {m['p50_ms']} ms p99 {m['p99_ms']} ms p999 {m['p999_ms']} ms, "
                  f"RSS {m['rss_kib']} KiB, fds {m['fds']}")
    for f in r["failures"]:
        print(f"FAILED: {f}")
    if not r["failures"]:
        print("faults: passed")


def seed_arg(text):
    """--seed: a number, or 'random' for one drawn from the OS (so that the suite's short
    campaigns, run after run, deal every fault kind, not seed 1's first few)."""
    if text == "random":
        return random.SystemRandom().randrange(1, 1_000_000)
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number or 'random'") from None


def replay_command(args, argv):
    """The command that runs this campaign again: its own arguments through scripts/faults.sh,
    with the seed it drew and without --out (faults.sh names the directory). --coordinator and
    --minutes are always given: faults.sh's defaults differ from this script's."""
    words, rest = [], iter(argv)
    for word in rest:
        name = word.split("=", 1)[0]
        if name in ("--seed", "--out", "--coordinator", "--minutes"):
            if "=" not in word:
                next(rest, None)
            continue
        words.append(word)
    return shlex.join(["bash", "scripts/faults.sh", "--coordinator", args.coordinator,
                       "--seed", str(args.seed), "--minutes", f"{args.minutes:g}", *words])


def declare_strict_tag(source, coord, nodes):
    """The strict tag the workload asks for is declared as a team adds one to a running cluster
    (issue 44): `sekka strict create` at the coordinator, no server restarted; the servers serve
    it once they read the declarations again (about a second)."""
    made = subprocess.run([SEKKA, "strict", "create", STRICT_TAG, "--worker-source", source,
                           "--coordinator", coord.uri], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **coord.server_env})
    if made.returncode != 0:
        raise RuntimeError(f"sekka strict create {STRICT_TAG}: {made.stderr.strip()}")

    def served(n):
        try:
            return n.get(f"/v1/strict/{STRICT_TAG}", timeout=5)[0] == 200
        except OSError:
            return False
    if not cluster.wait_for(lambda: all(served(n) for n in nodes), 60):
        raise RuntimeError(f"strict tag {STRICT_TAG} was not served by every server within 60 s")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--coordinator", choices=["etcd", "etcd-tls", "zookeeper", "redis"],
                   default="etcd", help="redis: one Redis, which is the segment store too")
    p.add_argument("--store", choices=["postgres", "mariadb", "redis"], default="postgres",
                   help="the segment store")
    p.add_argument("--peer", action="append", choices=peers.PEERS, default=[],
                   help="a peer beside sekka (tests/faults/peers.py), repeatable: leaf or "
                        "tinyid (with --store mariadb: its table, and its own allocation of the "
                        "first tag), leaf-snowflake (with --coordinator zookeeper: two of Leaf's "
                        "snowflake servers in Leaf's registry beside sekka's), cosid-redis "
                        "(with --store redis: CosId instances on CosId's Redis distributor and "
                        "on sekka's /machines, one store)")
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("--seed", type=seed_arg, default=1,
                   help="the nemesis's and clients' seed; 'random': a new one each run "
                        "(the suite's short campaigns), printed with its replay command")
    p.add_argument("--servers", type=int, default=3, choices=range(3, 6))
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--timeout", type=float, default=1.0, help="client request timeout, s")
    p.add_argument("--short", action="store_true",
                   help="leave out the 1-minute clock steps, and pace the clients (--rate "
                        "250 unless given): the test suite's form")
    p.add_argument("--rate", type=int, default=None,
                   help="requests a second per client at most (default: as fast as answered; "
                        "250 with --short: the suite's campaigns used 1.5 of its 2 cores "
                        "unpaced)")
    p.add_argument("--soak", action="store_true", help="no faults: throughput and resources")
    p.add_argument("--lease-ttl", type=int, default=LEASE_TTL_S, help="seconds")
    p.add_argument("--kinds", default="",
                   help="only these fault kinds (comma-separated), for a targeted run")
    p.add_argument("--transport", action="store_true",
                   help="each server reaches the coordinator through its own fault proxies "
                        "(proxy.py), and the nemesis adds link faults")
    p.add_argument("--out", default="faults-out")
    p.add_argument("--keep", action="store_true", help="keep the processes' directories")
    args = p.parse_args()
    if args.rate is None:
        args.rate = 250 if args.short else 0
    if args.coordinator == "redis":
        args.store = "redis"
    print(f"faults: seed {args.seed}; replay: {replay_command(args, sys.argv[1:])}", flush=True)
    tables = [x for x in args.peer if x in peers.SEGMENT_PEERS]
    if tables and args.store != "mariadb" or len(tables) > 1:
        p.error("--peer leaf or tinyid: one, with --store mariadb (the peers' tables are MySQL's)")
    if "leaf-snowflake" in args.peer and args.coordinator != "zookeeper":
        p.error("--peer leaf-snowflake needs --coordinator zookeeper (Leaf's registry)")
    if "cosid-redis" in args.peer and args.store != "redis":
        p.error("--peer cosid-redis needs --store redis (CosId's Redis distributor)")
    # SIGTERM (ctest's timeout, a user) unwinds like Ctrl-C: every process stopped by its PID,
    # stopped ones continued first, the tmpfs mounts and the temp dir removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sys.exit(run(args))
    except Exception:  # noqa: BLE001 - a set-up failure is reported, not a stack of threads
        traceback.print_exc()
        sys.exit(2)


if __name__ == "__main__":
    main()
