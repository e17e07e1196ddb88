"""One task of a TensorFlow cluster (between-graph replication over gRPC): what each role does.

- ps: starts its ``Server`` and serves until every training task has said it is done
  (a token in a queue hosted on each ps), then returns.
- chief / worker: start their ``Server``, build the graph under ``replica_device_setter``
  (variables on the ps tasks) and train with ``master=server.target``; then put their done
  token on every ps. What differs from one process is the :class:`ClusterTask`, the cluster's
  implementation of the training run's role (``trainer.training.single_process``).
- evaluator: ``trainer.dist.evaluator``.

Every task runs a ``Watchdog`` (``trainer.dist.watchdog``).
"""

import contextlib
import logging
import os
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional

import tensorflow as tf

from trainer.checkpoints.guard import Claim, claim as claim_dir
from trainer.checkpoints.intact import latest_step
from trainer.compat import keep_session_open
from trainer.dist.evaluator import evaluate_continuously
from trainer.dist.roles import Role
from trainer.dist.server import serve_ps, signal_done, start_server
from trainer.dist.watchdog import Watchdog, WatchdogHook
from trainer.errors import ClusterError
from trainer.model.graph import Placement
from trainer.process import ignore_cancelled_queue_runners
from trainer.hooks.evaluation import objective_metric
from trainer.records import write_json
from trainer.training.result import chief_record, final_step, worker_record
from trainer.training.single_process import own_dir, report_chief
from trainer.training.train import train

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


@dataclass
class ClusterTask:
    """One training task of a cluster (the chief or a worker), as the training run's role
    (``trainer.training.single_process`` lists the interface)."""

    role: Role
    target: str  # the master: this task's own server
    watchdog: Watchdog
    sync_replicas: bool = False
    replicas_to_aggregate: Optional[int] = None
    max_wait_secs: float = 120.0
    ready_poll_secs: float = 1.0
    progress_timeout_secs: float = 600.0
    collective: bool = False  # distributed.strategy=collective: no ps; each worker holds the variables
    hooks: List = field(init=False)  # added to every task's hooks: the watchdog's

    def __post_init__(self):
        self.hooks = [WatchdogHook(self.watchdog, self.progress_timeout_secs)]

    @property
    def is_chief(self) -> bool:
        return self.role.is_chief

    @property
    def name(self) -> str:
        return self.role.name

    @property
    def cluster_role(self) -> Role:
        return self.role

    def session_config(self, config):
        """Sessions see the ps tasks and this task only: a restarting worker does not stall the others.
        Under the collective strategy, this task only, with the chief leading the collective ops."""
        if self.collective:
            return collective_config(self.role, config)
        config.device_filters.extend(["/job:ps", self.role.device()])
        return config

    def objective(self, name: str, evaluation) -> str:
        """Checked where it is evaluated: by the chief."""
        if evaluation is None:
            return None
        return objective_metric(name, evaluation.metric_names()) if self.is_chief else name

    def claim(self, request, graph, workdir: str, data=None):
        """The chief holds the checkpoint dir, and goes on even when the run has finished (its workers
        wait for it to restore); a worker never touches it."""
        return _going_on(claim_dir(request, graph, workdir, data)) if self.is_chief else own_dir(workdir)

    def checkpoint_dir(self, ckpt_dir: str) -> Optional[str]:
        return ckpt_dir if self.is_chief else None

    def fetches(self, graph):
        """The train op and the step before it (the worker's record counts from it); under the collective
        strategy also the step's finite flag, which the chief's NaN guard fetches: every worker's step
        must run the same collective graph."""
        if self.collective:
            return [graph.train_op, graph.step_before, graph.step_is_finite]
        return [graph.train_op, graph.step_before]

    def record(self, run, start_step, metrics, stats, preemption) -> Dict:
        if not self.is_chief:
            return worker_record(run, self.role, stats, preemption)
        step, later_eval = final_step(metrics, start_step), {}
        # Another worker's last update can land between the final evaluation and the final checkpoint,
        # either way round (asynchronous replicas): the run ends at the checkpoint's step, which a
        # restart continues from; the evaluation's own step is kept beside it.
        saved = latest_step(run.cfg.checkpoint.dir)
        if saved is not None and saved != step:
            later_eval, step = {"eval_step": int(step)}, saved
        extra = dict(role=self.role.name, local_steps=stats.steps,
                     cluster={job: list(a) for job, a in self.role.cluster.items()}, **later_eval)
        return chief_record(run, start_step, metrics, stats, preemption, step, extra)

    def report(self, result: Dict, workdir: str) -> None:
        if self.is_chief:
            report_chief(result, workdir)
        else:
            log.info("%s: done after %d steps of its own (global step %s); metrics in %s", self.role.name,
                     result["local_steps"], result["global_step"], os.path.join(workdir, "metrics.json"))

    def placement(self, device: str, replicas: int, precision: str) -> Placement:
        """Variables round-robin on the ps tasks, every other op on this task (its GPU when ``device`` is
        gpu); ``replicas`` (one process's towers) is refused for a cluster by the config's checks."""
        worker_device = self.role.device() + ("/device:GPU:0" if device == "gpu" else "/device:CPU:0")
        if self.collective:
            return Placement(device_fn=tf1.train.replica_device_setter(ps_tasks=0, worker_device=worker_device),
                             local_device=worker_device,
                             replicas=(self.role.num_replicas, self.role.replica_index, True),
                             loss_scale=precision == "fp16",
                             # A peer gone: the watchdog names it first; the ops' own timeout only backs it up.
                             collective=(self.role.num_replicas, self.role.is_chief, self.progress_timeout_secs + 30))
        setter = tf1.train.replica_device_setter(
            ps_tasks=len(self.role.cluster["ps"]), worker_device=worker_device,
            cluster=tf1.train.ClusterSpec({j: list(a) for j, a in self.role.cluster.items()}))
        replicas = self.role.num_replicas
        sync = (self.replicas_to_aggregate or replicas, replicas) if self.sync_replicas else None
        return Placement(device_fn=setter, local_device=worker_device, replicas=(replicas, self.role.replica_index),
                         sync=sync, loss_scale=precision == "fp16")

    def session_options(self, options, graph):
        """``options`` for this task: its master, the worker's wait for the chief."""
        options = replace(options, is_chief=self.role.is_chief, master=self.target, initializes=self.collective,
                          max_wait_secs=self.max_wait_secs, ready_poll_secs=self.ready_poll_secs)
        if graph.sync_optimizer is not None and self.role.is_chief:
            # SyncReplicasOptimizer's chief queue runner stays blocked for gradients that no longer
            # come: closing the session cancels it, so waiting the whole grace period is pointless.
            ignore_cancelled_queue_runners()
            options = replace(options, stop_grace_period_secs=min(options.stop_grace_period_secs, 3))
        return options

    def _waits_for(self) -> str:
        role = self.role
        return "the ps tasks" if role.is_chief else f"the chief ({role.describe(*role.chief)}) to initialise the model"

    def open_session(self, opener):
        """``opener()`` under the watchdog's start-up deadline; a worker's wait that runs out is a ClusterError."""
        waits_for = self._waits_for()
        log.info("%s: waiting up to %.0fs for %s", self.role.name, self.max_wait_secs, waits_for)
        self.watchdog.expect(self.max_wait_secs + (0 if self.role.is_chief else 30), f"waiting for {waits_for}")
        try:
            return opener()
        except tf.errors.DeadlineExceededError as e:
            raise ClusterError(f"{self.role.name}: gave up after distributed.max_wait_secs={self.max_wait_secs:g} "
                               f"waiting for {waits_for} ({e.message}); start it, or raise distributed.max_wait_secs") from None

    @staticmethod
    def at_normal_end(sess) -> None:
        """At the normal end, hooks' ``end()`` still runs (final checkpoint and evaluation), but the gRPC
        session is not closed: the process ends right after, and closing blocked on the ps for 5 to
        46 s at the end of cluster runs here (cause not found in TensorFlow)."""
        keep_session_open(sess)


@contextlib.contextmanager
def _going_on(claiming):
    """``claiming`` (a claim of the checkpoint dir) with a finished run's record dropped."""
    with claiming as claimed:
        yield Claim(claimed.start_step, None)


def collective_config(role: Role, config):
    """``config`` for a task of a collective cluster: it sees itself only, and the chief leads the
    collective ops (what ``MultiWorkerMirroredStrategy.update_config_proto`` sets)."""
    job, index = role.chief
    config.experimental.collective_group_leader = f"/job:{job}/replica:0/task:{index}"
    config.device_filters.append(role.device())
    return config


def task_dir(workdir: str, role: Role) -> str:
    """The chief works in the run dir itself (resuming as a single process does); every other task
    in ``<run dir>/tasks/<job>-<index>``."""
    return workdir if role.is_chief else os.path.join(workdir, "tasks", role.name)


def run_task(cfg, workdir: str, role: Role) -> Dict:
    """Run this process's role of the cluster; returns its result record."""
    dist = cfg.distributed
    here = task_dir(workdir, role)
    os.makedirs(here, exist_ok=True)
    log.info("%s of cluster %s%s", role.name, {j: list(a) for j, a in role.cluster.items()},
             " (the chief)" if role.is_chief else "")
    if role.job == "evaluator":
        return evaluate_continuously(cfg, here, role)
    watchdog = Watchdog(role)
    try:
        watchdog.expect(dist.max_wait_secs, "starting this task's server")
        collective = dist.strategy == "collective"
        server = start_server(role, config=collective_config(role, tf1.ConfigProto()) if collective else None,
                              quiet=not cfg.log.tf_verbose)
        if role.job == "ps":
            watchdog.stop()  # the ps has its own deadline: the training tasks' reachability
            result = serve_ps(role, server, dist.progress_timeout_secs)
            write_json(os.path.join(here, "metrics.json"), result)
            return result
        task = ClusterTask(role, server.target, watchdog, dist.sync_replicas, dist.replicas_to_aggregate,
                           dist.max_wait_secs, dist.ready_poll_secs, dist.progress_timeout_secs, collective)
        result = train(cfg, here, role=task)
        if result.get("status") == "finished" and role.cluster.get("ps"):
            signal_done(role, server.target, watchdog, dist.max_wait_secs)
        return result
    finally:
        watchdog.stop()
