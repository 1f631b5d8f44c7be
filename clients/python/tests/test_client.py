#!/usr/bin/python3
"""sekka_client against real `sekka serve` processes on 127.0.0.1 (tests/sekka_testlib.py starts
them): uniqueness across clients and servers, a server killed with kill -9 while clients draw,
all servers down and back, a wrong token, segment tags across a failover."""

import os
import signal
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # sekka_client
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))  # sekka_testlib
from sekka_client import AuthError, Client, NoServerError, SekkaError  # noqa: E402
from sekka_testlib import SEKKA, ReplyServer, Server, TempDirs, free_port  # noqa: E402

import subprocess  # noqa: E402

WORKER_BITS = 10  # the sekka layout: worker id at bits 12..21
SEQUENCE_BITS = 12


def worker_of(i):
    return (i >> SEQUENCE_BITS) & ((1 << WORKER_BITS) - 1)


class ClientTestCase(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        for s in self.servers:
            s.stop()
        self.dirs.cleanup()

    def start(self, name, worker_id, *flags, resp="127.0.0.1:0", **kw):
        s = Server(self.dirs.path(name), "--worker-source", "static", "--worker-id",
                   str(worker_id), *flags, resp=resp, **kw)
        self.servers.append(s)
        return s

    def client(self, servers, **kw):
        c = Client(servers=[s if isinstance(s, str) else s.resp for s in servers], **kw)
        self.clients.append(c)
        return c


class UniquenessTest(ClientTestCase):
    def test_eight_threads_two_clients_two_servers(self):
        a, b = self.start("a", 1), self.start("b", 2)
        clients = [self.client([a, b]), self.client([b, a])]
        per_thread = [[] for _ in range(8)]
        errors = []

        def draw(k):
            c = clients[k % 2]
            out = per_thread[k]
            try:
                for _ in range(100_000):
                    out.append(c.next_id())
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=draw, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        every = [i for ids in per_thread for i in ids]
        self.assertEqual(len(every), 800_000)
        self.assertEqual(len(set(every)), 800_000)
        for ids in per_thread:  # each thread's ids are in the order its client gave them
            self.assertTrue(all(x < y for x, y in zip(ids, ids[1:])))
        # Each client drew from its first server; the batch size grew from 1000.
        self.assertEqual({worker_of(i) for i in per_thread[0]}, {1})
        self.assertEqual({worker_of(i) for i in per_thread[1]}, {2})
        st = clients[0].stats()
        self.assertEqual(st["served"], 400_000)
        self.assertEqual(st["failovers"], 0)
        self.assertLess(st["refills"], 400)
        self.assertEqual(len(clients[0].next_ids(5)), 5)


class FailoverTest(ClientTestCase):
    def test_kill_9_while_drawing(self):
        a, b = self.start("a", 1), self.start("b", 2)
        validity = 1.0
        # Fixed batches that last ~2.5 s at ~400 ids/s: the dead server's ids would still be in
        # the buffer after the validity period if the client did not drop them.
        c = self.client([a, b], validity=validity, timeout=0.5, batch=1000, min_batch=1000,
                        max_batch=1000)
        got = []  # (monotonic time, id)
        errors = []
        stop = threading.Event()

        def draw():
            try:
                while not stop.is_set():
                    got.append((time.monotonic(), c.next_id()))
                    time.sleep(0.01)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=draw) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        killed_at = time.monotonic()
        a.stop(sig=signal.SIGKILL)
        time.sleep(validity + 1.5)
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        ids = [i for _, i in got]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertIn(1, {worker_of(i) for _, i in got if _ < killed_at})
        late = [i for t, i in got if t > killed_at + validity + 0.2]
        self.assertTrue(late)
        self.assertEqual({worker_of(i) for i in late}, {2})  # none of the dead server's
        self.assertGreaterEqual(c.stats()["failovers"], 1)

    def test_an_error_reply_moves_to_the_next_server(self):
        """A real server whose clock (libfaketime) steps back 5 s under on_clock_backwards =
        fail answers -CLOCKBACKWARDS: the client goes on with the other server and no error
        reaches the caller."""
        clock = self.dirs.path("clock")
        with open(clock, "w") as f:
            f.write("+0\n")
        a = self.start("a", 1, faketime_file=clock,
                       env={"SEKKA_GENERATOR_ON_CLOCK_BACKWARDS": "fail"})
        b = self.start("b", 2)
        c = self.client([a, b], batch=100, min_batch=100, max_batch=100)
        first = [c.next_id() for _ in range(300)]
        self.assertEqual({worker_of(i) for i in first}, {1})
        with open(clock + ".tmp", "w") as f:
            f.write("-5\n")
        os.replace(clock + ".tmp", clock)
        time.sleep(0.2)
        later = [c.next_id() for _ in range(1000)]
        self.assertEqual({worker_of(i) for i in later[-500:]}, {2})
        self.assertGreaterEqual(c.stats()["failovers"], 1)
        every = first + later
        self.assertEqual(len(every), len(set(every)))

    def test_all_down_then_back(self):
        port_a, port_b = free_port(), free_port()
        a = self.start("a", 1, resp=f"127.0.0.1:{port_a}")
        b = self.start("b", 2, resp=f"127.0.0.1:{port_b}")
        c = self.client([a, b], validity=60, batch=100, min_batch=100, max_batch=100,
                        backoff_max=0.5, timeout=0.5, connect_timeout=0.5)
        drawn = [c.next_id()]
        a.stop(sig=signal.SIGKILL)
        b.stop(sig=signal.SIGKILL)
        with self.assertRaises(NoServerError) as e:
            for _ in range(10_000):  # drains the buffer (at most two batches), then fails
                drawn.append(c.next_id())
        message = str(e.exception)
        self.assertIn(f"127.0.0.1:{port_a}", message)
        self.assertIn(f"127.0.0.1:{port_b}", message)
        self.assertLessEqual(len(drawn), 201)
        self.servers.remove(a)
        self.servers.remove(b)
        self.start("a", 1, resp=f"127.0.0.1:{port_a}")  # the same data dir, the same port
        deadline = time.monotonic() + 10
        while True:
            try:
                more = c.next_id()
                break
            except NoServerError:
                self.assertLess(time.monotonic(), deadline, "the client did not recover")
                time.sleep(0.1)
        self.assertNotIn(more, drawn)
        self.assertGreater(more, max(drawn))  # the restarted server waited out its hwm


class IdleConnectionTest(ClientTestCase):
    def test_a_connection_the_server_closed_while_idle_is_replaced(self):
        """Issue 23's finding 2: a connection the server closed (its idle timeout, a restart)
        failed the next refill and put a healthy server into backoff; with one server and
        nothing buffered, callers got "no sekka server could serve". A reused connection that
        fails before any byte of the reply is tried once more on a fresh one."""
        s = self.start("a", 6, env={"SEKKA_SERVER_IDLE_TIMEOUT": "1s"})
        # low_water 0.01: each batch of 20 is used up before the next refill, which then meets
        # the closed connection with nothing buffered.
        c = self.client([s], batch=20, min_batch=20, max_batch=20, low_water=0.01,
                        validity=60.0)
        for _ in range(3):
            for _ in range(20):
                self.assertEqual(worker_of(c.next_id()), 6)
            time.sleep(1.5)  # past the server's idle timeout: it closes the connection
        self.assertEqual(c._pool.servers[0].last_error, "",
                         "a closed idle connection counted as a server failure")


class AuthTest(ClientTestCase):
    def test_wrong_token_fails_at_the_first_call(self):
        a = self.start("a", 1, "--auth-token", "right-token-0123456")
        ok = self.client([a], token="right-token-0123456")
        self.assertGreater(ok.next_id(), 0)
        bad = self.client([a], token="wrong-token-0123456")
        t0 = time.monotonic()
        with self.assertRaises(AuthError) as e:
            bad.next_id()
        self.assertLess(time.monotonic() - t0, 2)
        self.assertIn("token", str(e.exception))
        with self.assertRaises(AuthError):
            self.client([a]).next_id()  # no token at all


class SegmentTagTest(ClientTestCase):
    def test_a_tags_ids_increase_across_a_failover(self):
        store = "sqlite:" + self.dirs.path("segments.db")
        subprocess.run([SEKKA, "segment", "create", "order", "--step", "50", "--segment-store",
                        store], check=True, capture_output=True)
        a = self.start("a", 1, "--segment-store", store)
        b = self.start("b", 2, "--segment-store", store)
        c = self.client([a, b], batch=20, min_batch=20, max_batch=20)
        # b buffers a range first, below the ones a hands out next.
        other = self.client([b], batch=20, min_batch=20, max_batch=20)
        self.assertGreater(other.next("order"), 0)
        ids = [c.next("order") for _ in range(300)]
        a.stop(sig=signal.SIGKILL)
        ids += [c.next("order") for _ in range(300)]
        self.assertTrue(all(x < y for x, y in zip(ids, ids[1:])), ids)
        with self.assertRaises(SekkaError) as e:
            c.next("no-such-tag")
        self.assertIn("no-such-tag", str(e.exception))


class StrictWaitTest(ClientTestCase):
    def test_strict_wait_bounds_a_call_that_waits_for_its_turn(self):
        """Review of issue 26: strict calls take turns on the client's strict connections, and
        strict_wait began only with a call's turn: 4 threads against a server answering
        -UNAVAILABLE gave up after 2, 4, 6 and 8 s with strict_wait=2. Each now gives up within
        strict_wait of its own start."""
        unavailable = ReplyServer(lambda data: b"-UNAVAILABLE no leader of the tag now\r\n")
        self.addCleanup(unavailable.stop)
        c = self.client([unavailable.address], strict_wait=1.0, backoff_min=0.05,
                        backoff_max=0.1)
        took = []

        def call():
            start = time.monotonic()
            with self.assertRaises(NoServerError):
                c.strict("t")
            took.append(time.monotonic() - start)
        threads = [threading.Thread(target=call) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        self.assertEqual(len(took), 4)
        self.assertLess(max(took), 1.8, f"calls gave up after {sorted(took)} s")


if __name__ == "__main__":
    unittest.main()
