"""Evaluation: one pass over the eval input (:func:`evaluate_once`), and the EvalHook that runs it
every ``eval.every_steps`` and at the end of training, in the training session.

``mode=evaluate`` and a cluster's evaluator run the same pass on a restored checkpoint.
"""

import logging
import time
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from trainer.records import MetricsLog

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def evaluate_once(session, graph, run_update: Optional[Callable] = None) -> Dict[str, float]:
    """Reset the metrics, start the eval input, run the metric updates to the end of the input, and
    read the metrics. ``graph`` has the handles of a TrainGraph (``eval_*``); ``run_update`` runs
    each update (default ``session.run``; a hooked session's ``run`` to drive evaluation hooks)."""
    run_update = run_update or session.run
    session.run(graph.eval_reset_op)
    if graph.eval_input.initializer is not None:
        session.run(graph.eval_input.initializer, feed_dict=graph.eval_input.feeds(0))
    while True:
        try:
            run_update(graph.eval_update_op)
        except tf.errors.OutOfRangeError:
            break
    return {k: float(v) for k, v in session.run(graph.eval_metrics).items()}


def format_metrics(values: Dict[str, float]) -> str:
    return " ".join(f"{k} {v:.4f}" for k, v in sorted(values.items()))


class EvalHook(tf1.train.SessionRunHook):
    """Evaluates on the test split every ``every_steps`` and at the end, in the training session.

    Results go to ``metrics`` (a MetricsLog), a log line, TensorBoard summaries in ``summary_dir``,
    and every listener's ``on_eval(session, step, values)`` (early stopping, the best checkpoint).
    """

    def __init__(self, graph, every_steps: Optional[int], metrics: MetricsLog, summary_dir: Optional[str],
                 listeners: List = (), skip_final: Optional[Callable[[], bool]] = None):
        self.listeners = list(listeners)
        self._skip_final = skip_final  # true when the final evaluation should be skipped (preemption)
        self._graph = graph
        self._every = every_steps or 0
        self._metrics = metrics
        self._summary_dir = summary_dir
        self._last_eval_step = None
        self._step = None

    def begin(self):
        self._writer = tf1.summary.FileWriterCache.get(self._summary_dir) if self._summary_dir else None

    def after_create_session(self, session, coord):
        self._step = int(session.run(self._graph.global_step))

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._graph.step_before)

    def after_run(self, run_context, run_values):
        self._step = int(run_values.results) + 1
        if self._every and self._step % self._every == 0 and self._step != self._last_eval_step:
            self.evaluate(run_context.session)

    def end(self, session):
        if self._skip_final is not None and self._skip_final():
            return
        if self._step is not None and self._step != self._last_eval_step:
            self.evaluate(session)

    def evaluate(self, session) -> Dict[str, float]:
        start = time.time()
        values = evaluate_once(session, self._graph)
        step = int(session.run(self._graph.global_step))
        self._last_eval_step = self._step = step
        self._metrics.record("eval", step, values)
        log.info("eval at step %d: %s (%.1fs)", step, format_metrics(values), time.time() - start)
        if self._writer is not None:
            summary = tf1.Summary(value=[tf1.Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
            self._writer.add_summary(summary, step)
            self._writer.flush()
        for listener in self.listeners:
            listener.on_eval(session, step, values)
        return values
