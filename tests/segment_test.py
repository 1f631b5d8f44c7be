#!/usr/bin/python3
"""End-to-end tests of segments: the real `sekka serve` with its SQLite store and with a real
PostgreSQL and MariaDB (started here with scripts/pg.sh and scripts/mariadb.sh), through
redis-cli, python3-redis and http.client: uniqueness across servers, kill -9 crash safety, a
database outage and a hung database under load, and Leaf's and tinyid's own servers drawing from
the tables that sekka serves."""

import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

import redis

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import (LEAF_TABLE, REPO, SEKKA, TINYID_TABLE, TINYID_TOKEN_TABLE,  # noqa: E402
                           Mariadb, Postgres, RedisStore, Server, TempDirs, leaf_take,
                           tinyid_take, wait_for)

def sekka(*args):
    return subprocess.run([SEKKA, *args], capture_output=True, text=True, timeout=60)


def redis_cli_raw(server, *args):
    p = subprocess.run(["redis-cli", "-p", str(server.resp_port), *args], capture_output=True,
                       text=True, timeout=30)
    return p.stdout


def redis_cli_tags(server):
    """The tags SEG.TAGS lists, through redis-cli."""
    p = subprocess.run(["redis-cli", "-p", str(server.resp_port), "SEG.TAGS"], capture_output=True,
                       text=True, timeout=30)
    return ",".join(t["tag"] for t in json.loads(p.stdout)["tags"])


class SegmentTestCase(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.db = None

    def tearDown(self):
        for s in self.servers:
            s.stop(signal.SIGKILL if s.proc.poll() is None else signal.SIGTERM)
        if self.db:
            self.db.stop()
        self.dirs.cleanup()

    def start(self, name, *flags):
        s = Server(self.dirs.path(name), *flags)
        self.servers.append(s)
        return s

    def create(self, tag, *args):
        p = sekka("segment", "create", tag, *args)
        self.assertEqual(p.returncode, 0, p.stderr)

    def recovered(self, r, tag):
        """The next id of `tag` once the server serves it again (within 30 s)."""
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                return r.incr(tag)
            except redis.exceptions.ResponseError:
                time.sleep(0.2)
        self.fail(f"the server did not serve {tag} again by itself")

    def kill_and_restart(self, start, tag, show):
        s = start()
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        first = []
        for _ in range(30):
            first += r.execute_command("SEG.NEXT", tag, 100)
        s.proc.kill()  # kill -9 under load: nothing is flushed
        s.proc.wait()
        self.servers.remove(s)
        s.stop()
        allocated = int(show().stdout.split("next_id=")[1].split()[0])
        s2 = start()
        r2 = redis.Redis(host="127.0.0.1", port=s2.resp_port)
        second = []
        for _ in range(30):
            second += r2.execute_command("SEG.NEXT", tag, 100)
        self.assertEqual(len(set(first) | set(second)), len(first) + len(second))
        self.assertGreater(min(second), max(first))
        gap = min(second) - max(first) - 1
        self.assertLessEqual(gap, allocated - max(first) - 1, "gap beyond what was buffered")

    def administer_tags(self, *store):
        """Tag administration on one store, by two servers and the CLI: a step set over HTTP or
        by the CLI reaches every server, a deleted tag is gone everywhere once the ids servers
        held are issued, and it comes back only above every id it issued."""
        token = "tok-0123456789abcdef"
        auth = {"Authorization": "Bearer " + token}
        p = sekka("segment", "create", "adm", "--step", "100", *store)
        self.assertEqual(p.returncode, 0, p.stderr)
        a = self.start("a", *store, "--auth-token", token)
        b = self.start("b", *store, "--auth-token", token)
        ra = redis.Redis(host="127.0.0.1", port=a.resp_port, password=token)
        rb = redis.Redis(host="127.0.0.1", port=b.resp_port, password=token)
        ids = ra.execute_command("SEG.NEXT", "adm", 3)
        self.assertEqual(ids, [1, 2, 3])
        status, body = a.get_json("/v1/tags/adm", auth)
        self.assertEqual(status, 200, body)
        [row] = body["tags"]
        self.assertEqual((row["next_id"], row["step"]), ("101", 100))
        self.assertEqual(row["served"]["ranges"], [{"begin": "4", "end": "101"}])
        self.assertIsNone(b.get_json("/v1/tags/adm", auth)[1]["tags"][0]["served"])
        # A step set through server a: b, serving the tag only now, starts with it.
        status, body = a.request_json("PATCH", "/v1/tags/adm?step=1000", auth)
        self.assertEqual((status, body["step"], body["served"]["step"]), (200, 1000, 1000))
        ids += rb.execute_command("SEG.NEXT", "adm", 1)
        self.assertEqual(b.get_json("/v1/tags/adm", auth)[1]["tags"][0]["served"]["step"], 1000)
        # Issue 42: one rule for a tag's step, whoever sets it (PATCH was capped by
        # segment.max_step, 10^7, while the CLI took 10^9).
        for setter in (lambda n: a.request_json("PATCH", "/v1/tags/adm?step=%d" % n, auth)[0],
                       lambda n: sekka("segment", "step", "adm", str(n), *store).returncode):
            self.assertIn(setter(10 ** 9), (0, 200))
            self.assertIn(setter(10 ** 9 + 1), (2, 400))
        self.assertEqual(a.request_json("PATCH", "/v1/tags/adm?step=1000", auth)[0], 200)
        # A step set by the CLI: a takes it with its next range.
        p = sekka("segment", "step", "adm", "50", *store)
        self.assertEqual((p.returncode, p.stdout.split()[-1]), (0, "step=50"), p.stderr)
        ids += ra.execute_command("SEG.NEXT", "adm", 97)  # a's first range, and one more
        deadline = time.time() + 10
        while a.get_json("/v1/tags/adm", auth)[1]["tags"][0]["served"]["step"] != 50:
            self.assertLess(time.time(), deadline, "server a never took the step the CLI set")
            time.sleep(0.1)
        # RESP reads and changes tags too.
        self.assertEqual(json.loads(ra.execute_command("SEG.STEP", "adm", "60"))["step"], 60)
        self.assertEqual(json.loads(rb.execute_command("SEG.TAGS"))["tags"][0]["tag"], "adm")
        # Deleted: a and b issue what they hold, then the tag is not found.
        status, was = a.request_json("DELETE", "/v1/tags/adm", auth)
        self.assertEqual(status, 200, was)
        self.assertEqual(a.get_json("/v1/tags/adm", auth)[0], 404)
        self.assertEqual(a.get_json("/v1/tags", auth)[1], {"tags": [], "next_after": None})
        for r in (ra, rb):
            with self.assertRaises(redis.exceptions.ResponseError) as gone:
                for _ in range(100):
                    ids += r.execute_command("SEG.NEXT", "adm", 100)
            self.assertIn('tag "adm" is not found', str(gone.exception))
        self.assertEqual(len(ids), len(set(ids)))
        # Back only at or above its tombstone.
        p = sekka("segment", "create", "adm", "--start", "2", *store)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"deleted at next id {was['next_id']}", p.stderr)
        self.assertGreater(int(was["next_id"]), max(ids))
        p = sekka("segment", "create", "adm", "--start", was["next_id"], *store)
        self.assertEqual(p.returncode, 0, p.stderr)
        # a's last fetch failed (not found): it tries again after its backoff, at most 5 s (b
        # too, so which of them has the first range is open).
        self.assertGreaterEqual(self.recovered(ra, "adm"), int(was["next_id"]))
        status, body = a.request_json("DELETE", "/v1/tags/nope", auth)
        self.assertEqual((status, body["error"]["code"]), (404, "not_found"))


class SqliteSegmentTest(SegmentTestCase):
    def test_tag_administration(self):
        self.administer_tags("--segment-store", "sqlite:" + self.dirs.path("segments.db"))

    def test_leafs_monitor_pages_show_the_buffers_and_the_rows(self):
        """Leaf's /cache and /db, which Leaf operators look at: HTML tables in Leaf's columns,
        behind the token."""
        token = "tok-0123456789abcdef"
        auth = {"Authorization": "Bearer " + token}
        store = ("--segment-store", "sqlite:" + self.dirs.path("segments.db"))
        self.create("orders", "--step", "100", *store)
        self.create("users", "--start", "500", "--step", "10", *store)
        s = self.start("a", *store, "--auth-token", token)
        r = redis.Redis(host="127.0.0.1", port=s.resp_port, password=token)
        self.assertEqual(r.execute_command("SEG.NEXT", "orders", 3), [1, 2, 3])

        def table(path):
            status, headers, body = s.get(path, auth)
            self.assertEqual(status, 200, body)
            self.assertIn("text/html", headers.get("Content-Type", ""))
            head = re.findall(r"<th>([^<]*)</th>", body)
            rows = [re.findall(r"<td>([^<]*)</td>", row)
                    for row in re.findall(r"<tr>(.*?)</tr>", body) if "<td>" in row]
            return head, rows

        head, rows = table("/cache")
        self.assertEqual(head, "name init next pos value0 max0 step0 value1 max1 step1".split())
        self.assertEqual(rows[0][:2] + rows[0][3:7], ["orders", "true", "0", "4", "101", "100"])
        self.assertEqual(len(rows), 1, "only the tags this server serves")
        head, rows = table("/db")
        self.assertEqual(head, ["tag", "max", "step", "update"])
        self.assertEqual(rows, [["orders", "101", "100", "-"], ["users", "500", "10", "-"]])
        self.assertEqual(s.get("/db")[0], 401)
        self.assertEqual(s.get("/cache")[0], 401)

    def test_tags_are_listed_a_page_at_a_time(self):
        """Review of issue 25: GET /v1/tags sent every row at once (166 MB and 685 MB of RSS for a
        million tags). It sends pages of 1,000, and the CLI lists page by page."""
        db = self.dirs.path("many.db")
        self.create("t0000", "--segment-store", "sqlite:" + db)  # makes the table
        import sqlite3
        with sqlite3.connect(db) as c:
            c.executemany("INSERT INTO sekka_segments (tag, next_id, step) VALUES (?, 1, 10)",
                          [(f"t{i:04d}",) for i in range(1, 2500)])
        s = self.start("data", "--segment-store", "sqlite:" + db)
        seen, after = [], None
        while True:
            status, body = s.get_json("/v1/tags" + (f"?after={after}" if after else ""))
            self.assertEqual(status, 200)
            self.assertLessEqual(len(body["tags"]), 1000)
            seen += [t["tag"] for t in body["tags"]]
            after = body["next_after"]
            if after is None:
                break
        self.assertEqual(seen, [f"t{i:04d}" for i in range(2500)])
        self.assertEqual(json.loads(redis_cli_raw(s, "SEG.TAGS", "AFTER", "t2497"))["tags"][0]["tag"],
                         "t2498")
        p = sekka("segment", "list", "--segment-store", "sqlite:" + db)
        self.assertEqual(len(p.stdout.splitlines()), 2500)

    def test_tag_changes_need_a_token(self):
        """With no auth_token anyone who reaches the port could delete every tag: changes are
        refused (the CLI, on the store itself, still works)."""
        self.create("open", "--data-dir", self.dirs.path("data"))
        s = self.start("data")
        for method, path in (("PATCH", "/v1/tags/open?step=5"), ("DELETE", "/v1/tags/open")):
            status, body = s.request_json(method, path)
            self.assertEqual(status, 401, body)
            self.assertIn("refused on a server without auth_token", body["error"]["message"])
        self.assertEqual(s.get_json("/v1/tags/open")[0], 200)
        self.assertEqual(redis_cli_tags(s), "open")

    def test_every_interface_gives_increasing_ids_of_a_tag(self):
        data = self.dirs.path("data")
        self.create("orders", "--start", "1000", "--step", "100", "--data-dir", data)
        s = self.start("data")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        ids = [r.incr("orders"), r.execute_command("SEG.NEXT", "orders")]
        ids += r.execute_command("SEG.NEXT", "orders", 5)
        ids.append(int(s.get_json("/v1/segment/orders")[1]["id"]))
        ids += [int(i) for i in s.get_json("/v1/segment/orders?count=3")[1]["ids"]]
        ids.append(int(s.get("/api/segment/get/orders")[2]))
        self.assertEqual(ids, list(range(1000, 1000 + len(ids))))
        status, body = s.get_json("/v1/segment/unknown")
        self.assertEqual((status, body["error"]["code"]), (404, "not_found"))
        with self.assertRaises(redis.exceptions.ResponseError):
            r.execute_command("SEG.NEXT", "unknown")
        self.assertEqual(s.get_json("/v1/segment/bad%09tag")[0], 400)
        _, _, metrics = s.get("/metrics")
        self.assertIn('sekka_segment_remaining{tag="orders"}', metrics)

    def test_auto_create_is_off_by_default_and_can_be_turned_on(self):
        s = self.start("data", "--segment-auto-create", "true")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        self.assertEqual([r.incr("fresh") for _ in range(3)], [1, 2, 3])

    def test_a_full_last_page_of_tags_says_it_is_the_last(self):
        """Issue 42: with exactly 1,000 tags (one page), next_after named the last one and the
        page after it was empty; the contract says null on the last page."""
        s = self.start("data", "--segment-auto-create", "true")
        with socket.create_connection(("127.0.0.1", s.resp_port), timeout=30) as c:
            c.sendall(b"".join(b"SEG.CREATE t%04d 1 10\r\n" % i for i in range(1000)))
            data = b""
            while data.count(b"\r\n") < 1000:
                data += c.recv(65536)
        self.assertEqual(data.count(b"+created"), 1000)
        status, body = s.get_json("/v1/tags")
        self.assertEqual((status, len(body["tags"]), body["next_after"]), (200, 1000, None))
        s2 = redis.Redis(host="127.0.0.1", port=s.resp_port)
        s2.execute_command("SEG.CREATE", "t1000", 1, 10)
        status, body = s.get_json("/v1/tags")
        self.assertEqual((len(body["tags"]), body["next_after"]), (1000, "t0999"))
        status, body = s.get_json("/v1/tags?after=t0999")
        self.assertEqual(([t["tag"] for t in body["tags"]], body["next_after"]), (["t1000"], None))

    def test_auto_create_is_bounded_by_max_tags(self):
        s = Server(self.dirs.path("bounded"), "--segment-auto-create", "true",
                   env={"SEKKA_SEGMENT_MAX_TAGS": "3"})
        self.servers.append(s)
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        for tag in ["t1", "t2", "t3"]:
            self.assertEqual(r.incr(tag), 1)
        with self.assertRaises(redis.exceptions.ResponseError) as e:
            r.incr("t4")
        self.assertTrue(str(e.exception).startswith("UNAVAILABLE"), str(e.exception))
        self.assertIn("segment.max_tags", str(e.exception))
        listed = sekka("segment", "list", "--data-dir", self.dirs.path("bounded")).stdout
        self.assertNotIn("t4", listed, "a tag past the bound must not be created in the store")
        self.assertEqual(r.incr("t1"), 2)
        # Issue 42: SEG.CREATE counted apart from the tags made on first use, so it made three
        # more rows. One bound for every tag a client creates.
        with self.assertRaises(redis.exceptions.ResponseError) as e:
            r.execute_command("SEG.CREATE", "t5", 1, 10)
        self.assertIn("segment.max_tags", str(e.exception))
        listed = sekka("segment", "list", "--data-dir", self.dirs.path("bounded")).stdout
        self.assertNotIn("t5", listed)
        # Second review of issue 42: a tag that does not exist answered 503 at the bound (a
        # client retries that); it is 404, as below it.
        self.assertEqual(s.get_json("/v1/segment/nope")[0], 404)

    def test_an_exhausted_tag_under_concurrent_clients_is_unavailable_and_the_server_lives(self):
        """The safety review's crash: a tag whose first range cannot be allocated (here: it
        would pass 2^63) while 8 clients wait on it. The server used to free the tag under them
        (SIGSEGV after 17 requests)."""
        data = self.dirs.path("s")
        self.create("full", "--start", "9223372036854775000", "--step", "1000", "--data-dir", data)
        self.create("fine", "--data-dir", data)
        s = self.start("s")

        def client(_):
            r = redis.Redis(host="127.0.0.1", port=s.resp_port)
            errors = []
            for _ in range(20):
                try:
                    r.execute_command("SEG.NEXT", "full")
                    errors.append("no error")
                except redis.exceptions.ResponseError as e:
                    errors.append(str(e))
            return errors

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            errors = [e for batch in pool.map(client, range(8)) for e in batch]
        self.assertEqual(len(errors), 160)
        for e in errors:
            self.assertTrue(e.startswith("UNAVAILABLE"), e)
        self.assertIsNone(s.proc.poll(), "the server died")
        status, body = s.get_json("/v1/segment/full")
        self.assertEqual(status, 503)
        self.assertEqual(body["error"]["code"], "unavailable")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        self.assertGreater(r.execute_command("SEG.NEXT", "fine"), 0)

    def test_a_tag_created_by_the_cli_is_served_at_once(self):
        """Issue 24, finding 9: a tag asked for before `segment create` stayed "not found" for
        up to 5 s (the unknown-tag cache), so docs/protocol.md's "create, then INCR" failed."""
        s = self.start("data")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        with self.assertRaises(redis.exceptions.ResponseError):
            r.execute_command("INCR", "invoices")
        self.create("invoices", "--data-dir", self.dirs.path("data"))
        self.assertEqual(r.execute_command("INCR", "invoices"), 1)

    def test_cli_manages_tags(self):
        data = self.dirs.path("cli")
        self.create("a", "--data-dir", data)
        p = sekka("segment", "create", "a", "--data-dir", data)
        self.assertEqual(p.returncode, 2)
        self.assertIn('tag "a" already exists', p.stderr)
        p = sekka("segment", "show", "nope", "--data-dir", data)
        self.assertEqual(p.returncode, 2)
        self.assertIn('tag "nope" is not found', p.stderr)
        p = sekka("segment", "list", "--data-dir", data)
        self.assertEqual(p.stdout.strip(), "a next_id=1 step=1000")
        p = sekka("segment", "list", "--segment-store", "mongodb://x")
        self.assertEqual(p.returncode, 2)
        self.assertIn("allowed", p.stderr)

    def test_kill_9_under_load_never_repeats_an_id_and_the_gap_is_what_was_buffered(self):
        data = self.dirs.path("data")
        self.create("orders", "--step", "500", "--data-dir", data)
        self.kill_and_restart(lambda: self.start("data", "--segment-max-step", "1000"), "orders",
                              lambda: sekka("segment", "show", "orders", "--data-dir", data))


class SharedStoreTests:
    """The cases of a store that many servers share (self.db: Postgres or Mariadb, with `uri`,
    stop_server(), start_server() and signal())."""

    def start_db(self, name, *flags):
        return self.start(name, "--segment-store", self.db.uri, *flags)

    def test_tag_administration(self):
        self.administer_tags("--segment-store", self.db.uri)

    def test_two_servers_sharing_the_store_give_200000_distinct_ids(self):
        self.create("shared", "--step", "1000", "--segment-store", self.db.uri)
        a = self.start_db("a")
        b = self.start_db("b")

        def take(server, n):
            r = redis.Redis(host="127.0.0.1", port=server.resp_port)
            ids = []
            while len(ids) < n:
                ids += r.execute_command("SEG.NEXT", "shared", 1000)
            self.assertEqual(ids, sorted(ids))
            return ids

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            parts = list(pool.map(lambda x: take(*x), [(a, 50_000), (b, 50_000), (a, 50_000),
                                                       (b, 50_000)]))
        ids = [i for p in parts for i in p]
        self.assertEqual(len(ids), 200_000)
        self.assertEqual(len(set(ids)), 200_000)

    def test_kill_9_never_repeats_an_id(self):
        self.create("orders", "--step", "500", "--segment-store", self.db.uri)
        self.kill_and_restart(
            lambda: self.start_db("data", "--segment-max-step", "1000"), "orders",
            lambda: sekka("segment", "show", "orders", "--segment-store", self.db.uri))

    def test_a_database_outage_is_served_from_the_buffer_then_unavailable_then_recovers(self):
        self.create("orders", "--step", "200", "--segment-store", self.db.uri)
        s = self.start_db("data", "--segment-max-step", "200")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        ids = [r.incr("orders") for _ in range(50)]  # past 10%: the next range is fetched
        time.sleep(0.3)
        self.db.stop_server()
        served, failed = [], None
        for _ in range(1000):
            try:
                served.append(r.incr("orders"))
            except redis.exceptions.ResponseError as e:
                failed = str(e)
                break
        self.assertGreater(len(served), 300, "both buffered ranges should outlive the outage")
        self.assertIsNotNone(failed, "without the database the buffer must run out")
        self.assertTrue(failed.startswith("UNAVAILABLE"), failed)
        status, body = s.get_json("/v1/segment/orders")
        self.assertEqual((status, body["error"]["code"]), (503, "unavailable"))
        self.db.start_server()
        recovered = self.recovered(r, "orders")
        everything = ids + served + [recovered]
        self.assertEqual(everything, sorted(set(everything)))

    def test_a_hung_database_makes_calls_fail_in_bounded_time_and_the_server_recovers(self):
        """The safety review's stall: with PostgreSQL stopped (SIGSTOP: its kernel still accepts
        and acknowledges), store calls had no timeout and hung the server's event loop."""
        self.create("loaded", "--step", "10", "--segment-store", self.db.uri)
        self.create("cold", "--step", "10", "--segment-store", self.db.uri)
        s = self.start_db("data", "--threads", "1", "--segment-max-step", "10")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port, socket_timeout=30)
        first = [r.incr("loaded") for _ in range(5)]
        self.db.signal(signal.SIGSTOP)
        try:
            # A request for a tag not loaded yet waits on the store, but not on the event loop:
            # the one loop keeps answering other clients meanwhile.
            waiting = concurrent.futures.ThreadPoolExecutor(1)
            cold = waiting.submit(lambda: redis.Redis(host="127.0.0.1", port=s.resp_port,
                                                      socket_timeout=30).incr("cold"))
            time.sleep(0.3)
            self.assertFalse(cold.done(), "the cold tag should wait for the stopped store")
            quick = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=2)
            for path in ["/healthz", "/v1/id"]:
                quick.request("GET", path)
                self.assertEqual(quick.getresponse().read() != b"", True)
            quick.close()
            with self.assertRaises(redis.exceptions.ResponseError):
                cold.result(timeout=30)
            waiting.shutdown()
            served, errors = [], []
            t0 = time.monotonic()
            for tag in ["loaded"] * 20 + ["cold"]:
                try:
                    served.append(r.incr(tag))
                except redis.exceptions.ResponseError as e:
                    errors.append(str(e))
            took = time.monotonic() - t0
            self.assertLess(took, 25, "store calls are not bounded")
            self.assertTrue(errors, "nothing failed with the database stopped")
            for e in errors:
                self.assertTrue(e.startswith("UNAVAILABLE"), e)
            self.assertEqual(s.get("/healthz")[0], 200)
            self.assertEqual(s.get("/v1/id")[0], 200)
        finally:
            self.db.signal(signal.SIGCONT)
        recovered = self.recovered(r, "cold")
        self.assertGreaterEqual(recovered, 1, "the cold tag serves once the database is back")
        later = r.incr("loaded")
        everything = first + served + [later]
        self.assertEqual(everything, sorted(set(everything)))


class PostgresSegmentTest(SharedStoreTests, SegmentTestCase):
    def setUp(self):
        super().setUp()
        self.db = Postgres(self.dirs.path("pg"))

    def test_tls_settings_pass_through_the_uri(self):
        """PostgreSQL with ssl on, its certificate from a CA made by openssl: sslmode=verify-full
        with that CA gives ids over TLS; with another CA, a one-line error naming the cause."""
        certs = self.dirs.path("certs")
        subprocess.run([os.path.join(REPO, "scripts", "test_certs.sh"), certs], check=True)
        data = os.path.join(self.db.path, "data")
        for name in ("server.crt", "server.key"):
            shutil.copy(os.path.join(certs, name), os.path.join(data, name))
            if os.getuid() == 0:
                shutil.chown(os.path.join(data, name), "postgres")
            os.chmod(os.path.join(data, name), 0o600)
        subprocess.run(["psql", self.db.uri, "-q", "-c", "ALTER SYSTEM SET ssl = on", "-c",
                        "SELECT pg_reload_conf()"], check=True, capture_output=True, timeout=30)
        tls_uri = f"{self.db.uri}?sslmode=verify-full&sslrootcert={certs}/ca.crt"
        self.create("secure", "--segment-store", tls_uri)
        s = self.start("tls", "--segment-store", tls_uri)
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        self.assertEqual(r.execute_command("SEG.NEXT", "secure", 3), [1, 2, 3])
        # Counted from a connection without TLS: the server's own connection is the TLS one.
        count = subprocess.run(
            ["psql", self.db.uri + "?sslmode=disable", "-Atc",
             "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
             "WHERE s.ssl AND a.datname IS NOT NULL"],
            check=True, capture_output=True, text=True, timeout=30).stdout
        self.assertGreaterEqual(int(count), 1)
        wrong = f"{self.db.uri}?sslmode=verify-full&sslrootcert={certs}/other-ca.crt"
        p = sekka("segment", "list", "--segment-store", wrong)
        self.assertNotEqual(p.returncode, 0)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("certificate verify failed", lines[0])


class MysqlSegmentTest(SharedStoreTests, SegmentTestCase):
    def setUp(self):
        super().setUp()
        self.db = Mariadb(self.dirs.path("mariadb"))


class RedisSegmentTest(SharedStoreTests, SegmentTestCase):
    def setUp(self):
        super().setUp()
        self.db = RedisStore(self.dirs.path("redis"))

    def test_a_redis_crash_keeps_every_acknowledged_range(self):
        """kill -9 of a Redis with appendfsync always, under load from two servers: after its
        restart the counter is where the last acknowledged range left it, and no id repeats."""
        self.create("orders", "--step", "100", "--segment-store", self.db.uri)
        a = self.start_db("a", "--segment-max-step", "100")
        b = self.start_db("b", "--segment-max-step", "100")
        ids = []
        for s in (a, b):
            r = redis.Redis(host="127.0.0.1", port=s.resp_port)
            for _ in range(20):
                ids += r.execute_command("SEG.NEXT", "orders", 50)
        self.db.stop_server(crash=True)
        self.db.start_server()
        for s in (a, b):
            ids += [self.recovered(redis.Redis(host="127.0.0.1", port=s.resp_port), "orders")]
        self.assertEqual(len(ids), len(set(ids)), "an id was issued twice after the crash")
        counter = int(self.db.client().get("sekka:{orders}.adder"))
        self.assertGreaterEqual(counter, max(ids))

    def test_a_redis_that_can_lose_writes_is_refused_in_one_line(self):
        cache = RedisStore(self.dirs.path("cache"), persist=False)
        try:
            p = sekka("segment", "list", "--segment-store", cache.uri)
            self.assertNotEqual(p.returncode, 0)
            lines = p.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, p.stderr)
            self.assertIn('Redis runs with appendonly "no"', lines[0])
            self.assertIn("durability=any", lines[0])
            p = sekka("segment", "list", "--segment-store", cache.uri + "?durability=any")
            self.assertEqual(p.returncode, 0, p.stderr)
            # Durable, but without the fsync while the AOF is rewritten: refused too.
            self.db.client().config_set("no-appendfsync-on-rewrite", "yes")
            p = sekka("segment", "list", "--segment-store", self.db.uri)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn('no-appendfsync-on-rewrite "yes"', p.stderr)
        finally:
            cache.stop()


    def test_an_evicting_redis_is_refused_and_a_vanished_counter_never_restarts(self):
        """An allkeys-* policy may evict a tag's counter: refused unless eviction=any. A counter
        gone while its metadata stays (evicted, or deleted by hand) is never created again at
        1, by `segment create` or a server's auto-create: its ids would repeat."""
        self.db.client().config_set("maxmemory-policy", "allkeys-lfu")
        p = sekka("segment", "list", "--segment-store", self.db.uri)
        self.assertNotEqual(p.returncode, 0)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn('maxmemory-policy "allkeys-lfu"', lines[0])
        p = sekka("segment", "list", "--segment-store", self.db.uri + "?eviction=any")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.db.client().config_set("maxmemory-policy", "noeviction")
        self.create("orders", "--step", "10", "--segment-store", self.db.uri)
        a = self.start_db("a", "--segment-auto-create", "true")
        served = redis.Redis(host="127.0.0.1", port=a.resp_port).execute_command(
            "SEG.NEXT", "orders", 25)
        a.stop()
        self.servers.remove(a)
        self.db.client().delete("sekka:{orders}.adder")
        p = sekka("segment", "create", "orders", "--segment-store", self.db.uri)
        self.assertNotEqual(p.returncode, 0, "a tag whose counter vanished was made again")
        self.assertIn("no counter", p.stderr)
        b = self.start_db("b", "--segment-auto-create", "true")
        try:
            again = redis.Redis(host="127.0.0.1", port=b.resp_port).execute_command(
                "SEG.NEXT", "orders", 5)
        except redis.exceptions.ResponseError as e:
            again = []
            self.assertIn("no counter", str(e))
        self.assertEqual(set(again) & set(served), set(), "ids repeated after the counter went")


    def test_a_store_failure_on_a_tags_first_load_is_counted_and_logged(self):
        """The store goes away before a tag was ever asked for: the request fails, and the
        failure is counted in sekka_segment_store_errors_total{tag} (which the shipped alert
        watches) and logged as a warning naming the store, its password masked."""
        self.create("orders", "--segment-store", self.db.uri)
        self.db.client().config_set("requirepass", "S3cret-pw")
        uri = f"redis://:S3cret-pw@{self.db.endpoints}/0"
        s = self.start("a", "--segment-store", uri)
        self.db.stop_server(crash=True)
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        for _ in range(3):
            with self.assertRaises(redis.exceptions.ResponseError):
                r.execute_command("SEG.NEXT", "orders", 1)
        metrics = s.get("/metrics")[2]
        m = re.search(r'^sekka_segment_store_errors_total\{tag="orders"\} (\d+)$', metrics, re.M)
        self.assertTrue(m, "no store error counted for the tag's first load")
        self.assertGreaterEqual(int(m.group(1)), 3)
        lines = [line for line in s.stderr_text().splitlines()
                 if "the segment store failed a call" in line]
        self.assertTrue(lines, s.stderr_text()[-2000:])
        self.assertIn('tag="orders"', lines[0])
        self.assertIn(f"redis://:***@{self.db.endpoints}/0", lines[0])
        self.assertNotIn("S3cret-pw", s.stderr_text())


class PeerTablesTest(SegmentTestCase):
    """Two sekka servers and a peer's own allocation (its statements, as its servers issue them,
    over Debian's python3-pymysql) on one row of a real MariaDB: no id twice, each server's ids
    increasing."""

    def setUp(self):
        super().setUp()
        self.db = Mariadb(self.dirs.path("mariadb"))
        self.stop_peer = threading.Event()

    def take_from_sekka(self, server, tag, n):
        r = redis.Redis(host="127.0.0.1", port=server.resp_port)
        ids = []
        while len(ids) < n:
            ids += r.execute_command("SEG.NEXT", tag, 500)
        self.assertEqual(ids, sorted(ids))
        return ids

    def run_beside_two_servers(self, uri, tag, peer):
        """Two servers take 60,000 ids each while `peer` draws ranges; all ids, the peer's too."""
        a = self.start("a", "--segment-store", uri)
        b = self.start("b", "--segment-store", uri)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            peer_ranges = pool.submit(peer)
            parts = list(pool.map(lambda s: self.take_from_sekka(s, tag, 60_000), [a, b]))
            self.stop_peer.set()
            ranges = peer_ranges.result(timeout=60)
        # (How many depends on the machine's load: the point is that it drew while sekka did.)
        self.assertGreater(len(ranges), 2, "the peer should have drawn ranges meanwhile")
        ids = [i for p in parts for i in p] + [i for lo, hi in ranges for i in range(lo, hi)]
        self.assertEqual(len(ids), len(set(ids)), "an id was issued twice")
        return ids

    def test_leafs_own_allocation_beside_two_sekka_servers(self):
        self.db.sql(LEAF_TABLE, "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
                    "VALUES ('leaf-orders', 1, 2000, 'from Leaf')")

        def leaf():
            conn, ranges = self.db.connect(autocommit=False), []
            while not self.stop_peer.is_set():
                ranges.append(leaf_take(conn, "leaf-orders", 1000 + 500 * (len(ranges) % 3)))
                time.sleep(0.005)
            conn.close()
            return ranges

        ids = self.run_beside_two_servers(self.db.uri + "?schema=leaf", "leaf-orders", leaf)
        self.assertGreaterEqual(min(ids), 1)

    def test_a_leaf_tags_step_is_set_in_place_and_it_is_never_deleted(self):
        self.db.sql(LEAF_TABLE, "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
                    "VALUES ('leaf-admin', 1, 2000, 'from Leaf')")
        token = "tok-0123456789abcdef"
        auth = {"Authorization": "Bearer " + token}
        s = self.start("a", "--segment-store", self.db.uri + "?schema=leaf", "--auth-token", token)
        status, body = s.request_json("PATCH", "/v1/tags/leaf-admin?step=3000", auth)
        self.assertEqual((status, body.get("step")), (200, 3000), body)
        conn = self.db.connect()
        with conn.cursor() as c:
            c.execute("SELECT step FROM leaf_alloc WHERE biz_tag = 'leaf-admin'")
            self.assertEqual(c.fetchone()[0], 3000)  # what Leaf's servers read at their next range
        conn.close()
        status, body = s.request_json("DELETE", "/v1/tags/leaf-admin", auth)
        self.assertEqual(status, 400, body)
        self.assertIn("keep no tombstone", body["error"]["message"])
        self.assertEqual(s.get_json("/v1/tags/leaf-admin", auth)[0], 200)

    def test_tinyids_own_allocation_beside_two_sekka_servers(self):
        self.db.sql(TINYID_TABLE, "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, "
                    "delta, remainder) VALUES ('tiny-orders', 0, 0, 2000, 1, 0)")

        def tinyid():
            conn, ranges = self.db.connect(), []
            while not self.stop_peer.is_set():
                taken = tinyid_take(conn, "tiny-orders")
                if taken:
                    ranges.append(taken)
                time.sleep(0.005)
            conn.close()
            return ranges

        ids = self.run_beside_two_servers(self.db.uri + "?schema=tinyid", "tiny-orders", tinyid)
        self.assertGreaterEqual(min(ids), 1)

    def test_a_server_with_autocommit_off_still_commits_every_range(self):
        """The review of issue 25: with MariaDB's autocommit off, tinyid's update (and a new
        tag's insert) was never committed; a restarted server issued the same ids again."""
        self.db.sql("SET GLOBAL autocommit = 0")
        self.db.sql(TINYID_TABLE)
        uri = self.db.uri + "?schema=tinyid"
        self.create("ok", "--step", "100", "--segment-store", uri)
        ids = []
        for run in range(2):
            s = self.start(f"run{run}", "--segment-store", uri)
            ids += redis.Redis(host="127.0.0.1", port=s.resp_port).execute_command(
                "SEG.NEXT", "ok", 3)
            s.stop(signal.SIGKILL)
            self.servers.remove(s)
        self.assertEqual(len(ids), len(set(ids)), f"ids issued twice: {ids}")

    def move_while_drawn(self, peer, tag, take, delta=1, remainder=0):
        """`sekka segment import` of `tag` from `peer`'s table while `take` (the peer's own
        statements) draws ranges from it and a sekka server serves it in place, then two servers
        on sekka's table: no id twice, and the peer's draws fail after the move."""
        import pymysql
        drawn, failed = [], []

        def peer_server():
            conn = self.db.connect(autocommit=(peer == "tinyid"))
            while not self.stop_peer.is_set():
                try:
                    taken = take(conn)
                    if taken:
                        drawn.append(taken)
                except (pymysql.err.MySQLError, TypeError) as e:  # TypeError: tinyid's row gone
                    failed.append(str(e))
                    conn.rollback()
                time.sleep(0.002)
            conn.close()

        in_place = self.start("in-place", "--segment-store", f"{self.db.uri}?schema={peer}",
                              "--segment-auto-create", "true")
        thread = threading.Thread(target=peer_server)
        thread.start()
        ids = redis.Redis(host="127.0.0.1", port=in_place.resp_port).execute_command(
            "SEG.NEXT", tag, 300)
        wait_for(lambda: len(drawn) > 5, 60)
        p = sekka("segment", "import", tag, "--from", peer, "--segment-store", self.db.uri)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"{tag} next_id=", p.stdout)
        self.assertTrue(wait_for(lambda: len(failed) > 3, 60), "the peer drew on after the move")
        self.stop_peer.set()
        thread.join(timeout=60)
        again = sekka("segment", "import", tag, "--from", peer, "--segment-store", self.db.uri)
        self.assertNotEqual(again.returncode, 0, "a second move would start the tag again")
        for name in ("a", "b"):
            s = self.start(name, "--segment-store", self.db.uri)
            ids += redis.Redis(host="127.0.0.1", port=s.resp_port).execute_command(
                "SEG.NEXT", tag, 500)
        try:  # the server in place: its buffers, then nothing
            ids += redis.Redis(host="127.0.0.1", port=in_place.resp_port).execute_command(
                "SEG.NEXT", tag, 5)
        except redis.exceptions.ResponseError:
            pass
        # A server in place that never served the tag, with auto-create: it must not make the
        # tag again in the peer's table (at 1).
        late = self.start("late", "--segment-store", f"{self.db.uri}?schema={peer}",
                          "--segment-auto-create", "true")
        try:
            ids += redis.Redis(host="127.0.0.1", port=late.resp_port).execute_command(
                "SEG.NEXT", tag, 5)
        except redis.exceptions.ResponseError:
            pass
        peer_ids = [i for lo, hi in drawn for i in range(lo, hi) if i % delta == remainder]
        every = ids + peer_ids
        self.assertEqual(len(every), len(set(every)), "an id was issued twice across the move")
        self.assertTrue(all(i % delta == remainder for i in ids), "delta and remainder lost")
        return p.stdout

    def test_a_leaf_tag_moves_to_sekkas_table_while_leaf_draws(self):
        self.db.sql(LEAF_TABLE, "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
                    "VALUES ('leaf-move', 1, 1000, 'from Leaf')")
        self.move_while_drawn("leaf", "leaf-move", lambda c: leaf_take(c, "leaf-move", 1000))
        [(max_id,)] = self.db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'leaf-move'")
        self.assertEqual(max_id, 2**63 - 1)

    def test_a_tinyid_tag_moves_to_sekkas_table_while_tinyid_draws(self):
        self.db.sql(TINYID_TABLE, "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, "
                    "delta, remainder) VALUES ('tiny-move', 0, 0, 1000, 2, 1)")
        out = self.move_while_drawn("tinyid", "tiny-move", lambda c: tinyid_take(c, "tiny-move"),
                                    delta=2, remainder=1)
        self.assertIn("delta=2 remainder=1", out)
        rows = self.db.sql("SELECT biz_type, max_id, delta FROM tiny_id_info")
        self.assertEqual(rows, (("tiny-move", 2**63 - 1, 0),))
        # tinyid's server adds the step in Java before it divides by the delta: its first try
        # after the move leaves max_id wrapped below 0. A server in place hands no such range
        # to tinyid's clients (the review of issue 40 found a negative one handed out).
        self.db.sql("UPDATE tiny_id_info SET max_id = -9223372036854774808, version = version + 1",
                    TINYID_TOKEN_TABLE,
                    "INSERT INTO tiny_id_token (token, biz_type) VALUES ('tok', 'tiny-move')")
        s = self.start("wrapped", "--segment-store", f"{self.db.uri}?schema=tinyid")
        reply = json.loads(s.get("/tinyid/id/nextSegmentId?bizType=tiny-move&token=tok")[2])
        self.assertEqual(reply["code"], 6, reply)
        self.assertIn("fix the tag's row", reply["message"])

    def test_every_name_a_peers_table_holds_is_served_on_every_front_end(self):
        """Issue 40: a Leaf row `order/cn east` was listed as a tag, and every request answered
        `tag "order?cn?east" is not valid`; Leaf and tinyid accept any VARCHAR, UTF-8 too."""
        east, order = "order/cn east", "\u8ba2\u5355"  # 订单
        self.db.sql(LEAF_TABLE, "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
                    f"VALUES ('{east}', 1, 1000, ''), ('{order}', 5001, 1000, ''), "
                    "('tab\there', 1, 1000, '')")
        uri = self.db.uri + "?schema=leaf"
        p = sekka("segment", "list", "--segment-store", uri)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines(), [
            f'"{east}" next_id=1 step=1000',
            '"tab\\x09here" next_id=1 step=1000 (not served: allowed 1 to 128 characters of '
            'UTF-8 without control characters)', f'"{order}" next_id=5001 step=1000'])
        s = self.start("a", "--segment-store", uri)
        quoted = {name: urllib.parse.quote(name, safe="") for name in (east, order)}
        status, _, body = s.get(f"/v1/segment/{quoted[east]}")
        self.assertEqual((status, json.loads(body)), (200, {"id": "1"}), body)
        status, _, body = s.get(f"/api/segment/get/{quoted[order]}")  # Leaf's route
        self.assertEqual((status, body.strip()), (200, "5001"), body)
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        self.assertEqual(r.execute_command("SEG.NEXT", east, 2), [2, 3])
        self.assertEqual(r.execute_command("SEG.NEXT", order.encode(), 1), [5002])
        status, _, body = s.get("/v1/segment/tab%09here")
        self.assertEqual(status, 400, body)
        self.assertIn('tag \\"tab\\\\x09here\\" is not valid', body)
        # (Review: a bad %-escape in a query was taken as the name "a%zz"; a raw / as part of one.)
        _, headers, body = s.get("/tinyid/id/nextIdSimple?bizType=a%zz")
        self.assertIn("not valid percent-encoding", headers.get("X-Sekka-Error", "") + body)
        self.assertEqual(s.get("/v1/segment/order/cn east".replace(" ", "%20"))[0], 400)
        listed = json.loads(s.get("/v1/tags")[2])
        self.assertEqual([t["tag"] for t in listed["tags"]], [east, "tab\there", order])
        metrics = s.get("/metrics")[2]
        self.assertIn(f'sekka_segment_issued_total{{tag="{east}"}} 3', metrics)
        self.assertIn(f'sekka_segment_issued_total{{tag="{order}"}} 2', metrics)

    def test_a_tinyid_name_in_utf8_is_served_with_its_token(self):
        order = "\u8ba2\u5355"  # 订单
        self.db.sql(TINYID_TABLE, TINYID_TOKEN_TABLE,
                    "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder) "
                    f"VALUES ('{order}', 0, 0, 100, 1, 0)",
                    f"INSERT INTO tiny_id_token (token, biz_type) VALUES ('tok', '{order}')")
        s = self.start("a", "--segment-store", f"{self.db.uri}?schema=tinyid")
        quoted = urllib.parse.quote(order, safe="")
        status, _, body = s.get(f"/tinyid/id/nextIdSimple?bizType={quoted}&token=tok&batchSize=2")
        self.assertEqual((status, body.strip()), (200, "1,2"), body)
        status, headers, body = s.get(f"/tinyid/id/nextIdSimple?bizType={quoted}&token=wrong")
        self.assertEqual((status, body), (200, ""))  # tinyid's shape of a refusal
        self.assertIn("tiny_id_token", headers["X-Sekka-Error"])

    def test_a_missing_peer_table_is_one_clear_line(self):
        p = sekka("segment", "list", "--segment-store", self.db.uri + "?schema=leaf")
        self.assertNotEqual(p.returncode, 0)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("Leaf's table leaf_alloc in place, and it is missing", lines[0])


if __name__ == "__main__":
    unittest.main(argv=sys.argv, verbosity=2)
