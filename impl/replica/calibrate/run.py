#!/usr/bin/env python3
"""Measures the real replica for the simulator's calibration.

For each offered rate: a fresh 3-replica cluster (ports 7701-7713) started
with `replica --calibrate`, preloaded, then driven by `bench` (open loop,
workload A, 500-byte values, 4 connections x 16 logical clients = the
simulator study's 64 clients, 1,000 keys). Writes into OUT:

  turns-<rate>-<run>-<id>.csv   one line per protocol-loop turn (replica --calibrate)
  runs.jsonl                    per run: bench's result, the measured window,
                                per-thread CPU of every replica over it, load average

  impl/replica/calibrate/run.py --out results/calibrate --rates 2000,5000,10000,20000 \
      --repeat 2 --duration 20

Then `fit.py OUT` fits the tables and `compare.py` sets the simulator
beside the real cluster (docs/calibration.md).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.path.join(ROOT, "target", "release")

CONFIG = """\
[[replica]]
id = 0
peer_addr = "127.0.0.1:7701"
client_addr = "127.0.0.1:7711"
[[replica]]
id = 1
peer_addr = "127.0.0.1:7702"
client_addr = "127.0.0.1:7712"
[[replica]]
id = 2
peer_addr = "127.0.0.1:7703"
client_addr = "127.0.0.1:7713"

# The protocol settings of examples/local-3.toml (and of the simulator's
# study, sim/src/study.rs).
[protocol]
heartbeat_ms = 50
election_timeout_ms = 300
election_jitter_ms = 300
window = 16
max_batch = 256

[storage]
sync_interval_us = 1000

[security]
cluster_secret = "calibration cluster only, not a secret"
"""



def config_with_gc(model, limit_mib, dataset_mib, coordinated=False):
    """CONFIG with a `[gc]` section running collector `model` (none: CONFIG
    itself) on one core's worth of marking, its memory limit and modelled
    data in MiB, with or without Blade-style coordination."""
    if model == "none":
        return CONFIG
    return CONFIG + f"""
[gc]
model = "{model}"
memory_limit_mib = {limit_mib}
dataset_mib = {dataset_mib}
cores = 1.0
coordinated = {"true" if coordinated else "false"}
"""


CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """{thread name: [CPU s (user + system), s on a CPU, s waiting for one]}
    of a process, summed by name (the last two from schedstat: how long
    the threads were runnable but not running is what sharing two cores
    with everyone else costs them)."""
    out = {}
    task = f"/proc/{pid}/task"
    try:
        tids = os.listdir(task)
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"{task}/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # fields[0] is state (field 3); utime and stime are fields 14, 15.
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        try:
            with open(f"{task}/{tid}/schedstat") as f:
                run_ns, wait_ns, _ = (int(x) for x in f.read().split())
        except (FileNotFoundError, ValueError):
            run_ns, wait_ns = 0, 0
        o = out.setdefault(name, [0.0, 0.0, 0.0])
        o[0] += cpu
        o[1] += run_ns / 1e9
        o[2] += wait_ns / 1e9
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def start_cluster(out, tag, config, extra_args):
    procs = []
    for i in range(3):
        data = os.path.join(out, f"data-{tag}-{i}")
        subprocess.run(["rm", "-rf", data], check=True)
        args = [os.path.join(BIN, "replica"), "--config", config, "--id", str(i), "--data-dir", data]
        args += [a.format(out=out, tag=tag, id=i) for a in extra_args]
        log = open(os.path.join(out, f"replica-{tag}-{i}.log"), "w")
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
    for _ in range(100):
        r = subprocess.run([os.path.join(BIN, "kv"), "--config", config, "--timeout", "1", "put", "probe", "ready"],
                           capture_output=True)
        if r.returncode == 0:
            return procs
        time.sleep(0.2)
    stop_cluster(procs)
    sys.exit("no leader after 20 s")


def stop_cluster(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def status(config):
    r = subprocess.run([os.path.join(BIN, "kv"), "--config", config, "status"], capture_output=True, text=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def bench(config, rate, duration, warmup, out_jsonl, keys, preload):
    args = [os.path.join(BIN, "bench"), "--config", config, "--rate", str(rate), "--duration", f"{duration}s",
            "--warmup", f"{warmup}s", "--keys", str(keys), "--connections", "4", "--window", "16",
            "--workload", "a", "--value-size", "500", "--out", out_jsonl]
    if not preload:
        args.append("--no-preload")
    r = subprocess.run(args, capture_output=True, text=True)
    return r


def measure(out, tag, rate, a, extra_args=(), config_text=CONFIG):
    """One run at `rate`: returns its record (also appended to runs.jsonl)."""
    config = os.path.join(out, f"cluster-{tag}.toml")
    with open(config, "w") as f:
        f.write(config_text)
    procs = start_cluster(out, tag, config, list(extra_args))
    try:
        # Preload the keys and warm the cluster up (not measured).
        pre = bench(config, min(rate, 5000), 2, 0, os.path.join(out, "preload.jsonl"), a.keys, True)
        if pre.returncode != 0:
            sys.exit(f"preload failed: {pre.stderr}")
        load_before = loadavg()
        cpu_before = [thread_cpu(p.pid) for p in procs]
        t_start = time.time_ns()
        jsonl = os.path.join(out, "bench.jsonl")
        n_before = sum(1 for _ in open(jsonl)) if os.path.exists(jsonl) else 0
        r = bench(config, rate, a.duration, a.warmup, jsonl, a.keys, False)
        t_end = time.time_ns()
        cpu_after = [thread_cpu(p.pid) for p in procs]
        load_after = loadavg()
        st = status(config)
    finally:
        stop_cluster(procs)
        # The logs' preallocated segments take hundreds of MB a run.
        for i in range(3):
            subprocess.run(["rm", "-rf", os.path.join(out, f"data-{tag}-{i}")], check=False)
    lines = open(jsonl).read().splitlines()
    result = json.loads(lines[n_before]) if len(lines) > n_before else None
    # The measured window: after bench's warm-up (it starts 20 ms after
    # its own start, which follows process start-up: a few ms).
    m_from = t_start + int((a.warmup + 0.05) * 1e9)
    m_to = m_from + int(a.duration * 1e9)
    threads = []
    for b, e in zip(cpu_before, cpu_after):
        threads.append({k: [round(v - w, 4) for v, w in zip(e[k], b.get(k, [0.0, 0.0, 0.0]))] for k in e})
    rec = {
        "tag": tag, "rate": rate, "duration": a.duration, "warmup": a.warmup,
        "bench_wall_s": (t_end - t_start) / 1e9, "measure_from_ns": m_from, "measure_to_ns": m_to,
        "bench": result, "bench_stdout": r.stdout[-2000:], "bench_rc": r.returncode,
        "thread_cpu_s": threads, "loadavg_before": load_before, "loadavg_after": load_after,
        "status": st, "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    with open(os.path.join(out, "runs.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "calibrate"))
    ap.add_argument("--rates", default="2000,5000,10000,20000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not a.no_build:
        subprocess.run(["nice", "-n", "19", "cargo", "build", "--release", "--locked", "-q",
                        "-p", "stutter-replica", "-p", "stutter-bench"], cwd=ROOT, check=True)
    rates = [float(r) for r in a.rates.split(",")]
    for rep in range(a.repeat):
        for rate in rates:
            tag = f"{int(rate)}-{rep}"
            rec = measure(a.out, tag, rate, a, ["--calibrate", "{out}/turns-{tag}-{id}.csv"])
            b = rec["bench"] or {}
            cpu = [round(sum(v[0] for v in t.values()), 2) for t in rec["thread_cpu_s"]]
            print(f"{tag}: achieved {b.get('achieved', 0):.0f}/s p99 {b.get('p99_ms', 0):.2f} ms, "
                  f"replica CPU s {cpu}, load {rec['loadavg_before']}", flush=True)


if __name__ == "__main__":
    main()
