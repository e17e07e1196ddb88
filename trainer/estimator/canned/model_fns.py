"""The model_fns of the canned models: logits (``logits.py``) handed to a head, with Estimator 2.x's
default optimizers and learning rates:

- DNN: ``'Adagrad'``; a named optimizer gets its Keras default learning rate (0.001 for Adagrad).
- Linear: ``'Ftrl'``; a named optimizer gets 0.2.
- DNN-linear combined: ``'Adagrad'`` at 0.001 for the deep part, ``'Ftrl'`` at min(0.005, 1/sqrt(number of
  linear columns)) for the wide part; the deep optimizer counts the global step.
- Baseline: ``'Ftrl'``; a named optimizer gets 0.3.
"""

import math

import tensorflow as tf

from trainer.estimator.canned.logits import baseline_logits, dnn_logits, linear_logits
from trainer.estimator.optimizers import get_optimizer, minimize
from trainer.model.spec import ModeKeys

LINEAR_LEARNING_RATE = 0.2
BASELINE_LEARNING_RATE = 0.3
COMBINED_DNN_LEARNING_RATE = 0.001
COMBINED_LINEAR_LEARNING_RATE = 0.005


def _optimizer(optimizer, mode, learning_rate=None):
    if mode != ModeKeys.TRAIN:
        return None
    return get_optimizer(optimizer, learning_rate if isinstance(optimizer, str) else None)


def dnn_model_fn(features, labels, mode, head, hidden_units, feature_columns, optimizer="Adagrad",
                 activation_fn=tf.nn.relu, dropout=None, batch_norm=False):
    logits, variables, update_ops = dnn_logits(features, mode, head.logits_dimension, hidden_units, feature_columns,
                                               activation_fn, dropout, batch_norm)
    return head.create_estimator_spec(features, mode, logits, labels, optimizer=_optimizer(optimizer, mode),
                                      trainable_variables=variables, update_ops=update_ops)


def linear_model_fn(features, labels, mode, head, feature_columns, optimizer="Ftrl", sparse_combiner="sum"):
    logits, variables = linear_logits(features, head.logits_dimension, feature_columns, sparse_combiner)
    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=_optimizer(optimizer, mode, LINEAR_LEARNING_RATE),
                                      trainable_variables=variables)


def baseline_model_fn(features, labels, mode, head, optimizer="Ftrl", weight_column=None):
    logits, variables = baseline_logits(features, head.logits_dimension, weight_column)
    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=_optimizer(optimizer, mode, BASELINE_LEARNING_RATE),
                                      trainable_variables=variables)


def combined_model_fn(features, labels, mode, head, linear_feature_columns=None, linear_optimizer="Ftrl",
                      dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                      dnn_activation_fn=tf.nn.relu, dnn_dropout=None, batch_norm=False, linear_sparse_combiner="sum"):
    parts = []  # (logits, variables, optimizer, update ops) of the deep part, then the wide part
    if dnn_feature_columns:
        if not dnn_hidden_units:
            raise ValueError("dnn_hidden_units must be set when dnn_feature_columns is, e.g. dnn_hidden_units=[64, 32]")
        logits, variables, update_ops = dnn_logits(features, mode, head.logits_dimension, dnn_hidden_units,
                                                   dnn_feature_columns, dnn_activation_fn, dnn_dropout, batch_norm)
        parts.append((logits, variables, _optimizer(dnn_optimizer, mode, COMBINED_DNN_LEARNING_RATE), update_ops))
    if linear_feature_columns:
        rate = min(COMBINED_LINEAR_LEARNING_RATE, 1.0 / math.sqrt(len(linear_feature_columns)))
        logits, variables = linear_logits(features, head.logits_dimension, linear_feature_columns,
                                          linear_sparse_combiner)
        parts.append((logits, variables, _optimizer(linear_optimizer, mode, rate), []))
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
