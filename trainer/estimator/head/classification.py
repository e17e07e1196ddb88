"""The classification heads: ``BinaryClassHead`` (one logit, sigmoid), ``MultiClassHead`` (softmax over
``n_classes``) and ``MultiLabelHead`` (a sigmoid per class), with Estimator's prediction keys, eval
metrics and signatures."""

from typing import Dict, Optional, Sequence

import tensorflow as tf

from trainer.estimator.head.base import (CLASSIFY, PREDICT, REGRESS, SERVING_DEFAULT, Head, MetricKeys,
                                         PredictionKeys, dense_labels, metric_mean, per_row)
from trainer.contract import ClassificationOutput, PredictOutput, RegressionOutput

tf1 = tf.compat.v1
K = PredictionKeys


class _ClassHead(Head):
    """Labels as class ids, read through ``label_vocabulary`` when given."""

    def __init__(self, n_classes: int, weight_column=None, label_vocabulary=None, loss_reduction="sum_over_batch_size",
                 loss_fn=None, name=None):
        super().__init__(weight_column, loss_reduction, loss_fn, name)
        if label_vocabulary is not None:
            label_vocabulary = [str(v) for v in label_vocabulary]
            if len(label_vocabulary) != n_classes:
                raise ValueError(f"label_vocabulary has {len(label_vocabulary)} entries but there are {n_classes} "
                                 f"classes; give one string per class")
            repeated = sorted({v for v in label_vocabulary if label_vocabulary.count(v) > 1})
            if repeated:
                raise ValueError(f"label_vocabulary repeats {repeated}; give each class once")
        self._n_classes = n_classes
        self._label_vocabulary = label_vocabulary

    def _class_ids(self, labels):
        """Integer class ids of ``labels``, checked to lie in ``[0, n_classes)``."""
        if self._label_vocabulary is not None:
            if labels.dtype != tf.string:
                raise ValueError(f"labels must be strings with label_vocabulary, got {labels.dtype.name}; "
                                 f"drop label_vocabulary or return the label strings")
            table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(self._label_vocabulary, list(range(self._n_classes)),
                                                    tf.string, tf.int64), default_value=-1)
            ids = table.lookup(labels)
            check = tf1.debugging.assert_non_negative(
                ids, message=f"{self._what()}: a label is not in label_vocabulary {self._label_vocabulary}")
            with tf.control_dependencies([check]):
                return tf.identity(ids)
        if labels.dtype == tf.string:
            raise ValueError("labels are strings: give label_vocabulary=[...] (the class names, in class-id order)")
        if labels.dtype.is_floating and self._n_classes > 2:
            raise ValueError(f"labels must be integer class ids for {self._n_classes} classes, got "
                             f"{labels.dtype.name}; cast them in the input_fn")
        return self._check_range(labels)

    def _check_range(self, labels):
        checks = [tf1.debugging.assert_non_negative(labels, message=f"{self._what()}: labels must be >= 0"),
                  tf1.debugging.assert_less_equal(labels, tf.cast(self._n_classes - 1, labels.dtype),
                                                  message=f"{self._what()}: labels must be <= n_classes - 1 "
                                                          f"({self._n_classes - 1})")]
        with tf.control_dependencies(checks):
            return tf.identity(labels)

    def _what(self) -> str:
        return f"{type(self).__name__}{' ' + repr(self._name) if self._name else ''}"

    def _class_names(self):
        return self._label_vocabulary or [str(i) for i in range(self._n_classes)]

    def _classes_of(self, class_ids):
        if self._label_vocabulary is None:
            return tf.strings.as_string(class_ids, name="str_classes")
        return tf.gather(tf.constant(self._label_vocabulary), class_ids)

    def _id_predictions(self, logits, scores_logits, predictions, keys):
        if K.CLASS_IDS in keys or K.CLASSES in keys:
            class_ids = tf.expand_dims(tf.argmax(scores_logits, axis=-1), -1)
            if K.CLASS_IDS in keys:
                predictions[K.CLASS_IDS] = class_ids
            if K.CLASSES in keys:
                predictions[K.CLASSES] = self._classes_of(class_ids)
        if K.ALL_CLASS_IDS in keys:
            predictions[K.ALL_CLASS_IDS] = per_row(logits, self._n_classes, list(range(self._n_classes)))
        if K.ALL_CLASSES in keys:
            predictions[K.ALL_CLASSES] = per_row(logits, self._n_classes, self._class_names())
        return predictions

    def _classification_output(self, predictions):
        return ClassificationOutput(scores=predictions[K.PROBABILITIES], classes=predictions[K.ALL_CLASSES])


class BinaryClassHead(_ClassHead):
    """Two classes from one logit: sigmoid cross-entropy; labels 0/1 (floats in [0, 1] too) or strings
    through ``label_vocabulary``. ``thresholds`` add accuracy/precision/recall at each threshold."""

    logits_dimension = 1

    def __init__(self, weight_column=None, thresholds: Optional[Sequence[float]] = None, label_vocabulary=None,
                 loss_reduction="sum_over_batch_size", loss_fn=None, name=None):
        super().__init__(2, weight_column, label_vocabulary, loss_reduction, loss_fn, name)
        self._thresholds = _checked_thresholds(thresholds)

    def predictions(self, logits, keys=None) -> Dict:
        keys = keys or (K.LOGITS, K.LOGISTIC, K.PROBABILITIES, K.CLASS_IDS, K.CLASSES, K.ALL_CLASS_IDS, K.ALL_CLASSES)
        two_class_logits = tf.concat([tf.zeros_like(logits), logits], axis=-1, name="two_class_logits")
        predictions = {}
        if K.LOGITS in keys:
            predictions[K.LOGITS] = logits
        if K.LOGISTIC in keys:
            predictions[K.LOGISTIC] = tf.sigmoid(logits, name=K.LOGISTIC)
        if K.PROBABILITIES in keys:
            predictions[K.PROBABILITIES] = tf.nn.softmax(two_class_logits, name=K.PROBABILITIES)
        return self._id_predictions(logits, two_class_logits, predictions, keys)

    def _labels(self, logits, labels):
        labels = dense_labels(labels, logits, 1)
        if labels.dtype == tf.bool:
            labels = tf.cast(labels, tf.int64)
        if labels.dtype.is_floating and self._label_vocabulary is None:
            return self._check_range(tf.cast(labels, tf.float32))
        return tf.cast(self._class_ids(labels), tf.float32)

    def _unweighted_loss(self, labels, logits):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    def _metric_ops(self, predictions, labels, unweighted_loss, weights) -> Dict:
        class_ids = tf.cast(predictions[K.CLASS_IDS], tf.float32)
        logistic = predictions[K.LOGISTIC]
        broadcast = None if weights is None else tf.broadcast_to(weights, tf.shape(labels))
        label_mean = metric_mean(labels, weights)
        ops = {
            MetricKeys.LOSS_MEAN: metric_mean(unweighted_loss, weights),
            MetricKeys.ACCURACY: tf1.metrics.accuracy(labels, class_ids, broadcast),
            MetricKeys.PRECISION: tf1.metrics.precision(labels, class_ids, broadcast),
            MetricKeys.RECALL: tf1.metrics.recall(labels, class_ids, broadcast),
            MetricKeys.PREDICTION_MEAN: metric_mean(logistic, weights),
            MetricKeys.LABEL_MEAN: label_mean,
            MetricKeys.ACCURACY_BASELINE: (tf.maximum(label_mean[0], 1 - label_mean[0]), tf.no_op()),
            MetricKeys.AUC: tf1.metrics.auc(labels, logistic, broadcast, num_thresholds=200,
                                            summation_method="trapezoidal"),
            MetricKeys.AUC_PR: tf1.metrics.auc(labels, logistic, broadcast, num_thresholds=200, curve="PR",
                                               summation_method="careful_interpolation"),
        }
        ops.update(_threshold_ops(labels, logistic, broadcast, self._thresholds))
        return ops

    def _export_outputs(self, predictions) -> Dict:
        classification = self._classification_output(predictions)
        return {SERVING_DEFAULT: classification, CLASSIFY: classification,
                REGRESS: RegressionOutput(predictions[K.LOGISTIC]), PREDICT: PredictOutput(predictions)}


class MultiClassHead(_ClassHead):
    """``n_classes`` (> 2) classes from as many logits: softmax cross-entropy over class ids."""

    def __init__(self, n_classes: int, weight_column=None, label_vocabulary=None,
                 loss_reduction="sum_over_batch_size", loss_fn=None, name=None):
        if n_classes is None or n_classes <= 2:
            raise ValueError(f"n_classes must be > 2 for MultiClassHead, got {n_classes}; use BinaryClassHead "
                             f"for two classes")
        super().__init__(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn, name)

    @property
    def logits_dimension(self):
        return self._n_classes

    def predictions(self, logits, keys=None) -> Dict:
        keys = keys or (K.LOGITS, K.PROBABILITIES, K.CLASS_IDS, K.CLASSES, K.ALL_CLASS_IDS, K.ALL_CLASSES)
        predictions = {}
        if K.LOGITS in keys:
            predictions[K.LOGITS] = logits
        if K.PROBABILITIES in keys:
            predictions[K.PROBABILITIES] = tf.nn.softmax(logits, name=K.PROBABILITIES)
        return self._id_predictions(logits, logits, predictions, keys)

    def _labels(self, logits, labels):
        return tf.cast(self._class_ids(dense_labels(labels, logits, 1)), tf.int64)

    def _unweighted_loss(self, labels, logits):
        return tf.expand_dims(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.squeeze(labels, -1),
                                                                             logits=logits), -1)

    def _metric_ops(self, predictions, labels, unweighted_loss, weights) -> Dict:
        broadcast = None if weights is None else tf.broadcast_to(weights, tf.shape(labels))
        return {MetricKeys.LOSS_MEAN: metric_mean(unweighted_loss, weights),
                MetricKeys.ACCURACY: tf1.metrics.accuracy(labels, predictions[K.CLASS_IDS], broadcast)}

    def _export_outputs(self, predictions) -> Dict:
        classification = self._classification_output(predictions)
        return {SERVING_DEFAULT: classification, CLASSIFY: classification, PREDICT: PredictOutput(predictions)}


class MultiLabelHead(_ClassHead):
    """Any number of ``n_classes`` labels per example: a sigmoid cross-entropy per class, labels as a
    multi-hot ``[batch, n_classes]`` tensor (or class ids / strings in a SparseTensor)."""

    def __init__(self, n_classes: int, weight_column=None, thresholds=None, label_vocabulary=None,
                 loss_reduction="sum_over_batch_size", loss_fn=None, name=None):
        if n_classes is None or n_classes < 2:
            raise ValueError(f"n_classes must be >= 2 for MultiLabelHead, got {n_classes}")
        super().__init__(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn, name)
        self._thresholds = _checked_thresholds(thresholds)

    @property
    def logits_dimension(self):
        return self._n_classes

    def predictions(self, logits, keys=None) -> Dict:
        keys = keys or (K.LOGITS, K.PROBABILITIES, K.ALL_CLASS_IDS, K.ALL_CLASSES)
        predictions = {}
        if K.LOGITS in keys:
            predictions[K.LOGITS] = logits
        if K.PROBABILITIES in keys:
            predictions[K.PROBABILITIES] = tf.sigmoid(logits, name=K.PROBABILITIES)
        return self._id_predictions(logits, logits, predictions, keys)

    def _labels(self, logits, labels):
        if isinstance(labels, tf.SparseTensor):
            ids = labels.values
            ids = self._class_ids(ids) if self._label_vocabulary is not None else _ClassHead._check_range(self, ids)
            sparse = tf.SparseTensor(labels.indices, tf.cast(ids, tf.int64), labels.dense_shape)
            return tf.cast(tf.sparse.to_indicator(sparse, self._n_classes), tf.float32)
        labels = dense_labels(labels, logits, self._n_classes)
        return self._check_range(tf.cast(labels, tf.float32)) if labels.dtype.is_floating else \
            tf.cast(self._check_range(labels), tf.float32)

    def _check_range(self, labels):
        if labels.dtype.is_floating or labels.shape.rank == 2:
            checks = [tf1.debugging.assert_non_negative(labels, message=f"{self._what()}: labels must be >= 0"),
                      tf1.debugging.assert_less_equal(labels, tf.cast(1, labels.dtype),
                                                      message=f"{self._what()}: multi-hot labels must be 0 or 1")]
            with tf.control_dependencies(checks):
                return tf.identity(labels)
        return super()._check_range(labels)

    def _unweighted_loss(self, labels, logits):
        per_class = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        return tf.reduce_mean(per_class, axis=-1, keepdims=True)

    def _metric_ops(self, predictions, labels, unweighted_loss, weights) -> Dict:
        probabilities = predictions[K.PROBABILITIES]
        broadcast = None if weights is None else tf.broadcast_to(weights, tf.shape(labels))
        return {MetricKeys.LOSS_MEAN: metric_mean(unweighted_loss, weights),
                MetricKeys.AUC: tf1.metrics.auc(labels, probabilities, broadcast, num_thresholds=200,
                                                summation_method="trapezoidal"),
                MetricKeys.AUC_PR: tf1.metrics.auc(labels, probabilities, broadcast, num_thresholds=200, curve="PR",
                                                   summation_method="careful_interpolation"),
                **_threshold_ops(labels, probabilities, broadcast, self._thresholds)}

    def _export_outputs(self, predictions) -> Dict:
        classification = self._classification_output(predictions)
        return {SERVING_DEFAULT: classification, CLASSIFY: classification, PREDICT: PredictOutput(predictions)}


def _checked_thresholds(thresholds):
    thresholds = tuple(thresholds or ())
    for threshold in thresholds:
        if not 0 < threshold < 1:
            raise ValueError(f"thresholds must be in (0, 1), got {threshold}")
    return thresholds


def _threshold_ops(labels, scores, weights, thresholds) -> Dict:
    """Accuracy, precision and recall counting a score above each threshold as positive."""
    ops = {}
    for threshold in thresholds:
        above = tf.cast(scores > threshold, tf.float32)
        ops[f"accuracy/positive_threshold_{threshold:g}"] = tf1.metrics.accuracy(labels, above, weights)
        ops[f"precision/positive_threshold_{threshold:g}"] = tf1.metrics.precision(labels, above, weights)
        ops[f"recall/positive_threshold_{threshold:g}"] = tf1.metrics.recall(labels, above, weights)
    return ops
