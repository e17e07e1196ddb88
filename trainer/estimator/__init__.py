"""``tf.estimator`` for programs written against it, run by the runner.

A program changes ``tf.estimator`` to ``trainer.estimator`` and runs as it did: ``Estimator``
(``train``, ``evaluate``, ``predict``, ``export_saved_model``), ``RunConfig``, ``train_and_evaluate``
with ``TrainSpec``, ``EvalSpec`` and the exporters, and the model_fn contract (``ModeKeys``,
``EstimatorSpec``, ``export.*``, ``inputs.numpy_input_fn``, ``inputs.pandas_input_fn``), the canned
models (``DNNClassifier``, ``LinearClassifier``, ``DNNLinearCombinedClassifier``, ``BaselineClassifier`` and
their regressor and head-taking forms) with Estimator's variable names, the heads (``BinaryClassHead``,
...; ``binary_classification_head``, ...), ``add_metrics``, and the
hooks' names Estimator gave them (``trainer.estimator.SessionRunHook``, ...). Each call runs through
``trainer.run``.

Importing this module sets ``TF_USE_LEGACY_KERAS=1`` (unless set) before it imports TensorFlow, and
changes nothing else in the process; a call runs ``trainer.run``, with its documented effects
(``trainer.process``).
"""

from typing import NamedTuple

import tensorflow as _tf

from trainer.estimator.canned import (BaselineClassifier, BaselineEstimator, BaselineRegressor, DNNClassifier,
                                      DNNEstimator, DNNLinearCombinedClassifier, DNNLinearCombinedEstimator,
                                      DNNLinearCombinedRegressor, DNNRegressor, LinearClassifier, LinearEstimator,
                                      LinearRegressor)
from trainer.estimator.core import Estimator
from trainer.estimator.extenders import add_metrics
from trainer.estimator.head import (BinaryClassHead, Head, LogisticRegressionHead, MultiClassHead, MultiHead,
                                    MultiLabelHead, PoissonRegressionHead, RegressionHead, binary_classification_head,
                                    logistic_regression_head, multi_class_head, multi_head, multi_label_head,
                                    poisson_regression_head, regression_head)
from trainer.estimator.run_config import RunConfig
from trainer.estimator import tpu
from trainer.estimator.early_stopping import (stop_if_higher_hook, stop_if_lower_hook, stop_if_no_decrease_hook,
                                              stop_if_no_increase_hook)
from trainer.estimator.exporters import BestExporter, Exporter, FinalExporter, LatestExporter
from trainer.estimator.in_memory import InMemoryEvaluatorHook
from trainer.estimator.training import EvalSpec, TrainSpec, train_and_evaluate
from trainer.contract import (ClassificationOutput, EstimatorSpec, ModeKeys, PredictOutput, RegressionOutput,
                              ServingInputReceiver)
from trainer.estimator.input_fns import inputs, numpy_input_fn, pandas_input_fn
from trainer.estimator.serving import (build_parsing_serving_input_receiver_fn, build_raw_serving_input_receiver_fn,
                                       export)

_train = _tf.compat.v1.train

# The hooks and run arguments tf.estimator re-exported from tf.train.
SessionRunHook = _train.SessionRunHook
SessionRunArgs = _train.SessionRunArgs
SessionRunContext = _train.SessionRunContext
SessionRunValues = _train.SessionRunValues
CheckpointSaverHook = _train.CheckpointSaverHook
CheckpointSaverListener = _train.CheckpointSaverListener
FeedFnHook = _train.FeedFnHook
FinalOpsHook = _train.FinalOpsHook
GlobalStepWaiterHook = _train.GlobalStepWaiterHook
LoggingTensorHook = _train.LoggingTensorHook
NanLossDuringTrainingError = _train.NanLossDuringTrainingError
NanTensorHook = _train.NanTensorHook
ProfilerHook = _train.ProfilerHook
SecondOrStepTimer = _train.SecondOrStepTimer
StepCounterHook = _train.StepCounterHook
StopAtStepHook = _train.StopAtStepHook
SummarySaverHook = _train.SummarySaverHook


class experimental:  # noqa: N801  (mirrors tf.estimator.experimental)
    stop_if_no_decrease_hook = staticmethod(stop_if_no_decrease_hook)
    stop_if_no_increase_hook = staticmethod(stop_if_no_increase_hook)
    stop_if_higher_hook = staticmethod(stop_if_higher_hook)
    stop_if_lower_hook = staticmethod(stop_if_lower_hook)
    InMemoryEvaluatorHook = InMemoryEvaluatorHook


class VocabInfo(NamedTuple):
    """Estimator's vocabulary remapping for a warm start; ``WarmStartSettings`` refuses it in one line
    (the runner warm-starts variables by name only)."""

    new_vocab: str
    new_vocab_size: int
    num_oov_buckets: int
    old_vocab: str
    old_vocab_size: int = -1
    backup_initializer: object = None
    axis: int = 0


class WarmStartSettings:
    """Estimator's warm start: the variables of ``vars_to_warm_start`` (one regular expression) taken from
    ``ckpt_to_initialize_from`` when a run starts without a checkpoint of its own."""

    def __init__(self, ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
                 var_name_to_prev_var_name=None):
        self.ckpt_to_initialize_from = ckpt_to_initialize_from
        self.vars_to_warm_start = vars_to_warm_start
        self.var_name_to_vocab_info = var_name_to_vocab_info
        self.var_name_to_prev_var_name = var_name_to_prev_var_name


__all__ = [
    "BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "BinaryClassHead", "DNNClassifier",
    "DNNEstimator", "DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor",
    "DNNRegressor", "Head", "LinearClassifier", "LinearEstimator", "LinearRegressor", "LogisticRegressionHead",
    "MultiClassHead", "MultiHead", "MultiLabelHead", "PoissonRegressionHead", "RegressionHead", "add_metrics",
    "binary_classification_head", "logistic_regression_head", "multi_class_head", "multi_head", "multi_label_head",
    "poisson_regression_head", "regression_head",
    "BestExporter", "CheckpointSaverHook", "CheckpointSaverListener", "ClassificationOutput", "Estimator",
    "EstimatorSpec", "EvalSpec", "Exporter", "FeedFnHook", "FinalExporter", "FinalOpsHook", "GlobalStepWaiterHook",
    "LatestExporter", "LoggingTensorHook", "ModeKeys", "NanLossDuringTrainingError", "NanTensorHook",
    "PredictOutput", "ProfilerHook", "RegressionOutput", "RunConfig", "SecondOrStepTimer", "ServingInputReceiver",
    "SessionRunArgs", "SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook",
    "StopAtStepHook", "SummarySaverHook", "TrainSpec", "experimental", "tpu", "VocabInfo", "WarmStartSettings", "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn", "export", "inputs", "numpy_input_fn", "pandas_input_fn",
    "train_and_evaluate",
]
