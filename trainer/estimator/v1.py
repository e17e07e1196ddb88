"""``tf.compat.v1.estimator`` (and ``tf.estimator`` of a TF 1.x program): ``trainer.estimator`` with the v1
canned family in place of the v2 one, so a ``DNNClassifier`` here has TF 1.x's defaults and numbers (TF1
optimizers at their rates, the loss summed over the batch, the v1 heads and slot names). Everything
else (``Estimator``, ``RunConfig``, ``train_and_evaluate``, ``tpu``, ...) is the one API of both."""

from trainer.estimator import *  # noqa: F401,F403  (the API both families share)
from trainer.estimator import __all__ as _shared
from trainer.estimator.canned import (BaselineClassifierV1 as BaselineClassifier,
                                      BaselineEstimatorV1 as BaselineEstimator,
                                      BaselineRegressorV1 as BaselineRegressor, DNNClassifierV1 as DNNClassifier,
                                      DNNEstimatorV1 as DNNEstimator,
                                      DNNLinearCombinedClassifierV1 as DNNLinearCombinedClassifier,
                                      DNNLinearCombinedEstimatorV1 as DNNLinearCombinedEstimator,
                                      DNNLinearCombinedRegressorV1 as DNNLinearCombinedRegressor,
                                      DNNRegressorV1 as DNNRegressor, LinearClassifierV1 as LinearClassifier,
                                      LinearEstimatorV1 as LinearEstimator, LinearRegressorV1 as LinearRegressor)

__all__ = list(_shared)
