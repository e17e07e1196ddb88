"""The baseline family: one bias per output (``baseline/bias``), the same for every example, so the model
learns the labels' mean; v2 and v1 side by side, both Ftrl at 0.3 for a named optimizer (v1: TF1's Ftrl,
the loss summed over the batch, the v1 heads)."""

from typing import List, Tuple

import tensorflow as tf

from trainer.estimator.canned.base import (SUM, SUM_OVER_BATCH_SIZE, Canned, classifier_head, optimizer_of,
                                           optimizer_v1)
from trainer.estimator.head import RegressionHead
from trainer.estimator.head.v1 import RegressionHeadV1, classifier_head_v1

tf1 = tf.compat.v1

LEARNING_RATE = 0.3


def baseline_logits(features, units: int, weight_column=None, scope: str = "baseline") -> Tuple[tf.Tensor, List]:
    """One bias per output, the same for every example."""
    batch = _batch_size(features, weight_column)
    with tf1.variable_scope(scope):
        bias = tf1.get_variable("bias", shape=[units], initializer=tf1.zeros_initializer(), use_resource=True)
    return bias * tf.ones([batch, units]), [bias]


def baseline_model_fn(features, labels, mode, head, optimizer="Ftrl", weight_column=None):
    """The v2 model_fn."""
    logits, variables = baseline_logits(features, head.logits_dimension, weight_column)
    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=optimizer_of(optimizer, mode, LEARNING_RATE),
                                      trainable_variables=variables)


def baseline_model_fn_v1(features, labels, mode, head, optimizer="Ftrl", weight_column=None):
    """The v1 model_fn."""
    logits, _ = baseline_logits(features, head.logits_dimension, weight_column)
    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=optimizer_v1(optimizer, mode, LEARNING_RATE))


def _batch_size(features, weight_column):
    """The batch size of ``features`` (a tensor or a dict of them; the weight column if it is the only one)."""
    if isinstance(features, dict):
        if not features:
            raise ValueError("features is an empty dict; a baseline model needs at least one feature to count "
                             "the batch (the weight column counts)")
        key = weight_column if isinstance(weight_column, str) else getattr(weight_column, "key", None)
        tensor = features.get(key) if key in features else next(iter(features.values()))
    else:
        tensor = features
    if isinstance(tensor, tf.SparseTensor):
        return tf.cast(tensor.dense_shape[0], tf.int32)
    return tf.shape(tensor)[0]


class BaselineEstimator(Canned):
    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None, weight_column=None):
        def baseline_model_fn_v2(features, labels, mode):
            return baseline_model_fn(features, labels, mode, head, optimizer, weight_column)

        super().__init__(baseline_model_fn_v2, head, model_dir, config, None)


class BaselineClassifier(BaselineEstimator):
    def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None, optimizer="Ftrl",
                 config=None, loss_reduction=SUM_OVER_BATCH_SIZE):
        super().__init__(classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction), model_dir,
                         optimizer, config, weight_column)


class BaselineRegressor(BaselineEstimator):
    def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl", config=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE):
        super().__init__(RegressionHead(label_dimension, weight_column, loss_reduction), model_dir, optimizer, config,
                         weight_column)


class BaselineEstimatorV1(Canned):
    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None, weight_column=None):
        def baseline_model_fn(features, labels, mode):
            return baseline_model_fn_v1(features, labels, mode, head, optimizer, weight_column)

        super().__init__(baseline_model_fn, head, model_dir, config, None)


class BaselineClassifierV1(BaselineEstimatorV1):
    def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None, optimizer="Ftrl",
                 config=None, loss_reduction=SUM):
        super().__init__(classifier_head_v1(n_classes, weight_column, label_vocabulary, loss_reduction), model_dir,
                         optimizer, config, weight_column)


class BaselineRegressorV1(BaselineEstimatorV1):
    def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl", config=None,
                 loss_reduction=SUM):
        super().__init__(RegressionHeadV1(label_dimension, weight_column, loss_reduction), model_dir, optimizer,
                         config, weight_column)


# --- the runner's config: model.params of a canned model (trainer/models/canned.py) -----------------------

COLUMN_LISTS = {}  # it reads no feature columns


def logits_from_params(features, mode, params, units: int, columns):
    """The logits of ``model.params``: one bias per output."""
    return baseline_logits(features, units, params.get("weight_column"))[0]
