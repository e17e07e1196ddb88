"""SIGTERM and SIGINT: finish the step, save a checkpoint, leave the session normally.

The signal handler only records the signal; ``trainer.hooks.runner.PreemptionHook`` asks the session to
stop at the next step boundary, so both backends end through their normal path
(hooks' ``end()``: the CheckpointSaverHook writes the current step, summary writers
close). A second SIGINT exits at once.
"""

import logging
import os
import signal
import sys
import threading
from typing import Optional

log = logging.getLogger("trainer")


class PreemptionHandler:
    """Context manager installing the handlers (main thread only) and restoring the old ones."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signum: Optional[int] = None
        self._previous = {}

    def _handle(self, signum, frame):
        if self.signum is not None and signum == signal.SIGINT:
            sys.stderr.write("error: interrupted again: exiting now without a checkpoint\n")
            sys.stderr.flush()
            os._exit(130)
        if self.signum is None:
            self.signum = signum
            log.warning("%s received: stopping after this step and saving a checkpoint (Ctrl-C again to exit at once)",
                        signal.Signals(signum).name)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        return False

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum) if self.signum else 0
