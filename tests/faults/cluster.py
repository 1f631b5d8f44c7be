"""The processes a fault campaign runs on 127.0.0.1, each started, signalled and stopped by PID:
a 3-member etcd cluster or ZooKeeper ensemble (or one Redis), one segment store (PostgreSQL,
MariaDB or that Redis), and several `sekka serve` nodes, each under its own libfaketime clock
file and, as root, on its own small tmpfs (so that its disk can be filled)."""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sekka_testlib import (SEKKA, Etcd, ZooKeeper, exchange, faketime_env,  # noqa: E402
                           free_port, signal_pids, wait_for)

def stop_process(proc, sig=signal.SIGTERM, timeout=20):
    """Stops a Popen by its PID: `sig`, then SIGKILL after `timeout` s. SIGCONT first, in case
    it was stopped."""
    if proc is None or proc.poll() is not None:
        return
    signal_pids([proc.pid], signal.SIGCONT)
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class EtcdCluster:
    """Three etcd members (sekka_testlib.Etcd) with the faults the nemesis needs."""

    name = "etcd"

    def __init__(self, base_dir, members=3, tls=False):
        """With tls=True: members speak HTTPS only, want a client certificate of the test CA,
        and have authentication on; server_env holds the settings a sekka server needs."""
        self.etcd = Etcd(base_dir, members, tls=tls)
        self.size = members
        self.server_env = {}
        if tls:
            self.name = "etcd-tls"
            self.etcd.enable_auth()
            c = self.etcd.certs
            self.server_env = {"SEKKA_WORKER_TLS_CA_FILE": c["ca.crt"],
                               "SEKKA_WORKER_TLS_CERT_FILE": c["client.crt"],
                               "SEKKA_WORKER_TLS_KEY_FILE": c["client.key"],
                               "SEKKA_WORKER_USERNAME": Etcd.USER,
                               "SEKKA_WORKER_PASSWORD": Etcd.PASSWORD}

    @property
    def uri(self):
        return "etcd://" + self.etcd.endpoints

    @property
    def client_ports(self):
        return list(self.etcd.clients)

    def pid(self, i):
        p = self.etcd.procs[i]
        return p.pid if p is not None and p.poll() is None else None

    def leader(self):
        return self.etcd.leader()

    def kill(self, i):
        self.etcd.stop_member(i, signal.SIGKILL)

    def start(self, i):
        self.etcd.start_member(i, wait=False)

    def healthy(self):
        """Every member runs and the cluster has a leader."""
        return all(self.pid(i) for i in range(self.size)) and self.leader() is not None

    def stop(self):
        for i in range(self.size):
            p = self.etcd.procs[i]
            if p is not None:
                signal_pids([p.pid], signal.SIGCONT)
        self.etcd.stop()


class ZooKeeperEnsemble:
    """Three ZooKeeper 3.8 servers in one ensemble on loopback ports (Debian's zookeeper)."""

    name = "zookeeper"
    server_env = {}

    def __init__(self, base_dir, members=3, max_client_cnxns=None):
        """max_client_cnxns: ZooKeeper's limit of connections from one address (its default,
        60, unless given; 0: none)."""
        self.dir = base_dir
        self.size = members
        self.clients = [free_port() for _ in range(members)]
        quorum = [(free_port(), free_port()) for _ in range(members)]
        self.procs = [None] * members
        self.cfgs = []
        for i in range(members):
            data = os.path.join(base_dir, f"zk{i}")
            os.makedirs(data, exist_ok=True)
            with open(os.path.join(data, "myid"), "w") as f:
                f.write(f"{i + 1}\n")
            cfg = os.path.join(base_dir, f"zoo{i}.cfg")
            with open(cfg, "w") as f:
                f.write(f"tickTime=500\ninitLimit=20\nsyncLimit=5\nminSessionTimeout=1000\n"
                        f"dataDir={data}\nclientPort={self.clients[i]}\n"
                        "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                        "4lw.commands.whitelist=srvr,ruok\n")
                if max_client_cnxns is not None:
                    f.write(f"maxClientCnxns={max_client_cnxns}\n")
                for j, (peer, election) in enumerate(quorum):
                    f.write(f"server.{j + 1}=127.0.0.1:{peer}:{election}\n")
            self.cfgs.append(cfg)
        for i in range(members):
            self.start(i)
        if not wait_for(self.healthy, 60):
            raise RuntimeError("the ZooKeeper ensemble did not elect a leader within 60 s")

    @property
    def uri(self):
        return "zookeeper://" + ",".join(f"127.0.0.1:{p}" for p in self.clients)

    @property
    def client_ports(self):
        return list(self.clients)

    def pid(self, i):
        p = self.procs[i]
        return p.pid if p is not None and p.poll() is None else None

    def mode(self, i):
        """'leader', 'follower', or None (down, stopped, or not serving)."""
        if not self.pid(i):
            return None
        try:
            data = exchange(self.clients[i], b"srvr", timeout=1)
        except OSError:
            return None
        for line in data.decode(errors="replace").splitlines():
            if line.startswith("Mode: "):
                return line[6:].strip()
        return None

    def leader(self):
        for i in range(self.size):
            if self.mode(i) == "leader":
                return i
        return None

    def start(self, i):
        log = open(os.path.join(self.dir, f"zk{i}.log"), "ab")
        self.procs[i] = subprocess.Popen(
            ["java", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
             ZooKeeper.CLASSPATH, "org.apache.zookeeper.server.quorum.QuorumPeerMain",
             self.cfgs[i]], stdout=log, stderr=log)
        log.close()

    def kill(self, i):
        stop_process(self.procs[i], signal.SIGKILL)
        self.procs[i] = None

    def healthy(self):
        return all(self.mode(i) in ("leader", "follower") for i in range(self.size))

    def stop(self):
        for i in range(self.size):
            stop_process(self.procs[i])
            self.procs[i] = None


class RedisCoordinator:
    """One Redis (sekka_testlib.RedisStore) as the worker-id coordinator; it is the segment store
    too, so the nemesis's faults on it are the store's kinds (a coordinator of one member has
    none of its own)."""

    name = "redis"
    size = 1
    server_env = {}

    def __init__(self, store):
        self.store = store

    @property
    def uri(self):
        return self.store.uri

    @property
    def client_ports(self):
        return [self.store.port]

    def pid(self, i):
        return self.store.pid()

    def leader(self):
        return 0 if self.healthy() else None

    def healthy(self):
        try:
            return exchange(self.store.port, b"PING\r\nQUIT\r\n", timeout=1).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        pass  # the campaign stops the store


class Node:
    """One `sekka serve`: fixed ports (clients keep their addresses across restarts), a clock
    file libfaketime reads on every call, and a data directory on its own tmpfs when root."""

    def __init__(self, index, base_dir, flags, tmpfs_bytes=4 << 20, env=None):
        self.index = index
        self.env = env or {}
        self.dir = os.path.join(base_dir, f"sekka{index}")
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.data, exist_ok=True)
        self.mounted = False
        if os.geteuid() == 0 and tmpfs_bytes:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={tmpfs_bytes}", "tmpfs",
                                self.data], capture_output=True, text=True)
            self.mounted = r.returncode == 0
        self.clock_file = os.path.join(self.dir, "clock")
        self.offset = 0.0
        self.set_offset(0.0)
        self.http_port, self.resp_port = free_port(), free_port()
        self.flags = flags
        # --worker-name (the lease identity); None: sekka's default (host and data dir). The
        # nemesis lends one node another's to make it take that node's worker id over.
        self.worker_name = None
        # worker.keep_id: node 0 takes its own worker id back at a restart and waits past its
        # hwm; the others take a free id whose hwm is past (the default), so every run has both.
        self.keep_id = index == 0
        self.log_path = os.path.join(self.dir, "log")
        self.proc = None
        self.incarnation = 0
        self.started_at = None

    def set_offset(self, seconds):
        """Moves this node's wall clock to real time + `seconds` (read at its next call)."""
        self.offset = seconds
        tmp = self.clock_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{seconds:+.3f}\n")
        os.replace(tmp, self.clock_file)

    def start(self):
        env = dict(os.environ, **self.env, **faketime_env(self.clock_file),
                   SEKKA_WORKER_KEEP_ID="true" if self.keep_id else "false")
        log = open(self.log_path, "ab")
        log.write(f"--- start {self.incarnation + 1} at offset {self.offset:+.3f} s\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            [SEKKA, "serve", "--http", f"127.0.0.1:{self.http_port}", "--resp",
             f"127.0.0.1:{self.resp_port}", "--data-dir", self.data, *self.flags,
             *(["--worker-name", self.worker_name] if self.worker_name else [])],
            stdout=log, stderr=log, env=env)
        log.close()
        self.incarnation += 1
        self.started_at = time.monotonic()

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def kill(self):
        stop_process(self.proc, signal.SIGKILL)

    def pause(self):
        signal_pids([self.proc.pid], signal.SIGSTOP)

    def resume(self):
        signal_pids([self.proc.pid], signal.SIGCONT)

    def wipe_data(self):
        """What a container that lost its volume sees: an empty data directory."""
        for name in os.listdir(self.data):
            path = os.path.join(self.data, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    def fill_disk(self):
        """Fills the data directory's tmpfs; False when it is not a tmpfs of its own."""
        if not self.mounted:
            return False
        with open(os.path.join(self.data, "filler"), "wb") as f:
            chunk = b"\0" * 65536
            try:
                while True:
                    f.write(chunk)
                    f.flush()
            except OSError:
                pass
        return True

    def free_disk(self):
        try:
            os.unlink(os.path.join(self.data, "filler"))
        except FileNotFoundError:
            pass

    def get(self, path, timeout=1.0):
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def ready(self):
        if not self.pid:
            return False
        try:
            return self.get("/readyz")[0] == 200
        except OSError:
            return False

    def info(self):
        try:
            status, body = self.get("/v1/info")
            return json.loads(body) if status == 200 else None
        except (OSError, ValueError):
            return None

    def usage(self):
        """(RSS in KiB, open file descriptors) of the running process, or None."""
        pid = self.pid
        if not pid:
            return None
        try:
            with open(f"/proc/{pid}/status") as f:
                rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            return rss, len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, StopIteration):
            return None

    def fd_breakdown(self, roles):
        """The process's open files by what they are: TCP connections by the peer's role
        (`roles` maps a peer port to a name; a connection to this node's own ports is a
        "client"), listening sockets, and everything else. From /proc alone."""
        pid = self.pid
        if not pid:
            return None
        tcp = {}
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    next(f)
                    for line in f:
                        cols = line.split()
                        local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
                        tcp[inode] = (int(local.rsplit(":", 1)[1], 16),
                                      int(remote.rsplit(":", 1)[1], 16), state)
            except OSError:
                pass
        counts = {}
        try:
            targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            return None
        for target in targets:
            kind = "other"
            if target.startswith("socket:["):
                entry = tcp.get(target[8:-1])
                if entry is None:
                    kind = "other socket"
                elif entry[2] == "0A":
                    kind = "listening"
                elif entry[0] in (self.http_port, self.resp_port):
                    kind = "client"
                else:
                    kind = roles.get(entry[1], f"tcp to port {entry[1]}")
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def last_log_line(self):
        try:
            with open(self.log_path, errors="replace") as f:
                lines = [line.strip() for line in f if line.strip()]
            return lines[-1] if lines else ""
        except OSError:
            return ""

    def stop(self):
        stop_process(self.proc)
        if self.mounted:
            if subprocess.run(["umount", self.data], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.data], capture_output=True)
            self.mounted = False
