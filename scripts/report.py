#!/usr/bin/env python3
"""Turns the main job's outputs (scripts/run) into results/report.md and
results/report.html, with a latency CDF per GC-pause profile (simulated)
and the benchmark's p99 against offered load (real cluster).

    python3 scripts/report.py RUN_DIR OUT_DIR
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
    rows = []
    for path in sorted(glob.glob(os.path.join(run, "sim-*.json"))):
        s = json.load(open(path))
        qs = [q for q, _ in s["latency_cdf_ms"]]
        ms = [max(m, 1e-3) for _, m in s["latency_cdf_ms"]]
        name = os.path.basename(path)[4:-5]
        ax.plot(ms, qs, marker=".", label=name)
        p = dict((q, m) for q, m in s["latency_cdf_ms"])
        rows.append((name, s["ok"], s["info"], p.get(0.5), p.get(0.99), p.get(0.999), p.get(1.0),
                     s["faults"]["pauses"], s["faults"]["pause_ms_total"], len(s["violations"])))
    ax.set_xscale("log")
    ax.set_xlabel("latency from intended start (ms, virtual time)")
    ax.set_ylabel("fraction of operations")
    ax.set_title("Simulated latency CDF by GC-pause profile (3 replicas, seed 1)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sim-latency-cdf.png"), dpi=110)
    return rows


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
    failover = read(os.path.join(run, "failover.txt")).strip()

    md = ["# stutter: main job report", ""]
    md += ["## Model checking (TLC)", "", f"- model `spec/models/ci_small.cfg`: {tlc['distinct']} distinct states, {tlc['verdict']}", ""]
    md += ["## Simulation (virtual time)", "", "![latency CDF](sim-latency-cdf.png)", "",
           "| scenario | ok | info | p50 ms | p99 ms | p99.9 ms | max ms | pauses | paused ms | violations |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append("| " + " | ".join(str(x if not isinstance(x, float) else f"{x:.2f}") for x in r) + " |")
    md += ["", *[f"- {s}" for s in swarm], ""]
    conformance = read(os.path.join(run, "conformance.txt")).strip().splitlines()
    if conformance:
        md += ["## Conformance (trace validated against the spec by TLC)", "",
               *[f"- {l.strip()}" for l in conformance if l.strip()], ""]
    md += ["## Real cluster (3 replicas on this machine)", ""]
    if bench:
        b0 = bench[0]
        if "protocol" in b0:
            md += [f"Open-loop `bench`, workload {b0.get('workload', '?')}, {b0['protocol']} protocol, "
                   f"{b0['connections']} connections × {b0['window']} requests outstanding, "
                   "5-s runs after a 20-s warm-up (`scripts/run`).", ""]
        md += ["| offered/s | ok/s | p50 ms | p99 ms | p99.9 ms | max ms | wrong |", "|---|---|---|---|---|---|---|"]
        for b in bench:
            md.append(f"| {b['offered']:.0f} | {b['achieved']:.0f} | {b['p50_ms']:.2f} | {b['p99_ms']:.2f} | {b['p999_ms']:.2f} | {b['max_ms']:.1f} | {b['wrong']} |")
        if have_bench_plot:
            md += ["", "![p99 vs offered load](bench-p99.png)"]
    md += ["", f"- {failover}" if failover else ""]
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
    page = "<!doctype html><meta charset=utf-8><title>stutter report</title>"
    page += "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
    joined = "\n".join(body)
    joined = re.sub(r"((?:<tr>.*</tr>\n?)+)", r"<table>\1</table>", joined)
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(page + joined)


if __name__ == "__main__":
    main()
