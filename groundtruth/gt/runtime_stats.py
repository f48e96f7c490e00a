"""A collected runtime's figures over a window of time: bytes and objects
allocated, collector cycles, pauses and CPU, what young collections
copied.

Sources, all cumulative or timestamped so that any window can be cut:
- Go: the runtime/metrics samples of our hook (groundtruth/go), and the
  GODEBUG=gctrace=1 lines on the replica's stderr (one per cycle, parsed
  by impl/gc/calibrate/py/gctrace.py);
- Java: the samples of our agent (groundtruth/java), the G1 log
  (-Xlog:gc*, parsed by impl/gc/calibrate/py/g1log.py), and the OS CPU of
  the JVM's collector threads (/proc, by thread name);
- stutter: the replica's `--calibrate` CSV (one line per protocol-loop
  turn, with the process's cumulative allocated bytes).
"""

import bisect
import csv
import os
import sys

from . import ROOT

sys.path.insert(0, os.path.join(ROOT, "impl", "gc", "calibrate", "py"))
import g1log  # noqa: E402
import gctrace  # noqa: E402

GO_FIELDS = ["alloc_bytes", "alloc_objects", "free_bytes", "gc_cycles", "gc_cpu_s", "gc_idle_cpu_s",
             "total_cpu_s", "live_bytes", "goal_bytes", "total_mem_bytes"]
JAVA_FIELDS = ["alloc_bytes", "gc_count", "gc_time_ms", "heap_used", "heap_committed", "jvm_start_ms"]

# JVM threads whose CPU is the collector's (HotSpot's names, JDK 17, as
# /proc shows them: cut to 15 characters).
JAVA_GC_THREADS = ("GC Thread#", "G1 Main Marker", "G1 Conc#", "G1 Refine#", "G1 Service",
                   "G1 Young RemSet")


def read_samples(path, fields):
    """[(unix s, tag, {field: value})] from a hook's or agent's file; a
    torn last line (the writer mid-line) is skipped."""
    out = []
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        p = line.split()
        if len(p) != 2 + len(fields):
            continue
        try:
            vals = {k: float(v) for k, v in zip(fields, p[2:])}
            out.append((int(p[0]) / 1e9, p[1], vals))
        except ValueError:
            continue
    return out


def at(samples, field, t):
    """A cumulative counter's value at Unix time t, interpolated linearly
    between the samples around it (None outside the samples). Samples
    without the field (a process that had exited) are passed over."""
    samples = [s for s in samples if field in s[2]]
    ts = [s[0] for s in samples]
    i = bisect.bisect_left(ts, t)
    if i == 0:
        return samples[0][2][field] if samples and abs(ts[0] - t) < 0.5 else None
    if i == len(samples):
        return samples[-1][2][field] if t - ts[-1] < 0.5 else None
    (t0, _, a), (t1, _, b) = samples[i - 1], samples[i]
    w = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
    return a[field] + w * (b[field] - a[field])


def delta(samples, field, t0, t1):
    a, b = at(samples, field, t0), at(samples, field, t1)
    return None if a is None or b is None else b - a


def go_window(metrics_path, stderr_path, start_unix, t0, t1):
    """A Go replica's allocation and collector figures over [t0, t1)."""
    s = read_samples(metrics_path, GO_FIELDS)
    out = {k: delta(s, k, t0, t1) for k in ("alloc_bytes", "alloc_objects", "gc_cpu_s", "gc_idle_cpu_s",
                                            "total_cpu_s")}
    try:
        with open(stderr_path, errors="replace") as f:
            cycles = gctrace.parse(f.read())
    except OSError:
        cycles = []
    win = [c for c in cycles if t0 <= start_unix + c["at_s"] < t1]
    stw = [c["stw_sweep_term_ms"] + c["stw_mark_term_ms"] for c in win]
    out.update({
        "cycles": len(win),
        "forced_cycles": sum(c["forced"] for c in win),
        "pauses": 2 * len(win),
        "pause_total_ms": sum(stw),
        "pause_max_ms": max((max(c["stw_sweep_term_ms"], c["stw_mark_term_ms"]) for c in win), default=0.0),
        "mark_wall_ms": sum(c["mark_wall_ms"] for c in win),
        "mark_cpu_ms": sum(gctrace.mark_cpu_ms(c) for c in win),
        "live_mib_last": win[-1]["live_mib"] if win else None,
        "goal_mib_last": win[-1]["goal_mib"] if win else None,
    })
    return out


def java_window(metrics_path, gclog_path, t0, t1):
    """A JVM's allocation and collector figures over [t0, t1)."""
    s = read_samples(metrics_path, JAVA_FIELDS)
    out = {"alloc_bytes": delta(s, "alloc_bytes", t0, t1)}
    if not s:
        return out
    jvm_start = s[0][2]["jvm_start_ms"] / 1000.0
    try:
        with open(gclog_path, errors="replace") as f:
            pauses, conc, region = g1log.parse(f.read())
    except OSError:
        pauses, conc, region = [], [], None
    win = [p for p in pauses if t0 <= jvm_start + p["end_s"] < t1]
    kinds = {}
    for p in win:
        k = kinds.setdefault(p["kind"], {"n": 0, "ms": 0.0})
        k["n"] += 1
        k["ms"] += p["pause_ms"]
    young = [p for p in win if p["kind"].startswith("Young") and "eden_regions" in p and region]
    eden = sum(p["eden_regions"][0] * region for p in young)
    copied = sum(p["copied_bytes"] for p in young)
    out.update({
        "pauses": len(win),
        "pause_total_ms": sum(p["pause_ms"] for p in win),
        "pause_max_ms": max((p["pause_ms"] for p in win), default=0.0),
        "pause_kinds": kinds,
        "full_gcs": sum(p["kind"] == "Full" for p in win),
        "concurrent_cycles": sum(1 for c in conc if t0 <= jvm_start + c["end_s"] < t1),
        "young_eden_bytes": eden,
        "young_copied_bytes": copied,
        "survivor_fraction": copied / eden if eden else None,
        "region_bytes": region,
    })
    return out


def java_gc_thread_cpu(threads):
    """The collector's share of a {thread name: CPU s} map: its CPU seconds."""
    return sum(v for k, v in threads.items() if k.startswith(JAVA_GC_THREADS))


def java_last_full_gc(gclog_path):
    """Heap after the last full collection in the log, bytes (MiB grain)."""
    try:
        with open(gclog_path, errors="replace") as f:
            pauses, _, _ = g1log.parse(f.read())
    except OSError:
        return None
    full = [p for p in pauses if p["kind"] == "Full"]
    return full[-1]["heap_after_mib"] * 2**20 if full else None


def go_last_forced(metrics_path):
    """Live heap after the last collection forced by SIGUSR1, bytes."""
    s = [x for x in read_samples(metrics_path, GO_FIELDS) if x[1] == "forced"]
    return s[-1][2]["live_bytes"] if s else None


def stutter_alloc(csv_path, t0, t1):
    """Bytes and allocations of a stutter replica over [t0, t1), from its
    --calibrate CSV, and its live delta (allocated - freed since start) at
    t1. The counters are the process's (every thread)."""
    first = last = None
    try:
        with open(csv_path, newline="") as f:
            for row in csv.DictReader(f):
                # A replica stopped while writing leaves its last line
                # short (the fields it did not write read as None): such
                # a row is skipped, not taken as the last.
                try:
                    t = int(row["wall_start_ns"]) / 1e9
                    for k in ("alloc_start", "freed_start", "nalloc_start"):
                        int(row[k])
                except (KeyError, TypeError, ValueError):
                    continue
                if t < t0:
                    continue
                if t >= t1:
                    break
                if first is None:
                    first = row
                last = row
    except OSError:
        return {}
    if first is None:
        return {"alloc_bytes": 0.0, "alloc_objects": 0.0}
    return {
        "alloc_bytes": float(int(last["alloc_start"]) - int(first["alloc_start"])),
        "alloc_objects": float(int(last["nalloc_start"]) - int(first["nalloc_start"])),
        "live_delta_bytes": float(int(last["alloc_start"]) - int(last["freed_start"])),
    }
