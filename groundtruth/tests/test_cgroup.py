"""The memory limit has teeth: a process that allocates past its group's
limit is killed, and the group reports the OOM kill the harness records
(needs root and cgroup v1, as the harness does)."""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from gt import osinfo  # noqa: E402

HOG = "b = bytearray(96 << 20); b[::4096] = b'x' * len(b[::4096]); print('survived')"


@unittest.skipUnless(os.geteuid() == 0 and os.path.isdir("/sys/fs/cgroup/memory"), "needs root and cgroup v1")
class MemoryLimitTest(unittest.TestCase):
    def run_in_group(self, limit):
        g = osinfo.Group(f"test-{os.getpid()}-{limit}", memory_limit=limit)
        try:
            p = subprocess.run([sys.executable, "-c", HOG], preexec_fn=g.join, capture_output=True, text=True)
            return p, g.memory()
        finally:
            g.remove()

    def test_a_process_over_the_limit_is_killed_and_counted(self):
        p, mem = self.run_in_group(32 << 20)
        self.assertEqual(p.returncode, -9)
        self.assertEqual(mem["oom_kills"], 1)
        self.assertEqual(mem["limit"], 32 << 20)

    def test_a_process_under_the_limit_runs(self):
        p, mem = self.run_in_group(256 << 20)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "survived"))
        self.assertEqual(mem["oom_kills"], 0)
        self.assertGreater(mem["peak"], 96 << 20)


if __name__ == "__main__":
    unittest.main()
