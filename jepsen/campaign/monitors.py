"""What a campaign watches while it runs (the leader, each replica's memory
and open files) and the waits and verdicts built on it."""
import datetime
import json
import os
import threading
import time


class LeaderMonitor(threading.Thread):
    """Polls every replica's `status` and records each change of the
    highest-ballot replica that claims to lead (leaders.log): the leader
    changes a campaign caused."""

    def __init__(self, cluster, outdir):
        super().__init__(daemon=True)
        self.c = cluster
        self.stop_ev = threading.Event()
        self.log = open(os.path.join(outdir, "leaders.log"), "a")
        self.seen = []

    def run(self):
        while not self.stop_ev.is_set():
            best = None
            for s in self.c.status():
                if "error" not in s and str(s.get("role", "")).lower().startswith("lead"):
                    if best is None or s.get("ballot", 0) > best.get("ballot", 0):
                        best = s
            if best is not None:
                cur = (best["node"], best.get("ballot", 0))
                if not self.seen or self.seen[-1] != cur:
                    self.seen.append(cur)
                    iso = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
                    self.log.write(f"{iso} leader {cur[0]} ballot {cur[1]}\n")
                    self.log.flush()
            self.stop_ev.wait(0.3)

    def changes(self):
        return max(0, len(self.seen) - 1)


class ResourceMonitor(threading.Thread):
    """Samples every replica process's resident memory and open files every
    2 s (resources.ndjson): what a soak must show flat after warm-up."""

    def __init__(self, cluster, outdir):
        super().__init__(daemon=True)
        self.c = cluster
        self.stop_ev = threading.Event()
        self.path = os.path.join(outdir, "resources.ndjson")

    def sample(self, h):
        p = self.c.procs.get(h)
        if p is None or p.poll() is not None:
            return None
        try:
            with open(f"/proc/{p.pid}/status") as f:
                rss = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), None)
            fds = len(os.listdir(f"/proc/{p.pid}/fd"))
        except (OSError, ValueError):
            return None
        if rss is None:
            # No VmRSS line: the process is exiting (a kill -9 of a power
            # cut between the poll above and the read), not a sample.
            return None
        # `ip netns exec` execs the replica in place: the pid is the replica's.
        return {"time": time.time_ns(), "node": h, "pid": p.pid, "rss_kb": rss, "fds": fds}

    def run(self):
        with open(self.path, "a") as out:
            while not self.stop_ev.is_set():
                for h in self.c.topo.nodes:
                    r = self.sample(h)
                    if r:
                        out.write(json.dumps(r) + "\n")
                out.flush()
                self.stop_ev.wait(2.0)


def resources_verdict(outdir, warmup_s):
    """Flat after warm-up: per replica, the median RSS of the last minute is
    at most 1.25x (+8 MiB) the median of the minute after warm-up, and its
    open files at most 16 above the most it had then."""
    path = os.path.join(outdir, "resources.ndjson")
    if not os.path.exists(path):
        return {"valid": False, "summary": "no resources.ndjson"}
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        return {"valid": False, "summary": "no samples"}
    t0 = min(r["time"] for r in rows)
    t1 = max(r["time"] for r in rows)
    w0, w1 = t0 + int(warmup_s * 1e9), t0 + int((warmup_s + 60) * 1e9)
    end0 = t1 - int(60e9)
    errors, parts = [], []
    for h in sorted({r["node"] for r in rows}):
        mine = [r for r in rows if r["node"] == h]
        early = [r for r in mine if w0 <= r["time"] < w1]
        late = [r for r in mine if r["time"] >= end0]
        if not early or not late or end0 <= w1:
            errors.append(f"{h}: too short for a verdict (warm-up {warmup_s:.0f} s, then two minutes at least)")
            continue
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        rss0, rss1 = med([r["rss_kb"] for r in early]), med([r["rss_kb"] for r in late])
        fd0, fd1 = max(r["fds"] for r in early), max(r["fds"] for r in late)
        parts.append(f"{h} RSS {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MiB, files {fd0} -> {fd1}")
        if rss1 > rss0 * 1.25 + 8 * 1024:
            errors.append(f"{h}: RSS grew from {rss0 / 1024:.1f} to {rss1 / 1024:.1f} MiB after warm-up")
        if fd1 > fd0 + 16:
            errors.append(f"{h}: open files grew from {fd0} to {fd1} after warm-up")
    return {"valid": not errors, "summary": "; ".join(parts) or "no replica sampled", "errors": errors}


def wait_for_leader(cluster, secs):
    deadline = time.time() + secs
    while time.time() < deadline:
        if cluster.leader():
            return True
        time.sleep(0.3)
    return False


def collect_status(cluster, secs):
    """Poll until every replica answers with the same last_executed."""
    deadline = time.time() + secs
    sts = []
    while time.time() < deadline:
        sts = cluster.status()
        ok = [s for s in sts if "error" not in s]
        if len(ok) == len(sts) and sts and len({s.get("last_executed") for s in ok}) == 1:
            break
        time.sleep(0.5)
    return sts
