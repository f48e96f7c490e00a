"""The constants table and the ground-truth curves, as Markdown and plots."""


def _num(x, digits=3):
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def spread_txt(s, scale=1.0):
    """median [p10–p90] (p99, max; n) of a stats.spread dict."""
    if not s or not s.get("n"):
        return "–"
    m = lambda k: _num(s[k] * scale)
    return f"{m('median')} [{m('p10')}–{m('p90')}] (p99 {m('p99')}, max {m('max')}; n={s['n']})"


def mr_txt(v, scale=1.0):
    """mean (min–max) of a stats.mean_range dict."""
    if v is None:
        return "–"
    if isinstance(v, list):
        return ", ".join(_num(x) for x in v)
    if v["n"] == 1:
        return _num(v["mean"] * scale)
    return f"{_num(v['mean'] * scale)} ({_num(v['min'] * scale)}–{_num(v['max'] * scale)})"


def fit_txt(f, base_key, slope_key, slope_unit):
    if not f:
        return "–"
    r2 = f"; R²={f['r2']:.2f}" if f.get("r2") is not None else ""
    return f"{_num(f[base_key])} ms + {_num(f[slope_key])} {slope_unit} (n={f['n']}{r2})"


def constants_rows(go, java):
    """(name, value, unit, meaning) rows of the constants table."""
    rows = []
    if go:
        for k, v in go.get("forced_cycle", {}).items():
            rows.append((f"go mark+sweep CPU, {k}", spread_txt(v["os_cpu_us_per_mib"]), "µs OS CPU / MiB live",
                         "one whole cycle (runtime.GC(), mutator stopped, heap = 2× live), process CPU time by getrusage, divided by the marked live heap"))
        for k, v in go.get("forced_cycle_fit", {}).items():
            rows.append((f"go cycle CPU linear fit, {k}", f"{_num(v['fixed_ms'])} ms + {_num(v['us_per_mib'])} µs/MiB (R²={_num(v['r2'])})",
                         "ms OS CPU", "least squares over the forced cycles at all live sizes; the heap-size dependence is not linear (caches), prefer the per-size rows"))
        for k, v in go.get("forced_cycle_by_value_size", {}).items():
            rows.append((f"go cycle CPU per map entry, {k}", spread_txt(v["os_cpu_ns_per_entry"]), "ns OS CPU / entry",
                         "the same forced cycles per live entry (key + value + map slot), GOMAXPROCS=1"))
        for k, v in go.get("insitu", {}).items():
            rows.append((f"go in-run mark CPU, {k}", spread_txt(v["mark_os_us_per_mib_est"]), "µs / MiB live (OS-CPU estimate)",
                         "gctrace assist+background+idle mark P-time per cycle ÷ marked MiB, × (process OS CPU ÷ busy P-time) of the run; GOGC=100, no limit"))
            rows.append((f"go mark phase wall, {k}", spread_txt(v["mark_wall_ms_per_mib"]), "ms wall / MiB live",
                         "gctrace concurrent-mark clock time per cycle ÷ marked MiB (wall: grows when the machine is busy)"))
            rows.append((f"go trigger point, {k}", spread_txt(v["trigger_over_goal"]), "heap at cycle start ÷ goal",
                         "gctrace first heap figure over the goal (MiB grain)"))
            rows.append((f"go dedicated workers, {k}", spread_txt(v["dedicated_share_of_procs"]), "share of GOMAXPROCS during mark",
                         "gctrace background (dedicated+fractional) mark P-time ÷ (mark wall × GOMAXPROCS), summed over the cycles; the pacer's target is 0.25"))
            rows.append((f"go assists, {k}", spread_txt(v["assist_share"]), "share of mark P-time", "gctrace assist ÷ (assist+background+idle), summed over the cycles"))
        for k, v in go.get("stw", {}).items():
            rows.append((f"go STW sweep termination, {k}", spread_txt(v["sweep_termination_ms"]), "ms wall", "gctrace first clock figure, every cycle of every steady run"))
            rows.append((f"go STW mark termination, {k}", spread_txt(v["mark_termination_ms"]), "ms wall", "gctrace third clock figure"))
        if go.get("live_over_raw_data"):
            rows.append(("go live heap ÷ raw data", mr_txt(go["live_over_raw_data"]), "", "marked live heap ÷ (entries × (23 + value size)); to map the paper's memory/data onto limit/live"))
        for k, v in sorted(go.get("limit", {}).items()):
            rows.append((f"go goal under the limit, {k}", mr_txt(v["goal_over_limit"]), "heap goal ÷ limit", "at the end of the window; the rest of the limit is the runtime's non-object memory"))
        for f in go.get("footprint_gogc100", []):
            rows.append((f"go footprint, live {f['live_mib']:.0f} MiB, procs={f['procs']}, GOGC=100", _num(f["footprint_over_live"]), "(mapped − released) ÷ live",
                         f"what GOMEMLIMIT is compared with, at the end of the window; of it: free slots in spans = {_num(f['unused_over_objects'])} × objects, "
                         f"free spans {_num(f['free_mib'])} MiB, stacks and runtime metadata {_num(f['other_mib'])} MiB"))
        for k, m in go.get("mutator", {}).items():
            rows.append((f"go mutator per request, {k}", f"user {mr_txt(m['user_cpu_us_per_request'])} µs + sys {mr_txt(m['sys_cpu_us_per_request'])} µs, "
                         f"{mr_txt(m['bytes_per_request'])} B, {mr_txt(m['objects_per_request'])} objects",
                         "OS CPU, allocation", "GOGC=off, no limit: no collection at all (sys is mostly page faults of a heap that only grows); mean (min–max) over repeats"))
    if java:
        for k, v in java.get("evacuation", {}).items():
            rows.append((f"g1 {k} pause, wall", fit_txt(v["wall_fit"], "base_ms", "ms_per_mib_copied", "ms/MiB copied"), "ms wall",
                         "least squares of the log's pause length on the bytes copied (PLAB used + direct), evacuation failures left out"))
            f = v.get("wall_fit_with_old")
            if f:
                rows.append((f"g1 {k} pause, wall, with old gen", f"{_num(f['base_ms'])} ms + {_num(f['ms_per_mib_copied'])} ms/MiB copied + "
                             f"{_num(f['ms_per_mib_old'])} ms/MiB old gen (n={f['n']}; R²={_num(f['r2'])})", "ms wall",
                             "the same pauses fitted on copied bytes and the old generation's size before the pause (remembered sets, card scanning)"))
            rows.append((f"g1 {k} copied", spread_txt(v["copied_mib"]), "MiB per pause", ""))
            if v.get("promoted_share_of_copied"):
                rows.append((f"g1 {k} promoted share", spread_txt(v["promoted_share_of_copied"]), "old-gen bytes ÷ copied bytes", "what a young pause copies into old regions rather than survivors"))
            if v.get("old_cset_regions"):
                rows.append((f"g1 {k} old regions", spread_txt(v["old_cset_regions"]), "old regions per mixed pause", ""))
        for k, f in java.get("pause_cpu_fit", {}).items():
            full = f" + {_num(f['ms_per_mib_full'])} ms/MiB live per full GC" if f.get("ms_per_mib_full") is not None else ""
            rows.append((f"g1 stop-the-world CPU, {k}", f"{_num(f['ms_per_pause'])} ms/pause + {_num(f['ms_per_mib_copied'])} ms/MiB copied{full} "
                         f"(R²={_num(f['r2'])}, {f['runs']} runs)", "ms CPU, all pause threads",
                         "CPU of the parallel GC workers and the VM thread in each run's window, least squares across runs (no intercept)"))
        rows.append(("g1 refinement CPU", spread_txt(java.get("refine_cpu_us_per_mib_allocated")), "µs CPU / MiB allocated",
                     "concurrent refinement threads (cards dirtied by old-to-young stores), per steady run"))
        rows.append(("g1 live heap ÷ raw data", mr_txt(java.get("live_over_raw_data")), "", "heap used after a full GC ÷ (entries × (23 + value size))"))
        rows.append(("g1 promotion per allocation", spread_txt(java.get("promoted_bytes_per_allocated_byte")), "promoted B ÷ allocated B", "per steady run"))
        for k, v in java.get("remark_cleanup_ms", {}).items():
            rows.append((f"g1 {k}", spread_txt(v), "ms wall", "log pause length"))
        for k, v in java.get("concurrent_mark", {}).items():
            rows.append((f"g1 concurrent mark CPU, {k}", spread_txt(v["cpu_us_per_mib"]), "µs CPU / MiB live per cycle",
                         "CPU of the marking threads (ConcGCThreads=1) in the window ÷ completed cycles ÷ live heap; includes remembered-set rebuild"))
            rows.append((f"g1 mark from roots wall, {k}", spread_txt(v["mark_from_roots_ms_per_mib"]), "ms wall / MiB live", ""))
        rows.append(("g1 IHOP", spread_txt(java.get("ihop_occupancy_at_concurrent_start")), "heap used ÷ capacity at Concurrent Start", "adaptive IHOP, as G1 chose it"))
        for k, v in java.get("eden_share_of_heap", {}).items():
            rows.append((f"g1 eden size, {k}", spread_txt(v), "eden ÷ heap capacity at a young pause", ""))
        for k, v in java.get("full", {}).items():
            rows.append((f"g1 full GC, {k}", spread_txt(v["pause_ms_per_mib_live"]), "ms wall / MiB live", f"System.gc() with as much garbage as live; CPU {spread_txt(v['cpu_ms_per_mib_live'])} ms/MiB"))
        for k, v in java.get("full_fit", {}).items():
            rows.append((f"g1 full GC fit, {k}", f"{_num(v['fixed_ms'])} ms + {_num(v['ms_per_mib_live'])} ms/MiB (R²={_num(v['r2'])})", "ms wall", ""))
        if "mutator" in java:
            m = java["mutator"]
            rows.append(("g1 mutator per request", f"{mr_txt(m['cpu_us_per_request'])} µs, {mr_txt(m['bytes_per_request'])} B", "CPU, allocation", "ratio-8 runs"))
    return rows


def constants_markdown(go, java):
    lines = ["| constant | value: median [p10–p90] (p99, max; n) | unit | what it is |", "|---|---|---|---|"]
    for r in constants_rows(go, java):
        lines.append("| " + " | ".join(str(x).replace("|", "/") for x in r) + " |")
    return "\n".join(lines)


GO_COLS = [("procs", "GOMAXPROCS"), ("gogc", "GOGC"), ("live_target_mib", "live MiB"), ("ratio", "limit/live"), ("alloc_mib_s", "alloc MiB/s"),
           ("gc_share_of_busy", "GC share of busy P-time"), ("gc_share_of_busy_without_idle_mark", "same w/o idle mark"),
           ("gc_cores_os", "GC cores (P-share × OS)"), ("gc_cores_differential", "GC cores (OS, differential)"),
           ("gc_share_differential", "GC share of OS CPU (differential)"), ("sys_us_per_request", "sys µs/req"), ("cycles_per_s", "cycles/s"), ("gc_active_share_of_wall", "GC active share of wall"),
           ("goal_over_limit", "goal/limit"), ("limiter_engaged", "CPU limiter on"), ("stw_max_ms", "STW max ms"), ("probe_p99_ms", "probe p99 ms"),
           ("probe_max_ms", "probe max ms"), ("rate_achieved_over_target", "achieved/target"), ("run_queue_wait_share", "run-queue wait share"),
           ("others_busy_cores", "others' cores")]
JAVA_COLS = [("pgt", "ParallelGCThreads"), ("live_mib", "live MiB"), ("ratio", "Xmx/live"), ("heap_mib", "Xmx MiB"),
             ("alloc_mib_s", "alloc MiB/s"), ("pause_share_of_wall", "pause share of wall"), ("gc_cpu_share", "GC CPU share"),
             ("gc_cores", "GC cores"), ("young_per_s", "young/s"), ("mixed_per_s", "mixed/s"), ("full_per_s", "full/s"),
             ("conc_cycles_per_s", "marks/s"), ("evac_failures", "evac. failures"), ("pause_p99_ms", "pause p99 ms"),
             ("pause_max_ms", "pause max ms"), ("probe_p99_ms", "probe p99 ms"), ("probe_max_ms", "probe max ms"),
             ("rate_achieved_over_target", "achieved/target"), ("run_queue_wait_share", "run-queue wait share"), ("others_busy_cores", "others' cores")]


def curves_markdown(rows, cols):
    if not rows:
        return "(no runs)"
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for k, _ in cols:
            v = r.get(k)
            cells.append(mr_txt(v) if isinstance(v, (dict, list)) else ("off" if k == "gogc" and v == -1 else ("none" if k == "ratio" and v == 0 else _num(v))))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean(v):
    return v["mean"] if isinstance(v, dict) and v else None


def plot(go_curves, java_curves, path_memory, path_alloc):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 3, figsize=(15, 8.5))
    sweep = [r for r in (go_curves or {}).get("sweep", []) if r["ratio"] > 0]
    styles = ["o-", "s-", "^--", "v-.", "d:"]
    for i, (procs, gogc) in enumerate(sorted({(r["procs"], r["gogc"]) for r in sweep})):
        style = styles[i % len(styles)]
        rs = sorted((r for r in sweep if r["procs"] == procs and r["gogc"] == gogc), key=lambda r: r["ratio"])
        if not rs:
            continue
        x = [r["ratio"] for r in rs]
        lab = f"GOMAXPROCS={procs} GOGC={'off' if gogc == -1 else gogc}"
        col = f"C{i}"
        ax[0][0].plot(x, [_mean(r["gc_share_of_busy"]) for r in rs], style, color=col, label=lab + " (P-time)")
        ax[0][0].plot(x, [_mean(r["gc_share_differential"]) for r in rs], style, color=col, alpha=0.4, label=lab + " (OS CPU, differential)")
        ax[0][1].plot(x, [_mean(r["cycles_per_s"]) for r in rs], style, color=col, label=lab)
        ax[0][2].plot(x, [_mean(r["probe_p99_ms"]) for r in rs], style, color=col, label=lab + " p99")
        ax[0][2].plot(x, [_mean(r["probe_max_ms"]) for r in rs], style, color=col, alpha=0.4, label=lab + " max")
    ax[0][0].set(title="Go: GC share of the process's CPU", xlabel="GOMEMLIMIT / live heap", ylim=(0, 1))
    ax[0][1].set(title="Go: GC cycles per second", xlabel="GOMEMLIMIT / live heap", yscale="log")
    ax[0][2].set(title="Go: tiny-request latency at 100/s", xlabel="GOMEMLIMIT / live heap", ylabel="ms", yscale="log")
    jsw = (java_curves or {}).get("sweep", []) + (java_curves or {}).get("sweep-256", [])
    for i, (pgt, live) in enumerate(sorted({(r["pgt"], r["live_target_mib"]) for r in jsw})):
        style = styles[i % len(styles)]
        rs = sorted((r for r in jsw if r["pgt"] == pgt and r["live_target_mib"] == live), key=lambda r: r["ratio"])
        if not rs:
            continue
        x = [r["ratio"] for r in rs]
        lab = f"PGT={pgt} live {live} MiB"
        col = f"C{i}"
        ax[1][0].plot(x, [_mean(r["gc_cpu_share"]) for r in rs], style, color=col, label=lab + " CPU share")
        ax[1][0].plot(x, [_mean(r["pause_share_of_wall"]) for r in rs], style, color=col, alpha=0.4, label=lab + " pause share")
        ax[1][1].plot(x, [(_mean(r["mixed_per_s"]) or 0) + 1e-3 for r in rs], style, color=col, label=lab + " mixed")
        ax[1][1].plot(x, [(_mean(r["full_per_s"]) or 0) + 1e-3 for r in rs], style, color=col, alpha=0.4, label=lab + " full")
        ax[1][2].plot(x, [_mean(r["pause_max_ms"]) for r in rs], style, color=col, label=lab + " max pause")
        ax[1][2].plot(x, [_mean(r["probe_p99_ms"]) for r in rs], style, color=col, alpha=0.4, label=lab + " probe p99")
    ax[1][0].set(title="G1: GC CPU share / pause share of wall", xlabel="-Xmx / live heap", ylim=(0, 1))
    ax[1][1].set(title="G1: mixed and full collections per second (+0.001)", xlabel="-Xmx / live heap", yscale="log")
    ax[1][2].set(title="G1: max pause and tiny-request p99", xlabel="-Xmx / live heap", ylabel="ms", yscale="log")
    from matplotlib.ticker import FormatStrFormatter, NullLocator

    for a in ax.flat:
        a.set_xscale("log")
        a.set_xticks([1.1, 1.25, 1.5, 2, 4, 8])
        a.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        a.xaxis.set_minor_locator(NullLocator())
        a.grid(True, alpha=0.3)
        if a.lines:
            a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path_memory, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for tag, style in (("alloc-sweep-nolimit", "o-"), ("alloc-sweep-limit", "s-")):
        rs = sorted((go_curves or {}).get(tag, []), key=lambda r: _mean(r["alloc_mib_s"]) or 0)
        if rs:
            x = [_mean(r["alloc_mib_s"]) for r in rs]
            lab = "no limit" if tag.endswith("nolimit") else "limit 1.5× live"
            col = "C0" if tag.endswith("nolimit") else "C1"
            ax[0].plot(x, [_mean(r["gc_share_of_busy"]) for r in rs], style, color=col, label=f"share of busy P-time, {lab}")
            ax[0].plot(x, [_mean(r["gc_share_differential"]) for r in rs], style, color=col, alpha=0.4, label=f"share of OS CPU (differential), {lab}")
            ax[1].plot(x, [_mean(r["gc_cores_differential"]) for r in rs], style, color=col, label=f"GC cores (OS CPU, differential), {lab}")
            ax[1].plot(x, [_mean(r["cycles_per_s"]) / 100 for r in rs], style, color=col, alpha=0.4, label=f"cycles/s ÷ 100, {lab}")
    rs = sorted((java_curves or {}).get("alloc-sweep", []), key=lambda r: _mean(r["alloc_mib_s"]) or 0)
    if rs:
        x = [_mean(r["alloc_mib_s"]) for r in rs]
        ax[2].plot(x, [_mean(r["gc_cpu_share"]) for r in rs], "o-", label="GC CPU share")
        ax[2].plot(x, [_mean(r["gc_cores"]) for r in rs], "^-", label="GC cores")
        ax[2].plot(x, [_mean(r["pause_share_of_wall"]) for r in rs], "s-", label="pause share of wall")
    ax[0].set(title="Go: GC share of the process's CPU", xlabel="allocation MiB/s", ylim=(0, 1))
    ax[1].set(title="Go: GC cores and cycles", xlabel="allocation MiB/s")
    ax[2].set(title="G1 (-Xmx 2× live, PGT=2, live 64 MiB)", xlabel="allocation MiB/s", ylim=(0, 1))
    fig.suptitle("GOGC=100, GOMAXPROCS=2, live 64 MiB", x=0.33, fontsize=9)
    for a in ax:
        a.grid(True, alpha=0.3)
        if a.lines:
            a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path_alloc, dpi=110)
    plt.close(fig)
