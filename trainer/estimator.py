"""The model_fn contract: ``ModeKeys`` and ``EstimatorSpec``, as ``tf.estimator`` had them.

A model is a function ``model_fn(features, labels, mode, params) -> EstimatorSpec``,
the convention of TF1 Estimators, so existing model code ports by changing imports:
``tf.estimator.ModeKeys`` / ``EstimatorSpec`` / ``export.PredictOutput`` become
``trainer.estimator.ModeKeys`` / ``EstimatorSpec`` / ``export.PredictOutput``.
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


class _ExportOutput:
    """An ``export_outputs`` entry: one signature of the exported SavedModel (served through the Predict API)."""

    def outputs(self) -> Dict[str, Any]:
        raise NotImplementedError

    def as_signature_def(self, receiver_tensors):
        import tensorflow as tf

        return tf.compat.v1.saved_model.predict_signature_def(inputs=receiver_tensors, outputs=self.outputs())


class PredictOutput(_ExportOutput):
    def __init__(self, outputs):
        self._outputs = outputs if isinstance(outputs, dict) else {"output": outputs}

    def outputs(self):
        return self._outputs


class ClassificationOutput(_ExportOutput):
    def __init__(self, scores=None, classes=None):
        if scores is None and classes is None:
            raise ValueError("ClassificationOutput needs scores or classes")
        self._outputs = {k: v for k, v in (("scores", scores), ("classes", classes)) if v is not None}

    def outputs(self):
        return self._outputs


class RegressionOutput(_ExportOutput):
    def __init__(self, value):
        self._outputs = {"outputs": value}

    def outputs(self):
        return self._outputs


class export:  # noqa: N801  (mirrors the tf.estimator.export namespace)
    PredictOutput = PredictOutput
    ClassificationOutput = ClassificationOutput
    RegressionOutput = RegressionOutput
