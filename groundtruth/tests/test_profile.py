"""The profile's figures from measured runs, and the file's shape
(docs/gc-models.md, "Profiles": the fields sim/src/profile.rs reads, nothing
else)."""

import os
import sys
import tomllib
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from gt import impls, profile  # noqa: E402

# The contract's fields, section by section (sim/src/profile.rs denies others).
CONTRACT = {
    "alloc": {"leader_read", "leader_write", "follower_read", "follower_write", "leader_idle_per_s",
              "follower_idle_per_s"},
    "objects": {"leader_read", "leader_write", "follower_write"},
    "live": {"bytes_per_key", "base_bytes"},
    "young": {"survivor_fraction"},
    "cpu": {"leader_read_us", "leader_write_us", "follower_write_us"},
    "log": {"trim_interval_ms", "trim_bytes"},
}
TOP = {"name", "runtime", "measured", "provisional", "value_bytes", "key_bytes", "reads_replicated"}


def replica(i, role, **kw):
    r = {"id": i, "role": role}
    r.update(kw)
    return r


def run(ops, window, reps):
    return {"ops": ops, "window_s": window, "replicas": reps}


def derived_go():
    """Idle: the leader allocates 1,000 B/s, followers 500 B/s. Reads:
    1,000 operations in 2 s; writes: 2,000 in 2 s."""
    idle = run(None, 10.0, [replica(0, "leader", alloc_bytes=10_000, alloc_objects=100, cpu_s=0.1, gc_cpu_s=0.0),
                            replica(1, "follower", alloc_bytes=5_000, alloc_objects=50, cpu_s=0.05, gc_cpu_s=0.0),
                            replica(2, "follower", alloc_bytes=5_000, alloc_objects=50, cpu_s=0.05, gc_cpu_s=0.0)])
    read = run(1000, 2.0, [replica(0, "leader", alloc_bytes=2_000 + 5_000_000, alloc_objects=20 + 30_000,
                                   cpu_s=0.02 + 0.05, gc_cpu_s=0.01),
                           replica(1, "follower", alloc_bytes=1_000 + 2_000_000, alloc_objects=10, cpu_s=0.01 + 0.02,
                                   gc_cpu_s=0.0),
                           replica(2, "follower", alloc_bytes=1_000 + 4_000_000, alloc_objects=10, cpu_s=0.01 + 0.04,
                                   gc_cpu_s=0.0)])
    write = run(2000, 2.0, [replica(0, "leader", alloc_bytes=2_000 + 14_000_000, alloc_objects=20 + 94_000,
                                    cpu_s=0.02 + 0.2, gc_cpu_s=0.02),
                            replica(1, "follower", alloc_bytes=1_000 + 7_000_000, alloc_objects=10 + 60_000,
                                    cpu_s=0.01 + 0.1, gc_cpu_s=0.0),
                            replica(2, "follower", alloc_bytes=1_000 + 7_000_000, alloc_objects=10 + 60_000,
                                    cpu_s=0.01 + 0.1, gc_cpu_s=0.0)])
    mixed = run(1500, 2.0, [replica(i, "leader" if i == 0 else "follower") for i in range(3)])
    return {"idle": idle, "idle_loaded": idle, "read": read, "write": write, "mixed": mixed}


class FiguresTest(unittest.TestCase):
    def test_per_operation_figures_subtract_the_idle_rate(self):
        f = profile.figures(impls.get("go-tcp"), derived_go(), [1_000_000] * 3, [1_000_000 + 6_500_000] * 3,
                            10_000)
        self.assertEqual(f["alloc"]["leader_idle_per_s"], 1000.0)
        self.assertEqual(f["alloc"]["follower_idle_per_s"], 500.0)
        self.assertAlmostEqual(f["alloc"]["leader_read"], 5000.0)
        self.assertAlmostEqual(f["alloc"]["follower_read"], 3000.0)  # the mean of two followers
        self.assertAlmostEqual(f["alloc"]["leader_write"], 7000.0)
        self.assertAlmostEqual(f["alloc"]["follower_write"], 3500.0)
        self.assertAlmostEqual(f["objects"]["leader_write"], 47.0)
        # Mutator CPU: the collector's CPU and the idle CPU rate taken off.
        self.assertAlmostEqual(f["cpu"]["leader_read_us"], (0.07 - 0.01 - 0.02) / 1000 * 1e6)
        self.assertAlmostEqual(f["cpu"]["leader_write_us"], (0.22 - 0.02 - 0.02) / 2000 * 1e6)
        self.assertAlmostEqual(f["live"]["bytes_per_key"], 650.0)
        self.assertEqual(f["live"]["base_bytes"], 1_000_000)

    def test_the_file_holds_the_contracts_fields_and_parses(self):
        f = profile.figures(impls.get("go-tcp"), derived_go(), [1_000_000] * 3, [7_500_000] * 3, 10_000)
        text = profile.toml_text(impls.get("go-tcp"), f, "2026-11-28, groundtruth/run profile --impl go-tcp",
                                 trim_interval_ms=150)
        t = tomllib.loads(text)
        self.assertEqual(t["name"], "replicant-go")
        self.assertEqual(t["runtime"], "go")
        self.assertLessEqual(set(k for k in t if not isinstance(t[k], dict)), TOP)
        for section, fields in ((k, v) for k, v in t.items() if isinstance(v, dict)):
            self.assertIn(section, CONTRACT)
            self.assertLessEqual(set(fields), CONTRACT[section], section)
            for v in fields.values():
                self.assertIsInstance(v, (float, int))
        for section in ("alloc", "live", "cpu"):
            self.assertEqual(set(t[section]), CONTRACT[section], section)
        self.assertEqual(t["log"]["trim_interval_ms"], 150)

    def test_whether_reads_are_replicated_is_written_per_implementation(self):
        # Said by the implementation, not guessed from a follower's read
        # allocation: stutter's followers, which never see a read, were
        # measured at 44-58 bytes per read (what runs beside the load).
        f = {"alloc": {"follower_read": 44.0}, "live": {"bytes_per_key": 600.0, "base_bytes": 1.0}}
        self.assertIs(tomllib.loads(profile.toml_text(impls.get("stutter"), f, "m"))["reads_replicated"], False)
        for name in ("go-tcp", "java", "rust-tcp", "c++"):
            self.assertIs(tomllib.loads(profile.toml_text(impls.get(name), f, "m"))["reads_replicated"], True, name)

    def test_an_unmeasured_figure_is_zero_and_says_so(self):
        f = {"alloc": {"leader_read": None}, "live": {"bytes_per_key": 600.0, "base_bytes": None}}
        text = profile.toml_text(impls.get("stutter"), f, "m")
        self.assertIn("leader_read = 0.0  # not measured", text)
        self.assertEqual(tomllib.loads(text)["alloc"]["leader_read"], 0.0)

    def test_a_provisional_profile_says_so_in_its_name_and_flag(self):
        f = {"alloc": {"leader_read": 1.0}, "live": {"bytes_per_key": 600.0, "base_bytes": 1.0}}
        t = tomllib.loads(profile.toml_text(impls.get("go-tcp"), f, "m", provisional=True))
        self.assertEqual((t["name"], t["provisional"]), ("replicant-go-provisional", True))
        t = tomllib.loads(profile.toml_text(impls.get("go-tcp"), f, "m"))
        self.assertEqual(t["name"], "replicant-go")
        self.assertNotIn("provisional", t)

    def test_floats_stay_floats(self):
        for v in (7100, 0.0123456, 1e-7, 123456789.0, 0):
            self.assertIsInstance(tomllib.loads(f"x = {profile.toml_float(v)}")["x"], float)


if __name__ == "__main__":
    unittest.main()
