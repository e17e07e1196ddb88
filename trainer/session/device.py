"""Which device the model runs on, and the ConfigProto both session backends use."""

import os

import tensorflow as tf

from trainer.errors import ConfigError
from trainer.session.environment import quiet_stderr


def visible_gpus() -> list:
    with quiet_stderr(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") != "0"):
        return tf.config.list_physical_devices("GPU")  # without a GPU, CUDA logs a cuInit error here


def resolve_device(device_cfg) -> str:
    """The device the model is placed on, ``"cpu"`` or ``"gpu"``, for ``device.kind``.

    Raises:
      ConfigError: ``device=gpu`` and TensorFlow sees no GPU.
    """
    kind = device_cfg.kind
    if kind == "cpu":
        return "cpu"
    gpus = visible_gpus()
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


def session_config(device_cfg, device: str, num_gpus: int = 0):
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
