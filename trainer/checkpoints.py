"""Reading a checkpoint dir before a run touches it: the latest checkpoint, its step,
and whether its variables fit the graph about to be restored into.
"""

import logging
from typing import Optional

import tensorflow as tf

from trainer.errors import CheckpointError

log = logging.getLogger("trainer")


def latest_checkpoint(checkpoint_dir: str) -> Optional[str]:
    try:
        return tf.train.latest_checkpoint(checkpoint_dir)
    except Exception as e:  # a garbage `checkpoint` state file
        raise CheckpointError(f"checkpoint.dir={checkpoint_dir}: cannot read its checkpoint state ({e})") from None


def checkpoint_step(path: str) -> int:
    """The global step stored in checkpoint ``path``.

    Raises:
      CheckpointError: the checkpoint's files are missing or do not parse.
    """
    try:
        return int(tf.train.load_variable(path, "global_step"))
    except Exception as e:
        raise CheckpointError(
            f"checkpoint {path} is unreadable ({type(e).__name__}: {str(e).splitlines()[0]}); "
            "restore its files or point checkpoint.dir at another dir"
        ) from None


def check_compatible(path: str, graph, checkpoint_dir: str) -> None:
    """Refuse a checkpoint whose variables do not match the graph's: a readable diff instead of a wrong restore.

    Raises:
      CheckpointError: variables of the graph are missing from the checkpoint or have other shapes.
    """
    try:
        stored = dict(tf.train.list_variables(path))
    except Exception as e:
        raise CheckpointError(f"checkpoint {path} is unreadable ({type(e).__name__}); restore its files or use another checkpoint.dir") from None
    with graph.as_default():
        wanted = {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}
    missing = sorted(set(wanted) - set(stored))
    reshaped = sorted(f"{n} {stored[n]} -> {wanted[n]}" for n in set(wanted) & set(stored) if list(stored[n]) != wanted[n])
    unexpected = sorted(set(stored) - set(wanted))
    if missing or reshaped:
        parts = []
        if missing:
            parts.append(f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        if reshaped:
            parts.append(f"reshaped {reshaped[:5]}{' ...' if len(reshaped) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}")
        raise CheckpointError(
            f"checkpoint.dir={checkpoint_dir} holds another model ({'; '.join(parts)}); "
            "use another checkpoint.dir, or the same model config as the run that wrote it"
        )
