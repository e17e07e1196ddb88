"""Config-driven training runner for TensorFlow graph-mode models.

Importing this package sets the environment TensorFlow reads at import time, so
that it holds for the CLI and for the Python API alike:

- ``TF_USE_LEGACY_KERAS=1``: ``tf.compat.v1.layers`` raises under Keras 3; with
  tf-keras installed and this set, TF1 model code runs unchanged.
- ``TF_CPP_MIN_LOG_LEVEL=2``: TensorFlow's C++ info and warning lines are off
  unless the user set the variable (or ``log.tf_verbose=true``).

Nothing here imports TensorFlow.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__all__ = ["run"]


def run(cfg, output_dir):
    """Train (or resume) as ``cfg`` says, writing into ``output_dir``; see :func:`trainer.train.run`."""
    from trainer.train import run as _run

    return _run(cfg, output_dir)
