"""Rules across config fields, checked once before any TensorFlow work.

Types and unknown keys are caught by the schemas when the config is composed;
what is left here are ranges and combinations. Every error names the key, the
bad value and the fix, in one line. :func:`prepare` is the boundary every run
passes: it fills the run-dependent defaults and checks every rule.
"""

import copy
import dataclasses
import math
import os
from typing import Tuple

from omegaconf import DictConfig, OmegaConf

from trainer.data.sources import source_of
from trainer.dist.roles import check_distributed
from trainer.errors import ConfigError
from trainer.tracking import check_tracking


INT64_MAX = 2**63 - 1  # TensorFlow's steps and counts are int64


def _positive(key, value, allow_none=False, allow_zero=False):
    if value is None:
        if allow_none:
            return
        raise ConfigError(f"{key}=null: it needs a value; set {key}=N")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}={value}: must be a finite number; set {key}=N")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{key}={value}: must be {bound}; set {key} to a number {bound}")
    if value > INT64_MAX:
        raise ConfigError(f"{key}={value}: larger than TensorFlow's int64 steps hold ({INT64_MAX}); set a smaller {key}")


def check_writable_dir(path: str, key: str) -> None:
    """``path`` is, or can become, a directory this process writes to.

    Raises:
      ConfigError: it is a file, lies under a file, /proc or /sys, has too long a name, or its nearest
        existing parent is not writable.
    """
    full = os.path.abspath(os.path.expanduser(path))
    fix = f"give {key} a directory you can write to"
    if full == "/proc" or full.startswith(("/proc/", "/sys/")) or full == "/sys":
        raise ConfigError(f"{key}={path}: inside a kernel file system; {fix}")
    if len(full) >= 4096 or any(len(part.encode()) > 255 for part in full.split(os.sep)):
        raise ConfigError(f"{key}={path}: the path (or one of its names) is too long for the file system; {fix}")
    existing = full
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        where = "is a file" if existing == full else f"lies under the file {existing}"
        raise ConfigError(f"{key}={path} {where}; {fix}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}={path}: {existing} is not writable (permission denied or a read-only mount); {fix}")


def _check_model_params(cfg) -> None:
    """A built-in model's params are typed (``trainer.config.schema``): a key ``+`` added that the
    model does not read is a typo, not a setting."""
    kind = OmegaConf.get_type(cfg.model, "params")
    if not dataclasses.is_dataclass(kind):
        return  # model=model_fn: the user's own params
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(cfg.model.params.keys()) - known)
    if unknown:
        raise ConfigError(f"model.params.{unknown[0]}: model={cfg.model.name} has no such param"
                          f"{nearest(unknown[0], known, 'model.params')}; it takes {', '.join(sorted(known))}")


def precision_refusal(precision: str, device: str):
    """Why ``device.precision`` cannot run on ``device`` (``"cpu"`` or ``"gpu"``), or None."""
    if precision == "fp16" and device == "cpu":
        return ("device.precision=fp16: CPUs have no fast float16 arithmetic (TensorFlow would emulate it, slower "
                "than fp32); use device.precision=bf16 on a CPU with AVX512_BF16 or AMX, or fp32")
    if precision == "bf16" and device == "gpu":
        return ("device.precision=bf16: TensorFlow's mixed-precision graph rewrite for GPUs converts to float16 "
                "only; use device.precision=fp16 (with loss scaling) or fp32 on a GPU")
    return None


def _finite_rate(key, value, allow_zero=False) -> None:
    if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{key}={value}: must be a finite number {bound}; set {key} to a number {bound}")


# Optimizer arguments whose range TensorFlow does not check: outside it a run "finishes" at chance.
_FRACTIONS = ("beta1", "beta2", "momentum", "decay", "rho")  # a moving average's keep rate: [0, 1)
_POSITIVE = ("epsilon", "initial_accumulator_value")


def _check_optimizer_args(opt) -> None:
    for key in _FRACTIONS:
        value = opt.get(key)
        if isinstance(value, (int, float)) and not (0 <= value < 1):
            raise ConfigError(f"optimizer.{key}={value}: must lie in [0, 1) (e.g. 0.9); set optimizer.{key} to a "
                              "fraction")
    for key in _POSITIVE:
        value = opt.get(key)
        if isinstance(value, (int, float)) and not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"optimizer.{key}={value}: must be a finite number > 0; set optimizer.{key} to a small "
                              "positive number")
    decay = opt.get("weight_decay")
    if isinstance(decay, (int, float)) and not (0 <= decay < 1):
        raise ConfigError(f"optimizer.weight_decay={decay}: the fraction of each weight taken off per step (at the "
                          "peak rate) must lie in [0, 1); e.g. optimizer.weight_decay=1e-4")


def _check_optimizer(cfg) -> None:
    """The schedule, clipping and weight-decay keys (``trainer.model.schedules``), and the ranges of
    the optimizer's own arguments."""
    opt = cfg.optimizer
    _check_optimizer_args(opt)
    schedule = str(opt.get("schedule", "constant"))
    lr = opt.get("learning_rate")
    if lr is not None and not (lr > 0 and math.isfinite(lr)) and schedule != "piecewise":
        raise ConfigError(f"optimizer.learning_rate={lr}: must be a finite number > 0; e.g. optimizer.learning_rate=1e-3")
    if "schedule" not in opt:
        return  # an optimizer config of the user's own, without the runner's keys
    warmup = opt.warmup_steps
    if warmup < 0:
        raise ConfigError(f"optimizer.warmup_steps={warmup}: must be >= 0; set optimizer.warmup_steps=N or 0")
    max_steps = cfg.train.max_steps
    if warmup and max_steps is not None and warmup >= max_steps:
        raise ConfigError(f"optimizer.warmup_steps={warmup}: not below train.max_steps={max_steps}; warm up over fewer "
                          "steps")
    _positive("optimizer.decay_steps", opt.decay_steps, allow_none=True)
    if schedule == "exponential":
        if not opt.decay_steps:
            raise ConfigError("optimizer.schedule=exponential needs optimizer.decay_steps (the steps per factor of "
                              "decay_rate); e.g. optimizer.decay_steps=1000")
        _finite_rate("optimizer.decay_rate", opt.decay_rate)
    if schedule in ("polynomial", "cosine"):
        _finite_rate("optimizer.end_learning_rate", opt.end_learning_rate, allow_zero=True)
        _finite_rate("optimizer.power", opt.power)
        if not opt.decay_steps and max_steps is None:
            raise ConfigError(f"optimizer.schedule={schedule} decays to train.max_steps, which is null; set "
                              "optimizer.decay_steps=N")
    if schedule == "piecewise":
        boundaries, values = list(opt.boundaries), [float(v) for v in opt["values"]]
        if len(values) != len(boundaries) + 1:
            raise ConfigError(f"optimizer.values has {len(values)} rates for {len(boundaries)} boundaries; give "
                              "len(boundaries) + 1 rates, e.g. optimizer.boundaries=[1000,1500] "
                              "optimizer.values=[0.1,0.01,0.001]")
        if any(b <= 0 for b in boundaries) or any(b2 <= b1 for b1, b2 in zip(boundaries, boundaries[1:])):
            raise ConfigError(f"optimizer.boundaries={boundaries}: must increase, from a step > 0")
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise ConfigError(f"optimizer.values={values}: every rate must be a finite number > 0")
    if opt.clip_norm is not None:
        _finite_rate("optimizer.clip_norm", opt.clip_norm)
    _finite_rate("optimizer.weight_decay", opt.weight_decay, allow_zero=True)
    ema = cfg.train.ema_decay
    if ema is not None and not (0 < ema < 1):
        raise ConfigError(f"train.ema_decay={ema}: must lie between 0 and 1 (e.g. 0.999), or null for no averaging")
    if cfg.distributed.sync_replicas and (opt.weight_decay or ema):
        key = "optimizer.weight_decay" if opt.weight_decay else "train.ema_decay"
        raise ConfigError(f"{key} with distributed.sync_replicas=true: the update is applied by SyncReplicasOptimizer "
                          f"on the chief alone, which the runner cannot extend; drop {key} or sync_replicas")


def _check_replicas(cfg) -> None:
    replicas = cfg.device.replicas
    _positive("device.replicas", replicas)
    if replicas == 1:
        return
    if cfg.train.batch_size % replicas:
        raise ConfigError(f"device.replicas={replicas}: train.batch_size={cfg.train.batch_size} does not divide into "
                          f"{replicas} equal towers; set train.batch_size to a multiple of {replicas}")
    if cfg.distributed.kind != "none":
        raise ConfigError(f"device.replicas={replicas} with distributed={cfg.distributed.kind}: towers inside a cluster "
                          "task are not supported; add training tasks instead (distributed.num_workers) or set "
                          "device.replicas=1")


def _check_data(data) -> None:
    source_of(data).check(data)
    num_classes = data.get("num_classes")
    if num_classes is not None and num_classes < 2:
        raise ConfigError(f"data.num_classes={num_classes}: a classifier needs at least 2 classes; set data.num_classes=K "
                          "or null to count them")


def nearest(name: str, names, prefix: str = "") -> str:
    """`` (did you mean PREFIX.X?)`` for the name X in ``names`` closest to ``name``, or ``""``."""
    import difflib

    found = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f" (did you mean {prefix + '.' if prefix else ''}{found[0]}?)" if found else ""


def _unknown_keys(node, path: str) -> None:
    """A key that no schema field declares, under a node typed by the schema (``+train.max_step=10``:
    Hydra's ``+`` adds it past the schema). Open mappings (``model.params`` of ``model=model_fn``,
    ``hooks``, ``data.features``, ...) are untyped and take any key.

    Raises:
      ConfigError: naming the key and the nearest declared one.
    """
    kind = OmegaConf.get_type(node)
    if not (isinstance(node, DictConfig) and dataclasses.is_dataclass(kind)):
        return
    declared = {f.name for f in dataclasses.fields(kind)}
    for key in node.keys():
        where = f"{path}.{key}" if path else str(key)
        if key not in declared:
            hint = nearest(str(key), declared, path) or f"; the keys of {path} are {', '.join(sorted(declared))}"
            raise ConfigError(f"{where}: no such key{hint} (train --cfg job lists every key)")
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            _unknown_keys(child, where)


def _check_keys(cfg) -> None:
    """Every key is one the schema declares (a built-in model's params first, with their own message)."""
    _check_model_params(cfg)
    for group in cfg.keys():
        if group != "hydra" and isinstance(cfg._get_node(group), DictConfig):
            _unknown_keys(cfg._get_node(group), str(group))


def _check_checkpoint_cadence(cfg) -> None:
    """``checkpoint.every_steps``/``every_secs`` (one of them), ``keep`` and ``restore_step``."""
    _positive("checkpoint.every_steps", cfg.checkpoint.every_steps, allow_none=True, allow_zero=True)
    _positive("checkpoint.every_secs", cfg.checkpoint.every_secs, allow_none=True, allow_zero=True)
    if cfg.checkpoint.every_steps and cfg.checkpoint.every_secs:
        raise ConfigError(
            f"checkpoint.every_steps={cfg.checkpoint.every_steps} and checkpoint.every_secs={cfg.checkpoint.every_secs}: "
            "set only one (e.g. checkpoint.every_steps=null to save by time)"
        )
    _positive("checkpoint.keep", cfg.checkpoint.keep, allow_zero=True)
    _positive("checkpoint.restore_step", cfg.checkpoint.restore_step, allow_none=True, allow_zero=True)
    restore, max_steps = cfg.checkpoint.restore_step, cfg.train.max_steps
    if restore is not None and max_steps is not None and restore > max_steps:
        raise ConfigError(f"checkpoint.restore_step={restore} is beyond train.max_steps={max_steps}: the run would "
                          "end above its target; restore a step <= train.max_steps, or raise train.max_steps")


def _check_model_shapes(model) -> None:
    """The built-in models' shapes and rates, before any graph is built (a zero-wide layer aborts in
    oneDNN, far from the key that asked for it); ``model=model_fn``'s params are the user's own."""
    if model.get("name") == "model_fn" or not model.get("params"):
        return
    params = {k: model.params[k] for k in model.params if k in ("hidden_units", "num_classes", "head", "dropout_rate",
                                                                 "dropout")}
    for i, units in enumerate(params.get("hidden_units") or ()):
        if units is None or units < 1:
            raise ConfigError(f"model.params.hidden_units[{i}]={units}: a layer's width must be >= 1; set "
                              f"model.params.hidden_units to positive widths, e.g. [128, 64]")
    classes = params.get("num_classes")
    if classes is not None and classes < 2 and params.get("head", "classifier") == "classifier":
        raise ConfigError(f"model.params.num_classes={classes}: a classifier needs at least 2 classes; set it to K "
                          "(or null for the data's number of classes)")
    for key in ("dropout_rate", "dropout"):
        rate = params.get(key)
        if rate is not None and not 0 <= rate < 1:
            raise ConfigError(f"model.params.{key}={rate}: a dropout rate is in [0, 1); set model.params.{key}=0.2 "
                              "(0: none)")


def _input_fns_needed(cfg) -> Tuple[str, ...]:
    """The ``data=input_fn`` keys a mode reads: training reads ``data.train_fn`` (and ``data.eval_fn``
    when it evaluates); evaluate reads ``data.eval_fn``; predict and export read it unless
    ``predict.input_fn``/``predict.input`` or ``export.serving_input_fn`` stands in for it."""
    if cfg.mode in ("train", "train_and_evaluate"):
        return ("train_fn", "eval_fn") if cfg.eval.enabled else ("train_fn",)
    if cfg.mode == "predict" and (cfg.predict.input_fn or cfg.predict.input):
        return ()
    if cfg.mode == "export" and cfg.export.serving_input_fn:
        return ()
    return ("eval_fn",)


def _check_input_fns(cfg) -> None:
    """Each input_fn the mode reads is given, and the message says what it is for."""
    what = {"evaluate": "the input_fn to evaluate on",
            "predict": "the input_fn of the features to predict (or predict.input_fn=MODULE.FUNCTION)",
            "export": "an input_fn whose features shape the serving signature (or export.serving_input_fn="
                      "MODULE.FUNCTION, a serving_input_receiver_fn)"}
    if cfg.data.name != "input_fn":
        return
    for key in _input_fns_needed(cfg):
        if not OmegaConf.is_missing(cfg.data, key) and cfg.data.get(key):
            continue
        if cfg.mode in what:
            raise ConfigError(f"data.{key} is not set; mode={cfg.mode} needs data.{key}=MODULE.FUNCTION, {what[cfg.mode]}")
        raise ConfigError(f"data.{key} is not set; data=input_fn needs data.train_fn and data.eval_fn (dotted paths)")


def validate(cfg) -> None:
    """Raise ConfigError for the first rule ``cfg`` breaks."""
    _check_keys(cfg)
    if OmegaConf.is_missing(cfg.model, "fn"):
        raise ConfigError("model.fn is not set; give your model_fn as a dotted path, e.g. model.fn=my_pkg.my_module.model_fn")
    if not cfg.eval.enabled and cfg.mode == "train_and_evaluate":
        raise ConfigError("eval.enabled=false with mode=train_and_evaluate: it evaluates as it trains; set "
                          "eval.enabled=true, or mode=train")
    _check_input_fns(cfg)
    if cfg.mode == "train_and_evaluate" and not cfg.eval.every_steps:
        raise ConfigError("mode=train_and_evaluate: eval.every_steps is not set; e.g. eval.every_steps=1000")
    _positive("train.max_steps", cfg.train.max_steps, allow_none=True)
    check_tracking(cfg.tracking)
    if cfg.train.max_steps is None and not source_of(cfg.data).ends and cfg.mode in ("train", "train_and_evaluate"):
        raise ConfigError(f"train.max_steps=null trains until the input ends, but data={cfg.data.name} repeats for "
                          "ever; set train.max_steps=N")
    _positive("train.stalled_steps_limit", cfg.train.stalled_steps_limit, allow_zero=True)
    _positive("train.max_skipped_steps", cfg.train.max_skipped_steps)
    _positive("train.stop_grace_secs", cfg.train.stop_grace_secs)
    _positive("train.batch_size", cfg.train.batch_size)
    if cfg.train.seed is not None and cfg.train.seed < 0:
        raise ConfigError(f"train.seed={cfg.train.seed}: must be >= 0, or null for a random seed")
    _check_checkpoint_cadence(cfg)
    _positive("summary.every_steps", cfg.summary.every_steps, allow_none=True, allow_zero=True)
    _positive("eval.every_steps", cfg.eval.every_steps, allow_none=True, allow_zero=True)
    _positive("eval.batch_size", cfg.eval.batch_size)
    _positive("eval.steps", cfg.eval.steps, allow_none=True)
    _positive("log.every_steps", cfg.log.every_steps)
    _positive("data.train_examples", cfg.data.train_examples, allow_none=True)
    _positive("data.test_examples", cfg.data.test_examples, allow_none=True)
    _positive("data.validation_examples", cfg.data.get("validation_examples"), allow_none=True)
    _positive("data.shuffle_buffer", cfg.data.shuffle_buffer, allow_none=True)
    _positive("device.intra_op_threads", cfg.device.intra_op_threads, allow_zero=True)
    _positive("device.inter_op_threads", cfg.device.inter_op_threads, allow_zero=True)
    _positive("session.stop_grace_period_secs", cfg.session.stop_grace_period_secs, allow_zero=True)
    _positive("device.gpu_slot", cfg.device.gpu_slot, allow_none=True, allow_zero=True)
    _check_replicas(cfg)
    refusal = precision_refusal(str(cfg.device.precision), str(cfg.device.kind))
    if refusal:
        raise ConfigError(refusal)
    _positive("session.max_recoveries", cfg.session.max_recoveries, allow_none=True, allow_zero=True)
    _positive("session.recovery_wait_secs", cfg.session.recovery_wait_secs, allow_zero=True)
    _positive("checkpoint.keep_every_n_hours", cfg.checkpoint.keep_every_n_hours)
    _check_data(cfg.data)
    start = cfg.init_from.checkpoint
    if start and not (os.path.exists(os.path.expanduser(start)) or os.path.exists(os.path.expanduser(start) + ".index")):
        raise ConfigError(f"init_from.checkpoint={start}: no such checkpoint or dir; give a checkpoint prefix or a run's checkpoints/ dir")
    if cfg.checkpoint.dir:
        check_writable_dir(cfg.checkpoint.dir, "checkpoint.dir")
    _check_optimizer(cfg)
    if not cfg.data.feature_key:
        raise ConfigError("data.feature_key is empty; set data.feature_key=x")
    if cfg.eval.direction not in ("auto", "maximize", "minimize"):
        raise ConfigError(f"eval.direction={cfg.eval.direction}: use auto, maximize or minimize")
    check_distributed(cfg)
    if not cfg.eval.objective:
        raise ConfigError("eval.objective is empty; name an eval metric, e.g. eval.objective=accuracy")
    _check_model_shapes(cfg.model)


def checkpoint_dir_for(ckpt_dir, workdir: str) -> str:
    """A run's checkpoint dir: ``checkpoint.dir`` made absolute, else ``checkpoints/`` in its run dir."""
    return os.path.abspath(os.path.expanduser(os.path.join(workdir, "checkpoints") if ckpt_dir is None else ckpt_dir))


def prepare(cfg, workdir: str):
    """A copy of ``cfg`` with the run-dependent defaults filled in (``checkpoint.dir`` inside
    ``workdir``; any checkpoint.dir made absolute) and every rule checked.

    Raises:
      ConfigError: the first rule the config breaks.
    """
    cfg = copy.deepcopy(cfg)
    if cfg.checkpoint.dir is None:
        cfg.checkpoint.dir = os.path.join(workdir, "checkpoints")
    validate(cfg)
    cfg.checkpoint.dir = checkpoint_dir_for(cfg.checkpoint.dir, workdir)
    return cfg
