"""The ground-truth harness: real replicated stores (stutter and the seed
paper's own Replicant variants) under memory limits, measured with `bench`.
See groundtruth/README.md and docs/performance-groundtruth.md."""

import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.join(ROOT, "groundtruth")
BIN = os.path.join(ROOT, "target", "release")
# Built Replicant variants live outside the repository: their code and
# binaries are never committed.
DEFAULT_BUILD_DIR = os.path.join(
    os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "stutter", "groundtruth")
