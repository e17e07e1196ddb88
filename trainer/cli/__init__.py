"""The ``train`` command: Hydra's entry point, the checks before a job starts, run-dir names, ``resume=``."""

import os
import sys

from trainer.interrupts import hold_ctrl_c
from trainer.session.environment import preload_libraries


def _interrupted(kind, value, traceback) -> None:
    """``sys.excepthook`` of the command: a Ctrl-C outside :func:`main` (the console script's own
    lines around the call) is one line and status 130, like one inside it."""
    if issubclass(kind, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)
    sys.__excepthook__(kind, value, traceback)


sys.excepthook = _interrupted


def _imports_tensorflow(argv) -> bool:
    """A single run, which imports TensorFlow once its config is checked: no flag (Hydra's ``--help``,
    ``--cfg``, ``-m``, ...), no ``hydra.mode=`` sweep, and no ``log.tf_verbose`` (whose C++ lines of
    the libraries' start-up the import shows)."""
    return not any(a.startswith("-") or a.startswith("hydra.mode=") or "tf_verbose" in a for a in argv)


def main() -> None:
    """The console script: Ctrl-C at any moment once Python has started this package, even while the
    command is still importing Hydra and TensorFlow, ends it with one line and status 130."""
    try:
        # Held while the config is built (trainer.interrupts): the import registers the schemas, and
        # OmegaConf turns a KeyboardInterrupt inside its work into other errors.
        hold_ctrl_c()
        from trainer.cli.main import main as run

        if _imports_tensorflow(sys.argv[1:]):
            # While the libraries load, importing an extension module waits for the loader's lock:
            # the run's data modules (NumPy and its random generators, csv) are imported first; the
            # config's composition imports none.
            import numpy.random  # noqa: F401

            import trainer.data.sources  # noqa: F401

            preload_libraries()  # on the second core while Hydra composes the config
        run()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
