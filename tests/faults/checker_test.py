"""Unit tests of the fault campaign's checker on small made-up histories: it must find what it
is there to find (repeated ids, segment ids out of order, undocumented errors, crashes), and
must not cry wolf."""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402
from workload import (ERROR, IDS_HEADER, OK, OP_RECORD, RUN, STRICT_SPACE, TIMEOUT,  # noqa: E402
                      TRANSPORT, UNDOCUMENTED)

RESP_NEXT, RESP_BATCH, RESP_SEG, RESP_STRICT = 0, 1, 4, 9


class HistoryWriter:
    def __init__(self, directory, client):
        self.ops = open(os.path.join(directory, f"ops-{client}.bin"), "wb")
        self.ids = open(os.path.join(directory, f"ids-{client}.bin"), "wb")
        self.count = 0

    def op(self, start, latency, server, op, outcome=OK, code=0, space=None, runs=()):
        self.ops.write(OP_RECORD.pack(start, latency, server, op, outcome, code))
        if runs:
            self.ids.write(IDS_HEADER.pack(self.count, space, server, len(runs)))
            for first, last in runs:
                self.ids.write(RUN.pack(first, last))
        self.count += 1

    def close(self):
        self.ops.close()
        self.ids.close()


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sekka-checker-")
        self.events = []

    def tearDown(self):
        shutil.rmtree(self.dir)

    def client(self, index):
        return HistoryWriter(self.dir, index)

    def check(self):
        with open(os.path.join(self.dir, "events.jsonl"), "w") as f:
            for e in self.events:
                f.write(json.dumps(e) + "\n")
        return checker.check(self.dir, ["orders"])

    def test_a_clean_history_passes_and_counts_every_id(self):
        a, b = self.client(0), self.client(1)
        a.op(1.0, 0.001, 0, RESP_BATCH, space=0, runs=[(100, 149)])
        b.op(1.0, 0.001, 1, RESP_BATCH, space=0, runs=[(150, 199), (300, 300)])
        a.op(2.0, 0.001, 0, RESP_SEG, space=1, runs=[(1, 1)])
        b.op(2.0, 0.001, 1, RESP_SEG, space=1, runs=[(2, 2)])
        a.close()
        b.close()
        r = self.check()
        self.assertEqual(r["failures"], [])
        self.assertEqual(r["ids_checked"], 50 + 51 + 2)
        self.assertEqual(r["repeated_ids"], 0)

    def test_ids_repeated_across_clients_and_servers_are_counted(self):
        a, b = self.client(0), self.client(1)
        a.op(1.0, 0.001, 0, RESP_BATCH, space=0, runs=[(100, 149)])
        b.op(5.0, 0.001, 2, RESP_BATCH, space=0, runs=[(140, 160)])   # 140..149 again
        b.op(6.0, 0.001, 2, RESP_NEXT, space=0, runs=[(120, 120)])    # and 120 a third time
        a.op(7.0, 0.001, 1, RESP_SEG, space=1, runs=[(120, 120)])     # another space: fine
        a.close()
        b.close()
        r = self.check()
        self.assertEqual(r["repeated_ids"], 11)
        self.assertEqual(len(r["failures"]), 1)
        self.assertIn("11 repeated snowflake ids", r["failures"][0])

    def test_an_id_in_a_peers_range_or_two_overlapping_peer_ranges_fail(self):
        a = self.client(0)
        a.op(1.0, 0.001, 0, RESP_SEG, space=1, runs=[(1, 100), (301, 400)])
        a.close()
        self.events += [{"type": "peer_range", "tag": "orders", "first": 101, "last": 300}]
        self.assertEqual(self.check()["failures"], [], "disjoint ranges are fine")
        self.events += [{"type": "peer_range", "tag": "orders", "first": 400, "last": 499}]
        r = self.check()
        self.assertEqual(r["peer_overlaps"], 1)
        self.assertIn("id 400 of tag orders was issued by a peer's range and sekka",
                      r["failures"][0])
        self.events += [{"type": "peer_range", "tag": "orders", "first": 250, "last": 260}]
        r = self.check()
        self.assertTrue(any("two of the peer's ranges" in f for f in r["failures"]), r)

    def test_a_snowflake_id_of_leafs_servers_and_sekka_fails(self):
        a = self.client(0)
        a.op(1.0, 0.001, 0, RESP_BATCH, space=0, runs=[(1000, 1099)])
        a.close()
        self.events += [{"type": "peer_range", "space": 0, "runs": [[900, 999], [1100, 1200]]}]
        r = self.check()
        self.assertEqual(r["failures"], [], "disjoint runs are fine")
        self.assertEqual(r["peer_ids"], 100 + 101)
        self.events += [{"type": "peer_range", "space": 0, "runs": [[1099, 1099]]}]
        r = self.check()
        self.assertIn("id 1099 of snowflake was issued by a peer's range and sekka",
                      r["failures"])

    def test_a_machine_id_held_by_two_instances_at_once_fails(self):
        def hold(machine, instance, since, until):
            self.events.append({"type": "machine_hold", "machine": machine, "instance": instance,
                                "from": since, "until": until})
        hold(1, "a", 0.0, 10.0)
        hold(1, "b", 10.0, 20.0)   # after a: fine
        hold(2, "c", 0.0, 50.0)
        hold(2, "c", 5.0, 6.0)     # the same instance again: fine
        r = self.check()
        self.assertEqual((r["failures"], r["machine_holds"]), ([], 4))
        hold(1, "d", 19.5, 30.0)   # while b held it
        r = self.check()
        self.assertEqual(r["machine_overlaps"], 1)
        self.assertIn("machine id 1 was held by b (10.000 to 20.000) and d (from 19.500) at once",
                      r["failures"])

    def test_segment_ids_below_a_finished_request_on_the_same_process_fail(self):
        self.events.append({"type": "start", "server": 0, "t": 0.0})
        a, b = self.client(0), self.client(1)
        a.op(1.0, 0.010, 0, RESP_SEG, space=1, runs=[(50, 50)])
        b.op(1.005, 0.010, 0, RESP_SEG, space=1, runs=[(40, 40)])   # overlapping: any order
        b.op(2.0, 0.010, 0, RESP_SEG, space=1, runs=[(45, 45)])     # after 50 finished: wrong
        a.close()
        b.close()
        r = self.check()
        self.assertEqual(r["segment_order_violations"], 1)
        self.assertTrue(any("below an earlier request" in f for f in r["failures"]))

    def test_strict_ids_below_a_finished_request_on_any_server_fail(self):
        a, b = self.client(0), self.client(1)
        a.op(1.0, 0.010, 0, RESP_STRICT, space=STRICT_SPACE, runs=[(50, 52)])
        b.op(1.005, 0.010, 1, RESP_STRICT, space=STRICT_SPACE, runs=[(40, 40)])  # overlapping
        b.op(2.0, 0.010, 2, RESP_STRICT, space=STRICT_SPACE, runs=[(53, 53)])    # after: fine
        a.close()
        b.close()
        r = self.check()
        self.assertEqual((r["strict_requests"], r["strict_order_violations"]), (3, 0), r)
        self.assertEqual(r["failures"], [])
        c = self.client(2)
        c.op(3.0, 0.010, 1, RESP_STRICT, space=STRICT_SPACE, runs=[(51, 51)])  # another server,
        c.close()                                                             # after 52 was out
        r = self.check()
        self.assertEqual(r["strict_order_violations"], 1)
        self.assertTrue(any("strict requests got ids below" in f for f in r["failures"]), r)

    def test_a_batch_whose_ids_go_down_fails(self):
        a = self.client(0)
        a.op(1.0, 0.001, 0, RESP_BATCH, space=0, runs=[(100, 104), (110, 112)])   # in order
        a.op(2.0, 0.001, 1, RESP_SEG, space=1, runs=[(50, 59), (40, 45)])          # goes down
        a.close()
        r = self.check()
        self.assertEqual(r["unordered_batches"], 1)
        self.assertIn("did not increase within the reply", r["failures"][0])

    def test_a_restarted_process_may_start_lower_on_another_range(self):
        # Two processes of server 0 (a restart at t=3): only each one's own ids must increase.
        self.events += [{"type": "start", "server": 0, "t": 0.0},
                        {"type": "start", "server": 0, "t": 3.0}]
        a = self.client(0)
        a.op(1.0, 0.01, 0, RESP_SEG, space=1, runs=[(2001, 2001)])
        a.op(4.0, 0.01, 0, RESP_SEG, space=1, runs=[(1001, 1001)])
        a.close()
        self.assertEqual(self.check()["failures"], [])

    def test_only_documented_errors_pass(self):
        a = self.client(0)
        a.op(1.0, 0.001, 0, RESP_NEXT, outcome=ERROR, code=2)            # lease_lost
        a.op(1.1, 1.000, 0, RESP_NEXT, outcome=TIMEOUT)
        a.close()
        self.assertEqual(self.check()["failures"], [])
        a = self.client(1)
        a.op(1.2, 0.001, 0, RESP_NEXT, outcome=ERROR, code=UNDOCUMENTED)
        a.close()
        r = self.check()
        self.assertEqual(r["undocumented_errors"], 1)
        self.assertEqual(len(r["failures"]), 1)

    def test_a_server_that_dies_on_its_own_fails_the_campaign(self):
        self.events += [
            {"type": "exit", "server": 1, "t": 2.0, "status": "SIGKILL (nemesis)",
             "expected": True},
            {"type": "exit", "server": 2, "t": 3.0, "status": "signal 11", "expected": False,
             "log": "Segmentation fault"}]
        self.client(0).close()
        r = self.check()
        self.assertEqual(len(r["failures"]), 1)
        self.assertIn("server 2 exited on its own (signal 11)", r["failures"][0])

    def test_a_connection_dropped_by_a_server_no_fault_aimed_at_fails(self):
        self.events += [{"type": "fault", "kind": "kill", "servers": [0], "t0": 10.0,
                         "heal": 10.5, "ready": 12.0, "class": "snowflake"}]
        a = self.client(0)
        a.op(10.2, 0.001, 0, RESP_NEXT, outcome=TRANSPORT)    # the killed server: expected
        a.op(11.0, 1.000, 1, RESP_NEXT, outcome=TIMEOUT)      # slow, not dropped: tolerated
        a.close()
        self.assertEqual(self.check()["failures"], [])
        b = self.client(1)
        b.op(11.5, 0.001, 2, RESP_NEXT, outcome=TRANSPORT)    # nobody touched server 2
        b.close()
        r = self.check()
        self.assertEqual(r["unexplained_connection_failures"], 1)
        self.assertIn("failed on the connection", r["failures"][0])

    def test_a_connection_kept_from_before_a_server_exited_may_fail_later(self):
        # Seen in CI's ZooKeeper campaign: a client's connection to a server that the nemesis
        # then killed and restarted failed at its next use, 2.04 s after the kill.
        self.events += [{"type": "exit", "server": 1, "t": 2.0, "status": "SIGKILL (nemesis)",
                         "expected": True}, {"type": "start", "server": 1, "t": 2.1}]
        a = self.client(0)
        a.op(1.0, 0.001, 1, RESP_NEXT)                          # the connection works
        a.op(9.0, 0.001, 1, RESP_NEXT, outcome=TRANSPORT)       # its first use since: explained
        a.op(9.1, 0.001, 1, RESP_NEXT, outcome=TRANSPORT)       # a new connection: not
        a.close()
        r = self.check()
        self.assertEqual(r["unexplained_connection_failures"], 1, r["failures"])

    def test_unavailability_is_the_longest_gap_from_the_fault_to_recovery(self):
        a = self.client(0)
        for t in [1.0, 1.1, 1.2, 4.0, 4.1, 9.0]:
            a.op(t, 0.0, 0, RESP_NEXT, space=0, runs=[(int(t * 10), int(t * 10))])
        a.close()
        self.events.append({"type": "fault", "kind": "kill", "servers": [0], "t0": 1.15,
                            "heal": 2.0, "ready": 4.05, "class": "snowflake"})
        self.events.append({"type": "fault", "kind": "kill", "servers": [0], "t0": 5.0,
                            "heal": 6.0, "ready": None, "class": "snowflake"})
        r = self.check()
        kill = r["faults"]["kill"]
        self.assertEqual(kill["count"], 2)
        self.assertAlmostEqual(kill["unavailable_max_s"], 2.8)    # 1.2 .. 4.0
        self.assertEqual(kill["unrecovered"], 1)
        self.assertTrue(any("not all ready again" in f for f in r["failures"]))

    def test_longest_gap_counts_from_the_fault_and_to_the_window_end(self):
        self.assertAlmostEqual(checker.longest_gap([1.0, 2.0, 2.5], 1.5, 3.0), 0.5)
        self.assertAlmostEqual(checker.longest_gap([1.0, 5.0], 1.5, 3.0), 1.5)
        self.assertAlmostEqual(checker.longest_gap([], 1.0, 2.0), 1.0)


if __name__ == "__main__":
    unittest.main()
