"""``train(cfg, workdir)``: train (or resume) one model as the config says.

The order of work: load the data, build the graph, build the config's hooks in it (a wrong
tensor name fails there), claim the checkpoint dir (lock, check, repair), then one training
loop over either session backend, and finally ``metrics.json``. Nothing is written to the
checkpoint dir before the data, the graph, the hooks and the checkpoint have been checked.
"""

import logging
import os
import time
from dataclasses import dataclass, replace
from typing import Dict, Optional

import tensorflow as tf

from trainer.checkpoints.guard import claim, metrics_path
from trainer.checkpoints.intact import latest_step
from trainer.data.files import FileSource
from trainer.data.pipelines import input_error
from trainer.data.sources import check_training_arrays, load_data
from trainer.errors import Preempted, describe
from trainer.estimator import RunConfig
from trainer.hooks.assembly import RunParts, UserHooks, make_training_hooks, make_user_hooks
from trainer.hooks.evaluation import EvalHook, SeparateEvaluation, SharedEvaluation, format_metrics, objective_metric
from trainer.model.graph import TrainGraph, build_eval_graph, build_graph, single_process
from trainer.model.model_fn import make_run_config
from trainer.model.schedules import stretched
from trainer.records import MetricsLog, read_json, write_json
from trainer.session.device import check_replicas, resolve_device, resolve_precision, session_config, visible_gpus
from trainer.session.environment import import_secs, onednn_enabled, set_determinism
from trainer.session.factory import SessionOptions, open_session
from trainer.training.loop import LoopStats, checkpoint_saver, run_loop
from trainer.training.preemption import PreemptionHandler
from trainer.training.result import chief_record, worker_record

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def train(cfg, workdir: str, cluster=None) -> Dict:
    """Train to ``train.max_steps`` (resuming from ``checkpoint.dir``), evaluate, write ``metrics.json``.

    Args:
      cfg: a prepared config (``trainer.config.rules.prepare``).
      workdir: the run dir: ``metrics.json``, ``metrics.jsonl`` and, by default, ``checkpoints/``.
      cluster: a ``trainer.dist.task.ClusterContext`` when this process is one training task of
        a cluster; only its chief reads and writes ``checkpoint.dir``.

    Returns:
      The metrics written to ``metrics.json``.

    Raises:
      ConfigError: a config value or data file is wrong (nothing has been written).
      CheckpointError: the checkpoint dir cannot be resumed (it is left untouched).
      Preempted: stopped by a signal after saving a checkpoint.
    """
    started = time.time()
    timings = {"tensorflow_import": import_secs()}
    set_determinism(cfg.train.deterministic)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.device, device)
    check_replicas(cfg.device, device)
    mark = time.time()
    arrays = load_data(cfg)
    check_training_arrays(arrays, cfg.train.batch_size)
    timings["data"] = time.time() - mark
    mark = time.time()
    run_config = make_run_config(cfg, cluster.role if cluster is not None else None)
    if cluster is not None:
        placement = replace(cluster.placement(device), loss_scale=precision == "fp16")
    else:
        placement = single_process(device, int(cfg.device.replicas), precision)
    graph = build_graph(cfg, arrays, placement, run_config)
    timings["graph"] = time.time() - mark
    with graph.graph.as_default():
        user = make_user_hooks(cfg)
    evaluation = _evaluation(cfg, graph, arrays, device, run_config)
    # Checked before the first step (the chief evaluates): a wrong name fails now, not after training.
    objective = (objective_metric(cfg.eval.objective, evaluation.metric_names())
                 if cluster is None or cluster.role.is_chief else cfg.eval.objective)
    run = _Run(cfg, workdir, graph, device, user, cluster, timings, arrays, run_config, evaluation, objective, precision)
    try:
        if cluster is not None and not cluster.role.is_chief:
            os.makedirs(workdir, exist_ok=True)  # a worker never touches the chief's checkpoint dir
            log.info("task dir %s", workdir)
            result = run.train(start_step=None)
        else:
            with claim(cfg, graph, workdir) as claimed:
                # A cluster's chief goes on even when finished: its workers wait for it to restore.
                if claimed.finished is not None and cluster is None:
                    return claimed.finished
                if claimed.start_step:
                    change = stretched(cfg.optimizer, claimed.start_step,
                                       read_json(metrics_path(workdir)).get("max_steps"), cfg.train.max_steps)
                    if change:
                        log.warning(change)
                result = run.train_recording_failure(claimed.start_step)
    finally:
        # Summary writers hold their graph: close them so that the next job of a sweep starts clean.
        tf1.summary.FileWriterCache.clear()
    return _finish(result, workdir, started, cluster)


def _evaluation(cfg, graph: TrainGraph, arrays, device: str, run_config: RunConfig):
    """How this run evaluates: in the training graph, or in a graph of its own (as Estimator did)."""
    if graph.evaluation is not None:
        return SharedEvaluation(graph.evaluation)
    with graph.graph.as_default():
        variables = {v.op.name: v for v in tf1.global_variables()}
        if graph.average is not None:  # evaluate the moving averages in place of the weights
            variables.update({v.op.name: graph.average.average(v) for v in tf1.trainable_variables()})
    return SeparateEvaluation(lambda: build_eval_graph(cfg, arrays, device, run_config), variables,
                              session_config(cfg.device, device))


def _finish(result: Dict, workdir: str, started: float, cluster) -> Dict:
    result.update(wall_secs=round(time.time() - started, 3), pid=os.getpid(),
                  started_at=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                  finished_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
    write_json(metrics_path(workdir), result)
    if result["status"] == "preempted":
        raise Preempted(result["message"], result.pop("exit_code"))
    if cluster is not None and not cluster.role.is_chief:
        log.info("%s: done after %d steps of its own (global step %s); metrics in %s", cluster.role.name,
                 result["local_steps"], result["global_step"], metrics_path(workdir))
        return result
    loss = "n/a" if result["loss"] is None else f"{result['loss']:.4f}"
    evals = {k[len("eval_"):]: v for k, v in result.items() if k.startswith("eval_") and k != "eval_examples"}
    log.info("done at step %d: loss %s, %s; metrics in %s", result["global_step"], loss, format_metrics(evals),
             metrics_path(workdir))
    return result


def _last_step(ckpt_dir: str, default):
    """The step of the newest checkpoint in ``ckpt_dir`` (``default`` when there is none or it is unreadable)."""
    try:
        return latest_step(ckpt_dir)
    except Exception:
        return default


@dataclass
class _Run:
    """One training run's parts, once built: what the loop needs."""

    cfg: object
    workdir: str
    graph: TrainGraph
    device: str
    user: UserHooks
    cluster: Optional[object]
    timings: Dict
    arrays: Optional[object]  # the loaded data; None for input_fns
    run_config: RunConfig
    evaluation: object  # a SharedEvaluation or SeparateEvaluation
    objective: str  # the eval metric eval.objective resolved to
    precision: str = "fp32"  # the compute precision device.precision resolved to

    @property
    def is_chief(self) -> bool:
        return self.cluster is None or self.cluster.role.is_chief

    def session_config(self):
        config = session_config(self.cfg.device, self.device, len(visible_gpus()) if self.device == "gpu" else 0,
                                self.precision)
        if self.cluster is not None:
            config.device_filters.extend(self.cluster.device_filters())
        return config

    def session_options(self) -> SessionOptions:
        options = SessionOptions(stop_grace_period_secs=self.cfg.session.stop_grace_period_secs,
                                 max_recoveries=self.cfg.session.max_recoveries,
                                 recovery_wait_secs=self.cfg.session.recovery_wait_secs,
                                 global_step=self.graph.global_step)
        return self.cluster.session_options(options, self.graph) if self.cluster is not None else options

    def eval_source(self) -> str:
        if self.arrays is None:
            return f"data.eval_fn={self.cfg.data.eval_fn}"
        if isinstance(self.arrays, FileSource):
            return f"data.eval_files ({len(self.arrays.eval_files)} files)"
        if self.cfg.data.get("validation_examples"):
            return f"the {self.cfg.data.name} validation split (data.validation_examples={self.cfg.data.validation_examples})"
        return f"the {self.cfg.data.name} test split"

    def train_recording_failure(self, start_step: int) -> Dict:
        """:meth:`train`; a failure is recorded in ``metrics.json`` (status, the error, the last step) and raised."""
        try:
            return self.train(start_step)
        except Exception as e:
            better = input_error(self.arrays, e)  # a bad record of a file source: name the file and record
            record = {"status": "failed", "error": describe(better or e), "start_step": start_step, "model": self.cfg.model.name,
                      "session": str(self.cfg.session.kind), "max_steps": self.cfg.train.max_steps,
                      "global_step": _last_step(self.cfg.checkpoint.dir, start_step), "pid": os.getpid(),
                      "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            write_json(metrics_path(self.workdir), record)
            if better is not None:
                raise better from None
            raise

    def train(self, start_step: Optional[int]) -> Dict:
        """Train from ``start_step`` (None: a cluster worker, which never reads the checkpoint dir)."""
        metrics = MetricsLog(os.path.join(self.workdir, "metrics.jsonl"))
        max_steps = self.cfg.train.max_steps
        if start_step is not None and max_steps is not None and start_step >= max_steps:
            return self._evaluate_only(start_step, metrics)
        preemption = PreemptionHandler()
        with preemption, self.graph.graph.as_default():
            stats = self._loop(start_step, metrics, preemption)
        if not self.is_chief:
            return worker_record(self, stats, preemption)
        return chief_record(self, start_step, metrics, stats, preemption)

    def _loop(self, start_step, metrics, preemption):
        cfg, graph, ckpt_dir = self.cfg, self.graph, self.cfg.checkpoint.dir
        parts = RunParts(metrics, preemption, self.evaluation, self.eval_source())
        hooks = make_training_hooks(cfg, graph, self.user, parts, self.cluster)
        if self.is_chief:
            log.info("checkpoint.dir %s: %s", ckpt_dir, f"resuming from step {start_step}" if start_step else "new run")
            log.info("hooks (chief): %s", ", ".join(type(h).__name__ for h in hooks.chief))
        log.info("session=%s device=%s%s precision=%s%s%s model=%s data=%s", cfg.session.kind, self.device,
                 f" replicas={cfg.device.replicas}" if cfg.device.replicas > 1 else "", self.precision,
                 " xla=on" if cfg.device.xla else "", " onednn=on" if onednn_enabled() else "", cfg.model.name,
                 cfg.data.name)
        log.info("hooks (all): %s", ", ".join(type(h).__name__ for h in hooks.every))
        config, options = self.session_config(), self.session_options()

        def session():
            if self.cluster is None:
                return open_session(cfg.session.kind, graph.scaffold, hooks.every, hooks.chief, ckpt_dir, config, options)
            return self.cluster.open_session(lambda: open_session(
                cfg.session.kind, graph.scaffold, hooks.every, hooks.chief, ckpt_dir if self.is_chief else None,
                config, options))

        fetches = graph.train_op if self.cluster is None else [graph.train_op, graph.step_before]
        stats = run_loop(session, fetches, save_state=checkpoint_saver(graph, ckpt_dir) if self.is_chief else None,
                         at_normal_end=self.cluster.at_normal_end if self.cluster is not None else None)
        self.timings["session"] = stats.session_secs
        if stats.first_step_at is not None:
            self.timings["first_step_at"] = stats.first_step_at
        return stats

    def _evaluate_only(self, start_step: int, metrics) -> Dict:
        """A checkpoint already at ``train.max_steps`` (its metrics.json lost): running a step would move
        it past its target, so evaluate only and write nothing to the checkpoint dir."""
        log.info("checkpoint.dir %s is already at step %d (train.max_steps=%d): nothing to train",
                 self.cfg.checkpoint.dir, start_step, self.cfg.train.max_steps)
        eval_hook = EvalHook(self.graph, self.evaluation, None, metrics, summary_dir=None, source=self.eval_source())
        options = replace(self.session_options(), max_recoveries=0)
        with self.graph.graph.as_default(), open_session("plain", self.graph.scaffold, [eval_hook], [],
                                                         self.cfg.checkpoint.dir, self.session_config(), options):
            pass
        return chief_record(self, start_step, metrics, LoopStats(), PreemptionHandler())
