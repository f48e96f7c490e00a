#!/usr/bin/env python3
"""Draws knossos-costs.png from knossos-costs.txt (stutter.recheck on two
histories of combined runs at 200 operations per key, each key cut to its
first 50/100/150 operations or whole; indeterminate reads dropped or kept)."""
import os
import re

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = os.path.dirname(os.path.abspath(__file__))
rows = []
pat = re.compile(r"COST (\S+) \{(.*)\} key (\d+): (\d+) ops, Knossos (\S+).*?, ([0-9.]+) MiB")
for line in open(os.path.join(HERE, "knossos-costs.txt")):
    m = pat.match(line)
    if m and int(m.group(4)) > 1:
        hist, opts, key, ops, verdict, mib = m.groups()
        rows.append((hist, "keep" in opts, int(ops), verdict, float(mib)))

fig, ax = plt.subplots(figsize=(7, 4.2))
for kept, colour, label in [(False, "tab:blue", "timed-out reads dropped (stutter)"),
                            (True, "tab:red", "timed-out reads kept (Jepsen's checker)")]:
    for decided, marker in [(True, "o"), (False, "x")]:
        pts = [(o, max(m, 0.5)) for h, k, o, v, m in rows
               if k == kept and (v != ":unknown") == decided]
        if pts:
            ax.scatter(*zip(*pts), c=colour, marker=marker, s=50,
                       label=f"{label}: {'decided' if decided else 'undecided after 60 s'}")
ax.set_yscale("log")
ax.set_ylim(0.3, 4e4)
ax.set_xticks([50, 100, 150, 200])
ax.set_xticklabels(["50", "100", "150", "whole (≈200)"])
ax.set_xlabel("operations per key (a key's history cut to its first N)")
ax.set_ylabel("Knossos heap per key, MiB")
ax.set_title("Knossos on keys of combined runs (partition, kill, pause)\n(heap: peak in use above the start; 0 drawn at 0.5)", fontsize=10)
ax.legend(fontsize=8, loc="upper left")
fig.tight_layout()
fig.savefig(os.path.join(HERE, "knossos-costs.png"), dpi=110)
