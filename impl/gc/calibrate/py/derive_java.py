"""Constants and ground-truth curves for the g1-like model, from JVM runs.

Pause lengths are wall time from the G1 log: on this shared machine they
include time the GC threads waited for a CPU. Pause CPU is taken per run
window, from the threads' schedstat (ns grain): the parallel GC workers and
the VM thread, whose CPU is fitted across runs against the window's pause
count, copied bytes and full-collection work. Copied bytes come from the
PLAB statistics of the log.
"""

import numpy as np
from stats import linfit, linfit2, mean_range, spread

MIB = 2**20


def ok(runs, tag):
    return [r for r in runs if "error" not in r and tag in r["spec"].get("tags", [])]


def pauses_of(r):
    """The run's window pauses as dicts."""
    p = r.get("pauses", {})
    n = len(p.get("kind", []))
    return [{k: p[k][i] for k in p} for i in range(n)]


def run_figures(r):
    o, s = r["out"], r["spec"]
    wall = o["window"]["wall_s"]
    cpu = o["thread_cpu_s"]
    kinds = ("gc_pause_workers", "gc_conc_mark", "gc_refine", "gc_service", "vm_thread")
    gc_cpu = sum(cpu[k] for k in kinds)
    total_cpu = sum(v for k, v in cpu.items() if not k.endswith("_wait"))
    total_wait = sum(v for k, v in cpu.items() if k.endswith("_wait"))
    ps = pauses_of(r)
    count = lambda pred: sum(1 for p in ps if pred(p["kind"]))
    pause_ms = [p["pause_ms"] for p in ps]
    conc = r.get("conc", {})
    probe = o.get("probe", {})
    return {
        "pgt": s["pgt"], "ratio": s["ratio"], "alloc_target": s["alloc"], "live_mib": o["heap"]["live_bytes"] / MIB,
        "heap_mib": r.get("heap_mib"),
        "alloc_mib_s": o["load"]["alloc_mib_s"],
        "rate_achieved_over_target": o["load"]["achieved_rate"] / o["load"]["target_rate"],
        "pause_share_of_wall": sum(pause_ms) / 1e3 / wall,
        "gc_cpu_share": gc_cpu / total_cpu if total_cpu else None,
        "gc_cores": gc_cpu / wall,
        "conc_mark_cores": cpu["gc_conc_mark"] / wall,
        "refine_cores": cpu["gc_refine"] / wall,
        "process_cores": total_cpu / wall,
        "run_queue_wait_share": total_wait / (total_wait + total_cpu) if total_cpu else None,
        "young_per_s": count(lambda k: k in ("Young Normal", "Young Concurrent Start", "Young Prepare Mixed")) / wall,
        "mixed_per_s": count(lambda k: k == "Young Mixed") / wall,
        "full_per_s": count(lambda k: k == "Full") / wall,
        "remark_per_s": count(lambda k: k == "Remark") / wall,
        "conc_cycles_per_s": len(conc.get("end_s", [])) / wall,
        "evac_failures": sum(p.get("evac_failure", 0) for p in ps),
        "pause_p99_ms": spread(pause_ms).get("p99"),
        "pause_max_ms": max(pause_ms) if pause_ms else None,
        "probe_p50_ms": probe.get("p50_s", 0) * 1e3 if probe else None,
        "probe_p99_ms": probe.get("p99_s", 0) * 1e3 if probe else None,
        "probe_max_ms": probe.get("max_s", 0) * 1e3 if probe else None,
        "others_busy_cores": o["machine"]["others_busy_cores"],
    }


def constants(runs):
    c = {}
    steady = [r for r in runs if "error" not in r and r["spec"]["mode"] == "steady"]

    # Full collections with the mutator stopped.
    full = {}
    for r in ok(runs, "full"):
        s, o = r["spec"], r["out"]
        live = o["heap"]["live_bytes"] / MIB
        d = full.setdefault(f"pgt={s['pgt']} live={s['live']}MiB", {"pgt": s["pgt"], "live_mib": live, "ms_per_mib": [], "pause_ms": [], "cpu_ms_per_mib": []})
        d["pause_ms"] += r["full"]["pause_ms"]
        d["ms_per_mib"] += [x / live for x in r["full"]["pause_ms"]]
        d["cpu_ms_per_mib"] += [x * 1e3 / live for x in o["forced"]["gc_thread_cpu_s"]]
    c["full"] = {k: {"pgt": v["pgt"], "live_mib": v["live_mib"], "pause_ms": spread(v["pause_ms"]),
                     "pause_ms_per_mib_live": spread(v["ms_per_mib"]), "cpu_ms_per_mib_live": spread(v["cpu_ms_per_mib"])}
                 for k, v in sorted(full.items())}
    fits = {}
    for pgt in (1, 2):
        xs, ys = [], []
        for v in full.values():
            if v["pgt"] == pgt:
                xs += [v["live_mib"]] * len(v["pause_ms"])
                ys += v["pause_ms"]
        f = linfit(xs, ys)
        if f:
            fits[f"pgt={pgt}"] = {"fixed_ms": f["a"], "ms_per_mib_live": f["b"], "r2": f["r2"], "n": f["n"]}
    c["full_fit"] = fits

    # Evacuation pauses: wall and CPU against copied MiB, by kind and pgt.
    evac = {}
    for r in steady:
        for p in pauses_of(r):
            if p["kind"] in ("Remark", "Cleanup", "Full") or p.get("evac_failure"):
                continue
            kind = "mixed" if p["kind"] == "Young Mixed" else "young"
            d = evac.setdefault(f"{kind} pgt={r['spec']['pgt']}", {"mib": [], "ms": [], "old_mib": [], "promoted_share": [], "old_cset": []})
            d["mib"].append(p["copied_bytes"] / MIB)
            d["ms"].append(p["pause_ms"])
            d["old_mib"].append(p["old_before"] * (r["out"].get("region_bytes") or MIB) / MIB)
            if p["copied_bytes"] > 0 and kind == "young":
                d["promoted_share"].append(p["promoted_or_old_bytes"] / p["copied_bytes"])
            if kind == "mixed":
                d["old_cset"].append(p["old_cset_regions"])
    out = {}
    for k, d in sorted(evac.items()):
        wall = linfit(d["mib"], d["ms"])
        wall2 = linfit2(d["mib"], d["old_mib"], d["ms"])
        out[k] = {
            "wall_fit": wall and {"base_ms": wall["a"], "ms_per_mib_copied": wall["b"], "r2": wall["r2"], "n": wall["n"]},
            "wall_fit_with_old": wall2 and {"base_ms": wall2["a"], "ms_per_mib_copied": wall2["b"], "ms_per_mib_old": wall2["c"], "r2": wall2["r2"], "n": wall2["n"]},
            "pause_ms": spread(d["ms"]), "copied_mib": spread(d["mib"]),
            "promoted_share_of_copied": spread(d["promoted_share"]) if d["promoted_share"] else None,
            "old_cset_regions": spread(d["old_cset"]) if d["old_cset"] else None,
        }
    c["evacuation"] = out

    # CPU of the stop-the-world threads, per run window, fitted across runs:
    # cpu = a·(pauses) + b·(MiB copied) + c·(MiB live in full collections).
    cpu = {}
    for r in steady:
        ps = pauses_of(r)
        t = r["out"]["thread_cpu_s"]
        row = [sum(1 for p in ps if p["kind"] != "Full"),
               sum(p["copied_bytes"] for p in ps if p["kind"] != "Full") / MIB,
               sum(p["heap_after_mib"] for p in ps if p["kind"] == "Full"),
               (t["gc_pause_workers"] + t["vm_thread"]) * 1e3]
        cpu.setdefault(f"pgt={r['spec']['pgt']}", []).append(row)
    fits = {}
    for k, rows in sorted(cpu.items()):
        A = np.array([x[:3] for x in rows], float)
        y = np.array([x[3] for x in rows], float)
        if len(rows) < 4:
            continue
        cols = [i for i in range(3) if A[:, i].any()]
        coef, *_ = np.linalg.lstsq(A[:, cols], y, rcond=None)
        pred = A[:, cols] @ coef
        ss = float(((y - y.mean()) ** 2).sum())
        full = dict(zip(cols, coef))
        fits[k] = {"ms_per_pause": float(full.get(0, 0)), "ms_per_mib_copied": float(full.get(1, 0)),
                   "ms_per_mib_full": float(full.get(2, 0)) if 2 in full else None,
                   "r2": 1 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else None, "runs": len(rows)}
    c["pause_cpu_fit"] = fits

    # Concurrent refinement (old-to-young card processing) per MiB allocated.
    c["refine_cpu_us_per_mib_allocated"] = spread([
        r["out"]["thread_cpu_s"]["gc_refine"] * 1e6 / (r["out"]["load"]["alloc_bytes"] / MIB)
        for r in steady if r["out"]["load"]["alloc_bytes"] > 0])
    c["live_over_raw_data"] = mean_range([r["out"]["heap"]["live_bytes"] / r["out"]["heap"]["raw_data_bytes"] for r in steady])

    # Remark and cleanup pauses.
    rc = {}
    for r in steady:
        for p in pauses_of(r):
            if p["kind"] in ("Remark", "Cleanup"):
                rc.setdefault(f"{p['kind'].lower()} pgt={r['spec']['pgt']}", []).append(p["pause_ms"])
    c["remark_cleanup_ms"] = {k: spread(v) for k, v in sorted(rc.items())}

    # Concurrent marking: CPU of the marking threads per completed cycle,
    # per MiB of live heap; wall length of marking from roots.
    cm = {}
    for r in steady:
        o, conc = r["out"], r.get("conc", {})
        done = sum(1 for u in conc.get("undo", []) if not u)
        live = o["heap"]["live_bytes"] / MIB
        d = cm.setdefault(f"live={r['spec']['live']}MiB", {"cpu_us_per_mib": [], "mark_from_roots_ms_per_mib": [], "cycle_ms": []})
        if done:
            d["cpu_us_per_mib"].append(o["thread_cpu_s"]["gc_conc_mark"] / done / live * 1e6)
        d["mark_from_roots_ms_per_mib"] += [x / live for x in conc.get("Concurrent Mark From Roots", []) if x]
        d["cycle_ms"] += conc.get("Concurrent Mark Cycle", [])
    c["concurrent_mark"] = {k: {m: spread(v) for m, v in d.items()} for k, d in sorted(cm.items())}

    # When marking starts (heap occupancy over capacity at a Concurrent
    # Start pause), how much survives a young collection into the old
    # generation per allocated byte, and how big G1 makes the young gen.
    ihop, promo, eden = [], [], {}
    for r in steady:
        o = r["out"]
        ps = pauses_of(r)
        ihop += [p["heap_before_mib"] / p["heap_capacity_mib"] for p in ps if p["kind"] == "Young Concurrent Start"]
        young = [p for p in ps if p["kind"] in ("Young Normal", "Young Concurrent Start", "Young Prepare Mixed")]
        if o["load"]["alloc_bytes"] > 0 and young:
            promo.append(sum(p["promoted_or_old_bytes"] for p in young) / o["load"]["alloc_bytes"])
        region = o.get("region_bytes") or MIB
        eden.setdefault(f"ratio={r['spec']['ratio']}", []).extend(
            p["eden_before"] * region / MIB / p["heap_capacity_mib"] for p in ps if p["kind"] == "Young Normal")
    c["ihop_occupancy_at_concurrent_start"] = spread(ihop)
    c["promoted_bytes_per_allocated_byte"] = spread(promo)
    c["eden_share_of_heap"] = {k: spread(v) for k, v in sorted(eden.items())}

    base = [r for r in steady if r["spec"]["ratio"] >= 8]
    if base:
        c["mutator"] = {
            "cpu_us_per_request": mean_range([r["out"]["thread_cpu_s"]["mutator"] * 1e6 / r["out"]["load"]["requests"] for r in base]),
            "bytes_per_request": mean_range([r["out"]["load"]["alloc_bytes"] / r["out"]["load"]["requests"] for r in base]),
        }
    return c


def curves(runs):
    out = {}
    for tag in ("sweep", "sweep-256", "alloc-sweep", "idle-latency"):
        groups = {}
        for r in ok(runs, tag):
            s = r["spec"]
            groups.setdefault((s["pgt"], s["ratio"], s["alloc"], s["live"]), []).append(run_figures(r))
        rows = []
        for key in sorted(groups):
            fs = groups[key]
            row = {"pgt": key[0], "ratio": key[1], "alloc_target_mib_s": key[2], "live_target_mib": key[3], "repeats": len(fs)}
            for m in fs[0]:
                if m in ("pgt", "ratio", "alloc_target"):
                    continue
                vals = [f[m] for f in fs if isinstance(f[m], (int, float)) and f[m] is not None]
                row[m] = mean_range(vals)
            rows.append(row)
        out[tag] = rows
    return out
