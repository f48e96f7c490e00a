"""Constants and ground-truth curves for the go-like model, from Go runs.

Two kinds of CPU figure appear and must not be confused:

- OS CPU time (getrusage): what the process really ran. Insensitive to
  other work on the machine, except through caches.
- the runtime's /cpu/classes and gctrace "ms cpu": P-time, i.e. wall time a
  P spent in a state. When the OS deschedules the thread behind a P (other
  work on this shared machine), P-time keeps counting. The runs record both
  so that shares (GC P-time / busy P-time) can be turned into OS CPU
  (share × OS CPU of the process).
"""

from stats import linfit, mean_range, spread

MIB = 2**20


def ok(runs, tag):
    return [r for r in runs if "error" not in r and tag in r["spec"].get("tags", [])]


def baselines(runs):
    """User CPU per request with no collection, by (live target, GOMAXPROCS,
    allocation target), averaged over repeats.

    User time only: without collection the heap keeps growing into fresh
    pages, and the kernel's page faults and zeroing (system time, about
    1 µs per request here) would hide the collector's cost; with collection
    the runtime reuses memory and zeroes it in user time instead, a small
    bias the other way (memclr of the allocated bytes)."""
    acc = {}
    for r in ok(runs, "baseline"):
        o = r["out"]
        acc.setdefault((r["spec"]["live"], r["spec"]["procs"], r["spec"]["alloc"]), []).append(
            o["rusage"]["user_s"] / o["load"]["requests"])
    return {k: sum(v) / len(v) for k, v in acc.items()}


def run_figures(r, base=None):
    """One steady run's summary: what the curves plot.

    With `base` (from baselines()), GC's OS CPU is also estimated by
    difference: the run's user CPU minus its requests × the no-GC user CPU per
    request at the same live size, GOMAXPROCS and allocation rate. That counts everything
    the collector adds (marking, sweeping, assists, write barriers, cache
    misses) in OS CPU time, which other work on the machine does not
    inflate the way it inflates P-time.

    The runtime's /cpu/classes figures are snapshots taken at the end of
    each cycle's stop-the-world phases, so their difference across the
    window covers a whole number of cycles (from the last cycle before the
    window to the last one in it), an interval whose length is
    Δ/cpu/classes/total ÷ GOMAXPROCS. Shares are taken within that
    interval; with no cycle in the window they are unknown (None).
    """
    o, s = r["out"], r["spec"]
    cpu, ru = o["cpu_metrics"], o["rusage"]
    wall = o["window"]["wall_s"]
    g = lambda k: cpu[f"/cpu/classes/{k}:cpu-seconds"]
    interval = g("total") / s["procs"]
    busy = g("total") - g("idle")
    known = interval > 0 and busy > 0
    gc_total = g("gc/total")
    os_cpu = ru["user_s"] + ru["sys_s"]
    cyc = r.get("cycles", {})
    n = len(cyc.get("at_s", []))
    active = sum(cyc["stw_sweep_term_ms"][i] + cyc["mark_wall_ms"][i] + cyc["stw_mark_term_ms"][i] for i in range(n)) / 1e3
    pauses = cyc.get("stw_sweep_term_ms", []) + cyc.get("stw_mark_term_ms", [])
    limit = o["heap"]["limit_bytes"]
    probe = o.get("probe", {})
    share = gc_total / busy if known else None
    per_req = (base or {}).get((s["live"], s["procs"], s["alloc"]))
    diff = (ru["user_s"] - o["load"]["requests"] * per_req) / wall if per_req else None
    return {
        "gc_cores_differential": diff,
        "gc_share_differential": diff / (os_cpu / wall) if diff is not None and os_cpu > 0 else None,
        "procs": s["procs"], "gogc": s["gogc"], "ratio": s["ratio"], "alloc_target": s["alloc"], "live_mib": o["heap"]["live_bytes"] / MIB,
        "alloc_mib_s": o["load"]["alloc_mib_s"],
        "rate_achieved_over_target": o["load"]["achieved_rate"] / o["load"]["target_rate"],
        "gc_share_of_busy": share,
        "gc_share_of_busy_without_idle_mark": (gc_total - g("gc/mark/idle")) / busy if known else None,
        "assist_share_of_busy": g("gc/mark/assist") / busy if known else None,
        "gc_cores_os": share * os_cpu / wall if known else None,
        "process_cores_os": os_cpu / wall,
        "sys_us_per_request": ru["sys_s"] * 1e6 / o["load"]["requests"] if o["load"]["requests"] else None,
        "p_time_over_os_cpu": (busy / interval) / (os_cpu / wall) if known and os_cpu > 0 else None,
        "run_queue_wait_share": ru["sched_wait_s"] / (ru["sched_wait_s"] + ru["sched_run_s"]) if ru["sched_run_s"] > 0 else None,
        "cycles_per_s": o["gc"]["cycles"] / wall,
        "gc_active_share_of_wall": min(1.0, active / wall),
        "limiter_engaged": o["gc"]["limiter_last_enabled"] > o["gc"]["cycles_end"] - o["gc"]["cycles"] and o["gc"]["limiter_last_enabled"] > 0,
        "goal_over_limit": o["heap"]["goal_end_bytes"] / limit if limit > 0 else None,
        "footprint_over_live": o["heap"]["footprint_end_bytes"] / o["heap"]["live_bytes"],
        "stw_max_ms": max(pauses) if pauses else None,
        "probe_p50_ms": probe.get("p50_s", 0) * 1e3 if probe else None,
        "probe_p99_ms": probe.get("p99_s", 0) * 1e3 if probe else None,
        "probe_max_ms": probe.get("max_s", 0) * 1e3 if probe else None,
        "others_busy_cores": o["machine"]["others_busy_cores"],
    }


def constants(runs):
    c = {}

    # Mark (+ sweep) cost of a whole cycle, OS CPU, mutator stopped.
    table = {}
    for r in ok(runs, "mark") + ok(runs, "mark-classic") + ok(runs, "mark-gib"):
        s, o = r["spec"], r["out"]
        live = o["heap"]["live_bytes"] / MIB
        key = f"procs={s['procs']} live={s['live']}MiB" + (f" {s['gc']}" if s.get("gc") else "")
        t = table.setdefault(key, {"procs": s["procs"], "gc": s.get("gc", ""), "live_mib": live, "us_per_mib": [], "ms": [], "wall_ms": [], "idle_share": []})
        t["us_per_mib"] += [x * 1e6 / live for x in o["forced"]["cpu_s"]]
        t["ms"] += [x * 1e3 for x in o["forced"]["cpu_s"]]
        t["wall_ms"] += [x * 1e3 for x in o["forced"]["wall_s"]]
        cy = r["cycles"]
        for i in range(len(cy.get("mark_wall_ms", []))):
            tot = cy["cpu_assist_ms"][i] + cy["cpu_background_ms"][i] + cy["cpu_idle_ms"][i]
            if tot > 0:
                t["idle_share"].append(cy["cpu_idle_ms"][i] / tot)
    c["forced_cycle"] = {k: {"procs": v["procs"], "live_mib": v["live_mib"], "os_cpu_us_per_mib": spread(v["us_per_mib"]),
                             "os_cpu_ms": spread(v["ms"]), "wall_ms": spread(v["wall_ms"])} for k, v in sorted(table.items())}
    fits = {}
    for procs in (1, 2):
        xs, ys = [], []
        for v in table.values():
            if v["procs"] == procs and not v["gc"]:
                xs += [v["live_mib"]] * len(v["ms"])
                ys += v["ms"]
        f = linfit(xs, ys)
        if f:
            fits[f"procs={procs}"] = {"fixed_ms": f["a"], "us_per_mib": f["b"] * 1e3, "r2": f["r2"], "n": f["n"]}
    c["forced_cycle_fit"] = fits

    objs = {}
    for r in ok(runs, "mark-objects"):
        o = r["out"]
        live = o["heap"]["live_bytes"] / MIB
        objs[f"value={r['spec']['value']}B live={r['spec']['live']}MiB"] = {
            "os_cpu_us_per_mib": spread([x * 1e6 / live for x in o["forced"]["cpu_s"]]),
            "os_cpu_ns_per_entry": spread([x * 1e9 / o["heap"]["entries"] for x in o["forced"]["cpu_s"]]),
        }
    for r in ok(runs, "mark"):
        if r["spec"]["procs"] == 1 and r["spec"]["live"] in (64, 256):
            o = r["out"]
            objs.setdefault(f"value=500B live={r['spec']['live']}MiB", {
                "os_cpu_ns_per_entry": spread([x * 1e9 / o["heap"]["entries"] for x in o["forced"]["cpu_s"]])})
    c["forced_cycle_by_value_size"] = objs

    # In-run cycles (default pacer, no limit).
    insitu = {}
    for r in ok(runs, "insitu"):
        s, cy = r["spec"], r["cycles"]
        f = run_figures(r)
        k_os = 1 / f["p_time_over_os_cpu"] if f["p_time_over_os_cpu"] else None
        key = f"procs={s['procs']} live={s['live']}MiB"
        d = insitu.setdefault(key, {"mark_ptime_us_per_mib": [], "mark_os_us_per_mib_est": [], "mark_wall_ms": [],
                                    "mark_wall_ms_per_mib": [], "trigger_over_goal": [], "assist_share": [], "dedicated_share_of_procs": []})
        for i in range(len(cy["at_s"])):
            live = cy["live_mib"][i]
            mark = cy["cpu_assist_ms"][i] + cy["cpu_background_ms"][i] + cy["cpu_idle_ms"][i]
            if live <= 0:
                continue
            d["mark_ptime_us_per_mib"].append(mark * 1e3 / live)
            if k_os:
                d["mark_os_us_per_mib_est"].append(mark * 1e3 / live * k_os)
            d["mark_wall_ms"].append(cy["mark_wall_ms"][i])
            d["mark_wall_ms_per_mib"].append(cy["mark_wall_ms"][i] / live)
            d["trigger_over_goal"].append(cy["heap_start_mib"][i] / cy["goal_mib"][i])
        # Per-cycle gctrace figures, so that numerator and denominator cover
        # the same cycles.
        bg, assist, idle = sum(cy["cpu_background_ms"]), sum(cy["cpu_assist_ms"]), sum(cy["cpu_idle_ms"])
        if bg + assist + idle > 0:
            d["assist_share"].append(assist / (bg + assist + idle))
        wall_marking = sum(cy["mark_wall_ms"])
        if wall_marking > 0:
            d["dedicated_share_of_procs"].append(bg / (wall_marking * s["procs"]))
    c["insitu"] = {k: {m: spread(v) for m, v in d.items()} for k, d in sorted(insitu.items())}

    # Stop-the-world phases, every steady run's cycles, by GOMAXPROCS.
    stw = {}
    for r in runs:
        if "error" in r or r["spec"]["mode"] != "steady":
            continue
        d = stw.setdefault(f"procs={r['spec']['procs']}", {"sweep_termination_ms": [], "mark_termination_ms": []})
        d["sweep_termination_ms"] += r["cycles"]["stw_sweep_term_ms"]
        d["mark_termination_ms"] += r["cycles"]["stw_mark_term_ms"]
    c["stw"] = {k: {m: spread(v) for m, v in d.items()} for k, d in sorted(stw.items())}

    # Where the goal lands under a limit, and what the runtime keeps besides objects.
    lim = {}
    for r in ok(runs, "sweep") + ok(runs, "goal-gib"):
        f = run_figures(r)
        if f["goal_over_limit"] is not None:
            gogc = "off" if r["spec"]["gogc"] == -1 else r["spec"]["gogc"]
            live = "" if r["spec"]["live"] == 64 else f"live={r['spec']['live']}MiB "
            d = lim.setdefault(f"{live}GOGC={gogc} ratio={r['spec']['ratio']}", {"goal_over_limit": [], "footprint_over_live": []})
            d["goal_over_limit"].append(f["goal_over_limit"])
            d["footprint_over_live"].append(f["footprint_over_live"])
    c["limit"] = {k: {m: mean_range(v) for m, v in d.items()} for k, d in lim.items()}
    c["live_over_raw_data"] = mean_range([r["out"]["heap"]["live_bytes"] / r["out"]["heap"]["raw_data_bytes"]
                                          for r in runs if "error" not in r and r["spec"].get("value", 500) == 500])
    foot = []
    for r in ok(runs, "insitu"):
        h = r["out"]["heap"]
        mc = h["memory_classes_end"]
        foot.append({"live_mib": h["live_bytes"] / MIB, "procs": r["spec"]["procs"],
                     "footprint_over_live": h["footprint_end_bytes"] / h["live_bytes"],
                     "unused_over_objects": mc["unused"] / mc["objects"],
                     "free_mib": mc["free"] / MIB, "other_mib": mc["other"] / MIB})
    c["footprint_gogc100"] = foot

    base = ok(runs, "baseline")
    if base:
        rows = []
        for r in base:
            o = r["out"]
            req = o["load"]["requests"]
            rows.append({"user_cpu_us_per_request": o["rusage"]["user_s"] * 1e6 / req,
                         "sys_cpu_us_per_request": o["rusage"]["sys_s"] * 1e6 / req,
                         "bytes_per_request": o["load"]["alloc_bytes"] / req,
                         "objects_per_request": o["load"]["alloc_objects"] / req,
                         "requests_per_s": o["load"]["achieved_rate"],
                         "key": f"procs={r['spec']['procs']} live={r['spec']['live']}MiB alloc={r['spec']['alloc']}MiB/s"})
        c["mutator"] = {key: {k: mean_range([x[k] for x in rows if x["key"] == key]) for k in rows[0] if k != "key"}
                        for key in sorted({x["key"] for x in rows})}
    return c


def curves(runs):
    """Ground truth: one row per configuration, averaged over repeats."""
    out = {}
    base = baselines(runs)
    for tag in ("sweep", "alloc-sweep-nolimit", "alloc-sweep-limit", "idle-latency", "insitu", "baseline"):
        groups = {}
        for r in ok(runs, tag):
            s = r["spec"]
            key = (s["procs"], s["gogc"], s["ratio"], s["alloc"], s["live"])
            groups.setdefault(key, []).append(run_figures(r, base))
        rows = []
        for key in sorted(groups):
            fs = groups[key]
            row = {"procs": key[0], "gogc": key[1], "ratio": key[2], "alloc_target_mib_s": key[3], "live_target_mib": key[4], "repeats": len(fs)}
            for m in fs[0]:
                if m in ("procs", "gogc", "ratio", "alloc_target"):
                    continue
                vals = [f[m] for f in fs if isinstance(f[m], (int, float)) and not isinstance(f[m], bool)]
                others = [f[m] for f in fs if f[m] is not None]
                row[m] = mean_range(vals) if vals else (others or None)
            rows.append(row)
        out[tag] = rows
    return out
