#!/usr/bin/env python3
"""Checks what `groundtruth/run grid --quick` and `profile --quick` wrote for
stutter (scripts/groundtruth-ci), every Replicant variant skipped for want
of a checkout: the figures are not judged (a busy CI
machine), the harness's work is: every run measured on every replica, the
roles found, the cgroup limit set and not hit, the profile complete and
in the contract's shape.

  check_smoke.py GRID_DIR PROFILE_DIR
"""

import json
import os
import sys
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from gt import impls  # noqa: E402
from gt.build import NO_CHECKOUT  # noqa: E402
from test_profile import CONTRACT  # noqa: E402


def fail(msg):
    sys.exit(f"groundtruth smoke: {msg}")


def check_builds(d):
    """Without a checkout every Replicant variant is skipped, saying why."""
    builds = json.load(open(os.path.join(d, "builds.json")))
    skipped = sorted(n for n, r in builds.items() if r["status"] == "failed" and r["error"].startswith(NO_CHECKOUT))
    if builds.get("stutter", {}).get("status") != "ok" or skipped != sorted(impls.REPLICANTS):
        fail(f"builds: stutter built and every Replicant skipped for want of a checkout expected: {builds}")
    return skipped


def check_grid(d):
    rows = [json.loads(line) for line in open(os.path.join(d, "runs.jsonl"))]
    cells = [r for r in rows if r.get("kind") == "cell"]
    runs = [r for r in rows if r.get("kind") == "run"]
    if len(cells) != 1 or cells[0]["error"]:
        fail(f"one cell without error expected: {[c.get('error') for c in cells]}")
    c = cells[0]
    if c["oom_kills"] or c["died_before_stop"]:
        fail(f"a replica died: {c['oom_kills']} OOM kills, {c['died_before_stop']}")
    if c["cgroup_limit_bytes"] != c["memory_bytes"] + 128 * 2**20:
        fail(f"cgroup limit {c['cgroup_limit_bytes']}")
    if not runs:
        fail("no run")
    for r in runs:
        if r["bench"] is None or r["bench"]["wrong"]:
            fail(f"bench failed or answered wrong at {r['rate']}: {r['bench_output'][-500:]}")
        limits = [m["limit"] for m in r["memory"]]
        if limits != [c["cgroup_limit_bytes"]] * 3:
            fail(f"replicas' cgroup limits {limits}")
        roles = sorted(x["role"] for x in r["replicas"])
        if roles != ["follower", "follower", "leader"]:
            fail(f"roles {roles}")
        for x in r["replicas"]:
            if not x["alive_after"] or not (x["cpu_s"] or 0) > 0 or not (x["cpu_us_per_op"] or 0) > 0:
                fail(f"replica {x['id']} at {r['rate']}: {x}")
        w = r["window"]
        if not (r["t0"] < w[0] < w[1] <= r["t1"] + 1):
            fail(f"measured window {w} outside the run [{r['t0']}, {r['t1']}]")
    with open(os.path.join(d, "table.md")) as f:
        table = f.read()
        if "| stutter | 8× |" not in table:
            fail("table.md has no stutter line")
        if f"Not measured: go-tcp ({NO_CHECKOUT}" not in table:
            fail("table.md does not say why go-tcp was not measured")
    return len(runs)


def check_profile(d):
    t = tomllib.load(open(os.path.join(d, "stutter.toml"), "rb"))
    if t["name"] != "stutter" or t["runtime"] != "none" or "groundtruth/run profile" not in t["measured"]:
        fail(f"profile header {t['name']} {t['runtime']} {t['measured']}")
    for section, fields in CONTRACT.items():
        if section in t and not set(t[section]) <= fields:
            fail(f"[{section}] has fields outside the contract: {set(t[section]) - fields}")
    a, cpu = t["alloc"], t["cpu"]
    # stutter counts its allocation (alloc-count): every figure measured.
    for k in ("leader_read", "leader_write", "follower_write", "leader_idle_per_s"):
        if not a[k] > 0:
            fail(f"alloc.{k} = {a[k]}")
    for k, v in cpu.items():
        if not v > 0:
            fail(f"cpu.{k} = {v}")
    if not t["live"]["bytes_per_key"] >= 523:
        fail(f"live.bytes_per_key = {t['live']['bytes_per_key']} (less than a key and a value)")
    return t


def main():
    skipped = check_builds(sys.argv[1])
    n = check_grid(sys.argv[1])
    t = check_profile(sys.argv[2])
    print(f"groundtruth smoke: Replicant skipped (no checkout): {', '.join(skipped)}; {n} runs of stutter checked; profile: leader {t['alloc']['leader_write']:.0f} B and "
          f"{t['cpu']['leader_write_us']:.0f} µs per write, {t['live']['bytes_per_key']:.0f} live B per key")


if __name__ == "__main__":
    main()
