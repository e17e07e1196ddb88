"""Early stopping, one mechanism under both doors: a rule over the evaluations so far (step -> metrics)
says why training should stop, and a hook stops it at its next step.

The evaluations come one of two ways: the runner's evaluation hands each to ``on_eval``
(:class:`EarlyStoppingHook`, ``hook=early_stopping``, patience counted in evaluations), or they are
read from an eval dir's event files every so many steps or seconds (:class:`EvalDirStoppingHook`,
under ``tf.estimator.experimental.stop_if_*``, patience counted in steps, as Estimator's were).
:class:`Best` also keeps the best checkpoint's score (``trainer.hooks.library``).
"""

import glob
import logging
import os
from typing import Callable, Dict, Optional

import tensorflow as tf

from trainer.errors import ConfigError

tf1 = tf.compat.v1
log = logging.getLogger("trainer")

Evaluations = Dict[int, Dict[str, float]]  # global step -> {metric: value}
Rule = Callable[[Evaluations], Optional[str]]  # why training should stop, or None


class Best:
    """The best value of one eval metric so far: ``min`` or ``max``, by at least ``min_delta``."""

    def __init__(self, metric: str, mode: str, min_delta: float = 0.0):
        if mode not in ("min", "max"):
            raise ConfigError(f"mode={mode}: use min or max")
        self.metric, self.mode, self.min_delta = metric, mode, float(min_delta)
        self.best: Optional[float] = None

    def improved(self, values: Dict[str, float]) -> bool:
        """Whether ``values`` improve on the best so far (then it is the best).

        Raises:
          ConfigError: ``values`` have no such metric.
        """
        if self.metric not in values:
            raise ConfigError(f"metric={self.metric}: no such eval metric; use one of {sorted(values)}")
        value = values[self.metric]
        better = self.best is None or (
            value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta)
        if better:
            self.best = value
        return better


def no_improvement_for_evaluations(metric: str, mode: str, patience: int, min_delta: float = 0.0) -> Rule:
    """Stop once ``patience`` evaluations in a row have not improved ``metric``."""
    if patience < 1:
        raise ConfigError(f"patience={patience}: must be >= 1")
    Best(metric, mode)  # the mode is checked now, not at the first evaluation

    def rule(evaluations: Evaluations) -> Optional[str]:
        best, bad = Best(metric, mode, min_delta), 0
        for step in sorted(evaluations):
            bad = 0 if best.improved(evaluations[step]) else bad + 1
            if bad >= patience:
                return f"eval {metric} has not improved on {best.best:.4f} for {patience} evaluations"
        return None

    return rule


def _value(metric: str, step: int, metrics: Dict[str, float]) -> float:
    if metric not in metrics:
        raise ValueError(f"metric_name={metric!r}: the evaluation at step {step} has no such metric; use one of "
                         f"{sorted(metrics)}")
    return metrics[metric]


def no_improvement_for_steps(metric: str, better: Callable[[float, float], bool], max_steps_without: int,
                             min_steps: int = 0) -> Rule:
    """Stop once an evaluation is ``max_steps_without`` steps past the best value of ``metric``
    (``better(value, best)``); evaluations before ``min_steps`` do not count, as under Estimator.

    The rule raises ValueError for an evaluation without ``metric``."""

    def rule(evaluations: Evaluations) -> Optional[str]:
        best_step, best = None, None
        for step in sorted(evaluations):
            if step < min_steps:
                continue
            value = _value(metric, step, evaluations[step])
            if best is None or better(value, best):
                best_step, best = step, value
            if step - best_step >= max_steps_without:
                return f"eval {metric} has not improved on {best:.4f} (step {best_step}) for {step - best_step} steps"
        return None

    return rule


def threshold_reached(metric: str, reached: Callable[[float], bool], min_steps: int = 0) -> Rule:
    """Stop once an evaluation at ``min_steps`` or later has a value of ``metric`` that ``reached`` accepts.

    The rule raises ValueError for an evaluation without ``metric``."""

    def rule(evaluations: Evaluations) -> Optional[str]:
        for step in sorted(evaluations):
            if step >= min_steps and reached(_value(metric, step, evaluations[step])):
                return f"eval {metric} is {evaluations[step][metric]:.4f} at step {step}, past its threshold"
        return None

    return rule


def read_eval_metrics(eval_dir: str) -> Evaluations:
    """The evaluations written in ``eval_dir``: global step -> {metric: value}, from its event files."""
    found: Evaluations = {}
    for path in sorted(glob.glob(os.path.join(eval_dir, "events.out.tfevents.*"))):
        for event in tf1.train.summary_iterator(path):
            if event.HasField("summary"):
                found.setdefault(int(event.step), {}).update(
                    {v.tag: float(v.simple_value) for v in event.summary.value if v.HasField("simple_value")})
    return found


class _StoppingHook(tf1.train.SessionRunHook):
    """Requests the stop at the next step once ``rule`` has given a reason (logged once)."""

    def __init__(self, rule: Rule):
        self._rule = rule
        self._why: Optional[str] = None

    def _check(self, step: int, evaluations: Evaluations) -> None:
        if self._why is None:
            self._why = self._rule(evaluations)
            if self._why is not None:
                log.info("early stopping at step %d: %s", step, self._why)

    def after_run(self, run_context, run_values):
        if self._why is not None:
            run_context.request_stop()


class EarlyStoppingHook(_StoppingHook):
    """Stops training when eval ``metric`` has not improved for ``patience`` evaluations.

    Args:
      metric: an eval metric (``accuracy``, ``loss``, or any of the model's eval_metric_ops).
      mode: ``min`` or ``max``.
      patience: evaluations without improvement before stopping.
      min_delta: the smallest change that counts as an improvement.
    """

    def __init__(self, metric: str = "loss", mode: str = "min", patience: int = 3, min_delta: float = 0.0):
        super().__init__(no_improvement_for_evaluations(metric, mode, patience, min_delta))
        self._evaluations: Evaluations = {}

    def on_eval(self, session, step: int, values: Dict[str, float]) -> None:
        self._evaluations[step] = dict(values)
        self._check(step, self._evaluations)


class EvalDirStoppingHook(_StoppingHook):
    """Stops training when ``rule`` says so over the evaluations in ``eval_dir``, read every
    ``run_every_steps`` steps (else every ``run_every_secs`` seconds)."""

    def __init__(self, eval_dir: str, rule: Rule, run_every_secs=60, run_every_steps=None):
        super().__init__(rule)
        self._dir = eval_dir
        self._timer = tf1.train.SecondOrStepTimer(every_secs=None if run_every_steps else run_every_secs,
                                                  every_steps=run_every_steps)

    def begin(self):
        self._global_step = tf1.train.get_global_step()

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        if self._timer.should_trigger_for_step(step):
            self._timer.update_last_triggered_step(step)
            self._check(step, read_eval_metrics(self._dir))
        super().after_run(run_context, run_values)
