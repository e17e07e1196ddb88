"""Warm start: initialise a fresh run's variables from another run's checkpoint.

As Estimator's ``WarmStartSettings``: ``vars_to_warm_start`` selects trainable
variables by regex, ``var_name_map`` renames them to their names in the old
checkpoint. Applied through ``Scaffold(init_fn=...)``, so it runs only when the
run's own checkpoint dir has nothing to restore.
"""

import logging
import os
import re

import tensorflow as tf

from trainer.errors import ConfigError

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def make_warm_start_fn(init_from):
    """Build (in the default graph) the Saver and the ``init_fn(scaffold, session)`` of ``init_from``.

    Raises:
      ConfigError: the checkpoint is unreadable, or a selected variable is missing from it
        or has another shape (every mismatch is listed).
    """
    path = os.path.expanduser(init_from.checkpoint)
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if not latest:
            raise ConfigError(f"init_from.checkpoint={path}: the dir holds no checkpoint; give a checkpoint prefix or a run's checkpoints/ dir")
        path = latest
    try:
        stored = dict(tf.train.list_variables(path))
    # broad: TensorFlow's checkpoint reader raises OpError, IndexError (a cut data file) and
    # others: any of them means unreadable
    except Exception as e:
        raise ConfigError(f"init_from.checkpoint={path}: cannot read it ({type(e).__name__}); give a checkpoint prefix such as DIR/model.ckpt-1000") from None
    try:
        pattern = re.compile(init_from.vars_to_warm_start)
    except re.error as e:
        raise ConfigError(f"init_from.vars_to_warm_start={init_from.vars_to_warm_start}: not a regex ({e})") from None
    name_map = dict(init_from.var_name_map or {})
    variables = {v.op.name: v for v in tf1.global_variables()}
    unknown = sorted(set(name_map) - set(variables))
    selected = {n: v for n, v in variables.items() if n in name_map or (v.trainable and pattern.match(n))}
    missing, reshaped = [], []
    var_list = {}
    for name, var in sorted(selected.items()):
        old = name_map.get(name, name)
        if old not in stored:
            missing.append(old if old == name else f"{name} (as {old})")
        elif list(stored[old]) != var.shape.as_list():
            reshaped.append(f"{name} {var.shape.as_list()} vs {old} {list(stored[old])}")
        else:
            var_list[old] = var
    if unknown or missing or reshaped or not var_list:
        parts = []
        if unknown:
            parts.append(f"var_name_map names variables the graph lacks {unknown}")
        if missing:
            parts.append(f"not in the checkpoint {missing}")
        if reshaped:
            parts.append(f"other shapes {reshaped}")
        if not var_list and not parts:
            parts.append("no variable matches init_from.vars_to_warm_start")
        raise ConfigError(
            f"init_from.checkpoint={path}: cannot warm start: {'; '.join(parts)}; "
            "narrow init_from.vars_to_warm_start or map names with init_from.var_name_map"
        )
    saver = tf1.train.Saver(var_list=var_list, name="warm_start_saver")

    def init_fn(scaffold, session):
        saver.restore(session, path)
        log.info("warm start: %d variables from %s", len(var_list), path)

    return init_fn
