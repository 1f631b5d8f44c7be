#!/usr/bin/python3
"""Twitter Snowflake's Thrift service on the real binary. The client is generated from the
original IDL (tests/data/snowflake.thrift) by Debian's thrift-compiler and run by Debian's
python3-thrift over TFramedTransport and TBinaryProtocol, as Twitter's clients spoke to it.
Run with /usr/bin/python3; SEKKA_BIN names the binary."""

import concurrent.futures
import os
import socket
import struct
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import Server, TempDirs, generated_thrift  # noqa: E402

IDL = os.path.join(os.path.dirname(__file__), "data", "snowflake.thrift")
generated_thrift(IDL)

from snowflake import Snowflake  # noqa: E402
from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.Thrift import TApplicationException  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402


def client(port, strict=True):
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(10000)
    transport = TTransport.TFramedTransport(sock)
    protocol = TBinaryProtocol.TBinaryProtocol(transport, strictRead=strict, strictWrite=strict)
    transport.open()
    return Snowflake.Client(protocol), transport


def raw_exchange(port, payload, timeout=5):
    """Sends raw bytes; returns everything the server sent before it closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                return b"".join(chunks)
            chunks.append(data)


def call_frame(name, seqid=1, args=b"\x00"):
    body = struct.pack(">I", 0x80010001) + struct.pack(">I", len(name)) + name + \
        struct.pack(">i", seqid) + args
    return struct.pack(">i", len(body)) + body


class ThriftTestCase(unittest.TestCase):
    faketime = False

    def setUp(self):
        self.dirs = TempDirs()
        self.clock = None
        if self.faketime:
            self.clock = self.dirs.path("faketime")
            self.set_clock("+0")
        self.s = Server(self.dirs.path("data"), "--thrift", "127.0.0.1:0", "--worker-source",
                        "static", "--worker-id", "5", "--datacenter-id", "3", "--layout",
                        "twitter", "--on-clock-backwards", "fail", faketime_file=self.clock)

    def tearDown(self):
        self.s.stop()
        self.dirs.cleanup()

    def set_clock(self, offset):
        with open(self.clock + ".tmp", "w") as f:
            f.write(offset + "\n")
        os.replace(self.clock + ".tmp", self.clock)


class ThriftTest(ThriftTestCase):

    def test_every_method_over_framed_binary(self):
        c, t = client(self.s.thrift_port)
        try:
            self.assertEqual(c.get_worker_id(), 5)
            self.assertEqual(c.get_datacenter_id(), 3)
            ts = c.get_timestamp()
            self.assertLess(abs(ts - int(time.time() * 1000)), 60_000)
            ids = [c.get_id("my-service-2") for _ in range(100)]
            self.assertEqual(ids, sorted(set(ids)))
            # The id decodes to this worker in the twitter layout (41 | 5 | 5 | 12).
            self.assertEqual((ids[0] >> 12) & 31, 5)
            self.assertEqual((ids[0] >> 17) & 31, 3)
        finally:
            t.close()

    def test_old_style_messages_are_understood(self):
        c, t = client(self.s.thrift_port, strict=False)
        try:
            self.assertGreater(c.get_id("old"), 0)
            self.assertEqual(c.get_worker_id(), 5)
        finally:
            t.close()

    def test_four_clients_get_distinct_ids_shared_with_resp(self):
        def run(_):
            c, t = client(self.s.thrift_port)
            try:
                return [c.get_id("load") for _ in range(10_000)]
            finally:
                t.close()

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            lists = list(pool.map(run, range(4)))
        r = redis.Redis(host="127.0.0.1", port=self.s.resp_port)
        resp_ids = [int(i) for i in r.execute_command("ID.BATCH", 1000)]
        every = [i for ids in lists for i in ids] + resp_ids
        self.assertEqual(len(every), 41_000)
        self.assertEqual(len(set(every)), len(every))
        for ids in lists:
            self.assertEqual(ids, sorted(ids))
        _, _, text = self.s.get("/metrics")
        self.assertIn('sekka_requests_total{protocol="thrift",command="id",result="ok"} 40000',
                      text)

    def test_a_bad_user_agent_is_an_application_exception(self):
        c, t = client(self.s.thrift_port)
        try:
            for agent in ["", "1abc", "has space", "under_score", "é"]:
                with self.assertRaises(TApplicationException) as e:
                    c.get_id(agent)
                self.assertEqual(e.exception.type, TApplicationException.INTERNAL_ERROR)
                self.assertIn("useragent", e.exception.message)
                self.assertIn("allowed a letter", e.exception.message)
            self.assertGreater(c.get_id("a-B-9"), 0)  # the connection goes on
        finally:
            t.close()

    def test_an_unknown_method_is_unknown_method(self):
        reply = raw_exchange_one(self.s.thrift_port, call_frame(b"get_ids", seqid=7))
        name, seqid, mtype, payload = parse_reply(reply)
        self.assertEqual((name, seqid, mtype), (b"get_ids", 7, 3))
        self.assertIn(b"Unknown function get_ids", payload)

    def test_garbage_and_oversized_frames_close_the_connection_and_the_server_goes_on(self):
        cases = [
            struct.pack(">i", 1 << 30) + b"xxxx",       # a 1 GiB frame
            struct.pack(">i", -5) + b"xxxx",            # a negative length
            struct.pack(">i", 0),                       # an empty frame
            struct.pack(">i", 8) + b"\x12\x34\x56\x78garb",  # not a message
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",       # another protocol: a 1.1 GB "frame"
            call_frame(b"get_id", args=b"\x0f\x00\x01\x0b\x7f\xff\xff\xff"),  # a list that lies
            call_frame(b"get_id", args=b"\x0c\x00\x01" * 40 + b"\x00"),  # nested too deep
            call_frame(b"get_id") + b"trailing",        # bytes after the message, in the frame
        ]
        for payload in cases:
            data = raw_exchange(self.s.thrift_port, payload)
            self.assertLess(len(data), 512, payload)  # at most one exception, then closed
        c, t = client(self.s.thrift_port)
        try:
            self.assertGreater(c.get_id("still-here"), 0)
        finally:
            t.close()
        self.assertEqual(self.s.proc.poll(), None)

    def test_a_pipelining_client_that_does_not_read_is_bounded_and_gets_every_reply(self):
        """100,000 get_id calls in one stream, nothing read for 2 s: the connection stops being
        served once about 1 MiB of replies waits (back-pressure), other clients are served
        meanwhile, and every reply arrives, in order, once the client reads."""
        calls = 100_000
        frame = call_frame(b"get_id", args=b"\x0b\x00\x01" + struct.pack(">I", 4) + b"pipe\x00")
        before = self.s.rss_kib()
        sock = socket.create_connection(("127.0.0.1", self.s.thrift_port), timeout=30)
        try:
            sender = threading.Thread(target=sock.sendall, args=(frame * calls,))
            sender.start()
            time.sleep(2)
            c, t = client(self.s.thrift_port)
            try:
                self.assertGreater(c.get_id("other"), 0)
            finally:
                t.close()
            self.assertLess(self.s.rss_kib() - before, 64 * 1024)
            data = b""
            ids = []
            while len(ids) < calls:
                chunk = sock.recv(1 << 20)
                self.assertTrue(chunk, f"closed after {len(ids)} replies")
                data += chunk
                while len(data) >= 4:
                    (n,) = struct.unpack(">i", data[:4])
                    if len(data) < 4 + n:
                        break
                    name, seqid, mtype, payload = parse_reply(data[4:4 + n])
                    self.assertEqual((name, mtype), (b"get_id", 2))
                    ids.append(struct.unpack(">q", payload[3:11])[0])
                    data = data[4 + n:]
            sender.join()
        finally:
            sock.close()
        self.assertEqual(ids, sorted(set(ids)))

    def test_thrift_with_an_auth_token_is_refused(self):
        bad = Server(self.dirs.path("bad"), "--thrift", "127.0.0.1:0", "--auth-token", "x-token-0123456789",
                     wait=False)
        self.assertFalse(bad.wait_listening())
        self.assertEqual(bad.proc.returncode, 2)
        self.assertIn("server.thrift_listen cannot be used with server.auth_token",
                      bad.stderr_text())
        bad.stop()


class ThriftClockTest(ThriftTestCase):
    """libfaketime steps the server's clock (not under ThreadSanitizer, which refuses the
    preload)."""

    faketime = True

    def test_a_clock_fault_is_an_application_exception(self):
        c, t = client(self.s.thrift_port)
        try:
            first = c.get_id("before")
            self.set_clock("-5")
            with self.assertRaises(TApplicationException) as e:
                for _ in range(200):  # libfaketime rereads the file now and then
                    c.get_id("during")
            self.assertIn("clock_moved_backwards", e.exception.message)
            self.set_clock("+0")
            for _ in range(200):
                try:
                    after = c.get_id("after")
                    break
                except TApplicationException:
                    time.sleep(0.05)
            self.assertGreater(after, first)
        finally:
            t.close()


def raw_exchange_one(port, payload, timeout=5):
    """Sends one frame and reads one framed reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        head = b""
        while len(head) < 4:
            head += s.recv(4 - len(head))
        (length,) = struct.unpack(">i", head)
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
        return body


def parse_reply(body):
    (word,) = struct.unpack(">I", body[:4])
    (n,) = struct.unpack(">I", body[4:8])
    name = body[8:8 + n]
    (seqid,) = struct.unpack(">i", body[8 + n:12 + n])
    return name, seqid, word & 0xff, body[12 + n:]


if __name__ == "__main__":
    unittest.main()
