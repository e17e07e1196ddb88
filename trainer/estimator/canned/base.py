"""What the canned families share: the ``Estimator`` subclass they all are, Estimator's choice of head for a
classifier, the checks of their arguments, and the optimizer of a call (the v2 family's Keras optimizers,
the v1 family's TF1 ones)."""

import tensorflow as tf

from trainer.estimator.core import Estimator
from trainer.estimator.head import BinaryClassHead, MultiClassHead
from trainer.estimator.optimizers import get_optimizer, get_optimizer_v1
from trainer.contract import ModeKeys

SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
SUM = "weighted_sum"  # tf.compat.v1.losses.Reduction.SUM, the v1 family's default

tf1 = tf.compat.v1


def classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction):
    """Estimator's choice of head for a canned classifier: binary for 2 classes, multi-class above."""
    if n_classes is None or n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    if n_classes == 2:
        return BinaryClassHead(weight_column, label_vocabulary=label_vocabulary, loss_reduction=loss_reduction)
    return MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction)


def require_columns(columns, key: str):
    columns = list(columns or ())
    if not columns:
        raise ValueError(f"{key} is empty; give the feature columns the model reads (tf.feature_column.*)")
    names = [getattr(c, "name", str(c)) for c in columns]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{key} declares {repeated} more than once; give each column once")
    return columns


def require_hidden_units(hidden_units, key: str = "hidden_units"):
    if not hidden_units:
        raise ValueError(f"{key} is empty; give the hidden layers' widths, e.g. {key}=[64, 32]")
    units = list(hidden_units)
    bad = [u for u in units if not isinstance(u, int) or isinstance(u, bool) or u < 1]
    if bad:
        raise ValueError(f"{key} must be positive integers (the layers' widths), got {units}")
    return units


def optimizer_of(optimizer, mode, learning_rate=None):
    """The v2 family's optimizer for a graph of ``mode`` (None outside training)."""
    if mode != ModeKeys.TRAIN:
        return None
    return get_optimizer(optimizer, learning_rate if isinstance(optimizer, str) else None)


def optimizer_v1(optimizer, mode, learning_rate):
    """The v1 family's optimizer for a graph of ``mode``: a name is the TF1 class at ``learning_rate``."""
    if mode != ModeKeys.TRAIN:
        return None
    return get_optimizer_v1(optimizer, learning_rate)


def ps_partitioner(config, min_slice_size=None):
    """TF 1.x's partitioner of a canned model's variables over the cluster's ps tasks: one part with
    none, where it still shapes the slots' names (``.../part_0/Ftrl``) as TF 1.x's did."""
    replicas = int(getattr(config, "num_ps_replicas", 0) or 0)
    if min_slice_size is None:
        return tf1.min_max_variable_partitioner(max_partitions=replicas)
    return tf1.min_max_variable_partitioner(max_partitions=replicas, min_slice_size=min_slice_size)


class Canned(Estimator):
    def __init__(self, model_fn, head, model_dir, config, warm_start_from):
        self._head = head
        super().__init__(model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)

    @property
    def head(self):
        return self._head


def check_features(features):
    if not isinstance(features, dict):
        raise ValueError(f"features must be a dict of tensors (feature name -> tensor) for a canned model, got "
                         f"{type(features).__name__}; return a dict from the input_fn")
