#!/usr/bin/python3
"""The hostile-client campaign's short form (hostile.py): every attack for 3 s per target at
scale 0.3, on a real `sekka serve` and a real redis-server, then properties of sekka only:

  - every attack ends with sekka alive and answering PING (with the attackers still connected,
    and after they are gone), and it never had to be started again;
  - the good client was served throughout: no errors (no timeout, error reply or closed
    connection) and at least one answer in every second of every attack;
  - a new client with the right token, from the attackers' address, trying every 250 ms, was
    served within a second (at most two failed tries in a row), in every attack;
  - sekka's peak RSS stays under 300 MiB. Why that bound: the server runs with
    --max-buffer-mib 64, which caps request and reply buffers across all connections (past it
    the connection buffering the most is closed), and at scale 0.3 the largest attack holds
    ~100 connections. So: ~15 MiB at rest (measured: 13-15 MiB) + 64 MiB of buffers + that
    much again for allocator slack (freed buffers the allocator keeps, per-thread arenas) +
    the connections' fixed state (well under 1 MiB for 100) is ~160 MiB; 300 MiB leaves room
    and still fails a server that buffers per client without a budget: redis, with no output
    limit for normal clients, passes 300 MiB in the same 3 s (non_reading_pipeliners,
    huge_batches; recorded in the result, not asserted).

Latency is recorded, never asserted (speed is what benchmarks measure). Redis's numbers are
recorded and not asserted either; running it checks the harness works on both targets.

    cd tests/hostile && /usr/bin/python3 -m unittest hostile_test -v

HOSTILE_SEKKA_BIN picks the binary (default build/cli/sekka of this repository)."""

import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402

SECONDS = 3.0
SCALE = 0.3
SEKKA_PEAK_RSS_MIB = 300


class HostileTest(unittest.TestCase):
    result = None

    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="sekka-hostile-test-")
        try:
            cls.result = hostile.run_campaign(
                SECONDS, SCALE, cls.out, log=lambda s: print(s, file=sys.stderr, flush=True))
        except BaseException:
            shutil.rmtree(cls.out, ignore_errors=True)
            raise
        print("\n" + hostile.markdown_table(cls.result["results"]), file=sys.stderr, flush=True)
        cls.records = {(r["attack"], r["target"]): r for r in cls.result["results"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.out, ignore_errors=True)

    def sekka(self):
        for attack in hostile.ATTACKS:
            with self.subTest(attack=attack):
                yield attack, self.records[(attack, "sekka")]

    def test_harness_ran_every_attack_on_both_targets(self):
        self.assertTrue(os.path.exists(os.path.join(self.out, "result.json")))
        for attack in hostile.ATTACKS:
            for target in hostile.TARGETS:
                with self.subTest(attack=attack, target=target):
                    r = self.records[(attack, target)]
                    self.assertNotIn("harness_error", r["attacker"])
                    self.assertGreater(r["peak_rss_mib"], 0)
                    self.assertGreater(len(r["rss_samples_kib"]), 10)  # every 100 ms
                    good = r["good"]
                    self.assertNotIn("harness", good["error_kinds"])
                    self.assertGreater(good["answers"] + good["errors"], 0)
                    self.assertEqual(len(good["answers_per_second"]), SECONDS)

    def test_sekka_alive_and_answering_after_every_attack(self):
        self.assertEqual(self.result["starts"]["sekka"], 1, "sekka had to be started again")
        for _, r in self.sekka():
            self.assertTrue(r["alive_at_end"])
            self.assertTrue(r["ping_at_end"][0], r["ping_at_end"][1])
            self.assertTrue(r["alive_after"])
            self.assertTrue(r["ping_after"][0], r["ping_after"][1])

    def test_sekka_serves_the_good_client_throughout(self):
        for _, r in self.sekka():
            good = r["good"]
            self.assertEqual(good["errors"], 0, good["error_kinds"])
            self.assertGreaterEqual(good["min_answers_per_second"], 1,
                                    good["answers_per_second"])

    def test_sekka_lets_a_new_client_with_the_token_in_throughout(self):
        """Issue 42: a client connecting with the right token from the attackers' address (one
        NAT) was refused while silent connections held every slot, and waited behind queued
        guesses. Every 250 ms it connects, authenticates and sends a command: it is served
        within a second, in every attack. (From the flooding address itself a try is now and
        then closed before its credentials arrive, the address's oldest giving way to its
        newest thousands of times a second: the next try is served.)"""
        for _, r in self.sekka():
            fresh = r["fresh"]
            self.assertGreater(fresh["answers"], 0)
            self.assertLessEqual(fresh["failed_in_a_row"], 2, fresh["error_kinds"])

    def test_sekka_peak_rss_bounded(self):
        for _, r in self.sekka():
            self.assertLess(r["peak_rss_mib"], SEKKA_PEAK_RSS_MIB)


if __name__ == "__main__":
    unittest.main()
