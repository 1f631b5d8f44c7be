#!/usr/bin/python3
"""The peers' HTTP APIs on the real binary: didi's tinyid (and, in CosIdTest, the CosId proxy),
spoken to with curl and http.client in the shapes the peers' clients parse. Run with
/usr/bin/python3 (python3-redis); SEKKA_BIN names the binary."""

import http.client
import json
import os
import subprocess
import sys
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import SEKKA, Server, TempDirs  # noqa: E402


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
                                ("bizType=bad%20tag", "not valid")]:
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
        self.s = Server(self.data, "--auth-token", "s3cret")

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
        reply = json.loads(request(self.s, "GET", "/tinyid/id/nextId?bizType=test&token=s3cret")[2])
        self.assertEqual(reply["code"], 200)
        reply = json.loads(request(self.s, "GET", "/tinyid/id/nextId?bizType=test",
                                   headers={"Authorization": "Bearer s3cret"})[2])
        self.assertEqual(reply["code"], 200)
        # sekka's own routes still want the header: a ?token= there is not a credential.
        self.assertEqual(request(self.s, "GET", "/v1/segment/test?token=s3cret")[0], 401)


if __name__ == "__main__":
    unittest.main()
