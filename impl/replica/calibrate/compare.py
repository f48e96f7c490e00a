#!/usr/bin/env python3
"""The simulated no-GC cluster beside the real one: p50, p90 and p99
(from the intended start) against the offered load, for the runs `run.py`
recorded and `sim study run` at the same rates, with this machine
represented by measured figures, one set for every load
(docs/calibration.md):

- disk: the latency from a persist request to its durability as the
  protocol loop sees it (the log thread's wake-up, the group-commit
  interval, write, fdatasync, the loop's wake-up), measured by
  `--calibrate` at the lowest load; its quantiles up to the 95th (the
  shared disk's stalls, which hold every later append, are left out);
- network: one-way loopback delay between two processes (netdelay.py);
- sharing the two cores, two ways:
  "speed": each replica's processor runs at the share of a core its
  protocol loop got while runnable, on-CPU / (on-CPU + waiting for a CPU)
  from the loop threads' schedstat (median over replicas and runs);
  "wake-up": a full-speed processor, and the mean wait for a CPU per
  loop turn (schedstat's wait over the turns) added to the network's
  mean delay, as the wait of the receiving loop's wake-up.

  impl/replica/calibrate/compare.py results/calibrate --net results/calibrate/net.json \
      --seeds 3 --out docs/data/calibration-2026-11-23 --plot docs/calibration-2026-11-23-p99
"""

import argparse
import csv
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def load(path, cols):
    with open(path) as f:
        r = csv.reader(f)
        head = next(r)
        ix = [head.index(c) for c in cols]
        d = np.array([[row[i] for i in ix] for row in r], dtype=float)
    return {c: d[:, k] for k, c in enumerate(cols)}


def run_turns(run, d, cols):
    """Each replica's turns of `run`."""
    return [load(os.path.join(d, f"turns-{run['tag']}-{i}.csv"), cols) for i in range(3)]


def persist_samples(run, d):
    """Per-turn mean persist latencies (µs) in the measured window, and
    how many persists each stands for."""
    lat, w = [], []
    for t in run_turns(run, d, ["wall_start_ns", "persist_done", "persist_lat_sum_us"]):
        m = (t["wall_start_ns"] >= run["measure_from_ns"]) & (t["wall_start_ns"] < run["measure_to_ns"]) & (t["persist_done"] > 0)
        lat.append(t["persist_lat_sum_us"][m] / t["persist_done"][m])
        w.append(t["persist_done"][m])
    return np.concatenate(lat), np.concatenate(w)


def quantiles(lat, w, probs):
    o = np.argsort(lat)
    lat, c = lat[o], np.cumsum(w[o]) / w.sum()
    return [float(lat[min(len(lat) - 1, np.searchsorted(c, p))]) for p in probs]


def runs_of(d):
    with open(os.path.join(d, "runs.jsonl")) as f:
        for line in f:
            run = json.loads(line)
            if run.get("bench") and os.path.exists(os.path.join(d, f"turns-{run['tag']}-0.csv")):
                yield run


def stalls(run, d):
    """Group commits slower than 15 ms that the replicas logged in the
    measured window: (how many on the three, the longest, ms)."""
    n, longest = 0, 0
    for i in range(3):
        path = os.path.join(d, f"replica-{run['tag']}-{i}.log")
        if not os.path.exists(path):
            continue
        with open(path, errors="replace") as f:
            for line in f:
                if "slow group commit" not in line:
                    continue
                line = re.sub(r"\x1b\[[0-9;]*m", "", line)
                m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z.*total_ms=(\d+)", line)
                if not m:
                    continue
                t = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp() * 1e9
                if run["measure_from_ns"] <= t < run["measure_to_ns"]:
                    n += 1
                    longest = max(longest, int(m.group(2)))
    return n, longest


def real(run, d):
    b = run["bench"]
    leader = next((s["id"] for s in run["status"] if s.get("role") == "leader"), None)
    # schedstat covers bench's whole run, warm-up included: so do the turns counted.
    t0 = run["measure_from_ns"] - int((run["warmup"] + 0.05) * 1e9)
    t1 = t0 + int(run["bench_wall_s"] * 1e9)
    turns = [int(((t["wall_start_ns"] >= t0) & (t["wall_start_ns"] < t1)).sum()) for t in run_turns(run, d, ["wall_start_ns"])]
    loops = [th["replica"] for th in run["thread_cpu_s"]]
    lat, w = persist_samples(run, d)
    return {"tag": run["tag"], "rate": run["rate"], "p50": b["p50_ms"], "p90": b["p90_ms"], "p99": b["p99_ms"],
            "p999": b["p999_ms"], "achieved": b["achieved"], "leader": leader,
            "speed": [l[1] / (l[1] + l[2]) for l in loops],
            "wait_per_turn_us": [l[2] / n * 1e6 for l, n in zip(loops, turns)],
            "cpu_per_turn_us": [l[1] / n * 1e6 for l, n in zip(loops, turns)],
            "persist_us": dict(zip(("p10", "p50", "p90", "p99", "p999", "max"),
                                   quantiles(lat, w, (0.1, 0.5, 0.9, 0.99, 0.999, 1.0)))),
            "persist_mean_us": float((lat * w).sum() / w.sum()),
            "stalls": stalls(run, d),
            "load": run["loadavg_before"][0], "time": run["time"]}


def sim_args(machine):
    """`sim study` flags for a representation of this machine."""
    return ["--speed", f"{machine['speed']:.3f}", "--net-min-us", str(machine["net_min_us"]),
            "--net-extra-us", f"{machine['net_extra_us']:.1f}",
            "--disk-quantiles-us", ",".join(str(int(q)) for q in machine["disk_quantiles_us"])]


def sim(rate, machine, seed, duration):
    args = [os.path.join(ROOT, "target", "release", "sim"), "study", "run", "--model", "none", "--rate", str(rate),
            "--seed", str(seed), "--duration", str(duration), "--warmup", "1"] + sim_args(machine)
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    out = json.loads(r.stdout)
    p, lat = out["probe"], out["timeline"]["latency"]
    return {"p50": p["p50"], "p90": lat[int(0.9 * (len(lat) - 1))] if lat else 0.0, "p99": p["p99"],
            "p999": p["p999"], "throughput": p["throughput"]}


def machine_of(d, netj):
    """This machine's representations, from the runs in `d`."""
    runs = list(runs_of(d))
    reals = [real(r, d) for r in runs]
    lowest = min(r["rate"] for r in runs)
    lw = [persist_samples(r, d) for r in runs if r["rate"] == lowest]
    disk_q = [int(q) for q in quantiles(np.concatenate([x[0] for x in lw]), np.concatenate([x[1] for x in lw]),
                                        np.linspace(0, 0.95, 96))]
    speed = statistics.median(s for r in reals for s in r["speed"])
    wait = statistics.median(x for r in reals for x in r["wait_per_turn_us"])
    base = {"net_min_us": netj["net_min_us"], "disk_quantiles_us": disk_q, "wait_per_turn_us": wait,
            "disk_from_rate": lowest}
    return reals, {
        "speed": dict(base, speed=speed, net_extra_us=netj["net_extra_us"]),
        "wake-up": dict(base, speed=1.0, net_extra_us=netj["net_extra_us"] + wait),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--net", required=True, help="netdelay.py's JSON line")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=16.0)
    ap.add_argument("--out", required=True, help="prefix of the .json and .md written")
    ap.add_argument("--plot", help="prefix of the .png/.svg plot")
    a = ap.parse_args()

    with open(a.net) as f:
        netj = json.loads(f.read().strip().splitlines()[-1])
    reals, machines = machine_of(a.dir, netj)
    if not reals:
        sys.exit("no runs")
    m = machines["speed"]
    dq = m["disk_quantiles_us"]
    print(f"machine: speed {m['speed']:.3f}, wait per turn {m['wait_per_turn_us']:.1f} µs, network {netj['net_min_us']} "
          f"+ exp({netj['net_extra_us']}) µs, disk p0 {dq[0]} p50 {dq[50]} p95 {dq[-1]} µs (at {m['disk_from_rate']:.0f}/s)")
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    table = []
    for rate in sorted({r["rate"] for r in reals}):
        rr = [r for r in reals if r["rate"] == rate]
        row = {"rate": rate, "real": rr}
        for name, mach in machines.items():
            row[name] = [sim(rate, mach, s + 1, a.duration) for s in range(a.seeds)]
        table.append(row)
        print(f"{rate:>7.0f}: real p50 {med(rr, 'p50'):6.2f} p90 {med(rr, 'p90'):6.2f} p99 {med(rr, 'p99'):7.2f} | "
              + " | ".join(f"{n} p50 {med(row[n], 'p50'):6.2f} p90 {med(row[n], 'p90'):6.2f} p99 {med(row[n], 'p99'):7.2f}"
                           for n in machines), flush=True)
    result = {"net": netj, "machines": machines, "rows": table}
    with open(a.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(markdown(result))
    if a.plot:
        plot(result, a.plot)


def fmt_range(xs):
    lo, hi, mid = min(xs), max(xs), statistics.median(xs)
    return f"{mid:.2f} ({lo:.2f}–{hi:.2f})" if hi > lo else f"{mid:.2f}"


def markdown(res):
    names = list(res["machines"])
    head = "| offered ops/s | real p50 ms | real p90 | real p99 | disk stalls > 15 ms (longest) | " + " | ".join(
        f"sim ({n}) p50 | p90 | p99" for n in names) + " |"
    lines = [head, "|" + "---|" * (5 + 3 * len(names))]
    for row in res["rows"]:
        rr = row["real"]
        cells = [f"{row['rate']:.0f}"] + [fmt_range([r[q] for r in rr]) for q in ("p50", "p90", "p99")]
        cells.append(", ".join(f"{r['stalls'][0]} ({r['stalls'][1]})" for r in rr))
        for n in names:
            cells += [fmt_range([x[q] for x in row[n]]) for q in ("p50", "p90", "p99")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(res, prefix):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    rates = [r["rate"] for r in res["rows"]]
    colors = {"speed": "tab:blue", "wake-up": "tab:orange"}
    for ax, q in zip(axes, ("p50", "p90", "p99")):
        xs = [r["rate"] for row in res["rows"] for r in row["real"]]
        ys = [r[q] for row in res["rows"] for r in row["real"]]
        ax.scatter(xs, ys, color="black", s=14, label="real cluster (each run)", zorder=3)
        ax.plot(rates, [statistics.median(r[q] for r in row["real"]) for row in res["rows"]], color="black", lw=1)
        for name in res["machines"]:
            mid = [statistics.median(x[q] for x in row[name]) for row in res["rows"]]
            lo = [min(x[q] for x in row[name]) for row in res["rows"]]
            hi = [max(x[q] for x in row[name]) for row in res["rows"]]
            ax.plot(rates, mid, color=colors.get(name, "tab:green"), label=f"simulator ({name})")
            ax.fill_between(rates, lo, hi, color=colors.get(name, "tab:green"), alpha=0.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered load, ops/s")
        ax.set_title(f"{q} latency from intended start, ms")
        if q == "p99":
            ax.axhline(20, color="grey", ls=":", lw=1)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("no-GC cluster, workload A, 64 clients: real (3 replicas + bench on 2 shared cores) vs simulated")
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=100)
    fig.savefig(prefix + ".svg")


if __name__ == "__main__":
    main()
