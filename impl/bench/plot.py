#!/usr/bin/env python3
"""Plots bench results (the JSON lines `bench --out FILE` appends).

    python3 impl/bench/plot.py RESULTS.jsonl OUT_PREFIX

writes OUT_PREFIX-p99.png/.svg (p99 latency vs offered load, one line per
system through its best run at each rate, every run as a faint point, the
SLO drawn) and OUT_PREFIX-cdf.png/.svg (latency CDF of each
system's highest run that met the SLO)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SLO_MS = 20.0


def load(path):
    runs = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                runs.setdefault(r["system"], []).append(r)
    return runs


def label(system, rs):
    """The system, with how bench spoke to it (newer result files say)."""
    r = rs[0]
    if "protocol" not in r:
        return system
    return f"{system} ({r['protocol']}, {r['connections']} conn × {r['window']})"


def meets(r):
    return r["wrong"] == 0 and r["unfinished"] == 0 and r["p99_ms"] <= SLO_MS and r["achieved"] >= 0.95 * r["offered"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    runs = load(sys.argv[1])
    prefix = sys.argv[2]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, rs in sorted(runs.items()):
        # `bench --find-max --attempts N` may run a rate more than once; a
        # rate counts by its best run, so the line goes through the lowest
        # p99 per rate and every run is drawn as a faint point.
        best = {}
        for r in rs:
            if r["offered"] not in best or r["p99_ms"] < best[r["offered"]]["p99_ms"]:
                best[r["offered"]] = r
        line = [best[o] for o in sorted(best)]
        (ln,) = ax.plot([r["offered"] / 1000 for r in line], [r["p99_ms"] for r in line], marker="o", label=label(system, rs))
        ax.scatter([r["offered"] / 1000 for r in rs], [r["p99_ms"] for r in rs], color=ln.get_color(), alpha=0.35, s=14)
    ax.axhline(SLO_MS, color="grey", linestyle="--", linewidth=1, label=f"SLO p99 = {SLO_MS:g} ms")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (kops/s)")
    ax.set_ylabel("p99 latency (ms, from intended start)")
    ax.set_title("p99 latency vs offered load (open loop, YCSB-style)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{prefix}-p99.{ext}", dpi=120)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, rs in sorted(runs.items()):
        ok = [r for r in rs if meets(r)]
        if not ok:
            continue
        best = max(ok, key=lambda r: r["offered"])
        qs = [q for q, _ in best["cdf"]]
        ms = [m for _, m in best["cdf"]]
        ax.plot(ms, qs, marker=".", label=f"{system} @ {best['offered'] / 1000:.1f} kops/s")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("latency CDF at the highest load meeting the SLO")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{prefix}-cdf.{ext}", dpi=120)


if __name__ == "__main__":
    main()
