"""The DNN family: ``dnn_logits`` (Estimator's variable names: ``dnn/hiddenlayer_0/kernel``,
``dnn/input_from_feature_columns/input_layer/<column>_embedding/embedding_weights``, ``dnn/logits/bias``),
its model_fns and classes, v2 and v1 side by side.

- v2 (``tf.estimator.DNNClassifier`` of TF 2.x): ``'Adagrad'`` is Keras' at its default rate (0.001), the
  loss is the batch mean.
- v1 (``tf.compat.v1.estimator.DNNClassifier``, and ``tf.estimator.DNNClassifier`` of a TF 1.x program):
  ``'Adagrad'`` is TF1's at 0.05, the loss is summed over the batch, the v1 heads; variables and slots
  are built under the ps partitioner as TF 1.x built them (``dnn/hiddenlayer_0/kernel/t_0/Adagrad``).
"""

from typing import List, Tuple

import tensorflow as tf

from trainer.estimator.canned.base import (SUM, SUM_OVER_BATCH_SIZE, Canned, check_features, classifier_head,
                                           optimizer_of, optimizer_v1, ps_partitioner, require_columns,
                                           require_hidden_units)
from trainer.estimator.head import RegressionHead
from trainer.estimator.head.v1 import RegressionHeadV1, classifier_head_v1
from trainer.contract import ModeKeys
from trainer.errors import ConfigError

tf1 = tf.compat.v1

LEARNING_RATE_V1 = 0.05  # TF 1.x's "historical" default rate of a named optimizer


def dnn_logits(features, mode, units: int, hidden_units, feature_columns, activation_fn=tf.nn.relu, dropout=None,
               batch_norm: bool = False, scope: str = "dnn") -> Tuple[tf.Tensor, List, List]:
    """A feed-forward network over ``feature_columns`` under the variable scope ``scope``: ``hidden_units``
    layers (each dense, then dropout in training, then batch norm), then ``units`` logits; returns them, the
    variables the model trains and the batch-norm update ops."""
    check_features(features)
    before = set(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
    with tf1.variable_scope(scope, values=tuple(features.values())) as outer:
        logits = network(features, mode, units, hidden_units, feature_columns, activation_fn, dropout, batch_norm)
    variables = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope=outer.name + "/")
    update_ops = [op for op in tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) if op not in before]
    return logits, variables, update_ops


def network(features, mode, units: int, hidden_units, feature_columns, activation_fn=tf.nn.relu, dropout=None,
            batch_norm: bool = False, input_partitioner=None) -> tf.Tensor:
    """The network's logits, built in the current variable scope."""
    training = mode == ModeKeys.TRAIN
    with tf1.variable_scope("input_from_feature_columns", partitioner=input_partitioner):
        net = tf1.feature_column.input_layer(features, list(feature_columns))
    for layer_id, width in enumerate(hidden_units):
        name = f"hiddenlayer_{layer_id}"
        net = tf1.layers.dense(net, width, activation=activation_fn, name=name,
                               kernel_initializer=tf1.glorot_uniform_initializer())
        if dropout is not None and training:
            net = tf1.layers.dropout(net, rate=dropout, training=True)
        if batch_norm:
            with tf1.variable_scope(name):
                net = tf1.layers.batch_normalization(net, momentum=0.999, training=training,
                                                     name=f"batchnorm_{layer_id}")
    return tf1.layers.dense(net, units, name="logits", kernel_initializer=tf1.glorot_uniform_initializer())


def dnn_model_fn(features, labels, mode, head, hidden_units, feature_columns, optimizer="Adagrad",
                 activation_fn=tf.nn.relu, dropout=None, batch_norm=False):
    """The v2 model_fn."""
    logits, variables, update_ops = dnn_logits(features, mode, head.logits_dimension, hidden_units, feature_columns,
                                               activation_fn, dropout, batch_norm)
    return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer_of(optimizer, mode),
                                      trainable_variables=variables, update_ops=update_ops)


def dnn_model_fn_v1(features, labels, mode, config, head, hidden_units, feature_columns, optimizer="Adagrad",
                    activation_fn=tf.nn.relu, dropout=None, batch_norm=False, input_layer_partitioner=None):
    """The v1 model_fn: the network and its head under the ps partitioner of scope ``dnn``, as TF 1.x
    built them (the head's train op inside that scope is what names the slots ``.../t_0/Adagrad``)."""
    check_features(features)
    opt = optimizer_v1(optimizer, mode, LEARNING_RATE_V1)
    with tf1.variable_scope("dnn", values=tuple(features.values()), partitioner=ps_partitioner(config)):
        partitioner = input_layer_partitioner or ps_partitioner(config, 64 << 20)
        logits = network(features, mode, head.logits_dimension, hidden_units, feature_columns, activation_fn,
                         dropout, batch_norm, partitioner)
        return head.create_estimator_spec(features, mode, logits, labels, optimizer=opt)


class DNNEstimator(Canned):
    def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer="Adagrad",
                 activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None, batch_norm=False):
        columns = require_columns(feature_columns, "feature_columns")
        hidden_units = require_hidden_units(hidden_units)

        def dnn_model_fn_v2(features, labels, mode):
            return dnn_model_fn(features, labels, mode, head, hidden_units, columns, optimizer, activation_fn,
                                dropout, batch_norm)

        super().__init__(dnn_model_fn_v2, head, model_dir, config, warm_start_from)


class DNNClassifier(DNNEstimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=tf.nn.relu, dropout=None, config=None,
                 warm_start_from=None, loss_reduction=SUM_OVER_BATCH_SIZE, batch_norm=False):
        super().__init__(classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction), hidden_units,
                         feature_columns, model_dir, optimizer, activation_fn, dropout, config, warm_start_from,
                         batch_norm)


class DNNRegressor(DNNEstimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Adagrad", activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, batch_norm=False):
        super().__init__(RegressionHead(label_dimension, weight_column, loss_reduction), hidden_units,
                         feature_columns, model_dir, optimizer, activation_fn, dropout, config, warm_start_from,
                         batch_norm)


class DNNEstimatorV1(Canned):
    def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer="Adagrad",
                 activation_fn=tf.nn.relu, dropout=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, batch_norm=False):
        columns = require_columns(feature_columns, "feature_columns")
        hidden_units = require_hidden_units(hidden_units)

        def dnn_model_fn(features, labels, mode, config):
            return dnn_model_fn_v1(features, labels, mode, config, head, hidden_units, columns, optimizer,
                                   activation_fn, dropout, batch_norm, input_layer_partitioner)

        super().__init__(dnn_model_fn, head, model_dir, config, warm_start_from)


class DNNClassifierV1(DNNEstimatorV1):
    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=tf.nn.relu, dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None, loss_reduction=SUM,
                 batch_norm=False):
        super().__init__(classifier_head_v1(n_classes, weight_column, label_vocabulary, loss_reduction), hidden_units,
                         feature_columns, model_dir, optimizer, activation_fn, dropout, input_layer_partitioner,
                         config, warm_start_from, batch_norm)


class DNNRegressorV1(DNNEstimatorV1):
    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Adagrad", activation_fn=tf.nn.relu, dropout=None, input_layer_partitioner=None,
                 config=None, warm_start_from=None, loss_reduction=SUM, batch_norm=False):
        super().__init__(RegressionHeadV1(label_dimension, weight_column, loss_reduction), hidden_units,
                         feature_columns, model_dir, optimizer, activation_fn, dropout, input_layer_partitioner,
                         config, warm_start_from, batch_norm)


# --- the runner's config: model.params of a canned model (trainer/models/canned.py) -----------------------

ACTIVATIONS = {"relu": tf.nn.relu, "elu": tf.nn.elu, "tanh": tf.nn.tanh, "sigmoid": tf.nn.sigmoid,
               "leaky_relu": tf.nn.leaky_relu, "selu": tf.nn.selu, "swish": tf.nn.swish}
COLUMN_LISTS = {"feature_columns": "dnn"}  # model.params' column lists, and the table's columns each reads when null


def activation_of(params):
    activation = ACTIVATIONS.get(params.get("activation", "relu"))
    if activation is None:
        raise ValueError(f"model.params.activation={params.get('activation')!r} is not one of {', '.join(ACTIVATIONS)}")
    return activation


def check_dense(columns, key: str) -> None:
    """A DNN reads dense columns only: a categorical one is named with its fix."""
    for column in columns:
        if not hasattr(column, "variable_shape"):
            raise ConfigError(f"model.params.{key}: {column.name!r} is categorical, which a DNN cannot read as is; add "
                              f"{{indicator: {column.name}}} (one-hot) or {{embedding: {column.name}, dimension: 8}}")


def logits_from_params(features, mode, params, units: int, columns):
    """The logits of ``model.params`` (``columns``: the built column lists by ``model.params.<key>``)."""
    activation = activation_of(params)
    check_dense(columns.get("model.params.feature_columns", ()), "feature_columns")
    return dnn_logits(features, mode, units, list(params["hidden_units"]), columns["model.params.feature_columns"],
                      activation, params.get("dropout") or None, bool(params.get("batch_norm")))[0]
