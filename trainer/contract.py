"""The model_fn contract as the runner reads it: ``ModeKeys``, ``EstimatorSpec``, the ``RunConfig``
a model_fn receives, and the export outputs and serving inputs, as ``tf.estimator`` had them.
Users import them from ``trainer.estimator`` (which adds the Estimator API on top). Every layer of the
runner reads it; it imports nothing of the runner.

A model is a function ``model_fn(features, labels, mode, params, config) -> EstimatorSpec``,
the convention of TF1 Estimators. As Estimator did, the runner passes only the arguments the function declares (``features``
always; ``labels``, ``mode``, ``params``, ``config`` by name), and input_fns get ``params``,
``mode`` and ``config`` if they declare them. A spec without a ``train_op`` in TRAIN mode gets
one from the ``optimizer`` config.
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


class RunConfig(NamedTuple):
    """What a model_fn or input_fn declaring ``config`` receives: Estimator's RunConfig fields, read-only
    (``trainer.estimator.RunConfig`` is the one a program builds and hands to an Estimator)."""

    model_dir: Optional[str] = None  # the checkpoint dir
    tf_random_seed: Optional[int] = None
    save_summary_steps: Optional[int] = None
    save_checkpoints_steps: Optional[int] = None
    save_checkpoints_secs: Optional[float] = None
    keep_checkpoint_max: int = 5
    keep_checkpoint_every_n_hours: float = 10000.0
    log_step_count_steps: Optional[int] = None
    session_config: Optional[Any] = None
    cluster_spec: Optional[Dict[str, Sequence[str]]] = None  # job -> addresses; None for one process
    task_type: str = "worker"
    task_id: int = 0
    is_chief: bool = True
    master: str = ""
    evaluation_master: str = ""
    num_ps_replicas: int = 0
    num_worker_replicas: int = 1  # training tasks (chief and workers)
    global_id_in_cluster: int = 0  # this training task's index among them: its data shard
    train_distribute: Optional[Any] = None
    eval_distribute: Optional[Any] = None
    device_fn: Optional[Any] = None
    protocol: Optional[str] = None
    service: Optional[Any] = None


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


class ServingInputReceiver(NamedTuple):
    """What a serving input function returns: the ``features`` given to the model_fn (mode infer) and
    the ``receiver_tensors`` a request feeds (a dict, or one tensor served as ``input``)."""

    features: Any
    receiver_tensors: Any
    receiver_tensors_alternatives: Optional[Any] = None


class BareTensor(dict):
    """A batch of a model_fn that predicts one tensor rather than a dict: the tensor under ``predictions``
    (``Estimator.predict`` yields its rows bare, as Estimator did; a dict with one key stays a dict)."""
