"""Latency percentile curves in the manner of HdrHistogram's plots: the
latency at quantile q against 1/(1 − q) on a log axis, so that p50, p90,
p99, p99.9 and p99.99 are evenly spaced and the tail, where pauses show,
is as wide as the body.

The input is a percentile table as the simulator (`sim run
--summary-json`, `sim study run`: sim/src/percentiles.rs) and the bench
(`bench --out`: impl/bench/src/tally.rs) write it:
`{"count": n, "points": [[q, ms], ...]}`, q rising to 1 (the maximum).
"""
import math

TICKS = [(0.5, "50%"), (0.9, "90%"), (0.99, "99%"), (0.999, "99.9%"),
         (0.9999, "99.99%"), (0.99999, "99.999%"), (0.999999, "99.9999%")]


def curve(table):
    """(x, ms) points of a table, x = 1/(1 − q). The maximum (q = 1) is
    drawn at x = count, where the last of n samples sits; rows at or past
    it are dropped (they repeat the maximum)."""
    n = table["count"]
    xs, ys = [], []
    for q, ms in table["points"]:
        x = n if q >= 1.0 else 1.0 / (1.0 - q)
        if x > n or (xs and x <= xs[-1]):
            continue
        xs.append(x)
        ys.append(ms)
    return xs, ys


def at(table, q):
    """The table's value at quantile q (the first row at or past it)."""
    for p, ms in table["points"]:
        if p >= q - 1e-12:
            return ms
    return table["points"][-1][1] if table["points"] else float("nan")


def plot(ax, series, title, ylabel="latency (ms)"):
    """Draws (label, table) series on ax; returns how many were drawn."""
    drawn = 0
    top = 1.0
    for label, table in series:
        if not table or not table.get("points"):
            continue
        xs, ys = curve(table)
        (ln,) = ax.plot(xs, ys, label=label, linewidth=1.4)
        ax.plot(xs[-1:], ys[-1:], marker="o", markersize=3, color=ln.get_color())
        top = max(top, xs[-1])
        drawn += 1
    ax.set_xscale("log")
    ticks = [(1.0 / (1.0 - q), name) for q, name in TICKS if 1.0 / (1.0 - q) <= top * 1.5]
    ax.set_xticks([t for t, _ in ticks])
    ax.set_xticklabels([name for _, name in ticks])
    ax.minorticks_off()
    ax.set_xlim(1.5, max(top * 1.3, 20))
    ax.set_xlabel("percentile (x = 1/(1 − q), log scale; dot = maximum)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    return drawn


def nines(q):
    """0.999 -> 'p99.9'."""
    s = f"{100 * q:.4f}".rstrip("0").rstrip(".")
    return "p" + s


