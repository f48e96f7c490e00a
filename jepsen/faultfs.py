"""Replica data directories on faultfs (impl/faultfs), for the `power` nemesis.

Each replica's data directory is a faultfs mount over a store of its own
(`store/<node>/`): writes the replica has not fsynced stay in the faultfs
process's memory. A power cut of a replica is `faultfs cut` of its mount
followed by `kill -9`, so that what it had not synced is gone when it
restarts, as after a real power loss (a plain `kill -9` keeps the page
cache, and with it every unsynced write). Each fsync takes `sync_ms`
before it makes anything durable, as a disk's flush does, so that a cut
can fall while a replica waits for its sync.

The cut comes before the kill (`cut`: the drop, and EIO from then on until
power returns), on the control socket from this process. Killed first, a
replica blocked in a sync dies only once that sync has returned, so a drop
after the kill found the data made durable: on a 2-core machine on
2026-12-07 a replica that acknowledged before its sync was caught in 5 of
9 campaigns that way (docs/notes/2026-12-07-power-sync-latency.md).
"""
import json
import os
import socket
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

    def ask(self, h, line, timeout=60):
        """One request on `h`'s control socket (faultfs/src/control.rs)
        without starting a process: a cut must not wait for one."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.socket(h))
            s.sendall((line + "\n").encode())
            s.shutdown(socket.SHUT_WR)
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        try:
            r = json.loads(reply.decode())
        except ValueError:
            raise RuntimeError(f"faultfs {line}: no reply from {h}'s mount") from None
        if not r.get("ok"):
            raise RuntimeError(f"faultfs {line}: {r.get('error')}")
        return r

    def cut(self, h, torn_seed=None):
        """Power cut of `h`'s disk while the replica may still run: every
        write it had not synced is lost (with a seed, its last unsynced
        write is torn), and every change it tries from then on fails with
        EIO, a sync under way included, until `power_on`. Kill the replica
        after it."""
        r = self.ask(h, "cut" if torn_seed is None else f"cut torn {torn_seed}").get("dropped", {})
        torn = r.get("torn")
        return (f"lost {r.get('lost_bytes', 0)} unsynced bytes, {r.get('lost_dirs', 0)} unsynced directories"
                + (f", last write torn after {torn[2]} of {torn[3]} bytes" if torn else ""))

    def power_on(self, h):
        """Ends `h`'s cut (`fail off`): before the replica restarts."""
        if h in self.mounted:
            self.ask(h, "fail off")

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
