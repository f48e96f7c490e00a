"""Tests of the prediction report (scripts/gc_grid.py predict/report):
the ground-truth harness's own results are read under the simulator's
profile names, the load generator's CPU per operation is fitted from its
runs, and the loss and verdict table compares like with like. Seconds.

    python3 scripts/tests/test_gc_grid.py
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import gc_grid  # noqa: E402


def cell(impl, ratio, ops, meets=True, gc=None):
    return {"kind": "cell", "impl": impl, "ratio": ratio, "max_ops": ops, "meets_slo_somewhere": meets,
            "roles_at_max": {"leader": {"gc_cpu_share": gc}}, "error": None, "oom_kills": 0}


def run(rate, duration, warmup, cpu):
    return {"kind": "run", "rate": rate, "duration": duration, "warmup": warmup, "bench": {"bench_cpu_s": cpu}}


def sim_max(profile, model, ratio, rate):
    return {"setup": {"profile": {"name": profile}, "model": model, "ratio": ratio, "dataset": 256 << 20,
                      "host_cores": 2, "load_us_per_op": 20},
            "max_rate": rate, "slo_p99_ms": 20, "at_max": {"gc_share": 0.1}}


def write_lines(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


class PredictReport(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.measured = os.path.join(self.dir, "runs.jsonl")

    def test_harness_cells_use_profile_names_and_no_load_is_zero(self):
        write_lines(self.measured, [cell("go-tcp", 8, 10000, gc=0.2), cell("java", 1.25, 500, meets=False),
                                    {"kind": "failed-attempt", "impl": "go-tcp", "ratio": 2}])
        c = gc_grid.harness_cells(self.measured)
        self.assertEqual(set(c), {("replicant-go", 8.0), ("replicant-java", 1.25)})
        self.assertEqual(c[("replicant-go", 8.0)]["gc_cpu_share"], 0.2)
        self.assertEqual(c[("replicant-java", 1.25)]["max_rate"], 0.0, "a cell that never met the SLO")

    def test_a_later_file_replaces_only_the_cells_it_measured_again(self):
        rerun = os.path.join(self.dir, "rerun.jsonl")
        old_run = dict(run(1000, 5, 1, 0.3), impl="go-tcp", ratio=8)
        write_lines(self.measured, [cell("go-tcp", 8, 3900), old_run, cell("go-tcp", 2, 4000),
                                    cell("rust-tcp", 8, 11250)])
        write_lines(rerun, [{"kind": "invocation"}, cell("go-tcp", 8, 5600),
                            dict(run(2000, 5, 1, 0.4), impl="go-tcp", ratio=8.0)])
        c = gc_grid.harness_cells([self.measured, rerun])
        self.assertEqual(c[("replicant-go", 8.0)]["max_rate"], 5600)
        self.assertEqual(c[("replicant-go", 2.0)]["max_rate"], 4000, "a cell not measured again is kept")
        self.assertEqual(c[("replicant-rust", 8.0)]["max_rate"], 11250)
        rows = gc_grid.load_measured([self.measured, rerun])
        self.assertNotIn(old_run, rows, "the replaced cell's runs go with it")
        self.assertEqual([r["rate"] for r in rows if r.get("kind") == "run"], [2000])

    def test_load_generator_cpu_is_the_slope_not_the_mean(self):
        # 0.5 s of start-up per run plus 20 µs per operation offered.
        rows = [run(r, 5, 1, 0.5 + r * 6 * 20e-6) for r in (1000, 4000, 16000)]
        write_lines(self.measured, rows)
        self.assertAlmostEqual(gc_grid.load_us_per_op(self.measured), 20.0, places=6)
        write_lines(self.measured, rows[:2])
        self.assertIsNone(gc_grid.load_us_per_op(self.measured), "two runs are too few to fit")

    def test_losses_and_verdicts(self):
        write_lines(os.path.join(self.dir, "max.jsonl"), [
            sim_max("replicant-rust", "none", 8, 20000), sim_max("replicant-go", "go", 8, 15000),
            sim_max("replicant-go", "go", 1.25, 0)])
        write_lines(self.measured, [cell("rust-tcp", 8, 20000), cell("go-tcp", 8, 16000),
                                    cell("rust-tcp", 1.25, 19000), cell("go-tcp", 1.25, 900)])
        text = gc_grid.predict_report(self.dir, self.measured)
        row = lambda p, r: next(l for l in text.splitlines() if l.startswith(f"| {p} | {r} |"))
        # 8x: predicted 25 % loss, measured 20 %: 5 pp apart, within 10.
        self.assertIn("| 25 % | 20 % | +5 pp |", row("replicant-go", 8))
        self.assertTrue(row("replicant-go", 8).endswith("| yes |"))
        # 1.25x: the simulator says no load meets the SLO, the real Go met 900 ops/s.
        self.assertIn("| misses | meets | no |", row("replicant-go", 1.25))
        # The measured system's own row carries its error against the prediction.
        self.assertIn("| replicant-go | go | 8 | 15.0 | 10 % | 16.0 | – | -6 % |", text)

    def test_cpu_is_calibrated_at_8x_from_the_mutator_share(self):
        src = os.path.join(self.dir, "src")
        os.makedirs(src)
        with open(os.path.join(src, "replicant-go.toml"), "w") as f:
            f.write('name = "replicant-go"\n[cpu]\nleader_read_us = 100.0\nleader_write_us = 300.0\n'
                    'follower_write_us = 80.0\n')
        c = cell("go-tcp", 8, 10000)
        c["roles_at_max"] = {"leader": {"cpu_us_per_op": 50.0, "gc_of_process_cpu": 0.2},
                             "follower": {"cpu_us_per_op": 10.0, "gc_of_process_cpu": 0.0}}
        write_lines(self.measured, [c, cell("go-tcp", 2, 5000)])
        paths = gc_grid.calibrated_profiles(self.measured, ["replicant-go", "replicant-java"], self.dir, source=src)
        import tomllib
        cpu = tomllib.loads(open(paths["replicant-go"]).read())["cpu"]
        # Leader: 40 µs of mutator CPU per operation = half a read and half
        # a write of the profile (200 µs) times 0.2.
        self.assertAlmostEqual(cpu["leader_read_us"], 20.0)
        self.assertAlmostEqual(cpu["leader_write_us"], 60.0)
        # Followers: 10 µs per operation, half of them writes.
        self.assertAlmostEqual(cpu["follower_write_us"], 20.0)
        # No measured cell: the profile is used as it is.
        self.assertEqual(paths["replicant-java"], os.path.join(src, "replicant-java.toml"))

    def test_each_grid_replaces_only_its_own_part_of_the_page(self):
        page = os.path.join(self.dir, "gc-study.md")
        b, e = gc_grid.BEGIN.format(kind="predict"), gc_grid.END.format(kind="predict")
        with open(page, "w") as f:
            f.write(f"# Study\n\nwords\n\n{b}\nold predictions\n{e}\n\nmore words\n")
        gc_grid.write_docs(self.dir, "predict", "new predictions")
        gc_grid.write_docs(self.dir, "paper", "paper table")
        gc_grid.write_docs(self.dir, "predict", "newer predictions")
        text = open(page).read()
        self.assertNotIn("old predictions", text)
        self.assertEqual(text.count("newer predictions"), 1)
        self.assertIn("paper table", text)
        self.assertLess(text.index("more words"), text.index("paper table"), "a new part goes at the end")
        self.assertTrue(text.startswith("# Study\n\nwords\n"))


if __name__ == "__main__":
    unittest.main()
