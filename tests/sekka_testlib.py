"""Helpers for end-to-end tests: start the real `sekka serve` on 127.0.0.1 with ports the kernel
picks (port 0), find where it listens from its first stdout line, talk to it, and stop it by PID.
Every server and temp dir a test makes is cleaned up by the test's tearDown (or at exit)."""

import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from free_port import free_port  # noqa: F401 (the tests import it from here)

# A sanitizer's allocator keeps freed memory resident: RSS bounds are checked without one.
UNDER_SANITIZER = "ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ


def client_hello():
    """A TLS ClientHello's bytes, to send (and replay) on raw sockets."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    tls = ctx.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_side=False)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()

SEKKA = os.environ.get("SEKKA_BIN", "build/cli/sekka")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
LISTEN_RE = re.compile(r"HTTP (?:on https?://(\S+)|off), Redis protocol (?:on (\S+?)|off)"
                       r"(?:, Thrift on (\S+))? \(worker id (\d+)")

_live = []


def faketime_env(clock_file):
    """Environment that runs a dynamically linked program on libfaketime: its wall clock is
    real time plus the offset in `clock_file` (e.g. "-5"), read on every call; its monotonic
    clock stays real."""
    return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": clock_file,
            "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def clockshift_env(clock_file):
    """Environment that runs a program (a redis-server, whose jemalloc hangs under libfaketime)
    on tests/clockshift.c: its wall clock is real time plus the whole seconds in `clock_file`
    ("+30"), re-read every 50 ms; its monotonic clocks stay real."""
    lib = os.environ.get("CLOCKSHIFT_LIB",
                         os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(SEKKA))),
                                      "tests", "libsekka_clockshift.so"))
    return {"LD_PRELOAD": lib, "CLOCKSHIFT_FILE": clock_file}


def refuse_io_uring():
    """A preexec_fn: the process may not make an io_uring (io_uring_setup fails with EPERM), as
    in a container whose seccomp profile forbids it (Docker's default one does). A real seccomp
    filter: classic BPF that answers EPERM to system call 425 on x86-64 and allows the rest."""
    import ctypes
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    ld_abs, jeq, ret = 0x20, 0x15, 0x06
    program = [(ld_abs, 0, 0, 4),            # the architecture
               (jeq, 0, 3, 0xC000003E),      # x86-64, else allow
               (ld_abs, 0, 0, 0),            # the system call's number
               (jeq, 0, 1, 425),             # io_uring_setup
               (ret, 0, 0, 0x00050000 | 1),  # SECCOMP_RET_ERRNO | EPERM
               (ret, 0, 0, 0x7FFF0000)]      # SECCOMP_RET_ALLOW
    code = b"".join(struct.pack("HBBI", *i) for i in program)
    buffer = ctypes.create_string_buffer(code)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(program), ctypes.addressof(buffer))
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0 or \
            libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl")


def _cleanup():
    for proc in list(_live):
        if proc.poll() is None:
            proc.kill()
            proc.wait()


atexit.register(_cleanup)


class Server:
    """One `sekka serve` process."""

    def __init__(self, data_dir, *flags, env=None, faketime_file=None, wait=True,
                 resp="127.0.0.1:0", preexec=None):
        self.data_dir = data_dir
        self.env = dict(os.environ)
        # Each data dir is a host of its own (its own worker lock dir) unless the test shares
        # one among its processes, as the processes of one host share /var/lib/sekka/workers.
        self.env["SEKKA_WORKER_LOCK_DIR"] = os.path.join(data_dir, "host-locks")
        if env:
            self.env.update(env)
        if faketime_file:
            self.env.update(faketime_env(faketime_file))
        args = [SEKKA, "serve", "--http", "127.0.0.1:0", "--resp", resp,
                "--data-dir", data_dir, *flags]
        self.stderr_path = os.path.join(data_dir + ".log")
        self.stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=self.env, text=True, preexec_fn=preexec)
        _live.append(self.proc)
        self.http = self.resp = self.thrift = None
        self.worker_id = None
        if wait:
            self.wait_listening()

    def wait_listening(self, timeout=30):
        """Reads the first stdout line; returns False if the process exited instead."""
        deadline = time.time() + timeout
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=max(1, deadline - time.time()))
            return False
        self.first_line = line
        m = LISTEN_RE.search(line)
        if not m:
            raise AssertionError(f"unexpected first line: {line!r}")
        self.http, self.resp, self.thrift = m.group(1), m.group(2), m.group(3)
        self.worker_id = int(m.group(4))
        return True

    @property
    def http_port(self):
        return int(self.http.rsplit(":", 1)[1])

    @property
    def resp_port(self):
        return int(self.resp.rsplit(":", 1)[1])

    @property
    def thrift_port(self):
        return int(self.thrift.rsplit(":", 1)[1])

    def stderr_text(self):
        if not self.stderr.closed:
            self.stderr.flush()
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc in _live:
            _live.remove(self.proc)
        self.proc.stdout.close()
        self.stderr.close()
        return self.proc.returncode

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    # HTTP
    def get(self, path, headers=None, conn=None):
        return self.request("GET", path, headers, conn)

    def request(self, method, path, headers=None, conn=None):
        own = conn is None
        if own:
            conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        body = r.read().decode()
        result = (r.status, dict(r.getheaders()), body)
        if own:
            conn.close()
        return result

    def get_json(self, path, headers=None, conn=None):
        return self.request_json("GET", path, headers, conn)

    def request_json(self, method, path, headers=None, conn=None):
        status, hdrs, body = self.request(method, path, headers, conn)
        return status, json.loads(body) if body else None

    # RESP over a raw socket (the clients under test are redis-cli and python3-redis).
    def resp_raw(self, payload, read_until_close=False, timeout=5):
        with socket.create_connection(("127.0.0.1", self.resp_port), timeout=timeout) as s:
            s.sendall(payload)
            data = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    if not read_until_close and data.endswith(b"\r\n"):
                        break
            except socket.timeout:
                pass
            return data


# Headless Chromium that can reach nothing but 127.0.0.1: every other name resolves to nothing
# and any other fetch goes to a dead proxy; background services (updates, sync, metrics, safe
# browsing) are off.
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
    "--disable-domain-reliability", "--disable-breakpad", "--no-pings",
    "--disable-client-side-phishing-detection", "--metrics-recording-only",
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost, EXCLUDE 127.0.0.1",
    "--enable-logging=stderr", "--v=0",
]


def chromium(url, profile_dir, *args, timeout=90):
    """Runs headless Chromium on `url` with `args` (--dump-dom, --screenshot=...). Returns
    (stdout, the page's console lines)."""
    p = subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", *args, url],
                       capture_output=True, text=True, timeout=timeout)
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line]
    return p.stdout, console


def redis_cli(server, *args, extra=()):
    p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(server.resp_port), *extra, *args],
                       capture_output=True, text=True, timeout=30)
    return p.stdout.strip()


class CosIdProxyClient:
    """The requests of CosId's ProxyMachineIdDistributor and ProxyIdSegmentDistributor(Factory),
    URL for URL (Strings.lenientFormat of the proxy host and the arguments), with OkHttp's empty
    JSON bodies."""

    def __init__(self, server, headers=None, timeout=30):
        self.server = server
        self.headers = {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        self.timeout = timeout

    def _call(self, method, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=self.timeout)
        conn.request(method, path, body=b"" if method != "DELETE" else None, headers=self.headers)
        r = conn.getresponse()
        body = r.read().decode()
        conn.close()
        return r.status, body

    def distribute(self, namespace, instance, stable, machine_bit, guard):
        status, body = self._call(
            "POST", f"/machines/{namespace}?instanceId={instance}&stable={str(stable).lower()}"
                    f"&machineBit={machine_bit}&safeGuardDuration={guard}")
        return status, json.loads(body)

    def guard(self, namespace, instance, stable, guard):
        status, body = self._call(
            "PATCH", f"/machines/{namespace}?instanceId={instance}&stable={str(stable).lower()}"
                     f"&safeGuardDuration={guard}")
        return status, json.loads(body) if body else None

    def revert(self, namespace, instance, stable):
        return self._call("DELETE",
                          f"/machines/{namespace}?instanceId={instance}&stable={str(stable).lower()}")

    def create_distributor(self, namespace, name, offset, step):
        return self._call("POST", f"/segments/distributor/{namespace}/{name}?offset={offset}"
                                  f"&step={step}")

    def next_max_id(self, namespace, name, step):
        status, body = self._call("PATCH", f"/segments/{namespace}/{name}?step={step}")
        return status, body


class Balancer:
    """A round-robin TCP load balancer on 127.0.0.1, as a fleet puts in front of its servers:
    each new connection goes to the next of `ports` (`.http_port` is its own, so that a client of
    a server can be pointed at it). Stops with stop()."""

    def __init__(self, ports):
        self.ports = list(ports)
        self.turn = 0
        self.stopping = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen(128)
        self.sock.settimeout(0.2)
        self.http_port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                client, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            port = self.ports[self.turn % len(self.ports)]
            self.turn += 1
            try:
                up = socket.create_connection(("127.0.0.1", port), timeout=10)
            except OSError:
                client.close()
                continue
            for src, dst in ((client, up), (up, client)):
                src.settimeout(None)
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def stop(self):
        self.stopping.set()
        self.sock.close()


class TempDirs:
    """A temp dir for a test's data dirs; removed at cleanup."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="sekka-test-")

    def path(self, name):
        return os.path.join(self.root, name)

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


def exchange(port, payload, timeout):
    """Sends `payload` to 127.0.0.1:`port` and returns all it answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(payload)
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                return data
            data += chunk


def check_read_sizes(test, c):
    """Drives connection `c` (a socket, plain or TLS, to a RESP port) with requests at and
    around the server's 16 KiB read buffer: one at a time, split by a pause, and pipelined. A
    read that wrongly took the socket for empty (server/drained_read.h) leaves a request
    unanswered, and the recv here times out."""
    def echo(n):
        return b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (n, b"x" * n)

    def reply(n):
        return b"$%d\r\n%s\r\n" % (n, b"x" * n)

    def expect(want):
        got = b""
        while len(got) < len(want):
            chunk = c.recv(len(want) - len(got))
            test.assertTrue(chunk, f"closed after {len(got)} of {len(want)} bytes")
            got += chunk
        test.assertEqual(got, want)

    sizes = range(16_340, 16_400)  # requests of 16,360 to 16,421 bytes
    for n in sizes:
        c.sendall(echo(n))
        expect(reply(n))
    for cut in (16_383, 16_384, 16_385):
        c.sendall(echo(20_000)[:cut])
        time.sleep(0.05)
        c.sendall(echo(20_000)[cut:])
        expect(reply(20_000))
    # In one write: the replies (under 1 MiB) stay under the output bound, so the server reads
    # on while nothing is read here.
    c.sendall(b"".join(echo(n) for n in sizes))
    expect(b"".join(reply(n) for n in sizes))


def check_half_close(test, connect, request, trials=20):
    """Over fresh connections from `connect()` (plain sockets): a request, its reply, then a
    second request sent together with a half-close (shutdown(SHUT_WR)) must get its reply and
    the server's close at once. A read that took a short read for an empty socket
    (server/drained_read.h) left it waiting for the idle timeout (the review of that change)."""
    for trial in range(trials):
        with connect() as c:
            c.settimeout(5)
            c.sendall(request)
            test.assertTrue(c.recv(65536), trial)
            time.sleep(0.01)
            c.sendall(request)
            c.shutdown(socket.SHUT_WR)
            c.settimeout(2)
            got = b""
            try:
                while chunk := c.recv(65536):
                    got += chunk
            except socket.timeout:
                test.fail(f"trial {trial}: no close within 2 s of a half-close (got {got!r})")
            test.assertTrue(got, trial)


def check_urgent_data(test, connect, request, trials=20):
    """A request after TCP urgent data on a connection from `connect()` must be answered: the
    kernel stops a read at the urgent byte with the request queued behind it, and a read that
    took that short read for an empty socket left the request waiting for the next one."""
    for trial in range(trials):
        with connect() as c:
            c.settimeout(5)
            c.sendall(request)
            one = c.recv(65536)  # the reply, the same each time
            # Corked, the two go in one segment: the server's read stops at the urgent byte.
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            c.send(request + b"!", socket.MSG_OOB)  # the last byte is urgent, out of the stream
            c.send(request)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
            got = b""
            c.settimeout(1)
            try:
                while len(got) < 2 * len(one):
                    chunk = c.recv(65536)
                    test.assertTrue(chunk, f"trial {trial}: closed after {got!r}")
                    got += chunk
            except socket.timeout:
                test.fail(f"trial {trial}: a request after urgent data unanswered (got {got!r})")
            test.assertEqual(got, one * 2, trial)


def generated_thrift(idl):
    """Puts the Python code Thrift generates from `idl` on sys.path, in a temp dir that goes
    when the test process exits."""
    gen = tempfile.mkdtemp(prefix="sekka-thrift-")
    atexit.register(shutil.rmtree, gen, True)
    subprocess.run(["thrift", "--gen", "py", "-out", gen, idl], check=True)
    sys.path.insert(0, gen)


def wait_for(predicate, timeout):
    """True once predicate() holds, False if `timeout` seconds passed first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _wait(predicate, timeout, what):
    if not wait_for(predicate, timeout):
        raise AssertionError(f"{what} not ready within {timeout} s")


def signal_pids(pids, sig):
    """Sends `sig` to each PID that is set and still exists."""
    for pid in pids:
        if not pid:
            continue
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Postgres:
    """A throwaway PostgreSQL 15 on a free port (scripts/pg.sh): tests restart it, stop its
    processes (SIGSTOP) or crash it, and it is always stopped through its pid file."""

    name = "postgres"

    BIN = "/usr/lib/postgresql/15/bin"
    SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "pg.sh")

    def __init__(self, path):
        self.path = path
        subprocess.run(["bash", self.SCRIPT, "start", path], check=True, timeout=120)
        with open(os.path.join(path, "uri")) as f:
            self.uri = f.read().strip()
        self.port = int(self.uri.rsplit(":", 1)[1].split("/")[0])

    def pg_ctl(self, action, mode="fast"):
        """`pg_ctl action` as the postgres user; mode "immediate" stops it as a crash would."""
        cmd = [f"{self.BIN}/pg_ctl", "-D", os.path.join(self.path, "data"), "-w", "-m", mode,
               "-l", os.path.join(self.path, "server.log"), action]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def pids(self):
        """The postmaster and every process it started (all its backends)."""
        try:
            with open(os.path.join(self.path, "data", "postmaster.pid")) as f:
                postmaster = int(f.readline())
        except (OSError, ValueError):
            return []
        children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True,
                                  text=True).stdout.split()
        return [postmaster] + [int(p) for p in children]

    def signal(self, sig):
        """SIGSTOP or SIGCONT to every process of the server."""
        signal_pids(self.pids(), sig)

    def stop_server(self, crash=False):
        """crash: no checkpoint, every connection dropped (as clients and recovery see one)."""
        self.pg_ctl("stop", mode="immediate" if crash else "fast")

    def start_server(self):
        self.pg_ctl("start")

    def stop(self):
        self.signal(signal.SIGCONT)
        subprocess.run(["bash", self.SCRIPT, "stop", self.path], timeout=120)


# The peers' tables, column for column as Leaf's and tinyid's own scripts make them.
LEAF_TABLE = """CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) NOT NULL DEFAULT '',
  max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)) ENGINE=InnoDB"""
TINYID_TABLE = """CREATE TABLE tiny_id_info (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  biz_type VARCHAR(63) NOT NULL DEFAULT '', begin_id BIGINT NOT NULL DEFAULT 0,
  max_id BIGINT NOT NULL DEFAULT 0, step INT DEFAULT 0, delta INT NOT NULL DEFAULT 1,
  remainder INT NOT NULL DEFAULT 0, create_time TIMESTAMP NOT NULL DEFAULT '2010-01-01 00:00:00',
  update_time TIMESTAMP NOT NULL DEFAULT '2010-01-01 00:00:00', version BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (id), UNIQUE KEY uniq_biz_type (biz_type)) ENGINE=InnoDB DEFAULT CHARSET=utf8"""

TINYID_TOKEN_TABLE = """CREATE TABLE tiny_id_token (id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  token VARCHAR(255) NOT NULL DEFAULT '', biz_type VARCHAR(63) NOT NULL DEFAULT '',
  remark VARCHAR(255) NOT NULL DEFAULT '',
  create_time TIMESTAMP NOT NULL DEFAULT '2010-01-01 00:00:00',
  update_time TIMESTAMP NOT NULL DEFAULT '2010-01-01 00:00:00',
  PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8"""

def leaf_take(conn, tag, step):
    """One range as Leaf's SegmentIDGenImpl takes it with its dynamic step, on a pymysql
    connection without autocommit: UPDATE and SELECT in one transaction. Leaf issues
    [max_id - step, max_id): returned as (first, end) once the commit returned."""
    with conn.cursor() as cur:
        cur.execute("UPDATE leaf_alloc SET max_id = max_id + %s WHERE biz_tag = %s", (step, tag))
        cur.execute("SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = %s", (tag,))
        max_id = cur.fetchone()[1]
    conn.commit()
    return max_id - step, max_id


def tinyid_take(conn, tag):
    """One try as tinyid's DbSegmentIdServiceImpl makes it, on an autocommit connection: read the
    row, update it on the max_id and version read. tinyid issues (max_id, max_id + step]:
    returned as (first, end), or None when the row changed meanwhile (tinyid tries again)."""
    with conn.cursor() as cur:
        cur.execute("SELECT id, biz_type, begin_id, max_id, step, delta, remainder, create_time, "
                    "update_time, version FROM tiny_id_info WHERE biz_type = %s", (tag,))
        row = cur.fetchone()
        row_id, old, step, version = row[0], row[3], row[4], row[9]
        changed = cur.execute(
            "UPDATE tiny_id_info SET max_id = %s, update_time = now(), version = version + 1 "
            "WHERE id = %s AND max_id = %s AND version = %s AND biz_type = %s",
            (old + step, row_id, old, version, tag))
    return (old + 1, old + step + 1) if changed == 1 else None


class ReplyServer:
    """A TCP server on 127.0.0.1 (`port` 0: a free one) that answers every chunk it reads on a
    connection with `answer(chunk)` until the client closes: a stand-in for a peer that
    misbehaves. `address` is "127.0.0.1:port"; stop() closes the listener."""

    def __init__(self, answer, port=0):
        self.answer = answer
        self.listener = socket.create_server(("127.0.0.1", port))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(self.answer(data))
            except OSError:
                pass

    def stop(self):
        self.listener.close()


class ScriptedServer:
    """A throwaway server run by one of the scripts (scripts/mariadb.sh, scripts/redis.sh) in its
    own directory: `start`, `halt` (SIGTERM, or SIGKILL as a crash), `run` again on the same
    port and files, `stop` and remove. Tests also stop its process (SIGSTOP); it is always
    stopped through its pid file."""

    SCRIPT = None

    def __init__(self, path, **env):
        self.path = path
        self.script("start", **env)

    def script(self, action, check=True, **env):
        subprocess.run(["bash", self.SCRIPT, action, self.path], check=check, timeout=120,
                       env=dict(os.environ, **env))

    def pid(self):
        try:
            with open(os.path.join(self.path, "pid")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def signal(self, sig):
        """SIGSTOP or SIGCONT to the server."""
        signal_pids([self.pid()], sig)

    def stop_server(self, crash=False):
        self.script("halt", SIG="KILL" if crash else "TERM")

    def start_server(self):
        self.script("run")

    def stop(self):
        self.signal(signal.SIGCONT)
        self.script("stop", check=False)


class Mariadb(ScriptedServer):
    """A throwaway MariaDB on a free port with one database, `sekka`. `uri` is the database's;
    `sql()` runs statements as the peers' servers would."""

    name = "mariadb"
    SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                          "mariadb.sh")

    def __init__(self, path, database="sekka"):
        super().__init__(path)
        with open(os.path.join(path, "uri")) as f:
            self.base = f.read().strip()
        self.port = int(self.base.rsplit(":", 1)[1].strip("/"))
        self.database = database
        # utf8mb4, as Debian's MariaDB makes databases (a peer's table holds UTF-8 names)
        self.sql(f"CREATE DATABASE {database} CHARACTER SET utf8mb4", database=None)
        self.uri = self.base + database

    def connect(self, database="", autocommit=True):
        import pymysql  # Debian's python3-pymysql, as a peer's server would use a driver
        return pymysql.connect(host="127.0.0.1", port=self.port, user="sekka",
                               database=self.database if database == "" else database,
                               autocommit=autocommit)

    def sql(self, *statements, database=""):
        """Runs each statement on one connection; the rows of the last."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
                return cur.fetchall()
        finally:
            conn.close()


class RedisStore(ScriptedServer):
    """A throwaway redis-server on a free port, durable (appendonly yes, appendfsync always)
    unless persist=False, started with `env` added to its environment. `uri` is database 0's; `endpoints` is "127.0.0.1:PORT"."""

    name = "redis"
    SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                          "redis.sh")

    def __init__(self, path, persist=True, env=None):
        # env: more of the server's environment (faketime_env to step its wall clock).
        super().__init__(path, PERSIST="yes" if persist else "no", **(env or {}))
        with open(os.path.join(path, "uri")) as f:
            self.base = f.read().strip()
        self.port = int(self.base.rsplit(":", 1)[1])
        self.endpoints = f"127.0.0.1:{self.port}"
        self.uri = self.base + "/0"

    def client(self, db=0):
        import redis  # Debian's python3-redis
        return redis.Redis(host="127.0.0.1", port=self.port, db=db)


class PostgresTestCase(unittest.TestCase):
    """A test case with its own throwaway PostgreSQL (self.pg) and temp dirs (self.dirs)."""

    def setUp(self):
        self.dirs = TempDirs()
        self.pg = Postgres(self.dirs.path("pg"))

    def tearDown(self):
        self.pg.stop()
        self.dirs.cleanup()


def load_ids_into_postgres(pg, ids):
    """Table t (n bigint PRIMARY KEY, id bigint) with `ids` in order, loaded by psql's COPY."""
    psql = ["psql", pg.uri, "-q", "-v", "ON_ERROR_STOP=1", "-c"]
    subprocess.run(psql + ["CREATE TABLE t (n bigint PRIMARY KEY, id bigint)"], check=True,
                   capture_output=True)
    subprocess.run(psql + ["COPY t FROM STDIN"], check=True, capture_output=True, text=True,
                   input="".join(f"{n}\t{i}\n" for n, i in enumerate(ids)) + "\\.\n")


def _post_json(address, path, body, timeout=2):
    conn = http.client.HTTPConnection(*address.split(":"), timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read() or b"{}")
    finally:
        conn.close()


# etcd hashes each user's password with bcrypt, and checks it on every authenticate: at its
# default cost (10) one check took seconds on a busy 2-core machine, past the 2 s a call may take.
# Tests use the least cost etcd accepts (4); a product's etcd keeps its own (docs/operations.md).
TEST_BCRYPT = ["--bcrypt-cost", "4"]


class Etcd:
    """etcd members on loopback (Debian's etcd-server), each stopped and restarted by PID.

    With tls=True: certificates from scripts/test_certs.sh in base_dir/tls (the `certs`
    attribute names them), clients served over HTTPS and required to show a certificate of
    that CA; enable_auth() then adds the users root and sekka (role readwrite on sekka/)."""

    USER, PASSWORD = "sekka", "sekka-secret"

    def __init__(self, base_dir, members=1, tls=False):
        self.dir = base_dir
        os.makedirs(base_dir, exist_ok=True)
        self.tls = tls
        self.certs = None
        if tls:
            tls_dir = os.path.join(base_dir, "tls")
            subprocess.run([os.path.join(REPO, "scripts", "test_certs.sh"), tls_dir], check=True)
            self.certs = {name: os.path.join(tls_dir, name) for name in os.listdir(tls_dir)}
        self.scheme = "https" if tls else "http"
        # A port picked free can be taken by another test's process before a member binds it
        # (a member of the etcd transport campaign never came up, once, in a busy suite): then
        # the members start again on new ports, three times at most.
        for attempt in range(3):
            self.clients = [free_port() for _ in range(members)]
            self.peers = [free_port() for _ in range(members)]
            self.procs = [None] * members
            for i in range(members):
                self.start_member(i, wait=False)
            if wait_for(lambda: all(self.healthy(i) for i in range(members)) or
                        any(p.poll() is not None for p in self.procs), 60) and \
                    all(self.healthy(i) for i in range(members)):
                return
            logs = "".join(self.log_tail(i) for i in range(members))
            if attempt == 2 or "address already in use" not in logs:
                raise AssertionError(f"etcd members not ready within 60 s:\n{logs}")
            for i, p in enumerate(self.procs):
                if p.poll() is None:
                    p.kill()
                    p.wait()
                shutil.rmtree(os.path.join(self.dir, f"etcd-m{i}"), ignore_errors=True)

    def log_tail(self, i):
        try:
            with open(os.path.join(self.dir, f"etcd-m{i}.log"), errors="replace") as f:
                return f"--- etcd-m{i}.log\n" + "".join(f.readlines()[-10:])
        except OSError:
            return ""

    @property
    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.clients)

    def start_member(self, i, wait=True):
        cluster = ",".join(f"m{j}=http://127.0.0.1:{p}" for j, p in enumerate(self.peers))
        url = f"{self.scheme}://127.0.0.1:{self.clients[i]}"
        tls = []
        if self.tls:
            tls = ["--cert-file", self.certs["server.crt"], "--key-file", self.certs["server.key"],
                   "--trusted-ca-file", self.certs["ca.crt"], "--client-cert-auth",
                   "--auth-token", "simple"]
        log = open(os.path.join(self.dir, f"etcd-m{i}.log"), "ab")
        self.procs[i] = subprocess.Popen(
            ["etcd", "--name", f"m{i}", "--data-dir", os.path.join(self.dir, f"etcd-m{i}"),
             "--logger=zap", "--log-level=warn", *tls, *TEST_BCRYPT,
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", f"http://127.0.0.1:{self.peers[i]}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peers[i]}",
             "--initial-cluster", cluster, "--initial-cluster-state", "new"],
            stdout=log, stderr=log)
        log.close()
        _live.append(self.procs[i])
        if wait:
            _wait(lambda: self.healthy(i), 60, f"etcd member {i}")

    def _connection(self, port, timeout):
        if not self.tls:
            return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        context = ssl.create_default_context(cafile=self.certs["ca.crt"])
        context.load_cert_chain(self.certs["client.crt"], self.certs["client.key"])
        return http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context)

    def healthy(self, i):
        try:
            conn = self._connection(self.clients[i], 1)
            conn.request("GET", "/health")
            ok = b'"health":"true"' in conn.getresponse().read()
            conn.close()
            return ok
        except OSError:
            return False

    def etcdctl(self, *args, user=None):
        command = ["etcdctl", "--endpoints", ",".join(f"{self.scheme}://127.0.0.1:{p}"
                                                      for p in self.clients)]
        if self.tls:
            command += ["--cacert", self.certs["ca.crt"], "--cert", self.certs["client.crt"],
                        "--key", self.certs["client.key"]]
        if user:
            command += ["--user", user]
        return subprocess.run(command + list(args), check=True, capture_output=True, text=True,
                              timeout=30).stdout

    def enable_auth(self):
        for args in (["user", "add", "root:root-secret"], ["user", "grant-role", "root", "root"],
                     ["user", "add", f"{self.USER}:{self.PASSWORD}"], ["role", "add", "sekka"],
                     ["role", "grant-permission", "sekka", "--prefix=true", "readwrite", "sekka/"],
                     ["user", "grant-role", self.USER, "sekka"], ["auth", "enable"]):
            self.etcdctl(*args)

    def leader(self):
        """The index of the member that is leader now."""
        for i, port in enumerate(self.clients):
            if self.procs[i] is None or self.procs[i].poll() is not None:
                continue
            try:
                conn = self._connection(port, 2)
                try:
                    conn.request("POST", "/v3/maintenance/status", body="{}",
                                 headers={"Content-Type": "application/json"})
                    st = json.loads(conn.getresponse().read() or b"{}")
                finally:
                    conn.close()
            except (OSError, ValueError):
                continue
            if st.get("leader") and st.get("leader") == st.get("header", {}).get("member_id"):
                return i
        return None

    def stop_member(self, i, sig=signal.SIGKILL):
        p = self.procs[i]
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in _live:
            _live.remove(p)
        self.procs[i] = None

    def stop(self):
        for i in range(len(self.procs)):
            self.stop_member(i, signal.SIGTERM)


class ZooKeeper:
    """One ZooKeeper 3.8 server on loopback (Debian's zookeeper, run with java)."""

    CLASSPATH = ":".join(f"/usr/share/java/{j}.jar" for j in (
        "zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-all", "metrics-core",
        "snappy-java"))

    def __init__(self, base_dir):
        self.dir = base_dir
        self.port = free_port()
        os.makedirs(os.path.join(base_dir, "zk-data"), exist_ok=True)
        self.cfg = os.path.join(base_dir, "zoo.cfg")
        with open(self.cfg, "w") as f:
            f.write(f"tickTime=500\nminSessionTimeout=1000\ndataDir={base_dir}/zk-data\n"
                    f"clientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\n")
        self.proc = None
        self.start()

    @property
    def endpoints(self):
        return f"127.0.0.1:{self.port}"

    def _standalone(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"srvr")
                return b"Mode: standalone" in s.recv(4096)
        except OSError:
            return False

    def start(self):
        log = open(os.path.join(self.dir, "zk.log"), "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", self.CLASSPATH,
             "org.apache.zookeeper.server.ZooKeeperServerMain", self.cfg], stdout=log, stderr=log)
        log.close()
        _live.append(self.proc)
        # A deadline for liveness: the JVM starts it in about 2 s on a quiet machine.
        _wait(self._standalone, 60, "zookeeper")

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc in _live:
            _live.remove(self.proc)
        self.proc = None


def js_check_ids(uuids=(), ulids=()):
    """What the npm packages `uuid` and `ulid` (tests/js, installed by scripts/setup.sh) make of
    these ids: {"uuids": [{"valid": .., "version": ..}], "ulid_times": [ms, ..]}."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
    p = subprocess.run(["node", os.path.join(here, "check_ids.mjs")],
                       input=json.dumps({"uuids": list(uuids), "ulids": list(ulids)}),
                       capture_output=True, text=True, cwd=here, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"node check_ids.mjs failed: {p.stderr}")
    return json.loads(p.stdout)


def private_file(path, mode="w"):
    """Opens `path` for writing as a secret file is kept: made 0600 (sekka refuses a key or
    token file that other users can read)."""
    return open(path, mode, opener=lambda p, flags: os.open(p, flags, 0o600))
