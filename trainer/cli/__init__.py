"""The ``train`` command: Hydra's entry point, the checks before a job starts, run-dir names, ``resume=``."""

import sys


def main() -> None:
    """The console script: Ctrl-C at any moment, even while the command is still importing Hydra
    and TensorFlow, ends it with one line and status 130."""
    try:
        from trainer.cli.main import main as run

        run()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
