"""Estimator's heads (and ``MultiHead``): the part of a model after its logits, i.e. its loss, predictions, eval metrics
and export signatures, with ``tf.estimator``'s keys. The classes of Estimator 2.x and the factories of
TF1 (``tf.contrib.estimator.binary_classification_head`` and its siblings) are both here."""

from trainer.estimator.head.base import Head, MetricKeys, PredictionKeys, make_train_op
from trainer.estimator.head.classification import BinaryClassHead, MultiClassHead, MultiLabelHead
from trainer.estimator.head.multi import MultiHead
from trainer.estimator.head.regression import LogisticRegressionHead, PoissonRegressionHead, RegressionHead


def binary_classification_head(weight_column=None, thresholds=None, label_vocabulary=None,
                               loss_reduction="sum_over_batch_size", loss_fn=None, name=None):
    return BinaryClassHead(weight_column, thresholds, label_vocabulary, loss_reduction, loss_fn, name)


def multi_class_head(n_classes, weight_column=None, label_vocabulary=None, loss_reduction="sum_over_batch_size",
                     loss_fn=None, name=None):
    return MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn, name)


def multi_label_head(n_classes, weight_column=None, thresholds=None, label_vocabulary=None,
                     loss_reduction="sum_over_batch_size", loss_fn=None, name=None):
    return MultiLabelHead(n_classes, weight_column, thresholds, label_vocabulary, loss_reduction, loss_fn, name)


def regression_head(weight_column=None, label_dimension=1, loss_reduction="sum_over_batch_size", loss_fn=None,
                    inverse_link_fn=None, name=None):
    return RegressionHead(label_dimension, weight_column, loss_reduction, loss_fn, inverse_link_fn, name)


def poisson_regression_head(weight_column=None, label_dimension=1, loss_reduction="sum_over_batch_size",
                            compute_full_loss=True, name=None):
    return PoissonRegressionHead(label_dimension, weight_column, loss_reduction, compute_full_loss, name)


def multi_head(heads, head_weights=None):
    return MultiHead(heads, head_weights)


def logistic_regression_head(weight_column=None, loss_reduction="sum_over_batch_size", name=None):
    return LogisticRegressionHead(weight_column, loss_reduction, name)


__all__ = ["BinaryClassHead", "Head", "LogisticRegressionHead", "MetricKeys", "MultiClassHead", "MultiHead", "MultiLabelHead",
           "PoissonRegressionHead", "PredictionKeys", "RegressionHead", "binary_classification_head",
           "logistic_regression_head", "make_train_op", "multi_class_head", "multi_head", "multi_label_head",
           "poisson_regression_head", "regression_head"]
