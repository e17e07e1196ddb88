"""TensorFlow's process environment: a quiet import (no C++ start-up lines, no deprecation
spam) and op determinism.

Nothing here imports TensorFlow at module level: :func:`import_tensorflow` is what loads it,
once the config has been checked.
"""

import contextlib
import logging
import os
import sys
import time
import warnings

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _stderr_to_devnull():
    """Silence file descriptor 2: TensorFlow's C++ start-up lines bypass Python's sys.stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def quiet_stderr(quiet: bool = True):
    """File descriptor 2 silenced while ``quiet`` (TensorFlow's C++ logging writes there)."""
    return _stderr_to_devnull() if quiet else contextlib.nullcontext()


_import_secs = {}


def import_tensorflow(verbose: bool = False):
    """Import TensorFlow with its C++ and deprecation noise off unless ``verbose``."""
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    if "tensorflow" not in sys.modules:
        started = time.time()
        with quiet_stderr(not verbose):
            import tensorflow  # noqa: F401
        _import_secs["tensorflow"] = time.time() - started
    import tensorflow as tf

    route_tensorflow_log(verbose)
    if not verbose:
        warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"(tensorflow|tf_keras|keras).*")
    return tf


class _NoDeprecations(logging.Filter):
    """Drops TensorFlow's deprecation notices (a dozen per run of TF1 code), keeps everything else."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return "is deprecated" not in message and "Instructions for updating" not in message


def route_tensorflow_log(verbose: bool = False) -> None:
    """TensorFlow's Python logger (``tf.compat.v1.logging``, LoggingTensorHook, MonitoredSession's
    lines) at INFO into the run's own handlers (console and ``train.log``) instead of its own
    stderr handler; deprecation notices dropped unless ``verbose``."""
    import tensorflow as tf

    logger = tf.get_logger()  # made on first use, with its own handler: make it now, then route it
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.propagate = True
    logger.setLevel(logging.INFO)
    for existing in list(logger.filters):
        if isinstance(existing, _NoDeprecations):
            logger.removeFilter(existing)
    if not verbose:
        logger.addFilter(_NoDeprecations())


def import_secs() -> float:
    """How long this process took to import TensorFlow (0 when something else imported it first)."""
    return _import_secs.get("tensorflow", 0.0)


def onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN CPU kernels in this process (``TF_ENABLE_ONEDNN_OPTS``
    as read at import, and the CPU)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def set_determinism(deterministic: bool) -> None:
    """Turn op determinism on or off for this process (a sweep may mix both)."""
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config

    if deterministic:
        tf.config.experimental.enable_op_determinism()
    elif tf_config.is_op_determinism_enabled():
        tf_config.disable_op_determinism()
