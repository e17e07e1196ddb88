"""The DNN-linear combined (wide and deep) family: the deep part's logits (``dnn.py``) plus the wide part's
(``linear.py``), each trained by its own optimizer; v2 and v1 side by side.

- v2: Keras' ``'Adagrad'`` at 0.001 for the deep part, Keras' ``'Ftrl'`` at min(0.005, 1/sqrt(linear
  columns)) for the wide part; the deep optimizer counts the global step; the batch mean.
- v1: TF1's optimizers at the same rates, the loss summed over the batch, the v1 heads; the global step
  advanced once after both updates, the deep part under the ps partitioner, as TF 1.x built it.
"""

import math

import tensorflow as tf

from trainer.estimator.canned.base import (SUM, SUM_OVER_BATCH_SIZE, Canned, classifier_head, optimizer_of,
                                           optimizer_v1, ps_partitioner, require_columns, require_hidden_units)
from trainer.estimator.canned.dnn import activation_of, check_dense, dnn_logits, network
from trainer.estimator.canned.linear import linear_logits, linear_model
from trainer.estimator.head import RegressionHead
from trainer.estimator.head.v1 import RegressionHeadV1, classifier_head_v1
from trainer.estimator.optimizers import minimize
from trainer.contract import ModeKeys

tf1 = tf.compat.v1

DNN_LEARNING_RATE = 0.001
LINEAR_LEARNING_RATE = 0.005


def linear_learning_rate(columns) -> float:
    return min(LINEAR_LEARNING_RATE, 1.0 / math.sqrt(len(columns)))


def combined_model_fn(features, labels, mode, head, linear_feature_columns=None, linear_optimizer="Ftrl",
                      dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                      dnn_activation_fn=tf.nn.relu, dnn_dropout=None, batch_norm=False, linear_sparse_combiner="sum"):
    """The v2 model_fn."""
    parts = []  # (logits, variables, optimizer, update ops) of the deep part, then the wide part
    if dnn_feature_columns:
        hidden_units = require_hidden_units(dnn_hidden_units, "dnn_hidden_units")
        logits, variables, update_ops = dnn_logits(features, mode, head.logits_dimension, hidden_units,
                                                   dnn_feature_columns, dnn_activation_fn, dnn_dropout, batch_norm)
        parts.append((logits, variables, optimizer_of(dnn_optimizer, mode, DNN_LEARNING_RATE), update_ops))
    if linear_feature_columns:
        logits, variables = linear_logits(features, head.logits_dimension, linear_feature_columns,
                                          linear_sparse_combiner)
        rate = linear_learning_rate(linear_feature_columns)
        parts.append((logits, variables, optimizer_of(linear_optimizer, mode, rate), []))
    if not parts:
        raise ValueError("give linear_feature_columns or dnn_feature_columns (or both)")

    def train_op_fn(loss):
        ops = []
        for index, (_, variables, opt, update_ops) in enumerate(parts):
            ops.append(minimize(opt, loss, variables, advance_step=index == 0))
            ops.extend(update_ops)
        return tf.group(*ops)

    logits = tf.add_n([part[0] for part in parts])
    return head.create_estimator_spec(features, mode, logits, labels,
                                      train_op_fn=train_op_fn if mode == ModeKeys.TRAIN else None)


def combined_model_fn_v1(features, labels, mode, config, head, linear_feature_columns=None, linear_optimizer="Ftrl",
                         dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                         dnn_activation_fn=tf.nn.relu, dnn_dropout=None, input_layer_partitioner=None,
                         batch_norm=False, linear_sparse_combiner="sum"):
    """The v1 model_fn."""
    parts = []  # (logits, scope, optimizer)
    values = tuple(features.values()) if isinstance(features, dict) else ()
    if dnn_feature_columns:
        hidden_units = require_hidden_units(dnn_hidden_units, "dnn_hidden_units")
        with tf1.variable_scope("dnn", values=values, partitioner=ps_partitioner(config)) as scope:
            logits = network(features, mode, head.logits_dimension, hidden_units, dnn_feature_columns,
                             dnn_activation_fn, dnn_dropout, batch_norm, input_layer_partitioner)
        parts.append((logits, scope.name, optimizer_v1(dnn_optimizer, mode, DNN_LEARNING_RATE)))
    if linear_feature_columns:
        rate = linear_learning_rate(linear_feature_columns)
        with tf1.variable_scope("linear", values=values, partitioner=input_layer_partitioner) as scope:
            logits = linear_model(features, head.logits_dimension, linear_feature_columns, linear_sparse_combiner)
        parts.append((logits, scope.name, optimizer_v1(linear_optimizer, mode, rate)))
    if not parts:
        raise ValueError("give linear_feature_columns or dnn_feature_columns (or both)")

    def train_op_fn(loss):
        ops = [opt.minimize(loss, var_list=tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope=scope + "/"))
               for _, scope, opt in parts]
        with tf.control_dependencies([tf.group(*ops)]):
            return tf1.assign_add(tf1.train.get_global_step(), 1).op

    logits = tf.add_n([part[0] for part in parts])
    return head.create_estimator_spec(features, mode, logits, labels,
                                      train_op_fn=train_op_fn if mode == ModeKeys.TRAIN else None)


def _columns(linear_feature_columns, dnn_feature_columns, dnn_hidden_units):
    linear = require_columns(linear_feature_columns, "linear_feature_columns") if linear_feature_columns else []
    dnn = require_columns(dnn_feature_columns, "dnn_feature_columns") if dnn_feature_columns else []
    if not linear and not dnn:
        raise ValueError("give linear_feature_columns or dnn_feature_columns (or both)")
    hidden_units = require_hidden_units(dnn_hidden_units, "dnn_hidden_units") if dnn else []
    return linear, dnn, hidden_units


class DNNLinearCombinedEstimator(Canned):
    def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, config=None, batch_norm=False,
                 linear_sparse_combiner="sum", warm_start_from=None):
        linear, dnn, hidden_units = _columns(linear_feature_columns, dnn_feature_columns, dnn_hidden_units)

        def dnn_linear_combined_model_fn(features, labels, mode):
            return combined_model_fn(features, labels, mode, head, linear, linear_optimizer, dnn, dnn_optimizer,
                                     hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner)

        super().__init__(dnn_linear_combined_model_fn, head, model_dir, config, warm_start_from)


class DNNLinearCombinedClassifier(DNNLinearCombinedEstimator):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
                 n_classes=2, weight_column=None, label_vocabulary=None, config=None, warm_start_from=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, batch_norm=False, linear_sparse_combiner="sum"):
        super().__init__(classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction), model_dir,
                         linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                         dnn_hidden_units, dnn_activation_fn, dnn_dropout, config, batch_norm,
                         linear_sparse_combiner, warm_start_from)


class DNNLinearCombinedRegressor(DNNLinearCombinedEstimator):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
                 label_dimension=1, weight_column=None, config=None, warm_start_from=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, batch_norm=False, linear_sparse_combiner="sum"):
        super().__init__(RegressionHead(label_dimension, weight_column, loss_reduction), model_dir,
                         linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                         dnn_hidden_units, dnn_activation_fn, dnn_dropout, config, batch_norm,
                         linear_sparse_combiner, warm_start_from)


class DNNLinearCombinedEstimatorV1(Canned):
    def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, input_layer_partitioner=None, config=None,
                 linear_sparse_combiner="sum", *, warm_start_from=None, batch_norm=False):
        linear, dnn, hidden_units = _columns(linear_feature_columns, dnn_feature_columns, dnn_hidden_units)

        def dnn_linear_combined_model_fn(features, labels, mode, config):
            return combined_model_fn_v1(features, labels, mode, config, head, linear, linear_optimizer, dnn,
                                        dnn_optimizer, hidden_units, dnn_activation_fn, dnn_dropout,
                                        input_layer_partitioner, batch_norm, linear_sparse_combiner)

        super().__init__(dnn_linear_combined_model_fn, head, model_dir, config, warm_start_from)


class DNNLinearCombinedClassifierV1(DNNLinearCombinedEstimatorV1):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
                 n_classes=2, weight_column=None, label_vocabulary=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=SUM, batch_norm=False, linear_sparse_combiner="sum"):
        super().__init__(classifier_head_v1(n_classes, weight_column, label_vocabulary, loss_reduction), model_dir,
                         linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                         dnn_hidden_units, dnn_activation_fn, dnn_dropout, input_layer_partitioner, config,
                         linear_sparse_combiner, warm_start_from=warm_start_from, batch_norm=batch_norm)


class DNNLinearCombinedRegressorV1(DNNLinearCombinedEstimatorV1):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
                 label_dimension=1, weight_column=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=SUM, batch_norm=False, linear_sparse_combiner="sum"):
        super().__init__(RegressionHeadV1(label_dimension, weight_column, loss_reduction), model_dir,
                         linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                         dnn_hidden_units, dnn_activation_fn, dnn_dropout, input_layer_partitioner, config,
                         linear_sparse_combiner, warm_start_from=warm_start_from, batch_norm=batch_norm)


# --- the runner's config: model.params of a canned model (trainer/models/canned.py) -----------------------

# model.params' column lists, and the table's columns each reads when null
COLUMN_LISTS = {"linear_feature_columns": "linear", "dnn_feature_columns": "dnn"}


def logits_from_params(features, mode, params, units: int, columns):
    """The logits of ``model.params``: the deep part's plus the wide part's."""
    activation = activation_of(params)
    check_dense(columns.get("model.params.dnn_feature_columns", ()), "dnn_feature_columns")
    deep = dnn_logits(features, mode, units, list(params["hidden_units"]), columns["model.params.dnn_feature_columns"],
                      activation, params.get("dropout") or None, bool(params.get("batch_norm")))[0]
    wide = linear_logits(features, units, columns["model.params.linear_feature_columns"],
                         params.get("sparse_combiner", "sum"))[0]
    return deep + wide
