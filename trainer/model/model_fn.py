"""The model_fn contract: loading a user's model_fn and calling it for one mode."""

from trainer.config.targets import load_callable
from trainer.errors import ConfigError
from trainer.estimator import EstimatorSpec


def load_model_fn(path: str):
    """The model_fn at dotted ``path`` (``model.fn``)."""
    return load_callable(path, "model.fn")


def as_spec(result, mode: str, path: str) -> EstimatorSpec:
    """What a model_fn returned, as an EstimatorSpec (an Estimator-era namedtuple is taken field by field)."""
    if isinstance(result, EstimatorSpec):
        return result
    if hasattr(result, "_asdict"):
        fields = {k: v for k, v in result._asdict().items() if k in EstimatorSpec._fields}
        return EstimatorSpec(**fields)
    raise ConfigError(f"model.fn={path} returned {type(result).__name__} for mode {mode}; return trainer.estimator.EstimatorSpec")


def call_model_fn(model_fn, path: str, features, labels, mode: str, params: dict) -> EstimatorSpec:
    """``model_fn(features, labels, mode, params)`` as an EstimatorSpec."""
    return as_spec(model_fn(features, labels, mode, params), mode, path)
