"""One writer per checkpoint dir: ``train.lock``, held with a kernel lock for the run.

The lock is ``fcntl.flock`` on the file: the kernel drops it when its process ends, however it
ends (kill -9, a container's PID 1, ``os._exit``), so no lock outlives its holder on one
machine. The file's content (pid, host, start time, last renewal) is information for the
message a refused run prints. Where hosts share the dir (a network file system whose locks may
not reach across hosts), the holder renews a lease in the file every ``RENEW_SECS``; a lock
written by another host and renewed within ``LEASE_SECS`` is respected, a lapsed one is taken
over with a warning.
"""

import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
from typing import Dict, Optional

from trainer.errors import CheckpointLockedError

log = logging.getLogger("trainer")

LOCK = "train.lock"
RENEW_SECS = 30.0
LEASE_SECS = 120.0


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


class DirLock:
    """``train.lock`` in the checkpoint dir, held for the run.

    Raises (on enter):
      CheckpointLockedError: a live process holds it, or another host renewed it within the lease.
    """

    def __init__(self, checkpoint_dir: str, lease_secs: float = LEASE_SECS, renew_secs: float = RENEW_SECS):
        self.path = os.path.join(checkpoint_dir, LOCK)
        self._fd: Optional[int] = None
        self._lease, self._renew = lease_secs, renew_secs
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._me: Dict = {}

    def __enter__(self):
        for _ in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise self._refusal(self._read_path(), "holds its lock") from None
            # The file may have been removed (and made anew) by its last holder between our open and
            # our lock: then we hold the lock of a file no one else sees. Try again on the new one.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            self._fd = fd
            self._take_over(self._read_fd())
            return self
        raise CheckpointLockedError(f"cannot take the lock {self.path}: it keeps being replaced")

    def _take_over(self, previous: Dict) -> None:
        host = socket.gethostname()
        if previous.get("host") not in (None, host):
            renewed = previous.get("renewed_at", 0)
            if time.time() - float(renewed) < self._lease:
                self._release()
                raise self._refusal(previous, f"renewed its lease {time.time() - float(renewed):.0f} s ago")
            log.warning("taking over the stale lock of pid %s on %s (started %s), whose lease lapsed %.0f s ago",
                        previous.get("pid"), previous.get("host"), previous.get("started"),
                        time.time() - float(renewed) - self._lease)
        elif previous:
            log.warning("taking over the stale lock of pid %s (started %s), which no longer holds it",
                        previous.get("pid"), previous.get("started"))
        elif os.fstat(self._fd).st_size:
            log.warning("taking over %s, whose content does not parse", self.path)
        self._me = {"pid": os.getpid(), "host": host, "started": _now()}
        self._write()
        self._thread = threading.Thread(target=self._renew_loop, name="train-lock-lease", daemon=True)
        self._thread.start()

    def _refusal(self, holder: Dict, what: str) -> CheckpointLockedError:
        who = (f"pid {holder.get('pid')} on {holder.get('host')} (since {holder.get('started')})" if holder
               else "another process")
        return CheckpointLockedError(
            f"checkpoint.dir={os.path.dirname(self.path)} is in use by {who}, which {what}; wait for it, stop it, "
            "or use another checkpoint.dir")

    def _write(self) -> None:
        payload = json.dumps(dict(self._me, renewed_at=round(time.time(), 3))).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, payload, 0)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._renew):
            try:
                self._write()
            except OSError as e:  # a full disk: the kernel lock still holds on this host
                log.warning("cannot renew the lease in %s: %s", self.path, e)

    def _read_fd(self) -> Dict:
        try:
            raw = os.pread(self._fd, 4096, 0)
            found = json.loads(raw.decode()) if raw.strip() else {}
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _read_path(self) -> Dict:
        try:
            with open(self.path) as f:
                found = json.load(f)
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the kernel lock
            self._fd = None

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)  # no holder: the next run takes the file without a warning
            except OSError:
                pass
            self._release()
        return False
