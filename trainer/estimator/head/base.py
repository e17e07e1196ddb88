"""The heads' shared part (``Head``): the part of a model after its logits, i.e. its loss, predictions, eval metrics
and export signatures, as ``tf.estimator`` gave them, with the same keys.

``BinaryClassHead``, ``MultiClassHead``, ``MultiLabelHead``, ``RegressionHead`` (and its Poisson and
logistic forms) and the TF1 factories (``binary_classification_head``, ...). A custom model_fn builds
its logits and hands them over::

    head = trainer.estimator.BinaryClassHead()
    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=tf_keras.optimizers.legacy.Adagrad(0.05),
                                      trainable_variables=tf.compat.v1.trainable_variables())

(or ``train_op_fn=lambda loss: ...`` as TF1 heads took it). Metrics are ``tf.compat.v1.metrics``
pairs, so they reset with the runner's other metrics for every evaluation. Label errors (a label
outside ``[0, n_classes)``, a string missing from ``label_vocabulary``) fail the step naming the head.
"""

from typing import Dict, Optional, Sequence

import tensorflow as tf

from trainer.estimator import optimizers
from trainer.contract import EstimatorSpec, ModeKeys

tf1 = tf.compat.v1

# tf.losses.Reduction (Keras) and tf.compat.v1.losses.Reduction values, as heads accepted them.
SUM_REDUCTIONS = ("sum", "weighted_sum")
MEAN_REDUCTIONS = ("sum_over_batch_size", "weighted_sum_over_batch_size", "auto")
NONZERO_REDUCTIONS = ("weighted_sum_by_nonzero_weights", "weighted_mean")


class PredictionKeys:
    LOGITS = "logits"
    LOGISTIC = "logistic"
    PROBABILITIES = "probabilities"
    CLASS_IDS = "class_ids"
    CLASSES = "classes"
    ALL_CLASS_IDS = "all_class_ids"
    ALL_CLASSES = "all_classes"
    PREDICTIONS = "predictions"


class MetricKeys:
    LOSS = "loss"
    LOSS_MEAN = "average_loss"
    LOSS_REGULARIZATION = "regularization_loss"
    ACCURACY = "accuracy"
    ACCURACY_BASELINE = "accuracy_baseline"
    AUC = "auc"
    AUC_PR = "auc_precision_recall"
    PRECISION = "precision"
    RECALL = "recall"
    LABEL_MEAN = "label/mean"
    PREDICTION_MEAN = "prediction/mean"


SERVING_DEFAULT, CLASSIFY, REGRESS, PREDICT = "serving_default", "classification", "regression", "predict"


class Head:
    """What every head shares: weights, loss reduction, the spec per mode, and the train op."""

    logits_dimension = 1

    def __init__(self, weight_column=None, loss_reduction="sum_over_batch_size", loss_fn=None,
                 name: Optional[str] = None):
        if loss_reduction not in SUM_REDUCTIONS + MEAN_REDUCTIONS + NONZERO_REDUCTIONS:
            raise ValueError(f"loss_reduction={loss_reduction!r} is not one of tf.losses.Reduction's SUM or "
                             f"SUM_OVER_BATCH_SIZE (or tf.compat.v1.losses.Reduction's); pick one of those")
        self._weight_column = weight_column
        self._loss_reduction = loss_reduction
        self._loss_fn = loss_fn
        self._name = name

    @property
    def name(self):
        return self._name

    @property
    def loss_reduction(self):
        return self._loss_reduction

    # --- per head ----------------------------------------------------------------------------

    def predictions(self, logits, keys: Optional[Sequence[str]] = None) -> Dict:
        raise NotImplementedError

    def _labels(self, logits, labels):
        """The labels in the loss's space (floats or ids), checked."""
        raise NotImplementedError

    def _unweighted_loss(self, labels, logits):
        raise NotImplementedError

    def _metric_ops(self, predictions, labels, unweighted_loss, weights) -> Dict:
        raise NotImplementedError

    def _export_outputs(self, predictions) -> Dict:
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------------------

    def _scope(self, suffix: str) -> str:
        return f"{self._name}/{suffix}" if self._name else suffix

    def _weights(self, features, logits):
        if self._weight_column is None:
            return None
        key = self._weight_column if isinstance(self._weight_column, str) else self._weight_column.key
        if not isinstance(features, dict) or key not in features:
            raise ValueError(f"weight_column {key!r} is not among the features "
                             f"({sorted(features) if isinstance(features, dict) else type(features).__name__}); "
                             f"return it from the input_fn or drop weight_column")
        weights = tf.cast(features[key], tf.float32)
        return tf.reshape(weights, [-1, 1]) if weights.shape.rank == 1 else weights

    def _losses(self, features, logits, labels):
        """The per-example loss, its weights, and the labels it was computed from."""
        labels = self._labels(logits, labels)
        if self._loss_fn is not None:
            unweighted = tf.cast(self._loss_fn(labels=labels, logits=logits), tf.float32)
        else:
            unweighted = self._unweighted_loss(labels, logits)
        return unweighted, self._weights(features, logits), labels

    def _reduce(self, unweighted, weights):
        weighted = unweighted if weights is None else unweighted * weights
        total = tf.reduce_sum(weighted)
        if self._loss_reduction in SUM_REDUCTIONS:
            return total
        if self._loss_reduction in NONZERO_REDUCTIONS and weights is not None:
            nonzero = tf.math.count_nonzero(tf.broadcast_to(weights, tf.shape(unweighted)), dtype=tf.float32)
            return tf.math.divide_no_nan(total, nonzero)
        return tf.math.divide_no_nan(total, tf.cast(tf.size(unweighted), tf.float32))

    def _training_loss(self, features, logits, labels, regularization_losses):
        """The regularized training loss, and the per-example loss, weights and labels behind it."""
        if labels is None:
            raise ValueError("labels is None in a training or evaluation call; the input_fn must return "
                             "(features, labels)")
        with tf.name_scope(self._scope("losses")):
            unweighted, weights, processed = self._losses(features, logits, labels)
            loss = self._reduce(unweighted, weights)
            if regularization_losses:
                loss += tf.add_n(list(regularization_losses))
        return loss, unweighted, weights, processed

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
        """The regularized training loss."""
        logits = check_logits(logits, self.logits_dimension)
        return self._training_loss(features, logits, labels, regularization_losses)[0]

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None, regularization_losses=None) -> EstimatorSpec:
        """The model_fn's ``EstimatorSpec`` for ``mode``, from the model's logits."""
        logits = check_logits(logits, self.logits_dimension)
        with tf.name_scope(self._scope("head")):
            predictions = self.predictions(logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, export_outputs=self._export_outputs(predictions))
        loss, unweighted, weights, processed = self._training_loss(features, logits, labels, regularization_losses)
        if mode == ModeKeys.EVAL:
            with tf.name_scope(self._scope("metrics")):
                metrics = self._metric_ops(predictions, processed, unweighted, weights)
                if regularization_losses:
                    metrics[MetricKeys.LOSS_REGULARIZATION] = tf.compat.v1.metrics.mean(
                        tf.add_n(list(regularization_losses)))
            if self._name:  # a named head's metrics carry its name, as Estimator's did: "auc/head1"
                metrics = {f"{key}/{self._name}": value for key, value in metrics.items()}
            return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=metrics)
        train_op = make_train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops)
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)


def make_train_op(loss, optimizer=None, trainable_variables=None, train_op_fn=None, update_ops=None):
    """The train op of a head: ``optimizer`` (Keras or TF1) over ``trainable_variables``, or
    ``train_op_fn(loss)``; ``update_ops`` (batch norm's) run with it. Built under the name scope
    ``training``, as Estimator's heads built it, so the optimizer's slots have Estimator's names."""
    if (optimizer is None) == (train_op_fn is None):
        raise ValueError("give the head exactly one of optimizer and train_op_fn (got "
                         f"{'both' if optimizer is not None else 'neither'})")
    with tf1.get_default_graph().name_scope(""), tf.name_scope("training"):  # from the top, as Estimator
        if optimizer is not None:
            if trainable_variables is None:
                trainable_variables = tf1.trainable_variables()
            train_op = optimizers.minimize(optimizer, loss, trainable_variables)
        else:
            train_op = train_op_fn(loss)
        if update_ops:
            train_op = tf.group(train_op, *update_ops)
    return train_op


def check_logits(logits, dimension: int):
    logits = tf.convert_to_tensor(logits)
    if logits.shape.rank is not None and logits.shape.rank >= 1:
        last = logits.shape[-1]
        if last is not None and last != dimension:
            raise ValueError(f"logits shape must be [batch, {dimension}] for this head, got {logits.shape}")
    return tf.cast(logits, tf.float32)


def dense_labels(labels, logits, dimension: int):
    """Labels shaped ``[batch, dimension]`` (a ``[batch]`` vector becomes a column)."""
    if isinstance(labels, tf.SparseTensor):
        raise ValueError(f"labels must be a dense Tensor of shape [batch, {dimension}], got a SparseTensor")
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 1 and dimension == 1:
        labels = tf.expand_dims(labels, -1)
    if labels.shape.rank is not None and labels.shape.rank >= 1 and labels.shape[-1] not in (None, dimension):
        raise ValueError(f"labels shape must be [batch, {dimension}], got {labels.shape}")
    return labels


def per_row(logits, n: int, values):
    """``values`` (a list of n) repeated on every row of the batch."""
    row = tf.expand_dims(tf.constant(values), 0)
    return tf.tile(row, [tf.shape(logits)[0], 1])


def metric_mean(values, weights=None):
    values = tf.cast(values, tf.float32)
    if weights is not None:
        weights = tf.broadcast_to(weights, tf.shape(values))
    return tf1.metrics.mean(values, weights)
