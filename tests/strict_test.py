#!/usr/bin/python3
"""End-to-end tests of strict ids (include/sekka/strict.h): three real `sekka serve` processes on
a real etcd or ZooKeeper, clients over python3-redis sending to any server, and every pair of
requests checked for real-time order (a request that completed before another began has smaller
ids), with the leader killed or paused past its TTL under load."""

import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import (SEKKA, Etcd, RedisStore, ReplyServer, Server, TempDirs,  # noqa: E402
                           ZooKeeper, clockshift_env, free_port, wait_for)

TTL_S = 4
# strict.tags of every server here: the tags the tests ask for.
STRICT_TAGS = ",".join(["chat", "a", "b", "brand-new"] + [f"t{i}" for i in range(40)])


def order_violations(records):
    """The requests whose smallest id is not above the largest id of every request that
    completed before they began: records are (sent, answered, ids), times from one monotonic
    clock. A sweep over completions in time order, O(n log n)."""
    done = sorted(records, key=lambda r: r[1])
    bad, j, largest = [], 0, 0
    for r in sorted(records, key=lambda r: r[0]):
        while j < len(done) and done[j][1] < r[0]:
            largest = max(largest, max(done[j][2]))
            j += 1
        if min(r[2]) <= largest:
            bad.append((r, largest))
    return bad


class Load:
    """Clients sending STRICT.BATCH of 1 to 5 ids to random servers until stopped, each request
    recorded as (sent, answered, ids) or as an error with its time."""

    def __init__(self, servers, threads=6, timeout=2.0, tag="chat"):
        self.servers, self.timeout, self.tag = servers, timeout, tag
        self.records, self.errors = [], []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(k,)) for k in range(threads)]
        for t in self.threads:
            t.start()

    def run(self, k):
        rng = random.Random(k)
        clients = [redis.Redis(host="127.0.0.1", port=s.resp_port, socket_timeout=self.timeout)
                   for s in self.servers]
        while not self.stop.is_set():
            i = rng.randrange(len(clients))
            sent = time.monotonic()
            try:
                ids = clients[i].execute_command("STRICT.BATCH", self.tag, rng.randint(1, 5))
            except (redis.exceptions.RedisError, OSError) as e:
                with self.lock:
                    self.errors.append((sent, i, str(e)[:120]))
                time.sleep(0.01)
                continue
            with self.lock:
                self.records.append((sent, time.monotonic(), ids))

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
        return self.records


class CoordinatedServers:
    """Servers (self.servers, stopped after) on a coordinator of `source` (self.coord; ZooKeeper
    with its defaults, maxClientCnxns 60 among them)."""
    source = None

    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.coord = {"etcd": Etcd, "zookeeper": ZooKeeper}[self.source](self.dirs.path("coord"))

    def tearDown(self):
        for s in self.servers:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGCONT)
            s.stop()
        self.coord.stop()
        self.dirs.cleanup()


class StrictTests(CoordinatedServers):
    def start_three(self):
        for i in range(3):
            self.servers.append(Server(
                self.dirs.path(f"s{i}"), "--worker-source", self.source, "--coordinator",
                f"{self.source}://{self.coord.endpoints}", "--lease-ttl", f"{TTL_S}s",
                "--strict-tags", STRICT_TAGS))
        # The first request makes s0 the leader.
        first = redis.Redis(host="127.0.0.1", port=self.servers[0].resp_port)
        self.assertEqual(first.execute_command("STRICT.NEXT", "chat"), 1)
        return self.servers

    def check(self, records, at_least):
        ids = [i for r in records for i in r[2]]
        self.assertGreater(len(records), at_least)
        self.assertEqual(len(ids), len(set(ids)), "a strict id was issued twice")
        for r in records:
            self.assertEqual(r[2], list(range(r[2][0], r[2][0] + len(r[2]))), "not consecutive")
        bad = order_violations(records)
        self.assertEqual(bad[:3], [], f"{len(bad)} requests broke real-time order")

    def metric(self, server, name):
        m = re.search(rf"^{re.escape(name)} (\d+)$", server.get("/metrics")[2], re.M)
        return int(m.group(1)) if m else 0

    def test_any_server_answers_in_real_time_order_and_followers_coalesce(self):
        servers = self.start_three()
        load = Load(servers, threads=8)
        time.sleep(3)
        self.check(load.finish(), 300)
        self.assertEqual(load.errors, [])
        forwarded = sum(self.metric(s, 'sekka_strict_requests_total{path="forwarded"}')
                        for s in servers[1:])
        calls = sum(self.metric(s, "sekka_strict_leader_calls_total") for s in servers[1:])
        self.assertGreater(forwarded, 100)
        self.assertLessEqual(calls, forwarded)
        self.assertEqual(self.metric(servers[0], "sekka_strict_elections_total"), 1)

    def test_a_tag_declared_with_strict_create_is_served_everywhere_without_a_restart(self):
        # Issue 44: a new strict tag needed strict.tags changed and every server restarted.
        servers = self.start_three()
        client = redis.Redis(host="127.0.0.1", port=servers[2].resp_port)
        with self.assertRaisesRegex(redis.exceptions.ResponseError, "not served here"):
            client.execute_command("STRICT.NEXT", "declared")
        made = subprocess.run([SEKKA, "strict", "create", "declared", "--worker-source",
                               self.source, "--coordinator",
                               f"{self.source}://{self.coord.endpoints}"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual((made.returncode, made.stdout, made.stderr), (0, "created\n", ""))

        def everyone_serves():
            try:
                return all(redis.Redis(host="127.0.0.1", port=s.resp_port)
                           .execute_command("STRICT.NEXT", "declared") for s in servers)
            except redis.exceptions.ResponseError:
                return False
        self.assertTrue(wait_for(everyone_serves, 30))
        load = Load(servers, tag="declared")
        time.sleep(2)
        self.check(load.finish(), 100)
        self.assertEqual(load.errors, [])

    def test_a_killed_leader_is_replaced_within_the_ttl_and_order_holds(self):
        servers = self.start_three()
        load = Load(servers)
        time.sleep(1)
        servers[0].stop(signal.SIGKILL)
        killed = time.monotonic()
        time.sleep(TTL_S + 4)
        records = load.finish()
        self.check(records, 100)
        # The survivors answer again within the TTL and a few seconds of the kill.
        after = [r[1] for r in records if r[0] > killed]
        self.assertTrue(after, "nobody answered after the leader was killed")
        self.assertLess(min(after) - killed, TTL_S + 3)

    def test_a_leader_paused_past_its_ttl_never_answers_out_of_order(self):
        servers = self.start_three()
        load = Load(servers, timeout=1.0)
        time.sleep(1)
        servers[0].proc.send_signal(signal.SIGSTOP)
        time.sleep(TTL_S + 2)  # another server leads by now, and has answered
        # A request that reaches the old leader while it is still stopped: it begins after the
        # new leader's answers, so an old leader answering from its own window breaks the order.
        probe, probe_errors = [], []

        def ask_old_leader():
            r = redis.Redis(host="127.0.0.1", port=servers[0].resp_port, socket_timeout=15)
            sent = time.monotonic()
            try:
                ids = r.execute_command("STRICT.BATCH", "chat", 1)
            except redis.exceptions.ResponseError as e:  # refused while it finds the leader
                probe_errors.append(str(e))
                return
            except redis.exceptions.ConnectionError:  # its idle timeout ran out in the pause
                return
            probe.append((sent, time.monotonic(), ids))

        prober = threading.Thread(target=ask_old_leader)
        prober.start()
        time.sleep(0.3)
        servers[0].proc.send_signal(signal.SIGCONT)
        prober.join(timeout=20)
        time.sleep(1)
        records = load.finish()
        # It answers with ids above every earlier answer, or refuses (a slow build may not find
        # the new leader within the call's deadline); never with ids out of order.
        self.check(records + probe, 100)
        for e in probe_errors:
            self.assertTrue(e.startswith("UNAVAILABLE"), e)
        # It answers again, as a follower of the new leader.
        r = redis.Redis(host="127.0.0.1", port=servers[0].resp_port)
        self.assertGreater(r.execute_command("STRICT.NEXT", "chat"), max(max(x[2]) for x in records))


class Counter:
    """A TCP relay on 127.0.0.1 to `port` that counts the connections it relays."""

    def __init__(self, port):
        self.port, self.connections = port, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(("127.0.0.1", self.port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    @staticmethod
    def pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.listener.close()


class StrictNetworkTest(unittest.TestCase):
    """Forwarding across a real network's settings: TLS on every listener, with client
    certificates and a token; an address other servers reach a server at that is not its
    listen address (strict.advertise)."""

    TOKEN = "strict-token-0123456789"

    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.coord = Etcd(self.dirs.path("coord"))

    def tearDown(self):
        for s in self.servers:
            s.stop()
        self.coord.stop()
        self.dirs.cleanup()

    def server(self, name, *flags, env=None, resp="127.0.0.1:0", ttl_s=TTL_S):
        s = Server(self.dirs.path(name), "--worker-source", "etcd", "--coordinator",
                   f"etcd://{self.coord.endpoints}", "--lease-ttl", f"{ttl_s}s",
                   "--strict-tags", STRICT_TAGS, *flags, env=env, resp=resp)
        self.servers.append(s)
        return s

    def test_forwarding_over_tls_with_client_certificates(self):
        certs = self.dirs.path("tls")
        subprocess.run([os.path.join(os.path.dirname(__file__), "..", "scripts", "test_certs.sh"),
                        certs], check=True)
        cert = lambda name: os.path.join(certs, name)  # noqa: E731
        tls = ["--tls-cert-file", cert("server.crt"), "--tls-key-file", cert("server.key"),
               "--tls-client-ca-file", cert("ca.crt"), "--auth-token", self.TOKEN]
        leader = self.server("leader", *tls, env={"SEKKA_STRICT_TLS_CA_FILE": cert("ca.crt")})
        follower = self.server("follower", *tls,
                               env={"SEKKA_STRICT_TLS_CA_FILE": cert("ca.crt")})
        stranger = self.server("stranger", *tls,
                               env={"SEKKA_STRICT_TLS_CA_FILE": cert("other-ca.crt")})

        def client(s):
            return redis.Redis(host="127.0.0.1", port=s.resp_port, password=self.TOKEN,
                               ssl=True, ssl_ca_certs=cert("ca.crt"),
                               ssl_certfile=cert("client.crt"), ssl_keyfile=cert("client.key"))
        got = [client(leader).execute_command("STRICT.NEXT", "chat")]
        for _ in range(5):
            got += client(follower).execute_command("STRICT.BATCH", "chat", 3)
            got.append(client(leader).execute_command("STRICT.NEXT", "chat"))
        self.assertEqual(got, sorted(set(got)), "strict ids did not increase call after call")
        # A server that trusts another CA does not take the leader for the leader.
        with self.assertRaises(redis.exceptions.ResponseError) as refused:
            client(stranger).execute_command("STRICT.NEXT", "chat")
        self.assertIn("UNAVAILABLE", str(refused.exception))
        self.assertIn("unreachable", str(refused.exception))

    def test_others_reach_a_leader_at_its_advertised_address(self):
        port = free_port()
        relay = Counter(port)
        self.addCleanup(relay.stop)
        host, relay_port = relay.address.rsplit(":", 1)
        leader = self.server("leader", "--strict-advertise", f"[{host}]:{relay_port}",
                             resp=f"127.0.0.1:{port}")
        follower = self.server("follower")
        first = redis.Redis(host="127.0.0.1", port=leader.resp_port)
        self.assertEqual(first.execute_command("STRICT.NEXT", "chat"), 1)
        then = redis.Redis(host="127.0.0.1", port=follower.resp_port)
        self.assertEqual(then.execute_command("STRICT.BATCH", "chat", 2), [2, 3])
        self.assertGreaterEqual(relay.connections, 1, "the follower did not use the advertised "
                                "address")


    def test_a_hung_leader_holds_up_no_other_kind_of_request(self):
        # Strict calls that wait for a leader run on a pool of their own: with the leader of 40
        # tags stopped, 40 calls to a follower wait seconds each for it, and the follower still
        # answers a segment request that needs its store (they shared one pool of 4 threads, and
        # the segment request waited behind the strict calls).
        leader = self.server("leader", ttl_s=30)
        follower = self.server("follower", "--segment-auto-create", "true", ttl_s=30)
        first = redis.Redis(host="127.0.0.1", port=leader.resp_port)
        tags = [f"t{i}" for i in range(40)]
        for tag in tags:
            self.assertEqual(first.execute_command("STRICT.NEXT", tag), 1)
        leader.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: leader.proc.send_signal(signal.SIGCONT))

        def ask(tag):
            try:
                redis.Redis(host="127.0.0.1", port=follower.resp_port,
                            socket_timeout=60).execute_command("STRICT.NEXT", tag)
            except redis.exceptions.RedisError:
                pass  # unavailable: the leader does not answer
        waiting = [threading.Thread(target=ask, args=(tag,), daemon=True) for tag in tags]
        for t in waiting:
            t.start()
        time.sleep(1)  # they are waiting on the leader now
        r = redis.Redis(host="127.0.0.1", port=follower.resp_port, socket_timeout=60)
        start = time.monotonic()
        self.assertEqual(r.execute_command("SEG.NEXT", "orders"), 1)
        self.assertLess(time.monotonic() - start, 5, "a segment request waited for strict calls")
        # And it stops within its 5 s for requests in flight and a call's 2 s: the requests still
        # queued when their connections close are dropped (it took 28 s with 40 queued).
        start = time.monotonic()
        follower.stop(timeout=30)
        self.assertLess(time.monotonic() - start, 12, "SIGTERM waited for queued strict calls")
        leader.proc.send_signal(signal.SIGCONT)
        for t in waiting:
            t.join(timeout=60)


    def test_a_process_at_a_dead_leaders_port_cannot_repeat_ids(self):
        # Review of issue 26: after the leader died, a process that bound its port answered the
        # follower's forwarded calls with ids given before, negative ones and ones past 2^63 - 1,
        # and the follower handed them out. It now takes only ids above those it got already.
        leader = self.server("leader", "--auth-token", self.TOKEN, ttl_s=30)
        follower = self.server("follower", "--auth-token", self.TOKEN, ttl_s=30)
        r = redis.Redis(host="127.0.0.1", port=follower.resp_port, password=self.TOKEN,
                        socket_timeout=30)
        redis.Redis(host="127.0.0.1", port=leader.resp_port,
                    password=self.TOKEN).execute_command("STRICT.BATCH", "chat", 5)
        self.assertEqual(r.execute_command("STRICT.BATCH", "chat", 3), [6, 7, 8])
        port = leader.resp_port
        leader.stop(signal.SIGKILL)
        answers = iter([b":1\r\n", b":-5\r\n", b":9223372036854775806\r\n"] * 50)
        squatter = ReplyServer(lambda data: b"+OK\r\n" if b"AUTH" in data
                               else next(answers, b":1\r\n"), port=port)
        self.addCleanup(squatter.stop)
        for _ in range(3):
            with self.assertRaises(redis.exceptions.ResponseError) as refused:
                r.execute_command("STRICT.BATCH", "chat", 3)
            self.assertIn("UNAVAILABLE", str(refused.exception))
        self.assertIn("not above 8", str(refused.exception))

    def test_a_hung_leader_of_one_tag_holds_up_no_other_tag(self):
        # Review of issue 26: with one tag's leader stopped, 12 clients asking a follower for
        # that tag held every strict thread of the follower, and a tag whose leader answered
        # waited 14 s there. While a tag's leader does not answer, one call tries it again and
        # the others for that tag are refused at once.
        stopped = self.server("stopped", ttl_s=30)
        healthy = self.server("healthy", ttl_s=30)
        follower = self.server("follower", ttl_s=30)
        redis.Redis(host="127.0.0.1", port=stopped.resp_port).execute_command("STRICT.NEXT", "a")
        redis.Redis(host="127.0.0.1", port=healthy.resp_port).execute_command("STRICT.NEXT", "b")
        r = redis.Redis(host="127.0.0.1", port=follower.resp_port, socket_timeout=60)
        self.assertEqual(r.execute_command("STRICT.NEXT", "a"), 2)
        stopped.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: stopped.proc.send_signal(signal.SIGCONT))
        stop = threading.Event()

        def ask_a():
            c = redis.Redis(host="127.0.0.1", port=follower.resp_port, socket_timeout=1)
            while not stop.is_set():
                try:
                    c.execute_command("STRICT.NEXT", "a")
                except redis.exceptions.RedisError:
                    pass
        askers = [threading.Thread(target=ask_a, daemon=True) for _ in range(12)]
        for t in askers:
            t.start()
        time.sleep(2)
        try:
            took = []
            for _ in range(5):
                start = time.monotonic()
                r.execute_command("STRICT.NEXT", "b")
                took.append(time.monotonic() - start)
            self.assertLess(max(took), 3, f"tag b waited {took} s behind tag a")
        finally:
            stop.set()
            for t in askers:
                t.join(timeout=30)

    def test_forwarded_calls_for_made_up_tags_add_no_tag(self):
        # Review of issue 26: STRICT.FORWARDED for made-up tags added each to the server's
        # table (and opened a lease for it) until the table was full, and then STRICT.NEXT of a
        # new tag answered "this server serves 1000 already" until a restart.
        s = self.server("s")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        pipe = r.pipeline(transaction=False)
        for i in range(1000):
            pipe.execute_command("STRICT.FORWARDED", f"made-up-{i}", 1)
        replies = pipe.execute(raise_on_error=False)
        self.assertTrue(all("LEASELOST" in str(x) for x in replies), replies[:3])
        self.assertEqual(r.execute_command("STRICT.NEXT", "brand-new"), 1)

    def test_a_tag_not_in_strict_tags_is_refused_and_leaves_nothing_at_the_coordinator(self):
        # Review of issue 26: each new tag left records at the coordinator for good (8 nodes
        # on ZooKeeper, 2 keys on etcd), and letting idle tags go freed its place for another:
        # one client could add about 1,000 tags a minute. Only listed tags are served now.
        s = self.server("s")
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        for i in range(50):
            with self.assertRaisesRegex(redis.ResponseError, "not served here: strict.tags"):
                r.execute_command("STRICT.NEXT", f"made-up-{i}")
        status, body = s.get_json("/v1/strict/made-up-x")
        self.assertEqual((status, body["error"]["code"]), (404, "not_found"), body)
        self.assertNotIn("made-up", self.coord.etcdctl("get", "--prefix", "--keys-only", "sekka/"))
        self.assertEqual(r.execute_command("STRICT.NEXT", "brand-new"), 1)

    def test_print_config_refuses_strict_tls_files_that_serve_refuses(self):
        certs = self.dirs.path("tls")
        subprocess.run([os.path.join(os.path.dirname(__file__), "..", "scripts", "test_certs.sh"),
                        certs], check=True)
        env = dict(os.environ, SEKKA_STRICT_TLS_CA_FILE=self.dirs.path("missing.crt"),
                   SEKKA_WORKER_LOCK_DIR=self.dirs.path("locks"))
        p = subprocess.run([SEKKA, "serve", "--print-config", "--worker-source", "etcd",
                            "--coordinator", f"etcd://{self.coord.endpoints}",
                            "--data-dir", self.dirs.path("d"),
                            "--tls-cert-file", os.path.join(certs, "server.crt"),
                            "--tls-key-file", os.path.join(certs, "server.key")],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("strict.tls_ca_file", p.stderr)


class RedisClockStepTest(unittest.TestCase):
    """Strict ids on a Redis whose host's wall clock steps forward 30 s (tests/clockshift.c in
    the redis-server): Redis expires the leader's session key at once, by that clock, while the
    leader still holds its lease by its own. A server that takes the lead then answers only once
    a TTL has passed since its claim (LeaseGrant::settle): no request breaks real-time order."""

    def setUp(self):
        self.dirs = TempDirs()
        self.clock = self.dirs.path("redis-clock")
        with open(self.clock, "w") as f:
            f.write("+0")
        self.redis = RedisStore(self.dirs.path("redis"), env=clockshift_env(self.clock))
        self.servers = [Server(self.dirs.path(f"s{i}"), "--worker-source", "redis",
                               "--coordinator", f"redis://{self.redis.endpoints}",
                               "--lease-ttl", "10s", "--strict-tags", STRICT_TAGS)
                        for i in range(2)]

    def tearDown(self):
        for s in self.servers:
            s.stop()
        self.redis.stop()
        self.dirs.cleanup()

    def ask(self, server, records, refusals):
        r = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=60)
        sent = time.monotonic()
        try:
            ids = r.execute_command("STRICT.BATCH", "chat", 1)
        except redis.exceptions.ResponseError as e:
            refusals.append(str(e))
            return
        records.append((sent, time.monotonic(), ids))

    def test_a_clock_step_on_the_redis_host_never_reorders_ids(self):
        s0, s1 = self.servers
        records, refusals = [], []
        self.ask(s0, records, refusals)  # s0 leads; s1 has not looked for the leader yet
        self.assertEqual(len(records), 1, refusals)
        with open(self.clock, "w") as f:
            f.write("+30")
        self.assertTrue(wait_for(lambda: self.redis.client().time()[0] > time.time() + 25, 60),
                        "the Redis host's clock did not step within 60 s")
        # s1 finds no live holder and takes the lead while s0's lease holds by s0's clock.
        for _ in range(20):
            self.ask(s1, records, refusals)
            self.ask(s0, records, refusals)
        load = Load(self.servers, threads=4, timeout=30)
        time.sleep(15)  # past the new leader's settle (the TTL)
        records += load.finish()
        bad = order_violations(records)
        self.assertEqual(bad[:3], [], f"{len(bad)} of {len(records)} requests broke real-time "
                         "order after the Redis host's clock stepped")
        ids = [i for r in records for i in r[2]]
        self.assertEqual(len(ids), len(set(ids)), "a strict id was issued twice")
        errors = refusals + [e[2] for e in load.errors]
        for e in errors:
            self.assertTrue(e.startswith("UNAVAILABLE"), e)
        # The new leader waited out the old one's lease (on the code before, nobody did).
        self.assertTrue(any("did not resign" in e for e in errors), errors[:5])
        self.assertGreater(len(load.records), 10, "nobody answered after the settle")


class LocalStrictTest(unittest.TestCase):
    """Issue 44: a server alone (worker.source local) could not serve strict ids at all. It
    leads every tag, each bound in its data dir by the host-local lease's rules."""

    def setUp(self):
        self.dirs = TempDirs()

    def tearDown(self):
        self.dirs.cleanup()

    def test_a_server_alone_serves_strict_ids_above_every_id_before_a_kill(self):
        data = self.dirs.path("alone")
        served = []
        for run in range(3):
            s = Server(data, "--strict-tags", "chat,orders")
            try:
                load = Load([s], threads=4)
                time.sleep(1)
                records = load.finish()
                self.assertEqual(load.errors, [])
                ids = [i for r in records for i in r[2]]
                self.assertGreater(len(ids), 50)
                # Each run starts above every id an earlier run served, killed or not.
                self.assertGreater(min(ids), max(served, default=0))
                self.assertEqual(order_violations(records)[:3], [])
                served += ids
                other = redis.Redis(host="127.0.0.1", port=s.resp_port)
                self.assertEqual(other.execute_command("STRICT.NEXT", "orders"), 1 + run * 100000)
            finally:
                s.stop(signal.SIGKILL if run == 1 else signal.SIGTERM)
        self.assertEqual(len(served), len(set(served)))


class ManyTags(CoordinatedServers):
    """Issue 44: each process held up to two coordinator sessions per strict tag in use, so that
    ZooKeeper's default maxClientCnxns (60 connections per address) allowed fewer than 30 tags
    per host: two servers listing 1,000 tags served 37 of 2,000 draws in 243 s. A process now
    holds one session for every strict tag (backends/coordinator_sessions.h)."""

    TAGS = [f"m{i}" for i in range(1000)]
    # The default TTL: each server renews 500 leases every TTL/3 (on etcd a keepalive and a
    # read each, one at a time over one connection); a sanitizer build cannot keep up even at
    # 10 s (scripts/test.sh runs these in the Release stage only).
    TTL_S = 10

    def draw_all(self, order):
        """One STRICT.NEXT per (server, tag) of `order`, 8 at a time; the answers by tag."""
        got, errors, lock = {}, [], threading.Lock()
        work = list(order)
        deadline = time.monotonic() + 300  # bounded: the old build served almost none

        def run():
            clients = [redis.Redis(host="127.0.0.1", port=s.resp_port, socket_timeout=30)
                       for s in self.servers]
            while True:
                with lock:
                    if not work:
                        return
                    if time.monotonic() > deadline:
                        errors.extend((k, tag, "not drawn within 300 s") for k, tag in work)
                        work.clear()
                        return
                    k, tag = work.pop(0)
                try:
                    first = clients[k].execute_command("STRICT.NEXT", tag)
                except (redis.exceptions.RedisError, OSError) as e:
                    with lock:
                        errors.append((k, tag, str(e)[:160]))
                    continue
                with lock:
                    got.setdefault(tag, []).append(first)
        threads = [threading.Thread(target=run) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=400)
        return got, errors

    def test_a_thousand_tags_in_use_at_once_on_one_session_per_server(self):
        for i in range(2):
            self.servers.append(Server(
                self.dirs.path(f"s{i}"), "--worker-source", self.source, "--coordinator",
                f"{self.source}://{self.coord.endpoints}", "--lease-ttl", f"{self.TTL_S}s",
                "--strict-tags", ",".join(self.TAGS)))
        half = len(self.TAGS) // 2
        # Each server leads half of the tags (it asks first) and follows the other half.
        first = [(0, t) for t in self.TAGS[:half]] + [(1, t) for t in self.TAGS[half:]]
        second = [(1, t) for t in self.TAGS[:half]] + [(0, t) for t in self.TAGS[half:]]
        got, errors = self.draw_all(first)
        self.assertEqual(errors[:5], [], f"{len(errors)} of the first draws failed")
        more, errors = self.draw_all(second)
        self.assertEqual(errors[:5], [], f"{len(errors)} of the second draws failed")
        for tag in self.TAGS:
            # The second draw began after the first completed: a larger id.
            self.assertEqual(len(got[tag]), 1, tag)
            self.assertGreater(more[tag][0], got[tag][0], tag)
        # Past the TTL the leases were kept (renewed through the one session each) and every
        # tag is still served by both servers, in order.
        time.sleep(self.TTL_S + 1)
        last, errors = self.draw_all(first + second)
        self.assertEqual(errors[:5], [], f"{len(errors)} of the last draws failed")
        for tag in self.TAGS:
            self.assertGreater(min(last[tag]), more[tag][0], tag)
        # Each server: its worker-id lease's session and one for every strict tag.
        self.assertLessEqual(self.sessions(), 2 * len(self.servers))


class ZooKeeperManyTagsTest(ManyTags, unittest.TestCase):
    source = "zookeeper"

    def sessions(self):
        """ZooKeeper's count of client connections (less this one)."""
        with socket.create_connection(("127.0.0.1", self.coord.port), timeout=10) as c:
            c.sendall(b"srvr")
            text = b""
            while chunk := c.recv(4096):
                text += chunk
        return int(re.search(rb"Connections: (\d+)", text).group(1)) - 1


class EtcdManyTagsTest(ManyTags, unittest.TestCase):
    source = "etcd"

    def sessions(self):
        """etcd's count of live leases."""
        host, port = self.coord.endpoints.split(",")[0].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=10)  # no proxy: 127.0.0.1 only
        try:
            c.request("POST", "/v3/lease/leases", body=b"{}")
            return len(json.loads(c.getresponse().read()).get("leases", []))
        finally:
            c.close()


class EtcdStrictTest(StrictTests, unittest.TestCase):
    source = "etcd"


class ZooKeeperStrictTest(StrictTests, unittest.TestCase):
    source = "zookeeper"


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[1:], verbosity=2)
