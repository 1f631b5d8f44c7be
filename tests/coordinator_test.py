"""Worker-id leases on real etcd, ZooKeeper and Redis (Debian's packages, started here on
loopback): several `sekka serve` processes sharing a coordinator, kill -9, a coordinator outage,
a three-member etcd cluster losing its leader, and clock faults against the coordinator's hwm."""

import datetime
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import (SEKKA, Balancer, CosIdProxyClient, Etcd, RedisStore,  # noqa: E402
                           Server, TempDirs, ZooKeeper, _post_json, wait_for)


EPOCH_MS = 1735689600000  # the sekka layout's epoch, 2025-01-01


def iso_ms(text):
    t = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


class CoordinatorTestCase(unittest.TestCase):
    source = None  # "etcd", "zookeeper" or "redis"

    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        kinds = {"etcd": Etcd, "zookeeper": ZooKeeper, "redis": RedisStore}
        self.coord = kinds[self.source](self.dirs.path(self.source))

    def tearDown(self):
        for s in self.servers:
            s.stop()
        if self.coord:
            self.coord.stop()
        self.dirs.cleanup()

    def start(self, name, *flags, ttl="10s", keep_id=True, env=None, **kw):
        # keep_id: most cases here are about one worker id's hwm across holders and restarts.
        env = dict(env or {}, SEKKA_WORKER_KEEP_ID="true" if keep_id else "false")
        s = Server(self.dirs.path(name), "--worker-source", self.source, "--coordinator",
                   f"{self.source}://{self.coord.endpoints}", "--lease-ttl", ttl, *flags,
                   env=env, **kw)
        self.servers.append(s)
        return s

    def kill(self, s):
        s.stop(signal.SIGKILL)
        self.servers.remove(s)

    @staticmethod
    def batch(s, n=1000):
        return redis.Redis(host="127.0.0.1", port=s.resp_port).execute_command("ID.BATCH", n)

    def three_servers_many_ids(self):
        servers = [self.start(f"s{i}") for i in range(3)]
        self.assertEqual(sorted(s.worker_id for s in servers), [0, 1, 2])
        ids = []
        for _ in range(100):
            for s in servers:
                ids += self.batch(s)
        self.assertEqual(len(ids), 300_000)
        self.assertEqual(len(set(ids)), 300_000)
        for s in servers:
            status, body = s.get_json("/v1/info")
            self.assertEqual(body["worker"]["source"], self.source)
            self.assertEqual(body["lease"]["state"], "held")
            self.assertTrue(body["ready"])
            metrics = s.get("/metrics")[2]
            self.assertIn("sekka_lease_held 1", metrics)
            self.assertIn("sekka_coordinator_calls_total", metrics)

    def one_layout_per_cluster(self):
        """The review of issue 22: an ascending and a descending host took worker id 0 of one
        etcd cluster in turn (the hwm carries no layout) and repeated 46,848 ids at the mirror
        date. A cluster now serves the layout its first holder bound."""
        up = self.start("up")
        self.assertEqual(up.worker_id, 0)
        self.assertEqual(up.stop(), 0)
        self.servers.remove(up)
        down = self.start("down", env={"SEKKA_GENERATOR_DESCENDING": "true"}, wait=False)
        self.assertFalse(down.wait_listening())
        self.assertEqual(down.proc.returncode, 2)
        err = down.stderr_text().strip().splitlines()[-1]
        self.assertIn("cluster default issues ids of layout", err)
        other = self.start("other", "--cluster", "descending",
                           env={"SEKKA_GENERATOR_DESCENDING": "true"})
        self.assertEqual(other.worker_id, 0)

    def no_local_id_beside_a_server_of_the_cluster(self):
        """The second review of issue 22: a server whose worker id came from the coordinator did
        not lock its host's lock dir, and a `sekka gen` of the same layout there took the same
        worker id: 82,000 of 120,000 ids repeated. The server binds the host's lock dir to its
        cluster, so gen and local servers of that host are refused, also after it stopped."""
        s = self.start("served")
        host = s.env["SEKKA_WORKER_LOCK_DIR"]
        for server_running in (True, False):
            p = subprocess.run([SEKKA, "gen", "-n", "1000", "--lock-dir", host],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(p.stdout, "")
            self.assertIn(f"come from {self.source} cluster default", p.stderr)
            self.assertIn("ask a server of the cluster for ids", p.stderr)
            if server_running:
                self.assertEqual(s.stop(), 0)
        local = Server(self.dirs.path("local"), env={"SEKKA_WORKER_LOCK_DIR": host}, wait=False)
        self.servers.append(local)
        self.assertFalse(local.wait_listening())
        self.assertEqual(local.proc.returncode, 2)
        self.assertIn(f"come from {self.source} cluster default", local.stderr_text())

    def dead_holders_id_after_the_ttl(self):
        a = self.start("a", ttl="2s")
        b = self.start("b", ttl="2s")
        self.assertEqual((a.worker_id, b.worker_id), (0, 1))
        last = max(self.batch(a))
        self.kill(a)
        died = time.monotonic()
        c = self.start("c", ttl="2s")
        if time.monotonic() - died < 2:
            self.assertEqual(c.worker_id, 2, "a dead holder's id must stay taken until its TTL")
        time.sleep(max(0, 2.5 - (time.monotonic() - died)))
        d = None
        for i in range(20):  # the coordinator's expiry sweep may lag the TTL a little
            d = self.start(f"d{i}", ttl="2s")
            if d.worker_id == 0:
                break
            self.assertEqual(d.stop(), 0)
            self.servers.remove(d)
            time.sleep(0.25)
        self.assertEqual(d.worker_id, 0)
        ids = self.batch(d)
        self.assertGreater(min(ids), last, "the new holder's ids must be above the dead one's")

    def restart_takes_a_free_id_whose_hwm_is_past(self):
        """Issue 22's fast restart: a restart right after a stop finds its own id's hwm ahead
        (stored 4 s ahead of the clock); without worker.keep_id it takes a free id whose hwm is
        past and does not wait, with it it takes its own id back and waits."""
        a = self.start("a", "--worker-name", "slot", keep_id=False)
        self.assertEqual(a.worker_id, 0)
        ids = self.batch(a)
        self.assertEqual(a.stop(), 0)
        self.servers.remove(a)
        b = self.start("a", "--worker-name", "slot", keep_id=False)
        self.assertEqual(b.worker_id, 1)
        self.assertNotIn("waiting for the clock", b.stderr_text())
        ids += self.batch(b)
        self.assertEqual(b.stop(), 0)
        self.servers.remove(b)
        c = self.start("a", "--worker-name", "slot", keep_id=True)
        self.assertEqual(c.worker_id, 1)  # the one it held last (its data dir's preferred id)
        self.assertIn("waiting for the clock to pass the stored high-water mark", c.stderr_text())
        ids += self.batch(c)
        self.assertEqual(len(set(ids)), 3000, "an id was repeated")

    def clock_step_back_and_pause_past_the_ttl(self):
        """The safety review's repeat: ids issued, the clock set back 15 s, the process stopped
        for longer than its TTL, the same worker id leased again, then kill -9 and a restart.
        The stored hwm must never fall below an issued id, so the restart on the stepped-back
        clock must refuse (or wait), and no id may repeat."""
        clock = self.dirs.path("clock")
        with open(clock, "w") as f:
            f.write("+0")
        # A 4 s TTL (calls may take 1 s): with 2 s (500 ms a call) a busy machine lost leases
        # beside the one the pause takes, and the batches below failed.
        a = self.start("a", "--worker-name", "slot", ttl="4s", faketime_file=clock)
        ids = []
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            ids += self.batch(a)
        with open(clock, "w") as f:
            f.write("-15")
        a.proc.send_signal(signal.SIGSTOP)
        time.sleep(6)  # past the TTL
        a.proc.send_signal(signal.SIGCONT)

        def lost_and_held_again():
            metrics = a.get("/metrics")[2]
            lost = re.search(r"^sekka_leases_lost_total (\d+)", metrics, re.M)
            return bool(lost) and int(lost.group(1)) >= 1 and "sekka_lease_held 1" in metrics

        # A deadline for liveness: the lease is held again within a few seconds on a quiet
        # machine (a renewal fails, then one acquire).
        self.assertTrue(wait_for(lost_and_held_again, 60),
                        "the lease was not lost in the pause and held again within 60 s")
        time.sleep(1)  # the next rounds of hwm stores
        for _ in range(20):
            try:
                ids += self.batch(a)
            except redis.exceptions.ResponseError as e:
                self.assertTrue(str(e).startswith(("CLOCKBACKWARDS", "LEASELOST")), str(e))
        newest_ms = max(i >> 22 for i in ids) + EPOCH_MS
        self.kill(a)
        # Restarted on the same data dir with the clock still 15 s behind: the hwm (at the
        # coordinator and on disk) is past every issued id, so it refuses to start.
        b = self.start("a", "--worker-name", "slot", ttl="4s", faketime_file=clock, wait=False)
        self.assertFalse(b.wait_listening(), "started below ids already issued")
        self.assertEqual(b.proc.returncode, 1)
        log = b.stderr_text()
        err = log.strip().splitlines()[-1]
        self.assertIn("high-water mark", err)
        hwm = re.findall(r"coordinator_hwm=(\S+)", log)[-1]
        self.assertGreaterEqual(iso_ms(hwm), newest_ms,
                                "the coordinator's hwm fell below an issued id")
        self.servers.remove(b)
        b.stop()
        with open(clock, "w") as f:
            f.write("+0")
        c = self.start("a", "--worker-name", "slot", ttl="4s", faketime_file=clock)
        later = []
        for _ in range(50):
            later += self.batch(c)
        self.assertEqual(len(set(ids) | set(later)), len(ids) + len(later), "an id was repeated")
        self.assertGreater(min(later), max(ids))


    def machine_ids_behind_a_load_balancer(self):
        """Issue 40: every server answered /machines from its own data dir, so behind a load
        balancer two CosId instances got machine id 0 from two servers. The cluster keeps them
        at the coordinator: 30 instances asking at once through a round-robin balancer get 30
        ids, each server knows every holder, and a machines file one server kept before (when it
        answered alone) is adopted at its first machine call, its holders kept."""
        earlier = self.dirs.path("s0")
        os.makedirs(earlier, exist_ok=True)
        with open(os.path.join(earlier, "machines"), "w") as f:
            f.write("# sekka machine ids v2: ns, id, instance, stable, last_ms, lost_by, guard_ms\n"
                    f"orders\t0\told:1\t1\t{int(time.time() * 1000)}\t\t300000\n")
        servers = [self.start(f"s{i}") for i in range(3)]
        self.assertEqual(CosIdProxyClient(servers[0]).distribute("orders", "old:1", True, 6,
                                                                 "PT5M")[1]["machineId"], 0)
        self.assertTrue(os.path.exists(os.path.join(earlier, "machines.adopted")))
        lb = Balancer([s.http_port for s in servers])
        self.addCleanup(lb.stop)
        got = {}

        def instance(i):
            got[i] = CosIdProxyClient(lb).distribute("orders", f"10.0.0.{i}:8080", False, 6, "PT5M")

        threads = [threading.Thread(target=instance, args=(i,)) for i in range(30)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertEqual(sorted(s for s, _ in got.values()), [200] * 30, got)
        ids = sorted(body["machineId"] for _, body in got.values())
        self.assertEqual(ids, list(range(1, 31)), "one machine id given twice, or the adopted one")
        for s in servers:
            c = CosIdProxyClient(s)
            for i in (0, 29):
                self.assertEqual(c.guard("orders", f"10.0.0.{i}:8080", False, "PT5M")[0], 200)
            self.assertEqual(c.distribute("orders", "old:1", True, 6, "PT5M")[1]["machineId"], 0)


class EveryCoordinatorTests:
    """The cases each coordinator's test class runs (mixed into a CoordinatorTestCase)."""

    def test_cosid_instances_behind_a_load_balancer_never_share_a_machine_id(self):
        self.machine_ids_behind_a_load_balancer()

    def test_a_cluster_serves_one_layout(self):
        self.one_layout_per_cluster()

    def test_no_local_id_beside_a_server_of_the_cluster(self):
        self.no_local_id_beside_a_server_of_the_cluster()

    def test_three_servers_get_different_worker_ids_and_300k_distinct_ids(self):
        self.three_servers_many_ids()

    def test_kill_9_frees_the_worker_id_after_the_ttl_and_the_next_holder_waits_past_its_hwm(self):
        self.dead_holders_id_after_the_ttl()

    def test_a_restart_takes_a_free_id_whose_hwm_is_past_unless_keep_id(self):
        self.restart_takes_a_free_id_whose_hwm_is_past()


class EveryCoordinatorClockTests:
    """The clock case each coordinator's clock class runs (libfaketime: no sanitizer stage)."""

    def test_clock_step_back_and_a_pause_past_the_ttl_never_lower_the_hwm(self):
        self.clock_step_back_and_pause_past_the_ttl()


class EtcdTest(EveryCoordinatorTests, CoordinatorTestCase):
    source = "etcd"

    def test_outage_stops_issuing_within_the_ttl_and_servers_resume_by_themselves(self):
        servers = [self.start(f"s{i}", ttl="4s") for i in range(2)]
        seen = []
        for s in servers:
            seen += self.batch(s)
        self.coord.stop_member(0, signal.SIGKILL)
        stopped = time.monotonic()
        for s in servers:
            while True:
                # The promise is about requests made after the TTL: one sent before it may be
                # answered late on a busy machine, and still rightly carry an id.
                sent = time.monotonic()
                status, body = s.get_json("/v1/id")
                if status == 503:
                    self.assertEqual(body["error"]["code"], "lease_lost")
                    break
                seen.append(int(body["id"]))
                self.assertLess(sent - stopped, 4.5, "still issuing after the TTL")
                time.sleep(0.02)
            with self.assertRaises(redis.exceptions.ResponseError) as e:
                self.batch(s, 10)
            self.assertTrue(str(e.exception).startswith("LEASELOST"), str(e.exception))
            self.assertEqual(s.get("/readyz")[0], 503)
        self.coord.start_member(0)
        for s in servers:
            self.assertTrue(wait_for(lambda s=s: s.get("/readyz")[0] == 200, 60),
                            "did not resume within 60 s after etcd returned")
            seen += self.batch(s)
        self.assertEqual(len(seen), len(set(seen)), "an id was repeated")

    def test_three_member_cluster_losing_its_leader_under_load(self):
        self.coord.stop()
        self.coord = Etcd(self.dirs.path("etcd3"), members=3)
        servers = [self.start(f"s{i}", ttl="5s") for i in range(3)]
        ids, errors, stop = [], [], threading.Event()

        def load(s):
            r = redis.Redis(host="127.0.0.1", port=s.resp_port)
            while not stop.is_set():
                try:
                    ids.extend(r.execute_command("ID.BATCH", 100))
                except redis.exceptions.ResponseError as e:
                    errors.append(str(e))
                    time.sleep(0.05)

        threads = [threading.Thread(target=load, args=(s,)) for s in servers]
        for t in threads:
            t.start()
        time.sleep(1)
        leader = self.coord.leader()
        self.assertIsNotNone(leader)
        self.coord.stop_member(leader, signal.SIGKILL)
        time.sleep(8)  # past the 5 s TTL: ids from here on come from leases renewed since
        before = len(ids)
        # Deadlines for liveness: on a quiet machine the next batch comes at once.
        resumed = wait_for(lambda: len(ids) > before, 60)
        stop.set()
        for t in threads:
            t.join()
        self.assertTrue(resumed, "no ids within 60 s, past the TTL after the leader was killed")
        self.assertEqual(len(ids), len(set(ids)), "an id was repeated")
        for e in errors:
            self.assertTrue(e.startswith("LEASELOST"), e)
        for s in servers:
            self.assertTrue(wait_for(lambda s=s: s.get("/readyz")[0] == 200, 30),
                            "a server was not ready within 30 s")



class EtcdClockTest(EveryCoordinatorClockTests, CoordinatorTestCase):
    """Separate from EtcdTest: libfaketime cannot be preloaded into the TSan build."""
    source = "etcd"


    def test_a_request_inside_a_replaced_generator_stops_at_its_own_hwm(self):
        """The safety review's narrow race (defect 2): one stored hwm vouched for every
        generator. Here a batch waits out a clock step inside the generator of worker id 0; the
        lease is revoked meanwhile, another server takes id 0, and this one re-acquires id 1.
        When the batch resumes it must stop at worker id 0's own hwm, not run on under id 1's
        into the ticks the new holder of id 0 uses."""
        # 16 ids per ms, so that a batch of 100,000 spans about 6 s of ticks.
        env = {"SEKKA_LAYOUT_WORKER_BITS": "18", "SEKKA_LAYOUT_SEQUENCE_BITS": "4",
               "SEKKA_GENERATOR_MAX_BACKWARDS_WAIT": "20s"}
        clock = self.dirs.path("clock")
        with open(clock, "w") as f:
            f.write("+0")
        a = self.start("a", "--worker-name", "a", ttl="2s", faketime_file=clock, env=env)
        self.assertEqual(a.worker_id, 0)
        r = redis.Redis(host="127.0.0.1", port=a.resp_port, socket_timeout=60)
        r.execute_command("ID.BATCH", 100)
        lease = int(re.search(r"etcd lease ([0-9a-f]+) ", a.get_json("/v1/info")[1]["lease"]
                              ["lease"]).group(1), 16)
        with open(clock, "w") as f:
            f.write("-3")
        outcome = {}

        def batch():
            try:
                outcome["ids"] = r.execute_command("ID.BATCH", 100_000)
            except redis.exceptions.ResponseError as e:
                outcome["error"] = str(e)

        waiting = threading.Thread(target=batch)
        waiting.start()  # waits about 3 s for the clock, inside worker id 0's generator
        time.sleep(0.3)
        _post_json(self.coord.endpoints.split(",")[0], "/v3/lease/revoke", {"ID": str(lease)})
        a.proc.send_signal(signal.SIGSTOP)  # so that b takes id 0 before a tries again
        try:
            b_dir = self.dirs.path("b")
            os.makedirs(os.path.join(b_dir, "workers"))
            with open(os.path.join(b_dir, "workers", "coordinator.last"), "w") as f:
                f.write("0\n")  # b prefers id 0
            b = self.start("b", "--worker-name", "b", ttl="10s", env=env, wait=False)
            deadline = time.monotonic() + 30
            while "worker id leased" not in b.stderr_text():  # b holds id 0 now
                self.assertLess(time.monotonic(), deadline, "b did not lease an id")
                time.sleep(0.05)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        self.assertTrue(b.wait_listening(), b.stderr_text()[-300:])
        self.assertEqual(b.worker_id, 0)
        theirs = []
        end = time.monotonic() + 8
        while time.monotonic() < end:
            theirs += self.batch(b, 100)
        waiting.join(timeout=60)
        mine = outcome.get("ids", [])
        self.assertFalse(set(mine) & set(theirs), "an id was issued twice")
        # The resumed batch either fails (LEASELOST) or stays at or below worker id 0's hwm.
        if "error" in outcome:
            self.assertTrue(outcome["error"].startswith("LEASELOST"), outcome["error"])
        self.assertEqual(a.get("/readyz")[0], 200)
        self.assertEqual(a.get_json("/v1/info")[1]["worker"]["worker_id"], 1)

    def test_a_startup_wait_longer_than_the_ttl_keeps_the_lease(self):
        """The safety review's failed start: waiting out the hwm for longer than the lease TTL
        let the lease expire under the wait ("no longer held by this process's etcd lease")."""
        clock = self.dirs.path("clock")
        with open(clock, "w") as f:
            f.write("+0")
        a = self.start("a", "--worker-name", "slot-a", ttl="2s", faketime_file=clock)
        last = max(self.batch(a))
        self.assertEqual(a.stop(), 0)
        self.servers.remove(a)
        with open(clock, "w") as f:
            f.write("-3")  # the hwm was 5 s ahead: a wait of about 8 s, four TTLs
        t0 = time.monotonic()
        b = self.start("b", "--worker-name", "slot-a", ttl="2s", faketime_file=clock, wait=False)
        self.assertTrue(b.wait_listening(), b.stderr_text()[-500:])
        self.assertGreater(time.monotonic() - t0, 4.0, "it should wait past the hwm")
        self.assertGreater(min(self.batch(b)), last)
        time.sleep(2.5)  # past another TTL: the lease is still held
        self.assertEqual(b.get("/readyz")[0], 200)
        self.assertIn("sekka_leases_lost_total 0", b.get("/metrics")[2])

    def test_force_keeps_the_coordinators_hwm_as_the_generators_floor(self):
        """Issue 22, finding 5: --force with a data dir holding another layout's state set the
        start floor to -1, so after the start-up wait a clock step back issued ids below the
        coordinator's hwm: below ids the worker id's last holder issued."""
        clock = self.dirs.path("clock")
        with open(clock, "w") as f:
            f.write("+0")
        # A data dir with a twitter-layout state of worker id 0 (from a cluster of its own).
        t = self.start("b", "--cluster", "other", "--layout", "twitter")
        self.assertEqual(t.worker_id, 0)
        self.assertEqual(t.stop(), 0)
        self.servers.remove(t)
        a = self.start("a", "--worker-name", "slot-a", faketime_file=clock)
        last = max(self.batch(a))
        self.assertEqual(a.stop(), 0)  # its hwm stays at etcd
        self.servers.remove(a)
        with open(clock, "w") as f:
            f.write("-1")
        # The data dir moved to a host of this cluster (the old host's lock dir serves the other
        # cluster and layout, and would refuse it).
        c = self.start("b", "--worker-name", "slot-a", "--force", faketime_file=clock,
                       env={"SEKKA_WORKER_LOCK_DIR": self.dirs.path("c-locks")})
        self.assertEqual(c.worker_id, a.worker_id)
        with open(clock, "w") as f:
            f.write("-12")  # now well behind the ids `a` issued
        r = redis.Redis(host="127.0.0.1", port=c.resp_port)
        try:
            ids = r.execute_command("ID.BATCH", 1000)
        except redis.exceptions.ResponseError as e:
            self.assertTrue(str(e).startswith("CLOCKBACKWARDS"), str(e))
        else:
            self.assertGreater(min(ids), last, "ids went below the last holder's hwm")

    def test_restart_with_the_clock_behind_waits_past_the_coordinators_hwm(self):
        clock = self.dirs.path("clock")
        with open(clock, "w") as f:
            f.write("+0")
        a = self.start("a", "--worker-name", "slot-a", faketime_file=clock)
        last = max(self.batch(a))
        self.assertEqual(a.stop(), 0)  # releases the id; its hwm stays at etcd
        self.servers.remove(a)
        with open(clock, "w") as f:
            f.write("-5")
        t0 = time.monotonic()
        # A fresh data dir: only the coordinator knows the hwm.
        b = self.start("b", "--worker-name", "slot-a", faketime_file=clock)
        self.assertEqual(b.worker_id, a.worker_id)
        self.assertGreater(time.monotonic() - t0, 4.0, "it should wait past the coordinator's hwm")
        self.assertIn("coordinator's high-water mark", b.stderr_text())
        self.assertGreater(min(self.batch(b)), last)
        self.assertEqual(b.stop(), 0)
        self.servers.remove(b)
        with open(clock, "w") as f:
            f.write("-3600")
        c = self.start("c", "--worker-name", "slot-a", faketime_file=clock, wait=False)
        self.assertFalse(c.wait_listening())
        self.assertEqual(c.proc.returncode, 1)
        err = c.stderr_text().strip().splitlines()[-1]
        self.assertIn("behind the coordinator's high-water mark", err)


class ZooKeeperTest(EveryCoordinatorTests, CoordinatorTestCase):
    source = "zookeeper"

    def test_a_session_shorter_than_the_ttl_is_refused(self):
        """Review of issue 26: ZooKeeper grants at most its maxSessionTimeout (10 s here), so with
        a 30 s lease_ttl it freed a strict tag's leader after 10 s while the leader trusted its
        lease for 27 s, and a paused leader answered 11 after its successor's 100001."""
        s = self.start("s0", ttl="30s", wait=False)
        self.assertFalse(s.wait_listening())
        self.assertEqual(s.proc.returncode, 2)
        self.assertIn("granted a session timeout of 10000 ms, below worker.lease_ttl (30000 ms)",
                      s.stderr_text())

    def test_a_long_outage_logs_a_few_lines_not_one_per_reconnect(self):
        """Found by the fault campaign: with the ensemble down, the ZooKeeper client logged
        each reconnect attempt (about 20 lines a second, for as long as the outage lasts)."""
        s = self.start("s0", ttl="4s")
        self.coord.stop(signal.SIGKILL)
        self.coord = None
        time.sleep(6)
        client_lines = [line for line in s.stderr_text().splitlines() if "ZOO_" in line]
        self.assertGreater(len(client_lines), 0, "the outage should be logged")
        self.assertLessEqual(len(client_lines), 3, "\n".join(client_lines[:10]))
        self.assertIn("similar lines held back", client_lines[-1])


class RedisTest(EveryCoordinatorTests, CoordinatorTestCase):
    source = "redis"

    def test_a_redis_that_can_lose_acknowledged_writes_is_refused_in_one_line(self):
        """A Redis without appendonly yes and appendfsync always can lose a claim or an hwm in
        a crash; sekka refuses it (naming the setting) unless the URI says durability=any."""
        cache = RedisStore(self.dirs.path("cache"), persist=False)
        try:
            s = Server(self.dirs.path("refused"), "--worker-source", "redis", "--coordinator",
                       f"redis://{cache.endpoints}", wait=False)
            self.servers.append(s)
            self.assertFalse(s.wait_listening(timeout=10), "served on a Redis that loses writes")
            self.assertIn("Redis runs with appendonly \"no\"", s.stderr_text())
            ok = Server(self.dirs.path("accepted"), "--worker-source", "redis", "--coordinator",
                        f"redis://{cache.endpoints}/0?durability=any")
            self.servers.append(ok)
            self.assertEqual(ok.worker_id, 0)
        finally:
            for s in self.servers:
                s.stop()
            self.servers = []
            cache.stop()


    def test_a_redis_that_may_evict_sekkas_keys_is_refused_in_one_line(self):
        """With an allkeys-* maxmemory-policy, a full Redis evicts owner records and hwms, and a
        second server takes a worker id the first still serves: refused unless eviction=any."""
        self.coord.client().config_set("maxmemory-policy", "allkeys-lru")
        s = self.on("refused", "", wait=False)
        self.assertFalse(s.wait_listening(timeout=30), "served on a Redis that evicts any key")
        lines = [line for line in s.stderr_text().splitlines() if "maxmemory-policy" in line]
        self.assertTrue(lines, s.stderr_text())
        self.assertIn('maxmemory-policy "allkeys-lru"', lines[0])
        self.assertIn("eviction=any", lines[0])
        self.assertEqual(self.on("accepted", "?eviction=any").worker_id, 0)
        self.coord.client().config_set("maxmemory-policy", "volatile-lru")  # sessions only
        self.assertEqual(self.on("volatile", "").worker_id, 1)

    def test_a_database_number_never_makes_a_second_id_space(self):
        """Servers of one cluster on one Redis, on databases 5 and 6: the first binds the
        cluster to database 5, and the other is refused, naming both; never two servers on
        worker 0. A server on database 5 joins, and another cluster may use database 6."""
        a = self.on("a", "/5")
        b = self.on("b", "/6", wait=False)
        if b.wait_listening(timeout=30):
            self.assertNotEqual(b.worker_id, a.worker_id, "two servers hold one worker id")
        self.assertIn("keeps its worker ids in database 5 of this Redis", b.stderr_text())
        self.assertIn("this server is on database 6", b.stderr_text())
        zero = self.on("zero", "", wait=False)
        self.assertFalse(zero.wait_listening(timeout=30), "database 0 beside database 5")
        self.assertNotEqual(self.on("c", "/5").worker_id, a.worker_id)
        other = Server(self.dirs.path("other"), "--worker-source", "redis", "--coordinator",
                       f"redis://{self.coord.endpoints}/6", "--cluster", "other")
        self.servers.append(other)
        self.assertEqual(other.worker_id, 0)

    def on(self, name, uri_tail, wait=True):
        """A server on this Redis, its coordinator URI ending in `uri_tail`."""
        s = Server(self.dirs.path(name), "--worker-source", "redis", "--coordinator",
                   f"redis://{self.coord.endpoints}{uri_tail}", wait=wait)
        self.servers.append(s)
        return s


class RedisClockTest(EveryCoordinatorClockTests, CoordinatorTestCase):
    source = "redis"



class ZooKeeperClockTest(EveryCoordinatorClockTests, CoordinatorTestCase):
    source = "zookeeper"



class EtcdTlsTest(unittest.TestCase):
    """etcd over TLS with client certificates required and authentication on, made with a CA
    and certificates from openssl (scripts/test_certs.sh)."""

    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.etcd = Etcd(self.dirs.path("etcd"), tls=True)
        self.etcd.enable_auth()
        self.certs = self.etcd.certs

    def tearDown(self):
        for s in self.servers:
            s.stop()
        self.etcd.stop()
        self.dirs.cleanup()

    def config(self, name, **worker):
        """A config file for etcd with the test CA and client certificate; `worker` overrides
        [worker] keys (None drops one)."""
        keys = {"source": "etcd", "coordinator": f"etcd://{self.etcd.endpoints}",
                "lease_ttl": "4s", "tls_ca_file": self.certs["ca.crt"],
                "tls_cert_file": self.certs["client.crt"],
                "tls_key_file": self.certs["client.key"], "username": Etcd.USER,
                "password": Etcd.PASSWORD}
        keys.update(worker)
        path = self.dirs.path(name + ".toml")
        with open(path, "w") as f:
            f.write("[worker]\n")
            for k, v in keys.items():
                if v is not None:
                    f.write(f'{k} = "{v}"\n')
        return path

    def start(self, name, config, env=None, wait=True):
        s = Server(self.dirs.path(name), "--config", config, env=env, wait=wait)
        self.servers.append(s)
        return s

    def test_ids_over_tls_with_a_user_and_a_new_token_after_etcd_restarts(self):
        password_file = self.dirs.path("password")
        with open(password_file, "w") as f:
            f.write(Etcd.PASSWORD + "\n")
        os.chmod(password_file, 0o600)
        a = self.start("a", self.config("a", password=None, password_file=password_file))
        # The other takes its password from the environment.
        b = self.start("b", self.config("b", password=None),
                       env={"SEKKA_WORKER_PASSWORD": Etcd.PASSWORD})
        self.assertEqual(sorted((a.worker_id, b.worker_id)), [0, 1])
        printed = subprocess.run([SEKKA, "serve", "--config", self.config("p", password="pw"),
                                  "--print-config"], capture_output=True, text=True, timeout=30)
        self.assertIn('password = "(hidden)"', printed.stdout)
        self.assertNotIn('"pw"', printed.stdout)

        def draw(rounds):
            ids = []
            for _ in range(rounds):
                for s in (a, b):
                    ids += CoordinatorTestCase.batch(s)
            return ids

        ids = draw(50)
        for s in (a, b):
            _, body = s.get_json("/v1/info")
            self.assertEqual(body["lease"]["state"], "held")
            self.assertIn("over TLS as user sekka", body["lease"]["lease"])
        # A restarted member has forgotten every token (simple tokens live in memory): each
        # server must authenticate again, or its renewals fail and it loses its lease.
        self.etcd.stop_member(0, signal.SIGTERM)
        self.etcd.start_member(0)
        time.sleep(3 * 4)  # three lease TTLs
        ids += draw(50)
        self.assertEqual(len(ids), 200_000)
        self.assertEqual(len(set(ids)), 200_000)
        for s in (a, b):
            metrics = s.get("/metrics")[2]
            self.assertIn("sekka_lease_held 1", metrics)
            self.assertIn("sekka_leases_lost_total 0", metrics)
            self.assertEqual(s.get("/readyz")[0], 200)

    def test_each_wrong_access_setting_is_a_one_line_error(self):
        self.etcd.etcdctl("user", "add", "nobody:nobody-secret", user="root:root-secret")
        c = self.certs
        cases = [
            ("plain", dict(tls_ca_file=None, tls_cert_file=None, tls_key_file=None),
             "HTTPS only"),
            ("nocert", dict(tls_cert_file=None, tls_key_file=None), "client certificate"),
            ("otherca", dict(tls_ca_file=c["other-ca.crt"]), "SSL certificate problem"),
            ("cn", dict(tls_cert_file=c["client-cn.crt"], tls_key_file=c["client-cn.key"]),
             "without a Common Name"),
            ("nouser", dict(username=None, password=None), "has authentication enabled"),
            ("badpassword", dict(password="wrong"), "refused user \"sekka\""),
            ("nobody", dict(username="nobody", password="nobody-secret"),
             "readwrite permission on the key prefix sekka/default/"),
            ("nofile", dict(password=None, password_file=self.dirs.path("missing")),
             "worker.password_file"),
        ]
        for name, worker, want in cases:
            with self.subTest(name):
                s = self.start(name, self.config(name, **worker), wait=False)
                self.assertFalse(s.wait_listening(), "started with a wrong setting")
                self.assertIn(s.proc.returncode, (1, 2))
                lines = s.stderr_text().strip().splitlines()
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(want, lines[0])
                self.assertNotIn("nobody-secret", lines[0])
                self.assertNotIn(Etcd.PASSWORD, lines[0])


class ZooKeeperAuthTest(CoordinatorTestCase):
    """ZooKeeper's digest authentication: the cluster's nodes belong to the user that made them."""
    source = "zookeeper"

    def test_a_digest_user_owns_the_cluster_and_others_are_refused_in_one_line(self):
        user = {"SEKKA_WORKER_USERNAME": "sekka", "SEKKA_WORKER_PASSWORD": "zk-secret"}
        a = self.start("a", env=user)
        ids = self.batch(a)
        _, body = a.get_json("/v1/info")
        self.assertIn("as digest user sekka", body["lease"]["lease"])
        for name, env in [("none", {}), ("wrong", dict(user, SEKKA_WORKER_PASSWORD="nope"))]:
            with self.subTest(name):
                s = self.start(name, env=env, wait=False)
                self.assertFalse(s.wait_listening(), "took a worker id without the user")
                self.assertEqual(s.proc.returncode, 1)
                lines = s.stderr_text().strip().splitlines()
                self.assertEqual(len(lines), 1, lines)
                self.assertIn("not allowed: the nodes under /sekka/default belong to", lines[0])
                self.assertNotIn("zk-secret", lines[0])
                self.servers.remove(s)
                s.stop()
        b = self.start("b", env=user)
        self.assertEqual(sorted((a.worker_id, b.worker_id)), [0, 1])
        more = self.batch(b) + self.batch(a)
        self.assertEqual(len(set(ids + more)), len(ids) + len(more))


class CoordinatorConfigTest(unittest.TestCase):
    def test_bad_coordinator_settings_are_one_line_usage_errors(self):
        dirs = TempDirs()
        try:
            etcd = ["--worker-source", "etcd", "--coordinator", "etcd://127.0.0.1:2379"]
            for flags, env, want in [
                (["--worker-source", "etcd"], {}, "worker.coordinator"),
                (["--worker-source", "etcd", "--coordinator", "zookeeper://127.0.0.1:2181"], {},
                 "does not match worker.source"),
                (["--worker-source", "zookeeper", "--coordinator", "db_example:2181"], {},
                 "allowed host:port"),
                (etcd + ["--cluster", "a/b"], {}, "cluster name"),
                (etcd + ["--lease-ttl", "1s"], {}, "worker.lease_ttl"),
                (["--worker-source", "zookeeper", "--coordinator", "127.0.0.1:2181"],
                 {"SEKKA_WORKER_TLS_CA_FILE": "system"}, "worker.source"),
                (["--worker-source", "local"], {"SEKKA_WORKER_USERNAME": "u",
                                                "SEKKA_WORKER_PASSWORD": "p"}, "worker.source"),
                (etcd, {"SEKKA_WORKER_TLS_CERT_FILE": "/etc/hostname"}, "go together"),
                (etcd, {"SEKKA_WORKER_TLS_CERT_FILE": "/etc/hostname",
                        "SEKKA_WORKER_TLS_KEY_FILE": "/etc/hostname"}, "worker.tls_ca_file"),
                (etcd, {"SEKKA_WORKER_TLS_CA_FILE": dirs.path("none.pem")},
                 "worker.tls_ca_file"),
                (etcd, {"SEKKA_WORKER_USERNAME": "u"}, "worker.password"),
                (etcd, {"SEKKA_WORKER_PASSWORD": "p"}, "worker.username"),
            ]:
                p = subprocess.run([SEKKA, "serve", "--data-dir", dirs.path("d"), "--http",
                                    "127.0.0.1:0", "--resp", "127.0.0.1:0", *flags],
                                   capture_output=True, text=True, timeout=30,
                                   env={**os.environ, **env})
                self.assertEqual(p.returncode, 2, (flags, env, p.stderr))
                lines = p.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertIn(want, lines[0])
        finally:
            dirs.cleanup()


class SecretsInOutputsTest(unittest.TestCase):
    """Issue 42: /v1/info printed worker.coordinator with its password while --print-config,
    logs and /readyz masked it. The passwords of a running server's Redis coordinator,
    PostgreSQL segment store and Redis machine store appear in no output (/v1/info, /ui/data,
    /readyz, /metrics, RESP INFO and errors, HTTP errors, the log); --print-config and a start
    error show none of a MySQL store's or of worker.password on etcd and ZooKeeper either (those
    two parts passed before the fix too: they guard what was already masked)."""

    SECRETS = ("pw-coord-1", "pw-seg-2", "pw-mach-3", "pw-user-4")

    def setUp(self):
        self.dirs = TempDirs()
        self.redis = RedisStore(self.dirs.path("redis"))
        self.redis.client().config_set("requirepass", "pw-coord-1")
        self.flags = [
            "--worker-source", "redis",
            "--coordinator", f"redis://:pw-coord-1@{self.redis.endpoints}/0",
            "--segment-store", "postgres://sekka:pw-seg-2@127.0.0.1:1/ids",
            "--machines-store", f"redis://:pw-mach-3@{self.redis.endpoints}/2?schema=cosid"]
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.stop()
        self.redis.stop_server(crash=True)
        self.dirs.cleanup()

    def assertNoSecret(self, where, text):
        for secret in self.SECRETS:
            self.assertNotIn(secret, text, f"{where} shows a password")

    def test_no_output_shows_a_password(self):
        self.server = s = Server(self.dirs.path("s"), *self.flags)
        for path in ("/v1/info", "/ui/data", "/readyz", "/metrics", "/v1/segment/orders",
                     "/v1/tags", "/machines/ns?machineBit=4&instanceId=i&safeGuardDuration=PT1M"):
            self.assertNoSecret(path, s.get(path)[2])
        self.assertIn("***", s.get("/v1/info")[2])  # the coordinator, masked
        r = redis.Redis(host="127.0.0.1", port=s.resp_port)
        self.assertNoSecret("INFO", str(r.execute_command("INFO")))
        for command in (("SEG.NEXT", "orders"), ("SEG.TAGS",), ("SEG.CREATE", "t", "1", "10")):
            try:
                reply = str(r.execute_command(*command))
            except redis.exceptions.ResponseError as e:
                reply = str(e)
            self.assertNoSecret(" ".join(command), reply)
        self.assertNoSecret("the log", s.stderr_text())

    def test_print_config_and_errors_show_no_password(self):
        for source, coordinator in (("etcd", "etcd://127.0.0.1:1"),
                                    ("zookeeper", "zookeeper://127.0.0.1:1")):
            p = subprocess.run(
                [SEKKA, "serve", "--worker-source", source, "--coordinator", coordinator,
                 "--segment-store", "mysql://sekka:pw-seg-2@127.0.0.1:1/ids", "--print-config"],
                capture_output=True, text=True, timeout=30,
                env={**os.environ, "SEKKA_WORKER_USERNAME": "u",
                     "SEKKA_WORKER_PASSWORD": "pw-user-4"})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertNoSecret(f"--print-config ({source})", p.stdout + p.stderr)
        p = subprocess.run([SEKKA, "serve", *self.flags, "--print-config"],
                           capture_output=True, text=True, timeout=30)
        self.assertNoSecret("--print-config (redis)", p.stdout + p.stderr)
        # An error that quotes a coordinator URI: the source and the URI disagree.
        p = subprocess.run([SEKKA, "serve", "--worker-source", "etcd", "--coordinator",
                            f"redis://:pw-coord-1@{self.redis.endpoints}/0", "--data-dir",
                            self.dirs.path("e")], capture_output=True, text=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertNoSecret("a start error", p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
