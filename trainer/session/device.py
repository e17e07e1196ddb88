"""Which device the model runs on, and the ConfigProto both session backends use."""

import logging
import os

import tensorflow as tf

from trainer.config.rules import precision_refusal
from trainer.errors import ConfigError
from trainer.process import quiet_stderr

log = logging.getLogger("trainer")
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of CPUs with native bfloat16 arithmetic


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


def cpu_bf16_flags() -> list:
    """The CPU's native bfloat16 features (``avx512_bf16``, ``amx_bf16``) as /proc/cpuinfo lists them."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return [flag for flag in _BF16_CPU_FLAGS if flag in flags]
    except OSError:
        pass
    return []


_probe = {}


def cpu_bf16_rewrite_runs() -> bool:
    """Whether grappler's oneDNN bfloat16 rewrite really converts ops on this CPU (it skips CPUs
    without AVX-512): a small dense graph fed from a placeholder, run once with the rewrite on, its
    partition graph read. The graph must survive grappler's other passes to tell: a constant input
    is folded away before the rewrite sees a MatMul, and a graph under four nodes is not optimized."""
    if "bf16" not in _probe:
        import numpy as np
        from tensorflow.core.protobuf import rewriter_config_pb2

        with tf.Graph().as_default():
            a = tf.compat.v1.placeholder(tf.float32, [8, 8])
            output = tf.nn.relu(tf.matmul(tf.nn.relu(tf.matmul(a, a)), a) + 1.0)
            config = tf.compat.v1.ConfigProto(device_count={"GPU": 0})
            config.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 = (
                rewriter_config_pb2.RewriterConfig.ON)
            metadata = tf.compat.v1.RunMetadata()
            with tf.compat.v1.Session(config=config) as sess:
                sess.run(output, {a: np.ones([8, 8], np.float32)},
                         options=tf.compat.v1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
        _probe["bf16"] = any(node.attr["T"].type == tf.bfloat16.as_datatype_enum
                             for g in metadata.partition_graphs for node in g.node if "MatMul" in node.op)
    return _probe["bf16"]


def _gpu_capability() -> tuple:
    """The first visible GPU's CUDA compute capability, (0, 0) when TensorFlow does not say."""
    gpus = visible_gpus()
    if not gpus:
        return (0, 0)
    details = tf.config.experimental.get_device_details(gpus[0])
    return tuple(details.get("compute_capability") or (0, 0))


def resolve_precision(device_cfg, device: str) -> str:
    """The compute precision for ``device.precision`` on ``device`` (``"cpu"`` or ``"gpu"``): fp32,
    bf16 or fp16. ``auto`` picks what the hardware runs natively; the choice is logged.

    Raises:
      ConfigError: a precision this device has no fast arithmetic or no graph rewrite for.
    """
    precision = str(device_cfg.precision)
    if precision == "auto":
        if device == "cpu":
            flags = cpu_bf16_flags()
            precision = "bf16" if flags and cpu_bf16_rewrite_runs() else "fp32"
            why = f"the CPU has {', '.join(flags)}" if flags else "the CPU has no native bfloat16 (avx512_bf16/amx_bf16)"
        else:
            capability = _gpu_capability()
            precision = "fp16" if capability >= (7, 0) else "fp32"
            why = f"the GPU's compute capability is {capability[0]}.{capability[1]} (tensor cores from 7.0)"
        log.info("device.precision=auto: %s (%s)", precision, why)
        return precision
    refusal = precision_refusal(precision, device)
    if refusal:
        raise ConfigError(refusal)
    if precision == "bf16" and not cpu_bf16_rewrite_runs():
        raise ConfigError("device.precision=bf16: TensorFlow's oneDNN bfloat16 rewrite does not run on this CPU (it needs "
                          "AVX-512; native bfloat16 needs AVX512_BF16 or AMX), so the run would be fp32; use "
                          "device.precision=fp32 or auto here")
    if precision == "bf16" and not cpu_bf16_flags():
        log.warning("device.precision=bf16: this CPU has no native bfloat16 (avx512_bf16/amx_bf16), so oneDNN emulates "
                    "it and steps may be slower than fp32; use device.precision=fp32 here")
    return precision


def check_replicas(device_cfg, device: str) -> None:
    """``device.replicas`` fits this machine.

    Raises:
      ConfigError: more GPU replicas than visible GPUs, or replicas with ``device.gpu_slot``.
    """
    replicas = int(device_cfg.replicas)
    if replicas <= 1 or device != "gpu":
        return
    gpus = len(visible_gpus())
    if replicas > gpus:
        raise ConfigError(f"device.replicas={replicas}: TensorFlow sees {gpus} GPU(s); set device.replicas to at "
                          f"most {gpus} (or device=cpu device.replicas={replicas} for logical CPU devices)")
    if device_cfg.gpu_slot is not None:
        raise ConfigError(f"device.replicas={replicas} with device.gpu_slot={device_cfg.gpu_slot}: a run with replicas "
                          "uses the first N GPUs; set device.gpu_slot=null or device.replicas=1")


def session_config(device_cfg, device: str, num_gpus: int = 0, precision: str = "fp32"):
    """The ConfigProto both session backends use.

    With ``device.gpu_slot`` the session sees one GPU, number ``gpu_slot % num_gpus``:
    parallel sweep jobs each get their own. ``precision`` (from :func:`resolve_precision`) turns
    on grappler's mixed-precision rewrite for the device; ``device.xla`` the global JIT level;
    ``device.replicas`` on the CPU gives the session that many logical CPU devices.
    """
    config = tf.compat.v1.ConfigProto(
        allow_soft_placement=True,  # ops without a GPU kernel fall back to the CPU
        log_device_placement=bool(device_cfg.log_placement),
        intra_op_parallelism_threads=int(device_cfg.intra_op_threads),
        inter_op_parallelism_threads=int(device_cfg.inter_op_threads),
    )
    rewrites = config.graph_options.rewrite_options
    if precision == "bf16":
        rewrites.auto_mixed_precision_onednn_bfloat16 = rewrites.ON
    elif precision == "fp16":
        rewrites.auto_mixed_precision = rewrites.ON
    if device_cfg.xla:  # on the CPU with --tf_xla_cpu_global_jit (trainer.process.set_environment)
        config.graph_options.optimizer_options.global_jit_level = tf.compat.v1.OptimizerOptions.ON_1
    if device == "cpu":
        config.device_count["GPU"] = 0
        if int(device_cfg.replicas) > 1:
            config.device_count["CPU"] = int(device_cfg.replicas)
    else:
        config.gpu_options.allow_growth = bool(device_cfg.allow_growth)
        if device_cfg.gpu_slot is not None and num_gpus:
            config.gpu_options.visible_device_list = str(int(device_cfg.gpu_slot) % num_gpus)
    return config
