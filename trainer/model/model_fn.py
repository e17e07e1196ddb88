"""The model_fn contract: loading a user's model_fn and input_fns and calling them as Estimator did.

Estimator passed a model_fn only the arguments it declares: ``features`` always, then
``labels``, ``mode``, ``params`` and ``config`` by name; an input_fn got ``params``, ``mode``
and ``config`` if it declares them. A function that cannot be called so is a ConfigError
naming what it takes, before any graph is built.
"""

import importlib
import logging
from dataclasses import dataclass
from typing import Callable, FrozenSet

from omegaconf import open_dict

from trainer.config.targets import callable_name, declared_args, instantiate_params, load_callable
from trainer.data.sources import load_data, num_classes_of
from trainer.errors import ConfigError, ContractError, TrainerError, describe
from trainer.contract import EstimatorSpec, ModeKeys, RunConfig

log = logging.getLogger("trainer")

MODEL_FN_ARGS = ("features", "labels", "mode", "params", "config")
BUILT_IN_MODELS = "trainer.models."  # the models shipped in models/


@dataclass(frozen=True)
class ModelFn:
    """A model_fn and the arguments it declares."""

    fn: Callable
    path: str
    takes: FrozenSet[str]

    @property
    def name(self) -> str:
        """The model_fn as messages name it (``model.fn=PATH``, or where a program defined it)."""
        return callable_name("model.fn", self.path, self.fn)

    def __call__(self, features, labels, mode: str, params: dict, config: RunConfig) -> EstimatorSpec:
        if labels is not None and "labels" not in self.takes:
            raise ConfigError(f"{self.name} takes no labels, but the input gives labels; "
                              "add a labels argument to the model_fn")
        offered = {"labels": labels, "mode": mode, "params": params, "config": config}
        try:
            result = self.fn(features=features, **{k: v for k, v in offered.items() if k in self.takes})
        # broad: the user's model_fn may raise anything; it is re-raised, named when labels=None caused it
        except Exception as e:
            if labels is None and mode in (ModeKeys.TRAIN, ModeKeys.EVAL) and "labels" in self.takes and \
                    not isinstance(e, TrainerError):
                raise ContractError(f"{self.name} failed in mode {mode} with labels=None ({describe(e)}): the input_fn "
                                    "gave features only; return (features, labels) from it") from e
            raise
        return checked_spec(as_spec(result, mode, self.name), mode, self.name)


def load_model_fn(path: str) -> ModelFn:
    """The model_fn at dotted ``path`` (``model.fn``).

    Raises:
      ConfigError: it cannot be imported, or does not take ``features`` (and only Estimator's arguments).
    """
    fn = load_callable(path, "model.fn")
    return ModelFn(fn, path, declared_args(fn, "model.fn", path, MODEL_FN_ARGS, required=("features",)))


def as_spec(result, mode: str, name: str) -> EstimatorSpec:
    """What a model_fn returned, as an EstimatorSpec (an Estimator-era namedtuple is taken field by field);
    ``name`` names the model_fn in messages."""
    if isinstance(result, EstimatorSpec):
        return result
    if hasattr(result, "as_estimator_spec"):  # trainer.estimator.tpu.TPUEstimatorSpec
        return result.as_estimator_spec()
    if hasattr(result, "_asdict"):
        fields = result._asdict()
        unknown = sorted(k for k, v in fields.items() if k not in EstimatorSpec._fields and v is not None)
        if unknown:  # never stripped to the fields the runner knows: they would be lost without a word
            raise ConfigError(f"{name} returned a {type(result).__name__} with {', '.join(unknown)}, which "
                              "an EstimatorSpec has no place for; return trainer.estimator.EstimatorSpec (or a "
                              "trainer.estimator.tpu.TPUEstimatorSpec)")
        return EstimatorSpec(**{k: v for k, v in fields.items() if k in EstimatorSpec._fields})
    raise ContractError(f"{name} returned {type(result).__name__} for mode {mode}; return an EstimatorSpec")


def checked_spec(spec: EstimatorSpec, mode: str, name: str) -> EstimatorSpec:
    """``spec`` as Estimator's EstimatorSpec checked it: a scalar floating-point loss (a [1] one reshaped
    to a scalar, as Estimator did), and ``eval_metric_ops`` of (value, update_op) pairs or Keras metrics.

    Raises:
      ContractError: naming the model_fn, the field and what it takes.
    """
    import tensorflow as tf

    loss = spec.loss
    if loss is not None:
        if not isinstance(loss, (tf.Tensor, tf.Variable)):
            raise ContractError(f"{name} returned a loss of type {type(loss).__name__} for mode {mode}; the loss is "
                                "a scalar tensor")
        if loss.shape.rank is not None and any(size != 1 for size in loss.shape.as_list()):
            raise ContractError(f"{name} returned a loss of shape {loss.shape.as_list()} for mode {mode}; the loss is "
                                "a scalar: reduce the per-example losses, e.g. tf.reduce_mean(...)")
        if not loss.dtype.is_floating:
            raise ContractError(f"{name} returned a loss of dtype {loss.dtype.name} for mode {mode}; the loss is a "
                                "floating-point scalar: compute it in float32")
        if loss.shape.rank:
            spec = spec._replace(loss=tf.reshape(loss, []))
    metrics = spec.eval_metric_ops
    if metrics is not None and not isinstance(metrics, dict):
        raise ContractError(f"{name} returned eval_metric_ops of type {type(metrics).__name__}; give a dict of "
                            "name -> (metric_value, update_op)")
    for key, value in (metrics or {}).items():
        keras = hasattr(value, "update_state") and hasattr(value, "result")
        pair = isinstance(value, (tuple, list)) and len(value) == 2 and \
            all(isinstance(v, (tf.Tensor, tf.Variable, tf.Operation)) for v in value)
        if not (keras or pair):
            shown = f"a {len(value)}-tuple" if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
            raise ContractError(f"{name} returned eval_metric_ops[{key!r}] as {shown}; each value is a "
                                "(metric_value, update_op) pair, as tf.compat.v1.metrics.accuracy(labels, predictions) "
                                "returns, or a Keras metric whose update_state the model_fn called")
    return spec


def model_params(model_cfg) -> dict:
    """``model.params`` as plain Python, entries with ``_target_`` (feature columns, ...) built."""
    return instantiate_params(model_cfg.params, "model.params")


def load_data_for(model_cfg, data_cfg):
    """The data of ``data_cfg`` (``trainer.data.sources.load_data``), and the model's params it completes:
    a built-in model's null ``num_classes`` becomes the data's classes (10 for input_fns, which cannot
    tell), and a canned model's feature columns are read off a table's columns."""
    data = load_data(data_cfg)
    params = model_cfg.params
    if "num_classes" in params and params.num_classes is None:
        if data is None:  # input_fns: the built-in models' former default (a label >= 10 fails the loss op)
            log.warning("model.params.num_classes=null with data=%s: using 10 classes; set model.params.num_classes",
                        data_cfg.name)
        with open_dict(params):
            params.num_classes = num_classes_of(data)
    complete = _built_in_completion(model_cfg.fn)
    if complete is not None:
        complete(params, data, data_cfg.get("ignore") or ())
    return data


def _built_in_completion(fn):
    """A built-in model's ``complete_params(params, data, ignore)`` (``trainer/models/<name>.py``), which
    fills what its params leave to the data (the canned models' columns); None for any other model."""
    if not isinstance(fn, str) or not fn.startswith(BUILT_IN_MODELS):
        return None
    return getattr(importlib.import_module(fn.rsplit(".", 1)[0]), "complete_params", None)
