#!/usr/bin/env python3
"""GC coordination on the local cluster: real replica processes whose
collector model (`[gc]`) runs plain or coordinated (`coordinated = true`,
docs/protocol-gc-coordination.md "GC coordination"), side by side at one offered load —
the real-node half of docs/gc-study-simulated.md's Blade rows
(docs/notes/2026-11-24-gc-blade-local.md has a run).

For each configuration (no collector; G1-like and Go-like, each plain and
with Blade) a 3-replica cluster (ports 7701-7713, run.py's) is started,
preloaded and driven by `bench` (workload A, 500-byte values) at RATE for
DURATION seconds; repeats are interleaved so that the machine's drift
falls on every configuration alike. Writes OUT/gc-blade.json and .md and,
with --docs, docs/data/gc-blade-local-<date>.{json,md} and
docs/gc-blade-local.png.

  impl/replica/calibrate/gc_blade.py --rate 4000 --duration 15 --repeat 2 --docs docs
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import run as realrun  # noqa: E402

ROOT = realrun.ROOT
CONFIGS = [("none", False), ("g1", False), ("g1", True), ("go", False), ("go", True)]


def label(model, blade):
    return "no collector" if model == "none" else f"{model}-like{' + Blade' if blade else ''}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "gc-blade"))
    ap.add_argument("--rate", type=float, default=4000)
    ap.add_argument("--ratio", type=float, default=8.0, help="memory limit over the modelled data")
    ap.add_argument("--dataset-mib", type=int, default=64)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--docs", default=None, help="also write the results and plot into this docs folder")
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "stutter-replica", "-p", "stutter-bench"],
                       cwd=ROOT, check=True)
    limit = int(round(a.ratio * a.dataset_mib))
    runs = {}
    for rep in range(a.repeat):
        for model, blade in CONFIGS:
            tag = f"{model}-{'blade' if blade else 'plain'}-{rep}"
            rec = realrun.measure(a.out, tag, a.rate, a, [], realrun.config_with_gc(model, limit, a.dataset_mib, coordinated=blade))
            b = rec.get("bench") or {}
            if rec["bench_rc"] != 0 or not b:
                sys.exit(f"{tag}: bench failed ({rec['bench_rc']}): {rec['bench_stdout']}")
            leaders = [s.get("ballot") for s in rec.get("status") or [] if s]
            runs.setdefault((model, blade), []).append({
                "p50": b["p50_ms"], "p99": b["p99_ms"], "p999": b["p999_ms"], "max": b["max_ms"],
                "achieved": b["achieved"], "errors": b["io_errors"], "wrong": b["wrong"],
                "unfinished": b["unfinished"], "ballots": leaders, "loadavg": rec["loadavg_before"],
                "gc": [s.get("gc") for s in rec.get("status") or [] if s],
            })
            print(f"{tag}: p99 {b['p99_ms']:.2f} ms, p99.9 {b['p999_ms']:.2f} ms, max {b['max_ms']:.2f} ms, "
                  f"{b['achieved']:.0f} ok/s, wrong {b['wrong']}", flush=True)
    rows = []
    for model, blade in CONFIGS:
        rs = runs[(model, blade)]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        rows.append({"model": model, "blade": blade, "label": label(model, blade), "runs": rs,
                     "p50": med("p50"), "p99": med("p99"), "p999": med("p999"), "max": med("max"),
                     "achieved": med("achieved"), "wrong": sum(r["wrong"] for r in rs)})
    date = datetime.date.today().isoformat()
    lines = [f"Local cluster, {a.rate:.0f} ops/s offered, workload A, {a.duration:.0f} s measured per run, "
             f"median of {a.repeat} interleaved runs; `[gc]` memory limit {limit} MiB over {a.dataset_mib} MiB "
             f"of modelled data ({a.ratio:g}x); measured {date} on this shared 2-core machine.", "",
             "| configuration | p50 | p99 | p99.9 | max | ok/s | wrong answers |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['p50']:.2f} ms | {r['p99']:.2f} ms | {r['p999']:.2f} ms | {r['max']:.2f} ms | "
                     f"{r['achieved']:.0f} | {r['wrong']} |")
    md = "\n".join(lines) + "\n"
    print(md)
    result = {"rate": a.rate, "ratio": a.ratio, "dataset_mib": a.dataset_mib, "duration": a.duration,
              "repeat": a.repeat, "date": date, "rows": rows}
    for path, text in [(os.path.join(a.out, "gc-blade.json"), json.dumps(result, indent=1)),
                       (os.path.join(a.out, "gc-blade.md"), md)]:
        with open(path, "w") as f:
            f.write(text)
    if a.docs:
        data = os.path.join(a.docs, "data")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, f"gc-blade-local-{date}.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(data, f"gc-blade-local-{date}.md"), "w") as f:
            f.write(md)
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4))
        width = 0.27
        xs = range(len(rows))
        for i, (k, name) in enumerate([("p99", "p99"), ("p999", "p99.9"), ("max", "max")]):
            ax.bar([x + (i - 1) * width for x in xs], [r[k] for r in rows], width, label=name)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["label"] for r in rows], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("latency, ms (log)")
        ax.set_title(f"Real replicas, emulated collectors, {a.rate:.0f} ops/s: plain vs Blade")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(a.docs, "gc-blade-local.png"), dpi=110)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
