#!/usr/bin/python3
"""The guides of docs/operations.md run as written: each block marked `<!-- guide: NAME -->`
is run by bash, line for line, on this machine's real servers. What a test changes is only what
ties a guide to a fresh machine: its package and service lines (the build under test and the
test's own MariaDB or Redis stand for them), the default ports (free ones, so that tests run side
by side) and /tmp paths (a temp dir). Its output is compared with what the guide says it prints.
Run with /usr/bin/python3; SEKKA_BIN names the binary."""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from free_port import free_port  # noqa: E402
from sekka_testlib import SEKKA, Mariadb, RedisStore, TempDirs, ZooKeeper  # noqa: E402

GUIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "operations.md")


def guide(name):
    """The bash block that follows `<!-- guide: NAME -->` in docs/operations.md."""
    with open(GUIDE) as f:
        text = f.read()
    m = re.search(r"<!-- guide: " + re.escape(name) + r" -->\n```bash\n(.*?)```\n", text, re.S)
    if not m:
        raise AssertionError(f"docs/operations.md has no guide {name}")
    return m.group(1)


class GuideTestCase(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()
        self.backend = None

    def tearDown(self):
        if self.backend:
            self.backend.stop()
        self.dirs.cleanup()

    def run_guide(self, name, replace, preamble=""):
        """Runs guide `name` (without its apt-get and service lines) with `replace`'s
        substitutions; its standard output, line by line. Every server it starts in the
        background is stopped when it ends, whatever happened."""
        lines = [line for line in guide(name).splitlines()
                 if not line.startswith(("apt-get ", "service "))]
        script = "\n".join(lines)
        for old, new in replace.items():
            self.assertIn(old, script, f"the guide no longer says {old}")
            script = script.replace(old, new)
        script = ("set -euo pipefail\ntrap 'kill $(jobs -p) 2> /dev/null || true' EXIT\n" +
                  preamble + script)
        # A fresh machine's lock dir: the guide's own, whatever the suite's class was given.
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(SEKKA)) + ":" +
                   os.environ["PATH"], SEKKA_WORKER_LOCK_DIR=self.dirs.path("worker-locks"))
        cwd = self.dirs.path("cwd")
        os.makedirs(cwd)
        try:
            p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                               timeout=300, cwd=cwd)
        except subprocess.TimeoutExpired as e:
            self.fail(f"the guide did not end within 300 s\nstdout:\n{e.stdout}\n"
                      f"stderr:\n{(e.stderr or b'')[-3000:]}")
        self.assertEqual(p.returncode, 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr[-3000:]}")
        lines = p.stdout.splitlines()
        self.started = sum(1 for line in lines if line.startswith("sekka serve: "))
        return [line for line in lines if not line.startswith("sekka serve: ")]


class ComingFromLeafTableTest(GuideTestCase):
    def test_from_leafs_table_to_sekkas_own_with_no_id_twice(self):
        self.backend = Mariadb(self.dirs.path("mariadb"))
        http, resp = free_port(), free_port()
        out = self.run_guide("leaf-table", {
            "127.0.0.1:3306": f"127.0.0.1:{self.backend.port}",
            "127.0.0.1:8080": f"127.0.0.1:{http}",
            "-p 6380": f"-p {resp}",
            "/tmp/sekka-leaf": self.dirs.path("data"),
            "sekka serve": f"sekka serve --http 127.0.0.1:{http} --resp 127.0.0.1:{resp}",
        }, preamble=(  # the fixture's root is the socket's, as Debian's is
            f"mariadb() {{ command mariadb --socket={self.backend.path}/sock \"$@\"; }}\n"))
        self.assertEqual(out, [
            "orders next_id=1 step=2000", "1", "2", "3", "4", "max_id", "4001",
            "orders next_id=4001 step=2000", "4001", "4002", "4003", "Leaf's next range refused"])
        self.assertEqual(self.started, 2)
        # sekka's ids 1-4 and 4001-4003, Leaf's [2001, 4001): none twice.


class ComingFromCosIdTest(GuideTestCase):
    def test_from_cosids_redis_distributor_to_sekka_with_no_machine_id_twice(self):
        self.backend = RedisStore(self.dirs.path("redis"))
        a, b = free_port(), free_port()
        out = self.run_guide("cosid-redis", {
            "-p 6379": f"-p {self.backend.port}",
            "127.0.0.1:6379": f"127.0.0.1:{self.backend.port}",
            "127.0.0.1:8081": f"127.0.0.1:{a}",
            "127.0.0.1:8082": f"127.0.0.1:{b}",
            "/tmp/sekka-a": self.dirs.path("a"),
            "/tmp/sekka-b": self.dirs.path("b"),
        })
        self.assertEqual((len(out), self.started), (5, 2), out)
        self.assertEqual(out[0], "OK")
        self.assertRegex(out[1], r'^\{"machineId":1,"lastTimeStamp":\d+\}$')
        self.assertRegex(out[2], r'^\{"machineId":0,"lastTimeStamp":\d+\}$')
        self.assertEqual(sorted(out[3:]), ["10.0.0.1:8080", "10.0.0.2:8080"])


class ComingFromTinyIdTableTest(GuideTestCase):
    def test_from_tinyids_table_to_sekkas_own_with_no_id_twice(self):
        self.backend = Mariadb(self.dirs.path("mariadb"))
        http, resp = free_port(), free_port()
        out = self.run_guide("tinyid-table", {
            "127.0.0.1:3306": f"127.0.0.1:{self.backend.port}",
            "127.0.0.1:8080": f"127.0.0.1:{http}",
            "/tmp/sekka-tinyid": self.dirs.path("data"),
            "sekka serve": f"sekka serve --http 127.0.0.1:{http} --resp 127.0.0.1:{resp}",
        }, preamble=(
            f"mariadb() {{ command mariadb --socket={self.backend.path}/sock \"$@\"; }}\n"))
        self.assertEqual(out, [
            "test_odd next_id=2 step=1000 delta=2 remainder=1", "3,5,7",
            '{"data":null,"code":5,"message":"token is error: send ?token= a token that '
            'tiny_id_token gives this bizType (or server.auth_token)"}', "max_id", "2001",
            "test_odd next_id=2002 step=1000 delta=2 remainder=1", "2003,2005,2007",
            "max_id\tdelta", "9223372036854775807\t0"])
        self.assertEqual(self.started, 2)
        # sekka's 3, 5, 7 and 2003, 2005, 2007, tinyid's (1001, 2001]: none twice.


class ComingFromLeafSnowflakeTest(GuideTestCase):
    def test_beside_a_leaf_servers_node_sekka_takes_its_own_worker_id(self):
        self.backend = ZooKeeper(self.dirs.path("zk"))
        http, resp = free_port(), free_port()
        out = self.run_guide("leaf-snowflake", {  # sekka's leaf_address is its HTTP address
            "127.0.0.1:2181": self.backend.endpoints,
            "127.0.0.1:8080": f"127.0.0.1:{http}",
            "/tmp/sekka-snowflake": self.dirs.path("snowflake"),
            "sekka serve": f"sekka serve --http 127.0.0.1:{http} --resp 127.0.0.1:{resp}",
        })
        self.assertEqual(out, [
            "Created /snowflake/com.example.leaf.orders/forever/10.0.0.1:8080-0000000000",
            "Created /snowflake/com.example.leaf.orders/forever/10.0.0.2:8080-0000000001",
            "worker=2", "worker=2",
            f"[10.0.0.1:8080-0000000000, 10.0.0.2:8080-0000000001, 127.0.0.1:{http}-0000000002]"])
        self.assertEqual(self.started, 2)


if __name__ == "__main__":
    unittest.main(argv=sys.argv, verbosity=2)
