#!/usr/bin/env python3
"""The real node with a `[gc]` collector model beside the simulator's
prediction for the same configuration: a 3-replica cluster (ports
7701-7713) with `[gc] model = "go"`, modelled data of DATASET MiB and a
memory limit of RATIO x DATASET, at each offered load, driven by `bench`
(workload A, 500-byte values, 64 clients); and `sim study run --model go
--ratio RATIO --dataset-mib DATASET` at the same rates, with the
machine's speed, network and disk as compare.py measured them.

  impl/replica/calibrate/gc_compare.py --out results/gc-compare --ratios 8,1.25 \
      --rates 2000,8000 --dataset-mib 64 --machine docs/data/calibration-2026-11-23.json --repeat 2
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import run as realrun  # noqa: E402

ROOT = realrun.ROOT


def gc_config(model, limit_mib, dataset_mib):
    return realrun.CONFIG + f"""
[gc]
model = "{model}"
memory_limit_mib = {limit_mib}
dataset_mib = {dataset_mib}
cores = 1.0
"""


def sim(model, ratio, rate, dataset, machine, seed, duration):
    net = machine["net"]
    lo, hi = machine["disk_const"]
    args = [os.path.join(ROOT, "target", "release", "sim"), "study", "run", "--model", model, "--ratio", str(ratio),
            "--dataset-mib", str(dataset), "--rate", str(rate), "--speed", f"{machine['speed_all']:.3f}",
            "--net-min-us", str(net["net_min_us"]), "--net-extra-us", str(net["net_extra_us"]),
            "--disk-min-us", str(lo), "--disk-max-us", str(hi), "--seed", str(seed), "--duration", str(duration),
            "--warmup", "2"]
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    p = json.loads(r.stdout)["probe"]
    return {k: p[k] for k in ("p50", "p99", "p999", "throughput", "gc_share", "gc_active", "gc_pauses", "gc_max_pause_ms")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "gc-compare"))
    ap.add_argument("--model", default="go")
    ap.add_argument("--ratios", default="8,1.25")
    ap.add_argument("--rates", default="2000,8000")
    ap.add_argument("--dataset-mib", type=int, default=64)
    ap.add_argument("--machine", required=True, help="compare.py's JSON (speed, network, disk of this machine)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not a.no_build:
        subprocess.run(["nice", "-n", "19", "cargo", "build", "--release", "--locked", "-q", "-p", "stutter-replica",
                        "-p", "stutter-bench", "-p", "stutter-sim"], cwd=ROOT, check=True)
    with open(a.machine) as f:
        machine = json.load(f)
    rows = []
    for rep in range(a.repeat):
        for ratio in [float(r) for r in a.ratios.split(",")]:
            limit = int(round(ratio * a.dataset_mib))
            for rate in [float(r) for r in a.rates.split(",")]:
                tag = f"{a.model}-{ratio}-{int(rate)}-{rep}"
                rec = realrun.measure(a.out, tag, rate, a, [], gc_config(a.model, limit, a.dataset_mib))
                gcs = [s.get("gc") for s in rec["status"]]
                leader = next((s["id"] for s in rec["status"] if s.get("role") == "leader"), None)
                b = rec["bench"] or {}
                row = {"tag": tag, "ratio": ratio, "limit_mib": limit, "rate": rate, "rep": rep,
                       "real": {"p50": b.get("p50_ms"), "p99": b.get("p99_ms"), "p999": b.get("p999_ms"),
                                "achieved": b.get("achieved"), "leader": leader, "gc": gcs,
                                "threads": rec["thread_cpu_s"], "load": rec["loadavg_before"][0]}}
                rows.append(row)
                lg = gcs[leader] if leader is not None and gcs[leader] else {}
                print(f"{tag}: real p99 {b.get('p99_ms', 0):.2f} ms, leader gc share {lg.get('cpu_share', 0):.3f} "
                      f"cycles {lg.get('cycles')} max pause {lg.get('max_pause_ms', 0):.2f} ms, load {rec['loadavg_before']}",
                      flush=True)
    sims = {}
    for ratio in [float(r) for r in a.ratios.split(",")]:
        for rate in [float(r) for r in a.rates.split(",")]:
            sims[f"{ratio}-{rate}"] = [sim(a.model, ratio, rate, a.dataset_mib, machine, s + 1, a.duration)
                                       for s in range(a.seeds)]
            s = sims[f"{ratio}-{rate}"]
            print(f"sim ratio {ratio} rate {rate}: p99 {statistics.median(x['p99'] for x in s):.2f} ms, "
                  f"gc share {statistics.median(x['gc_share'] for x in s):.3f}", flush=True)
    with open(os.path.join(a.out, "gc-compare.json"), "w") as f:
        json.dump({"rows": rows, "sim": sims, "machine": machine, "dataset_mib": a.dataset_mib, "model": a.model}, f, indent=1)


if __name__ == "__main__":
    main()
