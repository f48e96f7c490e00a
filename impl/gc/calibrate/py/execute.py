"""Run one spec of the plan and keep what the derivations need from it."""

import json
import math
import os
import subprocess
import tempfile

import g1log
import gctrace

TIMEOUT_S = 900


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().strip()


def _round(x, digits=4):
    return float(f"{x:.{digits}g}") if isinstance(x, float) else x


def _columns(rows, keys):
    """Per-cycle records as compact columns (rounded), for the results file."""
    return {k: [_round(r.get(k, 0)) for r in rows] for k in keys}


class Runner:
    def __init__(self, go_bins, java_classes, nice):
        self.go_bins = go_bins  # GOEXPERIMENT ("" for the default collector) -> binary
        self.java_classes = java_classes
        self.nice = ["nice", "-n", str(nice)] if nice is not None else []
        self._live_cache = {}  # (live MiB, value) -> live-mode output

    def run(self, spec):
        rec = {"spec": spec, "loadavg_before": loadavg()}
        try:
            if spec["rt"] == "go":
                self._go(spec, rec)
            else:
                self._java(spec, rec)
        except (subprocess.SubprocessError, ValueError, KeyError, OSError) as e:
            rec["error"] = f"{type(e).__name__}: {e}"
        rec["loadavg_after"] = loadavg()
        return rec

    # ---- Go -----------------------------------------------------------------

    def _go(self, spec, rec):
        args = [self.go_bins[spec.get("gc", "")], "-mode", spec["mode"], "-live-mib", str(spec["live"]),
                "-value", str(spec.get("value", 500)), "-procs", str(spec["procs"])]
        if spec["mode"] == "forced":
            args += ["-cycles", str(spec["cycles"])]
        else:
            args += ["-gogc", str(spec["gogc"]), "-limit-ratio", str(spec["ratio"]),
                     "-alloc-mib-s", str(spec["alloc"]), "-warmup", f"{spec['warmup']}s",
                     "-measure", f"{spec['measure']}s", "-probe-rate", str(spec.get("probe", 0))]
        env = dict(os.environ, GODEBUG="gctrace=1")
        p = subprocess.run(self.nice + args, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        if p.returncode != 0:
            raise subprocess.SubprocessError(f"exit {p.returncode}: {p.stderr[-500:]}")
        out = json.loads(p.stdout)
        rec["out"] = out
        cycles = gctrace.parse(p.stderr)
        if spec["mode"] == "forced":
            forced = [c for c in cycles if c["forced"]][-spec["cycles"]:]
            rec["cycles"] = _columns(forced, ["mark_wall_ms", "cpu_assist_ms", "cpu_background_ms", "cpu_idle_ms", "live_mib", "heap_start_mib"])
        else:
            w = out["window"]
            win = gctrace.in_window(cycles, w["start_s"], w["end_s"])
            rec["cycles"] = _columns(win, [
                "at_s", "stw_sweep_term_ms", "mark_wall_ms", "stw_mark_term_ms", "cpu_assist_ms",
                "cpu_background_ms", "cpu_idle_ms", "heap_start_mib", "heap_end_mib", "live_mib", "goal_mib"])

    # ---- Java ---------------------------------------------------------------

    def _java_cmd(self, heap_mib, pgt, log, args):
        return self.nice + [
            "java", "-cp", self.java_classes, "-XX:+UseG1GC", f"-Xms{heap_mib}m", f"-Xmx{heap_mib}m",
            f"-XX:ParallelGCThreads={pgt}", "-XX:ConcGCThreads=1", f"-XX:ActiveProcessorCount={pgt}",
            f"-Xlog:gc*=info,gc+plab=debug,gc+ergo+cset=debug:file={log}:uptime,level,tags",
            "Calib"] + args

    def _java_run(self, heap_mib, pgt, args):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "gc.log")
            p = subprocess.run(self._java_cmd(heap_mib, pgt, log, args), capture_output=True, text=True, timeout=TIMEOUT_S)
            text = open(log).read() if os.path.exists(log) else ""
        if p.returncode != 0 or not p.stdout.strip():
            raise subprocess.SubprocessError(f"exit {p.returncode}: {(p.stderr or p.stdout)[-500:]}")
        return json.loads(p.stdout), text

    def java_live(self, live, value):
        """Entries and live bytes of a heap built for `live` MiB, measured once
        with a roomy heap, so that -Xmx can be a multiple of the live heap and
        every run at that size holds the same map."""
        key = (live, value)
        if key not in self._live_cache:
            out, _ = self._java_run(max(512, 4 * live + 256), 2, [
                "--mode", "live", "--live-mib", str(live), "--value", str(value)])
            self._live_cache[key] = out["heap"]
        return self._live_cache[key]

    def _java(self, spec, rec):
        value = spec.get("value", 500)
        heap = self.java_live(spec["live"], value)
        live = heap["live_bytes"]
        common = ["--entries", str(heap["entries"]), "--value", str(value)]
        if spec["mode"] == "forced":
            heap_mib = int(math.ceil(3 * live / 2**20)) + 64
            out, text = self._java_run(heap_mib, spec["pgt"], common + [
                "--mode", "forced", "--cycles", str(spec["cycles"]), "--garbage", "1"])
            pauses, _, region = g1log.parse(text)
            full = [p for p in pauses if p["kind"] == "Full" and p["cause"] == "System.gc()"][-spec["cycles"]:]
            rec["full"] = _columns(full, ["pause_ms", "heap_before_mib", "heap_after_mib", "user_s", "sys_s", "real_s"])
        else:
            heap_mib = int(math.ceil(spec["ratio"] * live / 2**20))
            out, text = self._java_run(heap_mib, spec["pgt"], common + [
                "--mode", "steady", "--alloc-mib-s", str(spec["alloc"]), "--warmup-s", str(spec["warmup"]),
                "--measure-s", str(spec["measure"]), "--probe-rate", str(spec.get("probe", 0))])
            pauses, conc, region = g1log.parse(text)
            w = out["window"]
            win = g1log.in_window(pauses, w["start_s"], w["end_s"])
            for p in win:
                p["eden_before"] = p.get("eden_regions", (0, 0))[0]
                p["old_before"], p["old_after"] = p.get("old_regions", (0, 0))
                p["evac_failure"] = 1 if p.get("evacuation_failure") else 0
            rec["pauses"] = {
                "kind": [p["kind"] for p in win],
                **_columns(win, ["end_s", "pause_ms", "copied_bytes", "promoted_or_old_bytes", "heap_before_mib",
                                 "heap_after_mib", "heap_capacity_mib", "eden_before", "old_before", "old_after",
                                 "old_cset_regions", "evac_failure"]),
            }
            cw = g1log.in_window(conc, w["start_s"], w["end_s"])
            rec["conc"] = _columns(cw, ["end_s", "Concurrent Mark From Roots", "Concurrent Mark Cycle", "Concurrent Rebuild Remembered Sets"])
            rec["conc"]["undo"] = [1 if "Concurrent Undo Cycle" in c else 0 for c in cw]
            rec["heap_mib"] = heap_mib
        out["heap"]["live_bytes"] = live
        out["region_bytes"] = region
        rec["out"] = out
