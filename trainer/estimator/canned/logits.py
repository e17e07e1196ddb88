"""The logits of Estimator's canned models, built under Estimator's variable names so checkpoints pass
both ways: ``dnn/hiddenlayer_0/kernel``, ``dnn/input_from_feature_columns/input_layer/<column>_embedding/
embedding_weights``, ``dnn/logits/bias``, ``linear/linear_model/<column>/weights``,
``linear/linear_model/bias_weights``, ``baseline/bias``. Each returns the logits and the variables the
model trains (and the DNN its batch-norm update ops)."""

from typing import List, Tuple

import tensorflow as tf

from trainer.model.spec import ModeKeys

tf1 = tf.compat.v1


def dnn_logits(features, mode, units: int, hidden_units, feature_columns, activation_fn=tf.nn.relu, dropout=None,
               batch_norm: bool = False, scope: str = "dnn") -> Tuple[tf.Tensor, List, List]:
    """A feed-forward network over ``feature_columns``: ``hidden_units`` layers (each dense, then dropout
    in training, then batch norm), then ``units`` logits."""
    _check_features(features)
    training = mode == ModeKeys.TRAIN
    before = set(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
    with tf1.variable_scope(scope, values=tuple(features.values())) as outer:
        with tf1.variable_scope("input_from_feature_columns"):
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
        logits = tf1.layers.dense(net, units, name="logits", kernel_initializer=tf1.glorot_uniform_initializer())
    variables = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope=outer.name + "/")
    update_ops = [op for op in tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) if op not in before]
    return logits, variables, update_ops


def linear_logits(features, units: int, feature_columns, sparse_combiner: str = "sum",
                  scope: str = "linear") -> Tuple[tf.Tensor, List]:
    """A weight per feature value (per bucket, per vocabulary entry) plus a bias."""
    _check_features(features)
    if sparse_combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError(f"sparse_combiner must be 'sum', 'mean' or 'sqrtn', got {sparse_combiner!r}")
    with tf1.variable_scope(scope, values=tuple(features.values())) as outer:
        logits = tf1.feature_column.linear_model(features, list(feature_columns), units=units,
                                                 sparse_combiner=sparse_combiner)
    return logits, tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope=outer.name + "/")


def baseline_logits(features, units: int, weight_column=None, scope: str = "baseline") -> Tuple[tf.Tensor, List]:
    """One bias per output, the same for every example: the model learns the labels' mean."""
    batch = _batch_size(features, weight_column)
    with tf1.variable_scope(scope):
        bias = tf1.get_variable("bias", shape=[units], initializer=tf1.zeros_initializer(), use_resource=True)
    return bias * tf.ones([batch, units]), [bias]


def _check_features(features):
    if not isinstance(features, dict):
        raise ValueError(f"features must be a dict of tensors (feature name -> tensor) for a canned model, got "
                         f"{type(features).__name__}; return a dict from the input_fn")


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
