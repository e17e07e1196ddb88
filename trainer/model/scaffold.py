"""The Scaffold both session backends use: the config's ops, the Saver, warm start, the model's own Scaffold."""

import tensorflow as tf

from trainer.errors import ConfigError
from trainer.model.names import op, tensor
from trainer.model.warm_start import make_warm_start_fn

tf1 = tf.compat.v1


def _group(names, key: str):
    if names is None:
        return None
    names = [names] if isinstance(names, str) else list(names)
    try:
        return tf.group(*[op(n) for n in names], name=key.replace(".", "_"))
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}") from None


def _report_tensor(name, key: str):
    """A readiness check: a 1-D string tensor naming what is not ready (empty when ready)."""
    if name is None:
        return None
    try:
        found = tensor(name)
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}") from None
    if found.dtype.name != "string" or found.shape.rank != 1:
        raise ConfigError(f"{key}={name}: must be a 1-D string tensor (names of what is not ready), e.g. from report_uninitialized_variables")
    return found


def make_scaffold(scaffold_cfg, init_from_cfg, saver, summary_op, spec_scaffold=None):
    """The config's Scaffold ops (``scaffold``; TensorFlow's defaults where null), the Saver and warm start
    (``init_from``).

    Fields the model_fn's own Scaffold sets are used where the config leaves TensorFlow's default.
    """
    sc = scaffold_cfg
    fields = {
        "init_op": _group(sc.init_op, "scaffold.init_op"),
        "ready_op": _report_tensor(sc.ready_op, "scaffold.ready_op"),
        "ready_for_local_init_op": _report_tensor(sc.ready_for_local_init_op, "scaffold.ready_for_local_init_op"),
        "local_init_op": _group(sc.local_init_op, "scaffold.local_init_op"),
    }
    if spec_scaffold is not None:
        for key in fields:
            if fields[key] is None:
                fields[key] = getattr(spec_scaffold, key)
    init_fn = make_warm_start_fn(init_from_cfg) if init_from_cfg.checkpoint else None
    if init_fn is None and spec_scaffold is not None and spec_scaffold.init_fn is not None:
        init_fn = lambda scaffold, session: spec_scaffold.init_fn(session)  # noqa: E731
    return tf1.train.Scaffold(saver=saver, summary_op=summary_op, init_fn=init_fn, **fields)
