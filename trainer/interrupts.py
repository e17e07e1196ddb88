"""Ctrl-C while the ``train`` command starts: held while Hydra and OmegaConf build the config, raised after.

OmegaConf turns a KeyboardInterrupt that lands inside one of its node updates into an unrelated
error (``'NoneType' object has no attribute '_invalidate_flags_cache'``), which the command would
report as a failure with status 1 or 2. From the start of the command until the run imports
TensorFlow (or a sweep starts), a Ctrl-C is recorded instead, and :func:`release_ctrl_c` raises it
as the KeyboardInterrupt the command reports in one line with status 130, at most the start-up's
fraction of a second later. Without :func:`hold_ctrl_c` (the Python API, tests) both are no-ops.

From the release on, a Ctrl-C is a KeyboardInterrupt as usual, and is also remembered
(:func:`ctrl_c_pressed`): Python drops a KeyboardInterrupt raised while a finalizer or a callback runs
("Exception ignored in ..."), and the run would go on. The training run's signal handler asks before
it takes over (``trainer.training.preemption``), so that Ctrl-C still ends the run.
"""

import signal
import threading

_held = []  # (signals received while held, the SIGINT handler to restore), while held
_pressed = []  # each Ctrl-C raised as a KeyboardInterrupt since the release


def _interrupt(signum, frame):
    """Python's own SIGINT handler, remembering the Ctrl-C."""
    _pressed.append(signum)
    raise KeyboardInterrupt


def hold_ctrl_c() -> None:
    """From now until :func:`release_ctrl_c`, a SIGINT is recorded, not raised (main thread only)."""
    if _held or threading.current_thread() is not threading.main_thread():
        return
    pending = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    _held.append((pending, previous))


def release_ctrl_c(raise_pending: bool = True) -> None:
    """Restore SIGINT's handler; raise KeyboardInterrupt if a Ctrl-C came while held (unless
    ``raise_pending`` is false: an error already on its way is the one reported)."""
    if not _held or threading.current_thread() is not threading.main_thread():
        return
    pending, previous = _held.pop()
    _pressed.clear()
    signal.signal(signal.SIGINT, _interrupt if previous is signal.default_int_handler else previous)
    if pending and raise_pending:
        raise KeyboardInterrupt


def ctrl_c_pressed() -> bool:
    """Whether a Ctrl-C came since :func:`release_ctrl_c` (False without the command's hold)."""
    return bool(_pressed)
