"""Model graph builders: each module has ``model_fn(features, labels, mode, params)``."""
