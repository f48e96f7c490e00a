#!/usr/bin/env python3
"""The real node with a `[gc]` collector model beside the simulator's
prediction for the same configuration: a 3-replica cluster (ports
7701-7713) with `[gc] model = "go"` and a memory limit of RATIO x DATASET
MiB, at each offered load, driven by `bench` (workload A, 500-byte
values, 64 clients); and `sim study run --model go --ratio RATIO
--dataset-mib DATASET` at the same rates, with this machine's speed,
network and disk as compare.py measured them.

The simulator counts the data at the Go-like runtime's bytes per byte
(`GO_OVERHEAD`, sim/src/calibration.rs) and the replica's own state at
the same rate; the real node's own state is its real live bytes, so its
modelled data is DATASET x GO_OVERHEAD MiB (`[gc] dataset_mib`), to hold
the same heap.

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
import compare  # noqa: E402
import run as realrun  # noqa: E402

ROOT = realrun.ROOT
GO_OVERHEAD = 1.18  # sim/src/calibration.rs (GO_OVERHEAD)


# The real cluster is measured after a 2-s preload and bench's warm-up;
# the simulated run gets as many seconds of load before its measurement.
PRELOAD_S = 2.0
# A second simulated window starts this long into the run, past the
# episode that follows the heap's first crossing of a tight limit.
STEADY_S = 10.0


def sim(model, ratio, rate, dataset, machine, seed, duration, warmup, lead=None):
    lead = warmup + PRELOAD_S if lead is None else lead
    args = [os.path.join(ROOT, "target", "release", "sim"), "study", "run", "--model", model, "--ratio", str(ratio),
            "--dataset-mib", str(dataset), "--rate", str(rate), "--seed", str(seed), "--duration", str(duration + lead),
            "--warmup", str(lead)] + compare.sim_args(machine)
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
    ap.add_argument("--sim-only", action="store_true", help="keep the real runs of OUT/gc-compare.json, redo the simulations")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not a.no_build:
        subprocess.run(["nice", "-n", "19", "cargo", "build", "--release", "--locked", "-q", "-p", "stutter-replica",
                        "-p", "stutter-bench", "-p", "stutter-sim"], cwd=ROOT, check=True)
    with open(a.machine) as f:
        machine = json.load(f)["machines"]["speed"]
    rows = []
    if a.sim_only:
        with open(os.path.join(a.out, "gc-compare.json")) as f:
            rows = json.load(f)["rows"]
    for rep in range(0 if a.sim_only else a.repeat):
        for ratio in [float(r) for r in a.ratios.split(",")]:
            limit = int(round(ratio * a.dataset_mib))
            for rate in [float(r) for r in a.rates.split(",")]:
                tag = f"{a.model}-{ratio}-{int(rate)}-{rep}"
                modelled = int(round(a.dataset_mib * GO_OVERHEAD))
                rec = realrun.measure(a.out, tag, rate, a, [], realrun.config_with_gc(a.model, limit, modelled))
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
    sims, steady = {}, {}
    for ratio in [float(r) for r in a.ratios.split(",")]:
        for rate in [float(r) for r in a.rates.split(",")]:
            k = f"{ratio}-{rate}"
            sims[k] = [sim(a.model, ratio, rate, a.dataset_mib, machine, s + 1, a.duration, a.warmup) for s in range(a.seeds)]
            steady[k] = [sim(a.model, ratio, rate, a.dataset_mib, machine, s + 1, a.duration, a.warmup, STEADY_S)
                         for s in range(a.seeds)]
            s, t = sims[k], steady[k]
            print(f"sim ratio {ratio} rate {rate}: p99 {statistics.median(x['p99'] for x in s):.2f} ms "
                  f"(from {STEADY_S:.0f} s: {statistics.median(x['p99'] for x in t):.2f}), "
                  f"gc share {statistics.median(x['gc_share'] for x in s):.3f}", flush=True)
    result = {"rows": rows, "sim": sims, "sim_steady": steady, "machine": machine, "dataset_mib": a.dataset_mib,
              "model": a.model}
    with open(os.path.join(a.out, "gc-compare.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(a.out, "gc-compare.md"), "w") as f:
        f.write(markdown(result))


def markdown(res):
    """Real runs beside the simulator's prediction, per configuration."""
    med = statistics.median
    lines = ["| memory/data (limit MiB) | offered ops/s | real p50 ms | real p99 ms | real collector CPU (leader) | "
             "cycles (leader) | CPU burnt by the node, s (leader) | sim p50 | sim p99 | sim p99 from 10 s | "
             "sim collector CPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["ratio"], r["rate"]) for r in res["rows"]}, key=lambda k: (-k[0], k[1]))
    for ratio, rate in keys:
        rr = [r for r in res["rows"] if (r["ratio"], r["rate"]) == (ratio, rate)]
        lead = [r["real"]["gc"][r["real"]["leader"]] for r in rr]
        sims = res["sim"].get(f"{ratio}-{rate}", [])
        steady = res.get("sim_steady", {}).get(f"{ratio}-{rate}", [])
        fmt = lambda xs, f="{:.2f}": ", ".join(f.format(x) for x in xs)
        lines.append(
            f"| {ratio:g} ({rr[0]['limit_mib']}) | {rate:.0f} | {fmt([r['real']['p50'] for r in rr])} | "
            f"{fmt([r['real']['p99'] for r in rr], '{:.1f}')} | {fmt([100 * g['cpu_share'] for g in lead], '{:.1f} %')} | "
            f"{fmt([g['cycles'] for g in lead], '{}')} | {fmt([g['burnt_ms'] / 1e3 for g in lead], '{:.1f}')} | "
            f"{med(x['p50'] for x in sims):.2f} | {med(x['p99'] for x in sims):.1f} | "
            f"{med(x['p99'] for x in steady):.1f} | {100 * med(x['gc_share'] for x in sims):.1f} % |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
