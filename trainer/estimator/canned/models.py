"""Estimator's canned models, as ``tf.estimator`` 2.x had them: ``DNNClassifier``/``DNNRegressor``/
``DNNEstimator``, ``LinearClassifier``/``LinearRegressor``/``LinearEstimator``,
``DNNLinearCombinedClassifier``/``Regressor``/``Estimator`` and ``BaselineClassifier``/``Regressor``/
``Estimator``. Each is an ``Estimator`` whose model_fn is the canned one, so ``train``, ``evaluate``,
``predict``, ``export_saved_model`` and ``train_and_evaluate`` run them through the runner."""

import tensorflow as tf

from trainer.estimator.canned import model_fns
from trainer.estimator.core import Estimator
from trainer.estimator.head import BinaryClassHead, MultiClassHead, RegressionHead

SUM_OVER_BATCH_SIZE = "sum_over_batch_size"


def classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction):
    """Estimator's choice of head for a canned classifier: binary for 2 classes, multi-class above."""
    if n_classes is None or n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    if n_classes == 2:
        return BinaryClassHead(weight_column, label_vocabulary=label_vocabulary, loss_reduction=loss_reduction)
    return MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction)


def _require_columns(columns, key: str):
    columns = list(columns or ())
    if not columns:
        raise ValueError(f"{key} is empty; give the feature columns the model reads (tf.feature_column.*)")
    names = [getattr(c, "name", str(c)) for c in columns]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{key} declares {repeated} more than once; give each column once")
    return columns


class _Canned(Estimator):
    def __init__(self, model_fn, head, model_dir, config, warm_start_from):
        self._head = head
        super().__init__(model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)

    @property
    def head(self):
        return self._head


class DNNEstimator(_Canned):
    def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer="Adagrad",
                 activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None, batch_norm=False):
        columns = _require_columns(feature_columns, "feature_columns")
        if not hidden_units:
            raise ValueError("hidden_units is empty; give the hidden layers' widths, e.g. hidden_units=[64, 32]")
        hidden_units = list(hidden_units)

        def dnn_model_fn(features, labels, mode):
            return model_fns.dnn_model_fn(features, labels, mode, head, hidden_units, columns, optimizer,
                                          activation_fn, dropout, batch_norm)

        super().__init__(dnn_model_fn, head, model_dir, config, warm_start_from)


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


class LinearEstimator(_Canned):
    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl", config=None, sparse_combiner="sum",
                 warm_start_from=None):
        columns = _require_columns(feature_columns, "feature_columns")

        def linear_model_fn(features, labels, mode):
            return model_fns.linear_model_fn(features, labels, mode, head, columns, optimizer, sparse_combiner)

        super().__init__(linear_model_fn, head, model_dir, config, warm_start_from)


class LinearClassifier(LinearEstimator):
    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, warm_start_from=None, loss_reduction=SUM_OVER_BATCH_SIZE,
                 sparse_combiner="sum"):
        super().__init__(classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction),
                         feature_columns, model_dir, optimizer, config, sparse_combiner, warm_start_from)


class LinearRegressor(LinearEstimator):
    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
                 config=None, warm_start_from=None, loss_reduction=SUM_OVER_BATCH_SIZE, sparse_combiner="sum"):
        super().__init__(RegressionHead(label_dimension, weight_column, loss_reduction), feature_columns, model_dir,
                         optimizer, config, sparse_combiner, warm_start_from)


class DNNLinearCombinedEstimator(_Canned):
    def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, config=None, batch_norm=False,
                 linear_sparse_combiner="sum", warm_start_from=None):
        linear = _require_columns(linear_feature_columns, "linear_feature_columns") if linear_feature_columns else []
        dnn = _require_columns(dnn_feature_columns, "dnn_feature_columns") if dnn_feature_columns else []
        if not linear and not dnn:
            raise ValueError("give linear_feature_columns or dnn_feature_columns (or both)")
        if dnn and not dnn_hidden_units:
            raise ValueError("dnn_hidden_units must be set when dnn_feature_columns is, e.g. dnn_hidden_units=[64, 32]")
        hidden_units = list(dnn_hidden_units or ())

        def dnn_linear_combined_model_fn(features, labels, mode):
            return model_fns.combined_model_fn(features, labels, mode, head, linear, linear_optimizer, dnn,
                                               dnn_optimizer, hidden_units, dnn_activation_fn, dnn_dropout,
                                               batch_norm, linear_sparse_combiner)

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


class BaselineEstimator(_Canned):
    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None, weight_column=None):
        def baseline_model_fn(features, labels, mode):
            return model_fns.baseline_model_fn(features, labels, mode, head, optimizer, weight_column)

        super().__init__(baseline_model_fn, head, model_dir, config, None)


class BaselineClassifier(BaselineEstimator):
    def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None, optimizer="Ftrl",
                 config=None, loss_reduction=SUM_OVER_BATCH_SIZE):
        super().__init__(classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction), model_dir,
                         optimizer, config, weight_column)


class BaselineRegressor(BaselineEstimator):
    def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl", config=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE):
        super().__init__(RegressionHead(label_dimension, weight_column, loss_reduction), model_dir, optimizer, config,
                         weight_column)
