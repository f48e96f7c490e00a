"""Tests of the main job's report generator (scripts/report.py), fed the
recorded results folder beside this file (report-run/: a real ./run's
outputs, trimmed to the fields the report reads).

Each section and plot the generator lists must be in report.md and
report.html, each plot a real PNG, the GC section first, and its
paragraph must quote the recorded figures. The negative controls show
the check catching a missing section, a missing plot and a paragraph
that contradicts the figures. A few seconds.

    python3 scripts/tests/test_report.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
FIXTURE = os.path.join(HERE, "report-run")
sys.path.insert(0, SCRIPTS)

import report  # noqa: E402


def load_json(path):
    with open(path) as f:
        return json.load(f)


def text(path):
    with open(path) as f:
        return f.read()


def generate(run, out):
    subprocess.run([sys.executable, os.path.join(SCRIPTS, "report.py"), run, out], check=True)


def problems(run, out):
    """What is missing or wrong in the report written to out from run."""
    found = []
    md = text(os.path.join(out, "report.md"))
    page = text(os.path.join(out, "report.html"))
    heads = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    for title in report.SECTIONS:
        if title not in heads:
            found.append(f"section missing from report.md: {title}")
        if f"<h2>{title}</h2>" not in page.replace("&#x27;", "'"):
            found.append(f"section missing from report.html: {title}")
    if heads and heads[0] != report.SECTIONS[0]:
        found.append(f"the report opens with {heads[0]!r}, not the GC comparison")
    for plot in report.PLOTS:
        path = os.path.join(out, plot)
        if not os.path.exists(path):
            found.append(f"plot not written: {plot}")
            continue
        with open(path, "rb") as f:
            head = f.read(8)
        if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(path) < 10_000:
            found.append(f"plot is not a drawn PNG: {plot}")
        if f"]({plot})" not in md or f'src="{plot}"' not in page:
            found.append(f"plot not shown in the report: {plot}")
    # The GC paragraph quotes the run's own p99.9 figures.
    for key in ("none", "go", "go+blade", "g1", "g1+blade"):
        path = os.path.join(run, f"gc-{key}.json")
        if os.path.exists(path):
            p999 = load_json(path)["probe"]["p999"]
            if f"{p999:.1f} ms" not in md.split("| run |")[0]:
                found.append(f"the GC paragraph does not give {key}'s p99.9 ({p999:.1f} ms)")
    return found


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="report-test-")
        self.run_dir = os.path.join(self.tmp, "run")
        shutil.copytree(FIXTURE, self.run_dir)
        self.out = os.path.join(self.tmp, "out")
        os.mkdir(self.out)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_recorded_run_gives_every_section_and_plot(self):
        generate(self.run_dir, self.out)
        self.assertEqual(problems(self.run_dir, self.out), [])
        md = text(os.path.join(self.out, "report.md"))
        # The load and why it was picked, from gc-max.json.
        rate = load_json(os.path.join(self.run_dir, "gc-max.json"))["max_rate"]
        self.assertIn(f"({rate:,.0f} ops/s, `sim study max`", md)

    def test_missing_gc_runs_are_caught(self):
        for name in os.listdir(self.run_dir):
            if name.startswith("gc-"):
                os.remove(os.path.join(self.run_dir, name))
        generate(self.run_dir, self.out)
        self.assertIn("plot not written: gc-latency-percentiles.png", problems(self.run_dir, self.out))

    def test_bench_without_percentile_tables_is_caught(self):
        path = os.path.join(self.run_dir, "bench.jsonl")
        rows = [json.loads(line) for line in text(path).splitlines() if line.strip()]
        with open(path, "w") as f:
            for r in rows:
                r.pop("percentiles", None)
                f.write(json.dumps(r) + "\n")
        generate(self.run_dir, self.out)
        self.assertIn("plot not written: bench-latency-percentiles.png", problems(self.run_dir, self.out))

    def test_missing_section_and_wrong_figure_are_caught(self):
        generate(self.run_dir, self.out)
        md_path = os.path.join(self.out, "report.md")
        md = text(md_path)
        with open(md_path, "w") as f:
            f.write(md.replace("## Failover", "## Something else"))
        self.assertIn("section missing from report.md: Failover", problems(self.run_dir, self.out))
        # A paragraph whose G1 figure disagrees with the recorded run.
        g1 = os.path.join(self.run_dir, "gc-g1.json")
        d = load_json(g1)
        d["probe"]["p999"] += 123.4
        with open(g1, "w") as f:
            json.dump(d, f)
        self.assertTrue(any("g1's p99.9" in p for p in problems(self.run_dir, self.out)))


if __name__ == "__main__":
    unittest.main()
