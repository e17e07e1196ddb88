"""``train(cfg, workdir)``: train (or resume) one model as the config says.

The order of work: load the data, build the graph, build the config's hooks in it (a wrong
tensor name fails there), claim the checkpoint dir (lock, check, repair), then one training
loop over either session backend, and finally ``metrics.json``. Nothing is written to the
checkpoint dir before the data, the graph, the hooks and the checkpoint have been checked.
"""

import logging
import os
import re
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, Optional

import tensorflow as tf

from trainer.checkpoints.guard import metrics_path
from trainer.checkpoints.intact import clean_leftovers, latest_step
from trainer.data.files import FileSource
from trainer.data.pipelines import input_error
from trainer.data.arrays import check_training_arrays
from trainer.data.sources import eval_source
from trainer.errors import Preempted, RecordError, TrainerError, describe
from trainer.contract import RunConfig
from trainer.hooks.assembly import RunParts, UserHooks, check_user_hooks, make_training_hooks, make_user_hooks
from trainer.hooks.evaluation import EvalHook, SeparateEvaluation, SharedEvaluation
from trainer.model.graph import Recipe, TrainGraph, build_eval_graph, build_graph
from trainer.model.model_fn import load_data_for
from trainer.plan import checkpoint_request, graph_recipe, hook_cadence, make_run_config
from trainer.model.schedules import rescheduled, stretched
from trainer.records import MetricsLog, failure_record, read_json, write_json
from trainer.session.device import check_replicas, resolve_device, resolve_precision, session_config, visible_gpus
from trainer.compat import onednn_enabled
from trainer.process import import_secs, set_determinism
from trainer.session.factory import SessionOptions, open_session
from trainer.training.loop import LoopStats, exit_save, run_loop
from trainer.training.preemption import PreemptionHandler
from trainer.training.single_process import SingleProcess

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def train(cfg, workdir: str, role=None, on_accepted: Optional[Callable[[], None]] = None) -> Dict:
    """Train to ``train.max_steps`` (resuming from ``checkpoint.dir``), evaluate, write ``metrics.json``.

    Args:
      cfg: a prepared config (``trainer.config.rules.prepare``).
      workdir: the run dir: ``metrics.json``, ``metrics.jsonl`` and, by default, ``checkpoints/``.
      role: what this process is (``trainer.training.single_process``): one process (the default) or one
        training task of a cluster (``trainer.dist.task.ClusterTask``); only a chief reads and writes
        ``checkpoint.dir``.
      on_accepted: called once this process holds the checkpoint dir, every check passed, and it
        will train (not when the run is found finished): the command records the run's config then.

    Returns:
      The metrics written to ``metrics.json``.

    Raises:
      ConfigError: a config value or data file is wrong (nothing has been written).
      CheckpointError: the checkpoint dir cannot be resumed (it is left untouched).
      Preempted: stopped by a signal after saving a checkpoint.
    """
    role = role or SingleProcess()
    started = time.time()
    timings = {"tensorflow_import": import_secs()}
    set_determinism(cfg.train.deterministic)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.device, device)
    check_replicas(cfg.device, device)
    arrays = _timed(timings, "data", lambda: _load_data(cfg.model, cfg.data, cfg.train.batch_size))
    run_config = make_run_config(cfg, role.cluster_role)
    placement = role.placement(device, cfg.device.replicas, precision)
    recipe = graph_recipe(cfg)
    graph = _timed(timings, "graph",
                   lambda: _naming_columns(arrays, build_graph, recipe, arrays, placement, run_config))
    targets, user = _user_hooks_now(cfg.hooks, cfg.checkpoint.listeners, graph)
    evaluation = _naming_columns(arrays, _evaluation, recipe, cfg.device, graph, arrays, device, run_config)
    # Checked before the first step: a wrong name fails now, not after training.
    objective = role.objective(cfg.eval.objective, evaluation)
    run = _Run(cfg, workdir, graph, device, user, role, timings, arrays, run_config, evaluation, objective, precision)
    try:
        data = arrays.signature() if isinstance(arrays, FileSource) else None
        with role.claim(checkpoint_request(cfg), graph, workdir, data) as claimed:
            if claimed.finished is not None:
                return claimed.finished
            if on_accepted is not None:
                on_accepted()
            if run.user is None:
                log.info("building the config's hooks: %s", ", ".join(targets))
                with graph.graph.as_default():
                    run.user = make_user_hooks(cfg.hooks, cfg.checkpoint.listeners)
            if claimed.start_step:
                _warn_if_stretched(cfg.optimizer, cfg.train.max_steps, workdir, claimed.start_step)
            result = run.train_recording_failure(claimed.start_step)
    finally:
        # Summary writers hold their graph: close them so that the next job of a sweep starts clean.
        tf1.summary.FileWriterCache.clear()
    return _finish(result, workdir, started, role)


def _timed(timings: Dict, key: str, work):
    mark = time.time()
    try:
        return work()
    finally:
        timings[key] = time.time() - mark


def _disk_full(ckpt_dir: str, error: Exception) -> Optional[RecordError]:
    """A write a full disk refused (a checkpoint, a summary file), as one line naming it; what a save left
    half-written is removed."""
    text = str(error)
    if "No space left on device" not in text or isinstance(error, TrainerError):  # a record's: named already
        return None
    if os.path.isdir(ckpt_dir):
        clean_leftovers(ckpt_dir)
    found = re.search(r"(/\S+?);? No space left on device", text)
    path = re.sub(r"\.tempstate\d+$", "", found.group(1)) if found else ckpt_dir
    what = f"a checkpoint in {os.path.dirname(path)}" if re.search(r"\.ckpt-\d+\.", path) else path
    step = latest_step(ckpt_dir) if os.path.isdir(ckpt_dir) else None
    return RecordError(f"cannot write {what} (No space left on device); free space there, then run the same "
                       f"command: it resumes from the newest intact checkpoint{f' (step {step})' if step else ''}")


def _naming_columns(arrays, build, *args):
    """``build(*args)``; TensorFlow's refusal of a CSV column's name as a scope becomes one line naming the header."""
    try:
        return build(*args)
    except ValueError as e:
        better = arrays.column_name_error(e) if isinstance(arrays, FileSource) else None
        if better is None:
            raise
        raise better from None


def _user_hooks_now(hooks_cfg, listeners_cfg, graph: TrainGraph):
    """The config's hooks, checked now (imported, their classes checked): ``(targets, hooks)``. The
    runner's and TensorFlow's are built now too (a wrong tensor name fails before the dir is touched);
    a run naming other code gets None, its hooks built only once accepted (every check passed, the dir
    held): a refused run calls none of it."""
    targets = check_user_hooks(hooks_cfg, listeners_cfg)
    if not all(t.split("=", 1)[1].startswith(("trainer.", "tensorflow.")) for t in targets):
        return targets, None
    with graph.graph.as_default():
        return targets, make_user_hooks(hooks_cfg, listeners_cfg)


def _load_data(model_cfg, data_cfg, batch_size: int):
    arrays = load_data_for(model_cfg, data_cfg)
    check_training_arrays(arrays, batch_size)
    return arrays


def _warn_if_stretched(optimizer_cfg, max_steps, workdir: str, start_step: int) -> None:
    """A resumed run whose schedule changed, or whose ``train.max_steps`` moved under a schedule that
    decays to it: the learning rate jumps at the restored step (said once)."""
    previous = read_json(metrics_path(workdir))
    change = (rescheduled(previous.get("optimizer_schedule"), optimizer_cfg, start_step, previous.get("max_steps"),
                          max_steps)
              or stretched(optimizer_cfg, start_step, previous.get("max_steps"), max_steps))
    if change:
        log.warning(change)


def _evaluation(recipe: Recipe, device_cfg, graph: TrainGraph, arrays, device: str, run_config: RunConfig):
    """How this run evaluates: in the training graph, or in a graph of its own (as Estimator did);
    None with ``eval.enabled=false``."""
    if not recipe.eval.enabled:
        return None
    if graph.evaluation is not None:
        return SharedEvaluation(graph.evaluation)
    with graph.graph.as_default():
        variables = {v.op.name: v for v in tf1.global_variables()}
        if graph.average is not None:  # evaluate the moving averages in place of the weights
            variables.update({v.op.name: graph.average.average(v) for v in tf1.trainable_variables()})
    return SeparateEvaluation(lambda: build_eval_graph(recipe, arrays, device, run_config), variables,
                              session_config(device_cfg, device))


def _finish(result: Dict, workdir: str, started: float, role) -> Dict:
    result.update(wall_secs=round(time.time() - started, 3), pid=os.getpid(),
                  started_at=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                  finished_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
    write_json(metrics_path(workdir), result)
    if result["status"] == "preempted":
        raise Preempted(result["message"], result.pop("exit_code"))
    role.report(result, workdir)
    return result


def _last_step(ckpt_dir: str, default):
    """The step of the newest checkpoint in ``ckpt_dir`` (``default`` when there is none or it is unreadable)."""
    try:
        return latest_step(ckpt_dir)
    # broad: TensorFlow's checkpoint reader raises OpError, IndexError (a cut data file) and
    # others: any of them means unreadable
    except Exception:
        return default


def parameter_count(graph) -> str:
    """``1,234,567 trainable parameters (4.7 MiB)`` of ``graph``'s trainable variables."""
    with graph.as_default():
        variables = tf.compat.v1.trainable_variables()
    count = sum(v.shape.num_elements() or 0 for v in variables)
    size = sum((v.shape.num_elements() or 0) * v.dtype.base_dtype.size for v in variables)
    return f"{count:,} trainable parameters ({size / 2**20:.1f} MiB)"


@dataclass
class _Run:
    """One training run's parts, once built: what the loop needs."""

    cfg: object
    workdir: str
    graph: TrainGraph
    device: str
    user: Optional[UserHooks]  # built once the run is accepted
    role: object  # trainer.training.single_process: one process, or a task of a cluster
    timings: Dict
    arrays: Optional[object]  # the loaded data; None for input_fns
    run_config: RunConfig
    evaluation: object  # a SharedEvaluation or SeparateEvaluation
    objective: str  # the eval metric eval.objective resolved to
    precision: str = "fp32"  # the compute precision device.precision resolved to

    def session_config(self):
        return self.role.session_config(session_config(
            self.cfg.device, self.device, len(visible_gpus()) if self.device == "gpu" else 0, self.precision))

    def session_options(self) -> SessionOptions:
        options = SessionOptions(stop_grace_period_secs=self.cfg.session.stop_grace_period_secs,
                                 max_recoveries=self.cfg.session.max_recoveries,
                                 recovery_wait_secs=self.cfg.session.recovery_wait_secs,
                                 global_step=self.graph.global_step)
        return self.role.session_options(options, self.graph)

    def eval_source(self) -> str:
        return eval_source(self.cfg.data, self.arrays)

    def train_recording_failure(self, start_step: int) -> Dict:
        """:meth:`train`; a failure is recorded in ``metrics.json`` (status, the error, the last step) and raised."""
        try:
            return self.train(start_step)
        # broad: any failure is recorded in metrics.json, then raised as it was
        except Exception as e:
            # a bad record of a file source (the file and record named), or a checkpoint a full disk refused
            better = input_error(self.arrays, e) or _disk_full(self.cfg.checkpoint.dir, e)
            try:
                write_json(metrics_path(self.workdir), failure_record(
                    self.cfg.model.name, self.cfg.session.kind, describe(better or e), start_step=start_step, max_steps=self.cfg.train.max_steps,
                    global_step=_last_step(self.cfg.checkpoint.dir, start_step)))
            except (OSError, RecordError) as unrecorded:  # the failure itself is what the user must see
                log.warning("the failure is not recorded in metrics.json: %s", unrecorded)
            if better is not None:
                raise better from None
            raise

    def train(self, start_step: Optional[int]) -> Dict:
        """Train from ``start_step`` (None: a cluster worker, which never reads the checkpoint dir)."""
        metrics = MetricsLog(os.path.join(self.workdir, "metrics.jsonl"))
        max_steps = self.cfg.train.max_steps
        if start_step is not None and max_steps is not None and start_step >= max_steps:
            return self._evaluate_only(start_step, metrics)
        preemption = PreemptionHandler(self.cfg.train.stop_grace_secs)
        with preemption, self.graph.graph.as_default():
            stats = self._loop(start_step, metrics, preemption)
        return self.role.record(self, start_step, metrics, stats, preemption)

    def _loop(self, start_step, metrics, preemption):
        cfg, graph, role = self.cfg, self.graph, self.role
        parts = RunParts(metrics, preemption, self.evaluation, self.eval_source())
        hooks = make_training_hooks(hook_cadence(cfg), graph, self.user, parts, role)
        ckpt_dir = role.checkpoint_dir(cfg.checkpoint.dir)
        if role.is_chief:
            log.info("checkpoint.dir %s: %s", ckpt_dir, f"resuming from step {start_step}" if start_step else "new run")
            log.info("hooks (chief): %s", ", ".join(type(h).__name__ for h in hooks.chief))
        log.info("session=%s device=%s%s precision=%s%s%s model=%s data=%s", cfg.session.kind, self.device,
                 f" replicas={cfg.device.replicas}" if cfg.device.replicas > 1 else "", self.precision,
                 " xla=on" if cfg.device.xla else "", " onednn=on" if onednn_enabled() else "", cfg.model.name,
                 cfg.data.name)
        log.info("hooks (all): %s", ", ".join(type(h).__name__ for h in hooks.every))
        log.info("model %s: %s", cfg.model.name, parameter_count(graph.graph))
        config, options = self.session_config(), self.session_options()

        def session():
            return role.open_session(lambda: open_session(
                cfg.session.kind, graph.scaffold, hooks.every, hooks.chief, ckpt_dir, config, options))

        stats = run_loop(session, role.fetches(graph), save_state=exit_save(graph, ckpt_dir) if ckpt_dir else None,
                         at_normal_end=role.at_normal_end)
        self.timings["session"] = stats.session_secs
        if stats.first_step_at is not None:
            self.timings["first_step_at"] = stats.first_step_at
        return stats

    def _evaluate_only(self, start_step: int, metrics) -> Dict:
        """A checkpoint already at ``train.max_steps`` (its metrics.json lost): running a step would move
        it past its target, so evaluate only and write nothing to the checkpoint dir."""
        log.info("checkpoint.dir %s is already at step %d (train.max_steps=%d): nothing to train",
                 self.cfg.checkpoint.dir, start_step, self.cfg.train.max_steps)
        hooks = [] if self.evaluation is None else [
            EvalHook(self.graph, self.evaluation, None, metrics, summary_dir=None, source=self.eval_source())]
        options = replace(self.session_options(), max_recoveries=0)
        with self.graph.graph.as_default(), open_session("plain", self.graph.scaffold, hooks, [],
                                                         self.cfg.checkpoint.dir, self.session_config(), options):
            pass
        return self.role.record(self, start_step, metrics, LoopStats(), PreemptionHandler())
