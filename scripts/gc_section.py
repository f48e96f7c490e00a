"""The report's first section (scripts/report.py): the quick GC
comparison that scripts/run simulates with `sim study run` (no
collector, Go-like and G1-like, each collected model plain and with
Blade, at one load), as a table, a percentile plot and a paragraph
written from the run's own figures.

Inputs in RUN_DIR: gc-max.json (`sim study max` of the no-collector
replicas, which sets the load) and gc-MODEL.json / gc-MODEL+blade.json
(`sim study run`, one JSON line each: {"probe": ..., "timeline": ...}).
"""
import glob
import json
import os

import latency_plot

TITLE = "What stutter is for: GC pauses, with and without Blade (simulated)"
PLOT = "gc-latency-percentiles.png"
NAMES = {"none": "no collector", "go": "Go-like", "g1": "G1-like"}
ORDER = ["none", "go", "go+blade", "g1", "g1+blade"]


def load(run):
    runs = {}
    for path in glob.glob(os.path.join(run, "gc-*.json")):
        key = os.path.basename(path)[3:-5]
        if key == "max":
            continue
        with open(path) as f:
            text = f.read().strip()
        if text:
            runs[key] = json.loads(text.splitlines()[-1])
    maxrun = None
    try:
        with open(os.path.join(run, "gc-max.json")) as f:
            maxrun = json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return runs, maxrun


def label(key):
    model, _, blade = key.partition("+")
    return NAMES.get(model, model) + (" + Blade" if blade else "")


def changed(a, b):
    """How b compares with a, in words."""
    if b < 0.9 * a:
        return "cut"
    if b > 1.1 * a:
        return "raised"
    return "left about the same"


def paragraph(runs):
    """What the figures show, as sentences computed from them."""
    p = {k: r["probe"] for k, r in runs.items()}
    out = []
    base = p.get("none")
    if base:
        out.append(f"Without a collector the replicas answer at p99.9 {base['p999']:.1f} ms "
                   f"(p99.99 {base['p9999']:.1f} ms).")
    for m in ("go", "g1"):
        plain, blade = p.get(m), p.get(m + "+blade")
        if not plain:
            continue
        s = (f"{NAMES[m]}: its busiest collector took {100 * plain['gc_share']:.1f} % of the CPU in "
             f"{plain['gc_pauses']} pauses (the longest {plain['gc_max_pause_ms']:.2f} ms), and p99.9 "
             f"is {plain['p999']:.1f} ms")
        if base and base["p999"] > 0:
            s += f", {plain['p999'] / base['p999']:.1f}× the no-collector run's"
        s += "."
        if blade:
            s += (f" Blade {changed(plain['p999'], blade['p999'])} p99.9 from {plain['p999']:.1f} to "
                  f"{blade['p999']:.1f} ms and {changed(plain['p9999'], blade['p9999'])} p99.99 from "
                  f"{plain['p9999']:.1f} to {blade['p9999']:.1f} ms")
            if base:
                s += f" ({blade['p999'] - base['p999']:+.1f} ms from the no-collector p99.9)"
            s += "."
        out.append(s)
    lost = [k for k in ORDER if k in p and p[k]["incomplete"]]
    if lost:
        out.append("Operations never completed (counted as lasting to the end of the run): "
                   + ", ".join(f"{label(k)} {p[k]['incomplete']}" for k in lost) + ".")
    return " ".join(out)


def section(run, out, plt):
    """The section's markdown lines; writes the plot into out."""
    runs, maxrun = load(run)
    md = [f"## {TITLE}", ""]
    if not runs:
        return md + ["No GC runs found (gc-*.json): the step failed; see the ./run output.", ""]
    keys = [k for k in ORDER if k in runs] + sorted(k for k in runs if k not in ORDER)
    setup = next(iter(runs.values())).get("timeline", {}).get("setup", {})
    rate = next(iter(runs.values()))["probe"]["rate"]
    load_text = f"{rate:,.0f} ops/s offered"
    if maxrun:
        load_text += (f", a third of the highest rate at which the no-collector replicas keep p99 ≤ "
                      f"{maxrun.get('slo_p99_ms', 20):g} ms at these sizes ({maxrun['max_rate']:,.0f} ops/s, "
                      "`sim study max`, which scripts/gc-study --quick runs each time)")
    md += [
        "The question stutter exists for: what a garbage collector's pauses do to a replicated "
        "service's tail latency, and whether coordinating collections with the protocol in the "
        "manner of Blade (a leader hands off leadership before it collects; a collecting follower "
        "is left out of the quorum) takes them out of it. Three replicas, simulated in virtual time "
        "with the calibrated collector models (docs/gc-study-simulated.md), the sizes of "
        "`scripts/gc-study --quick`: "
        f"{setup.get('dataset', 0) / 2**20:.0f} MiB of data per replica, memory limit "
        f"{setup.get('ratio', '?')}× the data{' (ample memory)' if setup.get('ratio', 0) >= 4 else ''}, "
        f"{setup.get('cores', '?')} cores, "
        f"{setup.get('clients', '?')} open-loop clients, YCSB workload A, "
        f"{setup.get('duration', '?')} s of load with the first {setup.get('warmup', '?')} s not measured.",
        "",
        f"- Load: {load_text}. A load every model carries at this memory, so that what differs is "
        "the tail and not saturation; the load of the study's Blade comparison (docs/gc-study-simulated.md).",
        "- Latency is from each operation's intended start (no coordinated omission).",
        "",
        paragraph(runs),
        "",
    ]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    drawn = latency_plot.plot(ax, [(label(k), runs[k]["probe"].get("percentiles")) for k in keys],
                              f"Simulated latency with GC: {rate:,.0f} ops/s, 3 replicas",
                              "latency from intended start (ms, virtual time)")
    ax.set_yscale("log")
    fig.tight_layout()
    if drawn:
        fig.savefig(os.path.join(out, PLOT), dpi=110)
        md += [f"![GC latency percentiles]({PLOT})", ""]
    plt.close(fig)
    md += ["| run | ops/s done | p50 ms | p99 ms | p99.9 ms | p99.99 ms | max ms | collector CPU | pauses | longest pause ms | never completed |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in keys:
        p = runs[k]["probe"]
        md.append(f"| {label(k)} | {p['throughput']:,.0f} | {p['p50']:.2f} | {p['p99']:.2f} | {p['p999']:.2f} | "
                  f"{p['p9999']:.2f} | {p['max']:.2f} | {100 * p['gc_share']:.1f} % | {p['gc_pauses']} | "
                  f"{p['gc_max_pause_ms']:.2f} | {p['incomplete']} |")
    return md + [""]
