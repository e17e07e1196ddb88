"""The runner's own hooks, in every training run: input initialisation, checkpoints, the NaN
guard, metrics, preemption and SyncReplicas' release. Users do not configure these;
``trainer.hooks.assembly`` puts them in order."""

import contextlib
import logging
import os
import signal
import threading
import time
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf

from trainer.compat import SaverHookInternals, cache_file_writer, meta_graph_def
from trainer.errors import NanLossError, TrainingError
from trainer.hooks.cadence import StepCadence
from trainer.model.names import NAMED_TENSOR_PREFIX
from trainer.records import MetricsLog

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


class BroadcastHook(tf1.train.SessionRunHook):
    """``distributed.strategy=collective``: once the session is created, every worker takes the chief's
    values (``broadcast_op``: the chief sends, each other worker receives), before any step."""

    def __init__(self, broadcast_op):
        self._op = broadcast_op

    def after_create_session(self, session, coord):
        started = time.time()
        session.run(self._op)
        log.info("the chief's variables are on every worker (%.1fs)", time.time() - started)


class CollectiveStopHook(tf1.train.SessionRunHook):
    """``distributed.strategy=collective``, in place of :class:`PreemptionHook`: every worker stops after
    the same step, since a worker gone leaves the others waiting in the next all-reduce. A signal to
    any worker (``handler``, its PreemptionHandler) is fed into the next step's all-reduced flag
    (``flags``: ``Collective.stop_flags``), and every worker stops after that step; the chief saves.
    A worker stopped by another's signal records it as its own (preempted, to be resumed)."""

    def __init__(self, handler, flags):
        self._handler = handler
        self._requested, self._anywhere = flags

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._anywhere, feed_dict={self._requested: self._handler.signum is not None})

    def after_run(self, run_context, run_values):
        if not run_values.results:
            return
        if self._handler.signum is None:
            log.warning("another worker was stopped by a signal: every worker stops after this step")
            self._handler.signum = signal.SIGTERM
        run_context.request_stop()
        self._handler.acknowledge()


class InputInitHook(tf1.train.SessionRunHook):
    """Initialises the training iterator after the session is created (and restored).

    The iterator skips the batches of the restored global step, so a resumed run
    continues the shuffled stream where the checkpointed run was.
    """

    def __init__(self, pipeline, global_step):
        self._pipeline, self._global_step = pipeline, global_step
        self._handed_over = False

    def hand_over(self) -> Callable:
        """Leave the initialisation to the hook that calls what this returns in its own
        ``after_create_session`` (the chief's CheckpointSaverHook, while it writes the first checkpoint)."""
        self._handed_over = True
        return self.initialize

    def initialize(self, session) -> None:
        if self._pipeline.initializer is None:
            return
        step = int(session.run(self._global_step))
        session.run(self._pipeline.initializer, feed_dict=self._pipeline.feeds(step))

    def after_create_session(self, session, coord):
        if not self._handed_over:
            self.initialize(session)


class CheckpointSaverHook(tf1.train.CheckpointSaverHook):
    """TensorFlow's CheckpointSaverHook, with one change at every step and three at the start of a session.

    Every step: given ``step_after`` (the global step read after the train op, which the other hooks
    fetch anyway), it fetches that in the step's own run, and reads the step again only when a save is
    due. TensorFlow's hook fetches the step read before the train op, and so runs the session a second
    time after every step to read the real one (0.27 ms a step here, a fifth of a small linear model's).

    At the start:

    - the graph files are written by a thread while training starts: ``graph.pbtxt`` and the events
      file's graph and meta graph are Python serialisation (0.3-0.5 s on a 2-core CPU) that no step
      waits for;
    - the starting step's checkpoint is written (before the first step) only when the dir does not
      already end with it: TensorFlow's hook wrote the checkpoint a resumed session had just restored
      over itself, a full write (seconds for a large model) that a kill could leave torn;
    - ``alongside(session)`` (the training input's initialisation, ``InputInitHook.hand_over``) runs
      on a thread while that checkpoint is written: each takes 0.1-0.2 s before the first step, and
      both only read the session's state. Both are done, and an error of either raised, before this
      method returns, as if one ran after the other.
    """

    _graph_files = None

    def __init__(self, *args, alongside: Optional[Callable] = None, step_after=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._alongside = alongside
        self._internals = SaverHookInternals(self)
        self._step_after = step_after
        if step_after is not None:
            self._internals.steps_ahead(0)  # the fetched step is the real one: no run ahead of a save's

    def before_run(self, run_context):
        if self._step_after is None:
            return super().before_run(run_context)
        return tf1.train.SessionRunArgs(self._step_after)

    def after_create_session(self, session, coord):
        # The variable, as the other hooks read it: TensorFlow's ``global_step + 0`` here would be
        # one more executor for the session to build (0.02-0.03 s) before the first step.
        global_step = int(session.run(tf1.train.get_global_step()))
        saver = self._internals.saver()
        self._graph_files = threading.Thread(target=self._write_graph_files, name="graph-files",
                                             args=(tf1.get_default_graph(), saver.saver_def if saver else None))
        self._graph_files.start()
        with _alongside(self._alongside, session):
            if not self._newest_is(global_step):
                self._internals.save(session, global_step)
        self._internals.mark_triggered(global_step)

    def _newest_is(self, step: int) -> bool:
        """The dir's newest checkpoint (its state file's) is this run's own of ``step``."""
        newest = tf.train.latest_checkpoint(self._internals.checkpoint_dir)
        return newest is not None and os.path.basename(newest) == f"{os.path.basename(self._internals.save_path)}-{step}"

    def _write_graph_files(self, graph, saver_def) -> None:
        try:
            with graph.as_default():  # the default graph is per thread
                graph_def = graph.as_graph_def(add_shapes=True)
                if self._internals.writes_graph_def:
                    tf1.train.write_graph(graph_def, self._internals.checkpoint_dir, "graph.pbtxt")
                writer = self._internals.summary_writer
                writer.add_graph(graph)
                writer.add_meta_graph(meta_graph_def(graph_def, saver_def))
        except Exception as e:  # the run goes on without them; TensorBoard then shows no graph
            log.warning("could not write the graph files to %s: %s", self._internals.checkpoint_dir, e)

    def wait_for_graph_files(self) -> None:
        if self._graph_files is not None:
            self._graph_files.join()

    def end(self, session):
        self.wait_for_graph_files()
        super().end(session)


@contextlib.contextmanager
def _alongside(work: Optional[Callable], session):
    """``work(session)`` on a thread while the block runs; waited for, and its error raised, at the
    end (the block's own error first)."""
    if work is None:
        yield
        return
    failed = []

    def run():
        try:
            work(session)
        except BaseException as e:  # raised in the thread that waits
            failed.append(e)

    thread = threading.Thread(target=run, name="alongside-first-save")
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failed:
        raise failed[0]


class ReleaseSyncWorkersHook(tf1.train.SessionRunHook):
    """SyncReplicasOptimizer, on the chief: at the end, hand every worker a token, so that none stays
    blocked waiting for an update that will not come (TensorFlow leaves them hanging)."""

    def __init__(self, release_op):
        self._release_op = release_op

    def end(self, session):
        session.run(self._release_op)


class MetricsHook(tf1.train.SessionRunHook):
    """Records step, loss and steps/s every ``every_steps`` and at the last step into a MetricsLog.

    The loss is fetched every step (one scalar) so that the record at the end holds the
    loss of the last step, also when another hook stopped training early.
    """

    def __init__(self, loss, global_step, step_after, every_steps: int, metrics: MetricsLog):
        self._fetches = {"step": step_after, "loss": loss}
        self._global_step = global_step
        self._cadence = StepCadence(max(1, every_steps))
        self._metrics = metrics
        self._last = None  # (step, loss) of the latest run
        self._recorded_step = None

    def after_create_session(self, session, coord):
        self._mark = (time.time(), int(session.run(self._global_step)))
        self._cadence.start(self._mark[1])

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        step = int(run_values.results["step"])
        self._last = (step, float(run_values.results["loss"]))
        if self._cadence.due(step):
            self._record()

    def end(self, session):
        if self._last is not None and self._last[0] != self._recorded_step:
            self._record()

    def _record(self):
        step, loss = self._last
        now = time.time()
        rate = (step - self._mark[1]) / max(now - self._mark[0], 1e-9)
        self._mark = (now, step)
        self._recorded_step = step
        self._metrics.record("train", step, {"loss": loss, "steps_per_sec": rate})


class NanGuardHook(tf1.train.SessionRunHook):
    """Acts on a NaN or Inf step (loss, or the gradients' norm for the runner's train op) before any
    other hook sees it (it runs first).

    ``stop`` raises NanLossError naming the step, so no checkpoint of that step is written; the
    message lists the checkpoints kept and how large the latest one's weights are, since a
    diverging run can save finite but huge weights just before the NaN. ``skip_step`` logs the
    skipped step (the guarded train_op left the weights and the model's state unchanged) and
    fails after ``max_skipped`` skipped steps in a row, or at the end when more steps of the run
    were skipped than applied.
    """

    def __init__(self, step_is_finite, step_after, on_nan: str, checkpoint_dir: str, max_skipped: int = 10):
        self._fetches = {"finite": step_is_finite, "step": step_after}
        self._on_nan = on_nan
        self._dir = checkpoint_dir
        self._max_skipped = max(1, int(max_skipped))
        self.skipped = 0
        self._in_a_row = 0
        self._applied = 0

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        if run_values.results["finite"]:
            self._applied += 1
            self._in_a_row = 0
            return
        step = int(run_values.results["step"])
        if self._on_nan == "skip_step":
            self.skipped += 1
            self._in_a_row += 1
            log.warning("step %d: the loss or the gradients are NaN or Inf; its update was skipped (%d skipped so far)",
                        step, self.skipped)
            if self._in_a_row >= self._max_skipped:
                raise NanLossError(
                    f"train.on_nan=skip_step: {self._in_a_row} steps in a row up to step {step} were NaN or Inf "
                    f"(train.max_skipped_steps={self._max_skipped}); the weights were left as they were; {self._kept()}; "
                    "check the input's features for NaN or Inf, or lower the learning rate")
            return
        raise NanLossError(
            f"train.on_nan=stop: the loss or the gradients are NaN or Inf at step {step}; no checkpoint of it was "
            f"written; {self._kept()}; a NaN or Inf in the input's features or too high a learning rate does this: "
            "check the input, lower the learning rate, or set train.on_nan=skip_step")

    def end(self, session):
        if self.skipped and not self._applied:
            raise NanLossError(
                f"train.on_nan=skip_step: every step of this run ({self.skipped}) was NaN or Inf and skipped; nothing "
                f"was learned; {self._kept()}; check the input's features for NaN or Inf, or lower the learning rate")
        if self.skipped > self._applied:
            # Skipping is for the odd bad batch; a run that skipped most of its steps has no result.
            raise NanLossError(
                f"train.on_nan=skip_step: {self.skipped} of this run's {self.skipped + self._applied} steps were NaN or "
                f"Inf and skipped, more than were applied; not a result; {self._kept()}; lower "
                "optimizer.learning_rate or check the input")

    def _kept(self) -> str:
        """The checkpoints kept, the latest one's largest weight: what the user restarts from."""
        state = tf1.train.get_checkpoint_state(self._dir)
        paths = list(state.all_model_checkpoint_paths) if state else []
        if not paths:
            return "no checkpoint was saved yet"
        names = ", ".join(os.path.basename(p) for p in paths)
        try:
            reader = tf.train.load_checkpoint(paths[-1])
            largest = max((float(np.max(np.abs(value))) for name in reader.get_variable_to_shape_map()
                           if (value := reader.get_tensor(name)).dtype.kind == "f" and value.size), default=0.0)
        except Exception:  # an unreadable checkpoint is reported by the next run
            return f"checkpoints kept: {names}"
        earlier = (f" (checkpoint.restore_step={paths[-2].rsplit('-', 1)[1]} restarts from the one before)"
                   if len(paths) > 1 else "")
        if not np.isfinite(largest):
            verdict = f"holds NaN or Inf weights: restart from an earlier one{earlier}"
        elif largest > 1e6:
            verdict = (f"holds weights as large as {largest:.3g}: the run may have diverged before it; an earlier one "
                       f"is safer{earlier}")
        else:
            verdict = f"has finite weights (largest {largest:.3g})"
        return f"checkpoints kept: {names}; the latest, {os.path.basename(paths[-1])}, {verdict}"


def open_event_writers(graphs: Dict[str, Optional[object]]) -> None:
    """Put an event writer for each logdir of ``graphs`` in TensorFlow's ``FileWriterCache``, whose
    file name no other writer has, with the graph given for it (None: none); TensorFlow's hooks, the
    runner's and users' find it there by dir.

    TensorFlow names an events file after the second it opens and the host alone
    (``events.out.tfevents.<second>.<host>``): a writer opened in the same dir within the same second
    as an earlier one (a run resumed right after a short one, in one process or two) truncates that
    file, and every event the earlier writer wrote is lost. These files end in the nanoseconds of that
    second and the process id, so names stay distinct and sort in the order they were opened (the
    order TensorBoard reads them in).
    """
    for logdir, graph in graphs.items():
        cache_file_writer(logdir, lambda: tf1.summary.FileWriter(
            logdir, graph=graph, filename_suffix=f".{time.time_ns() % 1_000_000_000:09d}.{os.getpid()}"))


class TrainingSummaryHook(tf1.train.SessionRunHook):
    """TensorBoard's ``loss`` and ``global_step/sec`` every ``every_steps``, under these fixed tags
    whatever summaries or name scopes the model has (Estimator always wrote both), and beside them
    the training batch's ``accuracy`` for classifiers (fetched only on the steps it is written)."""

    def __init__(self, loss, step_after, every_steps: int, output_dir: str):
        self._fetches = {"step": step_after, "loss": loss}
        self._cadence, self._dir = StepCadence(max(1, int(every_steps))), output_dir
        self._mark, self._accuracy, self._last = None, None, None

    def begin(self):
        self._writer = tf1.summary.FileWriterCache.get(self._dir)
        rate = tf1.get_collection(NAMED_TENSOR_PREFIX + "learning_rate")
        if rate:  # the runner's optimizer (a model's own train op has none to report)
            self._fetches["learning_rate"] = rate[0]
        accuracy = tf1.get_collection(NAMED_TENSOR_PREFIX + "accuracy")
        self._accuracy = accuracy[0] if accuracy else None

    def after_create_session(self, session, coord):
        self._mark, self._last = None, None
        self._cadence = StepCadence(self._cadence.every)

    def before_run(self, run_context):
        if self._accuracy is not None and (self._last is None or self._cadence.would_be_due(self._last + 1)):
            return tf1.train.SessionRunArgs(dict(self._fetches, accuracy=self._accuracy))
        return tf1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        step, now = int(run_values.results["step"]), time.time()
        self._last = step
        if self._mark is None:
            self._mark = (now, step - 1)
        if not self._cadence.due(step):
            return
        values = [tf1.Summary.Value(tag="loss", simple_value=float(run_values.results["loss"]))]
        if "accuracy" in run_values.results:
            values.append(tf1.Summary.Value(tag="accuracy", simple_value=float(run_values.results["accuracy"])))
        if "learning_rate" in run_values.results:
            values.append(tf1.Summary.Value(tag="learning_rate", simple_value=float(run_values.results["learning_rate"])))
        if step > self._mark[1]:
            rate = (step - self._mark[1]) / max(now - self._mark[0], 1e-9)
            values.append(tf1.Summary.Value(tag="global_step/sec", simple_value=rate))
        self._writer.add_summary(tf1.Summary(value=values), step)
        self._mark = (now, step)

    def end(self, session):
        self._writer.flush()


class StopAtLastStepHook(tf1.train.SessionRunHook):
    """Stops once the global step reaches ``last_step`` (``train.max_steps``), reading the step after
    each train op: exact also when a model's train op moves the step by more than one (TF's
    StopAtStepHook assumes steps of one and overshoots)."""

    def __init__(self, step_after, last_step: int):
        self._step_after, self._last_step = step_after, int(last_step)

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._step_after)

    def after_run(self, run_context, run_values):
        if int(run_values.results) >= self._last_step:
            run_context.request_stop()


class StalledStepHook(tf1.train.SessionRunHook):
    """Fails when the global step stays the same for ``limit`` steps in a row: a train_op that does
    not increment it would otherwise loop for ever (``train.stalled_steps_limit``)."""

    def __init__(self, step_after, limit: int):
        self._global_step, self._limit = step_after, int(limit)
        self._last, self._same = None, 0

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        self._same = self._same + 1 if step == self._last else 0
        self._last = step
        if self._same >= self._limit:
            raise TrainingError(
                f"the global step has stayed at {step} for {self._limit} steps: the model's train_op does not "
                "increment it; pass global_step=tf.train.get_global_step() to optimizer.minimize or "
                "apply_gradients (or return no train_op), or raise train.stalled_steps_limit")


class PreemptionHook(tf1.train.SessionRunHook):
    """Requests a stop once ``handler`` (a ``trainer.training.preemption.PreemptionHandler``) got a signal."""

    def __init__(self, handler):
        self._handler = handler

    def after_run(self, run_context, run_values):
        if self._handler.signum is not None:
            run_context.request_stop()
            self._handler.acknowledge()  # the step ended: the stop goes through the normal path from here
