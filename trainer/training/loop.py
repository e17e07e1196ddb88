"""The training loop, written once for both session backends, and its error policy.

The lifecycle, as ``session_run_hook.py`` documents it::

    hooks: begin()
    session = open_session()          # init or restore, queue runners, hooks: after_create_session()
    while not session.should_stop():  # max_steps reached, a hook asked, a signal
        session.run(train_op)         # hooks: before_run() / after_run() around every step;
                                      # OutOfRangeError: the training input ended
    hooks: end(session)               # final checkpoint and evaluation; only on a normal stop

NaN (``NanLossError``) and too many recoveries are raised as they are. Any other error first
saves the session's state when it can still be read: hooks' ``end()`` does not run after an
error, so no other save would happen.
"""

import logging
import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from trainer.errors import NanLossError, RecoveryLimitError

log = logging.getLogger("trainer")


@dataclass
class LoopStats:
    steps: int = 0  # steps this process ran
    last: object = None  # the last step's fetched values
    session_secs: float = 0.0  # creating the session: init or restore, hooks' after_create_session
    train_secs: float = 0.0  # the loop itself, up to the normal stop
    first_step_at: Optional[float] = None  # wall time of the first step's end
    end_of_input: bool = False  # the training input ended (OutOfRangeError): a normal end, as in Estimator


def run_loop(session_factory: Callable, fetches, save_state: Optional[Callable] = None,
             at_normal_end: Optional[Callable] = None) -> LoopStats:
    """Run ``fetches`` until the session says stop; returns what was done.

    Args:
      session_factory: opens the session (a context manager with ``run`` and ``should_stop``).
      fetches: what each step runs (the train op).
      save_state: ``save_state(session)`` after an error; None where this process must not save.
      at_normal_end: ``at_normal_end(session)`` when the loop ends normally, before the hooks' end().
    """
    stats = LoopStats()
    opened = time.time()
    with session_factory() as sess:
        started = time.time()
        stats.session_secs = started - opened
        try:
            try:
                while not sess.should_stop():
                    stats.last = sess.run(fetches)
                    stats.steps += 1
                    if stats.steps == 1:
                        stats.first_step_at = time.time()
            except tf.errors.OutOfRangeError:
                # The end of a finite training input: training ends normally, as under Estimator
                # (the hooks' end() writes the final checkpoint and evaluation).
                stats.end_of_input = True
                log.info("the training input ended after %d steps of this run", stats.steps)
            if at_normal_end is not None:
                at_normal_end(sess)
        except (NanLossError, RecoveryLimitError):
            raise
        # broad: whatever stopped the loop, the state is saved first; the error goes on
        except Exception:
            _save(save_state, sess)
            raise
        stats.train_secs = time.time() - started
    return stats


def _save(save_state, sess) -> None:
    if save_state is None:
        return
    try:
        save_state(sess)
    # broad: a save that fails after an error must not hide that error
    except Exception as e:
        log.warning("could not save a checkpoint after the error (%s: %s)", type(e).__name__,
                    (str(e).splitlines() or [""])[0])


def weights_finite(session, variables, group_bytes: int = 1 << 28) -> bool:
    """Whether every value of the float ``variables`` in ``session`` is finite. The values are
    fetched (in groups of about ``group_bytes``) and checked with NumPy: a check made only after an
    error puts no ops in the graph, where each op adds to the set-up of every ``run`` before the
    first step (four per variable: 139 of the 835 ops of the layers-tutorial CNN's graph with Adam)."""
    groups, size = [[]], 0
    for v in variables:
        if not v.dtype.base_dtype.is_floating:
            continue
        count = v.shape.num_elements()
        nbytes = group_bytes if count is None else count * v.dtype.base_dtype.size
        if groups[-1] and size + nbytes > group_bytes:
            groups.append([])
            size = 0
        groups[-1].append(v)
        size += nbytes
    return all(np.isfinite(value).all() for group in groups if group for value in session.run(group))


def exit_save(graph, checkpoint_dir: str) -> Callable:
    """``save_state`` for :func:`run_loop`: the session's variables as a checkpoint of its global
    step, when they are all finite (a diverged state is not saved over the last good one), written
    without deleting any older checkpoint (``checkpoint.keep`` rotation is for the run's own saves)."""

    def save(sess):
        def write(raw_session):
            if not weights_finite(raw_session, graph.graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)):
                latest = tf.train.latest_checkpoint(checkpoint_dir)
                log.warning("not saving the state at the error: it holds NaN or Inf values; the latest checkpoint "
                            "stays %s", latest or "none")
                return
            state = tf.compat.v1.train.get_checkpoint_state(checkpoint_dir)
            kept = [os.path.basename(p) for p in state.all_model_checkpoint_paths] if state else []
            # Without write_state the run's Saver neither records nor rotates: no older checkpoint is deleted.
            path = graph.saver.save(raw_session, os.path.join(checkpoint_dir, "model.ckpt"),
                                    global_step=graph.global_step, write_state=False)
            name = os.path.basename(path)
            names = [n for n in kept if n != name] + [name]
            tf.compat.v1.train.update_checkpoint_state(checkpoint_dir, name, all_model_checkpoint_paths=names)
            log.warning("saved the last state before the error: %s", path)

        if hasattr(sess, "raw_session"):
            write(sess.raw_session)
        else:
            sess.run_step_fn(lambda step_context: write(step_context.session))

    return save
