"""Independent `jepsen/run --seed N` campaigns on the workers, their result
folders brought back (Dask carries each as a compressed tar).

Campaigns need root, nftables and a built checkout on the worker's host
(the replica, the Go checker), so unlike the simulator they run from a
checkout at the same path on every host (`--repo`, default this one).
Two campaigns on one host do not collide: each names its namespaces and
veths with a random prefix (jepsen/run, `sj` + 4 hex digits) and keeps
its addresses inside its own switch namespace."""

import io
import json
import os
import tarfile
import tempfile

from . import jobs
from .fanout import fan_out, progress


def campaign_job(repo, seed, extra, timeout):
    with tempfile.TemporaryDirectory(prefix="fleet-campaign-") as d:
        out = os.path.join(d, f"s{seed}")
        r = jobs.run([os.path.join(repo, "jepsen", "run"), "--seed", str(seed), "--out", out, *extra],
                     cwd=repo, timeout=timeout)
        buf = io.BytesIO()
        if os.path.isdir(out):
            with tarfile.open(fileobj=buf, mode="w:gz") as t:
                t.add(out, arcname=f"s{seed}")
        r["results"] = buf.getvalue()
        r["stdout"] = r["stdout"][-4000:]
        return r


def judge_campaign(result):
    """('pass'|'fail'|'error', detail) from the exit code and verdict.json."""
    verdict = None
    if result["results"]:
        with tarfile.open(fileobj=io.BytesIO(result["results"]), mode="r:gz") as t:
            for m in t.getmembers():
                if m.name.endswith("/verdict.json"):
                    verdict = json.load(t.extractfile(m))
    if verdict is None:
        tail = result["stdout"].strip().splitlines()[-2:]
        return "error", f"exit {result['rc']}, no verdict: {' | '.join(tail)}"
    checkers = verdict.get("checkers", {})
    infra = [k for k in ("campaign", "cleanup") if not checkers.get(k, {}).get("valid", True)]
    if infra:
        return "error", "; ".join(f"{k}: {checkers[k].get('summary', '')}" for k in infra)
    failed = sorted(k for k, r in checkers.items() if not r.get("valid", True))
    if result["rc"] == 0 and verdict.get("valid"):
        return "pass", f"{verdict.get('operations', '?')} operations"
    return "fail", "checkers failed: " + (", ".join(failed) or f"exit {result['rc']}")


def run(client, outcome, repo, seeds, extra, collect, timeout):
    todo = [(f"campaign seed {s}", campaign_job, (repo, s, list(extra), timeout)) for s in seeds]

    def judge(name, result):
        seed = int(name.rsplit(" ", 1)[1])
        where = f"on {result['host']}"
        if result["results"]:
            os.makedirs(collect, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(result["results"]), mode="r:gz") as t:
                if hasattr(tarfile, "data_filter"):
                    t.extractall(collect, filter="data")
                else:
                    t.extractall(collect)
        verdict, detail = judge_campaign(result)
        folder = os.path.join(collect, f"s{seed}")
        if verdict == "fail":
            outcome.fail(seed, f"FAIL campaign seed {seed} {where}: {detail}; results {folder}")
        elif verdict == "error":
            outcome.error(f"campaign seed {seed} {where}: {detail}")
        else:
            progress(f"campaign seed {seed}: pass, {detail}, {result['seconds']:.0f} s {where}; results {folder}")

    return fan_out(client, todo, outcome, judge)
