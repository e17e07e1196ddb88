"""Estimator's ``experimental.InMemoryEvaluatorHook``: evaluations of the training session's own
weights while it trains."""

import logging
import os
import shutil
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from trainer.hooks.evaluation import EvaluationStopped
from trainer.training.preemption import signal_received

log = logging.getLogger("trainer")


class InMemoryEvaluatorHook(tf.compat.v1.train.SessionRunHook):
    """Estimator's ``experimental.InMemoryEvaluatorHook``: evaluates the training session's current
    weights with ``input_fn`` after the first step, every ``every_n_iter`` steps and at the end, writing
    the metrics to ``eval`` (``eval_<name>``) as ``evaluate`` does, without touching the model_dir's
    checkpoints (the weights pass through a scratch checkpoint outside it). One process only."""

    def __init__(self, estimator, input_fn: Callable, steps: Optional[int] = None, hooks=None,
                 name: Optional[str] = None, every_n_iter: int = 100):
        if every_n_iter is None or every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if estimator.config.distributed:
            raise NotImplementedError("InMemoryEvaluator does not support distributed training (TF_CONFIG describes "
                                      "a cluster); use train_and_evaluate's evaluator task instead")
        self._estimator, self._input_fn, self._steps, self._hooks, self._name = estimator, input_fn, steps, hooks, name
        self._every = every_n_iter
        self.results: List[Dict] = []  # each evaluation's metrics, in order

    def begin(self):
        import tempfile

        self._timer = tf.compat.v1.train.SecondOrStepTimer(every_steps=self._every)
        self._iter_count = 0
        self._scratch = tempfile.mkdtemp(prefix="in-memory-eval-")
        self._saver = tf.compat.v1.train.Saver(sharded=False, max_to_keep=1, save_relative_paths=True)

    def _evaluate(self, session) -> None:
        if signal_received():  # training is stopping: no new evaluation
            return
        path = self._saver.save(session, os.path.join(self._scratch, "weights"), write_meta_graph=False,
                                write_state=False)
        try:
            self.results.append(self._estimator.evaluate(self._input_fn, steps=self._steps, hooks=self._hooks,
                                                         checkpoint_path=path, name=self._name))
        except EvaluationStopped:
            log.warning("the in-memory evaluation was stopped by the signal; it is not recorded")

    def after_run(self, run_context, run_values):
        self._iter_count += 1
        if self._timer.should_trigger_for_step(self._iter_count):
            self._timer.update_last_triggered_step(self._iter_count)
            self._evaluate(run_context.session)

    def end(self, session):
        try:
            self._evaluate(session)
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)


