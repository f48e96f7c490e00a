"""The `profile` mode: what an implementation allocates and spends per
operation, per kind of operation and role, written as the simulator's
allocation profile (sim/profiles/<name>.toml; format in docs/gc-models.md,
"Profiles"; read by `sim study --profile NAME`).

On one fresh cluster, in order:
1. idle window (no load): allocation and CPU per second of each role;
2. live heap of the empty replica after a full collection (base);
3. preload; live heap after a full collection again (per key);
4. reads only, then updates only, at one moderate fixed rate: bytes,
   objects and mutator CPU per operation, by role, the idle rate
   subtracted;
5. workload A at the same rate: what young collections copied of what
   eden held (Java).
"""

import datetime
import os
import time

from . import runtime_stats
from .measure import KEY_BYTES, VALUE_BYTES, Sampler, _div


def idle_run(cell, seconds):
    """A window without load, recorded like a run (bench None)."""
    c = cell.cluster
    with Sampler(c) as cpu:
        t0 = time.time()
        time.sleep(seconds)
        t1 = time.time()
    run = {"rate": 0.0, "workload": "idle", "t0": t0, "t1": t1, "duration": seconds, "warmup": 0.0,
           "bench": None, "bench_output": "", "meets_slo": False, "leader_before": cell.leader,
           "leader_after": c.leader(), "cpu_samples": cpu.samples, "memory": c.memory(),
           "placement": dict(c.placement), "bench_cpus": cell.bench_cpus, "loadavg": None}
    cell.runs.append(run)
    return run


def measure(cell, o):
    """Runs steps 1-5 on `cell` (not yet set up); returns the derived runs by name."""
    c = cell.cluster
    c.start()
    cell.leader = c.wait_ready(o.ready_timeout)
    cell.bench_cpus = c.pin(cell.leader, o.pin)
    named = {"idle": idle_run(cell, o.idle_s)}
    base = cell.live_heap()
    cell.preload()
    named["idle_loaded"] = idle_run(cell, cell.settle_s())
    loaded = cell.live_heap()
    cell.warm(o.profile_rate)
    for name, workload in (("read", "c"), ("write", "w"), ("mixed", "a")):
        named[name] = cell.measured_run(o.profile_rate, o.profile_s, o.warmup, workload=workload)
    cell.finish()
    derived = {name: cell.derive(r) for name, r in named.items()}
    return derived, base, loaded


def figures(impl, derived, base, loaded, keys):
    """The profile's numbers from the derived runs."""
    idle = derived["idle"]

    def per_s(role, field):
        v = [r.get(field) for r in idle["replicas"] if r["role"] == role]
        v = [x for x in v if x is not None]
        return sum(v) / len(v) / idle["window_s"] if v else None

    def per_op(name, role, field, idle_field=None):
        """Mean over the role's replicas of (field - idle rate x window) / ops."""
        run = derived[name]
        vals = []
        for r in run["replicas"]:
            if r["role"] != role or r.get(field) is None or not run["ops"]:
                continue
            idle_rate = per_s(role, idle_field or field) or 0.0
            vals.append((r[field] - idle_rate * run["window_s"]) / run["ops"])
        return sum(vals) / len(vals) if vals else None

    def mutator_cpu(r):
        gc = r.get("gc_cpu_s") or 0.0
        return None if r.get("cpu_s") is None else r["cpu_s"] - gc

    for run in derived.values():
        for r in run["replicas"]:
            r["mutator_cpu_s"] = mutator_cpu(r)
    f = {
        "alloc": {
            "leader_read": per_op("read", "leader", "alloc_bytes"),
            "leader_write": per_op("write", "leader", "alloc_bytes"),
            "follower_read": per_op("read", "follower", "alloc_bytes"),
            "follower_write": per_op("write", "follower", "alloc_bytes"),
            "leader_idle_per_s": per_s("leader", "alloc_bytes"),
            "follower_idle_per_s": per_s("follower", "alloc_bytes"),
        },
        "objects": {
            "leader_read": per_op("read", "leader", "alloc_objects"),
            "leader_write": per_op("write", "leader", "alloc_objects"),
            "follower_write": per_op("write", "follower", "alloc_objects"),
        },
        "cpu": {
            "leader_read_us": _scale(per_op("read", "leader", "mutator_cpu_s")),
            "leader_write_us": _scale(per_op("write", "leader", "mutator_cpu_s")),
            "follower_write_us": _scale(per_op("write", "follower", "mutator_cpu_s")),
        },
    }
    if impl.runtime == "none":
        # No collector: the live heap is what the allocator holds (allocated
        # - freed since the start, from the counting allocator).
        base_live = _mean([r.get("live_delta_bytes") for r in derived["idle"]["replicas"]])
        data_live = _mean([r.get("live_delta_bytes") for r in derived["idle_loaded"]["replicas"]])
    else:
        base_live, data_live = _mean(base), _mean(loaded)
    f["live"] = {"base_bytes": base_live,
                 "bytes_per_key": _div((data_live or 0) - (base_live or 0), keys) if data_live else None}
    if impl.runtime == "java":
        mixed = derived["mixed"]["replicas"]
        copied = sum(r.get("young_copied_bytes") or 0 for r in mixed)
        eden = sum(r.get("young_eden_bytes") or 0 for r in mixed)
        f["young"] = {"survivor_fraction": copied / eden if eden else None}
    return f


def _scale(x):
    return None if x is None else x * 1e6


def _mean(xs):
    xs = [x for x in (xs or []) if x is not None]
    return sum(xs) / len(xs) if xs else None


PROVISIONAL_SUFFIX = "-provisional"


def profile_name(impl, provisional):
    """The profile's name: a provisional one (measured on a busy machine)
    says so in its name, so that it never takes the place of the real
    measurement, which is written under the implementation's own name."""
    return impl.profile + (PROVISIONAL_SUFFIX if provisional else "")


def toml_text(impl, f, measured, value_bytes=VALUE_BYTES, key_bytes=KEY_BYTES, notes=(), trim_interval_ms=None,
              provisional=False):
    """The profile file (docs/gc-models.md, "Profiles"). A figure that could not be
    measured is written as 0.0 with a comment saying so."""
    lines = [f"# Measured by groundtruth/run profile; see docs/performance-groundtruth.md.",
             *([f"# PROVISIONAL: measured on a busy machine (see the load average in `measured`);",
                f"# the CPU figures are not to be trusted, allocation and live bytes little affected."]
               if provisional else []),
             *[f"# {n}" for n in notes],
             f'name = "{profile_name(impl, provisional)}"', f'runtime = "{impl.runtime}"', f'measured = "{measured}"',
             *(["provisional = true"] if provisional else []),
             f"value_bytes = {value_bytes}", f"key_bytes = {key_bytes}",
             f"reads_replicated = {'true' if impl.reads_replicated else 'false'}", ""]
    sections = ["alloc", "objects", "live", "young", "cpu"]
    for s in sections:
        if s not in f or (s == "objects" and all(v is None for v in f[s].values())):
            continue
        lines.append(f"[{s}]")
        for k, v in f[s].items():
            if v is None:
                lines.append(f"{k} = 0.0  # not measured")
            else:
                lines.append(f"{k} = {toml_float(v)}")
        lines.append("")
    if trim_interval_ms:
        lines += ["[log]", "# Replicant trims its log in every commit round (its commit_interval).",
                  f"trim_interval_ms = {int(trim_interval_ms)}", ""]
    return "\n".join(lines)


def toml_float(v):
    """Four significant digits, always a TOML float (never an integer)."""
    return repr(float(f"{float(v):.4g}"))


def measured_line(argv, state):
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{date}, groundtruth/run {' '.join(argv)} (load average {state['loadavg'][0]:.1f}, "
            f"{state['cpus']} cores, {state['mem_available_gib']} GiB available)")


def write(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
