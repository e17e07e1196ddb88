"""The evaluator task (``TF_CONFIG`` type ``evaluator``): evaluates each new checkpoint of the chief's
checkpoint dir (a shared file system) until the one at ``train.max_steps``."""

import copy
import logging
from typing import Dict

import tensorflow as tf

from trainer.checkpoints.intact import checkpoint_step
from trainer.dist.roles import Role
from trainer.errors import ClusterError
from trainer.modes.evaluate import evaluate

log = logging.getLogger("trainer")


def evaluate_continuously(cfg, workdir: str, role: Role) -> Dict:
    """Evaluate every new checkpoint until the one at ``train.max_steps``; returns its record.

    Raises:
      ClusterError: no new checkpoint for ``distributed.progress_timeout_secs``.
    """
    ckpt_dir = cfg.checkpoint.dir
    timeout = cfg.distributed.progress_timeout_secs
    log.info("%s: evaluating each new checkpoint in %s until step %s", role.name, ckpt_dir, cfg.train.max_steps)
    eval_cfg = copy.deepcopy(cfg)
    result = None
    for path in tf.train.checkpoints_iterator(ckpt_dir, min_interval_secs=1, timeout=timeout):
        eval_cfg.eval.checkpoint = path
        result = evaluate(eval_cfg, workdir)
        if cfg.train.max_steps is not None and checkpoint_step(path) >= cfg.train.max_steps:
            return result
    raise ClusterError(f"{role.name}: no new checkpoint in {ckpt_dir} for {timeout:.0f}s (last evaluated: "
                       f"{result and result.get('checkpoint')}); is the chief running? "
                       "Raise distributed.progress_timeout_secs for longer gaps")
