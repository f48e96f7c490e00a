"""Readable output of the JSON lines: the grid table (throughput at the
p99 objective per implementation and memory ratio, the loss against the
best implementation without a collector, the collector's figures at that
load), the performance table, and plots."""

import json


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _f(x, fmt="{:.0f}", none="–"):
    return none if x is None else fmt.format(x)


def grid_table(cells):
    """Markdown table of the grid's cells (one line per implementation and ratio)."""
    cells = [c for c in cells if c.get("kind") == "cell"]
    ratios = sorted({c["ratio"] for c in cells}, reverse=True)
    base = {}
    for r in ratios:
        unc = [c["max_ops"] for c in cells if c["ratio"] == r and c["runtime"] == "none" and not c["error"]]
        base[r] = max(unc) if unc else None
    head = ("| implementation | memory/data | memory limit | max ops/s at p99 ≤ SLO | p99 ms | vs best uncollected "
            "| leader collector CPU (share of its cores) | leader cycles / pauses in that run | max pause ms "
            "| leader / follower bytes per op | leader CPU µs/op | OOM kills | note |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in sorted(cells, key=lambda c: (-c["ratio"], c["label"])):
        lead = (c.get("roles_at_max") or {}).get("leader") or {}
        foll = (c.get("roles_at_max") or {}).get("follower") or {}
        b = base.get(c["ratio"])
        loss = None if not b or c["runtime"] == "none" else (c["max_ops"] / b - 1) * 100
        note = c["error"][:160].replace("|", "/") if c.get("error") else ("" if c["meets_slo_somewhere"] else "misses the SLO at every load tried")
        lines.append("| " + " | ".join([
            c["label"], f"{c['ratio']:g}×", f"{c['memory_bytes'] / 2**20:.0f} MiB",
            _f(c["max_ops"]) if c["meets_slo_somewhere"] else "none",
            _f(c.get("p99_ms_at_max"), "{:.1f}"),
            _f(loss, "{:+.0f} %"),
            _f(lead.get("gc_cpu_share"), "{:.0%}"),
            f"{_f(lead.get('cycles'))} / {_f(lead.get('pauses'))}" if c["runtime"] != "none" else "–",
            _f(lead.get("pause_max_ms"), "{:.1f}"),
            f"{_f(lead.get('alloc_bytes_per_op'))} / {_f(foll.get('alloc_bytes_per_op'))}",
            _f(lead.get("cpu_us_per_op"), "{:.0f}"),
            str(c.get("oom_kills", 0)), note,
        ]) + " |")
    return "\n".join(lines)


def perf_table(cells):
    """The performance table: each system's highest load at the SLO and
    its ratio to stutter (framed)."""
    cells = [c for c in cells if c.get("kind") == "cell"]
    ref = next((c["max_ops"] for c in cells if c["label"] == "stutter-framed" and c["max_ops"]), None)
    lines = ["| system | protocol, client set-up | max ops/s at p99 ≤ SLO | p99 ms | stutter framed / this |",
             "|---|---|---|---|---|"]
    for c in cells:
        setup = f"{c['protocol']}, " + (f"{c.get('connections', '?')} × {c['window']}")
        ratio = ref / c["max_ops"] if ref and c["max_ops"] else None
        lines.append(f"| {c['label']} | {setup} | {_f(c['max_ops']) if c['meets_slo_somewhere'] else 'none'} "
                     f"| {_f(c.get('p99_ms_at_max'), '{:.1f}')} | {_f(ratio, '{:.2f}')} |"
                     + (f" {c['error'][:80]}" if c.get("error") else ""))
    return "\n".join(lines)


def plots(cells, prefix):
    """Throughput and the leader's collector CPU share against the memory
    ratio, one line per implementation; returns the files written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    cells = [c for c in cells if c.get("kind") == "cell"]
    labels = sorted({c["label"] for c in cells})
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for lab in labels:
        cs = sorted((c for c in cells if c["label"] == lab), key=lambda c: -c["ratio"])
        xs = [c["ratio"] for c in cs]
        a.plot(xs, [c["max_ops"] for c in cs], marker="o", label=lab)
        share = [((c.get("roles_at_max") or {}).get("leader") or {}).get("gc_cpu_share") for c in cs]
        if any(s is not None for s in share):
            b.plot(xs, [s * 100 if s is not None else float("nan") for s in share], marker="o", label=lab)
    for ax in (a, b):
        ax.set_xscale("log")
        ax.set_xticks(sorted({c["ratio"] for c in cells}))
        ax.set_xticklabels([f"{r:g}×" for r in sorted({c["ratio"] for c in cells})])
        # A log axis labels its minor ticks too ("6×10⁰"): only the ratios.
        ax.set_xticks([], minor=True)
        ax.invert_xaxis()
        ax.set_xlabel("memory / data")
        ax.grid(alpha=0.3)
    a.set_ylabel("max ops/s at p99 ≤ 20 ms")
    a.set_ylim(bottom=0)
    b.set_ylabel("leader: collector CPU, % of its cores")
    b.set_ylim(bottom=0)
    for ax in (a, b):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    out = [prefix + ".png"]
    fig.savefig(out[0], dpi=110)
    plt.close(fig)
    return out
