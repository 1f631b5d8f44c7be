#!/usr/bin/python3
"""The peers on the real binary: didi's tinyid and the CosId proxy, spoken to with curl and
http.client in the shapes the peers' clients parse; Meituan Leaf's snowflake servers beside
sekka's on one ZooKeeper. Run with /usr/bin/python3 (python3-redis, python3-kazoo); SEKKA_BIN
names the binary."""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import (SEKKA, TINYID_TABLE, TINYID_TOKEN_TABLE, Balancer,  # noqa: E402
                           CosIdProxyClient, Mariadb, RedisStore, Server, TempDirs, ZooKeeper,
                           wait_for)
from peer_clients import (COSID_MACHINE_TABLE, CosIdJdbcDistributor,  # noqa: E402
                          CosIdRedisDistributor, LeafSnowflakeServer)


def create_tag(data_dir, tag, *flags):
    subprocess.run([SEKKA, "segment", "create", tag, "--data-dir", data_dir, *flags], check=True,
                   stdout=subprocess.DEVNULL)


def curl(server, method, path):
    """(status, headers text, body) of one request made with curl."""
    p = subprocess.run(["curl", "-s", "-i", "-X", method, f"http://{server.http}{path}"],
                       capture_output=True, check=True, timeout=30)
    head, _, body = p.stdout.decode().partition("\r\n\r\n")
    return int(head.split()[1]), head, body


def request(server, method, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    conn.request(method, path, body=b"" if method == "POST" else None, headers=headers or {})
    r = conn.getresponse()
    result = r.status, dict(r.getheaders()), r.read().decode()
    conn.close()
    return result


class TinyIdClient:
    """What tinyid's Java client does with nextSegmentIdSimple: ids in (currentId, maxId] with
    id % delta == remainder, issued locally."""

    def __init__(self, server, biz_type, token=""):
        self.server, self.biz_type, self.token = server, biz_type, token
        self.ids = []

    def fetch(self):
        status, _, body = request(
            self.server, "POST",
            f"/tinyid/id/nextSegmentIdSimple?token={self.token}&bizType={self.biz_type}")
        if status != 200 or not body:
            raise AssertionError(f"no segment: {status} {body!r}")
        current, loading, max_id, delta, remainder = (int(v) for v in body.split(","))
        assert current < loading <= max_id
        self.ids = [i for i in range(current + 1, max_id + 1) if i % delta == remainder]

    def next_ids(self, n):
        out = []
        while len(out) < n:
            if not self.ids:
                self.fetch()
            take = min(n - len(out), len(self.ids))
            out += self.ids[:take]
            del self.ids[:take]
        return out


class TinyIdTest(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()
        self.data = self.dirs.path("data")
        create_tag(self.data, "test", "--step", "1000")
        create_tag(self.data, "test_odd", "--step", "1000", "--delta", "2", "--remainder", "1")
        self.s = Server(self.data, "--max-batch", "500")

    def tearDown(self):
        self.s.stop()
        self.dirs.cleanup()

    def test_every_route_in_tinyids_shapes_on_get_and_post(self):
        for method in ["GET", "POST"]:
            status, head, body = curl(self.s, method, "/tinyid/id/nextId?bizType=test&batchSize=3")
            self.assertEqual(status, 200)
            self.assertIn("application/json", head)
            reply = json.loads(body)
            self.assertEqual(set(reply), {"data", "code", "message"})
            self.assertEqual((reply["code"], reply["message"]), (200, ""))
            self.assertEqual(len(reply["data"]), 3)
            self.assertTrue(all(isinstance(i, int) for i in reply["data"]))

            _, _, body = curl(self.s, method, "/tinyid/id/nextIdSimple?bizType=test")
            self.assertRegex(body, r"^\d+$")
            _, _, body = curl(self.s, method, "/tinyid/id/nextIdSimple?bizType=test&batchSize=4")
            self.assertRegex(body, r"^\d+(,\d+){3}$")

            _, _, body = curl(self.s, method, "/tinyid/id/nextSegmentId?bizType=test_odd")
            reply = json.loads(body)
            self.assertEqual(reply["code"], 200)
            seg = reply["data"]
            self.assertEqual(set(seg), {"maxId", "loadingId", "currentId", "delta", "remainder"})
            self.assertEqual((seg["delta"], seg["remainder"]), (2, 1))
            self.assertEqual(seg["maxId"] - seg["currentId"], 1000)
            self.assertEqual(seg["loadingId"], seg["currentId"] + 200)

            _, _, body = curl(self.s, method, "/tinyid/id/nextSegmentIdSimple?bizType=test")
            current, loading, max_id, delta, remainder = (int(v) for v in body.split(","))
            self.assertEqual((max_id - current, loading - current, delta, remainder),
                             (1000, 200, 1, 0))

    def test_errors_in_tinyids_shapes(self):
        for query, fragment in [("bizType=nope", 'tag \\"nope\\" is not found'),
                                ("", "bizType is required"),
                                ("bizType=test&batchSize=0", "batchSize"),
                                ("bizType=test&batchSize=x", "batchSize"),
                                ("bizType=bad%09tag", "not valid")]:
            status, _, body = request(self.s, "GET", f"/tinyid/id/nextId?{query}")
            self.assertEqual(status, 200)
            reply = json.loads(body)
            self.assertEqual((reply["data"], reply["code"]), (None, 6), query)
            self.assertIn(fragment, json.dumps(reply["message"]), query)
            status, headers, body = request(self.s, "POST", f"/tinyid/id/nextIdSimple?{query}")
            self.assertEqual((status, body), (200, ""), query)
            self.assertIn("X-Sekka-Error", headers)
        # A batch larger than server.max_batch is cut to it, as tinyid's batch.size.max.
        _, _, body = request(self.s, "GET", "/tinyid/id/nextId?bizType=test&batchSize=100000")
        self.assertEqual(len(json.loads(body)["data"]), 500)
        status, _, _ = request(self.s, "DELETE", "/tinyid/id/nextId?bizType=test")
        self.assertEqual(status, 200)  # tinyid answered every method

    def test_delta_and_remainder_on_every_route(self):
        r = redis.Redis(host="127.0.0.1", port=self.s.resp_port)
        ids = json.loads(request(self.s, "GET",
                                 "/tinyid/id/nextId?bizType=test_odd&batchSize=300")[2])["data"]
        ids += [int(i) for i in request(self.s, "GET",
                                        "/tinyid/id/nextIdSimple?bizType=test_odd&batchSize=300")[2]
                .split(",")]
        ids += [int(i) for i in r.execute_command("SEG.NEXT", "test_odd", 300)]
        ids += [int(i) for i in json.loads(
            request(self.s, "GET", "/v1/segment/test_odd?count=300")[2])["ids"]]
        self.assertEqual(ids, sorted(ids))
        self.assertTrue(all(i % 2 == 1 for i in ids))
        self.assertEqual(len(set(ids)), len(ids))

    def test_client_segments_and_server_ids_never_repeat(self):
        """tinyid clients issuing from nextSegmentId ranges, and sekka's own routes on the same
        tag, interleaved: every id once."""
        r = redis.Redis(host="127.0.0.1", port=self.s.resp_port)
        clients = [TinyIdClient(self.s, tag) for tag in ("test", "test")]
        seen = []
        for round_ in range(30):
            for c in clients:
                seen += c.next_ids(150)
            seen += [int(i) for i in r.execute_command("SEG.NEXT", "test", 100)]
            seen += json.loads(request(
                self.s, "GET", "/tinyid/id/nextId?bizType=test&batchSize=100")[2])["data"]
            seen += [int(request(self.s, "GET", "/api/segment/get/test")[2])]
        self.assertEqual(len(seen), 30 * (2 * 150 + 100 + 100 + 1))
        self.assertEqual(len(set(seen)), len(seen))

    def test_two_stores_with_remainders_never_overlap(self):
        """tinyid's multi-database set-up: two stores, delta 2, remainders 0 and 1."""
        other = self.dirs.path("other")
        create_tag(other, "test_odd", "--step", "1000", "--delta", "2", "--remainder", "0")
        s2 = Server(other)
        try:
            a = TinyIdClient(self.s, "test_odd").next_ids(3000)
            b = TinyIdClient(s2, "test_odd").next_ids(3000)
            a += json.loads(request(self.s, "GET",
                                    "/tinyid/id/nextId?bizType=test_odd&batchSize=500")[2])["data"]
            b += json.loads(request(s2, "GET",
                                    "/tinyid/id/nextId?bizType=test_odd&batchSize=500")[2])["data"]
            self.assertTrue(all(i % 2 == 1 for i in a))
            self.assertTrue(all(i % 2 == 0 for i in b))
            self.assertEqual(len(set(a) | set(b)), len(a) + len(b))
        finally:
            s2.stop()


class TinyIdTokenTest(unittest.TestCase):
    """tinyid's token check maps onto sekka's auth: ?token= must be server.auth_token."""

    def setUp(self):
        self.dirs = TempDirs()
        self.data = self.dirs.path("data")
        create_tag(self.data, "test")
        self.s = Server(self.data, "--auth-token", "s3cret-token-0123456")

    def tearDown(self):
        self.s.stop()
        self.dirs.cleanup()

    def test_the_token_is_the_servers_auth_token(self):
        for query in ["bizType=test", "bizType=test&token=wrong", "bizType=test&token="]:
            reply = json.loads(request(self.s, "GET", f"/tinyid/id/nextId?{query}")[2])
            self.assertEqual((reply["data"], reply["code"]), (None, 5), query)
            self.assertIn("token is error", reply["message"])
            status, headers, body = request(self.s, "POST",
                                            f"/tinyid/id/nextSegmentIdSimple?{query}")
            self.assertEqual((status, body), (200, ""))
            self.assertIn("unauthenticated", headers["X-Sekka-Error"])
        reply = json.loads(request(self.s, "GET", "/tinyid/id/nextId?bizType=test&token=s3cret-token-0123456")[2])
        self.assertEqual(reply["code"], 200)
        reply = json.loads(request(self.s, "GET", "/tinyid/id/nextId?bizType=test",
                                   headers={"Authorization": "Bearer s3cret-token-0123456"})[2])
        self.assertEqual(reply["code"], 200)
        # sekka's own routes still want the header: a ?token= there is not a credential.
        self.assertEqual(request(self.s, "GET", "/v1/segment/test?token=s3cret-token-0123456")[0], 401)


class TinyIdTableTokenTest(unittest.TestCase):
    """On tinyid's own tables (a real MariaDB), tinyid's routes check tiny_id_token as tinyid
    does, token per bizType, beside the server token; sekka's own routes keep the server's."""

    def setUp(self):
        self.dirs = TempDirs()
        self.db = Mariadb(self.dirs.path("mariadb"))
        self.db.sql(TINYID_TABLE, TINYID_TOKEN_TABLE,
                    "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, "
                    "remainder) VALUES ('test', 0, 0, 100, 1, 0), ('other', 0, 0, 100, 1, 0)",
                    "INSERT INTO tiny_id_token (token, biz_type) VALUES ('tok-test', 'test'), "
                    "('tok-other', 'other'), ('tok-both', 'test'), ('tok-both', 'other')")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        self.db.stop()
        self.dirs.cleanup()

    def start(self, *flags):
        s = Server(self.dirs.path(f"s{len(self.servers)}"), "--segment-store",
                   self.db.uri + "?schema=tinyid", *flags)
        self.servers.append(s)
        return s

    def code(self, s, query, headers=None):
        return json.loads(request(s, "GET", f"/tinyid/id/nextId?{query}", headers)[2])["code"]

    def test_each_biztype_takes_its_own_tokens(self):
        s = self.start()
        self.assertEqual(self.code(s, "bizType=test&token=tok-test"), 200)
        self.assertEqual(self.code(s, "bizType=other&token=tok-both"), 200)
        for query in ["bizType=test", "bizType=test&token=", "bizType=test&token=tok-other",
                      "bizType=test&token=wrong", "bizType=other&token=tok-test"]:
            self.assertEqual(self.code(s, query), 5, query)
        status, headers, body = request(s, "POST", "/tinyid/id/nextIdSimple?bizType=test")
        self.assertEqual((status, body), (200, ""))
        self.assertIn("tiny_id_token", headers["X-Sekka-Error"])
        # sekka's own routes follow the server's token: none set here.
        self.assertEqual(request(s, "GET", "/v1/segment/test")[0], 200)

    def test_the_server_token_works_beside_them(self):
        s = self.start("--auth-token", "s3cret-token-0123456")
        self.assertEqual(self.code(s, "bizType=test&token=tok-test"), 200)
        self.assertEqual(self.code(s, "bizType=test&token=s3cret-token-0123456"), 200)
        self.assertEqual(self.code(s, "bizType=test", {"Authorization":
                                                       "Bearer s3cret-token-0123456"}), 200)
        self.assertEqual(self.code(s, "bizType=test&token=tok-other"), 5)
        self.assertEqual(request(s, "GET", "/v1/segment/test?token=tok-test")[0], 401)


def java_duration(seconds):
    """Java's Duration.toString, as CosId's client formats safeGuardDuration."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"PT{seconds // 60}M"
    return f"PT{seconds}S" if float(seconds).is_integer() else f"PT{seconds:g}S"


class CosIdTest(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()
        self.data = self.dirs.path("data")
        self.s = Server(self.data, "--segment-auto-create", "true")
        self.c = CosIdProxyClient(self.s)

    def tearDown(self):
        self.s.stop()
        self.dirs.cleanup()

    def assertCosIdError(self, status, body, want_status, code):
        self.assertEqual(status, want_status, body)
        self.assertEqual(set(body), {"code", "msg", "errors"})
        self.assertEqual((body["code"], body["errors"]), (code, []))
        self.assertTrue(body["msg"])

    def test_machine_ids_are_handed_out_guarded_and_given_back(self):
        guard = java_duration(300)
        self.assertEqual(guard, "PT5M")
        status, a = self.c.distribute("orders", "10.0.0.1:4001", False, 1, guard)
        self.assertEqual(status, 200)
        self.assertEqual(set(a), {"machineId", "lastTimeStamp"})
        self.assertEqual(a["machineId"], 0)
        self.assertLess(abs(a["lastTimeStamp"] - time.time() * 1000), 60_000)
        self.assertEqual(self.c.distribute("orders", "10.0.0.1:4001", False, 1, guard)[1]
                         ["machineId"], 0)  # idempotent
        self.assertEqual(self.c.distribute("orders", "10.0.0.2:4001", False, 1, guard)[1]
                         ["machineId"], 1)
        self.assertEqual(self.c.distribute("other", "10.0.0.2:4001", False, 1, guard)[1]
                         ["machineId"], 0)
        self.assertCosIdError(*self.c.distribute("orders", "10.0.0.3:4001", False, 1, guard),
                              400, "M-01")
        self.assertEqual(self.c.guard("orders", "10.0.0.1:4001", False, guard), (200, None))
        self.assertCosIdError(*self.c.guard("orders", "nobody", False, guard), 400, "M-02")
        self.assertEqual(self.c.revert("orders", "10.0.0.1:4001", False), (200, ""))
        self.assertEqual(self.c.revert("orders", "10.0.0.1:4001", False), (200, ""))
        # A revert is the holder's last guard: the id goes on once its safeGuardDuration has
        # passed without one (below), never at once.
        self.assertCosIdError(*self.c.distribute("orders", "10.0.0.3:4001", False, 1, guard),
                              400, "M-01")

    def test_a_tag_of_delta_above_one_is_refused_before_a_range_is_taken(self):
        """Issue 24, finding 11: a PATCH refused for delta != 1 still took a range; and 405s on
        CosId's routes came in sekka's shape."""
        self.s.stop()
        subprocess.run([SEKKA, "segment", "create", "ns.odd", "--step", "10", "--delta", "2",
                        "--remainder", "1", "--data-dir", self.data], check=True,
                       capture_output=True)
        self.s = Server(self.data)
        self.c = CosIdProxyClient(self.s)
        status, body = self.c.next_max_id("ns", "odd", 10)
        self.assertCosIdError(status, json.loads(body), 400, "400")
        self.s.stop()
        shown = subprocess.run([SEKKA, "segment", "show", "ns.odd", "--data-dir", self.data],
                               capture_output=True, text=True, check=True).stdout
        self.assertIn("next_id=1 ", shown)  # no range was taken
        self.s = Server(self.data)
        self.c = CosIdProxyClient(self.s)
        status, body = self.c._call("PUT", "/machines/ns?instanceId=a")
        self.assertCosIdError(status, json.loads(body), 405, "405")

    def test_a_forged_revert_takes_no_id_from_a_holder_that_guards(self):
        """Issue 24, finding 5: DELETE /machines/{ns}?instanceId=victim answered 200, and the
        next POST handed the victim's id to another instance while the victim still issued."""
        status, a = self.c.distribute("ns", "victim", False, 1, "PT0.6S")
        self.assertEqual((status, a["machineId"]), (200, 0))
        self.assertEqual(self.c.distribute("ns", "b", False, 1, "PT5M")[1]["machineId"], 1)
        self.assertEqual(self.c.revert("ns", "victim", False), (200, ""))  # by anyone
        self.assertCosIdError(*self.c.distribute("ns", "attacker", False, 1, "PT5M"), 400, "M-01")
        time.sleep(0.4)
        self.assertEqual(self.c.guard("ns", "victim", False, "PT0.6S"), (200, None))
        time.sleep(0.4)  # past the revert's guard window, within the victim's last guard
        self.assertCosIdError(*self.c.distribute("ns", "attacker", False, 1, "PT5M"), 400, "M-01")
        # The victim stops (a real revert): its id goes on once its guard has lapsed, and the
        # next holder waits past the last time it may have issued.
        self.assertEqual(self.c.revert("ns", "victim", False), (200, ""))
        time.sleep(0.8)
        status, c = self.c.distribute("ns", "next", False, 1, "PT5M")
        self.assertEqual((status, c["machineId"]), (200, 0))
        self.assertGreaterEqual(c["lastTimeStamp"], a["lastTimeStamp"] + 600)

    def test_a_web_page_cannot_reach_the_machine_routes(self):
        """Issue 24, finding 5: cross-site simple POSTs (form content type, foreign Origin)
        were accepted and Host was never checked, so a page could reach a loopback server
        through DNS rebinding and take every machine id of a namespace."""
        target = "/machines/ns?instanceId=x&stable=false&machineBit=1&safeGuardDuration=PT5M"
        for headers in ({"Origin": "http://evil.example",
                         "Content-Type": "application/x-www-form-urlencoded"},
                        {"Host": "rebound.evil.example:%d" % self.s.http_port},
                        {"Origin": "null"}):
            status, _, body = request(self.s, "POST", target, headers=headers)
            self.assertEqual(status, 403, (headers, body))
            self.assertEqual(json.loads(body)["error"]["code"], "forbidden")
        # The same request from the server's own origin, or with no Origin (not a browser).
        same = {"Origin": "http://127.0.0.1:%d" % self.s.http_port}
        self.assertEqual(request(self.s, "POST", target, headers=same)[0], 200)
        # Since issue 42 a GET that hands out ids is refused cross-site too (an <img src>).
        self.assertEqual(request(self.s, "GET", "/v1/id",
                                 headers={"Origin": "http://127.0.0.2:8080"})[0], 403)
        # A name the operator lists (a Kubernetes Service's, say) is allowed.
        named = Server(self.dirs.path("named"), "--allowed-hosts", "ids.internal,Other.example")
        try:
            for host in ("ids.internal:8080", "other.example", "127.0.0.1", "[::1]:1"):
                self.assertEqual(request(named, "GET", "/healthz", {"Host": host})[0], 200, host)
            self.assertEqual(request(named, "GET", "/healthz", {"Host": "evil.example"})[0], 403)
        finally:
            named.stop()

    def test_an_unguarded_machine_id_goes_to_another_instance_which_waits_past_it(self):
        status, a = self.c.distribute("ns", "a", False, 1, "PT0.3S")
        self.assertEqual(status, 200)
        self.assertEqual(self.c.distribute("ns", "b", False, 1, "PT0.3S")[1]["machineId"], 1)
        time.sleep(0.5)
        self.assertEqual(self.c.guard("ns", "b", False, "PT0.3S")[0], 200)
        status, c = self.c.distribute("ns", "c", False, 1, "PT0.3S")
        self.assertEqual((status, c["machineId"]), (200, 0))
        self.assertGreaterEqual(c["lastTimeStamp"], a["lastTimeStamp"] + 300)
        self.assertCosIdError(*self.c.guard("ns", "a", False, "PT0.3S"), 400, "M-03")

    def test_a_holder_is_judged_by_its_own_guard_not_the_askers(self):
        """Issue 22, finding 4: A guards with PT5M; 50 ms later B asked with PT0.001S and got
        A's machine id, with lastTimeStamp A's last guard + 1 ms, while A went on issuing."""
        status, a = self.c.distribute("ns", "a", False, 1, "PT5M")
        self.assertEqual((status, a["machineId"]), (200, 0))
        time.sleep(0.05)
        status, b = self.c.distribute("ns", "b", False, 1, "PT0.001S")
        self.assertEqual(status, 200, b)
        self.assertEqual(b["machineId"], 1, "a machine id within its holder's guard was taken")
        time.sleep(0.05)
        # b's own guard (1 ms) has lapsed, a's (5 min) has not, whatever c asks with.
        status, c = self.c.distribute("ns", "c", False, 1, "PT5M")
        self.assertEqual((status, c["machineId"]), (200, 1))
        self.assertGreaterEqual(c["lastTimeStamp"], b["lastTimeStamp"] + 1)
        self.assertCosIdError(*self.c.distribute("ns", "d", False, 1, "PT0.001S"), 400, "M-01")
        self.assertEqual(self.c.guard("ns", "a", False, "PT5M"), (200, None))

    def test_stable_instances_keep_their_id_and_it_survives_a_restart(self):
        self.assertEqual(self.c.distribute("ns", "pod-0", True, 4, "PT1S")[1]["machineId"], 0)
        self.assertEqual(self.c.distribute("ns", "pod-1", False, 4, "PT1S")[1]["machineId"], 1)
        self.assertEqual(self.c.revert("ns", "pod-0", True)[0], 200)
        time.sleep(1.2)
        self.s.stop()
        self.s = Server(self.data, "--segment-auto-create", "true")
        self.c = CosIdProxyClient(self.s)
        # pod-1 expired (not stable): its id is free again; pod-0 is stable: its id waits for it.
        self.assertEqual(self.c.distribute("ns", "new", False, 4, "PT1S")[1]["machineId"], 1)
        self.assertEqual(self.c.distribute("ns", "pod-0", True, 4, "PT1S")[1]["machineId"], 0)

    def test_every_route_with_curl(self):
        status, head, body = curl(self.s, "POST", "/machines/ns?instanceId=h:1&stable=false"
                                                  "&machineBit=4&safeGuardDuration=PT1M")
        self.assertEqual(status, 200)
        self.assertIn("application/json", head)
        self.assertEqual(json.loads(body)["machineId"], 0)
        status, _, body = curl(self.s, "PATCH",
                               "/machines/ns?instanceId=h:1&stable=false&safeGuardDuration=PT1M")
        self.assertEqual((status, body), (200, ""))
        status, _, body = curl(self.s, "DELETE", "/machines/ns?instanceId=h:1&stable=false")
        self.assertEqual((status, body), (200, ""))
        status, _, body = curl(self.s, "POST", "/segments/distributor/ns/seq?offset=10&step=5")
        self.assertEqual((status, body), (200, ""))
        status, _, body = curl(self.s, "PATCH", "/segments/ns/seq?step=5")
        self.assertEqual((status, body), (200, "15"))  # ids 11 to 15
        status, _, body = curl(self.s, "GET", "/segments/ns/seq?step=5")
        self.assertEqual(status, 405)

    def test_every_answered_machine_id_survives_kill_9(self):
        """Each change is stored before it is answered: killed right after 50 answers, the
        restarted server gives each instance its id again and a new instance another one."""
        got = {}
        for i in range(50):
            status, body = self.c.distribute("ns", f"i{i}", False, 8, "PT5M")
            self.assertEqual(status, 200)
            got[f"i{i}"] = body["machineId"]
        self.s.stop(sig=signal.SIGKILL)
        self.s = Server(self.data, "--segment-auto-create", "true")
        self.c = CosIdProxyClient(self.s)
        for instance, machine in got.items():
            self.assertEqual(self.c.distribute("ns", instance, False, 8, "PT5M")[1]["machineId"],
                             machine)
        status, body = self.c.distribute("ns", "new", False, 8, "PT5M")
        self.assertEqual(status, 200)
        self.assertNotIn(body["machineId"], got.values())

    def test_a_server_that_cannot_tell_it_is_alone_refuses_machine_ids(self):
        """Issue 40: behind a load balancer, two servers each answering from their own data dir
        gave one machine id to two instances. Without a coordinator, a second server of this
        host (it shares the worker lock dir) and a server with a static worker id (one of several
        hosts') refuse, naming how they know; machines.single_server says a server is the one."""
        self.assertEqual(self.c.distribute("ns", "a", False, 4, "PT1M")[0], 200)
        same_host = {"SEKKA_WORKER_LOCK_DIR": self.s.env["SEKKA_WORKER_LOCK_DIR"]}
        for name, flags, why in [
                ("second", [], "another server of this host keeps its own"),
                ("static", ["--worker-source", "static", "--worker-id", "3"],
                 "worker.source = static gives each of several hosts")]:
            other = Server(self.dirs.path(name), *flags, env=same_host)
            try:
                status, body = CosIdProxyClient(other).distribute("ns", "b", False, 4, "PT1M")
                self.assertEqual((status, body["code"]), (503, "503"), body)
                self.assertIn(why, body["msg"])
                self.assertIn("machines.single_server", body["msg"])
            finally:
                other.stop()
        one = Server(self.dirs.path("one"), "--worker-source", "static", "--worker-id", "4",
                     "--machines-single-server", "true", env=same_host)
        try:
            self.assertEqual(CosIdProxyClient(one).distribute("ns", "b", False, 4, "PT1M")[0], 200)
        finally:
            one.stop()
        # Review of issue 40: the lock passed to the next server of the host, which answered
        # from its own empty file and gave id 0 again. The host's ids stay with the first data
        # dir that kept them.
        self.s.stop()
        other = Server(self.dirs.path("second"), env=same_host)
        try:
            status, body = CosIdProxyClient(other).distribute("ns", "c", False, 4, "PT1M")
            self.assertEqual(status, 503, body)
            self.assertIn("this host's are kept in data dir", body["msg"])
            # The refused server lets the host's lock go: the bound one answers beside it.
            self.s = Server(self.data, "--segment-auto-create", "true", env=same_host)
            self.c = CosIdProxyClient(self.s)
            self.assertEqual(self.c.distribute("ns", "a", False, 4, "PT1M")[1]["machineId"], 0)
        finally:
            other.stop()

    def test_an_unreadable_machine_file_fails_those_requests_only(self):
        self.assertEqual(self.c.distribute("ns", "a", False, 4, "PT1M")[0], 200)
        self.s.stop()
        with open(os.path.join(self.data, "machines"), "a") as f:
            f.write("ns\t0\tb\t0\t1\t\t60000\n")  # the same id twice: corrupt
        self.s = Server(self.data, "--segment-auto-create", "true")
        self.c = CosIdProxyClient(self.s)
        status, body = self.c.distribute("ns", "a", False, 4, "PT1M")
        self.assertEqual((status, body["code"]), (503, "503"))
        self.assertIn("listed twice", body["msg"])
        self.assertEqual(self.s.get("/readyz")[0], 200)  # ids are still served
        self.assertEqual(self.c.create_distributor("app", "x", 0, 10), (200, ""))

    def test_bad_arguments_are_400_with_a_reason(self):
        for path in ["/machines/ns?instanceId=a&machineBit=1",
                     "/machines/ns?instanceId=a&machineBit=0&safeGuardDuration=PT1S",
                     "/machines/ns?instanceId=a&machineBit=1&safeGuardDuration=5min",
                     "/machines/ns?machineBit=1&safeGuardDuration=PT1S",
                     "/machines/bad%20ns?instanceId=a&machineBit=1&safeGuardDuration=PT1S",
                     "/machines/ns?instanceId=a&machineBit=1&safeGuardDuration=PT1S&stable=maybe",
                     "/machines/a/b?instanceId=a&machineBit=1&safeGuardDuration=PT1S"]:
            status, body = self.c._call("POST", path)
            self.assertCosIdError(status, json.loads(body), 400, "400")

    def test_segments_and_sekkas_own_routes_never_repeat_on_one_tag(self):
        self.assertEqual(self.c.create_distributor("app", "order", 1000, 100), (200, ""))
        self.assertEqual(self.c.create_distributor("app", "order", 0, 100), (200, ""))  # kept
        r = redis.Redis(host="127.0.0.1", port=self.s.resp_port)
        seen = []
        for _ in range(20):
            status, body = self.c.next_max_id("app", "order", 100)
            self.assertEqual(status, 200)
            max_id = int(body)
            seen += list(range(max_id - 100 + 1, max_id + 1))  # CosId's (maxId - step, maxId]
            seen += [int(i) for i in r.execute_command("SEG.NEXT", "app.order", 50)]
        self.assertGreater(min(seen), 1000)
        self.assertEqual(len(seen), 20 * 150)
        self.assertEqual(len(set(seen)), len(seen))
        status, body = self.c.next_max_id("app", "nope", 100)
        self.assertCosIdError(status, json.loads(body), 404, "404")
        status, body = self.c.next_max_id("app", "order", 0)
        self.assertCosIdError(status, json.loads(body), 400, "400")


class CosIdAuthTest(unittest.TestCase):
    """With server.auth_token, the CosId routes want the bearer header, and creating a tag wants
    segment.auto_create."""

    def setUp(self):
        self.dirs = TempDirs()
        self.data = self.dirs.path("data")
        create_tag(self.data, "app.known", "--start", "1")
        self.s = Server(self.data, "--auth-token", "s3cret-token-0123456")

    def tearDown(self):
        self.s.stop()
        self.dirs.cleanup()

    def test_bearer_token_and_no_client_created_tags(self):
        anonymous = CosIdProxyClient(self.s)
        status, body = anonymous.distribute("ns", "a", False, 4, "PT1M")
        self.assertEqual((status, body["code"]), (401, "401"))
        c = CosIdProxyClient(self.s, headers={"Authorization": "Bearer s3cret-token-0123456"})
        self.assertEqual(c.distribute("ns", "a", False, 4, "PT1M")[0], 200)
        status, body = c.create_distributor("app", "new", 0, 10)
        self.assertEqual(status, 404)
        self.assertIn("segment.auto_create", json.loads(body)["msg"])
        self.assertEqual(c.create_distributor("app", "known", 0, 10), (200, ""))
        status, body = c.next_max_id("app", "known", 10)
        self.assertEqual((status, body), (200, "10"))


class CosIdMachineDistributorTest(unittest.TestCase):
    """Issue 40: CosId's own machine distributors were not read in place, so instances still on
    CosId's distributor and instances pointed at sekka could hold one machine id at once.
    Two sekka servers behind a load balancer share CosId's store (machines.store) with
    instances on CosId's own distributor: no machine id is held twice."""

    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.backend = None

    def tearDown(self):
        for s in self.servers:
            s.stop()
        if self.backend:
            self.backend.stop()
        self.dirs.cleanup()

    def fleet(self, store_uri):
        self.servers = [Server(self.dirs.path(f"s{i}"), "--machines-store", store_uri)
                        for i in range(2)]
        lb = Balancer([s.http_port for s in self.servers])
        self.addCleanup(lb.stop)
        return CosIdProxyClient(lb)

    def both_sides(self, native, proxy, native_guard):
        """24 instances ask at once, half on CosId's distributor, half through sekka; then each
        side guards the other's, an id given back on CosId's side goes to a sekka instance, and
        an id CosId's instance let lapse goes to a sekka instance while the old one is told it
        lost it."""
        held, errors = {}, []

        def cosid(i):
            try:
                held[f"cosid-{i}"] = native.distribute("orders", 6, f"10.1.0.{i}:80", 300_000)[0]
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

        def via_sekka(i):
            status, body = proxy.distribute("orders", f"10.2.0.{i}:80", False, 6, "PT5M")
            if status != 200:
                errors.append(body)
            else:
                held[f"sekka-{i}"] = body["machineId"]

        threads = [threading.Thread(target=f, args=(i,)) for i in range(12) for f in (cosid, via_sekka)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(held.values()), list(range(24)), held)
        for s in self.servers:  # every server sees CosId's holders
            self.assertEqual(CosIdProxyClient(s).guard("orders", "10.1.0.3:80", False, "PT5M")[0],
                             200)
        self.assertTrue(native_guard("10.2.0.3:80", held["sekka-3"]))  # and CosId sees sekka's
        # Given back on CosId's side: the next sekka instance may take it, never two at once.
        self.assertTrue(native.revert("orders", "10.1.0.0:80"))
        status, body = proxy.distribute("orders", "10.2.0.100:80", False, 6, "PT5M")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["machineId"], held["cosid-0"])
        # A holding CosId's distributor made carries no duration: judged by the asker's, as CosId
        # judges it, a CosId instance's id not guarded for 1 s goes to a sekka instance asking
        # with PT1S, and the old holder's next guard finds it lost. sekka's own holders (asked
        # with PT5M, kept in sekka's notes) are judged by their own.
        time.sleep(1.2)
        status, body = proxy.distribute("orders", "10.2.0.101:80", False, 6, "PT1S")
        self.assertEqual(status, 200, body)
        taken = body["machineId"]
        self.assertIn(taken, held.values())
        loser = [k for k, v in held.items() if v == taken][0]
        self.assertTrue(loser.startswith("cosid-"), (loser, "a sekka holder guarded with PT5M"))
        self.assertFalse(native_guard(f"10.1.0.{loser.split('-')[1]}:80", taken))

    def test_cosids_redis_distributor_in_place(self):
        self.backend = RedisStore(self.dirs.path("redis"))
        native = CosIdRedisDistributor(self.backend.client())
        proxy = self.fleet(f"redis://{self.backend.endpoints}/0?schema=cosid")
        self.both_sides(native, proxy, lambda instance, _: native.guard("orders", instance))

    def test_cosids_jdbc_distributor_in_place(self):
        self.backend = Mariadb(self.dirs.path("mariadb"))
        self.backend.sql(COSID_MACHINE_TABLE)
        native = CosIdJdbcDistributor(self.backend)
        proxy = self.fleet(self.backend.uri + "?schema=cosid&pad=4")
        self.both_sides(native, proxy, lambda instance, machine: native.guard("orders", instance, machine))
        names = [r[0] for r in self.backend.sql("SELECT name FROM cosid_machine")]
        self.assertEqual({len(n) for n in names}, {len("orders.0000")}, names)  # one padding
        # CosId's columns are 100 characters: a longer instance id is a 400 naming the limit.
        status, body = proxy.distribute("orders", "i" * 101, False, 6, "PT5M")
        self.assertEqual((status, body["code"]), (400, "400"), body)
        self.assertIn("instance ids of 100 characters", body["msg"])
        # A server told the fleet pads to 8 digits refuses the namespace, naming the row.
        self.assertRefused("eight", "?schema=cosid&pad=8", "is not named with pad=8")
        # Without pad, the server does not start, saying what to set.
        nopad = Server(self.dirs.path("nopad"), "--machines-store",
                       self.backend.uri + "?schema=cosid", wait=False)
        self.servers.append(nopad)
        self.assertFalse(nopad.wait_listening())
        self.assertIn("needs pad=4", nopad.stderr_text())
        # A table missing a column is named at the first call.
        self.backend.sql("ALTER TABLE cosid_machine DROP COLUMN revert_time")
        self.assertRefused("late", "?schema=cosid&pad=4", "missing a column")

    def assertRefused(self, name, params, why):
        """A new server on this MariaDB with `params` answers a distribute 503 naming `why`."""
        s = Server(self.dirs.path(name), "--machines-store", self.backend.uri + params)
        self.servers.append(s)
        status, body = CosIdProxyClient(s).distribute("orders", f"{name}:1", False, 6, "PT5M")
        self.assertEqual(status, 503, body)
        self.assertIn(why, body["msg"])


class LeafSnowflakeTest(unittest.TestCase):
    """Issue 40, point 2: Leaf's snowflake servers take worker ids from ZooKeeper; a sekka worker
    0 beside a Leaf worker 0 repeated ids. With worker.leaf_name, sekka's servers register in
    Leaf's registry as Leaf's do, and every server of both holds its own worker id."""

    NAME = "com.example.leaf.orders"

    def setUp(self):
        self.dirs = TempDirs()
        self.zk = ZooKeeper(self.dirs.path("zk"))
        self.servers, self.leafs = [], []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        for leaf in self.leafs:
            leaf.stop()
        self.zk.stop()
        self.dirs.cleanup()

    def leaf(self, port):
        self.leafs.append(LeafSnowflakeServer(self.zk.endpoints, self.NAME, "127.0.0.9", port))
        return self.leafs[-1]

    def sekka(self, name, address, *flags, wait=True):
        s = Server(self.dirs.path(name), "--worker-source", "zookeeper", "--coordinator",
                   f"zookeeper://{self.zk.endpoints}", "--layout", "leaf", "--leaf-name",
                   self.NAME, "--leaf-address", address, *flags, wait=wait)
        self.servers.append(s)
        return s

    @staticmethod
    def batch(s, n):
        return [int(i) for i in s.get_json(f"/v1/ids?count={n}")[1]["ids"]]

    def test_leaf_and_sekka_servers_hold_distinct_worker_ids_and_repeat_no_id(self):
        leafs = [self.leaf(8080), self.leaf(8081)]
        a = self.sekka("a", "127.0.0.1:9001")
        b = self.sekka("b", "127.0.0.1:9002")
        leafs.append(self.leaf(8082))  # a Leaf server started after sekka's takes the next
        workers = [leaf.worker_id for leaf in leafs] + [a.worker_id, b.worker_id]
        self.assertEqual(sorted(workers), [0, 1, 2, 3, 4])
        ids = []
        for _ in range(20):
            for leaf in leafs:
                ids += [leaf.next_id() for _ in range(500)]
            ids += self.batch(a, 2000) + self.batch(b, 2000)
        self.assertEqual(len(set(ids)), len(ids), "an id was issued twice")
        self.assertEqual({(i >> 12) & 1023 for i in ids}, set(workers))
        children = self.leafs[0].zk.get_children(f"/snowflake/{self.NAME}/forever")
        self.assertEqual(sorted(c.split("-")[0] for c in children),
                         ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.9:8080",
                          "127.0.0.9:8081", "127.0.0.9:8082"])

    def test_a_restart_takes_its_node_back_and_its_timestamp_is_the_hwm(self):
        a = self.sekka("a", "127.0.0.1:9001")
        before = self.batch(a, 1000)
        worker = a.worker_id
        a.stop()
        self.servers.remove(a)
        a = self.sekka("a", "127.0.0.1:9001")
        self.assertEqual(a.worker_id, worker)
        after = self.batch(a, 1000)
        self.assertGreater(min(after), max(before))
        zk = self.leaf(8080).zk
        (child,) = [c for c in zk.get_children(f"/snowflake/{self.NAME}/forever")
                    if c.startswith("127.0.0.1:9001-")]
        data = json.loads(zk.get(f"/snowflake/{self.NAME}/forever/{child}")[0])
        self.assertEqual((data["ip"], data["port"]), ("127.0.0.1", "9001"))
        issued_ms = (max(after) >> 22) + LeafSnowflakeServer.TWEPOCH
        self.assertGreaterEqual(data["timestamp"], issued_ms)

    def test_a_leaf_servers_address_is_never_taken_over(self):
        self.leaf(8080)
        leaf = self.leaf(8081)
        leaf.stop()
        self.leafs.remove(leaf)
        s = self.sekka("taker", "127.0.0.9:8081", wait=False)
        self.assertFalse(s.wait_listening(), "took a Leaf server's worker id")
        self.assertIn("was written by a Leaf server", s.stderr_text())

    def test_a_server_paused_past_its_session_serves_again(self):
        """The first campaign with Leaf's servers beside: a server whose ZooKeeper session ended
        while it was stopped died of a double free as it stored its hwm (the C client's
        zoo_multi, on a handle whose session expired, frees a path it does not own)."""
        s = self.sekka("a", "127.0.0.1:9001", "--lease-ttl", "3s")
        before = self.batch(s, 100)

        def over():  # serving again, or dead
            try:
                return s.get_json("/v1/ids?count=1")[0] == 200
            except OSError:
                return s.proc.poll() is not None
        for _ in range(2):
            s.proc.send_signal(signal.SIGSTOP)
            time.sleep(12)  # past the session's timeout (the TTL; ZooKeeper's least is 4 s)
            s.proc.send_signal(signal.SIGCONT)
            self.assertTrue(wait_for(over, 120), "not serving again")
            self.assertIsNone(s.proc.poll(), s.stderr_text()[-2000:])
        self.assertGreater(min(self.batch(s, 100)), max(before))

    def test_two_sekka_servers_at_one_address_are_refused(self):
        self.sekka("a", "127.0.0.1:9001")
        s = self.sekka("b", "127.0.0.1:9001", wait=False)
        self.assertFalse(s.wait_listening())
        self.assertIn("two servers registered as 127.0.0.1:9001", s.stderr_text())

    def test_a_server_of_the_cluster_without_the_registry_is_refused(self):
        self.sekka("a", "127.0.0.1:9001")
        s = Server(self.dirs.path("plain"), "--worker-source", "zookeeper", "--coordinator",
                   f"zookeeper://{self.zk.endpoints}", "--layout", "leaf", wait=False)
        self.servers.append(s)
        self.assertFalse(s.wait_listening())
        self.assertIn("beside Leaf " + self.NAME, s.stderr_text())

    def test_the_operations_guides_config_runs_beside_a_leaf_server(self):
        """docs/operations.md's "Coming from Leaf's snowflake mode": the configuration file
        its guide writes, as written but for the ZooKeeper address, beside a Leaf server (its
        holder and generator, as Leaf's code has them): a worker id of its own, no id twice."""
        with open(os.path.join(os.path.dirname(__file__), "..", "docs", "operations.md")) as f:
            guide = f.read()
        section = guide[guide.index("<!-- guide: leaf-snowflake -->"):]
        toml = section[section.index("<< 'END'\n") + 9:section.index("\nEND\n") + 1]
        self.assertIn('coordinator = "zookeeper://127.0.0.1:2181"', toml)
        toml = toml.replace("127.0.0.1:2181", self.zk.endpoints)
        config = self.dirs.path("leaf.toml")
        with open(config, "w") as f:
            f.write(toml)
        leaf = self.leaf(8080)
        s = Server(self.dirs.path("guide"), "--config", config)
        self.servers.append(s)
        self.assertNotEqual(s.worker_id, leaf.worker_id)
        ids = self.batch(s, 1000) + [leaf.next_id() for _ in range(1000)]
        self.assertEqual(len(set(ids)), 2000)
        # The guide's last step: the Leaf server retired, sekka's restarts on its own node (a
        # second one joins), and neither takes the retired server's worker id.
        leaf.stop()
        self.leafs.remove(leaf)
        worker = s.worker_id
        s.stop()
        self.servers.remove(s)
        s = Server(self.dirs.path("guide"), "--config", config)
        self.servers.append(s)
        self.assertEqual(s.worker_id, worker)
        other = self.sekka("b", "127.0.0.1:9002")
        self.assertNotIn(other.worker_id, (leaf.worker_id, worker))
        ids += self.batch(s, 1000) + self.batch(other, 1000)
        self.assertEqual(len(set(ids)), 4000)

    def test_sequence_zero_is_never_sekkas(self):
        """Review: a Leaf server that finds no registry runs as worker 0 whatever sequence its
        node gets; a sekka server first in an empty registry skips sequence 0."""
        s = self.sekka("first", "127.0.0.1:9001")
        self.assertGreater(s.worker_id, 0)
        self.assertNotEqual(self.leaf(8080).worker_id, s.worker_id)

    def test_a_cluster_bound_without_the_registry_refuses_a_server_beside_leaf(self):
        """Review: a cluster whose plain servers take the lowest free ids (Leaf's among them)
        accepted a server beside Leaf, and every plain server after it."""
        plain = Server(self.dirs.path("plain"), "--worker-source", "zookeeper", "--coordinator",
                       f"zookeeper://{self.zk.endpoints}", "--layout", "leaf")
        self.servers.append(plain)
        s = self.sekka("beside", "127.0.0.1:9001", wait=False)
        self.assertFalse(s.wait_listening())
        self.assertIn("without Leaf's registry", s.stderr_text())

    def test_a_leaf_write_to_a_sekka_node_ends_its_lease_for_good(self):
        """A Leaf server given a sekka server's address (a misconfiguration) rewrites its node:
        the sekka server stops at its next hwm store and never takes that worker id back."""
        s = self.sekka("a", "127.0.0.1:9001", "--lease-ttl", "4s")
        zk = self.leaf(8080).zk
        (child,) = [c for c in zk.get_children(f"/snowflake/{self.NAME}/forever")
                    if c.startswith("127.0.0.1:9001-")]
        node = f"/snowflake/{self.NAME}/forever/{child}"
        zk.set(node, json.dumps({"ip": "127.0.0.1", "port": "9001",
                                 "timestamp": int(time.time() * 1000)}).encode())
        self.assertTrue(wait_for(lambda: s.get_json("/v1/info")[1]["lease"]["state"] != "held",
                                 60), "the lease outlived a Leaf server's write")
        self.assertIn("was written by another process", s.stderr_text())
        s.stop()
        self.servers.remove(s)
        again = self.sekka("a", "127.0.0.1:9001", wait=False)  # the same slot, restarted
        self.assertFalse(again.wait_listening(), "took a worker id a Leaf server wrote")
        self.assertIn("was written by a Leaf server", again.stderr_text())

    def test_registries_leafs_parser_breaks_on_are_refused(self):
        zk = self.leaf(8080).zk
        forever = f"/snowflake/{self.NAME}/forever"
        zk.create(f"{forever}/127.0.0.1:9001-", b"{}", sequence=True)
        zk.create(f"{forever}/127.0.0.1:9001-", b"{}", sequence=True)
        s = self.sekka("twice", "127.0.0.1:9001", wait=False)
        self.assertFalse(s.wait_listening())
        self.assertIn("has two nodes of 127.0.0.1:9001", s.stderr_text())
        zk.create(f"{forever}/not-a-sequence", b"{}")
        s = self.sekka("malformed", "127.0.0.1:9002", wait=False)
        self.assertFalse(s.wait_listening())
        self.assertEqual(s.proc.returncode, 2)  # refused as a bad setting, in one line
        self.assertIn('holds a node "not-a-sequence" that is not ip:port-sequence',
                      s.stderr_text())

    def test_a_sequence_past_worker_1023_is_refused(self):
        zk = self.leaf(8080).zk
        for i in range(1024):
            zk.create(f"/snowflake/{self.NAME}/forever/127.0.1.{i // 250}:{1000 + i}-", b"{}",
                      sequence=True)
        s = self.sekka("late", "127.0.0.1:9001", wait=False)
        self.assertFalse(s.wait_listening())
        self.assertIn("past worker id 1023", s.stderr_text())

    def test_bad_settings_are_named(self):
        cases = [
            (["--leaf-name", "a-b", "--leaf-address", "127.0.0.1:9001"],
             'worker.leaf_name "a-b" is not valid'),
            (["--leaf-name", "orders", "--leaf-address", "localhost:9001"],
             'worker.leaf_address "localhost:9001" is not valid'),
            (["--leaf-name", "orders"], "worker.leaf_name and worker.leaf_address go together"),
            (["--leaf-name", "..", "--leaf-address", "127.0.0.1:9001"],
             'worker.leaf_name ".." is not valid'),
        ]
        for flags, message in cases:
            p = subprocess.run([SEKKA, "serve", "--worker-source", "zookeeper", "--coordinator",
                                f"zookeeper://{self.zk.endpoints}", "--layout", "leaf", *flags,
                                "--print-config"], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, (flags, p.stderr))
            self.assertIn(message, p.stderr)
        p = subprocess.run([SEKKA, "serve", "--worker-source", "zookeeper", "--coordinator",
                            f"zookeeper://{self.zk.endpoints}", "--leaf-name", "orders",
                            "--leaf-address", "127.0.0.1:9001", "--print-config"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("allowed leaf (Leaf's epoch and bits", p.stderr)


if __name__ == "__main__":
    unittest.main()
