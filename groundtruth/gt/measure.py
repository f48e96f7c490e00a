"""One cell of measurement: one implementation at one memory ratio and
data size, on a fresh cluster: preload, live heap after a full
collection, warm-up, then the search for the highest load meeting the
p99 objective, every run measured per replica (CPU, allocation, the
collector's cycles, pauses and CPU).

A `Cell` runs step by step (`step()` does one bench run), so that the
table mode can alternate the runs of several cells.
"""

import json
import os
import threading
import time

from . import bench, impls, osinfo, runtime_stats
from .cluster import Cluster

KEY_BYTES, VALUE_BYTES = 23, 500


def keys_for(data_mib):
    """Keys of a data set of `data_mib` MiB of keys and values (bench's keys
    are 23 bytes, its values 500)."""
    return max(1, int(data_mib * 2**20 / (KEY_BYTES + VALUE_BYTES)))


class Cell:
    def __init__(self, impl_name, build, o, ratio, data_mib, run_dir, port_base, label=None,
                 protocol="text", window=1, out=None, calibrate=False):
        self.impl = impls.get(impl_name)
        self.o, self.ratio, self.data_mib = o, ratio, data_mib
        self.keys = keys_for(data_mib)
        self.memory = int(ratio * data_mib * 2**20)
        self.label = label or self.impl.name
        self.protocol, self.window = protocol, window
        self.run_dir = run_dir
        self.out = out
        self.cluster = Cluster(self.impl, build, run_dir, self.memory, int(o.slack_mib * 2**20), port_base,
                               tag=f"{os.getpid()}-{os.path.basename(run_dir)}",
                               commit_interval_ms=o.commit_interval, threadpool=o.threadpool,
                               procs=1 if o.pin != "none" else None, calibrate=calibrate)
        self.search = bench.Search(o.start_rate, o.attempts, o.max_rate, o.bisections)
        self.runs, self.leader, self.bench_cpus = [], None, None
        self.error, self.live = None, None
        self.bench_jsonl = os.path.join(run_dir, "bench.jsonl")

    # ---- set-up -----------------------------------------------------------

    def setup(self):
        """Starts the cluster, preloads the keys, measures the live heap,
        warms up. On failure the cell records the error and ends."""
        c = self.cluster
        try:
            c.start()
            self.leader = c.wait_ready(self.o.ready_timeout)
            self.bench_cpus = c.pin(self.leader, self.o.pin)
            self.preload()
            time.sleep(self.settle_s())
            self.live = self.live_heap()
            self.warm(self.o.warm_rate)
        except (RuntimeError, OSError, osinfo.CgroupError) as e:
            deaths = self.cluster.deaths()
            self.error = str(e) + ("; replica died: " + "; ".join(f"{i}: {w}" for i, w in deaths.items())
                                   if deaths else "")
            self.search.done = True

    def preload(self):
        """Writes every key once (bench's preload, then one short run). With
        fewer connections than the runs: the preload only has to finish,
        and a Replicant leader that answers "retry" to many concurrent
        requests on a busy machine made bench give up."""
        t = dict(self.target(), connections=min(self.target()["connections"], self.o.preload_connections))
        # A long per-request timeout: a replica deep in collection work is
        # slow, and loading the data is not the measurement.
        pre, text = bench.run(t, self.o.warm_rate, 1, 0, self.keys, self.bench_jsonl, preload=True,
                              cpus=self.bench_cpus, timeout_s=10.0)
        if pre is None or pre["wrong"]:
            raise RuntimeError(f"preload failed: {bench.error_line(text)}")

    def settle_s(self):
        """Seconds after the preload before the live heap is measured:
        Replicant trims its log in each commit round to what every replica
        executed by the round before, so the preload's entries are gone
        after a few rounds; measured earlier, they count as data."""
        return max(2.0, 4 * self.o.commit_interval / 1000)

    def warm(self, rate):
        warm, text = bench.run(self.target(), rate, self.o.warm_s, 0, self.keys, self.bench_jsonl,
                               cpus=self.bench_cpus)
        if warm is None:
            raise RuntimeError(f"warm-up failed: {bench.error_line(text)}")

    def target(self):
        return self.cluster.target(self.protocol, self.o.connections, self.window)

    def live_heap(self):
        """Each replica's live heap after a full collection (bytes), where the
        runtime has one."""
        c = self.cluster
        if self.impl.runtime == "none":
            return None
        c.force_full_gc()
        out = []
        for l in c.launches:
            if self.impl.runtime == "go":
                out.append(runtime_stats.go_last_forced(l.metrics))
            else:
                out.append(runtime_stats.java_last_full_gc(l.gclog))
        return out

    # ---- the search -------------------------------------------------------

    def step(self):
        """One run of the search; False when the search is over."""
        rate = self.search.next_rate()
        if rate is None:
            return False
        r = self.measured_run(rate, self.o.duration, self.o.warmup, workload=self.o.workload)
        if r["bench"] is None:
            self.error = "bench failed: " + bench.error_line(r["bench_output"])
            self.search.done = True
            return False
        deaths = self.cluster.deaths()
        if deaths:
            # A replica that died does not come back: the rest of the search
            # would measure a cluster of two.
            self.error = "replica died: " + "; ".join(f"{i}: {w}" for i, w in deaths.items())
            self.search.done = True
            return False
        self.search.record(r["bench"], r["meets_slo"])
        return True

    def measured_run(self, rate, duration, warmup, workload="a"):
        """One bench run with every replica's CPU sampled through it."""
        c = self.cluster
        leader = c.leader()
        if leader is not None and leader != self.leader and self.o.pin != "none":
            self.bench_cpus = c.pin(leader, self.o.pin)
        self.leader = leader if leader is not None else self.leader
        c.reset_peaks()
        with Sampler(c) as cpu:
            t0 = time.time()
            rec, text = bench.run(self.target(), rate, duration, warmup, self.keys, self.bench_jsonl,
                                  workload=workload, cpus=self.bench_cpus, seed=len(self.runs) + 2)
            t1 = time.time()
        run = {"rate": rate, "workload": workload, "t0": t0, "t1": t1, "duration": duration, "warmup": warmup,
               "bench": rec, "bench_output": text if rec is None or rec.get("bench_rc") else "",
               "meets_slo": rec is not None and bench.meets_slo(rec, self.o.slo_ms),
               "leader_before": self.leader, "leader_after": c.leader(), "cpu_samples": cpu.samples,
               "memory": c.memory(), "placement": dict(c.placement), "bench_cpus": self.bench_cpus,
               "loadavg": osinfo.loadavg()}
        self.runs.append(run)
        return run

    # ---- the end ----------------------------------------------------------

    def finish(self, final=True, attempts=1):
        """Stops the cluster, derives every run's per-replica figures, writes
        the JSON lines; returns the cell's summary (kind "cell", or
        "failed-attempt" for a set-up tried again on a fresh cluster)."""
        died = self.cluster.deaths()
        mem = self.cluster.stop()
        runs = [self.derive(r) for r in self.runs]
        best = self.search.lo
        best_run = next((r for r in runs if r["bench"] is best), None) if best else None
        summary = {
            "kind": "cell" if final else "failed-attempt", "attempts": attempts, "impl": self.impl.name,
            "label": self.label, "runtime": self.impl.runtime,
            "protocol": self.protocol, "connections": self.o.connections, "window": self.window,
            "ratio": self.ratio,
            "data_mib": self.data_mib, "keys": self.keys, "memory_bytes": self.memory,
            "cgroup_limit_bytes": self.cluster.cgroup_limit,
            "max_ops": best["achieved"] if best else 0.0,
            "max_offered": best["offered"] if best else 0.0,
            "p99_ms_at_max": best["p99_ms"] if best else None,
            "meets_slo_somewhere": best is not None,
            "at_max": best_run["replicas"] if best_run else None,
            "roles_at_max": best_run["roles"] if best_run else None,
            "live_after_preload_bytes": self.live,
            "runs": len(runs), "leader_changes": sum(r["leader_before"] != r["leader_after"] for r in runs),
            "exit_codes": self.cluster.exit_codes, "died_before_stop": died, "memory_at_stop": mem,
            "oom_kills": sum((m.get("oom_kills") or 0) for m in mem),
            "placement": dict(self.cluster.placement), "procs_hint": self.cluster.procs_hint,
            "error": self.error, "run_dir": self.run_dir,
        }
        if self.out:
            with open(self.out, "a") as f:
                for r in runs:
                    f.write(json.dumps({"kind": "run", "impl": self.impl.name, "label": self.label,
                                        "ratio": self.ratio, "data_mib": self.data_mib, **r}) + "\n")
                f.write(json.dumps(summary) + "\n")
        return summary

    def derive(self, run):
        """Per-replica and per-role figures of one run, over bench's
        measured part (its warm-up, with the connections' set-up, left
        out) or, without bench, the whole window."""
        b = run["bench"] or {}
        t0, t1 = b.get("measured_from_unix_s", run["t0"]), b.get("measured_to_unix_s", run["t1"])
        ops = b.get("ok")
        window = t1 - t0
        cpu_series = run["cpu_samples"]
        reps = []
        for i, l in enumerate(self.cluster.launches):
            cpu = runtime_stats.delta(cpu_series, f"cpu{i}", t0, t1)
            rs = {}
            # gc_cpu_share: the collector's share of the CPU the process
            # could use (its cores x the window). Go: runtime/metrics' gc
            # total over its total (GOMAXPROCS x wall time), both as the
            # runtime accounts them; Java: the OS CPU of the JVM's collector
            # threads over its processors x the window. gc_of_process_cpu:
            # over the process's OS CPU (for Go an estimate over a measured
            # time; above 1 when the OS ran the process less than its Ps
            # were busy, on a crowded machine).
            if self.impl.runtime == "go":
                rs = runtime_stats.go_window(l.metrics, l.gclog, self.cluster.starts[i], t0, t1)
                rs["gc_cpu_share"] = _div(rs.get("gc_cpu_s"), rs.get("total_cpu_s"))
                rs["gc_of_process_cpu"] = _div(rs.get("gc_cpu_s"), cpu)
                rs["gc_active_share"] = _div(rs["mark_wall_ms"] / 1e3, window)
            elif self.impl.runtime == "java":
                rs = runtime_stats.java_window(l.metrics, l.gclog, t0, t1)
                rs["gc_cpu_s"] = runtime_stats.delta(cpu_series, f"gc{i}", t0, t1)
                procs = self.cluster.procs_hint or os.cpu_count()
                rs["gc_cpu_share"] = _div(rs["gc_cpu_s"], window * procs)
                rs["gc_of_process_cpu"] = _div(rs["gc_cpu_s"], cpu)
            elif l.calibrate:
                rs = runtime_stats.stutter_alloc(l.calibrate, t0, t1)
            reps.append({"id": i, "role": "leader" if i == run["leader_before"] else "follower",
                         "cpu_s": cpu, "cpu_us_per_op": _div(cpu, ops, 1e6),
                         "alloc_bytes_per_op": _div(rs.get("alloc_bytes"), ops),
                         "alloc_objects_per_op": _div(rs.get("alloc_objects"), ops),
                         "alive_after": _alive_after(cpu_series, i), **rs})
        out = {k: v for k, v in run.items() if k != "cpu_samples"}
        out.update({"ops": ops, "window": [t0, t1], "window_s": window, "replicas": reps, "roles": roles(reps)})
        return out


class Sampler:
    """Samples every replica's CPU (and a JVM's collector threads') every
    `period` s while in a `with` block: `samples` in the form
    runtime_stats.at reads, fields cpu<i> and gc<i>."""

    def __init__(self, cluster, period=0.1):
        self.cluster, self.period = cluster, period
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _take(self):
        fields = {}
        for i, s in enumerate(self.cluster.snapshot()):
            if s["cpu_s"] is not None:
                fields[f"cpu{i}"] = s["cpu_s"]
            if s.get("gc_threads_cpu_s") is not None:
                fields[f"gc{i}"] = s["gc_threads_cpu_s"]
            fields[f"alive{i}"] = 1.0 if s["alive"] else 0.0
        self.samples.append((time.time(), "tick", fields))

    def _loop(self):
        while not self._stop.wait(self.period):
            self._take()

    def __enter__(self):
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._take()
        return False


def _alive_after(samples, i):
    return bool(samples and samples[-1][2].get(f"alive{i}"))


def roles(reps):
    """Leader and mean-follower figures of the numeric fields."""
    lead = [r for r in reps if r["role"] == "leader"]
    foll = [r for r in reps if r["role"] == "follower"]
    keys = ("cpu_us_per_op", "alloc_bytes_per_op", "alloc_objects_per_op", "gc_cpu_share", "gc_of_process_cpu",
            "gc_cpu_s",
            "cycles", "pauses", "pause_total_ms", "pause_max_ms", "survivor_fraction", "gc_active_share")

    def mean(rs, k):
        v = [r[k] for r in rs if isinstance(r.get(k), (int, float))]
        return sum(v) / len(v) if v else None
    return {"leader": {k: mean(lead, k) for k in keys}, "follower": {k: mean(foll, k) for k in keys}}


def _sub(a, b):
    return None if a is None or b is None else a - b


def _div(a, b, scale=1.0):
    return None if a is None or not b else a / b * scale
