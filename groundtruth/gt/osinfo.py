"""What the harness reads from the kernel: CPU time of processes and their
threads (/proc), process start times, and cgroup v1 groups that limit a
replica's memory and pin it to cores."""

import os
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
CGROUP_V1 = "/sys/fs/cgroup"


def _stat_fields(path):
    with open(path) as f:
        s = f.read()
    name = s[s.index("(") + 1: s.rindex(")")]
    return name, s[s.rindex(")") + 2:].split()


def process_cpu(pid):
    """User + system CPU seconds of a process (all its threads), or None."""
    try:
        _, f = _stat_fields(f"/proc/{pid}/stat")
    except (OSError, ValueError):
        return None
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(f[11]) + int(f[12])) / CLK_TCK


def thread_cpu(pid):
    """{thread name: CPU seconds} of a process, threads summed by name."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            name, f = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        except (OSError, ValueError):
            continue
        out[name] = out.get(name, 0.0) + (int(f[11]) + int(f[12])) / CLK_TCK
    return out


def start_unix(pid):
    """When the process started, in Unix seconds (10 ms grain)."""
    _, f = _stat_fields(f"/proc/{pid}/stat")
    since_boot = int(f[19]) / CLK_TCK  # field 22: starttime
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def machine_state():
    mem = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            mem[k] = int(v.split()[0]) * 1024
    return {"loadavg": loadavg(), "cpus": os.cpu_count(),
            "mem_available_gib": round(mem["MemAvailable"] / 2**30, 1)}


class CgroupError(Exception):
    pass


class Group:
    """One cgroup v1 group under the memory and cpuset hierarchies,
    /sys/fs/cgroup/{memory,cpuset}/stutter-gt/<name>."""

    def __init__(self, name, memory_limit=None, cpus=None):
        self.name = name
        self.mem = os.path.join(CGROUP_V1, "memory", "stutter-gt", name)
        self.cpuset = os.path.join(CGROUP_V1, "cpuset", "stutter-gt", name)
        if not os.path.isdir(os.path.join(CGROUP_V1, "memory")):
            raise CgroupError("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory "
                              "(the harness needs cgroup v1 and root)")
        for d in (os.path.dirname(self.mem), self.mem):
            os.makedirs(d, exist_ok=True)
        self._cpuset_ready = False
        if memory_limit is not None:
            self._write(self.mem, "memory.limit_in_bytes", str(int(memory_limit)))
        if cpus is not None:
            self.set_cpus(cpus)

    @staticmethod
    def _write(d, f, v):
        try:
            with open(os.path.join(d, f), "w") as fh:
                fh.write(v)
        except OSError as e:
            raise CgroupError(f"writing {v} to {d}/{f}: {e}") from e

    @staticmethod
    def _read(d, f):
        with open(os.path.join(d, f)) as fh:
            return fh.read()

    def _ensure_cpuset(self):
        if self._cpuset_ready:
            return
        parent = os.path.dirname(self.cpuset)
        root = os.path.dirname(parent)
        for d in (parent, self.cpuset):
            os.makedirs(d, exist_ok=True)
            # A new cpuset group starts empty: copy its parent's.
            for f in ("cpuset.cpus", "cpuset.mems"):
                if not self._read(d, f).strip():
                    self._write(d, f, self._read(os.path.dirname(d) if d != parent else root, f).strip())
        self._cpuset_ready = True

    def set_cpus(self, cpus):
        """Pins the group's processes (all their threads) to `cpus` ("0", "1", "0-1")."""
        self._ensure_cpuset()
        self._write(self.cpuset, "cpuset.cpus", cpus)

    def join(self, pid=0):
        """Adds a process (0: the caller; for a preexec_fn)."""
        pid = pid or os.getpid()
        self._write(self.mem, "cgroup.procs", str(pid))
        if self._cpuset_ready:
            self._write(self.cpuset, "cgroup.procs", str(pid))

    def move_cpus(self, pid, cpus):
        """Pins a running process: joins it to this group's cpuset at `cpus`."""
        self.set_cpus(cpus)
        self._write(self.cpuset, "cgroup.procs", str(pid))

    def memory(self):
        """Usage, peak usage (since the last reset), limit hits, OOM kills."""
        def num(f):
            try:
                return int(self._read(self.mem, f).split()[0])
            except (OSError, ValueError, IndexError):
                return None
        oom_kills = None
        try:
            for line in self._read(self.mem, "memory.oom_control").splitlines():
                k, v = line.split()
                if k == "oom_kill":
                    oom_kills = int(v)
        except (OSError, ValueError):
            pass
        return {"usage": num("memory.usage_in_bytes"), "peak": num("memory.max_usage_in_bytes"),
                "failcnt": num("memory.failcnt"), "oom_kills": oom_kills,
                "limit": num("memory.limit_in_bytes")}

    def reset_peak(self):
        try:
            self._write(self.mem, "memory.max_usage_in_bytes", "0")
        except CgroupError:
            pass

    def remove(self):
        """Removes the group (its processes must have exited)."""
        for d in (self.mem, self.cpuset):
            for _ in range(50):
                try:
                    if os.path.isdir(d):
                        os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)
