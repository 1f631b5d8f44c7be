#!/usr/bin/python3
"""Every way of starting sekka on one host keeps the promise of unique ids (issue 22).

A review found ids repeated outside the coordinated server path: `sekka gen` beside `sekka serve`,
two servers with two data dirs, ascending beside descending generators, a `--worker-id` that a
`local` source ignored, and descending servers decoding their own ids wrongly. Each test here runs
the real binary the way that review did. Every process of one test shares one worker lock dir,
as every process of one host shares /var/lib/sekka/workers by default, and that lock dir serves
one id space (one layout and direction).
"""

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import SEKKA, Server, TempDirs, redis_cli  # noqa: E402

LAYOUT_WORKERS = 1024
EPOCH_MS = 1735689600000  # the sekka preset's epoch, 2025-01-01
TIME_SHIFT = 22           # 10 worker bits + 12 sequence bits


class HostTestCase(unittest.TestCase):
    """One simulated host: a lock dir that every process of the test shares."""

    def setUp(self):
        self.dirs = TempDirs()
        self.servers = []
        self.lock_dir = self.dirs.path("host-locks")
        self.env = dict(os.environ, SEKKA_WORKER_LOCK_DIR=self.lock_dir)

    def tearDown(self):
        for s in self.servers:
            s.stop()
        self.dirs.cleanup()

    def serve(self, name, *flags, wait=True, env=None):
        s = Server(self.dirs.path(name), *flags, env=dict(env or {}, **{
            "SEKKA_WORKER_LOCK_DIR": self.lock_dir}), wait=wait)
        self.servers.append(s)
        return s

    def refused(self, name, *flags, code, env=None):
        """Starts `sekka serve` expecting it to stop before it listens, with exit status
        `code`; returns what it wrote on stderr."""
        s = self.serve(name, *flags, wait=False, env=env)
        self.assertFalse(s.wait_listening())
        self.assertEqual(s.proc.returncode, code)
        return s.stderr_text()

    def unbind(self):
        """Removes the lock dir's id-space binding, as an operator does to change a host's
        layout (or as a lock dir from before the binding is): the per-id states stay."""
        os.unlink(os.path.join(self.lock_dir, "id-space"))

    def gen(self, *args, env=None, timeout=120):
        return subprocess.Popen([SEKKA, "gen", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env or self.env)

    def finish(self, proc, timeout=120):
        out, err = proc.communicate(timeout=timeout)
        self.assertEqual(proc.returncode, 0, err)
        return [int(x) for x in out.split()]

    def server_ids(self, s, requests, count):
        ids = []
        for _ in range(requests):
            status, body = s.get_json(f"/v1/ids?count={count}")
            self.assertEqual(status, 200, body)
            ids += [int(x) for x in body["ids"]]
        return ids


class HostWorkerIdTest(HostTestCase):
    def test_gen_beside_serve_never_prints_a_served_id(self):
        """Finding 1: gen locked <dir>/gen-<hash>/workers, serve <dir>/workers: both worker 0."""
        s = self.serve("served")
        g = self.gen("-n", "3000000")
        served = self.server_ids(s, 200, 2000)
        printed = self.finish(g)
        self.assertEqual(len(set(served)), len(served))
        self.assertEqual(len(set(served) & set(printed)), 0, "gen printed ids the server issued")

    def test_gens_of_two_users_on_one_host_print_different_ids(self):
        """gen kept its state under each user's home: two users' gens both took worker 0."""
        homes = [self.dirs.path("home-a"), self.dirs.path("home-b")]
        for home in homes:
            os.makedirs(home)
        a, b = (self.gen("-n", "400000", env=dict(self.env, HOME=h, XDG_STATE_HOME=""))
                for h in homes)
        first, second = self.finish(a), self.finish(b)
        self.assertEqual(len(set(first) & set(second)), 0,
                         "two gens on one host printed the same ids")

    def test_two_servers_with_two_data_dirs_take_two_worker_ids(self):
        """Finding 2: two data dirs (say two servers sharing one segment store) took worker 0."""
        a = self.serve("a")
        b = self.serve("b")
        self.assertNotEqual(a.worker_id, b.worker_id)
        ia, ib = self.server_ids(a, 50, 2000), self.server_ids(b, 50, 2000)
        self.assertEqual(len(set(ia) & set(ib)), 0)

    def test_a_static_worker_id_held_by_gen_is_refused_to_serve(self):
        g = self.gen("-n", "20000000", "--worker-id", "9")
        try:
            # gen has taken its lock once it has printed its first id.
            self.assertTrue(g.stdout.readline().strip())
            err = self.refused("s", "--worker-source", "static", "--worker-id", "9", code=1)
            self.assertIn("worker id 9 (datacenter 0) is already held by another process", err)
            self.assertIn(self.lock_dir, err)
        finally:
            g.kill()
            g.communicate()

    def test_worker_id_without_the_static_source_is_refused(self):
        """Finding 8: `--worker-id 5` under source local ran as worker 0, silently."""
        err = self.refused("s", "--worker-id", "5", code=2).strip().splitlines()
        self.assertIn("worker.id applies to worker.source static only", err[-1])
        self.refused("e", code=2, env={"SEKKA_WORKER_ID": "5"})
        # The same for a coordinator named under a local source: each host would pick alone.
        for name, flags, env, key in [
                ("c1", ["--coordinator", "etcd://127.0.0.1:2379"], {}, "worker.coordinator"),
                ("c2", [], {"SEKKA_WORKER_CLUSTER": "orders"}, "worker.cluster")]:
            last = self.refused(name, *flags, code=2, env=env).strip().splitlines()[-1]
            self.assertIn(f"{key} applies to worker.source etcd, zookeeper or redis only", last)

    def test_serve_after_id_issues_only_ids_above_it(self):
        """Issue 22, finding 6: a server that takes over from Leaf starts above Leaf's max id."""
        epoch = 1288834974657
        now_ms = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
        top = ((now_ms + 1500 - epoch) << 22) | (1023 << 12) | 4095
        s = self.serve("leaf", "--layout", "leaf", "--after-id", str(top))
        ids = self.server_ids(s, 5, 1000)
        self.assertGreater(min(ids), top)
        self.assertIn("generator.after_id", s.stderr_text())  # it said why it waited

    def test_an_unusable_lock_dir_is_one_line_naming_what_to_do(self):
        blocker = self.dirs.path("file")
        with open(blocker, "w") as f:
            f.write("not a directory")
        env = dict(self.env, SEKKA_WORKER_LOCK_DIR=blocker + "/locks")
        p = subprocess.run([SEKKA, "gen"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("worker lock dir", lines[0])
        self.assertIn("SEKKA_WORKER_LOCK_DIR", lines[0])


class ReviewFindingsTest(HostTestCase):
    """What the adversarial review of issue 22's change confirmed on the real binary."""

    def test_force_never_takes_a_free_id_of_another_layout(self):
        """--force under local took worker 0, whose state a descending gen had made, rewrote
        its history as ascending, and a later ascending gen repeated the descending ids."""
        self.finish(self.gen("-n", "1000", "--descending"))  # worker 0's state: descending
        self.unbind()
        s = self.serve("forced", "--force")
        self.assertEqual(s.worker_id, 1, s.stderr_text())

    def test_two_servers_on_one_data_dir_are_refused_whatever_the_source(self):
        """Two local-source servers on one data dir both ran and both handed CosId machine id 0
        to different instances (the machines file is read once and rewritten whole)."""
        self.serve("shared")
        self.assertIn("is used by another process", self.refused("shared", code=1))

    def test_a_descending_layout_key_is_kept_by_serve(self):
        """`serve --layout sekka,descending=true` served ascending ids."""
        s = self.serve("down", "--layout", "sekka,descending=true")
        status, body = s.get_json("/v1/ids?count=3")
        self.assertEqual(status, 200, body)
        ids = [int(x) for x in body["ids"]]
        self.assertEqual(ids, sorted(ids, reverse=True))

    def test_bad_take_over_questions_are_answered_clearly(self):
        expired = subprocess.run([SEKKA, "layout", "baidu", "--max-id", "1000"],
                                 capture_output=True, text=True, timeout=60, env=self.env)
        self.assertEqual(expired.returncode, 1, expired.stdout)
        self.assertIn("ran out on", expired.stderr)
        # The smallest int64 was the "not given" value, and was ignored; so was an empty value
        # (a script's `--after-id "$(cat maxid)"` of an empty file); values past int64 were
        # clamped and the clamped value named.
        for bad in ("-5", str(-2 ** 63), "", str(-2 ** 63 - 1), str(2 ** 63), "12x"):
            for args in (["gen", "--after-id", bad], ["layout", "sekka", "--max-id", bad]):
                p = subprocess.run([SEKKA, *args], capture_output=True, text=True, timeout=60,
                                   env=self.env)
                self.assertEqual(p.returncode, 2, (args, p.stdout))
                self.assertIn(f'"{bad}" is not an id: allowed 0 to', p.stderr)
        err = self.refused("empty", "--after-id", "", code=2)
        self.assertIn("config generator.after_id is empty", err)

    def test_a_removed_lock_file_stops_its_holder_before_another_takes_the_id(self):
        """Removing a held lock file let gen lock a new file at that path and print 2,000 ids
        the server had issued. The holder now checks its lock file before every hwm store."""
        s = self.serve("held")
        self.assertEqual(s.worker_id, 0)
        os.unlink(os.path.join(self.lock_dir, "0-0.lock"))
        g = self.gen("-n", "300000")
        served = []
        for _ in range(160):
            status, body = s.get_json("/v1/ids?count=1000")
            if status == 200:
                served += [int(x) for x in body["ids"]]
        printed = self.finish(g)
        self.assertEqual(len(set(served) & set(printed)), 0, "gen printed ids the server issued")
        self.assertIn("was removed or replaced while this process held it", s.stderr_text())
        # It takes an id anew (the second review: it stayed lost for good) and serves again.
        deadline = time.monotonic() + 15
        while s.get_json("/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        status, body = s.get_json("/v1/ids?count=1000")
        self.assertEqual(status, 200, body)
        self.assertEqual(len(set(int(x) for x in body["ids"]) & set(printed)), 0)

    def test_a_planted_symbolic_link_is_never_followed(self):
        """A symbolic link 0-0.lock in a shared lock dir made gen overwrite the file it points
        to; a link 0-0.state let its planter choose the hwm gen starts above."""
        os.makedirs(self.lock_dir)
        victim = self.dirs.path("victim")
        with open(victim, "w") as f:
            f.write("SECRET\n")
        lock = os.path.join(self.lock_dir, "0-0.lock")
        os.symlink(victim, lock)
        p = subprocess.run([SEKKA, "gen", "-n", "2"], capture_output=True, text=True, timeout=60,
                           env=self.env)
        self.assertIn("symbolic link", p.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "SECRET\n")
        os.unlink(lock)
        self.finish(self.gen("-n", "2"))
        # The planter's copy of the state, with its hwm set back to 0, behind a link.
        state = os.path.join(self.lock_dir, "0-0.state")
        with open(state) as f:
            planted_text = re.sub(r"hwm_ms \d+", "hwm_ms 0", f.read())
        planted = self.dirs.path("planted")
        with open(planted, "w") as f:
            f.write(planted_text)
        os.unlink(state)
        os.symlink(planted, state)
        p = subprocess.run([SEKKA, "gen", "-n", "2"], capture_output=True, text=True, timeout=60,
                           env=self.env)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertEqual(p.stdout, "")
        self.assertIn("0-0.state is a symbolic link, which sekka never follows", p.stderr)

    def test_two_layouts_whose_bits_overlap_never_share_a_host(self):
        """Both reviews of issue 22: `twitter` datacenter 1 worker 0 and `leaf` worker 32 carry
        the same bits, and in one lock dir they printed 397,312 equal ids of 400,000 (locks and
        states are keyed by datacenter and worker). A host's lock dir serves one id space."""
        self.finish(self.gen("-n", "1000", "--layout", "twitter", "--datacenter-id", "1"))
        p = subprocess.run([SEKKA, "gen", "-n", "1000", "--layout", "leaf", "--worker-id", "32"],
                           capture_output=True, text=True, env=self.env, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("serves layout twitter, not leaf", p.stderr)  # what is bound
        # Issue 43: the way to try a layout apart, in one line of under 200 characters with the
        # default lock dir (it was 600, and said to remove a file under /var/lib).
        self.assertIn('to try it, --lock-dir "$(mktemp -d)" (ids to throw away', p.stderr)
        self.assertLess(len(p.stderr.strip().replace(self.lock_dir, "/var/lib/sekka/workers")),
                        200)
        err = self.refused("leaf", "--layout", "leaf", "--worker-source", "static",
                           "--worker-id", "32", code=2)
        self.assertIn("One id space per host", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)  # the refusal is its one line

    def as_user(self, uid, *args):
        binary = self.dirs.path("sekka")
        if not os.path.exists(binary):
            shutil.copy(SEKKA, binary)
            os.chmod(binary, 0o755)
        return subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(uid),
                               "--clear-groups", binary, *args],
                              capture_output=True, text=True, timeout=60)

    def test_a_second_user_of_the_dirs_group_takes_an_id_a_first_user_used(self):
        """A second user's gen stopped on the first user's lock file: `cannot write
        0-0.lock: Invalid argument` (ftruncate on a read-only descriptor). Users share a lock
        dir through its group (the package's `sekka`): a setgid dir of that group."""
        os.chmod(self.dirs.root, 0o755)
        os.makedirs(self.lock_dir)
        os.chown(self.lock_dir, 0, 5001)
        os.chmod(self.lock_dir, 0o2770)
        first = self.finish(self.gen("-n", "1000"))  # root's lock and state files, 0640
        p = self.as_user(5001, "gen", "-n", "1000", "--lock-dir", self.lock_dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        second = [int(x) for x in p.stdout.split()]
        self.assertGreater(min(second), max(first))

    def test_a_user_who_cannot_use_the_lock_dir_is_told_the_one_command_that_fixes_it(self):
        """Issue 43, point 3: a user who is not root, on a host without the package, could not
        run gen ("cannot use the worker lock dir ... (Permission denied)", then several ways
        out). The refusal now ends with the one command root runs; after it, the user's gen
        works, in the host's one lock dir (not a dir of its own): for a missing dir, for one
        root's gen made (its files root's), and below a parent an older sekka made 0750."""
        os.chmod(self.dirs.root, 0o755)
        parent = os.path.dirname(self.lock_dir)
        fixes = [f"install -d -m 2770 -g 5001 {self.lock_dir} && chgrp -R 5001 {self.lock_dir}"] * 2
        fixes.append(f"chmod o+x {parent} && " + fixes[0])
        for case, fix in enumerate(fixes):
            if case:
                shutil.rmtree(self.lock_dir)
                self.finish(self.gen("-n", "10"))  # root's gen makes it, 0750 root:root
            if case == 2:
                os.chmod(parent, 0o750)  # as sekka made parents before
            p = self.as_user(5001, "gen", "-n", "10", "--lock-dir", self.lock_dir)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            command = re.search(r"as root, run: (.*)$", p.stderr.strip())
            self.assertIsNotNone(command, p.stderr)
            self.assertEqual(command.group(1), fix)
            subprocess.run(["sh", "-c", command.group(1)], check=True, timeout=30)
            p = self.as_user(5001, "gen", "-n", "10", "--lock-dir", self.lock_dir)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"(lock dir {self.lock_dir})", p.stderr)

    def test_a_user_outside_the_packages_group_is_told_to_join_it(self):
        """Review of issue 43: where the package made the lock dir (its parent 0750 and the dir
        2770, both of group sekka), the fix offered was to re-make the dir for the user's own
        group, which failed (the parent stayed shut) and took the dir from sekka's group."""
        os.chmod(self.dirs.root, 0o755)
        parent = os.path.dirname(self.lock_dir)
        os.makedirs(self.lock_dir)
        for d, mode in ((parent, 0o750), (self.lock_dir, 0o2770)):
            os.chown(d, 0, 5003)
            os.chmod(d, mode)
        p = self.as_user(5001, "gen", "-n", "10", "--lock-dir", self.lock_dir)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertRegex(p.stderr.strip(), r"as root, run: usermod -aG \S+ \S+ "
                                           r"\(then log in again\)$")

    def test_no_other_user_can_read_or_block_the_dirs(self):
        """Issue 24, finding 7: the data dir was 0755 and its files 0644, so any user could
        flock a lock file and block a worker id; the error then named a stale pid. Now the data
        dir is 0700, the lock dir 0750, their files 0640, and errors name the real holder."""
        os.chmod(self.dirs.root, 0o755)
        s = self.serve("data")
        data = self.dirs.path("data")
        self.assertEqual(os.stat(data).st_mode & 0o777, 0o700)
        self.assertEqual(os.stat(self.lock_dir).st_mode & 0o777, 0o750)
        for root in (data, self.lock_dir):
            for d, _, files in os.walk(root):
                for f in files:
                    mode = os.stat(os.path.join(d, f)).st_mode & 0o777
                    self.assertEqual(mode & 0o007, 0, f"{d}/{f} is {oct(mode)}")
        blocker = subprocess.run(["setpriv", "--reuid", "5002", "--regid", "5002",
                                  "--clear-groups", "flock", "-n",
                                  os.path.join(self.lock_dir, "0-0.lock"), "true"],
                                 capture_output=True, text=True, timeout=30)
        self.assertNotEqual(blocker.returncode, 0)
        self.assertIn("Permission denied", blocker.stderr)
        # A lock held by a process that is not sekka (here flock(1), by root): the error names
        # that process, not the pid recorded in the file by its last sekka holder.
        self.finish(self.gen("-n", "10", "--worker-id", "1"))  # records a holder, then exits
        lock = os.path.join(self.lock_dir, "0-1.lock")
        holder = subprocess.Popen(["flock", "-n", lock, "sleep", "30"])
        try:
            time.sleep(0.5)
            p = subprocess.run([SEKKA, "gen", "-n", "1", "--worker-id", "1"], env=self.env,
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertRegex(p.stderr, r"held by pid \d+ \((flock|sleep)\)")
        finally:
            holder.kill()
            holder.wait()
        s.stop()


def fake_absolute(ms):
    """A libfaketime environment whose clock starts at `ms` (Unix ms) and runs on."""
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
            "FAKETIME": "@" + t.strftime("%Y-%m-%d %H:%M:%S"), "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "TZ": "UTC"}


class DirectionTest(HostTestCase):
    def test_ascending_and_descending_generators_never_meet(self):
        """Finding 3: descending (tick T, worker w) was ascending (2^41-1-T, 1023-w): gen
        --worker-id 0 and gen --worker-id 1023 --descending at the mirror date printed the same
        ids. Now a descending id keeps its worker field, and worker ids are exclusive per host."""
        # Both runs at faked dates. libfaketime starts a clock at a whole second, and the mirror
        # of a whole second's tick lies 551 ms into a second (2^41 - 1 ends in 551): the
        # descending run starts one to two seconds of ticks before the mirror of the ascending
        # run's ticks (time for a slow start on a busy machine), and stops past it.
        up_start = EPOCH_MS + 150 * 86_400_000  # 2025-05-31T00:00:00Z
        up = self.finish(self.gen("-n", "400000", "--worker-id", "0",
                                  env=dict(self.env, **fake_absolute(up_start))))
        up_ids = set(up)
        ticks = {i >> TIME_SHIFT for i in up}
        max_tick = (1 << 41) - 1
        down_start = EPOCH_MS + (max_tick - max(ticks)) // 1000 * 1000 - 1000
        span = max_tick - min(ticks) - (down_start - EPOCH_MS) + 50
        # A busy machine deschedules either run for whole ticks, so one descending run may meet
        # few of the ascending run's ticks: each run adds the ticks it met, up to five runs,
        # until half of them show the test can see. Every run must miss every ascending id.
        # Each run has its own lock dir: a host's lock dir serves one direction (and the run
        # before stored its hwm), and the test is that the ids of the two never meet even where
        # no lock keeps them apart.
        met = set()
        for run in range(5):
            env = dict(self.env, SEKKA_WORKER_LOCK_DIR=self.dirs.path(f"down-locks-{run}"),
                       **fake_absolute(down_start))
            down = self.finish(self.gen("-n", str(4096 * span), "--worker-id", "1023",
                                        "--descending", env=env), timeout=300)
            self.assertLess(down[-1], down[0])
            self.assertEqual(len(up_ids.intersection(down)), 0, "ascending and descending ids met")
            met |= ticks & {max_tick - ((2 ** 63 - 1 - i) >> TIME_SHIFT) for i in down}
            if len(met) >= len(ticks) // 2:
                break
        self.assertGreaterEqual(len(met), max(1, len(ticks) // 2),
                                f"five descending runs met {len(met)} of the ascending run's "
                                f"{len(ticks)} ticks")

    def test_a_descending_server_decodes_its_own_ids(self):
        """Finding 9: /v1/decode, ID.DECODE and /decodeSnowflakeId of a descending server's id
        said 2092, worker 1023, sequence 4095."""
        s = self.serve("down", "--worker-source", "static", "--worker-id", "3",
                       env={"SEKKA_GENERATOR_DESCENDING": "true"})
        status, body = s.get_json("/v1/id")
        self.assertEqual(status, 200, body)
        now = datetime.datetime.now(datetime.timezone.utc)
        status, d = s.get_json(f"/v1/decode/{body['id']}")
        self.assertEqual(status, 200, d)
        self.assertEqual(d["worker"], 3)
        self.assertLess(abs(d["timestamp_ms"] / 1000 - now.timestamp()), 60)
        decoded = redis_cli(s, "ID.DECODE", body["id"]).split("\n")
        fields = dict(zip(decoded[0::2], decoded[1::2]))
        self.assertEqual(int(fields["worker"]), 3)
        self.assertLess(abs(int(fields["timestamp_ms"]) / 1000 - now.timestamp()), 60)
        status, leaf = s.get_json(f"/decodeSnowflakeId?snowflakeId={body['id']}")
        self.assertEqual(status, 200, leaf)
        self.assertEqual(int(leaf["workerId"]), 3)
        p = subprocess.run([SEKKA, "decode", "--descending", "--json", body["id"]],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        cli = json.loads(p.stdout.splitlines()[0])
        self.assertEqual(cli["worker"], 3)
        self.assertEqual(cli["timestamp_ms"], d["timestamp_ms"])

    def test_a_state_of_the_other_direction_is_refused(self):
        up = self.serve("data", "--worker-source", "static", "--worker-id", "4")
        up.get("/v1/id")
        up.stop()
        self.servers.remove(up)
        self.unbind()  # the lock dir's binding refuses it too; this is the id's own state
        err = self.refused("data", "--worker-source", "static", "--worker-id", "4", code=2,
                           env={"SEKKA_GENERATOR_DESCENDING": "true"})
        self.assertIn("descending=true", err)

    def test_http_and_resp_decode_show_the_shard(self):
        """Finding 9: HTTP and RESP decodes left out the shard that `sekka decode` shows."""
        s = self.serve("sharded", "--layout", "shard_bits=4,time_bits=37")
        status, body = s.get_json("/v1/id")
        self.assertEqual(status, 200, body)
        p = subprocess.run([SEKKA, "decode", "--layout", "shard_bits=4,time_bits=37", "--json", body["id"]],
                           capture_output=True, text=True, timeout=60)
        cli = json.loads(p.stdout.splitlines()[0])
        status, d = s.get_json(f"/v1/decode/{body['id']}")
        self.assertEqual(d["shard"], cli["shard"])
        decoded = redis_cli(s, "ID.DECODE", body["id"]).split("\n")
        fields = dict(zip(decoded[0::2], decoded[1::2]))
        self.assertEqual(int(fields["shard"]), cli["shard"])


if __name__ == "__main__":
    unittest.main()
