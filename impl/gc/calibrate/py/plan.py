"""The grid of runs: which configurations each mode measures, and why.

A spec is a dict: "rt" (go|java), "mode", the settings, and "tags" naming
what the run serves (the derivations select runs by tag).
"""


def go_plan(quick):
    if quick:
        forced = [dict(rt="go", mode="forced", live=16, procs=p, cycles=4, tags=["mark"]) for p in (1, 2)]
        steady = [
            dict(rt="go", mode="steady", live=16, procs=2, gogc=100, ratio=0, alloc=32, warmup=1.5, measure=4, probe=100, tags=["insitu", "sweep"]),
            dict(rt="go", mode="steady", live=16, procs=2, gogc=-1, ratio=1.25, alloc=32, warmup=1.5, measure=4, probe=100, tags=["sweep"]),
        ]
        return forced + steady

    runs = []
    # Whole collections timed in OS CPU time with the mutator stopped: the
    # mark (and sweep) cost per MiB of live heap, at four heap sizes (the
    # L3 cache here is 32 MiB) and two value sizes (per byte vs per object).
    for live in (16, 64, 256, 1024):
        for p in (1, 2):
            runs.append(dict(rt="go", mode="forced", live=live, procs=p, cycles=8 if live < 1024 else 4, tags=["mark"]))
    for live in (64, 256):
        runs.append(dict(rt="go", mode="forced", live=live, procs=1, value=64, cycles=8, tags=["mark-objects"]))
    # The same with the collector Go had before 1.26 made Green Tea the
    # default (GOEXPERIMENT=nogreenteagc), the kind the seed paper measured.
    for live in (16, 64, 256, 1024):
        runs.append(dict(rt="go", mode="forced", live=live, procs=1, gc="nogreenteagc", cycles=8 if live < 1024 else 4, tags=["mark-classic"]))

    # GiB scale (issue 35): the marking cost at 2 GiB live for both
    # collectors (about 5 GiB of memory each while it runs), and where the
    # heap goal lands under a memory limit with 1 GiB live, allocating fast
    # enough for several cycles in the window.
    for gc in ("", "nogreenteagc"):
        spec = dict(rt="go", mode="forced", live=2048, procs=1, cycles=3, tags=["mark-gib"])
        if gc:
            spec["gc"] = gc
        runs.append(spec)
    for ratio in (2, 1.5, 1.25):
        runs.append(dict(rt="go", mode="steady", live=1024, procs=2, gogc=100, ratio=ratio, alloc=256,
                         warmup=6, measure=20, probe=100, tags=["goal-gib"]))

    base = dict(rt="go", mode="steady", live=64, alloc=64, warmup=4, measure=15, probe=100)
    # No collection at all: the mutator's own CPU per request, the baseline
    # that GC's extra CPU is measured against (OS CPU of a run minus its
    # requests × this).
    # The pacing loop's wake-ups cost CPU too, so the baseline is taken at
    # every allocation rate the other runs use.
    for live in (16, 64, 256):
        for p in (1, 2):
            runs.append(dict(base, live=live, procs=p, gogc=-1, ratio=0, tags=["baseline"]))
    for alloc in (1, 16, 32, 128):
        runs.append(dict(base, procs=2, gogc=-1, ratio=0, alloc=alloc, tags=["baseline"]))
    # Default pacer, no limit, three heap sizes: in-run mark cost, STW
    # phases, trigger point.
    for live in (16, 64, 256):
        for p in (1, 2):
            runs.append(dict(base, live=live, procs=p, gogc=100, ratio=0, tags=["insitu", "alloc-sweep-nolimit"] if (live == 64 and p == 2) else ["insitu"]))
    # Memory-limit sweep at a fixed allocation rate.
    for ratio in (8, 2, 1.5, 1.35, 1.25, 1.1):
        for p in (1, 2):
            runs.append(dict(base, procs=p, gogc=100, ratio=ratio, tags=["sweep", "alloc-sweep-limit"] if (ratio == 1.5 and p == 2) else ["sweep"]))
        runs.append(dict(base, procs=2, gogc=-1, ratio=ratio, tags=["sweep"]))
    # Allocation-rate sweep at a fixed limit (and without one).
    for alloc in (16, 32, 128):
        runs.append(dict(base, procs=2, gogc=100, ratio=0, alloc=alloc, tags=["alloc-sweep-nolimit"]))
        runs.append(dict(base, procs=2, gogc=100, ratio=1.5, alloc=alloc, tags=["alloc-sweep-limit"]))
    # A nearly idle server near its limit: tiny requests at 100/s with
    # almost no other allocation (the paper's 100 ops/s point).
    for ratio in (1.25, 1.1, 1.05):
        runs.append(dict(base, procs=2, gogc=100, ratio=ratio, alloc=1, measure=30, tags=["idle-latency"]))
    return runs


def java_plan(quick):
    if quick:
        return [
            dict(rt="java", mode="forced", live=32, pgt=2, cycles=3, tags=["full"]),
            dict(rt="java", mode="steady", live=32, pgt=2, ratio=2, alloc=32, warmup=3, measure=5, probe=100, tags=["sweep"]),
            dict(rt="java", mode="steady", live=32, pgt=2, ratio=1.25, alloc=32, warmup=3, measure=5, probe=100, tags=["sweep"]),
        ]
    runs = []
    # Full collections (System.gc()) timed with the mutator stopped.
    for live in (64, 256, 1024):
        for p in (1, 2):
            runs.append(dict(rt="java", mode="forced", live=live, pgt=p, cycles=6 if live < 1024 else 3, tags=["full"]))
    base = dict(rt="java", mode="steady", live=64, alloc=64, warmup=8, measure=15, probe=100)
    for ratio in (8, 2, 1.5, 1.25):
        for p in (1, 2):
            runs.append(dict(base, pgt=p, ratio=ratio, tags=["sweep", "alloc-sweep"] if (ratio == 2 and p == 2) else ["sweep"]))
        runs.append(dict(base, live=256, pgt=2, ratio=ratio, tags=["sweep-256"]))
    for alloc in (16, 32, 128):
        runs.append(dict(base, pgt=2, ratio=2, alloc=alloc, tags=["alloc-sweep"]))
    for ratio in (1.25,):
        runs.append(dict(base, pgt=2, ratio=ratio, alloc=1, measure=30, tags=["idle-latency"]))
    return runs


def describe(spec):
    keys = [k for k in ("mode", "gc", "live", "value", "procs", "pgt", "gogc", "ratio", "alloc") if k in spec]
    return f"{spec['rt']} " + " ".join(f"{k}={spec[k]}" for k in keys)
