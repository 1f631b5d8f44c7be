#!/usr/bin/python3
"""End-to-end tests of the `sekka` command line: the real binary, run as a user would.

The binary comes from $SEKKA_BIN (ctest sets it). Each test checks exit codes, that errors are
one line on stderr naming what was wrong, and that output decodes back to what was asked for.
"""

import atexit
import datetime
import json
import os
import re
import shutil
import subprocess
import tempfile
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from sekka_testlib import SEKKA, faketime_env, private_file  # noqa: E402


# The tests' host: a worker lock dir of their own, not the machine's /var/lib/sekka/workers.
# (Made only when none is given, and removed at exit: it was made, and left behind, on every run.)
if not os.environ.get("SEKKA_WORKER_LOCK_DIR"):
    os.environ["SEKKA_WORKER_LOCK_DIR"] = tempfile.mkdtemp(prefix="sekka-cli-locks-")
    atexit.register(shutil.rmtree, os.environ["SEKKA_WORKER_LOCK_DIR"], True)


def gen_host(args):
    """The lock dir of a `gen` without --lock-dir: one per layout and direction, since a host's
    lock dir serves one id space (these tests try many layouts, as many hosts would)."""
    layout = args[args.index("--layout") + 1] if "--layout" in args else "sekka"
    space = re.sub(r"[^A-Za-z0-9_.=-]", "_", layout) + ("-down" if "--descending" in args else "")
    return {"SEKKA_WORKER_LOCK_DIR": os.path.join(os.environ["SEKKA_WORKER_LOCK_DIR"], space)}


def run(*args, stdin=None, timeout=60):
    env = None
    if args and args[0] == "gen" and "--lock-dir" not in args:
        env = dict(os.environ, **gen_host(args))
    return subprocess.run([SEKKA, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)


class CliTestCase(unittest.TestCase):
    def ok(self, *args, stdin=None):
        p = run(*args, stdin=stdin)
        self.assertEqual(p.returncode, 0, f"sekka {' '.join(args)}: {p.stderr}")
        return p.stdout

    def fails(self, code, *args, expect="", stdin=None):
        p = run(*args, stdin=stdin)
        self.assertEqual(p.returncode, code, f"sekka {' '.join(args)}: {p.stdout} {p.stderr}")
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, f"one error line expected: {p.stderr!r}")
        self.assertTrue(lines[0].startswith("sekka: "), lines[0])
        self.assertIn(expect, lines[0])
        return lines[0]


class GenTest(CliTestCase):
    def test_prints_one_id_by_default(self):
        out = self.ok("gen").split()
        self.assertEqual(len(out), 1)
        self.assertGreater(int(out[0]), 0)

    def test_prints_n_distinct_increasing_ids(self):
        ids = [int(x) for x in self.ok("gen", "-n", "100000").split()]
        self.assertEqual(len(ids), 100000)
        self.assertEqual(ids, sorted(set(ids)))

    def test_output_decodes_to_the_requested_worker_and_datacenter(self):
        ids = self.ok("gen", "-n", "5", "--layout", "twitter", "--worker-id", "17",
                      "--datacenter-id", "9").split()
        out = self.ok("decode", "--layout", "twitter", "--json", *ids)
        now_ms = datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000
        for line in out.splitlines():
            d = json.loads(line)
            self.assertEqual((d["worker"], d["datacenter"]), (17, 9))
            self.assertIsInstance(d["id"], str)  # ids are strings in JSON
            self.assertLess(abs(d["timestamp_ms"] - now_ms), 10000)
            self.assertTrue(d["time"].endswith("Z"))

    def test_worker_id_decodes_on_the_default_layout(self):
        out = self.ok("gen", "--worker-id", "1023")
        self.assertIn("worker=1023 ", self.ok("decode", out.strip()))

    def test_every_format_round_trips_through_decode(self):
        widths = {"hex": 16, "base32": 13, "base62": 11}
        for fmt in ["dec", "hex", "base32", "base62", "friendly"]:
            text = self.ok("gen", "--format", fmt, "--worker-id", "5").strip()
            if fmt in widths:
                self.assertEqual(len(text), widths[fmt], fmt)
            d = json.loads(self.ok("decode", "--format", fmt, "--json", text))
            self.assertEqual(d["worker"], 5, fmt)

    def test_descending_ids_decrease(self):
        ids = [int(x) for x in self.ok("gen", "-n", "1000", "--descending").split()]
        self.assertEqual(ids, sorted(set(ids), reverse=True))

    def test_custom_layout(self):
        out = self.ok("gen", "-n", "3", "--layout",
                      "time_bits=40,worker_bits=11,sequence_bits=12,tick=2ms", "--worker-id",
                      "2000")
        self.assertEqual(len(out.split()), 3)

    def test_bad_flags_are_usage_errors(self):
        self.fails(2, "gen", "--bogus", expect="--bogus")
        self.fails(2, "gen", "-n", "0", expect="-n 0 is out of range: allowed 1 or more")
        self.fails(2, "gen", "-n", "many", expect="many")
        self.fails(2, "gen", "--format", "base64", expect="allowed dec, hex, base32")
        self.fails(2, "gen", "--sequence-start", "middle", expect="allowed zero | random")
        self.fails(2, "frobnicate",
                   expect="unknown command 'frobnicate': allowed gen, decode, layout, check, stats, bench")
        self.fails(2, expect="no command given")

    def test_bad_layouts_are_usage_errors_naming_the_field(self):
        self.fails(2, "gen", "--layout", "snowflak",
                   expect='layout preset "snowflak" is not known: allowed sekka, twitter')
        self.fails(2, "gen", "--layout", "worker_bits=11", expect="layout bits sum to 64")
        self.fails(2, "gen", "--layout", "time_bits=8,sequence_bits=27",
                   expect="layout.time_bits = 8 is out of range: allowed 16 to 63")
        self.fails(2, "gen", "--layout", "tick=3s", expect="layout.tick = 3000ms")
        self.fails(2, "gen", "--layout", "epoch=2999-01-01", expect="is in the future")
        self.fails(2, "gen", "--layout", "colour=red", expect='layout key "colour" is not known')

    def test_two_runs_at_once_never_print_the_same_id(self):
        """The safety review found 18 of 30 parallel pairs printing the same ids: every run used
        worker id 0 with no state. Now each run holds a worker id and stores its hwm."""
        data = tempfile.mkdtemp(prefix="sekka-gen-")
        try:
            for _ in range(5):
                procs = [subprocess.Popen([SEKKA, "gen", "-n", "200000", "--lock-dir", data],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True) for _ in range(2)]
                outs = [p.communicate(timeout=60) for p in procs]
                for p in procs:
                    self.assertEqual(p.returncode, 0)
                a, b = (set(o[0].split()) for o in outs)
                self.assertEqual(len(a) + len(b), 400_000)
                self.assertFalse(a & b, "two runs at once printed the same id")
                for o in outs:
                    self.assertRegex(o[1], r"sekka gen: worker id \d+ \(lock dir ")
        finally:
            shutil.rmtree(data, ignore_errors=True)

    def test_a_run_after_the_clock_stepped_back_prints_later_ids(self):
        data = tempfile.mkdtemp(prefix="sekka-gen-")
        try:
            first = [int(x) for x in self.ok("gen", "-n", "300000", "--lock-dir", data).split()]
            clock = os.path.join(data, "clock")
            with open(clock, "w") as f:
                f.write("-2")
            env = dict(os.environ, **faketime_env(clock))
            p = subprocess.run([SEKKA, "gen", "-n", "300000", "--lock-dir", data],
                               capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            later = [int(x) for x in p.stdout.split()]
            self.assertGreater(min(later), max(first), "ids went back with the clock")
            with open(clock, "w") as f:
                f.write("-60")
            p = subprocess.run([SEKKA, "gen", "--lock-dir", data], capture_output=True, text=True,
                               env=env, timeout=60)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn("behind the stored high-water mark of worker id 0", p.stderr)
        finally:
            shutil.rmtree(data, ignore_errors=True)

    def test_worker_ids_outside_the_layout_are_usage_errors(self):
        self.fails(2, "gen", "--worker-id", "1024",
                   expect="worker id 1024 does not fit layout sekka (10 worker bits): "
                          "allowed 0 to 1023")
        self.fails(2, "gen", "--worker-id", "-1", expect="worker id -1")
        self.fails(2, "gen", "--datacenter-id", "1", expect="datacenter id 1 does not fit")
        self.fails(2, "gen", "--layout", "twitter", "--datacenter-id", "32",
                   expect="allowed 0 to 31")

    def test_an_expired_layout_is_a_runtime_failure(self):
        self.fails(1, "gen", "--layout", "baidu", expect="layout baidu exhausted on 2024-11-20")


class DecodeTest(CliTestCase):
    def test_decodes_a_known_id(self):
        # tick 1000 (1 s after 2025-01-01), worker 7, sequence 42 in the sekka layout.
        id_ = (1000 << 22) | (7 << 12) | 42
        d = json.loads(self.ok("decode", "--json", str(id_)))
        self.assertEqual(d, {"id": str(id_), "time": "2025-01-01T00:00:01.000Z",
                             "timestamp_ms": 1735689601000, "datacenter": 0, "worker": 7,
                             "sequence": 42})
        self.assertEqual(self.ok("decode", str(id_)).strip(),
                         f"{id_} time=2025-01-01T00:00:01.000Z timestamp_ms=1735689601000 "
                         "datacenter=0 worker=7 sequence=42")

    def test_reads_ids_from_stdin(self):
        ids = self.ok("gen", "-n", "50", "--worker-id", "3")
        out = self.ok("decode", stdin=ids)
        self.assertEqual(len(out.splitlines()), 50)
        self.assertTrue(all("worker=3 " in line for line in out.splitlines()))

    def test_decodes_ids_of_an_expired_layout(self):
        id_ = (100 << 35) | (5 << 13) | 1
        d = json.loads(self.ok("decode", "--layout", "baidu", "--json", str(id_)))
        self.assertEqual((d["worker"], d["sequence"]), (5, 1))
        self.assertEqual(d["time"], "2016-05-19T16:01:40.000Z")

    def test_bad_ids_are_usage_errors(self):
        self.fails(2, "decode", "12x", expect='id "12x" has "x" at position 3')
        self.fails(2, "decode", "-5", expect="")  # taken as an unknown flag
        self.fails(2, "decode", "--", "-5", expect="negative")
        self.fails(2, "decode", "9223372036854775808", expect="too large")
        self.fails(2, "decode", "--format", "hex", "abc", expect="allowed exactly 16")
        self.fails(2, "decode", "--layout", "js53", str(1 << 60), expect="outside layout js53")

    def test_a_bad_id_among_good_ones_still_decodes_the_rest(self):
        p = run("decode", "1", "oops", "2")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stdout.splitlines()), 2)
        self.assertEqual(len(p.stderr.splitlines()), 1)


class OpaqueTest(CliTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sekka-opaque-")
        self.keys = os.path.join(self.dir, "keys")
        with private_file(self.keys) as f:
            f.write(self.ok("opaque", "keygen", "--version", "a"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_encode_decode_and_gen_round_trip(self):
        ids = ["0", "1", "249780180292206592", str(2 ** 63 - 1)]
        texts = self.ok("opaque", "encode", *ids, "--opaque-key-file", self.keys).split()
        self.assertEqual(len(texts), 4)
        self.assertTrue(all(len(t) == 12 and t[0] == "a" for t in texts))
        self.assertEqual(self.ok("opaque", "decode", *texts, "--opaque-key-file", self.keys).split(), ids)
        numbers = self.ok("opaque", "encode", "--numeric", *ids, "--opaque-key-file", self.keys).split()
        self.assertTrue(all(0 <= int(n) < 2 ** 63 for n in numbers))
        self.assertEqual(self.ok("opaque", "decode", *numbers, "--opaque-key-file", self.keys).split(),
                         ids)
        # js53: opaque ids stay below 2^53.
        small = self.ok("opaque", "encode", "--numeric", "123", "--layout", "js53",
                        "--opaque-key-file", self.keys).split()
        self.assertLess(int(small[0]), 2 ** 53)
        generated = self.ok("gen", "-n", "100", "--format", "opaque", "--opaque-key-file", self.keys,
                            "--lock-dir", self.dir).split()
        back = [int(i) for i in self.ok("opaque", "decode", *generated,
                                        "--opaque-key-file", self.keys).split()]
        self.assertEqual(back, sorted(set(back)))
        self.assertNotEqual(generated, sorted(generated))

    def test_a_rotated_key_file_still_decodes_old_links(self):
        old = self.ok("opaque", "encode", "42", "--opaque-key-file", self.keys).strip()
        with private_file(self.keys, "a") as f:
            f.write(self.ok("opaque", "keygen", "--version", "b"))
        new = self.ok("opaque", "encode", "42", "--opaque-key-file", self.keys).strip()
        self.assertEqual(new[0], "b")
        self.assertEqual(self.ok("opaque", "decode", old, new, "--opaque-key-file", self.keys).split(),
                         ["42", "42"])

    def test_bad_input_is_one_line(self):
        self.fails(2, "opaque", "decode", "zzz", "--opaque-key-file", self.keys, expect="12 of 0-9A-Za-z")
        self.fails(2, "opaque", "decode", "q" + "0" * 11, "--opaque-key-file", self.keys,
                   expect="version 'q' is not known: allowed 'a'")
        self.fails(2, "opaque", "encode", "-5", "--opaque-key-file", self.keys)
        self.fails(2, "opaque", "encode", "5", "--opaque-key-file", "/nonexistent/keys",
                   expect="the opaque key file \"/nonexistent/keys\" cannot be read: No such "
                   "file or directory")
        bad = os.path.join(self.dir, "bad")
        with private_file(bad) as f:
            f.write("a 1234\n")
        self.fails(2, "opaque", "encode", "5", "--opaque-key-file", bad, expect="key line 1")
        os.chmod(bad, 0o644)  # a secret file other users can read
        self.fails(2, "opaque", "encode", "5", "--opaque-key-file", bad, expect="readable by every user")
        self.fails(2, "gen", "--format", "opaque", "--lock-dir", self.dir, expect="--opaque-key-file")
        self.fails(2, "opaque", "keygen", "--version", "ab", expect="one character")
        # Issue 43: `keygen > keys` under umask 022 made a file the next command refused as
        # readable by every user. --out makes it 0600, and never writes over one.
        made = os.path.join(self.dir, "made.keys")
        self.ok("opaque", "keygen", "--out", made)
        self.assertEqual(os.stat(made).st_mode & 0o777, 0o600)
        self.assertTrue(self.ok("opaque", "encode", "5", "--opaque-key-file", made).strip())
        self.fails(2, "opaque", "keygen", "--out", made, expect="keygen never writes over a key")


class TimeOrderedKindTest(CliTestCase):
    def test_gen_and_decode_uuidv7_and_ulid(self):
        uuids = self.ok("gen", "--kind", "uuidv7", "-n", "2000").split()
        parsed = [uuid.UUID(t) for t in uuids]
        self.assertTrue(all(u.version == 7 and u.variant == uuid.RFC_4122 for u in parsed))
        self.assertEqual([u.int for u in parsed], sorted({u.int for u in parsed}))
        ulids = self.ok("gen", "--kind", "ulid", "-n", "2000").split()
        self.assertEqual(ulids, sorted(set(ulids)))
        out = self.ok("decode", uuids[0], ulids[0]).splitlines()
        self.assertIn("kind=uuid version=7 time=", out[0])
        self.assertIn("kind=ulid time=", out[1])
        self.fails(2, "gen", "--kind", "v4", expect="allowed snowflake, uuidv7, ulid")
        self.fails(2, "decode", "01M82XY03XE69MRNNKDHDQJ1G!", expect="26 Crockford base32")


class LayoutTest(CliTestCase):
    def test_every_preset_reports_capacity_and_end_date(self):
        names = self.ok("layout", "--list").split()
        self.assertEqual(names, ["sekka", "twitter", "leaf", "discord", "instagram", "sonyflake",
                                 "sonyflake-v1", "baidu", "js53", "random"])
        for name in names:
            j = json.loads(self.ok("layout", name, "--json"))
            self.assertEqual(j["name"], name)
            if j["kind"] == "random":
                self.assertEqual(j["time_bits"] + j["random_bits"], 63)
                continue
            self.assertEqual(j["ids_per_tick"], 2 ** j["sequence_bits"])
            self.assertAlmostEqual(j["ids_per_second"],
                                   j["ids_per_tick"] * 1000 / j["tick_ms"])
            self.assertEqual(j["worker_ids"], 2 ** (j["worker_bits"] + j["datacenter_bits"]))
            self.assertEqual(j["expired"], name == "baidu")

    def test_sekka_layout_text(self):
        out = self.ok("layout")
        self.assertIn("4,096,000 ids/s per worker", out)
        self.assertIn("1,024 worker ids", out)
        self.assertIn("runs out   2094-09-07T15:47:35.552Z", out)

    def test_js53_stays_below_2_to_the_53(self):
        j = json.loads(self.ok("layout", "js53", "--json"))
        self.assertLess(int(j["max_id"]), 2 ** 53)
        self.assertGreaterEqual(j["worker_ids"], 64)
        self.assertGreaterEqual(j["runs_out_ms"] - j["epoch_ms"], 60 * 365.25 * 86400 * 1000)

    def test_baidu_is_expired(self):
        self.assertIn("runs out   2024-11-20T13:24:16.000Z  (expired", self.ok("layout", "baidu"))

    def test_bad_layout(self):
        self.fails(2, "layout", "nope", expect="allowed sekka, twitter")


class MigrationTest(CliTestCase):
    """Issue 22, finding 6: taking over from Leaf or sonyflake v1 without repeating their ids."""
    LEAF_EPOCH = 1288834974657
    # A Leaf id of 2019-06-01T00:00:00Z, worker 5, sequence 7; a sonyflake v1 id of that time.
    LEAF_2019 = ((1559347200000 - LEAF_EPOCH) << 22) | (5 << 12) | 7
    SONY_V1_2019 = (((1559347200000 - 1409529600000) // 10) << 24) | (3 << 16) | 9

    def decoded(self, layout, id_):
        return json.loads(self.ok("decode", "--layout", layout, "--json", str(id_)))

    def test_sonyflake_v1_ids_decode_to_their_time(self):
        for layout in ["sonyflake-v1", "sonyflake,epoch=2014-09-01",
                       "time_bits=39,tick=10ms,sequence_bits=8,worker_bits=16,"
                       "epoch=2014-09-01,order=time,sequence,worker"]:
            d = self.decoded(layout, self.SONY_V1_2019)
            self.assertEqual((d["time"], d["worker"], d["sequence"]),
                             ("2019-06-01T00:00:00.000Z", 9, 3), layout)

    def test_leaf_ids_decode_and_gen_after_id_prints_only_ids_above_it(self):
        d = self.decoded("leaf", self.LEAF_2019)
        self.assertEqual((d["time"], d["worker"], d["sequence"]),
                         ("2019-06-01T00:00:00.000Z", 5, 7))
        # The largest id Leaf issued, a second from now: ids above it, after a short wait.
        now_ms = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
        top = ((now_ms + 1000 - self.LEAF_EPOCH) << 22) | (1023 << 12) | 4095
        ids = [int(x) for x in self.ok("gen", "--layout", "leaf", "--after-id", str(top),
                                       "-n", "20000").split()]
        self.assertEqual(len(ids), 20000)
        self.assertGreater(min(ids), top)
        self.fails(2, "gen", "--layout", "shard_bits=2,time_bits=39", "--after-id", "5",
                   expect="after_id needs a layout whose ids grow with time")
        self.fails(1, "gen", "--layout", "leaf", "--after-id",
                   str(((now_ms + 86_400_000 - self.LEAF_EPOCH) << 22)),
                   expect="behind --after-id")

    def test_layout_max_id_says_which_layout_can_take_over(self):
        p = run("layout", "sekka", "--max-id", str(self.LEAF_2019))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("cannot take over", p.stdout)
        self.assertIn("2033-07-28", p.stdout)  # the 2019 Leaf id read with sekka's 2025 epoch
        j = json.loads(self.ok("layout", "leaf", "--max-id", str(self.LEAF_2019), "--json"))
        self.assertEqual((j["now"], j["above_from"]), (True, "2019-06-01T00:00:00.001Z"))


class RandomAndSpreadLayoutTest(CliTestCase):
    """Random layouts (time + random bits, no worker id) and the spread orderings (shard bits,
    a bit-reversed time field) from the command line."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sekka-random-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_random_ids_decode_to_now_and_need_no_data_dir(self):
        ids = self.ok("gen", "-n", "3000", "--layout", "random").split()
        self.assertGreaterEqual(len(set(ids)), 2990)  # 22 bits a ms: a rare alike pair at most
        now_ms = datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000
        out = self.ok("decode", "--layout", "random", "--json", *ids[:50]).splitlines()
        randoms = set()
        for line in out:
            d = json.loads(line)
            self.assertLess(abs(d["timestamp_ms"] - now_ms), 60_000)
            self.assertNotIn("worker", d)
            self.assertLess(d["random"], 2 ** 22)
            randoms.add(d["random"])
            self.assertEqual(int(d["id"]) >> 22, (d["timestamp_ms"] - 1735689600000))
        self.assertGreater(len(randoms), 45)
        # A js-safe random layout stays below 2^53; friendly text round-trips.
        small = self.ok("gen", "-n", "200", "--layout",
                        "kind=random,js_safe=true,time_bits=38,tick=10ms").split()
        self.assertTrue(all(int(i) < 2 ** 53 for i in small))
        friendly = self.ok("gen", "-n", "1", "--layout", "random", "--format", "friendly").strip()
        self.assertRegex(friendly, r"^\d{17}-\d+$")
        line = self.ok("decode", "--layout", "random", "--format", "friendly", friendly)
        self.assertIn("random=" + friendly.split("-")[1], line)

    def test_random_ids_round_trip_through_opaque_ids(self):
        keys = os.path.join(self.dir, "keys")
        with private_file(keys) as f:
            f.write(self.ok("opaque", "keygen", "--version", "r"))
        texts = self.ok("gen", "-n", "100", "--layout", "random", "--format", "opaque",
                        "--opaque-key-file", keys).split()
        self.assertTrue(all(len(t) == 12 and t[0] == "r" for t in texts))
        ids = self.ok("opaque", "decode", "--layout", "random", "--opaque-key-file", keys,
                      *texts).split()
        again = self.ok("opaque", "encode", "--layout", "random", "--opaque-key-file", keys, *ids).split()
        self.assertEqual(again, texts)

    def test_layout_rate_gives_the_birthday_odds(self):
        out = self.ok("layout", "random", "--rate", "1000/s")
        self.assertIn("1 ids per tick on average", out)
        self.assertIn("1.19e-07 per tick", out)
        self.assertIn("10.3 a day on average, one every 2.33 hours", out)
        j = json.loads(self.ok("layout", "kind=random,time_bits=36,tick=10ms", "--rate", "1.2M/min",
                               "--json"))
        self.assertEqual(j["random_bits"], 27)
        self.assertAlmostEqual(j["rate"]["ids_per_tick"], 200)
        self.assertAlmostEqual(j["rate"]["expected_clashes_per_day"],
                               200 * 200 / 2 / 2 ** 27 * 8_640_000, places=6)
        # A snowflake layout: the worker ids the rate keeps busy.
        self.assertIn("keeps at least 3 worker ids busy", self.ok("layout", "--rate", "10M/s"))
        self.fails(2, "layout", "random", "--rate", "fast", expect="allowed a number with")
        self.fails(2, "layout", "random", "--rate", "5/week", expect="/min, /h or /d")
        # Issue 42: the error quoted what was left of the value ("5").
        self.fails(2, "layout", "random", "--rate", "5/x", expect='--rate "5/x" is not a rate')
        self.fails(2, "layout", "random", "--rate", "5kk", expect='--rate "5kk" is not a rate')
        self.fails(2, "layout", "kind=random,worker_bits=3", expect="not for kind=random")
        self.fails(2, "layout", "kind=random,time_bits=41,random_bits=30",
                   expect="sum to 71 (time 41 + random 30)")

    def test_shard_bits_spread_ids_and_decode_back(self):
        layout = "shard_bits=4,time_bits=37"
        ids = [int(i) for i in self.ok("gen", "-n", "5000", "--layout", layout, "--worker-id", "9",
                                       "--lock-dir", self.dir).split()]
        self.assertEqual(len(set(ids)), 5000)
        self.assertNotEqual(ids, sorted(ids))
        self.assertEqual(len({i >> 59 for i in ids}), 16)  # every shard used
        out = self.ok("decode", "--layout", layout, "--json", *map(str, ids[:300])).splitlines()
        decoded = [json.loads(line) for line in out]
        self.assertTrue(all(d["worker"] == 9 for d in decoded))
        self.assertEqual([d["shard"] for d in decoded], [i >> 59 for i in ids[:300]])
        order = [(d["timestamp_ms"], d["sequence"]) for d in decoded]
        self.assertEqual(order, sorted(set(order)))  # generation order, recovered by decoding
        self.assertIn("within each of 16 shards", self.ok("layout", layout))
        forged = str(ids[0] ^ (1 << 60))
        self.fails(2, "decode", "--layout", layout, forged, expect="shard bits")

    def test_reversed_time_spreads_consecutive_ticks(self):
        layout = "reverse_time=true"
        ids = [int(i) for i in self.ok("gen", "-n", "20000", "--layout", layout,
                                       "--lock-dir", self.dir).split()]
        self.assertEqual(len(set(ids)), 20000)
        self.assertGreater(len({i >> 60 for i in ids}), 1)  # ticks land far apart
        out = self.ok("decode", "--layout", layout, "--json", str(ids[0]), str(ids[-1]))
        first, last = [json.loads(line) for line in out.splitlines()]
        self.assertLessEqual(first["timestamp_ms"], last["timestamp_ms"])
        self.assertIn("bit-reversed", self.ok("layout", layout))
        self.fails(2, "gen", "--layout", layout, "--descending", "--lock-dir", self.dir,
                   expect="needs an ordered layout")


class BenchAndHelpTest(CliTestCase):
    def test_bench_reports_ids_per_second(self):
        j = json.loads(self.ok("bench", "--threads", "2", "--seconds", "0.05", "--json"))
        self.assertEqual(len(j["results"]), 4)
        for r in j["results"]:
            self.assertGreater(r["ids_per_second"], 1000)

    def test_bench_rejects_bad_bounds(self):
        self.fails(2, "bench", "--threads", "0", expect="--threads 0 is out of range")
        self.fails(2, "bench", "--seconds", "1000", expect="--seconds 1000 is out of range")

    def test_help_for_every_command(self):
        for cmd in [[], ["gen"], ["decode"], ["layout"], ["bench"]]:
            out = self.ok(*cmd, "--help")
            self.assertIn("Usage", out)


class OneNamePerSettingTest(CliTestCase):
    """Issue 43: the README said `serve` takes `--lock-dir`; serve's flag was `--worker-lock-dir`
    while gen's was `--lock-dir` (and gen's `--key-file` was serve's `--opaque-key-file`). Every
    flag of a setting now says which (`(config KEY)`), and every command spells it as serve does;
    the old spellings still work and say they are old."""

    COMMANDS = [["gen"], ["serve"], ["opaque", "encode"], ["opaque", "decode"]] + [
        ["segment", sub] for sub in ("create", "list", "show", "step", "delete", "import")]

    @staticmethod
    def settings(help_text):
        """{key: flag} from a --help: the first long name of the option whose text (its line
        and those under it) says `(config KEY)`."""
        out, flag = {}, None
        for line in help_text.splitlines():
            m = re.match(r"\s+(-\S+)", line)
            if m:
                flag = [n for n in m.group(1).split(",") if n.startswith("--")][0]
            for key in re.findall(r"\(config ([a-z_.]+)\)", line):
                out[key] = flag
        return out

    def test_every_command_spells_a_setting_as_serve_does(self):
        spellings = {}
        for cmd in self.COMMANDS:
            for key, flag in self.settings(self.ok(*cmd, "--help")).items():
                spellings.setdefault(key, set()).add(flag)
        self.assertEqual({k: v for k, v in spellings.items() if len(v) > 1}, {})
        self.assertEqual(spellings["worker.lock_dir"], {"--lock-dir"})
        self.assertEqual(spellings["opaque.key_file"], {"--opaque-key-file"})
        gen = self.settings(self.ok("gen", "--help"))
        for key in ("worker.lock_dir", "worker.id", "worker.datacenter_id", "layout.preset",
                    "generator.after_id", "generator.max_startup_wait", "opaque.key_file"):
            self.assertIn(key, gen)

    def test_old_spellings_still_work_and_say_so(self):
        d = tempfile.mkdtemp(prefix="sekka-old-flags-")
        try:
            p = run("serve", "--worker-lock-dir", d + "/locks", "--print-config")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f'lock_dir = "{d}/locks"', p.stdout)
            self.assertEqual(p.stderr, "sekka serve: --worker-lock-dir is the old name of "
                                       "--lock-dir; it still works\n")
            keys = os.path.join(d, "keys")
            self.ok("opaque", "keygen", "--out", keys)
            p = run("opaque", "encode", "42", "--key-file", keys)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("--key-file is the old name of --opaque-key-file", p.stderr)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main(argv=sys.argv, verbosity=2)
