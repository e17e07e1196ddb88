"""The model_fn contract: ``ModeKeys`` and ``EstimatorSpec``, as ``tf.estimator`` had them.

A model is a function ``model_fn(features, labels, mode, params) -> EstimatorSpec``,
the convention of TF1 Estimators, so existing model code ports by changing imports.
The runner calls it once per mode (TRAIN, then EVAL reusing the same variables).
A spec without a ``train_op`` in TRAIN mode gets one from the ``optimizer`` config.
"""

from typing import Any, Dict, NamedTuple, Optional, Sequence


class ModeKeys:
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


class EstimatorSpec(NamedTuple):
    mode: str
    predictions: Optional[Any] = None
    loss: Optional[Any] = None
    train_op: Optional[Any] = None
    eval_metric_ops: Optional[Dict[str, Any]] = None  # name -> (value_tensor, update_op)
    export_outputs: Optional[Dict[str, Any]] = None
    training_chief_hooks: Sequence[Any] = ()
    training_hooks: Sequence[Any] = ()
    scaffold: Optional[Any] = None
    evaluation_hooks: Sequence[Any] = ()
    prediction_hooks: Sequence[Any] = ()
