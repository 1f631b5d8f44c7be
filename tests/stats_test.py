#!/usr/bin/python3
"""`sekka stats` on inputs with known answers (two workers at known rates, a quiet gap, a burst
that fills a tick), from stdin, files, SQLite and PostgreSQL, and its HTML report in headless
Chromium: no console errors, every chart drawn, a screenshot. Ids are composed here with the
sekka layout's formula, apart from sekka's code."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import (SEKKA, PostgresTestCase, TempDirs, chromium,  # noqa: E402
                           load_ids_into_postgres)

EPOCH_MS = 1735689600000
START_MS = 1780272000000  # 2026-06-01T00:00:00Z


def compose(ms, worker, seq):
    return ((ms - EPOCH_MS) << 22) | (worker << 12) | seq


def known_ids():
    """Worker 3 at 2 ids/ms and worker 9 at 1 id per 2 ms for 10 s, nothing from 4 s to 7 s,
    and worker 9 filling the tick at 9.999 s."""
    ids = []
    for ms in range(10_000):
        if 4000 <= ms < 7000:
            continue
        ids += [compose(START_MS + ms, 3, 0), compose(START_MS + ms, 3, 1)]
        if ms % 2 == 0:
            ids.append(compose(START_MS + ms, 9, 0))
    ids += [compose(START_MS + 9999, 9, seq) for seq in range(1, 4096)]
    return ids


class StatsTest(unittest.TestCase):
    def setUp(self):
        self.dirs = TempDirs()

    def tearDown(self):
        self.dirs.cleanup()

    def stats(self, *args, stdin=None):
        p = subprocess.run([SEKKA, "stats", "--interval", "1s", *args], input=stdin,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def assertKnown(self, j):
        self.assertEqual(j["ids"], 7 * 2500 + 4095)
        self.assertEqual(j["first"], "2026-06-01T00:00:00.000Z")
        self.assertEqual(j["last"], "2026-06-01T00:00:09.999Z")
        self.assertEqual([b["ids"] for b in j["intervals"]],
                         [2500] * 4 + [0] * 3 + [2500] * 2 + [2500 + 4095])
        self.assertEqual(j["peak"], {"start": "2026-06-01T00:00:09.000Z", "ids": 6595,
                                     "ids_per_second": 6595.0})
        self.assertEqual(j["quiet"], {"empty_intervals": 3,
                                      "longest_gap_start": "2026-06-01T00:00:04.000Z",
                                      "longest_gap_ms": 3000})
        self.assertEqual([(w["worker"], w["ids"]) for w in j["workers"]],
                         [(3, 14_000), (9, 3500 + 4095)])
        self.assertAlmostEqual(j["workers"][0]["share"], 14_000 / j["ids"])
        self.assertEqual(j["workers"][1]["max_sequence_use"], 1.0)
        self.assertEqual(j["sequence_use"]["ticks"], 7000 + 3500 + 1)
        self.assertEqual(j["sequence_use"]["ticks_at_ceiling"], 1)
        self.assertEqual(j["series"][0]["per_interval"][0], 2000)

    def test_stdin_files_and_the_text_and_csv_forms(self):
        ids = known_ids()
        text = "\n".join(map(str, ids)) + "\n"
        self.assertKnown(json.loads(self.stats("--json", stdin=text)))
        a, b = self.dirs.path("a"), self.dirs.path("b")
        with open(a, "w") as f:
            f.write("\n".join(map(str, ids[:9000])) + "\n")
        with open(b, "w") as f:
            f.write(",".join(map(str, ids[9000:])))
        self.assertKnown(json.loads(self.stats("--json", a, b)))
        out = self.stats(a, b)
        self.assertIn("ids           21595", out)
        self.assertIn("peak          6595 ids at 2026-06-01T00:00:09.000Z (6595 ids/s)", out)
        self.assertIn("quiet         3 empty intervals; longest 3 s from 2026-06-01T00:00:04", out)
        self.assertIn("worker 3", out)
        twitter = subprocess.run([SEKKA, "gen", "-n", "100", "--layout", "twitter",
                                  "--datacenter-id", "3", "--worker-id", "5", "--lock-dir",
                                  self.dirs.path("gen")], capture_output=True, text=True,
                                 check=True).stdout
        j = json.loads(self.stats("--json", "--layout", "twitter", stdin=twitter))
        self.assertEqual((j["workers"][0]["datacenter"], j["workers"][0]["worker_in_datacenter"],
                          j["workers"][0]["name"]), (3, 5, "dc 3 worker 5"))
        csv = self.stats("--csv", stdin=text).splitlines()
        self.assertEqual(csv[0], "start,worker,ids")
        self.assertIn("2026-06-01T00:00:00.000Z,3,2000", csv)
        self.assertIn("2026-06-01T00:00:09.000Z,9,4595", csv)

    def test_sqlite(self):
        path = self.dirs.path("ids.db")
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE t (id INTEGER)")
        db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in known_ids()])
        db.commit()
        db.close()
        self.assertKnown(json.loads(self.stats("--json", "--db", f"sqlite:{path}", "--query",
                                               "SELECT id FROM t ORDER BY rowid")))

    def test_html_report_draws_every_chart_without_console_errors(self):
        html = self.dirs.path("report.html")
        self.stats("--html", html, stdin="\n".join(map(str, known_ids())))
        with open(html) as f:
            page = f.read()
        self.assertIn("Chart.js v3", page)  # inline: nothing to fetch
        self.assertNotIn("<script src", page)
        url = "file://" + html
        dom, console = chromium(url, self.dirs.path("profile"), "--virtual-time-budget=5000",
                                "--dump-dom")
        self.assertEqual(console, [])
        self.assertIn('data-charts="3"', dom)
        self.assertIn('data-drawn="3"', dom)
        self.assertIn("21,595 ids of layout sekka", dom)
        shot = self.dirs.path("stats.png")
        chromium(url, self.dirs.path("profile"), "--virtual-time-budget=5000",
                 "--window-size=1280,1000", f"--screenshot={shot}")
        self.assertGreater(os.path.getsize(shot), 20_000)
        if os.environ.get("SCREENSHOTS_DIR"):  # scripts/screenshots.sh keeps docs/ current
            shutil.copy(shot, os.path.join(os.environ["SCREENSHOTS_DIR"], "stats.png"))

    def test_bad_usage_is_one_line(self):
        for args, says in [(["--interval", "0ms"], "--interval"),
                           (["--top", "0"], "--top 0"),
                           (["--json", "--csv"], "choose one"),
                           (["--layout", "nope"], "allowed sekka")]:
            p = subprocess.run([SEKKA, "stats", *args], input="1\n", capture_output=True,
                               text=True)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
            self.assertIn(says, p.stderr)


class StatsPostgresTest(PostgresTestCase):
    def test_postgres(self):
        ids = known_ids()
        load_ids_into_postgres(self.pg, ids)
        p = subprocess.run([SEKKA, "stats", "--json", "--interval", "1s", "--db", self.pg.uri,
                            "--query", "SELECT id FROM t ORDER BY n"], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        StatsTest.assertKnown(self, json.loads(p.stdout))


if __name__ == "__main__":
    unittest.main()
