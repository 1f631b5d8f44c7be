#!/usr/bin/python3
"""One conformance suite for every sekka client (docs/clients.md): the scenarios are written
once here and run against each client through its driver (PROTOCOL.md), with real `sekka serve`
processes and, where a scenario needs a server that misbehaves on cue, a scripted RESP server.

    conformance.py CLIENT [unittest args]     CLIENT: python, node, java, cpp or go

A client that misbehaves fails with the scenario's name (the test method). The drivers are
built here (Java, Go) or found through the environment (C++: CONFORMANCE_CPP_DRIVER).
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from sekka_testlib import (REPO, SEKKA, Etcd, Server, TempDirs, free_port,  # noqa: E402
                           wait_for)

CLIENTS_DIR = os.path.join(REPO, "clients")
SEQUENCE_BITS, WORKER_BITS = 12, 10  # the sekka layout: worker id at bits 12..21
REPLY_TIMEOUT = 30  # seconds a driver may take for one request before the scenario fails


def worker_of(i):
    return (i >> SEQUENCE_BITS) & ((1 << WORKER_BITS) - 1)


# The drivers.

def _build_java(out):
    src = os.path.join(CLIENTS_DIR, "java", "src")
    files = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(src, "main")) for f in fs
             if f.endswith(".java")]
    files.append(os.path.join(src, "test", "java", "io", "sekka", "client",
                              "ConformanceDriver.java"))
    subprocess.run(["javac", "--release", "17", "-Xlint:all", "-Werror", "-d", out, *files],
                   check=True)
    return ["java", "-cp", out, "io.sekka.client.ConformanceDriver"]


def _build_go(out):
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local")
    env.setdefault("GOCACHE", os.path.join(tempfile.gettempdir(), "sekka-go-cache"))
    binary = os.path.join(out, "driver")
    subprocess.run(["go", "build", "-o", binary, "./internal/conformancedriver"], check=True,
                   cwd=os.path.join(CLIENTS_DIR, "go"), env=env)
    return [binary]


def driver_command(client, build_dir):
    """The command that runs `client`'s driver, building it into `build_dir` first if needed."""
    if client == "python":
        return ["/usr/bin/python3", os.path.join(CLIENTS_DIR, "python", "tests",
                                                 "conformance_driver.py")]
    if client == "node":
        return ["node", os.path.join(CLIENTS_DIR, "node", "conformance-driver.mjs")]
    if client == "java":
        return _build_java(build_dir)
    if client == "go":
        return _build_go(build_dir)
    if client == "cpp":
        return [os.environ["CONFORMANCE_CPP_DRIVER"]]
    raise SystemExit(f"unknown client {client!r}: python, node, java, cpp or go")


class Driver:
    """One driver process holding one client."""

    def __init__(self, command):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.opened = False  # it holds a client

    def open(self, servers, options):
        """A new client in this driver (the one it held closed first): the reply."""
        if self.opened:
            self.request("close")
        reply = self.request("open", servers=servers, options=options)
        self.opened = "error" not in reply
        return reply

    def request(self, op, timeout=REPLY_TIMEOUT, **fields):
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"the driver gave no reply to {op} within {timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the driver exited ({self.proc.wait()}) during {op}")
        return json.loads(line)

    def exit(self, timeout=5):
        """Asks the driver to return from main; True if the process then ended in time."""
        self.request("exit")
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


# A scripted RESP server: answers AUTH, ID.REPLY and PING with +OK, every other command with
# what the scenario's `answer(args, count)` returns: bytes to send, a Drip, or HOLD (send nothing
# and keep the connection open). `count` numbers the commands of that name, from 1.

HOLD = object()


class Drip:
    """Sends `data` one byte every `interval` seconds."""

    def __init__(self, data, interval):
        self.data, self.interval = data, interval


def resp_array(ids):
    return f"*{len(ids)}\r\n".encode() + b"".join(f":{i}\r\n".encode() for i in ids)


def _read_command(f):
    """One RESP command (an array of bulk strings) from file `f`, or None at EOF."""
    line = f.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return line.decode().split()
    args = []
    for _ in range(int(line[1:])):
        size = int(f.readline()[1:])
        args.append(f.read(size + 2)[:-2].decode())
    return args


class ScriptedServer:
    def __init__(self, answer):
        self.answer = answer
        self.counts = {}
        self.open_connections = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.open_connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        f = conn.makefile("rb")
        try:
            while not self.stopped.is_set():
                args = _read_command(f)
                if args is None:
                    return
                name = args[0].upper() if args else ""
                if name in ("AUTH", "ID.REPLY", "PING"):
                    conn.sendall(b"+OK\r\n")
                    continue
                with self.lock:
                    self.counts[name] = self.counts.get(name, 0) + 1
                    count = self.counts[name]
                out = self.answer(args, count)
                if out is HOLD:
                    while not self.stopped.is_set() and conn.recv(1024):
                        pass
                    return
                if isinstance(out, Drip):
                    for i in range(len(out.data)):
                        if self.stopped.wait(out.interval):
                            return
                        conn.sendall(out.data[i:i + 1])
                    continue
                conn.sendall(out)
        except OSError:
            return
        finally:
            f.close()
            conn.close()
            with self.lock:
                self.open_connections -= 1

    def stop(self):
        self.stopped.set()
        self.listener.close()


# The scenarios.

class Scenarios(unittest.TestCase):
    client = None  # set by main
    command = None

    def setUp(self):
        self.dirs = TempDirs()
        self.servers, self.scripted, self.drivers = [], [], []

    def tearDown(self):
        for d in self.drivers:
            d.kill()
        for s in self.servers:
            s.stop(signal.SIGKILL)
        for s in self.scripted:
            s.stop()
        self.dirs.cleanup()

    # Helpers.

    def server(self, name, worker_id, *flags, resp="127.0.0.1:0", env=None):
        s = Server(self.dirs.path(name), "--worker-source", "static", "--worker-id",
                   str(worker_id), *flags, resp=resp, env=env)
        self.servers.append(s)
        return s

    def scripted_server(self, answer):
        s = ScriptedServer(answer)
        self.scripted.append(s)
        return s

    def driver(self):
        d = Driver(self.command)
        self.drivers.append(d)
        return d

    def open(self, servers, driver=None, **options):
        """A client of `servers` (Server, ScriptedServer or "host:port") in a new driver, or in
        `driver` (its client closed first: a driver starts slowly in some languages)."""
        d = driver or self.driver()
        names = [s if isinstance(s, str) else (s.resp if isinstance(s, Server) else s.address)
                 for s in servers]
        reply = d.open(",".join(names), options)
        self.assertNotIn("error", reply, f"open({options}) failed")
        return d

    def ids(self, d, n, op="ids", **fields):
        """`n` ids through `op`; fails the scenario on an error reply."""
        reply = d.request(op, n=n, **fields)
        self.assertNotIn("error", reply, f"{op} {n}")
        self.assertEqual(len(reply["ids"]), n)
        return [int(i) for i in reply["ids"]]

    def error(self, d, op, kind, **fields):
        """The error reply of `op`, which must be of `kind`."""
        reply = d.request(op, **fields)
        self.assertEqual(reply.get("error"), kind, f"{op} {fields}: {reply}")
        return reply

    # Drawing through servers.

    def test_draws_unique_ids_through_two_servers(self):
        a, b = self.server("a", 1), self.server("b", 2)
        d = self.open([a, b])
        got = self.ids(d, 3000) + self.ids(d, 500, op="batch")
        self.assertEqual(len(set(got)), len(got), "an id was handed out twice")
        self.assertEqual(got[:3000], sorted(got[:3000]), "ids from one server must increase")
        self.assertTrue(all(worker_of(i) in (1, 2) for i in got))
        stats = d.request("stats")["stats"]
        self.assertGreaterEqual(stats["served"], 3000)
        self.assertGreaterEqual(stats["refills"], 1)

    def test_kill_9_of_one_server_while_drawing(self):
        a, b = self.server("a", 1), self.server("b", 2)
        d = self.open([a, b], batch=100, min_batch=100, max_batch=100)
        got = self.ids(d, 150)
        a.stop(signal.SIGKILL)
        for _ in range(20):
            got += self.ids(d, 100)
        self.assertEqual(len(set(got)), len(got), "an id was handed out twice")
        self.assertEqual(worker_of(got[-1]), 2, "the ids after the kill come from the other")
        self.assertGreaterEqual(d.request("stats")["stats"]["failovers"], 1)

    def test_all_servers_down_then_back(self):
        ports = [free_port(), free_port()]
        a = self.server("a", 1, resp=f"127.0.0.1:{ports[0]}")
        b = self.server("b", 2, resp=f"127.0.0.1:{ports[1]}")
        d = self.open([a, b], batch=100, min_batch=100, max_batch=100, backoff_max_ms=500)
        got = self.ids(d, 10)
        a.stop(signal.SIGKILL)
        b.stop(signal.SIGKILL)
        reply = self.error(d, "ids", "no_server", n=300)
        got += [int(i) for i in reply["ids"]]
        for port in ports:  # the error names every server
            self.assertIn(f"127.0.0.1:{port}", reply["message"])
        self.server("a2", 1, resp=f"127.0.0.1:{ports[0]}")
        deadline = time.monotonic() + 15
        while True:
            reply = d.request("ids", n=10)
            got += [int(i) for i in reply["ids"]]
            if "error" not in reply or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertNotIn("error", reply, "no ids after a server came back")
        self.assertEqual(len(set(got)), len(got))

    def test_wrong_token(self):
        s = self.server("a", 1, "--auth-token", "right-token-0123456")
        self.error(self.open([s], token="wrong-token-0123456"), "ids", "auth", n=1)
        self.error(self.open([s]), "ids", "auth", n=1)
        self.assertEqual(len(self.ids(self.open([s], token="right-token-0123456"), 5)), 5)

    def test_tls_with_a_client_certificate(self):
        # A server on TLS that requires client certificates (server.tls_*), and a token.
        subprocess.run([os.path.join(REPO, "scripts", "test_certs.sh"), self.dirs.path("tls")],
                       check=True)
        cert = lambda name: self.dirs.path(os.path.join("tls", name))  # noqa: E731
        token = "right-token-0123456"
        s = self.server("a", 1, "--auth-token", token, "--tls-cert-file", cert("server.crt"),
                        "--tls-key-file", cert("server.key"), "--tls-client-ca-file", cert("ca.crt"))
        mine = dict(token=token, tls_ca_file=cert("ca.crt"), tls_cert_file=cert("client.crt"),
                    tls_key_file=cert("client.key"))
        got = self.ids(self.open([s], **mine), 500) + self.ids(self.open([s], **mine), 1)
        self.assertEqual(len(set(got)), len(got))
        # A server whose certificate the client's CA did not sign, a client without a
        # certificate, and one speaking plain text: no ids from it.
        quick = dict(connect_timeout_ms=500, timeout_ms=500, backoff_max_ms=500)
        for options in (dict(mine, tls_ca_file=cert("other-ca.crt")),
                        dict(token=token, tls_ca_file=cert("ca.crt")), dict(token=token)):
            self.error(self.open([s], **options, **quick), "ids", "no_server", n=1)
        # Options that cannot be used are refused when the client is made, an encrypted key
        # among them (never a passphrase prompt on the terminal).
        encrypted = self.dirs.path("encrypted.key")
        subprocess.run(["openssl", "pkey", "-in", cert("client.key"), "-out", encrypted,
                        "-aes256", "-passout", "pass:sekka-test"], check=True)
        d = self.driver()
        for options in (dict(tls_ca_file=cert("ca.crt"), tls_cert_file=cert("client.crt")),
                        dict(tls_ca_file=self.dirs.path("no-such-ca.pem")),
                        dict(tls_ca_file=cert("ca.crt"), tls_cert_file=cert("client.crt"),
                             tls_key_file=cert("server.key")),
                        dict(tls_ca_file=cert("ca.crt"), tls_cert_file=cert("client.crt"),
                             tls_key_file=encrypted)):
            reply = d.open(s.resp, options)
            self.assertEqual(reply.get("error"), "invalid_argument", f"{options}: {reply}")

    def test_ids_expire_after_validity(self):
        s = self.server("a", 1)
        d = self.open([s], batch=100, min_batch=100, max_batch=100, validity_ms=300)
        first = self.ids(d, 1)
        time.sleep(0.8)
        second = self.ids(d, 1)
        self.assertNotEqual(first, second)
        stats = d.request("stats")["stats"]
        self.assertGreaterEqual(stats["dropped"], 1, "expired ids must be dropped")
        self.assertGreaterEqual(stats["refills"], 2)

    def test_failover_replies_move_to_the_next_server(self):
        for prefix in ("LEASELOST", "CLOCKBACKWARDS", "UNAVAILABLE"):
            with self.subTest(prefix=prefix):
                bad = self.scripted_server(
                    lambda args, n, p=prefix: f"-{p} cannot issue now\r\n".encode())
                good = self.server(f"good-{prefix}", 2)
                d = self.open([bad, good])
                got = self.ids(d, 50)
                self.assertTrue(all(worker_of(i) == 2 for i in got))
                self.assertGreaterEqual(d.request("stats")["stats"]["failovers"], 1)

    def test_a_refused_request_is_not_retried(self):
        s = self.scripted_server(lambda args, n: b"-ERR tag \"x\" is not known\r\n")
        reply = self.error(self.open([s]), "tag", "refused", tag="x", n=1)
        self.assertIn("is not known", reply["message"])

    def test_tag_increases_across_a_failover(self):
        store = "sqlite:" + self.dirs.path("segments.db")
        subprocess.run([SEKKA, "segment", "create", "orders", "--step", "500", "--start", "1",
                        "--segment-store", store], check=True, capture_output=True)
        a = self.server("a", 1, "--segment-store", store)
        b = self.server("b", 2, "--segment-store", store)
        # b takes the first range, a a later one: after a dies, b's ids are below those given.
        self.ids(self.open([b]), 10, op="tag", tag="orders")
        d = self.open([a, b], batch=100, min_batch=100, max_batch=100)
        got = self.ids(d, 250, op="tag", tag="orders")
        a.stop(signal.SIGKILL)
        got += self.ids(d, 600, op="tag", tag="orders")
        self.assertEqual(got, sorted(set(got)), "a tag's ids must increase within a client")

    def test_ids_and_a_tag_interleaved_on_one_client(self):
        # Two buffers refill on their own schedules over one connection per server: every
        # reply must reach the request it answers (a snowflake id is never a tag's, nor the
        # other way round).
        store = "sqlite:" + self.dirs.path("segments.db")
        subprocess.run([SEKKA, "segment", "create", "orders", "--step", "100000", "--start", "1",
                        "--segment-store", store], check=True, capture_output=True)
        s = self.server("a", 1, "--segment-store", store)
        d = self.open([s], batch=100, min_batch=100, max_batch=100)
        ids, tags = [], []
        for _ in range(40):
            ids += self.ids(d, 70)
            tags += self.ids(d, 70, op="tag", tag="orders")
        self.assertEqual(tags, list(range(1, len(tags) + 1)), "a tag's ids: 1, 2, 3, ...")
        self.assertEqual(len(set(ids)), len(ids))
        self.assertTrue(all(worker_of(i) == 1 and i > 1 << 32 for i in ids), "a tag id as an id")

    # Connections.

    def test_connection_closed_by_the_server_is_replaced(self):
        s = self.server("a", 1, "--idle-timeout", "1s")
        d = self.open([s], batch=100, min_batch=100, max_batch=100)
        got = self.ids(d, 100)
        time.sleep(1.6)  # the server closes the idle connection
        got += self.ids(d, 150)
        self.assertEqual(len(set(got)), len(got))
        self.assertEqual(d.request("stats")["stats"]["failovers"], 0)

    def test_a_dripping_server_is_abandoned_at_the_command_deadline(self):
        # One byte every 0.3 s: a reply that would take 30 s. Each read gets a byte in time,
        # so only a deadline for the whole command moves on to the healthy server.
        drip = self.scripted_server(lambda args, n: Drip(resp_array(range(1, 20)), 0.3))
        good = self.server("good", 2)
        d = self.open([drip, good], timeout_ms=1000)
        reply = d.request("ids", n=10, timeout=10)
        self.assertNotIn("error", reply)
        self.assertTrue(all(worker_of(int(i)) == 2 for i in reply["ids"]))

    def test_learns_the_servers_max_batch(self):
        s = self.server("a", 1, "--max-batch", "1000")
        d = self.open([s], batch=5000, max_batch=100000)
        got = self.ids(d, 6000) + self.ids(d, 3000, op="batch")
        self.assertEqual(len(set(got)), len(got))

    def test_bad_replies_drop_the_connection(self):
        # An error inside an array, then a number that is not one: each must fail that call and
        # the connection with it, so that no later call reads a reply meant for another.
        def answer(args, n):
            if args[0].upper() == "SEG.NEXT":
                return resp_array(range(5_000_000 + 1000 * n, 5_000_000 + 1000 * n + 100))
            if n == 1:
                return b"*3\r\n:11\r\n-ERR boom\r\n:13\r\n"
            if n == 2:
                return b"*2\r\n:1x\r\n:2\r\n"
            return resp_array(range(1_000_000 + 1000 * n, 1_000_000 + 1000 * n + 100))
        s = self.scripted_server(answer)
        d = self.open([s], batch=100, min_batch=100, max_batch=100, backoff_min_ms=20)
        got = []
        for _ in range(50):
            reply = d.request("ids", n=150)
            got += [int(i) for i in reply["ids"]]
            self.assertIn(reply.get("error"), (None, "no_server"), reply)
            if "error" not in reply:
                break
            time.sleep(0.05)
        self.assertNotIn("error", reply)
        tags = self.ids(d, 150, op="tag", tag="t")
        self.assertTrue(all(1_000_000 < i < 5_000_000 for i in got), got)
        self.assertTrue(all(i > 5_000_000 for i in tags), tags)

    def test_a_batch_reply_must_be_n_distinct_ids(self):
        # A batch's reply is an array of exactly the n ids asked for, distinct, from 0 to 2^63 - 1
        # (a tag's also increasing; docs/contract.md); anything else is a broken server: the call
        # fails over to the healthy one, without a crash, a repeated or decreasing tag id, a
        # spin of requests, or memory for a huge header.
        broken = {
            "an integer": lambda n: b":5\r\n",
            "a simple string": lambda n: b"+OK\r\n",
            "a bulk string": lambda n: b"$1\r\n5\r\n",
            "a null array": lambda n: b"*-1\r\n",
            "an empty array": lambda n: b"*0\r\n",
            "one id too few": lambda n: resp_array(range(7_000_000, 7_000_000 + n - 1)),
            "50 ids too many": lambda n: resp_array(range(7_000_000, 7_000_000 + n + 50)),
            "a word among the ids": lambda n: b"*1\r\n$3\r\nabc\r\n",
            "a null among the ids": lambda n: b"*2\r\n$-1\r\n:7\r\n",
            "an array among the ids": lambda n: b"*1\r\n*1\r\n:5\r\n",
            "200,000 nested arrays": lambda n: b"*1\r\n" * 200_000,
            "a negative id": lambda n: resp_array([-5] + list(range(1, n))),
            "an id of 2^63": lambda n: resp_array(list(range(1, n)) + [1 << 63]),
            "an error among the ids": lambda n: b"*%d\r\n-ERR boom\r\n" % n + resp_array(
                range(7_000_000, 7_000_000 + n)),
            "a repeated id": lambda n: resp_array([7_000_000] * n),
            "a length that is no number": lambda n: b"*x\r\n:1\r\n",
            "a bulk length that is no number": lambda n: b"*1\r\n$x\r\n5\r\n",
            "a header of 10^9 elements": lambda n: b"*1000000000\r\n:1\r\n",
            "an id of 60 MB": lambda n: b"*%d\r\n$60000000\r\n" % n,
        }
        store = "sqlite:" + self.dirs.path("segments.db")
        subprocess.run([SEKKA, "segment", "create", "t", "--step", "1000", "--start", "1",
                        "--segment-store", store], check=True, capture_output=True)
        good = self.server("good", 2, "--segment-store", store)
        d = self.driver()
        for case, reply in broken.items():
            with self.subTest(case=case):
                bad = self.scripted_server(lambda args, n, f=reply: f(int(args[-1])))
                self.open([bad, good], driver=d, batch=100, min_batch=100, max_batch=100)
                got = self.ids(d, 150)
                self.assertTrue(all(worker_of(i) == 2 for i in got), f"ids from {case}: {got}")
                self.assertEqual(len(set(got)), len(got))
                self.assertLessEqual(bad.counts.get("ID.BATCH", 0), 3, "asked the broken one again")
        # A tag's batch must increase as well (a snowflake batch need not: see below).
        bad = self.scripted_server(lambda args, n: resp_array(range(7_000_000 + 100, 7_000_000, -1)))
        got = self.ids(self.open([bad, good], batch=100, min_batch=100, max_batch=100), 150,
                       op="tag", tag="t")
        self.assertEqual(got, list(range(1, 151)), "a decreasing tag batch was handed out")

    def test_a_descending_layout_is_served(self):
        # Snowflake ids of a descending (or sharded) layout do not increase within a batch.
        s = self.server("a", 1, "--layout", "sekka,descending=true")
        got = self.ids(self.open([s]), 2500)
        self.assertEqual(len(set(got)), len(got))
        self.assertGreater(got[0], got[1], "the layout descends")

    def test_close_ends_a_connect_in_progress(self):
        # A server whose accept queue is full: a connect to it hangs until connect_timeout.
        hole = socket.socket()
        self.addCleanup(hole.close)
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        fillers = []
        for _ in range(3):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(hole.getsockname())
            fillers.append(f)
            self.addCleanup(f.close)
        # The first server gives one batch, then turns the client away to the second.
        first = self.scripted_server(lambda args, n: resp_array(range(1, 101)) if n == 1
                                     else b"-UNAVAILABLE not now\r\n")
        d = self.open([first, "127.0.0.1:%d" % hole.getsockname()[1]], batch=100, min_batch=100,
                      max_batch=100, connect_timeout_ms=10000, timeout_ms=10000)
        self.ids(d, 60)  # below the low-water mark: the refill fails over, and connects
        self.assertTrue(wait_for(lambda: first.counts.get("ID.BATCH") == 2, 5), "no refill")
        time.sleep(0.3)
        self.assertLess(d.request("close")["ms"], 3000, "close() waited for the connect")
        self.assertTrue(d.exit(timeout=3), "the process did not end after close()")

    def test_close_stops_the_refill_and_the_process_can_exit(self):
        # The first batch comes at once; the next refill hangs until the client's 10 s timeout,
        # unless close() stops it.
        s = self.scripted_server(lambda args, n: resp_array(range(1, 101)) if n == 1 else HOLD)
        d = self.open([s], batch=100, min_batch=100, max_batch=100, timeout_ms=10000)
        self.ids(d, 60)  # below the low-water mark: the refill starts and hangs
        self.assertTrue(wait_for(lambda: s.counts.get("ID.BATCH") == 2, 5), "no second refill")
        self.assertLess(d.request("close")["ms"], 3000, "close() waited for the hung refill")
        self.assertTrue(wait_for(lambda: s.open_connections == 0, 3),
                        "a connection stayed open after close()")
        self.error(d, "ids", "closed", n=1)
        self.assertTrue(d.exit(timeout=3), "the process did not end after close()")

    # Strict ids (docs/contract.md section 15): one request a call, never buffered, tried
    # again through a leader failover for up to strict_wait.

    def counting_server(self, first=1):
        """A scripted server that answers STRICT.BATCH tag n with the next n ids from `first`."""
        state = {"next": first}

        def answer(args, count):
            if args[0].upper() != "STRICT.BATCH" or len(args) != 3:
                return b"-ERR unexpected command\r\n"
            n = int(args[2])
            ids = range(state["next"], state["next"] + n)
            state["next"] += n
            return resp_array(ids)
        return self.scripted_server(answer)

    def test_strict_calls_are_one_request_each(self):
        s = self.counting_server()
        d = self.open([s])
        self.assertEqual(self.ids(d, 5, op="strict", tag="ledger"), [1, 2, 3, 4, 5])
        self.assertEqual(s.counts.get("STRICT.BATCH"), 5, "a strict id came from a buffer")
        self.assertEqual(self.ids(d, 3, op="strict_batch", tag="ledger"), [6, 7, 8])
        self.assertEqual(s.counts.get("STRICT.BATCH"), 6)
        time.sleep(0.2)
        self.assertEqual(sorted(s.counts), ["STRICT.BATCH"], "the client prefetched")

    def test_strict_waits_out_a_leader_failover(self):
        # No leader for the first four attempts (the servers answer -UNAVAILABLE meanwhile).
        s = self.scripted_server(lambda args, n: b"-UNAVAILABLE no leader for tag t now\r\n"
                                 if n <= 4 else resp_array([100 + n]))
        d = self.open([s], backoff_min_ms=50, backoff_max_ms=100)
        self.assertEqual(self.ids(d, 1, op="strict", tag="t"), [105])
        # A dead server and an unavailable one: the call moves on to the one that answers.
        bad = self.scripted_server(lambda args, n: b"-UNAVAILABLE no leader\r\n")
        good = self.counting_server(first=50)
        d = self.open(["127.0.0.1:%d" % free_port(), bad, good], driver=d)
        self.assertEqual(self.ids(d, 2, op="strict", tag="t"), [50, 51])

    def test_strict_gives_up_after_strict_wait(self):
        bad = self.scripted_server(lambda args, n: b"-UNAVAILABLE no leader\r\n")
        d = self.open([bad], strict_wait_ms=600, backoff_min_ms=50, backoff_max_ms=100)
        reply = self.error(d, "strict", "no_server", tag="t", n=1)
        self.assertIn(bad.address, reply["message"])
        self.assertGreaterEqual(reply["ms"], 500, "gave up before strict_wait")
        self.assertLess(reply["ms"], 5000, "went on long after strict_wait")
        self.assertGreater(bad.counts["STRICT.BATCH"], 2, "did not try again")

    def test_strict_refusals_and_broken_batches(self):
        refuse = self.scripted_server(lambda args, n: b"-ERR count \"9\" is not valid\r\n")
        d = self.open([refuse])
        self.error(d, "strict_batch", "refused", tag="t", n=9)
        self.assertEqual(refuse.counts["STRICT.BATCH"], 1, "a refused request was retried")
        gap = self.scripted_server(lambda args, n: resp_array([10, 12]))
        self.error(self.open([gap], driver=d), "strict_batch", "refused", tag="t", n=2)
        for n in (0, -1):
            self.error(d, "strict_batch", "invalid_argument", tag="t", n=n)
        self.error(d, "strict", "invalid_argument", tag="", n=1)
        d.request("close")
        self.error(d, "strict", "closed", tag="t", n=1)

    def test_strict_ids_of_a_cluster_increase_through_a_leader_kill(self):
        etcd = Etcd(self.dirs.path("etcd"))
        self.addCleanup(etcd.stop)
        a, b = (Server(self.dirs.path(name), "--worker-source", "etcd", "--coordinator",
                       f"etcd://{etcd.endpoints}", "--lease-ttl", "3s", "--strict-tags", "chat")
                for name in "ab")
        self.servers += [a, b]
        d = self.open([a, b])
        got = self.ids(d, 20, op="strict", tag="chat")  # a leads
        got += self.ids(self.open([b]), 20, op="strict", tag="chat")  # b forwards to a
        got += self.ids(d, 30, op="strict_batch", tag="chat")
        a.stop(signal.SIGKILL)
        got += self.ids(d, 20, op="strict", tag="chat")  # b leads, after the TTL
        self.assertEqual(got, sorted(set(got)), "strict ids did not increase call after call")

    # Options.

    def test_options_are_validated(self):
        s = "127.0.0.1:6380"
        bad = [("validity_ms", 0), ("validity_ms", -1), ("timeout_ms", 0), ("timeout_ms", -5),
               ("connect_timeout_ms", 0), ("batch", 0), ("low_water", 0), ("low_water", 1),
               ("target_refill_ms", 0), ("backoff_min_ms", 0), ("backoff_min_ms", -1),
               ("batch", 150.5), ("timeout_ms", 2_000_000_000),
               ("connect_timeout_ms", 2_000_000_000), ("validity_ms", 10_000_000_000),
               ("target_refill_ms", 10_000_000_000), ("backoff_min_ms", 10_000_000_000),
               ("strict_wait_ms", 0), ("strict_wait_ms", -1), ("strict_wait_ms", 10_000_000_000)]
        d = self.driver()  # one for every case: each open closes the client before
        for key, value in bad:
            reply = d.open(s, {key: value})
            self.assertEqual(reply.get("error"), "invalid_argument", f"{key}={value}: {reply}")
        orders = [{"batch": 50, "min_batch": 100}, {"batch": 5000, "max_batch": 1000},
                  {"backoff_min_ms": 500, "backoff_max_ms": 100}]
        for options in orders:
            reply = d.open(s, options)
            self.assertEqual(reply.get("error"), "invalid_argument", f"{options}: {reply}")
        for servers in ("", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:63x"):
            reply = d.open(servers, {})
            self.assertEqual(reply.get("error"), "invalid_argument", f"{servers!r}: {reply}")
        for servers in ("127.0.0.1:6380", "[::1]:6380", "127.0.0.1:6380,[::1]:6381"):
            reply = d.open(servers, {})
            self.assertNotIn("error", reply, f"{servers!r}")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    Scenarios.client = sys.argv.pop(1)
    build_dir = tempfile.mkdtemp(prefix=f"sekka-conformance-{Scenarios.client}-")
    try:
        Scenarios.command = driver_command(Scenarios.client, build_dir)
        unittest.main(verbosity=2)
    finally:
        subprocess.run(["rm", "-rf", build_dir])


if __name__ == "__main__":
    main()
