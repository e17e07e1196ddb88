"""SIGTERM and SIGINT: finish the step, save a checkpoint, leave the session normally.

The signal is seen at once, even while the main thread waits inside a ``Session.run`` (where a
Python signal handler cannot run until the run returns): the handler's C half writes the signal
number to a wakeup pipe (``signal.set_wakeup_fd``), which a watcher thread reads.
``trainer.hooks.builtin.PreemptionHook`` asks the session to stop at the next step boundary and
acknowledges the signal, so both backends end through their normal path (hooks' ``end()``: the
CheckpointSaverHook writes the current step, summary writers close). Work nested in training (an
evaluation) asks :func:`signal_received` before each batch. If nothing acknowledges the signal within
``grace_secs`` (a step that does not end: a huge batch, a hung input), the process exits with the
signal's status and one line: no checkpoint for that step, the newest one kept. A second SIGINT
exits at once.
"""

import logging
import os
import signal
import sys
import threading
from typing import List, Optional

from trainer.interrupts import ctrl_c_pressed

log = logging.getLogger("trainer")

_installed: List["PreemptionHandler"] = []  # the handlers installed now (a training run's), innermost last


def signal_received() -> bool:
    """True once SIGTERM or SIGINT reached a handler installed now: work nested in a training run
    (an evaluation a saver's listener or a hook starts) asks this to end within seconds."""
    return any(handler.signum is not None for handler in _installed)


def _exit_now(code: int, line: str) -> None:
    sys.stderr.write(f"error: {line}\n")
    sys.stderr.flush()
    os._exit(code)


class PreemptionHandler:
    """Context manager installing the handlers (main thread only) and restoring the old ones.

    Args:
      grace_secs: how long the step in progress may take to end once a signal came (``train.stop_grace_secs``).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, grace_secs: float = 4.0):
        self.signum: Optional[int] = None
        self._grace = grace_secs
        self._acknowledged = threading.Event()
        self._previous, self._pipe, self._wakeup = {}, None, None

    def _received(self, signum: int) -> None:
        """One signal (from the watcher thread, as soon as it arrives)."""
        if self.signum is not None:
            if signum == signal.SIGINT:
                _exit_now(130, "interrupted again: exiting now without a checkpoint")
            return
        self.signum = signum
        log.warning("%s received: stopping after this step and saving a checkpoint (Ctrl-C again to exit at once)",
                    signal.Signals(signum).name)
        timer = threading.Timer(self._grace, self._give_up)
        timer.daemon = True
        timer.start()

    def _give_up(self) -> None:
        if self._acknowledged.is_set() or self not in _installed:
            return
        name = signal.Signals(self.signum).name
        _exit_now(128 + self.signum,
                  f"stopped by {name}: the step in progress had not ended {self._grace:g} s later, so it has no "
                  f"checkpoint (train.stop_grace_secs={self._grace:g}; raise it where a step takes longer); run the "
                  "same command again to resume from the newest checkpoint")

    def acknowledge(self) -> None:
        """The run is stopping through its normal path (the checkpoint is being saved): no deadline."""
        self._acknowledged.set()

    def _watch(self, read_fd: int) -> None:
        try:
            while True:
                data = os.read(read_fd, 64)
                if not data:  # the write end closed: the run left the handler
                    return
                for signum in data:
                    if signum in self.SIGNALS:
                        self._received(signum)
        finally:
            os.close(read_fd)

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        # The pipe is in place before the Python half turns into a no-op, and the main thread holds
        # the signals meanwhile: a signal in between would reach neither (a Ctrl-C lost, the run
        # training on until max_steps). One that came before is raised by the handler before ours.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)
        try:
            if ctrl_c_pressed():  # its KeyboardInterrupt was dropped on the way (trainer.interrupts)
                raise KeyboardInterrupt
            read_fd, write_fd = self._pipe = os.pipe()
            os.set_blocking(write_fd, False)
            self._wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
            for sig in self.SIGNALS:  # the Python half does nothing: the watcher has seen the signal already
                self._previous[sig] = signal.signal(sig, lambda signum, frame: None)
            threading.Thread(target=self._watch, args=(read_fd,), name="signal-watcher", daemon=True).start()
            _installed.append(self)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return self

    def __exit__(self, *exc):
        if self._pipe is None:
            return False
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)  # as in __enter__: none is lost
        try:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(self._wakeup)
            if self in _installed:
                _installed.remove(self)
            os.close(self._pipe[1])  # the watcher reads end-of-file and ends
            self._pipe = None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return False

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum) if self.signum else 0
