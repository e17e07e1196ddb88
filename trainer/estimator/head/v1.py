"""The heads of Estimator's v1 canned models (``tf.compat.v1.estimator.DNNClassifier`` and its siblings, and
every canned model of a TF 1.x program): the v2 heads' predictions, labels and signatures, built the way
TF 1.x's ``head.py`` built them, so a v1 model trains to the same numbers and its graph has the same names:

- the loss reduced by ``tf.compat.v1.losses.compute_weighted_loss`` (default ``SUM`` over the batch), under
  the name scope ``head`` (``head/weighted_loss/Sum``; with ``SUM`` the mean loss is ``head/truediv``, which
  programs of the era log by name);
- the train op ``optimizer.minimize(loss, global_step)`` with a TF1 optimizer, whose slots are named
  after their variables (``dnn/hiddenlayer_0/kernel/Adagrad``), plus the graph's update ops;
- the v1 metrics (``auc_precision_recall`` by the trapezoidal rule) and the ``average_loss`` summary.
"""

from typing import Dict

import tensorflow as tf

from trainer.estimator import optimizers
from trainer.estimator.head.base import MetricKeys, PredictionKeys, check_logits
from trainer.estimator.head.classification import BinaryClassHead, MultiClassHead
from trainer.estimator.head.regression import RegressionHead
from trainer.contract import EstimatorSpec, ModeKeys

tf1 = tf.compat.v1

# tf.compat.v1.losses.Reduction's values, and the Keras names a v1 head was also handed.
_V1_REDUCTIONS = {"sum": "weighted_sum", "sum_over_batch_size": "weighted_sum_over_batch_size",
                  "auto": "weighted_sum_over_batch_size"}


class _V1Spec:
    """``create_estimator_spec`` as TF 1.x's heads built it (mixed into a v2 head class)."""

    def _v1_reduction(self) -> str:
        reduction = self._loss_reduction
        if reduction == "none":
            raise ValueError("loss_reduction=NONE is not allowed for a head; pick SUM or SUM_OVER_BATCH_SIZE")
        return _V1_REDUCTIONS.get(reduction, reduction)

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None, regularization_losses=None) -> EstimatorSpec:
        logits = check_logits(logits, self.logits_dimension)
        with tf.name_scope(self._name or "head"):
            with tf.name_scope("predictions"):
                predictions = self.predictions(logits)
            if mode == ModeKeys.PREDICT:
                return EstimatorSpec(mode, predictions=predictions, export_outputs=self._export_outputs(predictions))
            if labels is None:
                raise ValueError("labels is None in a training or evaluation call; the input_fn must return "
                                 "(features, labels)")
            unweighted, weights, processed = self._losses(features, logits, labels)
            weights = 1.0 if weights is None else weights
            training_loss = tf1.losses.compute_weighted_loss(unweighted, weights=weights,
                                                             reduction=self._v1_reduction())
            regularization = tf.add_n(list(regularization_losses)) if regularization_losses else None
            loss = training_loss if regularization is None else tf.add_n([training_loss, regularization])
            if mode == ModeKeys.EVAL:
                with tf.name_scope("metrics"):
                    metrics = self._v1_metrics(predictions, processed, unweighted, weights, regularization)
                return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=metrics)
            train_op = self._v1_train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops)
            mean_loss = None
            if self._v1_reduction() == "weighted_sum":
                mean_loss = training_loss / tf.reduce_sum(weights * tf.ones_like(unweighted))
        if mean_loss is not None:
            with tf1.get_default_graph().name_scope(""):
                tf1.summary.scalar(self._key(MetricKeys.LOSS_MEAN), mean_loss)
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    def _key(self, key: str) -> str:
        return f"{key}/{self._name}" if self._name else key

    def _v1_train_op(self, loss, optimizer, trainable_variables, train_op_fn, update_ops):
        if (optimizer is None) == (train_op_fn is None):
            raise ValueError("give the head exactly one of optimizer and train_op_fn (got "
                             f"{'both' if optimizer is not None else 'neither'})")
        if optimizer is not None:
            variables = tf1.trainable_variables() if trainable_variables is None else trainable_variables
            train_op = optimizers.minimize(optimizer, loss, variables)
        else:
            train_op = train_op_fn(loss)
        extra = list(update_ops or ()) + list(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
        return tf.group(train_op, *extra) if extra else train_op

    def _v1_metrics(self, predictions, labels, unweighted, weights, regularization) -> Dict:
        weights = None if isinstance(weights, float) else weights
        metrics = self._metric_ops(predictions, labels, unweighted, weights)
        if MetricKeys.AUC_PR in metrics:  # TF 1.x: the trapezoidal rule for both curves
            broadcast = None if weights is None else tf.broadcast_to(weights, tf.shape(labels))
            scores = predictions[PredictionKeys.LOGISTIC]
            metrics[MetricKeys.AUC_PR] = tf1.metrics.auc(labels, scores, broadcast, num_thresholds=200, curve="PR")
        if regularization is not None:
            metrics[MetricKeys.LOSS_REGULARIZATION] = tf1.metrics.mean(regularization)
        return {self._key(key): value for key, value in metrics.items()}


class BinaryClassHeadV1(_V1Spec, BinaryClassHead):
    """TF 1.x's binary logistic head (sigmoid cross-entropy), reduction ``SUM`` by default."""

    def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None, loss_reduction="weighted_sum",
                 loss_fn=None, name=None):
        super().__init__(weight_column, thresholds, label_vocabulary, loss_reduction, loss_fn, name)


class MultiClassHeadV1(_V1Spec, MultiClassHead):
    """TF 1.x's multi-class head (softmax cross-entropy), reduction ``SUM`` by default."""

    def __init__(self, n_classes, weight_column=None, label_vocabulary=None, loss_reduction="weighted_sum",
                 loss_fn=None, name=None):
        super().__init__(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn, name)


class RegressionHeadV1(_V1Spec, RegressionHead):
    """TF 1.x's regression head (mean squared error), reduction ``SUM`` by default."""

    def __init__(self, label_dimension=1, weight_column=None, loss_reduction="weighted_sum", loss_fn=None,
                 inverse_link_fn=None, name=None):
        super().__init__(label_dimension, weight_column, loss_reduction, loss_fn, inverse_link_fn, name)


def classifier_head_v1(n_classes, weight_column=None, label_vocabulary=None, loss_reduction="weighted_sum"):
    """TF 1.x's choice for a canned classifier: the binary head for 2 classes, the multi-class one above."""
    if n_classes is None or n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    if n_classes == 2:
        return BinaryClassHeadV1(weight_column, label_vocabulary=label_vocabulary, loss_reduction=loss_reduction)
    return MultiClassHeadV1(n_classes, weight_column, label_vocabulary, loss_reduction)
