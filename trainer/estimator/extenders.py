"""``add_metrics``: an Estimator whose evaluations report more metrics, as ``tf.estimator.add_metrics``."""

from trainer.config.targets import declared_args
from trainer.estimator.core import Estimator
from trainer.model.model_fn import ModelFn, as_spec
from trainer.contract import ModeKeys

METRIC_FN_ARGS = ("labels", "predictions", "features", "config")


def add_metrics(estimator: Estimator, metric_fn) -> Estimator:
    """A new Estimator on the same model_dir, config and params whose EVAL calls also report
    ``metric_fn``'s metrics. ``metric_fn`` takes any of ``labels``, ``predictions``, ``features``,
    ``config`` and returns ``name -> (value, update_op)`` or ``name -> Keras metric`` (its
    ``update_state`` called). A name the model already reports is refused: it would hide one of them."""
    takes = declared_args(metric_fn, "metric_fn", getattr(metric_fn, "__name__", "metric_fn"), METRIC_FN_ARGS)
    original = estimator.model_fn
    user = ModelFn(original, getattr(original, "__name__", "model_fn"),
                   declared_args(original, "model_fn", "model_fn", ("features", "labels", "mode", "params", "config"),
                                 required=("features",)))

    def model_fn_with_metrics(features, labels, mode, params, config):
        spec = as_spec(user(features, labels, mode, params, config), mode, user.name)
        if mode != ModeKeys.EVAL:
            return spec
        offered = {"labels": labels, "predictions": spec.predictions, "features": features, "config": config}
        added = metric_fn(**{k: v for k, v in offered.items() if k in takes})
        clash = sorted(set(added) & set(spec.eval_metric_ops or {}))
        if clash:
            raise ValueError(f"metric_fn returns {clash}, which the model already reports; give them other names")
        return spec._replace(eval_metric_ops={**(spec.eval_metric_ops or {}), **added})

    return Estimator(model_fn_with_metrics, model_dir=estimator.model_dir, config=estimator.config,
                     params=estimator.params, warm_start_from=estimator._warm_start_from)
