"""TensorFlow's process environment: a quiet import, determinism, devices and session options."""

import contextlib
import logging
import os
import sys
import warnings

from trainer.errors import ConfigError

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


def import_tensorflow(verbose: bool = False):
    """Import TensorFlow with its C++ and deprecation noise off unless ``verbose``."""
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    if "tensorflow" not in sys.modules and not verbose:
        with _stderr_to_devnull():
            import tensorflow  # noqa: F401
    import tensorflow as tf

    if not verbose:
        tf.get_logger().setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"(tensorflow|tf_keras|keras).*")
    return tf


def set_determinism(tf, deterministic: bool) -> None:
    """Turn op determinism on or off for this process (a sweep may mix both)."""
    from tensorflow.python.framework import config as tf_config

    if deterministic:
        tf.config.experimental.enable_op_determinism()
    elif tf_config.is_op_determinism_enabled():
        tf_config.disable_op_determinism()


def visible_gpus(tf) -> list:
    with quiet_stderr(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") != "0"):
        return tf.config.list_physical_devices("GPU")  # without a GPU, CUDA logs a cuInit error here


def resolve_device(tf, device_cfg) -> str:
    """The device the model is placed on, ``"cpu"`` or ``"gpu"``, for ``device.kind``.

    Raises:
      ConfigError: ``device=gpu`` and TensorFlow sees no GPU.
    """
    kind = getattr(device_cfg.kind, "value", device_cfg.kind)
    if kind == "cpu":
        return "cpu"
    gpus = visible_gpus(tf)
    if kind == "gpu":
        if not gpus:
            raise ConfigError(
                "device=gpu: TensorFlow sees no GPU (no CUDA device or driver, or a CPU-only build); "
                "install the gpu extra (pip install '.[gpu]') on a GPU machine, or use device=cpu or device=auto"
            )
        return "gpu"
    if kind == "auto":
        return "gpu" if gpus else "cpu"
    raise NotImplementedError(f"device.kind={kind!r}; use cpu, gpu or auto")


def session_config(tf, device_cfg, device: str, num_gpus: int = 0):
    """The ConfigProto both session backends use.

    With ``device.gpu_slot`` the session sees one GPU, number ``gpu_slot % num_gpus``:
    parallel sweep jobs each get their own.
    """
    config = tf.compat.v1.ConfigProto(
        allow_soft_placement=True,  # ops without a GPU kernel fall back to the CPU
        log_device_placement=bool(device_cfg.log_placement),
        intra_op_parallelism_threads=int(device_cfg.intra_op_threads),
        inter_op_parallelism_threads=int(device_cfg.inter_op_threads),
    )
    if device == "cpu":
        config.device_count["GPU"] = 0
    else:
        config.gpu_options.allow_growth = bool(device_cfg.allow_growth)
        if device_cfg.gpu_slot is not None and num_gpus:
            config.gpu_options.visible_device_list = str(int(device_cfg.gpu_slot) % num_gpus)
    return config
