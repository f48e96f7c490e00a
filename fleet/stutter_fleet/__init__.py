"""stutter's fan-out driver: seed swarms, TLC runs and campaigns as
independent jobs on a Dask distributed cluster (docs/fleet.md).

Dask does the scheduling, the transfer of binaries and results, and the
handling of lost workers; this package only says what a job is, how its
output is judged, and how results merge: failing seeds (exit 1) apart
from infrastructure errors (exit 2).
"""
