"""Estimator's canned models, one file per family as ``tf.estimator`` kept them (``dnn``, ``linear``,
``dnn_linear_combined``, ``baseline``), each with its logits, model_fns and classes, v2 and v1 side by
side: ``DNNClassifier`` is TF 2.x's ``tf.estimator.DNNClassifier``, ``DNNClassifierV1`` is
``tf.compat.v1.estimator.DNNClassifier`` (TF 1.x's, ``trainer.estimator.v1``).

Each family also adapts the runner's ``model.params`` (``model=dnn_classifier`` and its siblings,
``trainer/models/canned.py``): ``COLUMN_LISTS`` (its column lists, and which table columns each reads
when null) and ``logits_from_params``. A new family is its module here, its classes exported below,
and a ``conf/model/<name>.yaml`` naming it in ``params.kind``."""

import importlib
import pkgutil

from trainer.estimator.canned.baseline import (BaselineClassifier, BaselineClassifierV1, BaselineEstimator,
                                               BaselineEstimatorV1, BaselineRegressor, BaselineRegressorV1)
from trainer.estimator.canned.dnn import (DNNClassifier, DNNClassifierV1, DNNEstimator, DNNEstimatorV1, DNNRegressor,
                                          DNNRegressorV1)
from trainer.estimator.canned.dnn_linear_combined import (DNNLinearCombinedClassifier, DNNLinearCombinedClassifierV1,
                                                          DNNLinearCombinedEstimator, DNNLinearCombinedEstimatorV1,
                                                          DNNLinearCombinedRegressor, DNNLinearCombinedRegressorV1)
from trainer.estimator.canned.linear import (LinearClassifier, LinearClassifierV1, LinearEstimator, LinearEstimatorV1,
                                             LinearRegressor, LinearRegressorV1)

__all__ = ["BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "DNNClassifier", "DNNEstimator",
           "DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor", "DNNRegressor",
           "LinearClassifier", "LinearEstimator", "LinearRegressor",
           "BaselineClassifierV1", "BaselineEstimatorV1", "BaselineRegressorV1", "DNNClassifierV1", "DNNEstimatorV1",
           "DNNLinearCombinedClassifierV1", "DNNLinearCombinedEstimatorV1", "DNNLinearCombinedRegressorV1",
           "DNNRegressorV1", "LinearClassifierV1", "LinearEstimatorV1", "LinearRegressorV1"]


def families():
    """The canned families: the modules of this package with ``logits_from_params`` (a new family is its
    module here; ``model.params.kind`` names it)."""
    names = (m.name for m in pkgutil.iter_modules(__path__))
    return sorted(n for n in names if hasattr(importlib.import_module(f"{__name__}.{n}"), "logits_from_params"))


def family(kind: str):
    """The module of canned family ``kind`` (``model.params.kind``): its ``COLUMN_LISTS`` and
    ``logits_from_params``.

    Raises:
      ConfigError: no such family.
    """
    if kind not in families():
        from trainer.errors import ConfigError

        raise ConfigError(f"model.params.kind={kind!r}: one of {', '.join(families())}")
    return importlib.import_module(f"{__name__}.{kind}")
