#!/usr/bin/python3
"""A fleet on one coordinator (issue 44): N real `sekka serve` processes on this machine, on a
3-member etcd cluster or a 3-server ZooKeeper ensemble, all started at once, then restarted in a
rolling wave (`--wave` at a time, each waiting for its successor to serve, as a Kubernetes
rollout does), then all at once, while clients draw ids from a sample of the servers. The checker
looks for ids drawn twice and for a worker id two live servers held at once.

    /usr/bin/python3 tests/faults/fleet.py --coordinator etcd|zookeeper --servers N
        [--sample 8] [--clients 4] [--wave 10] [--out DIR]

Everything is on 127.0.0.1; every process is started here and stopped by its PID; each phase is
bounded (--phase-timeout, 300 s) and the run stops by itself. Prints one table of figures and
writes DIR/result.json; exit status 1 when the checker found something or a phase timed out."""

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402
from cluster import stop_process  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sekka_testlib import SEKKA, LISTEN_RE, exchange, free_port  # noqa: E402


def distinct_ports(n):
    """n free ports, no two alike (free_port alone may pick one twice before either is bound)."""
    ports = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)


class Server:
    """One `sekka serve` of the fleet: a fixed HTTP port (clients keep it across restarts), no
    other listener, one event loop, its own data dir, stdout and stderr in files."""

    def __init__(self, index, base, flags, port):
        self.index = index
        self.dir = os.path.join(base, f"s{index}")
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        self.port = port
        self.flags = flags
        self.proc = None
        self.out = None
        self.incarnations = []  # [{"worker": w, "ready": t, "end": t}] in start order

    def start(self):
        self.out = os.path.join(self.dir, f"out{len(self.incarnations)}")
        # The fleet's one host lock dir (its id-space binding), never the machine's.
        env = dict(os.environ, SEKKA_WORKER_LOCK_DIR=os.path.join(os.path.dirname(self.dir),
                                                                  "host-locks"))
        with open(self.out, "wb") as out, open(os.path.join(self.dir, "log"), "ab") as log:
            self.proc = subprocess.Popen(
                [SEKKA, "serve", "--http", f"127.0.0.1:{self.port}", "--resp", "", "--threads",
                 "1", "--data-dir", os.path.join(self.dir, "data"), "--worker-name",
                 f"fleet-{self.index}", *self.flags], stdout=out, stderr=log, env=env)
        self.incarnations.append({"worker": None, "ready": None, "end": None,
                                  "started": time.monotonic()})

    def poll_ready(self):
        """True once this incarnation printed its listening line (it serves)."""
        inc = self.incarnations[-1]
        if inc["ready"] is not None:
            return True
        with open(self.out, encoding="utf-8", errors="replace") as f:
            m = LISTEN_RE.search(f.readline())
        if not m:
            return False
        inc["worker"], inc["ready"] = int(m.group(4)), time.monotonic()
        return True

    def stop(self, sig=signal.SIGTERM):
        if self.proc is not None and self.proc.poll() is None:
            self.incarnations[-1]["end"] = time.monotonic()  # before the signal: a claim of its
            self.proc.send_signal(sig)                       # id can only come after it
        stop_process(self.proc, sig, timeout=30)
        if self.incarnations and self.incarnations[-1]["end"] is None:
            self.incarnations[-1]["end"] = time.monotonic()

    def metric(self, name):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            c.close()
        except OSError:
            return None
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    def log_count(self, text):
        with open(os.path.join(self.dir, "log"), encoding="utf-8", errors="replace") as f:
            return f.read().count(text)


class Clients:
    """Threads drawing `GET /v1/ids?count=100` from a sample of the servers in turn, recording every
    id and each call's time; a call that fails (a server restarting) is counted and retried on
    the next server."""

    def __init__(self, servers, count):
        self.servers = servers
        self.ids = []
        self.calls = []  # (monotonic time, seconds, ok)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(k,)) for k in range(count)]

    def run(self, k):
        turn = k
        conns = {}
        while not self.stopping.is_set():
            s = self.servers[turn % len(self.servers)]
            turn += 1
            begin = time.monotonic()
            try:
                c = conns.get(s.port) or http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
                conns[s.port] = c
                c.request("GET", "/v1/ids?count=100")
                r = c.getresponse()
                body = r.read()
                ok = r.status == 200
                got = [int(i) for i in json.loads(body)["ids"]] if ok else []
            except (OSError, http.client.HTTPException, ValueError):
                conns.pop(s.port, None)
                ok, got = False, []
                time.sleep(0.01)
            with self.lock:
                self.ids.extend(got)
                self.calls.append((begin, time.monotonic() - begin, ok))

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)

    def between(self, t0, t1):
        with self.lock:
            return [c for c in self.calls if t0 <= c[0] < t1]


class Coordinator:
    """The coordinator's load: writes (etcd's committed proposals; ZooKeeper's zxid) and its
    processes' CPU seconds, read at the edges of each phase."""

    def __init__(self, kind, coord):
        self.kind, self.coord = kind, coord

    def writes(self):
        if self.kind == "zookeeper":
            for port in self.coord.client_ports:
                try:
                    text = exchange(port, b"srvr", timeout=2).decode(errors="replace")
                except OSError:
                    continue
                if m := re.search(r"^Zxid: 0x([0-9a-f]+)$", text, re.M):
                    return int(m.group(1), 16) & 0xFFFFFFFF  # the counter within the epoch
            return 0
        c = http.client.HTTPConnection("127.0.0.1", self.coord.client_ports[0], timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        m = re.search(r"^etcd_server_proposals_committed_total (\S+)$", text, re.M)
        return int(float(m.group(1))) if m else 0

    def cpu_seconds(self):
        total = 0.0
        for i in range(self.coord.size):
            pid = self.coord.pid(i)
            if not pid:
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def sample(self):
        return time.monotonic(), self.writes(), self.cpu_seconds()


def wait_all(servers, deadline, what):
    # Every server is polled each round (not up to the first not ready), so that each one's
    # ready time is when it began to serve, within a round.
    while not all([s.poll_ready() for s in servers]):
        if time.monotonic() > deadline:
            late = [s for s in servers if not s.poll_ready()]
            raise TimeoutError(f"{what}: {len(late)} of {len(servers)} servers not serving; "
                               f"first: server {late[0].index}: {last_line(late[0])}")
        for s in servers:
            if s.proc.poll() is not None and not s.poll_ready():
                if sum(1 for inc in s.incarnations if inc["ready"] is None) > 20:
                    raise TimeoutError(f"{what}: server {s.index} exited 20 times without "
                                       f"serving: {last_line(s)}")
                s.start()  # it exited (no free worker id): started again, as an orchestrator does
        time.sleep(0.1)


def last_line(server):
    with open(os.path.join(server.dir, "log"), encoding="utf-8", errors="replace") as f:
        lines = f.read().strip().splitlines()
    return lines[-1][:300] if lines else "(no log)"


def phase_figures(name, servers, began, coord_before, coord_after, clients, starts):
    t0, w0, c0 = coord_before
    t1, w1, c1 = coord_after
    took = [inc["ready"] - inc["started"] for s in servers for inc in s.incarnations[starts[s.index]:]
            if inc["ready"] is not None]
    calls = clients.between(t0, t1) if clients else []
    lat = sorted(c[1] for c in calls if c[2])
    return {
        "phase": name,
        "seconds": round(t1 - began, 1),
        "starts": sum(len(s.incarnations) - starts[s.index] for s in servers),
        "start_to_serving_s": {"median": round(statistics.median(took), 2) if took else None,
                               "max": round(max(took), 2) if took else None},
        "coordinator_writes_per_s": round((w1 - w0) / max(t1 - t0, 1e-9), 1),
        "coordinator_cpu_s": round(c1 - c0, 1),
        "client_calls": len(calls),
        "client_failures": sum(1 for c in calls if not c[2]),
        "id_p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1) if lat else None,
    }


def worker_overlaps(servers):
    """Pairs of incarnations that served one worker id at once."""
    spans = sorted((inc["worker"], inc["ready"], inc["end"] or float("inf"), s.index)
                   for s in servers for inc in s.incarnations if inc["ready"] is not None)
    found = []
    for a, b in zip(spans, spans[1:]):
        if a[0] == b[0] and b[1] < a[2]:
            found.append(f"worker id {a[0]}: server {a[3]} until {a[2]:.1f}, server {b[3]} "
                         f"from {b[1]:.1f}")
    return found


def run(args):
    base = tempfile.mkdtemp(prefix="sekka-fleet-")
    coord = None
    servers = []
    clients = None
    result = {"coordinator": args.coordinator, "servers": args.servers, "phases": []}
    try:
        if args.coordinator == "zookeeper":
            # Every server here connects from 127.0.0.1; ZooKeeper allows 60 connections from one
            # address by default (maxClientCnxns). A fleet's servers are hosts of their own, so
            # the limit is lifted: with it, servers past the 60th cannot connect at all.
            coord = cluster.ZooKeeperEnsemble(os.path.join(base, "zk"), max_client_cnxns=0)
        else:
            coord = cluster.EtcdCluster(os.path.join(base, "etcd"))
        flags = ["--worker-source", args.coordinator, "--coordinator", coord.uri,
                 "--lease-ttl", "10s", "--log-level", "warn"]
        ports = distinct_ports(args.servers)
        servers = [Server(i, base, flags, ports[i]) for i in range(args.servers)]
        load = Coordinator(args.coordinator, coord)
        starts = {s.index: 0 for s in servers}

        # 1. All at once, from nothing.
        began, before = time.monotonic(), load.sample()
        for s in servers:
            s.start()
        wait_all(servers, began + args.phase_timeout, "start at once")
        result["phases"].append(phase_figures("start at once", servers, began, before,
                                              load.sample(), None, starts))
        calls = [c for c in (s.metric("sekka_coordinator_calls_total") for s in servers) if c]
        if calls:
            result["calls_until_serving"] = {"mean": round(statistics.mean(calls), 1),
                                             "max": max(calls)}
        result["retries"] = sum(s.log_count("asking again") for s in servers)

        step = max(1, args.servers // args.sample)
        clients = Clients(servers[::step][:args.sample], args.clients)
        clients.start()
        time.sleep(2)

        # 2. A rolling wave: --wave servers at a time stop, start, and serve before the next.
        began, before = time.monotonic(), load.sample()
        starts = {s.index: len(s.incarnations) for s in servers}
        for k in range(0, len(servers), args.wave):
            batch = servers[k:k + args.wave]
            for s in batch:
                s.stop()
            for s in batch:
                s.start()
            wait_all(batch, began + args.phase_timeout, "rolling wave")
        result["phases"].append(phase_figures("rolling wave", servers, began, before,
                                              load.sample(), clients, starts))

        # 3. All at once: every server stops, then every one starts.
        began, before = time.monotonic(), load.sample()
        starts = {s.index: len(s.incarnations) for s in servers}
        threads = [threading.Thread(target=s.stop) for s in servers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in servers:
            s.start()
        wait_all(servers, began + args.phase_timeout, "restart at once")
        time.sleep(2)
        result["phases"].append(phase_figures("restart at once", servers, began, before,
                                              load.sample(), clients, starts))
        clients.stop()
        ids = clients.ids
        result["ids"] = len(ids)
        result["repeated_ids"] = len(ids) - len(set(ids))
        result["worker_overlaps"] = worker_overlaps(servers)
        result["ok"] = result["repeated_ids"] == 0 and not result["worker_overlaps"] and \
            len(ids) > 0
    except TimeoutError as e:
        result["ok"] = False
        result["error"] = str(e)
    finally:
        if clients is not None:
            clients.stop()
        threads = [threading.Thread(target=s.stop) for s in servers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if coord is not None:
            coord.stop()
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "result.json"), "w") as f:
                json.dump(result, f, indent=1)
        shutil.rmtree(base, ignore_errors=True)
    return result


def print_result(r):
    print(f"fleet: {r['servers']} servers on {r['coordinator']}")
    print("| phase | s | starts | start to serving, median / max s | coordinator writes/s | "
          "coordinator CPU s | client calls | failed | id p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in r["phases"]:
        print(f"| {p['phase']} | {p['seconds']} | {p['starts']} | "
              f"{p['start_to_serving_s']['median']} / {p['start_to_serving_s']['max']} | "
              f"{p['coordinator_writes_per_s']} | {p['coordinator_cpu_s']} | "
              f"{p['client_calls']} | {p['client_failures']} | {p['id_p99_ms']} |")
    if "calls_until_serving" in r:
        print(f"coordinator calls per server until it served: mean "
              f"{r['calls_until_serving']['mean']}, max {r['calls_until_serving']['max']}; "
              f"retries (\"asking again\"): {r['retries']}")
    if "ids" in r:
        print(f"ids drawn: {r['ids']}, repeated: {r['repeated_ids']}; worker ids held twice at "
              f"once: {len(r['worker_overlaps'])}")
    for o in r.get("worker_overlaps", [])[:10]:
        print("  " + o)
    if "error" in r:
        print("error: " + r["error"])
    print("PASSED" if r["ok"] else "FAILED")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--coordinator", choices=["etcd", "zookeeper"], required=True)
    p.add_argument("--servers", type=int, default=200)
    p.add_argument("--sample", type=int, default=8)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--wave", type=int, default=10)
    p.add_argument("--phase-timeout", type=float, default=300)
    p.add_argument("--out")
    args = p.parse_args()
    r = run(args)
    print_result(r)
    sys.exit(0 if r["ok"] else 1)


if __name__ == "__main__":
    main()
