"""Estimator's canned models, one file per family as ``tf.estimator`` kept them (``dnn``, ``linear``,
``dnn_linear_combined``, ``baseline``), each with its logits, model_fns and classes, v2 and v1 side by
side: ``DNNClassifier`` is TF 2.x's ``tf.estimator.DNNClassifier``, ``DNNClassifierV1`` is
``tf.compat.v1.estimator.DNNClassifier`` (TF 1.x's, ``trainer.estimator.v1``)."""

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
