"""The regression heads: ``RegressionHead`` (mean squared error over ``label_dimension`` outputs),
``PoissonRegressionHead`` (log-Poisson loss, ``exp`` of the logits predicted) and
``LogisticRegressionHead`` (sigmoid cross-entropy on labels in [0, 1], the sigmoid predicted)."""

from typing import Dict

import tensorflow as tf

from trainer.estimator.head.base import (PREDICT, REGRESS, SERVING_DEFAULT, Head, MetricKeys, PredictionKeys,
                                         dense_labels, metric_mean)
from trainer.contract import PredictOutput, RegressionOutput

tf1 = tf.compat.v1
K = PredictionKeys


class RegressionHead(Head):
    """Real-valued labels ``[batch, label_dimension]``; ``inverse_link_fn`` maps logits to predictions."""

    def __init__(self, label_dimension: int = 1, weight_column=None, loss_reduction="sum_over_batch_size",
                 loss_fn=None, inverse_link_fn=None, name=None):
        if label_dimension < 1:
            raise ValueError(f"label_dimension must be >= 1, got {label_dimension}")
        super().__init__(weight_column, loss_reduction, loss_fn, name)
        self._label_dimension = label_dimension
        self._inverse_link_fn = inverse_link_fn

    @property
    def logits_dimension(self):
        return self._label_dimension

    def predictions(self, logits, keys=None) -> Dict:
        if self._inverse_link_fn is None:
            return {K.PREDICTIONS: logits}
        return {K.PREDICTIONS: self._inverse_link_fn(logits), K.LOGITS: logits}

    def _labels(self, logits, labels):
        labels = dense_labels(labels, logits, self._label_dimension)
        if labels.dtype == tf.string:
            raise ValueError("labels of a regression head must be numbers, got strings; parse them in the input_fn")
        return tf.cast(labels, tf.float32)

    def _unweighted_loss(self, labels, logits):
        return tf.math.squared_difference(logits, labels)

    def _metric_ops(self, predictions, labels, unweighted_loss, weights) -> Dict:
        return {MetricKeys.LOSS_MEAN: metric_mean(unweighted_loss, weights),
                MetricKeys.PREDICTION_MEAN: metric_mean(predictions[K.PREDICTIONS], weights),
                MetricKeys.LABEL_MEAN: metric_mean(labels, weights)}

    def _export_outputs(self, predictions) -> Dict:
        values = predictions[K.PREDICTIONS]
        if self._label_dimension == 1:
            regression = RegressionOutput(values)
            return {SERVING_DEFAULT: regression, REGRESS: regression, PREDICT: PredictOutput(predictions)}
        return {SERVING_DEFAULT: PredictOutput(predictions), PREDICT: PredictOutput(predictions)}


class PoissonRegressionHead(RegressionHead):
    """Counts: the log-Poisson loss of the logits; the prediction is ``exp(logits)``."""

    def __init__(self, label_dimension: int = 1, weight_column=None, loss_reduction="sum_over_batch_size",
                 compute_full_loss: bool = True, name=None):
        def loss_fn(labels, logits):
            return tf.nn.log_poisson_loss(targets=labels, log_input=logits, compute_full_loss=compute_full_loss)

        super().__init__(label_dimension, weight_column, loss_reduction, loss_fn, tf.exp, name)


class LogisticRegressionHead(RegressionHead):
    """Probabilities as labels (in [0, 1]): sigmoid cross-entropy; the prediction is the sigmoid."""

    def __init__(self, weight_column=None, loss_reduction="sum_over_batch_size", name=None):
        def loss_fn(labels, logits):
            return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

        super().__init__(1, weight_column, loss_reduction, loss_fn, tf.sigmoid, name)

    def _labels(self, logits, labels):
        labels = super()._labels(logits, labels)
        checks = [tf1.debugging.assert_non_negative(labels, message="LogisticRegressionHead: labels must be >= 0"),
                  tf1.debugging.assert_less_equal(labels, 1.0, message="LogisticRegressionHead: labels must be <= 1")]
        with tf.control_dependencies(checks):
            return tf.identity(labels)
