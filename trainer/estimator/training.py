"""``train_and_evaluate`` with ``TrainSpec`` / ``EvalSpec``, as Estimator ran it in one process:
training, an evaluation after the first checkpoint saved after the starting one, then after a
checkpoint once ``throttle_secs`` have passed since the last evaluation, a final evaluation of the
last checkpoint, and each exporter (``trainer.estimator.exporters``) after each evaluation; under a
``TF_CONFIG`` cluster, each task its role."""

import logging
import os
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import tensorflow as tf

from trainer.estimator.exporters import FinalExporter
from trainer.hooks.evaluation import EvaluationStopped
from trainer.training.preemption import signal_received

log = logging.getLogger("trainer")

# The evaluator task gives up when the chief writes no checkpoint for this long (as the train
# command's evaluator does at distributed.progress_timeout_secs' default).
EVALUATOR_TIMEOUT_SECS = 600.0


class TrainSpec(NamedTuple):
    input_fn: Callable
    max_steps: Optional[int] = None
    hooks: Sequence = ()
    saving_listeners: Sequence = ()


class EvalSpec(NamedTuple):
    input_fn: Callable
    steps: Optional[int] = 100
    name: Optional[str] = None
    hooks: Optional[Sequence] = None
    exporters: Optional[Sequence] = None
    start_delay_secs: int = 120
    throttle_secs: int = 600


class _Evaluator:
    """Evaluations of the training run's checkpoints, and the exporters after each."""

    def __init__(self, estimator, spec: EvalSpec):
        self._estimator, self._spec = estimator, spec
        self.last: Tuple[Optional[Dict], List] = (None, [])
        self._evaluated_step, self._at = None, None  # the first evaluation is due at once

    def due(self) -> bool:
        return self._at is None or time.time() - self._at >= self._spec.throttle_secs

    def evaluate(self, checkpoint_path: str, final: bool) -> None:
        step = int(tf.train.load_variable(checkpoint_path, "global_step"))
        spec = self._spec
        if step == self._evaluated_step:  # evaluated already: only the final exports are left to make
            if final:
                result, exports = self.last
                for exporter in spec.exporters or ():
                    if isinstance(exporter, FinalExporter):
                        path = os.path.join(self._estimator.model_dir, "export", exporter.name)
                        exports.append(exporter.export(self._estimator, path, checkpoint_path, result, True))
            return
        result = self._estimator.evaluate(spec.input_fn, steps=spec.steps, hooks=spec.hooks,
                                          checkpoint_path=checkpoint_path, name=spec.name)
        self._evaluated_step, self._at = step, time.time()
        exports = []
        for exporter in spec.exporters or ():
            path = os.path.join(self._estimator.model_dir, "export", exporter.name)
            exports.append(exporter.export(self._estimator, path, checkpoint_path, result, final))
        self.last = (result, exports)


class _EvaluateAfterSave(tf.compat.v1.train.CheckpointSaverListener):
    """Evaluates the checkpoint just saved, when ``throttle_secs`` have passed since the last evaluation
    (the first at once), as Estimator did: not the one at ``start_step`` (the step the training started
    from: nothing trained in it yet), so the first evaluation is of the first checkpoint after it."""

    def __init__(self, evaluator: _Evaluator, model_dir: str, start_step: int = 0):
        self._evaluator, self._model_dir, self._start = evaluator, model_dir, start_step

    def after_save(self, session, global_step_value):
        if global_step_value != self._start and self._evaluator.due() and not signal_received():
            try:
                self._evaluator.evaluate(tf.train.latest_checkpoint(self._model_dir), final=False)
            except EvaluationStopped:  # training stops at its next step, as the signal asked
                log.warning("the evaluation of step %d was stopped by the signal; it is not recorded", global_step_value)


def train_and_evaluate(estimator, train_spec: TrainSpec, eval_spec: EvalSpec):
    """Train to ``train_spec.max_steps``, evaluating (and exporting) after checkpoints at most every
    ``eval_spec.throttle_secs``, then once more at the final checkpoint. Returns the last evaluation's
    metrics and the exporters' results, as Estimator did.

    Under a ``TF_CONFIG`` cluster each task plays its role (:func:`_run_task`) and returns None, as
    Estimator's tasks did."""
    if not isinstance(train_spec, TrainSpec) or not isinstance(eval_spec, EvalSpec):
        raise TypeError("train_and_evaluate takes a TrainSpec and an EvalSpec")
    if estimator.config.distributed:
        return _run_task(estimator, train_spec, eval_spec)
    evaluator = _Evaluator(estimator, eval_spec)
    start = estimator.latest_checkpoint()
    start_step = int(tf.train.load_variable(start, "global_step")) if start else 0
    listener = _EvaluateAfterSave(evaluator, estimator.model_dir, start_step)
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks, max_steps=train_spec.max_steps,
                    saving_listeners=[*train_spec.saving_listeners, listener])
    latest = estimator.latest_checkpoint()
    if latest:
        evaluator.evaluate(latest, final=True)
    return evaluator.last


def _run_task(estimator, train_spec: TrainSpec, eval_spec: EvalSpec) -> None:
    """This process's task of the cluster: the evaluator evaluates (and exports) the chief's
    checkpoints; ps, chief and workers train (the chief without evaluating: that is the evaluator's
    work, as under Estimator)."""
    config = estimator.config
    log.info("train_and_evaluate: %s %d of cluster %s", config.task_type, config.task_id, config.cluster_spec)
    if config.task_type == "evaluator":
        _evaluate_continuously(estimator, train_spec, eval_spec)
        return None
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks, max_steps=train_spec.max_steps,
                    saving_listeners=train_spec.saving_listeners)
    return None


def _evaluate_continuously(estimator, train_spec: TrainSpec, eval_spec: EvalSpec,
                           timeout_secs: float = EVALUATOR_TIMEOUT_SECS) -> None:
    """Evaluate each new checkpoint in the model_dir, at most every ``throttle_secs``, until the one at
    ``train_spec.max_steps``.

    Raises:
      trainer.errors.ClusterError: no new checkpoint for ``timeout_secs`` (the chief is gone).
    """
    from trainer.errors import ClusterError

    if train_spec.max_steps is None:
        raise ValueError("train_and_evaluate: the evaluator task needs TrainSpec(max_steps=...) to know when the "
                         "training ends; set it")
    time.sleep(max(0, eval_spec.start_delay_secs))
    evaluator = _Evaluator(estimator, eval_spec)
    for path in tf.compat.v1.train.checkpoints_iterator(estimator.model_dir, min_interval_secs=eval_spec.throttle_secs,
                                                        timeout=timeout_secs):
        step = int(tf.train.load_variable(path, "global_step"))
        evaluator.evaluate(path, final=step >= train_spec.max_steps)
        if step >= train_spec.max_steps:
            return
    raise ClusterError(f"evaluator: no new checkpoint in {estimator.model_dir} for {timeout_secs:.0f}s; is the "
                       "chief running?")
