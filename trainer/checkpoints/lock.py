"""One writer per checkpoint dir: ``train.lock`` (pid, host, start time), held for the run."""

import json
import logging
import os
import socket
import time
from typing import Dict

from trainer.errors import CheckpointLockedError

log = logging.getLogger("trainer")

LOCK = "train.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DirLock:
    """``train.lock`` (pid, host, start time) in the checkpoint dir, held for the run.

    Raises (on enter):
      CheckpointLockedError: a live process holds it (or one on another host).
    """

    def __init__(self, checkpoint_dir: str):
        self.path = os.path.join(checkpoint_dir, LOCK)
        self._held = False

    def __enter__(self):
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._read()
                same_host = holder.get("host") == me["host"]
                if holder and same_host and not _alive(int(holder.get("pid", 0))):
                    log.warning("taking over the stale lock of pid %s (started %s), which is no longer running",
                                holder.get("pid"), holder.get("started"))
                    os.remove(self.path)
                    continue
                raise CheckpointLockedError(
                    f"checkpoint.dir={os.path.dirname(self.path)} is in use by pid {holder.get('pid')} on "
                    f"{holder.get('host')} since {holder.get('started')}; wait for it, stop it, or use another "
                    f"checkpoint.dir (delete {self.path} only if that run is gone)"
                ) from None
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self._held = True
            return self
        raise CheckpointLockedError(f"cannot take the lock {self.path}")

    def _read(self) -> Dict:
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def __exit__(self, *exc):
        if self._held:
            try:
                os.remove(self.path)
            except OSError:
                pass
            self._held = False
        return False
