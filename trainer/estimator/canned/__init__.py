"""Estimator's canned models (``models``), their model_fns (``model_fns``) and the logits under
Estimator's variable names (``logits``)."""

from trainer.estimator.canned.models import (BaselineClassifier, BaselineEstimator, BaselineRegressor, DNNClassifier,
                                             DNNEstimator, DNNLinearCombinedClassifier, DNNLinearCombinedEstimator,
                                             DNNLinearCombinedRegressor, DNNRegressor, LinearClassifier,
                                             LinearEstimator, LinearRegressor)

__all__ = ["BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "DNNClassifier", "DNNEstimator",
           "DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor", "DNNRegressor",
           "LinearClassifier", "LinearEstimator", "LinearRegressor"]
