"""Evaluation: one pass over the whole eval input (:func:`evaluate_once`), run in the training graph
(:class:`SharedEvaluation`) or in a graph of its own loaded with the training session's current
weights (:class:`SeparateEvaluation`), and the EvalHook that runs one every ``eval.every_steps``
and at the end of training.

``mode=evaluate`` and a cluster's evaluator run the same pass on a restored checkpoint. An
evaluation that reads no example is an error, never a metric of 0.
"""

import logging
import time
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from trainer.errors import ConfigError, TrainingError
from trainer.hooks.cadence import StepCadence
from trainer.records import MetricsLog, resolve_objective

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


class EvaluationStopped(Exception):
    """A signal came during an evaluation: it ends without a result."""


def evaluate_once(session, evaluation, run_update: Optional[Callable] = None, steps: Optional[int] = None,
                  stopped: Optional[Callable[[], bool]] = None) -> Tuple[Dict[str, float], int]:
    """Reset the metrics, start the eval input, run the metric updates to the end of the input (or
    ``steps`` batches, ``eval.steps``), and read the metrics. ``evaluation`` is an ``EvalGraph``;
    ``run_update`` runs each update (default ``session.run``; a hooked session's ``run`` to drive
    evaluation hooks); ``stopped()`` is asked before each batch (a signal came).

    Returns:
      (metric values, examples read).

    Raises:
      EvaluationStopped: ``stopped()`` said so.
    """
    run_update = run_update or session.run
    session.run(evaluation.reset_op)
    if evaluation.input.initializer is not None:
        session.run(evaluation.input.initializer, feed_dict=evaluation.input.feeds(0))
    batches = 0
    while steps is None or batches < steps:
        if stopped is not None and stopped():
            raise EvaluationStopped()
        try:
            run_update(evaluation.update_op)
        except tf.errors.OutOfRangeError:
            break
        batches += 1
    values = {k: float(v) for k, v in session.run(evaluation.metrics).items()}
    return values, int(session.run(evaluation.examples))


def check_examples(examples: int, source: str) -> None:
    """Raises TrainingError when an evaluation read no example: its metrics would be made up."""
    if examples <= 0:
        raise TrainingError(
            f"the evaluation read no example from {source}: its metrics would be computed from nothing. "
            "The eval input must yield at least one batch each time it is built (a finite Dataset, or "
            "tensors from a one-shot iterator or queues)")


def objective_metric(objective: str, metric_names) -> str:
    """The eval metric ``eval.objective`` names among ``metric_names`` (a stand-in for the default
    one is logged as a warning).

    Raises:
      ConfigError: ``objective`` names no metric of the model.
    """
    try:
        name, warning = resolve_objective(objective, metric_names)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if warning:
        log.warning(warning)
    return name


def format_metrics(values: Dict[str, float]) -> str:
    return " ".join(f"{k} {v:.4f}" for k, v in sorted(values.items()))


class SharedEvaluation:
    """Evaluation in the training graph and session: reads the very variables training updates."""

    def __init__(self, evaluation):
        self._evaluation = evaluation

    def run(self, session, steps: Optional[int] = None, stopped=None) -> Tuple[Dict[str, float], int]:
        return evaluate_once(session, self._evaluation, steps=steps, stopped=stopped)

    def metric_names(self) -> List[str]:
        return sorted(self._evaluation.metrics)


class SeparateEvaluation:
    """Evaluation in a graph of its own, as Estimator built one: the eval input and the model_fn in
    EVAL mode, its variables loaded with the training session's current values (matched by name),
    its evaluation_hooks run. The graph is rebuilt for every evaluation when its input cannot be
    read again (an input_fn's tensors), else built once.
    """

    def __init__(self, build: Callable, train_variables: Dict[str, object], config):
        self._build = build  # () -> EvalGraph
        self._train = dict(train_variables)  # eval variable name -> what the training session reads for it
        self._config = config
        self._cached = None  # (EvalGraph, Scaffold) while the graph can be used again
        self._weights = {}

    def _graph(self):
        if self._cached is not None:
            return self._cached
        evaluation = self._build()
        with evaluation.graph.as_default():
            variables = {v.op.name: v for v in tf1.global_variables()}
            missing = sorted(set(variables) - set(self._train))
            if missing:
                raise ConfigError(f"model.fn: the EVAL graph has variables the TRAIN graph lacks {missing[:5]}; "
                                  "the model_fn must create the same variables in both modes")

            def load(scaffold, session):
                for name, variable in variables.items():
                    variable.load(self._weights[name], session)

            scaffold = tf1.train.Scaffold(init_fn=load, saver=evaluation.saver)
            scaffold.finalize()
        found = (evaluation, scaffold, sorted(variables))
        if evaluation.input.initializer is not None:
            self._cached = found
        return found

    def metric_names(self) -> List[str]:
        """The metrics' names (builds the evaluation graph, which also checks its variables)."""
        return sorted(self._graph()[0].metrics)

    def run(self, session, steps: Optional[int] = None, stopped=None) -> Tuple[Dict[str, float], int]:
        evaluation, scaffold, names = self._graph()
        self._weights = session.run({name: self._train[name] for name in names})
        with evaluation.graph.as_default():
            creator = tf1.train.ChiefSessionCreator(scaffold=scaffold, config=self._config)
            with tf1.train.MonitoredSession(session_creator=creator,
                                            hooks=list(evaluation.spec.evaluation_hooks)) as sess:
                return sess.run_step_fn(lambda step_context: evaluate_once(
                    step_context.session, evaluation, run_update=step_context.run_with_hooks, steps=steps,
                    stopped=stopped))


class EvalHook(tf1.train.SessionRunHook):
    """Evaluates every ``every_steps`` and at the end of training, with ``evaluation`` (a
    SharedEvaluation or SeparateEvaluation).

    Results go to ``metrics`` (a MetricsLog), a log line, TensorBoard summaries in ``summary_dir``,
    and every listener's ``on_eval(session, step, values)`` (early stopping, the best checkpoint).
    """

    def __init__(self, graph, evaluation, every_steps: Optional[int], metrics: MetricsLog, summary_dir: Optional[str],
                 listeners: List = (), skip_final: Optional[Callable[[], bool]] = None, source: str = "the eval input",
                 steps: Optional[int] = None):
        self.listeners = list(listeners)
        self._skip_final = skip_final  # true once a signal came: the final evaluation is skipped, a running one ends
        self._steps = steps  # eval.steps: batches per evaluation (None: the whole eval input)
        self._graph = graph
        self._evaluation = evaluation
        self._cadence = StepCadence(every_steps)
        self._metrics = metrics
        self._summary_dir = summary_dir
        self._source = source
        self._last_eval_step = None
        self._step = None

    def begin(self):
        self._writer = tf1.summary.FileWriterCache.get(self._summary_dir) if self._summary_dir else None

    def after_create_session(self, session, coord):
        self._step = int(session.run(self._graph.global_step))
        self._cadence.start(self._step)

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._graph.step_after)

    def after_run(self, run_context, run_values):
        self._step = int(run_values.results)
        if self._cadence.due(self._step) and self._step != self._last_eval_step:
            self.evaluate(run_context.session)

    def end(self, session):
        if self._skip_final is not None and self._skip_final():
            return
        if self._step is None:
            return
        # The global step now: in a cluster, another worker's last update can land after this
        # task's last step, and the final checkpoint is written at the step it reaches.
        self._step = int(session.run(self._graph.global_step))
        if self._step != self._last_eval_step:
            self.evaluate(session)

    def evaluate(self, session) -> Optional[Dict[str, float]]:
        """One evaluation, recorded; None when a signal ended it (the run then stops and saves)."""
        start = time.time()
        step = int(session.run(self._graph.global_step))
        try:
            values, examples = self._evaluation.run(session, self._steps, self._skip_final)
        except EvaluationStopped:
            log.warning("the evaluation at step %d was stopped by the signal; it is not recorded", step)
            return None
        check_examples(examples, f"{self._source} at step {step}")
        self._last_eval_step = self._step = step
        self._metrics.record("eval", step, dict(values, examples=examples))
        log.info("eval at step %d: %s (%d examples, %.1fs)", step, format_metrics(values), examples, time.time() - start)
        if self._writer is not None:
            summary = tf1.Summary(value=[tf1.Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
            self._writer.add_summary(summary, step)
            self._writer.flush()
        for listener in self.listeners:
            listener.on_eval(session, step, values)
        return values
