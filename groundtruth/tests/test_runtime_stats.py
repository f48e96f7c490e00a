"""The runtime figures over a window (gt/runtime_stats.py), on logs and
samples recorded from Replicant replicas on this machine (fixtures/):

- go-replicant-stderr.log, go-metrics.txt: a go-tcp replica (Go 1.26,
  GODEBUG=gctrace=1, our runtime/metrics hook), 8,019 keys, two short
  bench runs and one collection forced by SIGUSR1 at 6.27 s;
- g1-jdk17.log, java-agent.txt: a java-tcp replica (JDK 17, G1, -Xmx64m,
  the -Xlog decorations of gt/impls.py, our agent's samples thinned to
  every fifth), idle but for start-up and a full collection by `jcmd
  GC.run` at 21.4 s.
"""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from gt import runtime_stats as rs  # noqa: E402

F = os.path.join(os.path.dirname(__file__), "fixtures")
GO_METRICS = os.path.join(F, "go-metrics.txt")
GO_STDERR = os.path.join(F, "go-replicant-stderr.log")
G1_LOG = os.path.join(F, "g1-jdk17.log")
JAVA_AGENT = os.path.join(F, "java-agent.txt")


class SamplesTest(unittest.TestCase):
    def test_a_counter_is_interpolated_between_samples_and_exact_on_them(self):
        s = rs.read_samples(GO_METRICS, rs.GO_FIELDS)
        self.assertEqual(len(s), 130)
        (t0, _, a), (t1, _, b) = s[10], s[11]
        self.assertEqual(rs.delta(s, "alloc_bytes", t0, t1), b["alloc_bytes"] - a["alloc_bytes"])
        mid = rs.at(s, "alloc_bytes", (t0 + t1) / 2)
        self.assertAlmostEqual(mid, (a["alloc_bytes"] + b["alloc_bytes"]) / 2)

    def test_outside_the_samples_there_is_no_value(self):
        s = rs.read_samples(GO_METRICS, rs.GO_FIELDS)
        self.assertIsNone(rs.at(s, "alloc_bytes", s[0][0] - 10))
        self.assertIsNone(rs.at(s, "alloc_bytes", s[-1][0] + 10))

    def test_a_torn_or_foreign_line_is_skipped(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("1000000000 tick 1 2 3 4 0.5 0.1 2.0 5 6 7\n")
            f.write("not a sample\n")
            f.write("2000000000 tick 1 2 3")  # the writer mid-line
        try:
            s = rs.read_samples(f.name, rs.GO_FIELDS)
        finally:
            os.unlink(f.name)
        self.assertEqual(len(s), 1)
        self.assertEqual(s[0][0], 1.0)
        self.assertEqual(s[0][2]["gc_cpu_s"], 0.5)


class GoTest(unittest.TestCase):
    def setUp(self):
        s = rs.read_samples(GO_METRICS, rs.GO_FIELDS)
        # The hook's first sample is written at package init, within
        # milliseconds of the runtime's start that gctrace counts from.
        self.start = s[0][0]

    def test_every_cycle_of_the_log_is_counted_once(self):
        w = rs.go_window(GO_METRICS, GO_STDERR, self.start, self.start - 1, self.start + 100)
        self.assertEqual(w["cycles"], 34)
        self.assertEqual(w["forced_cycles"], 1)
        self.assertEqual(w["pauses"], 68)
        # Cycle 2's sweep termination: 6.3 ms, the longest stop of the log.
        self.assertEqual(w["pause_max_ms"], 6.3)

    def test_the_forced_cycle_falls_in_its_window(self):
        w = rs.go_window(GO_METRICS, GO_STDERR, self.start, self.start + 6.0, self.start + 6.5)
        self.assertEqual((w["cycles"], w["forced_cycles"]), (1, 1))
        self.assertEqual(w["live_mib_last"], 6.0)
        self.assertGreater(w["alloc_bytes"], 0)
        self.assertGreater(w["alloc_objects"], 0)
        empty = rs.go_window(GO_METRICS, GO_STDERR, self.start, self.start + 6.3, self.start + 6.5)
        self.assertEqual(empty["cycles"], 0)

    def test_the_live_heap_after_the_forced_collection(self):
        self.assertEqual(rs.go_last_forced(GO_METRICS), 7208448)


class JavaTest(unittest.TestCase):
    def setUp(self):
        s = rs.read_samples(JAVA_AGENT, rs.JAVA_FIELDS)
        self.start = s[0][2]["jvm_start_ms"] / 1000

    def test_pauses_by_kind_and_the_full_collection(self):
        w = rs.java_window(JAVA_AGENT, G1_LOG, self.start + 2, self.start + 27)
        self.assertEqual(w["pause_kinds"]["Young Normal"]["n"], 3)
        self.assertEqual(w["full_gcs"], 1)
        self.assertEqual(w["pause_max_ms"], 138.659)
        self.assertEqual(rs.java_last_full_gc(G1_LOG), 7 * 2**20)

    def test_what_survives_young_collections(self):
        w = rs.java_window(JAVA_AGENT, G1_LOG, self.start + 2, self.start + 27)
        self.assertEqual(w["region_bytes"], 2**20)
        self.assertEqual(w["young_eden_bytes"], 27 * 2**20)
        self.assertAlmostEqual(w["survivor_fraction"], w["young_copied_bytes"] / w["young_eden_bytes"])
        self.assertTrue(0 < w["survivor_fraction"] < 1)

    def test_the_agents_allocation_agrees_with_the_eden_consumed(self):
        # Two independent sources: HotSpot's per-thread allocation counters
        # and the eden regions each young collection found full.
        w = rs.java_window(JAVA_AGENT, G1_LOG, self.start + 2, self.start + 27)
        self.assertLess(abs(w["alloc_bytes"] / w["young_eden_bytes"] - 1), 0.2)

    def test_collector_threads_by_name(self):
        threads = {"GC Thread#0": 1.0, "GC Thread#1": 0.5, "G1 Conc#0": 0.25, "G1 Refine#0": 0.125,
                   "G1 Main Marker": 0.0625, "VM Thread": 8.0, "nioEventLoopGr": 16.0, "java": 32.0}
        self.assertEqual(rs.java_gc_thread_cpu(threads), 1.9375)


class StutterTest(unittest.TestCase):
    def test_allocation_between_two_turns(self):
        rows = [("0", 1_000_000_000, 100, 40, 3), ("0", 2_000_000_000, 600, 140, 9),
                ("0", 3_000_000_000, 1600, 340, 20)]
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("kind,wall_start_ns,alloc_start,freed_start,nalloc_start\n")
            for r in rows:
                f.write(",".join(map(str, r)) + "\n")
        try:
            a = rs.stutter_alloc(f.name, 1.5, 3.5)
            none = rs.stutter_alloc(f.name, 5.0, 6.0)
        finally:
            os.unlink(f.name)
        self.assertEqual(a["alloc_bytes"], 1000.0)
        self.assertEqual(a["alloc_objects"], 11.0)
        self.assertEqual(a["live_delta_bytes"], 1260.0)
        self.assertEqual(none["alloc_bytes"], 0.0)

    def test_a_last_line_cut_short_by_the_stop_is_skipped(self):
        # The replica was stopped while writing its last turn: the line
        # has the time and part of the counters (seen in CI, 2026-12-07).
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("kind,wall_start_ns,alloc_start,freed_start,nalloc_start\n")
            f.write("0,1000000000,100,40,3\n0,2000000000,600,140,9\n0,3000000000,16\n")
        try:
            a = rs.stutter_alloc(f.name, 0.5, 3.5)
        finally:
            os.unlink(f.name)
        self.assertEqual(a["alloc_bytes"], 500.0)
        self.assertEqual(a["alloc_objects"], 6.0)
        self.assertEqual(a["live_delta_bytes"], 460.0)


if __name__ == "__main__":
    unittest.main()
