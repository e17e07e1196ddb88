"""The ``train`` command: Hydra's entry point, the checks before a job starts, run-dir names, ``resume=``."""

import contextlib
import os
import signal
import sys


def _interrupted(kind, value, traceback) -> None:
    """``sys.excepthook`` of the command: a Ctrl-C outside :func:`main` (the console script's own
    lines around the call) is one line and status 130, like one inside it."""
    if issubclass(kind, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)
    sys.__excepthook__(kind, value, traceback)


sys.excepthook = _interrupted


@contextlib.contextmanager
def _ctrl_c_after():
    """A Ctrl-C inside the block is raised as KeyboardInterrupt at its end."""
    pending = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt


def main() -> None:
    """The console script: Ctrl-C at any moment once Python has started this package, even while the
    command is still importing Hydra and TensorFlow, ends it with one line and status 130."""
    try:
        # The import registers the schemas, and OmegaConf turns a KeyboardInterrupt inside it into other errors.
        with _ctrl_c_after():
            from trainer.cli.main import main as run
        run()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
