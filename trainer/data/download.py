"""Downloads of a source's files: the host probed first (offline fails in seconds), the file written
atomically and its checksum verified."""

import hashlib
import os
import shutil
import tempfile
from typing import Optional

from trainer.errors import DataError

KERAS_BASE_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
RESOLVE_SECS = 3.0


def _digest(path: str, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unreachable(url: str, secs: float = RESOLVE_SECS) -> Optional[str]:
    """Why ``url``'s host cannot be reached (no connection to its port 443 within ``secs``), or None.
    Name resolution has no timeout of its own: offline it waited 10-22 s before each download failed."""
    import socket
    import threading
    import urllib.parse

    host = urllib.parse.urlparse(url).hostname or url
    outcome = {}

    def connect():
        try:
            socket.create_connection((host, 443), timeout=secs).close()
        except OSError as e:
            outcome["error"] = e

    worker = threading.Thread(target=connect, daemon=True, name="reach-download-host")
    worker.start()
    worker.join(secs)
    if worker.is_alive():
        return f"{host} gave no answer within {secs:g} s (offline?)"
    return f"{host} cannot be reached ({outcome['error']}; offline?)" if "error" in outcome else None


def download(url: str, dest: str, checksum: str, algorithm: str = "sha256", timeout_secs: float = 20.0) -> str:
    """Download ``url`` to ``dest`` atomically, verifying its checksum.

    Raises:
      DataError: no network, or the file's checksum is wrong (nothing is left at ``dest``).
    """
    import urllib.request  # here: it loads ssl, which no run without a download needs

    why = unreachable(url)
    if why:
        raise DataError(f"cannot download {url}: {why}")
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest) or ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_secs) as response:
            shutil.copyfileobj(response, out)
        actual = _digest(tmp, algorithm)
        if actual != checksum:
            raise DataError(f"download of {url} has {algorithm} {actual}, expected {checksum}; try again later")
        os.replace(tmp, dest)
        return dest
    except OSError as e:  # URLError, timeouts, refused connections
        raise DataError(f"cannot download {url} ({e})") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def check_reachable(name: str) -> None:
    """Before a sweep's first job: ``data=NAME``, whose files would have to be downloaded, fails once
    here when the host cannot be reached, rather than in every job.

    Raises:
      DataError: naming the data, why the host cannot be reached, and what to do instead.
    """
    why = unreachable(KERAS_BASE_URL)
    if why:
        raise DataError(f"data={name}: its files are not here and must be downloaded, but {why}; set data.path to "
                        f"local files, or use data=fashion_mnist (apt-get install dataset-fashion-mnist) or "
                        f"data=synthetic")
