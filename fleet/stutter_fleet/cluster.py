"""The engine: a Dask client on an existing scheduler, or on a LocalCluster
of worker processes started here (one thread each: a job is one process
on one core)."""

import contextlib
import os
import sys
import tempfile
import zipfile

import dask
from distributed import Client, LocalCluster


def allowed_failures_setting(n):
    """Scheduler setting: how often Dask re-runs a job whose worker died
    before it counts the job as lost (KilledWorker)."""
    return {"distributed.scheduler.allowed-failures": n}


@contextlib.contextmanager
def connect(scheduler=None, workers=2, allowed_failures=0):
    """A client. Without `scheduler`, a LocalCluster of `workers` processes
    whose scheduler re-runs a job lost with its worker `allowed_failures`
    times (0: a lost worker is reported as an infrastructure error). With
    it, the scheduler's own setting holds (printed)."""
    if scheduler:
        client = Client(scheduler, timeout="30s")
        cluster = None
    else:
        with dask.config.set(allowed_failures_setting(allowed_failures)):
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                worker_dashboard_address=None,
                silence_logs=40,
            )
            client = Client(cluster)
    try:
        _ship_package(client)
        if cluster is not None:
            af = cluster.scheduler.allowed_failures
        else:
            # The scheduler's configured setting (dask.config.get: a
            # function every scheduler can import).
            af = client.run_on_scheduler(dask.config.get, "distributed.scheduler.allowed-failures")
        n = len(client.scheduler_info().get("workers", {}))
        print(
            f"fleet: {client.scheduler.address}, {n} worker(s); a job lost with its worker is "
            + ("reported" if af == 0 else f"re-run up to {af} time(s) by Dask, then reported"),
            file=sys.stderr,
            flush=True,
        )
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _ship_package(client):
    """Workers import the job functions from this package: Dask's
    upload_file sends it to every worker (and to workers that join later)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as d:
        z = os.path.join(d, "stutter_fleet.zip")
        with zipfile.ZipFile(z, "w") as f:
            for name in sorted(os.listdir(here)):
                if name.endswith(".py"):
                    f.write(os.path.join(here, name), f"stutter_fleet/{name}")
        client.upload_file(z, load=False)
