"""One `bench` run against one system, and the search for the highest
offered load that meets the p99 objective.

The harness drives bench one run at a time (rather than `bench
--find-max`) for two reasons: it measures each replica's CPU, allocation
and collector work over exactly that run, and it alternates the runs of
any number of systems (bench alternates two), so that on a shared
machine every system sees the same background load over time. The
search follows bench's own rules (impl/bench/src/main.rs, `Search`):
doubling from the start rate while the SLO holds, then five bisection
steps (or until the bracket is within 3 %), and a rate misses only after
`attempts` runs in a row miss it; `meets_slo` is bench's criterion.
"""

import json
import os
import subprocess

from . import BIN


def meets_slo(r, slo_ms):
    """bench's criterion: every answer right, none unfinished, at most
    0.1 % errors, 95 % of the offered load achieved, p99 within the SLO."""
    return (r["wrong"] == 0 and r["unfinished"] == 0 and r["io_errors"] <= 0.001 * r["ok"]
            and r["achieved"] >= 0.95 * r["offered"] and r["p99_ms"] <= slo_ms)


class Search:
    """One system's search (see the module's comment)."""

    def __init__(self, start, attempts=2, max_rate=400_000.0, bisections=5):
        self.lo = None   # the best run meeting the SLO
        self.hi = None   # the lowest rate found to miss it
        self.rate = start
        self.bisected = 0
        self.bisections = bisections
        self.attempts = max(1, attempts)
        self.misses = 0
        self.retry = None
        self.max_rate = max_rate
        self.done = False

    def next_rate(self):
        if self.done:
            return None
        if self.retry is not None:
            return self.retry
        if self.hi is None:
            if self.rate <= self.max_rate:
                return self.rate
            self.done = True
            return None
        lo = self.lo["offered"] if self.lo else 0.0
        if self.bisected >= self.bisections or self.hi - lo < 0.03 * self.hi:
            self.done = True
            return None
        return (lo + self.hi) / 2

    def record(self, r, ok):
        offered = r["offered"]
        if ok:
            self.misses, self.retry = 0, None
        else:
            self.misses += 1
            if self.misses < self.attempts:
                self.retry = offered
                return
            self.misses, self.retry = 0, None
        if self.hi is None:
            if ok:
                self.lo = r
                self.rate *= 2
            else:
                self.hi = offered
        else:
            self.bisected += 1
            if ok:
                self.lo = r
            else:
                self.hi = offered


def run(target, rate, duration_s, warmup_s, keys, out_jsonl, workload="a", preload=False,
        seed=1, timeout_s=2.0, cpus=None, limit_s=None):
    """One bench invocation; returns (its result record or None, stdout+stderr).

    `target`: {"kind": "stutter", "config": PATH, "protocol": "text"|"framed",
    "connections": C, "window": W} or {"kind": "replicant", "addrs": [...],
    "connections": C}."""
    argv = [os.path.join(BIN, "bench"), "--rate", str(rate), "--duration", f"{duration_s}s",
            "--warmup", f"{warmup_s}s", "--keys", str(keys), "--workload", workload,
            "--seed", str(seed), "--timeout", f"{timeout_s}s", "--out", out_jsonl]
    if target["kind"] == "stutter":
        argv += ["--config", target["config"], "--protocol", target["protocol"],
                 "--connections", str(target["connections"]), "--window", str(target.get("window", 1))]
    else:
        argv += ["--replicant", ",".join(target["addrs"]), "--connections", str(target["connections"]),
                 "--window", "1"]
    if not preload:
        argv.append("--no-preload")
    if cpus is not None:
        argv = ["taskset", "-c", cpus] + argv
    before = len(_lines(out_jsonl))
    env = dict(os.environ, RUST_BACKTRACE="0", RUST_LIB_BACKTRACE="0")
    if limit_s is None:
        # The schedule, its drain, and a preload of every key at 100/s.
        limit_s = 60 + 3 * (duration_s + warmup_s + 2 * timeout_s) + (keys / 100 if preload else 0)
    t0 = os.times()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=limit_s)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, f"bench did not finish in {limit_s:.0f} s (killed){': ' + out[-2000:] if out else ''}"
    after = _lines(out_jsonl)
    rec = json.loads(after[before]) if len(after) > before else None
    if rec is not None:
        rec["bench_rc"] = p.returncode
        # The load generator's own CPU (user + system) over the whole
        # invocation, warm-up and drain included: the simulator's shared
        # host takes it off the cores (`sim study --load-us-per-op`). Only
        # waited-for children count here, and bench is the one waited for.
        t1 = os.times()
        rec["bench_cpu_s"] = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    return rec, (p.stdout + p.stderr)[-4000:]


def _lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def error_line(text):
    """bench's error, on one line ("Error: X / Caused by: Y" -> "X: Y"),
    or the end of its output."""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("Error: "):
            causes = [x.strip() for x in lines[k + 1:] if x.strip() and x.strip() != "Caused by:"]
            return ": ".join([line[len("Error: "):]] + causes)[:500]
    return " ".join(lines[-3:])[:500]
