"""The SLO search and its criterion (gt/bench.py), against fake systems."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from gt import bench  # noqa: E402


def run_at(offered, **kw):
    r = {"offered": offered, "achieved": offered, "ok": int(offered * 5), "io_errors": 0, "wrong": 0,
         "unfinished": 0, "p99_ms": 5.0}
    r.update(kw)
    return r


def search(capacity, attempts, unlucky=(), start=1000.0):
    """Drives a search against a system meeting the SLO up to `capacity`,
    except on the runs listed in `unlucky`; returns (found, runs)."""
    s = bench.Search(start, attempts)
    runs = 0
    while (rate := s.next_rate()) is not None:
        ok = rate <= capacity and runs not in unlucky
        runs += 1
        s.record(run_at(rate), ok)
        assert runs < 100, "the search does not end"
    return (s.lo["offered"] if s.lo else None), runs


class SearchTest(unittest.TestCase):
    def test_finds_the_capacity_within_the_bisection_precision(self):
        found, runs = search(5000.0, 1)
        # 1k, 2k, 4k pass, 8k misses, then five bisections between 4k and 8k.
        self.assertTrue(4500.0 <= found <= 5000.0, found)
        self.assertEqual(runs, 4 + 5)

    def test_one_unlucky_run_is_retried_only_with_two_attempts(self):
        one, _ = search(5000.0, 1, unlucky=(1,))
        self.assertLess(one, 2000.0)
        two, _ = search(5000.0, 2, unlucky=(1,))
        self.assertGreaterEqual(two, 4500.0)

    def test_a_system_missing_every_rate_has_no_result(self):
        found, runs = search(0.0, 3)
        self.assertIsNone(found)
        self.assertEqual(runs % 3, 0)

    def test_stops_at_the_maximum_rate(self):
        s = bench.Search(1000.0, 1, max_rate=4000.0)
        rates = []
        while (r := s.next_rate()) is not None:
            rates.append(r)
            s.record(run_at(r), True)
        self.assertEqual(rates, [1000.0, 2000.0, 4000.0])


class SloTest(unittest.TestCase):
    def test_each_condition_fails_the_run(self):
        self.assertTrue(bench.meets_slo(run_at(1000.0), 20.0))
        for bad in ({"p99_ms": 20.5}, {"wrong": 1}, {"unfinished": 1}, {"io_errors": 6},
                    {"achieved": 940.0}):
            self.assertFalse(bench.meets_slo(run_at(1000.0, **bad), 20.0), bad)
        # 0.1 % errors are tolerated (5 of 5,000).
        self.assertTrue(bench.meets_slo(run_at(1000.0, io_errors=5), 20.0))


class ErrorLineTest(unittest.TestCase):
    def test_benchs_error_and_causes_on_one_line(self):
        out = ("system   offered/s\nreplicant: Text protocol, 16 connections\nError: preloading replicant\n\n"
               "Caused by:\n    preload failed: NotLeader\n")
        self.assertEqual(bench.error_line(out), "preloading replicant: preload failed: NotLeader")
        self.assertEqual(bench.error_line("a\nb\nc\nd"), "b c d")


if __name__ == "__main__":
    unittest.main()
