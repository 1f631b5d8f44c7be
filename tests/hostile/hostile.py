#!/usr/bin/python3
"""The hostile-client campaign: the same attacks on a real `sekka serve` and a real `redis-server`
(Debian's, the reference a Redis-protocol server is compared with), one target at a time.

For each attack and each target it records
  - the server's RSS before the attack and its peak during it (/proc/PID/status VmRSS, sampled
    every 100 ms);
  - what a well-behaved client saw meanwhile: one small command at a time (`ID.NEXT` to sekka,
    `INCR good` to redis) on its own authenticated connection, waiting for each answer with a
    2 s timeout; its latency p50/p99/max, its answers per second, and its errors (an error
    reply, a timeout, a closed connection or a failed reconnect; after a timeout or a close it
    reconnects). It runs in a process of its own, so the attackers' Python (GIL) does not slow
    it down;
  - what the attackers got (connections closed by the server, replies, bytes sent, ...);
  - what a new client with the right token saw meanwhile, from the attackers' address (one
    NAT): every 250 ms it connects, authenticates and sends one command (2 s timeouts), its
    connect-to-answer time and errors;
  - whether the server is alive and answers PING at the end of the attack and after it.

The attacks (docs in each `attack_*` function):
  slow_senders            many connections trickling one command a byte at a time (slowloris)
  non_reading_pipeliners  authenticated clients pipelining cheap commands with big replies,
                          never reading (a stuck consumer, amplification)
  unauth_partial          unauthenticated connections starting a 1 MB bulk (memory before AUTH)
  auth_guessing           password guessing: one pipeline of 100,000 wrong AUTHs plus a crowd
                          of one-at-a-time guessers
  huge_batches            authenticated clients asking for the largest replies, never reading
  idle_unauthenticated    thousands of silent connections from one address (every slot)

Everything is bounded: each attack lasts --seconds per target, connection counts are fixed
(times --scale), and an attack is cut short if the target's RSS passes --rss-cap-mib (so that
an unbounded server cannot take the machine's memory). Every process started here is stopped by
its PID; the temp dir is removed. Only 127.0.0.1 is used.

    /usr/bin/python3 tests/hostile/hostile.py --seconds 20 --scale 1.0 --out hostile-out

writes hostile-out/result.json (and the servers' logs) and prints a Markdown table.
"""

import argparse
import ctypes
import errno
import json
import math
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from free_port import free_port  # noqa: E402

HOST = "127.0.0.1"
TOKEN = "hostile-token-0123456789"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SEKKA = os.path.normpath(os.path.join(HERE, "..", "..", "build", "cli", "sekka"))
REDIS_SERVER = "/usr/bin/redis-server"
PYTHON = "/usr/bin/python3"
MIB = 1024 * 1024
ATTACKS = ["slow_senders", "non_reading_pipeliners", "unauth_partial", "auth_guessing",
           "huge_batches", "idle_unauthenticated"]
TARGETS = ["sekka", "redis"]
EV_CLOSED = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR


# ---------------------------------------------------------------------------------------------
# RESP


def resp_command(*args):
    """One command as a RESP2 array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a)
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class ErrorReply(str):
    """A RESP error reply (`-...`), as a str without the dash."""


class RespConn:
    """A blocking RESP2 client connection, enough for set-up, PING and the good client."""

    def __init__(self, port, timeout=2.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def _fill(self):
        if self.pos:
            del self.buf[:self.pos]
            self.pos = 0
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("closed by the server")
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i])
                self.pos = i + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n + 2
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode(errors="replace")
        if kind == b"-":
            return ErrorReply(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ConnectionError("not a RESP reply: %r" % line[:80])

    def call(self, *args):
        self.sock.sendall(resp_command(*args))
        return self.reply()

    def auth(self):
        r = self.call("AUTH", TOKEN)
        if r != "OK":
            raise ConnectionError("AUTH answered %r" % (r,))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def free_ports(n):
    """n distinct ports by tests/free_port.py's rule: below the kernel's ephemeral range, where
    no outgoing connection (the attackers' thousands among them) takes one before its server
    binds it."""
    ports = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def rss_kib(pid):
    """VmRSS of a process in KiB, or None once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    i = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


# ---------------------------------------------------------------------------------------------
# Targets


def _die_with_parent():
    """In a server's child before exec: SIGKILL it if this process dies (even by SIGKILL), so
    that a killed campaign leaves no server behind. (Servers are started while no other thread
    of this process runs.)"""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Target:
    """A server under attack: started once per campaign (again if an attack killed it)."""

    name = ""
    good_command = ()       # the good client's command
    pipeline_command = b""  # non_reading_pipeliners: a cheap command with a ~20 KB reply
    huge_command = b""      # huge_batches: a command with a ~2 MB reply

    def __init__(self, tmp):
        self.tmp = os.path.join(tmp, self.name)
        os.makedirs(self.tmp, mode=0o700)
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.tmp, "server.log")
        self.starts = 0

    def command(self):
        raise NotImplementedError

    def env(self):
        return None

    def prepare(self):
        """Data the attacks need (after each start)."""

    def start(self, timeout=30):
        self.starts += 1
        args = self.command()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env=self.env(), preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s at start; log:\n%s"
                                   % (self.name, self.proc.returncode, self.log_tail()))
            ok, last = self.ping(timeout=1.0)
            if ok:
                self.prepare()
                return
            time.sleep(0.05)
        raise RuntimeError("%s did not answer PING in %d s (%s); log:\n%s"
                           % (self.name, timeout, last, self.log_tail()))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ensure_running(self):
        """Starts the target again if the previous attack killed it; True if it had to."""
        if self.alive():
            return False
        self.start()
        return True

    def ping(self, timeout=2.0):
        """(answered PONG on a new authenticated connection, detail)."""
        conn = None
        try:
            t0 = time.perf_counter()
            conn = RespConn(self.port, timeout)
            conn.auth()
            r = conn.call("PING")
            ms = (time.perf_counter() - t0) * 1000
            if r == "PONG":
                return True, "PONG in %.1f ms" % ms
            return False, "PING answered %r" % (r,)
        except (OSError, ConnectionError, ValueError) as e:
            return False, "%s: %s" % (type(e).__name__, e)
        finally:
            if conn:
                conn.close()

    def rss_kib(self):
        return rss_kib(self.proc.pid)

    def stop(self):
        """SIGTERM to this target's PID, then SIGKILL if it has not exited in 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, limit=4000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                return f.read().decode(errors="replace")
        except OSError:
            return ""


class SekkaTarget(Target):
    name = "sekka"
    good_command = ("ID.NEXT",)
    pipeline_command = resp_command("ID.BATCH", 1000)
    huge_command = resp_command("ID.BATCH", 100000)

    def __init__(self, tmp, binary):
        super().__init__(tmp)
        self.binary = binary
        self.http_port, self.port = free_ports(2)
        self.token_file = os.path.join(self.tmp, "token")
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(TOKEN + "\n")
        os.makedirs(os.path.join(self.tmp, "locks"), mode=0o700)

    def command(self):
        return [self.binary, "serve", "--http", "%s:%d" % (HOST, self.http_port),
                "--resp", "%s:%d" % (HOST, self.port), "--data-dir",
                os.path.join(self.tmp, "data"), "--auth-token-file", self.token_file,
                "--max-connections", "2000", "--max-buffer-mib", "64",
                "--request-timeout", "5s", "--idle-timeout", "60s"]

    def env(self):
        # The server refuses unknown SEKKA_* variables: pass none of ours but the lock dir.
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEKKA_")}
        env["SEKKA_WORKER_LOCK_DIR"] = os.path.join(self.tmp, "locks")
        return env

    def version(self):
        try:
            return subprocess.run([self.binary, "--version"], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            return repr(e)


class RedisTarget(Target):
    name = "redis"
    good_command = ("INCR", "good")
    pipeline_command = resp_command("LRANGE", "big", 0, 999)
    huge_command = resp_command("LRANGE", "huge", 0, -1)

    def __init__(self, tmp):
        super().__init__(tmp)
        self.port, = free_ports(1)

    def command(self):
        # Redis's own limits (client-output-buffer-limit, ...) are left at their defaults.
        return [REDIS_SERVER, "--bind", HOST, "--port", str(self.port), "--save", "",
                "--appendonly", "no", "--dir", self.tmp, "--daemonize", "no",
                "--requirepass", TOKEN, "--maxclients", "2000"]

    def prepare(self):
        """The lists the big replies come from: `big` (1,000 items) and `huge` (100,000), of
        18-digit numbers, as sekka's ids are, so that replies are about the same size."""
        conn = RespConn(self.port, 30.0)
        try:
            conn.auth()
            conn.call("DEL", "big", "huge")
            conn.call("RPUSH", "big", *[str(10**17 + i) for i in range(1000)])
            batch = []
            for start in range(0, 100000, 1000):
                batch.append(resp_command("RPUSH", "huge",
                                          *[str(10**17 + i) for i in range(start, start + 1000)]))
            conn.sock.sendall(b"".join(batch))
            for _ in batch:
                r = conn.reply()
                if isinstance(r, ErrorReply):
                    raise RuntimeError("RPUSH huge: %s" % r)
            if conn.call("LLEN", "huge") != 100000 or conn.call("LLEN", "big") != 1000:
                raise RuntimeError("redis lists not made")
        finally:
            conn.close()

    def version(self):
        try:
            return subprocess.run([REDIS_SERVER, "--version"], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            return repr(e)


# ---------------------------------------------------------------------------------------------
# Measurement: RSS sampler, good client


class RssSampler(threading.Thread):
    """VmRSS of one PID every 100 ms; sets `cap_event` when it passes `cap_kib`."""

    def __init__(self, target, cap_kib, cap_event, interval=0.1):
        super().__init__(daemon=True)
        self.target = target
        self.cap_kib = cap_kib
        self.cap_event = cap_event
        self.interval = interval
        self.halt = threading.Event()
        self.start_time = time.monotonic()
        self.samples = []  # (seconds since start, KiB)
        self.peak_kib = 0
        self.cap_hit_at = None
        self._sample()

    def _sample(self):
        kib = self.target.rss_kib()
        if kib is None:
            return
        t = time.monotonic() - self.start_time
        self.samples.append((round(t, 2), kib))
        self.peak_kib = max(self.peak_kib, kib)
        if self.cap_kib and kib > self.cap_kib and self.cap_hit_at is None:
            self.cap_hit_at = round(t, 2)
            self.cap_event.set()

    def run(self):
        while not self.halt.wait(self.interval):
            self._sample()

    def finish(self):
        self.halt.set()
        self.join()
        self._sample()


def good_client(port, command, seconds):
    """The well-behaved client (run in its own process by GoodClient): one command at a time on
    an authenticated connection, each waited for with a 2 s timeout, for `seconds` from the
    moment it prints "ready". Errors: an error reply, a timeout or closed connection (then it
    reconnects), a failed reconnect (then it waits 100 ms). Prints its result as one JSON line."""
    payload = resp_command(*command)
    latencies = []
    errors = 0
    kinds = Counter()
    buckets = [0] * max(1, math.ceil(seconds))
    reconnects = 0

    def connect():
        c = RespConn(port, 2.0)
        try:
            c.auth()
        except BaseException:
            c.close()
            raise
        return c

    conn = None
    try:
        conn = connect()
    except (OSError, ConnectionError, ValueError) as e:
        errors += 1
        kinds["connect: %s" % type(e).__name__] += 1
    print("ready", flush=True)
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        if conn is None:
            try:
                conn = connect()
                reconnects += 1
            except (OSError, ConnectionError, ValueError) as e:
                errors += 1
                kinds["connect: %s" % type(e).__name__] += 1
                time.sleep(0.1)
                continue
        t0 = time.perf_counter()
        try:
            conn.sock.sendall(payload)
            r = conn.reply()
        except (OSError, ConnectionError, ValueError) as e:
            errors += 1
            kinds["%s: %s" % (type(e).__name__, str(e)[:60])] += 1
            conn.close()
            conn = None
            continue
        dt = time.perf_counter() - t0
        if isinstance(r, ErrorReply):
            errors += 1
            kinds["reply: %s" % r[:60]] += 1
            continue
        latencies.append(dt * 1000)
        sec = int(time.monotonic() - start)
        if sec < len(buckets):
            buckets[sec] += 1
    if conn:
        conn.close()
    latencies.sort()
    full = buckets[:max(1, int(seconds))]
    print(json.dumps({
        "answers": len(latencies), "errors": errors, "error_kinds": dict(kinds),
        "reconnects": reconnects,
        "p50_ms": percentile(latencies, 0.50), "p99_ms": percentile(latencies, 0.99),
        "max_ms": latencies[-1] if latencies else None,
        "answers_per_second": buckets, "min_answers_per_second": min(full),
    }), flush=True)


def fresh_client(port, command, seconds):
    """The right token on a new connection (run in its own process by GoodClient with
    --fresh): every 250 ms it connects, authenticates and sends one command, each step with a
    2 s timeout, for `seconds` from the moment it prints "ready"; a client behind the same
    address as the attackers (a NAT) that must get in while they press. Prints its result (the
    time from connect to answer) as one JSON line."""
    payload = resp_command(*command)
    times = []
    kinds = Counter()
    in_a_row = most_in_a_row = 0  # failed tries one after the other
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        conn = None
        failed = True
        try:
            conn = RespConn(port, 2.0)
            conn.auth()
            conn.sock.sendall(payload)
            r = conn.reply()
            if isinstance(r, ErrorReply):
                kinds["reply: %s" % r[:60]] += 1
            else:
                times.append((time.perf_counter() - t0) * 1000)
                failed = False
        except (OSError, ConnectionError, ValueError) as e:
            kinds["%s: %s" % (type(e).__name__, str(e)[:60])] += 1
        finally:
            if conn:
                conn.close()
        in_a_row = in_a_row + 1 if failed else 0
        most_in_a_row = max(most_in_a_row, in_a_row)
        time.sleep(max(0.0, 0.25 - (time.perf_counter() - t0)))
    times.sort()
    print(json.dumps({
        "answers": len(times), "errors": sum(kinds.values()), "error_kinds": dict(kinds),
        "failed_in_a_row": most_in_a_row, "reconnects": 0,
        "p50_ms": percentile(times, 0.50), "p99_ms": percentile(times, 0.99),
        "max_ms": times[-1] if times else None, "answers_per_second": [],
        "min_answers_per_second": 0}), flush=True)


class GoodClient:
    """The good client's process (this file with --good-client), stopped by its PID."""

    def __init__(self, target, seconds, fresh=False):
        self.seconds = seconds
        self.proc = subprocess.Popen(
            [PYTHON, os.path.abspath(__file__), "--fresh-client" if fresh else "--good-client",
             "--port", str(target.port), "--seconds", str(seconds), "--command",
             " ".join(target.good_command)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # it prints "ready" after at most ~4 s
        if line.strip() != "ready":
            self.kill()
            raise RuntimeError("the good client did not start: %r" % line)

    def result(self):
        try:
            out, _ = self.proc.communicate(timeout=self.seconds + 30)
            return json.loads(out.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
            self.kill()
            return {"answers": 0, "errors": 1, "error_kinds": {"harness": repr(e)},
                    "reconnects": 0, "p50_ms": None, "p99_ms": None, "max_ms": None,
                    "answers_per_second": [], "min_answers_per_second": 0}

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


# ---------------------------------------------------------------------------------------------
# Attack plumbing


class Ctx:
    """One attack on one target: its deadline, stop event (the RSS cap), scale, and every socket
    it opened (all closed by close_all), on one epoll."""

    def __init__(self, target, seconds, scale, stop_event):
        self.target = target
        self.scale = scale
        self.start = time.monotonic()
        self.deadline = self.start + seconds
        self.stop_event = stop_event
        self.ep = select.epoll()
        self.socks = {}  # fd -> socket

    def count(self, base):
        return max(1, round(base * self.scale))

    def now(self):
        return time.monotonic() - self.start

    def running(self):
        return time.monotonic() < self.deadline and not self.stop_event.is_set()

    def poll(self, timeout=0.05):
        timeout = max(0.0, min(timeout, self.deadline - time.monotonic()))
        try:
            return self.ep.poll(timeout)
        except InterruptedError:
            return []

    def connect(self, timeout=2.0):
        """A blocking connect, TCP_NODELAY; the socket is tracked. None if it failed."""
        try:
            s = socket.create_connection((HOST, self.target.port), timeout=timeout)
        except OSError:
            return None
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socks[s.fileno()] = s
        return s

    def connect_nonblocking(self):
        """A non-blocking connect under way (EPOLLOUT when done); the socket is tracked."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        err = s.connect_ex((HOST, self.target.port))
        if err not in (0, errno.EINPROGRESS):
            s.close()
            return None
        self.socks[s.fileno()] = s
        return s

    def authenticate(self, s):
        """AUTH on a blocking socket; True on +OK."""
        try:
            s.sendall(resp_command("AUTH", TOKEN))
            buf = b""
            while b"\r\n" not in buf:
                data = s.recv(4096)
                if not data:
                    return False
                buf += data
            return buf.startswith(b"+OK\r\n")
        except OSError:
            return False

    def watch(self, s, events):
        s.setblocking(False)
        self.ep.register(s.fileno(), events)

    def drop(self, s):
        fd = s.fileno()
        if fd in self.socks:
            try:
                self.ep.unregister(fd)
            except (OSError, ValueError):
                pass
            del self.socks[fd]
        s.close()

    def close_all(self):
        for s in list(self.socks.values()):
            s.close()
        self.socks.clear()
        self.ep.close()


def close_kind(s, ev):
    """How the server ended a connection: "reset" (RST) or "closed" (FIN)."""
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err == errno.ECONNRESET or (ev & select.EPOLLERR and err):
        return "reset"
    return "closed"


def first_line(data, limit=70):
    line = data.split(b"\r\n", 1)[0][:limit].decode(errors="replace")
    return line or "(nothing)"


def describe_times(times):
    if not times:
        return ""
    times = sorted(times)
    return " at %.1f-%.1f s" % (times[0], times[-1])


# ---------------------------------------------------------------------------------------------
# The attacks


def attack_slow_senders(ctx):
    """Slowloris: N = 200 x scale unauthenticated connections, each trickling one command one
    byte every 200 ms (AUTH with a 1 KiB password, ~1 KiB, so it never completes in a normal
    run). Models clients on a very slow link, or an attacker holding connections and buffers
    open as cheaply as it can. A server with a request timeout closes them; one without keeps
    them (and their slots and buffers) for ever."""
    payload = resp_command("AUTH", "s" * 1024)
    n = ctx.count(200)
    peers = {}
    failed = 0
    for i in range(n):
        if not ctx.running():
            break
        s = ctx.connect()
        if s is None:
            failed += 1
            continue
        ctx.watch(s, select.EPOLLIN | select.EPOLLRDHUP)
        peers[s.fileno()] = {"sock": s, "pos": 0, "next": ctx.now() + 0.2 * i / n,
                             "reply": b"", "done": 0}
    closed_at = []
    kinds = Counter()
    replies = Counter()
    completed = 0
    while ctx.running():
        now = ctx.now()
        soonest = 0.05
        for p in list(peers.values()):
            if p["next"] <= now:
                try:
                    p["sock"].send(payload[p["pos"]:p["pos"] + 1])
                    p["pos"] += 1
                    if p["pos"] == len(payload):
                        p["pos"] = 0
                        completed += 1
                except BlockingIOError:
                    pass
                except OSError:
                    pass  # the close shows on epoll
                p["next"] += 0.2
            soonest = min(soonest, p["next"] - now)
        for fd, ev in ctx.poll(max(0.0, soonest)):
            p = peers.get(fd)
            if p is None:
                continue
            s = p["sock"]
            data = b""
            try:
                data = s.recv(65536)
                if data:
                    p["reply"] = (p["reply"] + data)[:512]
            except BlockingIOError:
                continue
            except OSError:
                pass
            if data and not ev & (select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
                continue
            closed_at.append(ctx.now())
            kinds[close_kind(s, ev) if not data else "closed"] += 1
            replies[first_line(p["reply"])] += 1
            del peers[fd]
            ctx.drop(s)
    for p in peers.values():
        if p["reply"]:
            replies["(open) " + first_line(p["reply"])] += 1
    closed = len(closed_at)
    summary = "%d conns: %d closed by server%s" % (n - failed, closed, describe_times(closed_at))
    if replies:
        summary += "; " + ", ".join("%s x%d" % kv for kv in replies.most_common(3))
    if failed:
        summary += "; %d connects failed" % failed
    return {"connections": n, "connect_failed": failed, "closed_by_server": closed,
            "close_kinds": dict(kinds), "closed_at_s": [round(t, 2) for t in sorted(closed_at)],
            "replies": dict(replies), "commands_completed": completed,
            "still_open": len(peers), "summary": summary}


def flood_without_reading(ctx, n, send):
    """Opens `n` authenticated connections and, until the attack ends or every one is gone,
    writes to each whenever its socket takes more (`send(peer)` writes what it can and raises
    BlockingIOError when the socket is full), never reading a reply. Returns the connections
    made, those that failed to connect or authenticate, when and how the server closed the
    others, and those still open."""
    peers = {}
    failed = 0
    for _ in range(n):
        if not ctx.running():
            break
        s = ctx.connect()
        if s is None or not ctx.authenticate(s):
            failed += 1
            if s is not None:
                ctx.drop(s)
            continue
        ctx.watch(s, select.EPOLLOUT | EV_CLOSED)
        peers[s.fileno()] = {"sock": s, "fd": s.fileno(), "off": 0, "sent": 0}
    closed_at = []
    kinds = Counter()
    while ctx.running() and peers:
        for fd, ev in ctx.poll(0.05):
            p = peers.get(fd)
            if p is None:
                continue
            s = p["sock"]
            gone = bool(ev & EV_CLOSED)
            if not gone and ev & select.EPOLLOUT:
                try:
                    send(p)
                except BlockingIOError:
                    pass
                except OSError:
                    gone = True
            if gone:
                closed_at.append(ctx.now())
                kinds[close_kind(s, ev)] += 1
                del peers[fd]
                ctx.drop(s)
    return failed, closed_at, kinds, peers


def attack_non_reading_pipeliners(ctx):
    """N = 50 x scale authenticated connections each pipelining a cheap command with a ~20 KB
    reply (sekka `ID.BATCH 1000`, redis `LRANGE big 0 999` of 1,000 18-digit items) as fast as
    the socket takes them, never reading a reply. Models a stuck or malicious consumer and the
    1000x amplification of small requests into big replies: a server that keeps reading such a
    client buffers replies without bound."""
    cmd = ctx.target.pipeline_command
    chunk = cmd * max(1, 65536 // len(cmd))
    n = ctx.count(50)
    sent = 0

    def send(p):
        nonlocal sent
        while ctx.running():
            k = p["sock"].send(memoryview(chunk)[p["off"]:])
            sent += k
            p["off"] = (p["off"] + k) % len(chunk)

    failed, closed_at, kinds, peers = flood_without_reading(ctx, n, send)
    summary = "%d conns sent %.1f MiB (%d cmds); %d closed by server%s" % (
        n - failed, sent / MIB, sent // len(cmd), len(closed_at), describe_times(closed_at))
    if failed:
        summary += "; %d connect/AUTH failed" % failed
    return {"connections": n, "connect_failed": failed, "bytes_sent": sent,
            "commands_sent": sent // len(cmd), "closed_by_server": len(closed_at),
            "close_kinds": dict(kinds), "closed_at_s": [round(t, 2) for t in sorted(closed_at)],
            "still_open": len(peers), "summary": summary}

def attack_unauth_partial(ctx):
    """N = 100 x scale unauthenticated connections each sending the start of a huge bulk,
    `*2 $4 ECHO $1000000` and then 200 KB of it, then nothing. Models memory taken before
    authentication: a server should refuse the length (or at least not buffer it) for a client
    that has not authenticated. Each answer is read with a 1 s timeout; a connection the
    server closed is made again 1 s later (bounded by the attack's time), one that is left open
    is held to the end."""
    head = b"*2\r\n$4\r\nECHO\r\n$1000000\r\n"
    payload = head + b"x" * (200 * 1024)
    n = ctx.count(100)
    peers = {}
    answers = Counter()
    reopen = []  # times (ctx.now()) at which to make a connection again
    attempts = 0
    failed = 0
    sent_total = 0

    def open_one():
        nonlocal attempts, failed
        attempts += 1
        s = ctx.connect()
        if s is None:
            failed += 1
            reopen.append(ctx.now() + 1.0)
            return
        ctx.watch(s, select.EPOLLOUT | select.EPOLLIN | select.EPOLLRDHUP)
        peers[s.fileno()] = {"sock": s, "sent": 0, "reply": b"", "sent_at": None,
                             "state": "sending"}

    def finish(p, end):
        if p["state"] == "held":  # counted as held already; note that it was closed later
            answers["(held, then %s)" % end] += 1
        else:
            answers["%s (%s)" % (first_line(p["reply"]), end)] += 1
        del peers[p["sock"].fileno()]
        ctx.drop(p["sock"])
        reopen.append(ctx.now() + 1.0)

    for _ in range(n):
        if not ctx.running():
            break
        open_one()
    while ctx.running():
        now = ctx.now()
        due = [t for t in reopen if t <= now]
        reopen[:] = [t for t in reopen if t > now]
        for _ in due:
            if ctx.running():
                open_one()
        for p in list(peers.values()):
            if p["state"] == "waiting" and now - p["sent_at"] > 1.0:
                p["state"] = "held"
                answers["%s (held open)" % first_line(p["reply"])] += 1
        for fd, ev in ctx.poll(0.05):
            p = peers.get(fd)
            if p is None:
                continue
            s = p["sock"]
            if ev & select.EPOLLOUT and p["state"] == "sending":
                try:
                    while p["sent"] < len(payload):
                        k = s.send(memoryview(payload)[p["sent"]:])
                        p["sent"] += k
                        sent_total += k
                    p["state"] = "waiting"
                    p["sent_at"] = ctx.now()
                    ctx.ep.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                except BlockingIOError:
                    pass
                except OSError:
                    p["state"] = "waiting"
                    p["sent_at"] = ctx.now()
                    ctx.ep.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
            if ev & (select.EPOLLIN | EV_CLOSED):
                end = None
                try:
                    data = s.recv(65536)
                    if data:
                        p["reply"] = (p["reply"] + data)[:512]
                    else:
                        end = "closed"
                except BlockingIOError:
                    pass
                except ConnectionResetError:
                    end = "reset"
                except OSError as e:
                    end = type(e).__name__
                if end is None and ev & (select.EPOLLHUP | select.EPOLLERR):
                    end = close_kind(s, ev)
                if end:
                    finish(p, end)
    held = sum(1 for p in peers.values() if p["state"] == "held")
    closed = sum(v for k, v in answers.items() if not k.endswith("(held open)"))
    summary = "%d attempts: %s" % (attempts, ", ".join("%s x%d" % kv
                                                       for kv in answers.most_common(3)))
    if failed:
        summary += "; %d connects failed" % failed
    return {"connections": n, "attempts": attempts, "connect_failed": failed,
            "answers": dict(answers), "ended_by_server": closed, "held_open_at_end": held,
            "bytes_sent": sent_total, "summary": summary}


def attack_auth_guessing(ctx):
    """Password guessing: 1 connection pipelining 100,000 `AUTH wrong-guess-NNNNNNN` (reading
    the answers as they come), plus 20 x scale connections each sending one wrong AUTH at a time
    in a loop, connecting again when the server closes them. Models an online brute force; the
    number that matters is the guesses answered per second (a server that slows or limits
    guessing answers fewer)."""
    n_guesses = 100000
    pipeline = b"".join(resp_command("AUTH", "wrong-guess-%07d" % i) for i in range(n_guesses))
    wrong = 0
    other = Counter()
    counter = [n_guesses]

    def guess():
        counter[0] += 1
        return resp_command("AUTH", "wrong-guess-%07d" % counter[0])

    def count_lines(p, data):
        nonlocal wrong
        buf = p["rbuf"] + data
        lines = buf.split(b"\r\n")
        p["rbuf"] = lines.pop()
        for line in lines:
            if line.startswith(b"-WRONGPASS"):
                wrong += 1
            else:
                other[line[:60].decode(errors="replace")] += 1
        return len(lines)

    peers = {}
    # the pipeliner
    pipe_answers = 0
    pipe = ctx.connect()
    pipe_closed = None
    if pipe is not None:
        ctx.watch(pipe, select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP)
        peers[pipe.fileno()] = {"sock": pipe, "kind": "pipe", "sent": 0, "rbuf": b""}
    reconnects = 0
    connect_failed = 0
    loop_answers = 0

    def open_looper():
        nonlocal connect_failed
        s = ctx.connect_nonblocking()
        if s is None:
            connect_failed += 1
            return False
        ctx.ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLRDHUP)
        peers[s.fileno()] = {"sock": s, "kind": "loop", "state": "connecting", "rbuf": b""}
        return True

    m = ctx.count(20)
    for _ in range(m):
        open_looper()
    lost_loopers = 0
    while ctx.running() and peers:
        for fd, ev in ctx.poll(0.05):
            p = peers.get(fd)
            if p is None:
                continue
            s = p["sock"]
            end = None
            if p["kind"] == "pipe":
                # 64 KiB of guesses per turn, then read what has been answered
                if ev & select.EPOLLOUT and p["sent"] < len(pipeline):
                    try:
                        p["sent"] += s.send(memoryview(pipeline)[p["sent"]:p["sent"] + 65536])
                    except BlockingIOError:
                        pass
                    except OSError:
                        pass  # the server closed it: the reads below find out how
                    if p["sent"] >= len(pipeline):
                        ctx.ep.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                while end is None:
                    try:
                        data = s.recv(1 << 20)
                        if data:
                            pipe_answers += count_lines(p, data)
                        else:
                            end = "closed"
                    except BlockingIOError:
                        break
                    except OSError:
                        end = "reset"
                if end:
                    pipe_closed = (end, round(ctx.now(), 2))
                    del peers[fd]
                    ctx.drop(s)
                continue
            # a looper
            if p["state"] == "connecting" and ev & select.EPOLLOUT:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) or ev & select.EPOLLERR:
                    end = "connect failed"
                else:
                    try:
                        s.send(guess())
                        p["state"] = "waiting"
                        ctx.ep.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                    except OSError:
                        end = "send failed"
            elif ev & (select.EPOLLIN | EV_CLOSED):
                try:
                    data = s.recv(65536)
                    if data:
                        k = count_lines(p, data)
                        loop_answers += k
                        if k:
                            s.send(guess())
                    else:
                        end = "closed"
                except BlockingIOError:
                    pass
                except OSError:
                    end = "reset"
            if end:
                if end == "connect failed":
                    connect_failed += 1
                del peers[fd]
                ctx.drop(s)
                if ctx.running():
                    reconnects += 1
                    if not open_looper():
                        lost_loopers += 1
    elapsed = max(0.001, ctx.now())
    rate = wrong / elapsed
    summary = "%d WRONGPASS in %.1f s (%.0f/s); pipeline %d/%d answered%s; %d looper reconnects" % (
        wrong, elapsed, rate, pipe_answers, n_guesses,
        ", closed (%s at %.1f s)" % pipe_closed if pipe_closed else "", reconnects)
    if other:
        summary += "; other: " + ", ".join("%s x%d" % kv for kv in other.most_common(2))
    return {"loopers": m, "wrongpass": wrong, "elapsed_s": round(elapsed, 2),
            "guesses_answered_per_s": round(rate, 1), "pipeline_answered": pipe_answers,
            "pipeline_closed": pipe_closed, "looper_answers": loop_answers,
            "looper_reconnects": reconnects, "connect_failed": connect_failed,
            "other_replies": dict(other), "summary": summary}


def attack_idle_unauthenticated(ctx):
    """N = 2,500 x scale connections that never send a byte (never authenticate), opened as fast
    as the server takes them and opened again when it closes them, from the good clients'
    address (one NAT). Models the cheapest way to hold every slot: a server that keeps silent
    connections until an idle timeout (300 s) refuses every new client meanwhile."""
    n = ctx.count(2500)
    peers = {}
    refused = 0
    closed = 0

    def open_one():
        nonlocal refused
        s = ctx.connect_nonblocking()
        if s is None:
            refused += 1
            return
        ctx.ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
        peers[s.fileno()] = s
    while ctx.running() and len(peers) < n:
        open_one()
    while ctx.running():
        for fd, ev in ctx.poll(0.05):
            s = peers.pop(fd, None)
            if s is None:
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data.startswith(b"-ERR max number of clients"):
                refused += 1
            else:
                closed += 1
            ctx.drop(s)
            if ctx.running():
                open_one()
    summary = "%d silent conns held at the end; %d closed by the server, %d refused" % (
        len(peers), closed, refused)
    return {"connections": n, "held_at_end": len(peers), "closed_by_server": closed,
            "refused": refused, "summary": summary}


def attack_huge_batches(ctx):
    """N = 20 x scale authenticated connections each sending 20 requests for the largest reply
    (sekka `ID.BATCH 100000`, redis `LRANGE huge 0 -1` of 100,000 items: ~2 MB each) and never
    reading. Models a client asking for much more than it takes: 20 x 20 x 2 MB = 800 MB of
    replies at scale 1, which a server must not hold all at once."""
    payload = ctx.target.huge_command * 20
    n = ctx.count(20)
    fully_sent = 0

    def send(p):
        nonlocal fully_sent
        while p["sent"] < len(payload):
            p["sent"] += p["sock"].send(memoryview(payload)[p["sent"]:])
        fully_sent += 1
        ctx.ep.modify(p["fd"], EV_CLOSED)  # all sent: only watch for a close

    failed, closed_at, kinds, peers = flood_without_reading(ctx, n, send)
    summary = "%d conns, %d sent all 20 requests; %d closed by server%s" % (
        n - failed, fully_sent, len(closed_at), describe_times(closed_at))
    if failed:
        summary += "; %d connect/AUTH failed" % failed
    return {"connections": n, "connect_failed": failed, "fully_sent": fully_sent,
            "closed_by_server": len(closed_at), "close_kinds": dict(kinds),
            "closed_at_s": [round(t, 2) for t in sorted(closed_at)],
            "still_open": len(peers), "summary": summary}


ATTACK_FUNCS = {
    "slow_senders": attack_slow_senders,
    "non_reading_pipeliners": attack_non_reading_pipeliners,
    "unauth_partial": attack_unauth_partial,
    "auth_guessing": attack_auth_guessing,
    "huge_batches": attack_huge_batches,
    "idle_unauthenticated": attack_idle_unauthenticated,
}


# ---------------------------------------------------------------------------------------------
# The campaign


def run_attack(name, target, seconds, scale, rss_cap_mib, log=print):
    """One attack on one target for `seconds`; returns its record."""
    restarted = target.ensure_running()
    rss_before = target.rss_kib() or 0
    good = GoodClient(target, seconds)
    fresh = GoodClient(target, seconds, fresh=True)
    cap_event = threading.Event()
    sampler = RssSampler(target, rss_cap_mib * 1024 if rss_cap_mib else None, cap_event)
    sampler.start()
    ctx = Ctx(target, seconds, scale, cap_event)
    try:
        try:
            attacker = ATTACK_FUNCS[name](ctx)
        except Exception as e:  # a harness bug must not leave the servers running
            attacker = {"summary": "harness error: %r" % e, "harness_error": repr(e)}
        # the attack functions return at the deadline, or earlier at the RSS cap or when all
        # their connections are gone: hold the rest until the deadline
        while ctx.running():
            time.sleep(0.05)
        alive_end = target.alive()
        ping_end = target.ping() if alive_end else (False, "process exited")
    finally:
        ctx.close_all()
        good_result = good.result()
        fresh_result = fresh.result()
        sampler.finish()
    alive_after = target.alive()
    ping_after = target.ping() if alive_after else (False, "exited with %s"
                                                    % target.proc.returncode)
    if sampler.cap_hit_at is not None:
        attacker["summary"] += "; STOPPED at RSS cap %d MiB (%.1f s)" % (rss_cap_mib,
                                                                       sampler.cap_hit_at)
    rec = {
        "attack": name, "target": target.name, "seconds": seconds, "scale": scale,
        "restarted_before": restarted,
        "rss_before_mib": round(rss_before / 1024, 1),
        "peak_rss_mib": round(sampler.peak_kib / 1024, 1),
        "rss_after_mib": round((target.rss_kib() or 0) / 1024, 1),
        "rss_cap_hit_at_s": sampler.cap_hit_at,
        "rss_samples_kib": sampler.samples,
        "alive_at_end": alive_end, "ping_at_end": list(ping_end),
        "alive_after": alive_after, "ping_after": list(ping_after),
        "good": good_result, "fresh": fresh_result, "attacker": attacker,
    }
    log("  %-24s %-6s peak %7.1f MiB  good p99 %s ms, %d errors  | %s" % (
        name, target.name, rec["peak_rss_mib"], fmt(good_result["p99_ms"]),
        good_result["errors"], attacker["summary"]))
    return rec


def fmt(v, digits=2):
    return "-" if v is None else ("%.*f" % (digits, v))


def markdown_table(records):
    head = ("| attack | target | peak RSS MiB | RSS before MiB | good p50 ms | good p99 ms "
            "| good max ms | good errors | new client max ms | new client errors "
            "| attacker outcome |")
    lines = [head, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in records:
        g = r["good"]
        outcome = r["attacker"]["summary"]
        if not r["alive_after"]:
            outcome = "**TARGET DIED** " + outcome
        elif not r["ping_after"][0]:
            outcome = "**NO PING AFTER** " + outcome
        f = r["fresh"]
        lines.append("| %s | %s | %.1f | %.1f | %s | %s | %s | %d | %s | %d | %s |" % (
            r["attack"], r["target"], r["peak_rss_mib"], r["rss_before_mib"],
            fmt(g["p50_ms"]), fmt(g["p99_ms"]), fmt(g["max_ms"]), g["errors"],
            fmt(f["max_ms"]), f["errors"], outcome.replace("|", "\\|")))
    return "\n".join(lines)


def run_campaign(seconds=20.0, scale=1.0, out=None, attacks=None, targets=None,
                 rss_cap_mib=4096, settle=1.0, sekka_bin=None, log=print):
    """Every attack against every target; returns the result dict (and writes out/result.json
    and the servers' logs when `out` is given)."""
    attacks = attacks or ATTACKS
    targets = targets or TARGETS
    sekka_bin = sekka_bin or os.environ.get("HOSTILE_SEKKA_BIN") or DEFAULT_SEKKA
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="sekka-hostile-")
    servers = {}
    records = []
    try:
        for name in targets:
            t = SekkaTarget(tmp, sekka_bin) if name == "sekka" else RedisTarget(tmp)
            servers[name] = t
            t.start()
            log("%s: pid %d, RESP on %s:%d, %.1f MiB" % (name, t.proc.pid, HOST, t.port,
                                                        (t.rss_kib() or 0) / 1024))
        for attack in attacks:
            for name in targets:
                records.append(run_attack(attack, servers[name], seconds, scale, rss_cap_mib,
                                          log))
                time.sleep(settle)
        result = {
            "config": {"seconds": seconds, "scale": scale, "rss_cap_mib": rss_cap_mib,
                       "attacks": attacks, "targets": targets,
                       "sekka_flags": "--max-connections 2000 --max-buffer-mib 64 "
                                      "--request-timeout 5s --idle-timeout 60s",
                       "redis_flags": "--maxclients 2000, other limits default"},
            "versions": {n: t.version() for n, t in servers.items()},
            "starts": {n: t.starts for n, t in servers.items()},
            "results": records,
            "elapsed_s": round(time.monotonic() - t_start, 1),
        }
    finally:
        for t in servers.values():
            t.stop()
        if out:
            os.makedirs(out, exist_ok=True)
            for n, t in servers.items():
                try:
                    with open(os.path.join(out, "%s.log" % n), "w") as f:
                        f.write(t.log_tail(1 << 20))
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    if out:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
    return result


def _terminate(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through run_campaign's finally: servers stopped


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="per attack per target")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies connection counts")
    ap.add_argument("--out", default="hostile-out")
    ap.add_argument("--attacks", default=",".join(ATTACKS))
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--rss-cap-mib", type=int, default=4096,
                    help="cut an attack short when the target's RSS passes this (0 = no cap)")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds between attacks")
    ap.add_argument("--good-client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fresh-client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--command", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.good_client or args.fresh_client:
        (fresh_client if args.fresh_client else good_client)(args.port, args.command.split(),
                                                             args.seconds)
        return 0
    attacks = [a for a in args.attacks.split(",") if a]
    targets = [t for t in args.targets.split(",") if t]
    for a in attacks:
        if a not in ATTACKS:
            ap.error("unknown attack %r (known: %s)" % (a, ", ".join(ATTACKS)))
    for t in targets:
        if t not in TARGETS:
            ap.error("unknown target %r" % t)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    print("hostile campaign: %d attacks x %d targets, %.0f s each, scale %g"
          % (len(attacks), len(targets), args.seconds, args.scale), flush=True)
    result = run_campaign(args.seconds, args.scale, args.out, attacks, targets,
                          args.rss_cap_mib, args.settle, log=lambda s: print(s, flush=True))
    print()
    print(markdown_table(result["results"]))
    print()
    print("%s/result.json; %.0f s" % (args.out, result["elapsed_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
