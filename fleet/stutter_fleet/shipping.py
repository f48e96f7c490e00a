"""Files the driver sends to the workers: a built binary, or a bundle of
the spec and the TLC jar. The driver scatters the bytes once (Dask moves
them to each worker that runs a job needing them, once); a worker writes
them to a cache folder named by their SHA-256, so workers need no
checkout and no shared file system for the simulator or TLC."""

import hashlib
import io
import os
import stat
import tarfile
import tempfile


class Shipped:
    """A file on its way: name, digest, and the Dask future of its bytes."""

    def __init__(self, name, digest, data):
        self.name, self.digest, self.data = name, digest, data


def ship_file(client, path):
    with open(path, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    return Shipped(os.path.basename(path), digest, _scatter(client, data))


def ship_tree(client, name, members):
    """A tar of (path on disk, name in the archive) pairs."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for path, arcname in members:
            t.add(path, arcname=arcname)
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    return Shipped(name, digest, _scatter(client, data))


def _scatter(client, data):
    # A copy on every worker: a worker that dies takes no job's input
    # with it (Dask cannot recover scattered data it lost).
    return client.scatter(data, hash=True, broadcast=True)


def _cache(digest):
    d = os.path.join(tempfile.gettempdir(), "stutter-fleet", digest)
    os.makedirs(d, exist_ok=True)
    return d


def materialize_file(name, digest, data):
    """On a worker: the path of an executable copy of the shipped file."""
    path = os.path.join(_cache(digest), name)
    if not os.path.exists(path):
        if hashlib.sha256(data).hexdigest() != digest:
            raise RuntimeError(f"{name}: shipped bytes do not match their digest")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        os.replace(tmp, path)
    return path


def materialize_tree(name, digest, data):
    """On a worker: the folder where the shipped tar is unpacked."""
    root = os.path.join(_cache(digest), name)
    if not os.path.isdir(root):
        tmp = f"{root}.{os.getpid()}.tmp"
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            if hasattr(tarfile, "data_filter"):
                t.extractall(tmp, filter="data")
            else:
                t.extractall(tmp)
        try:
            os.replace(tmp, root)
        except OSError:
            pass  # another job of this worker unpacked it first
    return root
