"""Benchmarks of the runner against a hand-written loop and Model.fit (see BENCHMARKS.md)."""

import os
import shutil
import sys


def train_command() -> str:
    """The ``train`` console script beside the interpreter the benchmark and its contenders run on,
    rather than whatever PATH finds first: a pyenv shim there adds 0.06-0.1 s to every start."""
    script = os.path.join(os.path.dirname(sys.executable), "train")
    return script if os.access(script, os.X_OK) else (shutil.which("train") or "train")
