"""The linear family: ``linear_logits`` (``linear/linear_model/<column>/weights``,
``linear/linear_model/bias_weights``), its model_fns and classes, v2 and v1 side by side. Both default to
Ftrl at 0.2 for a named optimizer (TF 1.x: ``min(0.2, 1/sqrt(columns))`` when no optimizer is named
at all); v2 uses Keras' Ftrl and the batch mean, v1 TF1's Ftrl, the loss summed over the batch and the
v1 heads, with its variables under the ps partitioner (slots ``.../weights/part_0/Ftrl``)."""

from typing import List, Tuple

import tensorflow as tf

from trainer.estimator.canned.base import (SUM, SUM_OVER_BATCH_SIZE, Canned, check_features, classifier_head,
                                           optimizer_of, optimizer_v1, ps_partitioner, require_columns)
from trainer.estimator.head import RegressionHead
from trainer.estimator.head.v1 import RegressionHeadV1, classifier_head_v1

tf1 = tf.compat.v1

LEARNING_RATE = 0.2
SPARSE_COMBINERS = ("sum", "mean", "sqrtn")


def linear_logits(features, units: int, feature_columns, sparse_combiner: str = "sum",
                  scope: str = "linear") -> Tuple[tf.Tensor, List]:
    """A weight per feature value (per bucket, per vocabulary entry) plus a bias."""
    check_features(features)
    with tf1.variable_scope(scope, values=tuple(features.values())) as outer:
        logits = linear_model(features, units, feature_columns, sparse_combiner)
    return logits, tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope=outer.name + "/")


def linear_model(features, units: int, feature_columns, sparse_combiner: str = "sum") -> tf.Tensor:
    """The linear model's logits, built in the current variable scope."""
    if sparse_combiner not in SPARSE_COMBINERS:
        raise ValueError(f"sparse_combiner must be 'sum', 'mean' or 'sqrtn', got {sparse_combiner!r}")
    return tf1.feature_column.linear_model(features, list(feature_columns), units=units,
                                           sparse_combiner=sparse_combiner)


def linear_model_fn(features, labels, mode, head, feature_columns, optimizer="Ftrl", sparse_combiner="sum"):
    """The v2 model_fn."""
    logits, variables = linear_logits(features, head.logits_dimension, feature_columns, sparse_combiner)
    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=optimizer_of(optimizer, mode, LEARNING_RATE),
                                      trainable_variables=variables)


def linear_model_fn_v1(features, labels, mode, config, head, feature_columns, optimizer="Ftrl", partitioner=None,
                       sparse_combiner="sum"):
    """The v1 model_fn: the model and its head in scope ``linear`` under the ps partitioner."""
    check_features(features)
    if optimizer is None:
        optimizer = tf1.train.FtrlOptimizer(min(LEARNING_RATE, 1.0 / len(feature_columns) ** 0.5))
    opt = optimizer_v1(optimizer, mode, LEARNING_RATE)
    partitioner = partitioner or ps_partitioner(config, 64 << 20)
    with tf1.variable_scope("linear", values=tuple(features.values()), partitioner=partitioner):
        logits = linear_model(features, head.logits_dimension, feature_columns, sparse_combiner)
        return head.create_estimator_spec(features, mode, logits, labels, optimizer=opt)


class LinearEstimator(Canned):
    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl", config=None, sparse_combiner="sum",
                 warm_start_from=None):
        columns = require_columns(feature_columns, "feature_columns")

        def linear_model_fn_v2(features, labels, mode):
            return linear_model_fn(features, labels, mode, head, columns, optimizer, sparse_combiner)

        super().__init__(linear_model_fn_v2, head, model_dir, config, warm_start_from)


class LinearClassifier(LinearEstimator):
    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, warm_start_from=None, loss_reduction=SUM_OVER_BATCH_SIZE,
                 sparse_combiner="sum"):
        super().__init__(classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction),
                         feature_columns, model_dir, optimizer, config, sparse_combiner, warm_start_from)


class LinearRegressor(LinearEstimator):
    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
                 config=None, warm_start_from=None, loss_reduction=SUM_OVER_BATCH_SIZE, sparse_combiner="sum"):
        super().__init__(RegressionHead(label_dimension, weight_column, loss_reduction), feature_columns, model_dir,
                         optimizer, config, sparse_combiner, warm_start_from)


class LinearEstimatorV1(Canned):
    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl", config=None, partitioner=None,
                 sparse_combiner="sum", warm_start_from=None):
        columns = require_columns(feature_columns, "feature_columns")
        if sparse_combiner not in SPARSE_COMBINERS:
            raise ValueError(f"sparse_combiner must be 'sum', 'mean' or 'sqrtn', got {sparse_combiner!r}")

        def linear_model_fn(features, labels, mode, config):
            return linear_model_fn_v1(features, labels, mode, config, head, columns, optimizer, partitioner,
                                      sparse_combiner)

        super().__init__(linear_model_fn, head, model_dir, config, warm_start_from)


class LinearClassifierV1(LinearEstimatorV1):
    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None, loss_reduction=SUM,
                 sparse_combiner="sum"):
        super().__init__(classifier_head_v1(n_classes, weight_column, label_vocabulary, loss_reduction),
                         feature_columns, model_dir, optimizer, config, partitioner, sparse_combiner, warm_start_from)


class LinearRegressorV1(LinearEstimatorV1):
    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
                 config=None, partitioner=None, warm_start_from=None, loss_reduction=SUM, sparse_combiner="sum"):
        super().__init__(RegressionHeadV1(label_dimension, weight_column, loss_reduction), feature_columns,
                         model_dir, optimizer, config, partitioner, sparse_combiner, warm_start_from)


# --- the runner's config: model.params of a canned model (trainer/models/canned.py) -----------------------

COLUMN_LISTS = {"feature_columns": "linear"}  # model.params' column lists, and the table's columns each reads when null


def logits_from_params(features, mode, params, units: int, columns):
    """The logits of ``model.params`` (``columns``: the built column lists by ``model.params.<key>``)."""
    return linear_logits(features, units, columns["model.params.feature_columns"],
                         params.get("sparse_combiner", "sum"))[0]
