#!/usr/bin/env python3
"""Turns the main job's outputs (scripts/run) into results/report.md and
results/report.html. It opens with the quick GC comparison (simulated:
no collector, Go-like and G1-like, each plain and with Blade, at one
load), then the pause-profile runs, TLC, the swarm, conformance and the
real cluster. Latency is drawn as percentile curves with a log tail axis
(scripts/latency_plot.py) from the full percentile tables the simulator
and the bench write.

    python3 scripts/report.py RUN_DIR OUT_DIR

Sections and plots are listed in SECTIONS and PLOTS (the test,
scripts/test_report.py, checks that each is there).
"""
import glob
import html
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gc_section  # noqa: E402
import latency_plot  # noqa: E402

SECTIONS = [gc_section.TITLE, "Simulation: GC-pause profiles (virtual time)", "Model checking (TLC)",
            "Swarm", "Conformance (trace validated against the spec by TLC)",
            "Real cluster (3 replicas on this machine)", "Failover"]
PLOTS = [gc_section.PLOT, "sim-latency-percentiles.png", "bench-latency-percentiles.png", "bench-p99.png"]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def tlc_summary(text):
    states = re.findall(r"(\d[\d,]*) distinct states found", text)
    ok = "No error has been found" in text
    viol = re.findall(r"Invariant (\w+) is violated", text)
    return {
        "distinct": states[-1] if states else "?",
        "verdict": "no error found" if ok else ("violated: " + ", ".join(viol) if viol else "see tlc.log"),
    }


def sim_plot(run, out):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    rows, series = [], []
    for path in sorted(glob.glob(os.path.join(run, "sim-*.json"))):
        s = json.load(open(path))
        name = os.path.basename(path)[4:-5]
        t = s["latency_percentiles_ms"]
        series.append((name, t))
        # The table's figures are the simulator's own percentiles (its
        # CDF), not the nearest row of the percentile table.
        p = dict((q, m) for q, m in s["latency_cdf_ms"])
        rows.append((name, s["ok"], s["info"], p.get(0.5), p.get(0.99), p.get(0.999), p.get(1.0),
                     s["faults"]["pauses"], s["faults"]["pause_ms_total"], len(s["violations"])))
    latency_plot.plot(ax, series, "Simulated latency by GC-pause profile (3 replicas, seed 1)",
                      "latency from intended start (ms, virtual time)")
    ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sim-latency-percentiles.png"), dpi=110)
    plt.close(fig)
    return rows


def bench_percentile_plot(bench, out):
    series = [(f"{b['offered']:.0f}/s offered", b.get("percentiles")) for b in bench]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    drawn = latency_plot.plot(ax, series, "Real cluster: latency by offered load (bench, 5-s runs)",
                              "latency from intended start (ms)")
    ax.set_yscale("log")
    fig.tight_layout()
    if drawn:
        fig.savefig(os.path.join(out, "bench-latency-percentiles.png"), dpi=110)
    plt.close(fig)
    return drawn > 0


def main():
    run, out = sys.argv[1], sys.argv[2]
    tlc = tlc_summary(read(os.path.join(run, "tlc.log")))
    rows = sim_plot(run, out)
    swarm = [l for l in read(os.path.join(run, "swarm.txt")).splitlines() if l.startswith("swarm")]
    bench = [json.loads(l) for l in read(os.path.join(run, "bench.jsonl")).splitlines() if l.strip()]
    have_bench_plot = False
    if bench:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "impl", "bench"))
        import plot  # noqa: E402
        runs = plot.load(os.path.join(run, "bench.jsonl"))
        sys.argv = ["plot", os.path.join(run, "bench.jsonl"), os.path.join(out, "bench")]
        plot.main()
        have_bench_plot = bool(runs)
    have_percentiles = bench_percentile_plot(bench, out)
    failover = read(os.path.join(run, "failover.txt")).strip()

    md = ["# stutter: main job report", ""]
    md += gc_section.section(run, out, plt)
    md += [f"## {SECTIONS[1]}", "",
           "One seed per timer-based pause profile (the simulator's scenarios, docs/simulator.md): "
           "pauses drawn from a distribution, not from a collector model.", ""]
    if rows:
        md += ["![simulated latency percentiles](sim-latency-percentiles.png)", ""]
    md += ["| scenario | ok | info | p50 ms | p99 ms | p99.9 ms | max ms | pauses | paused ms | violations |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append("| " + " | ".join(str(x if not isinstance(x, float) else f"{x:.2f}") for x in r) + " |")
    md += ["", f"## {SECTIONS[2]}", "",
           f"- model `spec/models/ci_small.cfg`: {tlc['distinct']} distinct states, {tlc['verdict']}", ""]
    md += [f"## {SECTIONS[3]}", "", *([f"- {s}" for s in swarm] or ["- no swarm output (swarm.txt)"]), ""]
    conformance = [l.strip() for l in read(os.path.join(run, "conformance.txt")).splitlines() if l.strip()]
    md += [f"## {SECTIONS[4]}", "", *([f"- {l}" for l in conformance] or ["- no output (conformance.txt)"]), ""]
    md += [f"## {SECTIONS[5]}", ""]
    if bench:
        b0 = bench[0]
        if "protocol" in b0:
            md += [f"Open-loop `bench`, workload {b0.get('workload', '?')}, {b0['protocol']} protocol, "
                   f"{b0['connections']} connections × {b0['window']} requests outstanding, "
                   "5-s runs after a 20-s warm-up (`scripts/run`).", ""]
        if have_percentiles:
            md += ["![bench latency percentiles](bench-latency-percentiles.png)", ""]
        md += ["| offered/s | ok/s | p50 ms | p99 ms | p99.9 ms | max ms | wrong |", "|---|---|---|---|---|---|---|"]
        for b in bench:
            md.append(f"| {b['offered']:.0f} | {b['achieved']:.0f} | {b['p50_ms']:.2f} | {b['p99_ms']:.2f} | {b['p999_ms']:.2f} | {b['max_ms']:.1f} | {b['wrong']} |")
        if have_bench_plot:
            md += ["", "![p99 vs offered load](bench-p99.png)"]
    else:
        md += ["- no bench runs (bench.jsonl)"]
    md += ["", f"## {SECTIONS[6]}", "", f"- {failover}" if failover else "- no failover measured (failover.txt)"]
    text = "\n".join(md) + "\n"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)

    body = []
    for line in text.splitlines():
        m = re.match(r"!\[(.*)\]\((.*)\)", line)
        if m:
            body.append(f'<img alt="{html.escape(m.group(1))}" src="{html.escape(m.group(2))}">')
        elif line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("|"):
            if set(line) <= set("|-"):
                continue
            cells = [c.strip() for c in line.strip("|").split("|")]
            body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
        elif line.startswith("- "):
            body.append(f"<p>{html.escape(line[2:])}</p>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    page = "<!doctype html><meta charset=utf-8><title>stutter report</title>"
    page += "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
    joined = "\n".join(body)
    joined = re.sub(r"((?:<tr>.*</tr>\n?)+)", r"<table>\1</table>", joined)
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(page + joined)


if __name__ == "__main__":
    main()
