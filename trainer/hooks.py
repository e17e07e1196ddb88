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
import numpy as np
import tensorflow as tf
from omegaconf import OmegaConf

from trainer.errors import ConfigError

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

    def __init__(self, pipeline, global_step, images: np.ndarray, labels: np.ndarray):
        self._pipeline, self._global_step = pipeline, global_step
        self._images, self._labels = images, labels

    def after_create_session(self, session, coord):
        step = int(session.run(self._global_step))
        session.run(self._pipeline.initializer, feed_dict=self._pipeline.feed(self._images, self._labels, skip=step))


class EvalHook(tf1.train.SessionRunHook):
    """Evaluates on the test split every ``every_steps`` and at the end, in the training session.

    Results go to ``metrics`` (a MetricsLog), a log line, and TensorBoard summaries in ``summary_dir``.
    """

    def __init__(self, graph, images, labels, every_steps: Optional[int], metrics: MetricsLog, summary_dir: Optional[str]):
        self._graph = graph
        self._images, self._labels = images, labels
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
        return tf1.train.SessionRunArgs(self._graph.global_step)

    def after_run(self, run_context, run_values):
        self._step = int(run_values.results) + 1  # fetched before this run's increment
        if self._every and self._step % self._every == 0 and self._step != self._last_eval_step:
            self.evaluate(run_context.session)

    def end(self, session):
        if self._step is not None and self._step != self._last_eval_step:
            self.evaluate(session)

    def evaluate(self, session) -> Dict[str, float]:
        g = self._graph
        start = time.time()
        session.run(g.eval_reset_op)
        session.run(g.eval_input.initializer, feed_dict=g.eval_input.feed(self._images, self._labels))
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
        return values


class MetricsHook(tf1.train.SessionRunHook):
    """Records step, loss and steps/s every ``every_steps`` and at ``max_steps`` into a MetricsLog."""

    def __init__(self, loss, global_step, every_steps: int, max_steps: int, metrics: MetricsLog):
        self._loss, self._global_step = loss, global_step
        self._every, self._max_steps = max(1, every_steps), max_steps
        self._metrics = metrics
        self._step = 0

    def after_create_session(self, session, coord):
        self._step = int(session.run(self._global_step))
        self._mark = (time.time(), self._step)

    def before_run(self, run_context):
        upcoming = self._step + 1
        if upcoming % self._every == 0 or upcoming >= self._max_steps:
            return tf1.train.SessionRunArgs({"step": self._global_step, "loss": self._loss})
        return tf1.train.SessionRunArgs({"step": self._global_step})

    def after_run(self, run_context, run_values):
        results = run_values.results
        self._step = int(results["step"]) + 1  # the step fetched is the value before this run's increment
        if "loss" in results:
            now = time.time()
            rate = (self._step - self._mark[1]) / max(now - self._mark[0], 1e-9)
            self._mark = (now, self._step)
            self._metrics.record("train", self._step, {"loss": results["loss"], "steps_per_sec": rate})


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
        self._loss = tf1.get_default_graph().get_tensor_by_name("loss:0")
        self._global_step = tf1.train.get_global_step()

    def after_create_session(self, session, coord):
        self._step = int(session.run(self._global_step))
        self._mark = (time.time(), self._step)
        if self._mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=self._max_steps, initial=self._step, unit="step", dynamic_ncols=True, leave=True)

    def before_run(self, run_context):
        upcoming = self._step + 1
        if self._mode != "off" and (upcoming % self._every == 0 or (self._max_steps and upcoming >= self._max_steps)):
            return tf1.train.SessionRunArgs({"step": self._global_step, "loss": self._loss})
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


def make_config_hooks(hooks_cfg) -> Tuple[List, List, List[Tuple[str, str, str]]]:
    """Instantiate the ``hooks`` config: ``(all_hooks, chief_hooks, [(name, role, class)])``.

    Each entry is ``{_target_, role, **kwargs}``; ``role`` is ``chief`` or ``all`` (default).
    A null entry is skipped, so ``hooks.NAME=null`` switches a hook off too.
    """
    all_hooks, chief_hooks, listing = [], [], []
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
            raise ConfigError(f"hooks.{name}: cannot build {entry['_target_']} ({cause})") from None
        if not isinstance(hook, tf1.train.SessionRunHook):
            raise ConfigError(f"hooks.{name}: {entry['_target_']} made a {type(hook).__name__}, not a SessionRunHook")
        (chief_hooks if role == "chief" else all_hooks).append(hook)
        listing.append((name, role, type(hook).__name__))
    return all_hooks, chief_hooks, listing
