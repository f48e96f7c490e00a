"""Replica data directories on faultfs (impl/faultfs), for the `power` nemesis.

Each replica's data directory is a faultfs mount over a store of its own
(`store/<node>/`): writes the replica has not fsynced stay in the faultfs
process's memory. A power cut of a replica is `kill -9` followed by
`faultfs drop` of its mount, so that what it had not synced is gone when it
restarts, as after a real power loss (a plain `kill -9` keeps the page
cache, and with it every unsynced write). Each fsync takes `sync_ms`
before it makes anything durable, as a disk's flush does, so that a cut
can fall while a replica waits for its sync.
"""
import json
import os
import subprocess


class DataDisks:
    def __init__(self, faultfs_bin, outdir, nodes, log, sync_ms=0):
        self.bin, self.outdir, self.log = faultfs_bin, outdir, log
        self.sync_ms = sync_ms
        self.mounted = []
        self.nodes = nodes

    def mountpoint(self, h):
        return os.path.join(self.outdir, "data", h)

    def socket(self, h):
        return os.path.join(self.outdir, "faultfs", f"{h}.sock")

    def cmd(self, *args, timeout=60):
        r = subprocess.run([self.bin] + list(args), capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"faultfs {' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
        try:
            return json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {}

    def mount_all(self):
        os.makedirs(os.path.join(self.outdir, "faultfs"), exist_ok=True)
        for h in self.nodes:
            mnt, store = self.mountpoint(h), os.path.join(self.outdir, "store", h)
            os.makedirs(mnt, exist_ok=True)
            os.makedirs(store, exist_ok=True)
            self.cmd("mount", store, mnt, "--socket", self.socket(h),
                     "--log", os.path.join(self.outdir, "logs", f"faultfs-{h}.log"),
                     "--sync-latency-ms", str(self.sync_ms))
            self.mounted.append(h)

    def drop(self, h, torn_seed=None):
        """Loses every write of `h`'s data directory it had not synced; with
        a seed, its last unsynced write is torn. The replica must be dead."""
        args = ["drop", self.mountpoint(h), "--socket", self.socket(h)]
        if torn_seed is not None:
            args += ["--torn", str(torn_seed)]
        r = self.cmd(*args).get("dropped", {})
        torn = r.get("torn")
        return (f"lost {r.get('lost_bytes', 0)} unsynced bytes, {r.get('lost_dirs', 0)} unsynced directories"
                + (f", last write torn after {torn[2]} of {torn[3]} bytes" if torn else ""))

    def unmount_all(self):
        for h in list(self.mounted):
            try:
                self.cmd("unmount", self.mountpoint(h), "--socket", self.socket(h))
                self.mounted.remove(h)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                self.log(f"faultfs unmount {h}: {e}")

    def leftovers(self):
        """faultfs mounts of this run still mounted."""
        data = os.path.join(self.outdir, "data")
        with open("/proc/self/mounts") as f:
            return [line.split()[1] for line in f
                    if line.startswith("faultfs ") and line.split()[1].startswith(data)]
