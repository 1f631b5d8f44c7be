"""The campaign's clients: processes that send a random mix of requests over RESP (python3-redis)
and HTTP (http.client) to random servers and record every outcome.

Each client writes two binary files (little-endian) into the history directory:
  ops-<c>.bin  one record per request: OP_RECORD
  ids-<c>.bin  per request that returned ids: IDS_HEADER, then `runs` pairs (first, last) of
               consecutive ids, in the order received
A request that timed out or failed closes its connection, so that a late reply can never be
read as the answer to the next request."""

import http.client
import json
import os
import random
import socket
import struct
import time

import redis

OP_RECORD = struct.Struct("<dfBBBB")    # start (monotonic s), latency (s), server, op, outcome, code
IDS_HEADER = struct.Struct("<IBBH")     # op index in ops file, space, server, runs
RUN = struct.Struct("<qq")

# Operations (the op byte).
OPS = ["resp_next", "resp_batch", "http_id", "http_ids", "resp_seg", "resp_seg_batch",
       "http_seg", "resp_decode", "http_decode", "resp_strict", "http_strict"]
WEIGHTS = [20, 15, 10, 10, 15, 5, 10, 8, 7, 8, 4]
SNOWFLAKE_OPS = {0, 1, 2, 3}
SEGMENT_OPS = {4, 5, 6}
DECODE_OPS = {7, 8}
STRICT_OPS = {9, 10}
# The id space of strict tag STRICT_TAG (snowflake ids are space 0, segment tag k is 1 + k).
STRICT_SPACE = 255
STRICT_TAG = "campaign-strict"

# Outcomes.
OK, ERROR, TIMEOUT, TRANSPORT, MALFORMED = range(5)
OUTCOMES = ["ok", "error", "timeout", "transport", "malformed"]

# Error codes a client may see for the valid requests the campaign sends (docs/contract.md
# section 6): index 0 is "none"; the last entry is "not one of these", which fails the check.
CODES = ["", "clock_moved_backwards", "lease_lost", "unavailable", "undocumented"]
RESP_PREFIX = {"CLOCKBACKWARDS": 1, "LEASELOST": 2, "UNAVAILABLE": 3}
HTTP_CODE = {"clock_moved_backwards": 1, "lease_lost": 2, "unavailable": 3}
UNDOCUMENTED = 4


def runs_of(ids):
    """Maximal runs of consecutive integers, in order: [5,6,7,9] -> [(5,7),(9,9)]."""
    runs = []
    for v in ids:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return runs


class Failure(Exception):
    def __init__(self, outcome, code=0, text=""):
        super().__init__(text)
        self.outcome, self.code, self.text = outcome, code, text


def parse_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Failure(MALFORMED, text=f"not an integer id: {value!r}"[:200])


class Client:
    def __init__(self, index, seed, servers, tags, timeout, history_dir, rate=0):
        self.index = index
        self.rate = rate  # requests a second at most; 0: as fast as they are answered
        self.rng = random.Random(seed * 7919 + index)
        self.servers = servers          # [(http_port, resp_port)]
        self.tags = tags
        self.timeout = timeout
        self.redis = [None] * len(servers)
        self.http = [None] * len(servers)
        self.ops = open(os.path.join(history_dir, f"ops-{index}.bin"), "wb")
        self.ids = open(os.path.join(history_dir, f"ids-{index}.bin"), "wb")
        self.samples = open(os.path.join(history_dir, f"errors-{index}.txt"), "w")
        self.sampled = set()
        self.count = 0
        self.last_id = [None] * len(servers)

    # Connections: made on first use, dropped after any failure.
    def rconn(self, s):
        if self.redis[s] is None:
            self.redis[s] = redis.Redis(host="127.0.0.1", port=self.servers[s][1],
                                        socket_timeout=self.timeout,
                                        socket_connect_timeout=self.timeout,
                                        retry_on_timeout=False, single_connection_client=True)
        return self.redis[s]

    def hconn(self, s):
        if self.http[s] is None:
            self.http[s] = http.client.HTTPConnection("127.0.0.1", self.servers[s][0],
                                                      timeout=self.timeout)
        return self.http[s]

    def drop(self, s):
        for pool in (self.redis, self.http):
            if pool[s] is not None:
                try:
                    pool[s].close()
                except Exception:  # noqa: BLE001 - closing a broken connection may fail any way
                    pass
                pool[s] = None

    def resp(self, s, *args):
        try:
            return self.rconn(s).execute_command(*args)
        except redis.exceptions.TimeoutError as e:
            raise Failure(TIMEOUT, text=str(e))
        except redis.exceptions.ResponseError as e:
            text = str(e)
            prefix = text.split(" ", 1)[0]
            raise Failure(ERROR, RESP_PREFIX.get(prefix, UNDOCUMENTED), text)
        except (redis.exceptions.ConnectionError, OSError) as e:
            raise Failure(TRANSPORT, text=str(e))

    def get(self, s, path):
        try:
            conn = self.hconn(s)
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
        except socket.timeout as e:
            raise Failure(TIMEOUT, text=str(e))
        except (http.client.HTTPException, OSError) as e:
            raise Failure(TRANSPORT, text=str(e))
        try:
            doc = json.loads(body)
        except ValueError:
            raise Failure(MALFORMED, text=f"HTTP {r.status}: {body[:120]!r}")
        if r.status != 200:
            code = doc.get("error", {}).get("code", "") if isinstance(doc, dict) else ""
            raise Failure(ERROR, HTTP_CODE.get(code, UNDOCUMENTED), f"HTTP {r.status}: {code}")
        return doc

    def run_op(self, s, op):
        """Performs `op` on server `s`; returns (space, ids) or None for a decode."""
        rng = self.rng
        if op == 0:
            return 0, [parse_int(self.resp(s, "ID.NEXT"))]
        if op == 1:
            n = rng.randint(1, 50)
            reply = self.resp(s, "ID.BATCH", n)
            if not isinstance(reply, list) or len(reply) != n:
                raise Failure(MALFORMED, text=f"ID.BATCH {n}: {str(reply)[:100]}")
            return 0, [parse_int(v) for v in reply]
        if op == 2:
            return 0, [parse_int(self.get(s, "/v1/id").get("id"))]
        if op == 3:
            n = rng.randint(1, 50)
            ids = self.get(s, f"/v1/ids?count={n}").get("ids")
            if not isinstance(ids, list) or len(ids) != n:
                raise Failure(MALFORMED, text=f"/v1/ids count={n}: {str(ids)[:100]}")
            return 0, [parse_int(v) for v in ids]
        if op in STRICT_OPS:
            n = rng.randint(1, 10)
            if op == 9:
                reply = self.resp(s, "STRICT.BATCH", STRICT_TAG, n)
            else:
                reply = self.get(s, f"/v1/strict/{STRICT_TAG}?count={n}").get("ids")
            if not isinstance(reply, list) or len(reply) != n:
                raise Failure(MALFORMED, text=f"strict {n}: {str(reply)[:100]}")
            return STRICT_SPACE, [parse_int(v) for v in reply]
        t = rng.randrange(len(self.tags))
        if op == 4:
            return 1 + t, [parse_int(self.resp(s, "SEG.NEXT", self.tags[t]))]
        if op == 5:
            n = rng.randint(2, 20)
            reply = self.resp(s, "SEG.NEXT", self.tags[t], n)
            if not isinstance(reply, list) or len(reply) != n:
                raise Failure(MALFORMED, text=f"SEG.NEXT {n}: {str(reply)[:100]}")
            return 1 + t, [parse_int(v) for v in reply]
        if op == 6:
            doc = self.get(s, f"/v1/segment/{self.tags[t]}")
            return 1 + t, [parse_int(doc.get("id"))]
        # Decodes of an id this client had from the same server.
        last = self.last_id[s] or 1
        if op == 7:
            reply = self.resp(s, "ID.DECODE", last)
            if not isinstance(reply, list) or len(reply) < 10:
                raise Failure(MALFORMED, text=f"ID.DECODE: {str(reply)[:100]}")
            return None
        doc = self.get(s, f"/v1/decode/{last}")
        if "worker" not in doc:
            raise Failure(MALFORMED, text=f"/v1/decode: {str(doc)[:100]}")
        return None

    def sample(self, op, f):
        key = (op, f.outcome, f.code, f.text[:40])
        if len(self.sampled) < 200 and key not in self.sampled:
            self.sampled.add(key)
            self.samples.write(f"{OPS[op]}\t{OUTCOMES[f.outcome]}\t{CODES[f.code]}\t{f.text}\n")

    def run(self, deadline):
        n = len(self.servers)
        began = time.monotonic()
        while time.monotonic() < deadline:
            if self.rate:  # paced: the suite's short campaigns leave the machine's CPU to others
                wait = began + self.count / self.rate - time.monotonic()
                if wait > 0:
                    time.sleep(min(wait, max(0, deadline - time.monotonic())))
            s = self.rng.randrange(n)
            op = self.rng.choices(range(len(OPS)), WEIGHTS)[0]
            start = time.monotonic()
            outcome, code, got = OK, 0, None
            try:
                got = self.run_op(s, op)
            except Failure as f:
                outcome, code = f.outcome, f.code
                self.sample(op, f)
            except Exception as e:  # noqa: BLE001 - anything else a client library raises
                outcome = MALFORMED
                self.sample(op, Failure(MALFORMED, text=f"{type(e).__name__}: {e}"))
            latency = time.monotonic() - start
            self.ops.write(OP_RECORD.pack(start, latency, s, op, outcome, code))
            if got is not None:
                space, ids = got
                runs = runs_of(ids)
                self.ids.write(IDS_HEADER.pack(self.count, space, s, len(runs)))
                for first, last in runs:
                    self.ids.write(RUN.pack(first, last))
                if space == 0:
                    self.last_id[s] = ids[-1]
            self.count += 1
            if outcome != OK:
                self.drop(s)
                if outcome in (TIMEOUT, TRANSPORT):
                    time.sleep(0.02)  # a server that is down: do not spin on refusals
        for s in range(n):
            self.drop(s)
        for f in (self.ops, self.ids, self.samples):
            f.close()


def client_main(index, seed, servers, tags, timeout, history_dir, deadline, rate=0):
    """Entry point of one client process (multiprocessing)."""
    Client(index, seed, servers, tags, timeout, history_dir, rate).run(deadline)
