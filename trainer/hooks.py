"""The runner's own SessionRunHooks and the factory that builds hooks from config.

Every hook here is an ordinary ``tf.compat.v1.train.SessionRunHook``: both session
backends run them through the same begin / after_create_session / before_run /
after_run / end protocol.
"""

import json
import logging
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

import hydra.utils
import tensorflow as tf
from omegaconf import OmegaConf

from trainer.errors import ConfigError, NanLossError

tf1 = tf.compat.v1
log = logging.getLogger("trainer")

ROLES = ("chief", "all")


class MetricsLog:
    """Training and evaluation records: the last of each, and a JSON-lines file of all."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self.train: Dict[str, float] = {}
        self.eval: Dict[str, float] = {}

    def record(self, kind: str, step: int, values: Dict[str, float]) -> None:
        row = {"kind": kind, "step": int(step), "time": round(time.time(), 3)}
        row.update({k: float(v) for k, v in values.items()})
        if kind == "eval":
            self.eval = dict(row)
        else:
            self.train = dict(row)
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(row) + "\n")


class InputInitHook(tf1.train.SessionRunHook):
    """Initialises the training iterator after the session is created (and restored).

    The iterator skips the batches of the restored global step, so a resumed run
    continues the shuffled stream where the checkpointed run was.
    """

    def __init__(self, pipeline, global_step):
        self._pipeline, self._global_step = pipeline, global_step

    def after_create_session(self, session, coord):
        if self._pipeline.initializer is None:
            return
        step = int(session.run(self._global_step))
        session.run(self._pipeline.initializer, feed_dict=self._pipeline.feeds(step))


class ReleaseSyncWorkersHook(tf1.train.SessionRunHook):
    """SyncReplicasOptimizer, on the chief: at the end, hand every worker a token, so that none stays
    blocked waiting for an update that will not come (TensorFlow leaves them hanging)."""

    def __init__(self, release_op):
        self._release_op = release_op

    def end(self, session):
        session.run(self._release_op)


class EvalHook(tf1.train.SessionRunHook):
    """Evaluates on the test split every ``every_steps`` and at the end, in the training session.

    Results go to ``metrics`` (a MetricsLog), a log line, and TensorBoard summaries in ``summary_dir``.
    """

    def __init__(self, graph, every_steps: Optional[int], metrics: MetricsLog, summary_dir: Optional[str]):
        self.listeners: List = []  # objects with on_eval(session, step, values): early stopping, best export
        self.skip_final = None  # a callable: true when the final evaluation should be skipped (preemption)
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
        if self.skip_final is not None and self.skip_final():
            return
        if self._step is not None and self._step != self._last_eval_step:
            self.evaluate(session)

    def evaluate(self, session) -> Dict[str, float]:
        g = self._graph
        start = time.time()
        session.run(g.eval_reset_op)
        if g.eval_input.initializer is not None:
            session.run(g.eval_input.initializer, feed_dict=g.eval_input.feeds(0))
        while True:
            try:
                session.run(g.eval_update_op)
            except tf.errors.OutOfRangeError:
                break
        values = {k: float(v) for k, v in session.run(g.eval_metrics).items()}
        step = int(session.run(g.global_step))
        self._last_eval_step = self._step = step
        self._metrics.record("eval", step, values)
        log.info(
            "eval at step %d: %s (%.1fs)", step, " ".join(f"{k} {v:.4f}" for k, v in sorted(values.items())), time.time() - start
        )
        if self._writer is not None:
            summary = tf1.Summary(value=[tf1.Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
            self._writer.add_summary(summary, step)
            self._writer.flush()
        for listener in self.listeners:
            listener.on_eval(session, step, values)
        return values


class MetricsHook(tf1.train.SessionRunHook):
    """Records step, loss and steps/s every ``every_steps`` and at the last step into a MetricsLog.

    The loss is fetched every step (one scalar) so that the record at the end holds the
    loss of the last step, also when another hook stopped training early.
    """

    def __init__(self, loss, global_step, step_before, every_steps: int, metrics: MetricsLog):
        self._fetches = {"step": step_before, "loss": loss}
        self._global_step = global_step
        self._every = max(1, every_steps)
        self._metrics = metrics
        self._last = None  # (step, loss) of the latest run
        self._recorded_step = None

    def after_create_session(self, session, coord):
        self._mark = (time.time(), int(session.run(self._global_step)))

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        step = int(run_values.results["step"]) + 1
        self._last = (step, float(run_values.results["loss"]))
        if step % self._every == 0:
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
    """Acts on a NaN or Inf loss before any other hook sees the step (it runs first).

    ``stop`` raises NanLossError naming the step, so no checkpoint of that step is
    written and the latest one stays the last good state; ``skip_step`` logs the
    skipped step (the runner's guarded train_op left the weights unchanged).
    """

    def __init__(self, loss_is_finite, step_before, on_nan: str, checkpoint_dir: str):
        self._fetches = {"finite": loss_is_finite, "step": step_before}
        self._on_nan = getattr(on_nan, "value", on_nan)
        self._dir = checkpoint_dir
        self.skipped = 0

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        if run_values.results["finite"]:
            return
        step = int(run_values.results["step"]) + 1
        if self._on_nan == "skip_step":
            self.skipped += 1
            log.warning("step %d: the loss is NaN or Inf; its update was skipped (%d skipped so far)", step, self.skipped)
            return
        latest = tf.train.latest_checkpoint(self._dir)
        raise NanLossError(
            f"train.on_nan=stop: the loss is NaN or Inf at step {step}; the latest checkpoint "
            f"({os.path.basename(latest) if latest else 'none'}) holds the last good state and was not overwritten; "
            "lower optimizer.learning_rate, or set train.on_nan=skip_step"
        )


class ProgressHook(tf1.train.SessionRunHook):
    """A progress bar on a terminal (steps, steps/s, loss), log lines otherwise.

    Args:
      every_steps: refresh the bar / write a line every N steps.
      max_steps: the global step training stops at.
      mode: ``auto`` (bar on a terminal), ``bar``, ``lines`` or ``off``.
    """

    def __init__(self, every_steps: int = 100, max_steps: Optional[int] = None, mode="auto"):
        self._every = max(1, int(every_steps))
        self._max_steps = max_steps
        mode = getattr(mode, "value", mode)
        if mode not in ("auto", "bar", "lines", "off"):
            raise ConfigError(f"log.progress={mode}: use auto, bar, lines or off")
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "lines"
        self._mode = mode
        self._bar = None

    def begin(self):
        from trainer.tf_hooks import tensor

        self._loss = tensor("loss")
        self._global_step = tf1.train.get_global_step()
        self._step_before = tensor("step_before")

    def after_create_session(self, session, coord):
        self._step = int(session.run(self._global_step))
        self._mark = (time.time(), self._step)
        if self._mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=self._max_steps, initial=self._step, unit="step", dynamic_ncols=True, leave=True)

    def before_run(self, run_context):
        upcoming = self._step + 1
        if self._mode != "off" and (upcoming % self._every == 0 or (self._max_steps and upcoming >= self._max_steps)):
            return tf1.train.SessionRunArgs({"step": self._step_before, "loss": self._loss})
        return None

    def after_run(self, run_context, run_values):
        results = run_values.results
        if results is None:
            self._step += 1
            return
        self._step = int(results["step"]) + 1
        now = time.time()
        rate = (self._step - self._mark[1]) / max(now - self._mark[0], 1e-9)
        if self._bar is not None:
            self._bar.update(self._step - self._mark[1])
            self._bar.set_postfix(loss=f"{results['loss']:.4f}", refresh=False)
        else:
            total = f"/{self._max_steps}" if self._max_steps else ""
            log.info("step %d%s loss %.4f (%.1f steps/s)", self._step, total, results["loss"], rate)
        self._mark = (now, self._step)

    def end(self, session):
        if self._bar is not None:
            self._bar.close()


class _MetricWatcher:
    """Tracks the best value of one eval metric."""

    def __init__(self, metric: str, mode: str, min_delta: float = 0.0):
        if mode not in ("min", "max"):
            raise ConfigError(f"mode={mode}: use min or max")
        self.metric, self.mode, self.min_delta = metric, mode, float(min_delta)
        self.best: Optional[float] = None

    def improved(self, values: Dict[str, float]) -> bool:
        if self.metric not in values:
            raise ConfigError(f"metric={self.metric}: no such eval metric; use one of {sorted(values)}")
        value = values[self.metric]
        better = self.best is None or (
            value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta
        )
        if better:
            self.best = value
        return better


class EarlyStoppingHook(tf1.train.SessionRunHook):
    """Stops training when eval ``metric`` has not improved for ``patience`` evaluations.

    Args:
      metric: an eval metric (``accuracy``, ``loss``, or any of the model's eval_metric_ops).
      mode: ``min`` or ``max``.
      patience: evaluations without improvement before stopping.
      min_delta: the smallest change that counts as an improvement.
    """

    def __init__(self, metric: str = "loss", mode: str = "min", patience: int = 3, min_delta: float = 0.0):
        if patience < 1:
            raise ConfigError(f"patience={patience}: must be >= 1")
        self._watch = _MetricWatcher(metric, mode, min_delta)
        self._patience = patience
        self._bad_evals = 0
        self._stop = False

    def on_eval(self, session, step: int, values: Dict[str, float]) -> None:
        self._bad_evals = 0 if self._watch.improved(values) else self._bad_evals + 1
        if self._bad_evals >= self._patience and not self._stop:
            self._stop = True
            log.info("early stopping at step %d: eval %s has not improved on %.4f for %d evaluations",
                     step, self._watch.metric, self._watch.best, self._patience)

    def after_run(self, run_context, run_values):
        if self._stop:
            run_context.request_stop()


class BestCheckpointHook(tf1.train.SessionRunHook):
    """Keeps the checkpoint with the best eval ``metric`` in ``output_dir`` (with ``best.json``)."""

    def __init__(self, output_dir: str, metric: str = "accuracy", mode: str = "max"):
        self._dir = output_dir
        self._watch = _MetricWatcher(metric, mode)
        record = os.path.join(output_dir, "best.json")
        if os.path.isfile(record):  # a resumed run competes with the best so far
            with open(record) as f:
                previous = json.load(f)
            if previous.get("metric") == metric:
                self._watch.best = previous["value"]

    def begin(self):
        self._saver = tf1.train.Saver(max_to_keep=1, save_relative_paths=True, name="best_saver")

    def on_eval(self, session, step: int, values: Dict[str, float]) -> None:
        if not self._watch.improved(values):
            return
        os.makedirs(self._dir, exist_ok=True)
        path = self._saver.save(session, os.path.join(self._dir, "model.ckpt"), global_step=step,
                                latest_filename="checkpoint", write_meta_graph=False)
        with open(os.path.join(self._dir, "best.json"), "w") as f:
            json.dump({"step": step, "metric": self._watch.metric, "value": values[self._watch.metric],
                       "checkpoint": os.path.basename(path)}, f)
        log.info("best eval %s %.4f at step %d: kept in %s", self._watch.metric, values[self._watch.metric], step, self._dir)


def make_config_hooks(hooks_cfg) -> Tuple[List, List]:
    """Instantiate the ``hooks`` config (in the built graph): ``(all_hooks, chief_hooks)``.

    Each entry is ``{_target_, role, **kwargs}``; ``role`` is ``chief`` or ``all`` (default).
    A null entry is skipped, so ``hooks.NAME=null`` switches a hook off too.
    """
    all_hooks, chief_hooks = [], []
    for name, entry in (hooks_cfg or {}).items():
        if entry is None:
            continue
        entry = OmegaConf.to_container(entry, resolve=True) if OmegaConf.is_config(entry) else dict(entry)
        role = entry.pop("role", "all")
        if role not in ROLES:
            raise ConfigError(f"hooks.{name}.role={role}: use chief or all")
        if "_target_" not in entry:
            raise ConfigError(f"hooks.{name}: no _target_; give the hook's class, e.g. _target_: tensorflow.compat.v1.train.StepCounterHook")
        try:
            hook = hydra.utils.instantiate(entry)
        except Exception as e:
            cause = e.__cause__ or e
            if isinstance(cause, ConfigError):
                raise ConfigError(f"hooks.{name}: {cause}") from None
            raise ConfigError(f"hooks.{name}: cannot build {entry['_target_']} ({cause})") from None
        if not isinstance(hook, tf1.train.SessionRunHook):
            raise ConfigError(f"hooks.{name}: {entry['_target_']} made a {type(hook).__name__}, not a SessionRunHook")
        (chief_hooks if role == "chief" else all_hooks).append(hook)
    return all_hooks, chief_hooks
