"""Latency-over-time and availability plots for a campaign results folder,
with nemesis intervals shaded. matplotlib comes from PyPI and is installed
with pip if missing."""
import json
import os
import subprocess
import sys

COLORS = {"partition": "#e06666", "kill": "#8e7cc3", "pause": "#f6b26b", "loss": "#6fa8dc", "delay": "#93c47d"}


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"], check=True, timeout=600)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def load(outdir):
    ops = []
    with open(os.path.join(outdir, "history.ndjson")) as f:
        for line in f:
            if line.strip():
                ops.append(json.loads(line))
    nem = []
    p = os.path.join(outdir, "nemesis.ndjson")
    if os.path.exists(p):
        with open(p) as f:
            nem = [json.loads(l) for l in f if l.strip()]
    return ops, nem


def intervals(nem):
    opened, out, heal = {}, [], None
    for e in nem:
        if e["event"] == "start":
            opened[e["id"]] = e
        elif e["event"] == "stop" and e["id"] in opened:
            s = opened.pop(e["id"])
            out.append((s["kind"], s["time"], e["time"], s["detail"]))
        elif e["event"] == "heal-all":
            heal = e["time"]
    return out, heal


def make(outdir):
    plt = _matplotlib()
    ops, nem = load(outdir)
    if not ops:
        return
    t0 = ops[0]["time"]
    inv = {}
    done = []  # (t_invoke_s, latency_ms, type, f)
    for op in ops:
        if op["type"] == "invoke":
            inv[op["process"]] = op
        else:
            i = inv.pop(op["process"], None)
            if i is not None:
                done.append(((i["time"] - t0) / 1e9, (op["time"] - i["time"]) / 1e6, op["type"], op["f"]))
    ivs, heal = intervals(nem)
    end = max(d[0] for d in done) if done else 1

    def shade(ax):
        seen = set()
        for kind, a, b, _ in ivs:
            lab = kind if kind not in seen else None
            seen.add(kind)
            ax.axvspan((a - t0) / 1e9, (b - t0) / 1e9, color=COLORS.get(kind, "#cccccc"), alpha=0.25, label=lab)
        if heal:
            ax.axvline((heal - t0) / 1e9, color="k", ls="--", lw=0.8, label="final heal")

    def strip(ax):
        """One row per nemesis kind, its intervals as bars."""
        kinds = sorted({k for k, *_ in ivs})
        for row, kind in enumerate(kinds):
            bars = [((a - t0) / 1e9, (b - a) / 1e9) for k, a, b, _ in ivs if k == kind]
            ax.broken_barh(bars, (row - 0.4, 0.8), color=COLORS.get(kind, "#999999"))
        ax.set_yticks(range(len(kinds)))
        ax.set_yticklabels(kinds, fontsize=8)
        ax.set_ylim(-0.6, max(len(kinds), 1) - 0.4)
        if heal:
            ax.axvline((heal - t0) / 1e9, color="k", ls="--", lw=0.8)
        ax.set_xlabel("time since start (s)")

    fig, (ax, sx) = plt.subplots(2, 1, figsize=(12, 6), sharex=True, gridspec_kw={"height_ratios": [5, 1]})
    shade(ax)
    marks = {"ok": ("o", "#2b7a0b"), "fail": ("x", "#cc0000"), "info": ("^", "#e69138")}
    for typ, (m, col) in marks.items():
        pts = [d for d in done if d[2] == typ]
        if pts:
            ax.scatter([p[0] for p in pts], [max(p[1], 0.01) for p in pts], s=6, marker=m, c=col, label=f":{typ} ({len(pts)})")
    ax.set_yscale("log")
    strip(sx)
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Latency — {os.path.basename(outdir)}")
    ax.set_xlim(0, end + 1)
    ax.legend(loc="upper right", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "latency.png"), dpi=110)
    plt.close(fig)

    fig, (ax, sx) = plt.subplots(2, 1, figsize=(12, 5), sharex=True, gridspec_kw={"height_ratios": [4, 1]})
    shade(ax)
    width = 0.5
    nb = int(end / width) + 2
    cnt = {t: [0] * nb for t in ("ok", "fail", "info")}
    for t, _, typ, _ in done:
        cnt[typ][int(t / width)] += 1
    xs = [i * width for i in range(nb)]
    ax.plot(xs, [c / width for c in cnt["ok"]], color="#2b7a0b", label=":ok per second")
    ax.plot(xs, [c / width for c in cnt["fail"]], color="#cc0000", lw=0.8, label=":fail per second")
    ax.plot(xs, [c / width for c in cnt["info"]], color="#e69138", lw=0.8, label=":info per second")
    tot = [cnt["ok"][i] + cnt["fail"][i] + cnt["info"][i] for i in range(nb)]
    ax2 = ax.twinx()
    ax2.plot(xs, [cnt["ok"][i] / tot[i] if tot[i] else 0 for i in range(nb)], color="#555555", lw=0.6, ls=":",
             label="availability (ok fraction)")
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("ok fraction")
    strip(sx)
    ax.set_ylabel("completions per second")
    ax.set_title("Availability")
    ax.set_xlim(0, end + 1)
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "availability.png"), dpi=110)
    plt.close(fig)

    res = os.path.join(outdir, "resources.ndjson")
    if os.path.exists(res):
        rows = [json.loads(line) for line in open(res) if line.strip()]
        if rows:
            fig, (ax, fx, sx) = plt.subplots(3, 1, figsize=(12, 7), sharex=True,
                                             gridspec_kw={"height_ratios": [3, 2, 1]})
            for h in sorted({r["node"] for r in rows}):
                mine = [r for r in rows if r["node"] == h]
                xs = [(r["time"] - t0) / 1e9 for r in mine]
                ax.plot(xs, [r["rss_kb"] / 1024 for r in mine], lw=0.9, label=h)
                fx.plot(xs, [r["fds"] for r in mine], lw=0.9, label=h)
            shade(ax)
            ax.set_ylabel("resident memory (MiB)")
            ax.set_ylim(bottom=0)
            ax.set_title("Replica resources over the campaign (kill -9 restarts reset a replica's RSS)")
            ax.legend(loc="upper left", fontsize=8, ncol=4)
            fx.set_ylabel("open files")
            fx.set_ylim(bottom=0)
            strip(sx)
            fig.tight_layout()
            fig.savefig(os.path.join(outdir, "resources.png"), dpi=110)
            plt.close(fig)


if __name__ == "__main__":
    make(sys.argv[1])
