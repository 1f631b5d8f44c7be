#!/usr/bin/python3
"""`sekka check` on inputs with known answers: two workers at known rates with planted repeats,
future ids, negative ids, ids outside the layout and a clock step, read from stdin, files,
SQLite (Python's sqlite3) and PostgreSQL (psql loads the table). Ids are composed here with the
sekka layout's formula, apart from sekka's code."""

import json
import os
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import SEKKA, PostgresTestCase, TempDirs, load_ids_into_postgres  # noqa: E402

EPOCH_MS = 1735689600000  # the sekka preset


def compose(ms, worker, seq):
    return ((ms - EPOCH_MS) << 22) | (worker << 12) | seq


def known_stream():
    """Worker 3 at 2 ids/ms and worker 9 at 1 id every 2 ms for 10 s, then planted faults.
    Returns (ids as text, expected JSON fields)."""
    start = int(time.time() * 1000) - 60_000
    ids = []
    for ms in range(10_000):
        ids += [compose(start + ms, 3, 0), compose(start + ms, 3, 1)]
        if ms % 2 == 0:
            ids.append(compose(start + ms, 9, 0))
    repeated = ids[100]
    back = compose(start + 5000, 3, 2)  # worker 3 steps back 5 s
    future = compose(start + 3_600_000, 9, 0)
    planted = [back, repeated, repeated, future, -7, 2 ** 63 - 1 + 0]
    # 2^63-1 decodes (it fits the layout) but lies in 2094: from the future too.
    expected = {"ids": len(ids) + len(planted), "repeated_values": 1, "repeats": 2,
                "order_breaks": 2, "future": 2, "before_epoch": 1, "outside": 0, "workers": 3}
    return ids + planted, expected, repeated


class CheckTest(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()

    def tearDown(self):
        self.dirs.cleanup()

    def check(self, *args, stdin=None, code=1):
        p = subprocess.run([SEKKA, "check", "--json", *args], input=stdin, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, code, p.stderr)
        return json.loads(p.stdout)

    def assertKnown(self, got, expected, repeated):
        for key, want in expected.items():
            self.assertEqual(got[key], want, key)
        self.assertEqual(got["repeat_examples"][0]["id"], str(repeated))
        self.assertEqual(got["repeat_examples"][0]["occurrences"], 3)
        self.assertEqual(got["repeat_examples"][0]["positions"], [100, 25_001, 25_002])
        self.assertEqual(got["order_break_examples"][0]["worker"], 3)

    def test_stdin_and_files(self):
        ids, expected, repeated = known_stream()
        text = "\n".join(map(str, ids)) + "\n"
        self.assertKnown(self.check(stdin=text), expected, repeated)
        # Split over two files, commas and quotes (CSV), and a line that is not an id.
        a, b = self.dirs.path("a.csv"), self.dirs.path("b.txt")
        with open(a, "w") as f:
            f.write(",".join(f'"{i}"' for i in ids[:12_345]) + "\n")
        with open(b, "w") as f:
            f.write("\n".join(map(str, ids[12_345:])) + "\nnot-an-id\n")
        got = self.check(a, b)
        self.assertKnown(got, expected, repeated)
        self.assertEqual(got["not_ids"], 1)
        self.assertEqual(got["not_id_examples"], [{"source": b, "line": len(ids) - 12_345 + 1,
                                                   "text": "not-an-id"}])

    def test_clean_ids_exit_0_and_the_text_report(self):
        ids = subprocess.run([SEKKA, "gen", "-n", "50000", "--lock-dir", self.dirs.path("gen")],
                             capture_output=True, text=True, check=True).stdout
        p = subprocess.run([SEKKA, "check"], input=ids, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ids           50,000 (50,000 distinct)", p.stdout)
        self.assertIn("repeated      0 ids repeat", p.stdout)
        p = subprocess.run([SEKKA, "check"], input=ids + ids.split()[7] + "\n",
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("<- ids repeat", p.stdout)
        self.assertIn(f"{ids.split()[7]} x2 at positions 7, 50000", p.stdout)

    def test_spread_and_js53_layouts_and_ids_outside_them(self):
        shard = subprocess.run([SEKKA, "gen", "-n", "3000", "--layout", "shard_bits=4,time_bits=37",
                                "--lock-dir", self.dirs.path("gen")],
                               capture_output=True, text=True, check=True).stdout.split()
        forged = str(int(shard[0]) ^ (1 << 60))
        got = self.check("--layout", "shard_bits=4,time_bits=37",
                         stdin="\n".join(shard + [forged]), code=0)
        self.assertEqual((got["ids"], got["outside"], got["order_breaks"]), (3001, 1, 0))
        got = self.check("--layout", "js53", stdin=f"{2 ** 53}\n5\n", code=0)
        self.assertEqual(got["outside"], 1)

    def test_sqlite_query(self):
        ids, expected, repeated = known_stream()
        path = self.dirs.path("orders.db")
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE orders (seq INTEGER PRIMARY KEY, id INTEGER)")
        db.executemany("INSERT INTO orders (id) VALUES (?)", [(i,) for i in ids])
        db.execute("INSERT INTO orders (id) VALUES (NULL)")
        db.commit()
        db.close()
        got = self.check("--db", f"sqlite:{path}", "--query", "SELECT id FROM orders ORDER BY seq")
        self.assertKnown(got, expected, repeated)
        self.assertEqual(got["not_ids"], 1)

    def test_bad_usage_is_one_line(self):
        for args, says in [(["--db", "sqlite:/x"], "--db and --query go together"),
                           (["--db", "mysql://h/db", "--query", "SELECT 1"], "is not known"),
                           (["--db", f"sqlite:{self.dirs.path('none.db')}", "--query",
                             "SELECT id FROM t"], "SQLite"),
                           (["--examples", "-1"], "--examples -1"),
                           (["/nonexistent/ids"], "cannot read /nonexistent/ids"),
                           (["/"], "cannot read /")]:
            p = subprocess.run([SEKKA, "check", *args], input="", capture_output=True, text=True)
            # 1 means ids repeat; a check that could not run is 2, whatever stopped it (an
            # unreadable file was 1, like repeats: issue 24, finding 10).
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
            self.assertIn(says, p.stderr)


class CheckPostgresTest(PostgresTestCase):
    def test_postgres_query(self):
        ids, expected, repeated = known_stream()
        load_ids_into_postgres(self.pg, ids)
        p = subprocess.run([SEKKA, "check", "--json", "--db", self.pg.uri, "--query",
                            "SELECT id FROM t ORDER BY n"], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 1, p.stderr)
        got = json.loads(p.stdout)
        for key, want in expected.items():
            self.assertEqual(got[key], want, key)
        self.assertEqual(got["repeat_examples"][0]["positions"], [100, 25_001, 25_002])
        p = subprocess.run([SEKKA, "check", "--db", self.pg.uri, "--query",
                            "SELECT id FROM no_such_table"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no_such_table", p.stderr)


if __name__ == "__main__":
    unittest.main()
