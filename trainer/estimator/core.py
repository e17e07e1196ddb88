"""``Estimator``: ``tf.estimator.Estimator``'s Python API, each call run by the runner (``trainer.run``)
on a config made from the call's arguments and the ``RunConfig``, so a program gets the runner's
checkpoints, exact resume, SIGTERM checkpoint, lock, NaN guard and records in its ``model_dir``.

The ``model_dir`` is the run dir and the checkpoint dir at once, laid out as Estimator laid it out
(``model.ckpt-N``, ``eval/``, ``export/``) plus the runner's ``metrics.json`` and ``manifest.json``.
The model_fn, input_fns and hooks are the program's own Python objects (closures, partials, bound
methods and lambdas too): each call's config (``plan.Call``) holds them as they are.
"""

import copy
import logging
import os
import tempfile
import time
from typing import Callable, Dict, Iterable, List, Optional

from trainer.config.targets import declared_args
import trainer as _runner  # bound now: a program's own package may take the name (estimator.shadow)
from trainer.estimator.plan import Call
from trainer.estimator.resume_record import write_record
from trainer.estimator.run_config import RunConfig
from trainer.model.model_fn import MODEL_FN_ARGS, ModelFn
from trainer.contract import BareTensor, ModeKeys

log = logging.getLogger("trainer")

INPUT_FN_ARGS = ("params", "mode", "config", "input_context")


class Estimator:
    """``Estimator(model_fn, model_dir=None, config=None, params=None, warm_start_from=None)`` with
    ``train``, ``evaluate``, ``predict``, ``export_saved_model`` and the checkpoint readers."""

    def __init__(self, model_fn: Callable, model_dir: Optional[str] = None, config: Optional[RunConfig] = None,
                 params: Optional[Dict] = None, warm_start_from=None):
        config = config if config is not None else RunConfig()
        if not isinstance(config, RunConfig):
            raise ValueError(f"config must be a trainer.estimator.RunConfig, got {type(config).__name__}")
        if model_dir and config.model_dir and os.path.abspath(model_dir) != os.path.abspath(config.model_dir):
            raise ValueError(f"model_dir are set both in constructor and RunConfig, but with different values. "
                             f"In constructor: '{model_dir}', in RunConfig: '{config.model_dir}'")
        model_dir = model_dir or config.model_dir
        if not model_dir:
            model_dir = tempfile.mkdtemp()
            log.warning("Using temporary folder as model directory: %s", model_dir)
        self._model_dir = os.path.abspath(os.path.expanduser(str(model_dir)))
        self._config = config.replace(model_dir=self._model_dir)
        self._config.settings()  # a field the runner cannot honour fails here, at construction
        self._model_fn = model_fn
        self._takes = declared_args(model_fn, "model_fn", _name(model_fn), MODEL_FN_ARGS, required=("features",))
        self._params = params if params is not None and not isinstance(params, dict) else dict(params or {})
        self._warm_start_from = warm_start_from

    # --- properties --------------------------------------------------------------------------

    @property
    def model_dir(self) -> str:
        return self._model_dir

    @property
    def config(self) -> RunConfig:
        return self._config

    @property
    def params(self):
        return copy.deepcopy(self._params)

    @property
    def model_fn(self) -> Callable:
        return self._model_fn

    def eval_dir(self, name: Optional[str] = None) -> str:
        """Where ``evaluate(..., name=name)`` writes its summaries."""
        return os.path.join(self._model_dir, f"eval_{name}" if name else "eval")

    # --- checkpoints ---------------------------------------------------------------------------

    def latest_checkpoint(self) -> Optional[str]:
        import tensorflow as tf

        return tf.train.latest_checkpoint(self._model_dir)

    def get_variable_names(self) -> List[str]:
        import tensorflow as tf

        return [name for name, _ in tf.train.list_variables(self._checkpoint())]

    def get_variable_value(self, name: str):
        import tensorflow as tf

        return tf.train.load_variable(self._checkpoint(), name)

    def _checkpoint(self, path: Optional[str] = None) -> str:
        """``path``, else the newest intact checkpoint of the model_dir (a damaged newest one is passed
        over with a warning, as training passes it over)."""
        from trainer.checkpoints.intact import find_intact

        found = path or getattr(find_intact(self._model_dir), "path", None)
        if not found:
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")
        return found

    def _step(self) -> int:
        """The global step of the newest intact checkpoint, where training resumes (0 without one)."""
        import tensorflow as tf

        from trainer.checkpoints.intact import find_intact

        found = find_intact(self._model_dir)
        return int(tf.train.load_variable(found.path, "global_step")) if found else 0

    # --- the calls -----------------------------------------------------------------------------

    def train(self, input_fn: Callable, hooks: Optional[Iterable] = None, steps: Optional[int] = None,
              max_steps: Optional[int] = None, saving_listeners: Optional[Iterable] = None) -> "Estimator":
        """Train from the newest checkpoint: ``steps`` more steps, or up to the global step ``max_steps``,
        or (both None) until ``input_fn``'s input ends. Returns the Estimator.

        Under a ``TF_CONFIG`` cluster, this process plays its task's role (``distributed=tf_config``):
        a ps serves until the training ends, the chief and the workers train (the chief saves)."""
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        start = self._step()
        if max_steps is not None and start >= max_steps:
            log.info("Skipping training since max_steps has already saved.")
            return self
        target = start + steps if steps is not None else max_steps
        if target is None:
            _reopen(self._model_dir)  # until the input ends, again: a finished record must not stop it
        call = self._call({"mode": "train", "eval.enabled": False, "train.max_steps": target,
                           "data.train_fn": self._input(input_fn), **self._listeners(saving_listeners)},
                          ModeKeys.TRAIN, hooks,
                          # this process is one task of the cluster TF_CONFIG describes
                          distributed="tf_config" if self._config.distributed else "none")

        def record() -> None:  # once the run is accepted: `train resume=MODEL_DIR` continues it
            write_record(self._model_dir, call, {"model.fn": self._model_fn, "data.train_fn": input_fn},
                         self._call_params())

        result = _runner.run(call.config(), self._model_dir, on_accepted=record)
        if isinstance(result, dict) and result.get("loss") is not None:  # Estimator's closing line of a train()
            _tf_log("Loss for final step: %s.", result["loss"])
        return self

    def evaluate(self, input_fn: Callable, steps: Optional[int] = None, hooks: Optional[Iterable] = None,
                 checkpoint_path: Optional[str] = None, name: Optional[str] = None) -> Dict:
        """Evaluate a checkpoint (default the newest) over ``input_fn`` (``steps`` batches at most): the
        metrics, ``loss`` and ``global_step``; written as summaries in ``eval`` (``eval_<name>``)."""
        path = self._checkpoint(checkpoint_path)
        call = self._call({"mode": "evaluate", "data.eval_fn": self._input(input_fn), "eval.checkpoint": path,
                           "eval.steps": None if steps is None else int(steps), "eval.objective": "loss"},
                          ModeKeys.EVAL, hooks)
        result = _runner.run(call.config(), self._model_dir)
        values = dict(result["metrics"], global_step=result["global_step"])
        _write_summaries(self.eval_dir(name), values)
        values = _as_numpy(values)
        _tf_log("Saving dict for global step %d: %s", values["global_step"],
                ", ".join(f"{k} = {v}" for k, v in sorted(values.items())))
        return values

    def predict(self, input_fn: Callable, predict_keys: Optional[List[str]] = None, hooks: Optional[Iterable] = None,
                checkpoint_path: Optional[str] = None, yield_single_examples: bool = True):
        """Yield the predictions of a checkpoint (default the newest) for ``input_fn``'s features, in input
        order: one dict (or value) per example, or per batch with ``yield_single_examples=False``."""
        path = self._checkpoint(checkpoint_path)
        call = self._call({"mode": "predict", "predict.input_fn": self._input(input_fn)}, ModeKeys.PREDICT, hooks)
        for batch in _runner.predictions(call.config(), self._model_dir, path):
            keys = _keys(batch, predict_keys)
            single = isinstance(batch, BareTensor) and not predict_keys
            if not yield_single_examples:
                yield batch["predictions"] if single else {k: batch[k] for k in keys}
                continue
            for i in range(len(next(iter(batch.values())))):
                yield batch["predictions"][i] if single else {k: batch[k][i] for k in keys}

    def export_saved_model(self, export_dir_base: str, serving_input_receiver_fn: Callable, assets_extra=None,
                           as_text: bool = False, checkpoint_path: Optional[str] = None,
                           experimental_mode: str = ModeKeys.PREDICT) -> bytes:
        """Export a checkpoint (default the newest) as a SavedModel in ``export_dir_base/<timestamp>``;
        returns that dir as bytes."""
        if assets_extra or as_text or experimental_mode != ModeKeys.PREDICT:
            raise ValueError("export_saved_model: assets_extra, as_text and experimental_mode other than PREDICT "
                             "are not supported; leave them at their defaults")
        path = self._checkpoint(checkpoint_path)
        export_dir = _timestamped(os.path.abspath(os.path.expanduser(str(export_dir_base))))
        call = self._call({"mode": "export", "export.dir": export_dir, "export.checkpoint": path,
                           "export.serving_input_fn": _standing_for(serving_input_receiver_fn)}, ModeKeys.PREDICT, None)
        _runner.run(call.config(), self._model_dir)
        return export_dir.encode()

    export_savedmodel = export_saved_model

    # --- the runner ------------------------------------------------------------------------------

    def _call_params(self) -> Dict:
        """The params this call's model_fn and input_fns get (TPUEstimator adds the batch size)."""
        return self._params

    def _input(self, input_fn: Callable) -> Callable:
        """``input_fn`` as the runner calls it, with the Estimator's params (not the runner's)."""
        takes = declared_args(input_fn, "input_fn", _name(input_fn), INPUT_FN_ARGS)
        params = self._call_params()

        def call(mode, config, input_context):
            offered = {"params": copy.deepcopy(params), "mode": mode, "config": config, "input_context": input_context}
            return input_fn(**{k: v for k, v in offered.items() if k in takes})

        call.stands_for = input_fn  # messages name the program's function
        return call

    def _listeners(self, listeners: Optional[Iterable]) -> Dict:
        return {f"checkpoint.listeners.l{i}": {"_target_": _returning(listener)}
                for i, listener in enumerate(listeners or ())}

    def _model(self, call_mode: str, hooks: Optional[Iterable]) -> Callable:
        """The model_fn as the runner calls it: with the Estimator's params, ``hooks`` added to the spec's
        hooks when it is called for ``call_mode``."""
        user = ModelFn(self._model_fn, _name(self._model_fn), self._takes)
        params, hooks = self._call_params(), list(hooks or ())
        field = {ModeKeys.TRAIN: "training_hooks", ModeKeys.EVAL: "evaluation_hooks",
                 ModeKeys.PREDICT: "prediction_hooks"}[call_mode]

        def model_fn(features, labels, mode, config):
            spec = user(features, labels, mode, copy.deepcopy(params), config)
            if hooks and mode == call_mode:
                spec = spec._replace(**{field: list(getattr(spec, field)) + hooks})
            return spec

        model_fn.stands_for = self._model_fn  # messages name the program's function
        return model_fn

    def _call(self, settings: Dict, mode: str, hooks: Optional[Iterable], distributed: str = "none") -> Call:
        """The runner's config of a call: the Estimator's keys, then the call's own."""
        base = {"model.fn": self._model(mode, hooks), "log.progress": "off",
                "data.skip_trained_batches": False,  # each call reads its input from the start, as Estimator's did
                "checkpoint.dir": self._model_dir}
        return Call(session=os.environ.get("TRAINER_SESSION", "monitored"), distributed=distributed,
                    settings={**base, **self._config.settings(), **_warm_start(self._warm_start_from), **settings})


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", None) or repr(fn)


def _returning(obj):
    def make():
        return obj

    make.stands_for = obj
    return make


def _standing_for(fn: Callable) -> Callable:
    """``fn`` behind a plain function (copied as itself with the config), which messages name by ``fn``."""
    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    call.stands_for = fn
    return call


def _tf_log(message: str, *args) -> None:
    """A line of Estimator's console output, through TensorFlow's logger (the program's own verbosity)."""
    import tensorflow as tf

    tf.compat.v1.logging.info(message, *args)


def _as_numpy(values: Dict) -> Dict:
    """Estimator's types: each metric a NumPy float32 (or the value itself where it is not a float), the
    global step a NumPy int64."""
    import numpy as np

    out = {k: np.float32(v) if isinstance(v, float) else v for k, v in values.items()}
    out["global_step"] = np.int64(values["global_step"])
    return out


def _keys(batch: Dict, predict_keys: Optional[List[str]]) -> List[str]:
    if not predict_keys:
        return list(batch)
    missing = sorted(set(predict_keys) - set(batch))
    if missing:
        raise ValueError(f"Expected to run at least one output from {sorted(batch)}, provided {predict_keys}.")
    return list(predict_keys)


def _reopen(model_dir: str) -> None:
    """A record that says the run finished at the end of its input no longer stops the next pass."""
    from trainer.records import read_json, write_json

    path = os.path.join(model_dir, "metrics.json")
    record = read_json(path)
    if record.get("status") == "finished":
        write_json(path, dict(record, status="reopened"))


def _timestamped(base: str) -> str:
    stamp = int(time.time())
    while os.path.exists(os.path.join(base, str(stamp))):
        stamp += 1
    return os.path.join(base, str(stamp))


def _write_summaries(logdir: str, values: Dict) -> None:
    import tensorflow as tf

    tf1 = tf.compat.v1
    summary = tf1.Summary(value=[tf1.Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()
                                 if k != "global_step" and isinstance(v, (int, float))])
    from trainer.hooks.builtin import open_event_writers

    with tf.Graph().as_default():  # a FileWriter needs graph mode
        # A file name of its own: two evaluations within one second (a fast train_and_evaluate) each
        # opening TensorFlow's default name would truncate the first one's file.
        open_event_writers({logdir: None})
        writer = tf1.summary.FileWriterCache.get(logdir)
        writer.add_summary(summary, int(values["global_step"]))
        writer.flush()


def _warm_start(setting) -> Dict:
    if setting is None:
        return {}
    path = getattr(setting, "ckpt_to_initialize_from", setting)
    variables = getattr(setting, "vars_to_warm_start", ".*")
    if not isinstance(variables, str):
        raise ValueError("warm_start_from: vars_to_warm_start as a list is not supported; give one regular "
                         "expression")
    if getattr(setting, "var_name_to_vocab_info", None):
        raise ValueError("warm_start_from: var_name_to_vocab_info is not supported; leave it unset")
    name_map = getattr(setting, "var_name_to_prev_var_name", None) or {}
    out = {"init_from.checkpoint": str(path), "init_from.vars_to_warm_start": variables}
    return {**out, "init_from.var_name_map": dict(name_map)} if name_map else out
