"""``train_and_evaluate`` with ``TrainSpec`` / ``EvalSpec`` and the exporters, as Estimator ran them in
one process: training, an evaluation after a checkpoint is saved once ``throttle_secs`` have passed
since the last one, a final evaluation of the last checkpoint, and each exporter after each
evaluation."""

import logging
import os
import shutil
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import tensorflow as tf

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


class Exporter:
    """Exports after an evaluation: ``export(estimator, export_path, checkpoint_path, eval_result,
    is_the_final_export)`` returns the export dir (bytes) or None."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable, exports_to_keep: Optional[int] = 5):
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError("`exports_to_keep`, if provided, must be a positive number. Got %s" % exports_to_keep)
        self._name, self._serving, self._keep = name, serving_input_receiver_fn, exports_to_keep

    @property
    def name(self) -> str:
        return self._name

    def _export(self, estimator, export_path: str, checkpoint_path: str) -> bytes:
        exported = estimator.export_saved_model(export_path, self._serving, checkpoint_path=checkpoint_path)
        self._collect(export_path)
        return exported

    def _collect(self, export_path: str) -> None:
        if self._keep is None:
            return
        stamps = sorted(int(n) for n in os.listdir(export_path) if n.isdigit())
        for stamp in stamps[:-self._keep]:
            shutil.rmtree(os.path.join(export_path, str(stamp)), ignore_errors=True)


class LatestExporter(Exporter):
    """Exports after every evaluation, keeping the newest ``exports_to_keep``."""

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        return self._export(estimator, export_path, checkpoint_path)


class FinalExporter(Exporter):
    """Exports once, after the final evaluation."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable):
        super().__init__(name, serving_input_receiver_fn, exports_to_keep=None)

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        return self._export(estimator, export_path, checkpoint_path) if is_the_final_export else None


def _loss_smaller(best_eval_result: Dict, current_eval_result: Dict) -> bool:
    for result in (best_eval_result, current_eval_result):
        if not result or "loss" not in result:
            raise ValueError("best_eval_result and current_eval_result cannot be empty or no loss is found in it.")
    return best_eval_result["loss"] > current_eval_result["loss"]


class BestExporter(Exporter):
    """Exports when an evaluation is better than every earlier one (``compare_fn(best, current)``,
    default: a smaller loss), keeping the newest ``exports_to_keep``."""

    def __init__(self, name: str = "best_exporter", serving_input_receiver_fn: Callable = None,
                 event_file_pattern: str = "eval/*.tfevents.*", compare_fn: Callable = _loss_smaller,
                 assets_extra=None, as_text: bool = False, exports_to_keep: int = 5):
        if serving_input_receiver_fn is None:
            raise ValueError("BestExporter needs a serving_input_receiver_fn")
        if assets_extra or as_text:
            raise ValueError("BestExporter: assets_extra and as_text are not supported; leave them unset")
        super().__init__(name, serving_input_receiver_fn, exports_to_keep)
        self._compare, self._best = compare_fn, None

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if self._best is None or self._compare(best_eval_result=self._best, current_eval_result=eval_result):
            self._best = dict(eval_result)
            return self._export(estimator, export_path, checkpoint_path)
        return None


class _Evaluator:
    """Evaluations of the training run's checkpoints, and the exporters after each."""

    def __init__(self, estimator, spec: EvalSpec):
        self._estimator, self._spec = estimator, spec
        self.last: Tuple[Optional[Dict], List] = (None, [])
        self._evaluated_step, self._at = None, time.time()  # the first evaluation waits for throttle_secs

    def due(self) -> bool:
        return time.time() - self._at >= self._spec.throttle_secs

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
    """Evaluates the checkpoint just saved, when ``throttle_secs`` have passed since the last evaluation."""

    def __init__(self, evaluator: _Evaluator, model_dir: str):
        self._evaluator, self._model_dir = evaluator, model_dir

    def after_save(self, session, global_step_value):
        if global_step_value and self._evaluator.due() and not signal_received():
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
    listener = _EvaluateAfterSave(evaluator, estimator.model_dir)
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


# --- early stopping (tf.estimator.experimental) -------------------------------------------------------


def read_eval_metrics(eval_dir: str) -> Dict[int, Dict[str, float]]:
    """The evaluations written in ``eval_dir``: global step -> {metric: value}, from its event files."""
    import glob

    found: Dict[int, Dict[str, float]] = {}
    for path in sorted(glob.glob(os.path.join(eval_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            if event.HasField("summary"):
                found.setdefault(int(event.step), {}).update(
                    {v.tag: float(v.simple_value) for v in event.summary.value if v.HasField("simple_value")})
    return found


class _StopOnEvalHook(tf.compat.v1.train.SessionRunHook):
    """Stops training when ``should_stop(evaluations)`` says so, checked every ``run_every_steps`` steps
    (or ``run_every_secs`` seconds) from the evaluations in ``eval_dir``."""

    def __init__(self, eval_dir: str, should_stop: Callable, run_every_secs=60, run_every_steps=None):
        self._dir, self._should_stop = eval_dir, should_stop
        self._timer = tf.compat.v1.train.SecondOrStepTimer(every_secs=None if run_every_steps else run_every_secs,
                                                           every_steps=run_every_steps)
        self._step = None

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        if self._timer.should_trigger_for_step(step):
            self._timer.update_last_triggered_step(step)
            if self._should_stop(read_eval_metrics(self._dir)):
                log.info("early stopping at step %d: the evaluations in %s ask for it", step, self._dir)
                run_context.request_stop()


def _stop_if(estimator, metric_name: str, better: Callable, max_steps_without: int, eval_dir, min_steps: int,
             run_every_secs, run_every_steps):
    eval_dir = eval_dir or os.path.join(estimator.model_dir, "eval")

    def should_stop(evals: Dict[int, Dict[str, float]]) -> bool:
        best_step, best = None, None
        for step in sorted(evals):
            value = evals[step].get(metric_name)
            if value is None:
                continue
            if best is None or better(value, best):
                best_step, best = step, value
            if step >= min_steps and best_step is not None and step - best_step >= max_steps_without:
                return True
        return False

    return _StopOnEvalHook(eval_dir, should_stop, run_every_secs, run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    return _stop_if(estimator, metric_name, lambda v, best: v < best, max_steps_without_decrease, eval_dir, min_steps,
                    run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    return _stop_if(estimator, metric_name, lambda v, best: v > best, max_steps_without_increase, eval_dir, min_steps,
                    run_every_secs, run_every_steps)


def _stop_at_threshold(estimator, metric_name, reached: Callable, eval_dir, min_steps, run_every_secs, run_every_steps):
    eval_dir = eval_dir or os.path.join(estimator.model_dir, "eval")

    def should_stop(evals):
        return any(step >= min_steps and metric_name in v and reached(v[metric_name]) for step, v in evals.items())

    return _StopOnEvalHook(eval_dir, should_stop, run_every_secs, run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                        run_every_steps=None):
    return _stop_at_threshold(estimator, metric_name, lambda v: v > threshold, eval_dir, min_steps, run_every_secs,
                              run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                       run_every_steps=None):
    return _stop_at_threshold(estimator, metric_name, lambda v: v < threshold, eval_dir, min_steps, run_every_secs,
                              run_every_steps)
