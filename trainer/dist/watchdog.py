"""The watchdog every cluster task runs: TensorFlow waits for ever on a task that is gone.

TensorFlow's gRPC calls to a task that is gone block for ever (``operation_timeout_in_ms``
and RunOptions timeouts do not end them): only a separate thread can end the process. It
exits with status 5 when no progress comes within the deadline, naming each task that does
not answer (``ps 0 at 10.0.0.1:2222 (Connection refused)``).
"""

import logging
import os
import sys
import threading
import time
import traceback

import tensorflow as tf

from trainer.dist.roles import Role, unreachable
from trainer.errors import ClusterError, flush_logs

log = logging.getLogger("trainer")


class Watchdog:
    """Exits the process when the deadline set by ``expect`` passes without a ``beat``.

    TensorFlow's gRPC calls to a task that is gone block for ever (``operation_timeout_in_ms``
    and RunOptions timeouts do not end them): only a separate thread can end the process.
    """

    def __init__(self, role: Role, exit=os._exit):
        self._role, self._exit = role, exit
        self._lock = threading.Lock()
        self._deadline, self._secs, self._doing = None, 0.0, ""
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trainer-watchdog", daemon=True)
        self._thread.start()

    def expect(self, secs: float, doing: str) -> None:
        """From now on, fail unless the next ``beat`` (or ``expect``) comes within ``secs``."""
        with self._lock:
            self._deadline, self._secs, self._doing = time.monotonic() + secs, secs, doing

    def beat(self) -> None:
        with self._lock:
            if self._deadline is not None:
                self._deadline = time.monotonic() + self._secs

    def stop(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(0.5):
            with self._lock:
                late = self._deadline is not None and time.monotonic() > self._deadline
                secs, doing = self._secs, self._doing
            if late and not self._stopped.is_set():
                self._fail(secs, doing)
                return

    def _fail(self, secs: float, doing: str) -> None:
        gone = unreachable(self._role)
        who = ("unreachable: " + "; ".join(gone)) if gone else "every task answers, so one of them is stuck"
        message = (f"{self._role.name}: no progress for {secs:.0f}s while {doing}; {who}. Restart the missing task, "
                   "or raise distributed.max_wait_secs / distributed.progress_timeout_secs")
        log.info("where each thread of %s was:\n%s", self._role.name, _thread_stacks())
        log.error(message)
        flush_logs()
        print(f"error: {message}", file=sys.stderr, flush=True)
        self._exit(ClusterError.exit_code)


def _thread_stacks() -> str:
    """Every thread's stack, innermost call last: what a stuck task was waiting for."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame, limit=12))
        parts.append(f"thread {names.get(ident, ident)}:\n{stack}")
    return "\n".join(parts)


class WatchdogHook(tf.compat.v1.train.SessionRunHook):
    """A session created starts the training deadline; each step done renews it."""

    def __init__(self, watchdog: Watchdog, progress_timeout_secs: float):
        self._watchdog, self._timeout = watchdog, progress_timeout_secs

    def after_create_session(self, session, coord):
        self._watchdog.expect(self._timeout, "training (each step, with its hooks)")

    def after_run(self, run_context, run_values):
        self._watchdog.beat()
