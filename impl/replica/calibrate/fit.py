#!/usr/bin/env python3
"""Fits the simulator's service and allocation tables to the turns that
`run.py` recorded: non-negative least squares over protocol-loop turns.

  impl/replica/calibrate/fit.py results/calibrate [more dirs...] [--json fit.json]

The unit of data is a turn of a replica's protocol loop. Its cost is the
loop thread's CPU time (bytes allocated by the process) from the turn's
start to the next turn's start, which also holds the runtime's other tasks
on that thread: encoding and writing this turn's sends and replies, and
reading and decoding the next turn's inputs. So the model is

  cost(turn k) = wakeup
               + sum over k's inputs of their kind's cost
               + sum over k's outputs of their kind's cost (send, reply, persist)
               + per_kb x KiB of keys and values carried in and out
               + executed x requests executed
               + read_request x client requests of turn k+1
               + read_message x peer messages of turn k+1
               + read_kb x KiB those carry

and the simulator, which handles one input at a time, charges an input
its kind's cost plus the reading costs (read_*), its outputs theirs, and
`wakeup` once per turn (docs/calibration.md). Quality is judged where the
simulator needs it: per 100-ms window and per run, predicted vs measured.
"""

import argparse
import csv
import json
import os
import sys

import numpy as np

KINDS = ["Prepare", "Promise", "Accept", "Accepted", "Heartbeat", "HeartbeatReply", "CatchUp", "InstallSnapshot",
         "ReadProbe", "ReadProbeAck"]
# The per-turn cost of the meter's own readings (two thread-CPU clock reads
# and two counter reads; `cargo run --release -p stutter-replica --example
# meter_cost`), subtracted from the fitted wake-up.
METER_US = 1.6


def nnls(a, b, tol=1e-10):
    """min ||a x - b|| subject to x >= 0 (Lawson and Hanson's active set)."""
    ata, atb = a.T @ a, a.T @ b
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, bool)
    w = atb - ata @ x
    for _ in range(10 * n):
        free = ~passive
        if not free.any() or w[free].max() <= tol * max(1.0, abs(w).max()):
            break
        passive[np.argmax(np.where(free, w, -np.inf))] = True
        while True:
            z = np.zeros(n)
            idx = np.where(passive)[0]
            z[idx] = np.linalg.lstsq(ata[np.ix_(idx, idx)], atb[idx], rcond=None)[0]
            if (z[idx] > 0).all():
                x = z
                break
            neg = idx[z[idx] <= 0]
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0
        w = atb - ata @ x
    return x


def load(path):
    with open(path) as f:
        r = csv.reader(f)
        head = next(r)
        d = np.array([row for row in r], dtype=float)
    return {c: d[:, i] for i, c in enumerate(head)}


def features(a, idx, cpu):
    """The model's columns for turns `idx` (each with a next turn)."""
    nxt = idx + 1
    f = {"wakeup": np.ones(len(idx)),
         "get": a["req_get"][idx],
         "write": a["req_put"][idx] + a["req_del"][idx] + a["req_cas"][idx]}
    for k in KINDS:
        f["msg_" + k] = a["in_" + k][idx]
    f["persisted"] = a["persisted"][idx]
    f["timer"] = a["timer_heartbeat"][idx] + a["timer_election"][idx]
    f["send"] = sum(a["send_" + k][idx] for k in KINDS)
    f["reply"] = a["replies"][idx]
    f["persist"] = a["persists"][idx]
    f["kb"] = (a["req_bytes"][idx] + a["msg_in_bytes"][idx] + a["send_bytes"][idx] + a["persist_bytes"][idx]) / 1024
    f["executed"] = a["executed_reqs"][idx]
    if cpu:
        f["read_request"] = a["req_get"][nxt] + a["req_put"][nxt] + a["req_del"][nxt] + a["req_cas"][nxt]
        f["read_message"] = sum(a["in_" + k][nxt] for k in KINDS)
        f["read_kb"] = (a["req_bytes"][nxt] + a["msg_in_bytes"][nxt]) / 1024
    else:
        # Allocation, in the simulator's table's terms (AllocTable): per
        # client request, per peer message, timer and durability notice,
        # per byte of keys and values an input carries (decoded copies; an
        # input is decoded before its turn), per request executed, per
        # reply and per message sent (encoded frames).
        f = {"request": a["req_get"][idx] + a["req_put"][idx] + a["req_del"][idx] + a["req_cas"][idx],
             "message": sum(a["in_" + k][idx] for k in KINDS),
             "timer": a["timer_heartbeat"][idx] + a["timer_election"][idx],
             "persisted": a["persisted"][idx],
             "payload_kb": (a["req_bytes"][nxt] + a["msg_in_bytes"][nxt]) / 1024,
             "executed": a["executed_reqs"][idx],
             "reply": a["replies"][idx],
             "send": sum(a["send_" + k][idx] for k in KINDS)}
    return f


def runs_of(dirs):
    for d in dirs:
        with open(os.path.join(d, "runs.jsonl")) as f:
            for line in f:
                run = json.loads(line)
                if not os.path.exists(os.path.join(d, f"turns-{run['tag']}-0.csv")):
                    continue
                run["dir"] = d
                yield run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", help="write the fit here")
    a = ap.parse_args()

    data = []
    for run in runs_of(a.dirs):
        leader = next((s["id"] for s in run["status"] if s.get("role") == "leader"), None)
        for i in range(3):
            t = load(os.path.join(run["dir"], f"turns-{run['tag']}-{i}.csv"))
            m = (t["wall_start_ns"] >= run["measure_from_ns"]) & (t["wall_start_ns"] < run["measure_to_ns"])
            idx = np.where(m)[0]
            idx = idx[idx < len(m) - 1]
            if len(idx) < 100:
                continue
            data.append({
                "run": run, "replica": i, "leader": i == leader,
                "cpu_f": features(t, idx, True), "alloc_f": features(t, idx, False),
                "cpu": (t["cpu_start_ns"][idx + 1] - t["cpu_start_ns"][idx]) / 1e3,
                "alloc": t["alloc_start"][idx + 1] - t["alloc_start"][idx],
                "win": ((t["wall_start_ns"][idx] - run["measure_from_ns"]) // 100_000_000).astype(int),
                "span_s": (t["wall_start_ns"][idx[-1] + 1] - t["wall_start_ns"][idx[0]]) / 1e9,
                "turns": len(idx),
                "wal_cpu_ns": t["wal_cpu_ns"][idx[-1]] - t["wal_cpu_ns"][idx[0]],
                "wal_syncs": t["wal_syncs"][idx[-1]] - t["wal_syncs"][idx[0]],
                "wal_bytes": t["wal_bytes"][idx[-1]] - t["wal_bytes"][idx[0]],
            })
    if not data:
        sys.exit("no turns found")

    result = {"rows": int(sum(d["turns"] for d in data)), "runs": sorted({d["run"]["tag"] for d in data})}
    for what, fkey in (("cpu", "cpu_f"), ("alloc", "alloc_f")):
        names = [n for n in data[0][fkey] if sum(d[fkey][n].sum() for d in data) > 0]
        x = np.vstack([np.column_stack([d[fkey][n] for n in names]) for d in data])
        y = np.concatenate([d[what] for d in data])
        b = nnls(x, y)
        r = y - x @ b
        per_turn_r2 = 1 - (r ** 2).sum() / ((y - y.mean()) ** 2).sum()
        wins_y, wins_p, per_run = [], [], []
        for d in data:
            p = np.column_stack([d[fkey][n] for n in names]) @ b
            nw = d["win"].max() + 1
            wy, wp = np.bincount(d["win"], d[what], nw), np.bincount(d["win"], p, nw)
            ok = wy > 0
            wins_y.append(wy[ok])
            wins_p.append(wp[ok])
            per_run.append({"run": d["run"]["tag"], "rate": d["run"]["rate"], "replica": d["replica"],
                            "leader": d["leader"], "measured": float(d[what].sum()), "predicted": float(p.sum()),
                            "per_s": float(d[what].sum() / d["span_s"])})
        wy, wp = np.concatenate(wins_y), np.concatenate(wins_p)
        rel = np.abs(wy - wp) / wy
        ratios = np.array([p["predicted"] / p["measured"] for p in per_run])
        result[what] = {
            "coef": dict(zip(names, [float(v) for v in b])),
            "per_turn_r2": float(per_turn_r2),
            "window_r2": float(1 - ((wy - wp) ** 2).sum() / ((wy - wy.mean()) ** 2).sum()),
            "window_rel_err_p50": float(np.percentile(rel, 50)),
            "window_rel_err_p90": float(np.percentile(rel, 90)),
            "run_ratio_min": float(ratios.min()), "run_ratio_max": float(ratios.max()),
            "per_run": per_run,
        }

    # The log thread: CPU per group commit and per KiB written.
    xs = np.array([[d["wal_syncs"], d["wal_bytes"] / 1024] for d in data])
    ys = np.array([d["wal_cpu_ns"] / 1e3 for d in data])
    wb = nnls(xs, ys)
    result["wal"] = {"us_per_sync": float(wb[0]), "us_per_kb": float(wb[1]),
                     "per_run": [{"run": d["run"]["tag"], "replica": d["replica"], "cpu_s": d["wal_cpu_ns"] / 1e9,
                                  "syncs": int(d["wal_syncs"]), "mb": d["wal_bytes"] / 2 ** 20} for d in data]}
    report(result)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


def report(res):
    print(f"{res['rows']} turns from runs {', '.join(res['runs'])}\n")
    for what, unit in (("cpu", "µs of loop-thread CPU"), ("alloc", "bytes allocated")):
        r = res[what]
        print(f"## {what}: {unit}")
        for n, v in r["coef"].items():
            print(f"  {n:>20} {v:10.2f}")
        print(f"  R² per turn {r['per_turn_r2']:.3f}; per 100-ms window {r['window_r2']:.3f}, "
              f"|error| p50 {100 * r['window_rel_err_p50']:.1f} % p90 {100 * r['window_rel_err_p90']:.1f} %; "
              f"per run predicted/measured {r['run_ratio_min']:.3f}-{r['run_ratio_max']:.3f}")
        for p in r["per_run"]:
            print(f"    {p['run']:>10} replica {p['replica']}{' (leader)' if p['leader'] else '         '} "
                  f"{p['per_s']:12.0f}/s measured, predicted/measured {p['predicted'] / p['measured']:.3f}")
        print()
    w = res["wal"]
    print(f"## log thread: {w['us_per_sync']:.1f} µs per group commit + {w['us_per_kb']:.2f} µs per KiB\n")
    c, al = res["cpu"]["coef"], res["alloc"]["coef"]
    g = lambda d, k: d.get(k, 0.0)
    print("## simulator tables (sim/src/calibration.rs)")
    read_req, read_msg = g(c, "read_request"), g(c, "read_message")
    print(f"  wakeup {max(0.0, g(c, 'wakeup') - METER_US):.2f} (fitted {g(c, 'wakeup'):.2f} - meter {METER_US})")
    print(f"  get {g(c, 'get') + read_req:.2f}  write {g(c, 'write') + read_req:.2f}")
    for k in KINDS:
        if "msg_" + k in c:
            print(f"  {k} {g(c, 'msg_' + k) + read_msg:.2f}")
    print(f"  timer {g(c, 'timer'):.2f} persisted {g(c, 'persisted'):.2f} send {g(c, 'send'):.2f} reply {g(c, 'reply'):.2f} "
          f"persist {g(c, 'persist'):.2f} input_kb {g(c, 'kb') + g(c, 'read_kb'):.2f} output_kb {g(c, 'kb'):.2f} "
          f"executed {g(c, 'executed'):.2f}")
    print(f"  ALLOC: client_request {g(al, 'request'):.0f} message {g(al, 'message'):.0f} timer {g(al, 'timer'):.0f} "
          f"persisted {g(al, 'persisted'):.0f} per_payload_byte {g(al, 'payload_kb') / 1024:.3f} "
          f"executed {g(al, 'executed'):.0f} reply {g(al, 'reply'):.0f} send {g(al, 'send'):.0f}")


if __name__ == "__main__":
    main()
