#!/usr/bin/env python3
"""Plots a `bench --timeline FILE` CSV: the latency of every operation
against its intended start, one panel per run, with each 20-ms window's
maximum drawn as a line (a stall shows as a ridge every request of the
window climbs). Where in a run the tail comes from.

    python3 impl/bench/plot_timeline.py TIMELINE.csv OUT_PREFIX

writes OUT_PREFIX-timeline.png and .svg. CSV columns (no header): system,
offered rate, run number, intended start in ms since the measurement
began, latency in ms."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WINDOW_MS = 20
SLO_MS = 20.0


def load(path):
    runs = {}
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) != 5:
                continue
            system, offered, run, at, ms = row
            key = (system, float(offered), int(run))
            runs.setdefault(key, ([], []))
            runs[key][0].append(int(at))
            runs[key][1].append(float(ms))
    return runs


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    runs = load(sys.argv[1])
    if not runs:
        sys.exit(f"{sys.argv[1]}: no timeline rows")
    keys = sorted(runs)
    fig, axes = plt.subplots(len(keys), 1, figsize=(9, 2.4 * len(keys)), sharex=True, squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        at, ms = runs[key]
        ax.scatter([a / 1000 for a in at], ms, s=1, alpha=0.15, linewidths=0, rasterized=True)
        worst = {}
        for a, m in zip(at, ms):
            w = a // WINDOW_MS
            worst[w] = max(worst.get(w, 0.0), m)
        ws = sorted(worst)
        ax.plot([w * WINDOW_MS / 1000 for w in ws], [worst[w] for w in ws], linewidth=0.8, color="black", label=f"max per {WINDOW_MS} ms")
        ax.axhline(SLO_MS, color="grey", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.set_ylabel("latency (ms)")
        system, offered, run = key
        ax.set_title(f"{system}, {offered / 1000:g} kops/s offered, run {run}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("intended start (s since the measurement began)")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{sys.argv[2]}-timeline.{ext}", dpi=110)


if __name__ == "__main__":
    main()
