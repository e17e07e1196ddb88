"""Hooks users switch on from config (``conf/hook/``): a progress display and keeping the best
checkpoint (early stopping is ``trainer.hooks.early_stopping``). The best checkpoint listens to
evaluations (``on_eval``), which the EvalHook calls after each."""

import logging
import os
import sys
import time
from typing import Dict, Optional

import tensorflow as tf

from trainer.errors import ConfigError
from trainer.hooks.early_stopping import Best
from trainer.model.names import tensor
from trainer.records import read_json, write_json

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


BAR_REFRESH_SECS = 2.0


def _terminal_columns() -> int:
    """The width of the terminal stderr writes to; 0 when it is not a terminal or has no size (a
    pseudo-terminal under ``script``, some CI runners and IDEs), where a bar would print nothing."""
    if not sys.stderr.isatty():
        return 0
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 0


class ProgressHook(tf1.train.SessionRunHook):
    """A progress bar on a terminal (steps, steps/s, loss), log lines otherwise.

    Args:
      every_steps: refresh the bar / write a line every N steps.
      max_steps: the global step training stops at.
      mode: ``auto`` (a bar on a terminal of known width, lines otherwise), ``bar``, ``lines`` or
        ``off``. The bar also moves every ``BAR_REFRESH_SECS`` seconds.
    """

    def __init__(self, every_steps: int = 100, max_steps: Optional[int] = None, mode="auto"):
        self._every = max(1, int(every_steps))
        self._max_steps = max_steps
        mode = str(mode)
        if mode not in ("auto", "bar", "lines", "off"):
            raise ConfigError(f"log.progress={mode}: use auto, bar, lines or off")
        if mode == "auto":
            mode = "bar" if _terminal_columns() > 0 else "lines"
        self._mode = mode
        self._fetched_at = 0.0
        self._bar = None
        self._redirect = None

    def begin(self):
        self._loss = tensor("loss")
        self._global_step = tf1.train.get_global_step()
        self._step_after = tensor("step_after")

    def after_create_session(self, session, coord):
        self._step = int(session.run(self._global_step))
        self._mark = (time.time(), self._step)
        if self._mode == "bar":
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._bar = tqdm(total=self._max_steps, initial=self._step, unit="step", dynamic_ncols=True, leave=True)
            # Log lines (the runner's, TensorFlow's) print above the bar instead of through it.
            self._redirect = logging_redirect_tqdm(loggers=[logging.getLogger()])
            self._redirect.__enter__()

    def before_run(self, run_context):
        upcoming = self._step + 1
        due = upcoming % self._every == 0 or (self._max_steps and upcoming >= self._max_steps)
        # the bar also moves every BAR_REFRESH_SECS between the log steps of a slow model
        if self._bar is not None and time.time() - self._fetched_at >= BAR_REFRESH_SECS:
            due = True
        if self._mode != "off" and due:
            return tf1.train.SessionRunArgs({"step": self._step_after, "loss": self._loss})
        return None

    def after_run(self, run_context, run_values):
        results = run_values.results
        if results is None:
            self._step += 1
            return
        self._step = int(results["step"])
        now = self._fetched_at = time.time()
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
            self._bar = None
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
            self._redirect = None


class BestCheckpointHook(tf1.train.SessionRunHook):
    """Keeps the checkpoint with the best eval ``metric`` in ``output_dir`` (with ``best.json``)."""

    def __init__(self, output_dir: str, metric: str = "accuracy", mode: str = "max"):
        self._dir = output_dir
        self._watch = Best(metric, mode)
        previous = read_json(os.path.join(output_dir, "best.json"))  # a resumed run competes with the best so far
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
        write_json(os.path.join(self._dir, "best.json"), {"step": step, "metric": self._watch.metric,
                                                           "value": values[self._watch.metric],
                                                           "checkpoint": os.path.basename(path)})
        log.info("best eval %s %.4f at step %d: kept in %s", self._watch.metric, values[self._watch.metric], step, self._dir)
