"""One task of a TensorFlow cluster (between-graph replication over gRPC): what each role does.

- ps: starts its ``Server`` and serves until every training task has said it is done
  (a token in a queue hosted on each ps), then exits 0 by itself.
- chief / worker: start their ``Server``, build the graph under ``replica_device_setter``
  (variables on the ps tasks) and train through ``trainer.train.run`` with
  ``master=server.target``; then put their done token on every ps.
- evaluator: evaluates each new checkpoint of the chief's checkpoint dir until the one
  at ``train.max_steps``.

Stock TensorFlow waits for ever on a task that is gone: every task here runs a
``Watchdog`` that exits the process (status 5) when it makes no progress within
``distributed.max_wait_secs`` (start-up) or ``distributed.progress_timeout_secs``
(training), naming the tasks that do not answer.
"""

import copy
import logging
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, Optional

from trainer.cluster import Role, port_in_use, unreachable
from trainer.tfenv import quiet_stderr
from trainer.errors import ClusterError, PortInUseError

log = logging.getLogger("trainer")

DONE_QUEUE = "trainer_done_queue_ps{}"


@dataclass
class ClusterContext:
    """What ``trainer.train.run`` needs to train as one task of a cluster."""

    role: Role
    target: str  # the master: this task's own server
    watchdog: "Watchdog"
    sync_replicas: bool = False
    replicas_to_aggregate: Optional[int] = None
    max_wait_secs: float = 120.0
    ready_poll_secs: float = 1.0
    progress_timeout_secs: float = 600.0

    def device_filters(self):
        """Sessions see the ps tasks and this task only: a restarting worker does not stall the others."""
        return ["/job:ps", self.role.device()]


def task_dir(output_dir: str, role: Role) -> str:
    """The chief works in the run dir itself (resuming as a single process does); every other task
    in ``<run dir>/tasks/<job>-<index>``."""
    if role.is_chief:
        return output_dir
    return os.path.join(output_dir, "tasks", role.name)


class Watchdog:
    """Exits the process when the deadline set by ``expect`` passes without a ``beat``.

    TensorFlow's gRPC calls to a task that is gone block for ever (``operation_timeout_in_ms``
    and RunOptions timeouts do not end them): only a separate thread can end the process.
    """

    def __init__(self, role: Role, exit=os._exit):
        self._role, self._exit = role, exit
        self._lock = threading.Lock()
        self._deadline, self._secs, self._doing = None, 0.0, ""
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trainer-watchdog", daemon=True)
        self._thread.start()

    def expect(self, secs: float, doing: str) -> None:
        """From now on, fail unless the next ``beat`` (or ``expect``) comes within ``secs``."""
        with self._lock:
            self._deadline, self._secs, self._doing = time.monotonic() + secs, secs, doing

    def beat(self) -> None:
        with self._lock:
            if self._deadline is not None:
                self._deadline = time.monotonic() + self._secs

    def stop(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(0.5):
            with self._lock:
                late = self._deadline is not None and time.monotonic() > self._deadline
                secs, doing = self._secs, self._doing
            if late and not self._stopped.is_set():
                self._fail(secs, doing)
                return

    def _fail(self, secs: float, doing: str) -> None:
        gone = unreachable(self._role)
        who = ("unreachable: " + "; ".join(gone)) if gone else "every task answers, so one of them is stuck"
        message = (f"{self._role.name}: no progress for {secs:.0f}s while {doing}; {who}. Restart the missing task, "
                   "or raise distributed.max_wait_secs / distributed.progress_timeout_secs")
        log.error(message)
        _flush_logs()
        print(f"error: {message}", file=sys.stderr, flush=True)
        self._exit(ClusterError.exit_code)


def make_watchdog_hook(tf, watchdog: Watchdog, progress_timeout_secs: float):
    class WatchdogHook(tf.compat.v1.train.SessionRunHook):
        """A session created starts the training deadline; each step done renews it."""

        def after_create_session(self, session, coord):
            watchdog.expect(progress_timeout_secs, "training (each step, with its hooks)")

        def after_run(self, run_context, run_values):
            watchdog.beat()

    return WatchdogHook()


def start_server(tf, role: Role, config=None, quiet: bool = True):
    """This task's ``tf.compat.v1.train.Server``.

    Raises:
      PortInUseError: another process holds this task's port.
    """
    tf1 = tf.compat.v1
    address = role.address
    port = int(address.rsplit(":", 1)[1])
    in_use = (f"{role.name} cannot listen on port {port} (its address {address} in the cluster): the port is in use; "
              "stop what holds it or give this task another port")
    if port_in_use(port):
        raise PortInUseError(in_use)
    log.warning("%s: TensorFlow's gRPC server listens on all interfaces (*:%d), not only %s, and does not "
                "authenticate: keep the cluster on a private network", role.name, port, address.rsplit(":", 1)[0])
    try:
        with quiet_stderr(quiet):  # CUDA's probing and gRPC's bind errors: reported here instead
            server = tf1.train.Server(tf1.train.ClusterSpec({j: list(a) for j, a in role.cluster.items()}),
                                      job_name=role.job, task_index=role.index, config=config, start=True)
    except tf.errors.UnknownError as e:
        if "Could not start gRPC server" in str(e):
            raise PortInUseError(in_use) from None
        raise
    log.info("%s: server started at %s", role.name, server.target)
    return server


def make_device_setter(tf, role: Role, device: str):
    """Variables round-robin on the ps tasks, every other op on this task (its GPU when ``device`` is gpu)."""
    worker_device = role.device() + ("/device:GPU:0" if device == "gpu" else "/device:CPU:0")
    return tf.compat.v1.train.replica_device_setter(
        ps_tasks=len(role.cluster["ps"]), worker_device=worker_device,
        cluster=tf.compat.v1.train.ClusterSpec({j: list(a) for j, a in role.cluster.items()}),
    )


def _done_queues(tf, role: Role):
    """One queue per ps task, shared by name across the tasks' graphs; capacity for restarted workers' tokens."""
    tf1 = tf.compat.v1
    queues = []
    for i in range(len(role.cluster["ps"])):
        with tf.device(f"/job:ps/task:{i}"):
            queues.append(tf1.FIFOQueue(1024, tf.string, shapes=[[]], shared_name=DONE_QUEUE.format(i),
                                        name=f"done_queue_ps{i}"))
    return queues


def signal_done(tf, role: Role, target: str, watchdog: Watchdog, max_wait_secs: float) -> None:
    """Put this training task's done token on every ps queue."""
    tf1 = tf.compat.v1
    watchdog.expect(max_wait_secs, "telling the ps tasks this task is done")
    graph = tf.Graph()
    with graph.as_default():
        enqueue = tf.group(*[q.enqueue(tf.constant(role.name)) for q in _done_queues(tf, role)])
        config = tf1.ConfigProto(device_filters=["/job:ps", role.device()])
        # Not closed: the last token ends the ps at once, so a close would only log a failed
        # CleanupGraph on it; the process exits right after.
        tf1.Session(target, config=config).run(enqueue)
    log.info("%s: done; told %d ps task(s)", role.name, len(role.cluster["ps"]))


def serve_ps(tf, role: Role, server, progress_timeout_secs: float) -> Dict:
    """Serve the variables until every training task is done; fail when all of those not done yet
    are unreachable for ``progress_timeout_secs``."""
    tf1 = tf.compat.v1
    waiting = {f"{job}-{i}" for job, i in role.training_tasks}
    graph = tf.Graph()
    with graph.as_default():
        dequeue = _done_queues(tf, role)[role.index].dequeue()
    sess = tf1.Session(server.target, graph=graph, config=tf1.ConfigProto(device_filters=[role.device()]))
    # A blocking dequeue in its own thread: a step timeout (RunOptions) would make the master
    # abort a step every few seconds, and aborted steps stall the ps for everyone.
    done = queue.Queue()

    def take_tokens():
        while True:
            done.put(sess.run(dequeue).decode())

    threading.Thread(target=take_tokens, name="trainer-done-tokens", daemon=True).start()
    log.info("%s: serving until %s are done", role.name, ", ".join(sorted(waiting)))
    gone_since = None
    while waiting:
        try:
            name = done.get(timeout=2.0)
        except queue.Empty:
            pending = [tuple(n.rsplit("-", 1)) for n in sorted(waiting)]
            gone = unreachable(role, [(job, int(i)) for job, i in pending])
            if len(gone) < len(pending):
                gone_since = None
            elif gone_since is None:
                gone_since = time.monotonic()
            elif time.monotonic() - gone_since > progress_timeout_secs:
                raise ClusterError(
                    f"{role.name}: every training task not done yet has been unreachable for "
                    f"{progress_timeout_secs:.0f}s ({'; '.join(gone)}); the ps stops. Restart them and this ps"
                ) from None
            continue
        if name in waiting:
            waiting.discard(name)
            log.info("%s: %s is done%s", role.name, name,
                     f"; waiting for {', '.join(sorted(waiting))}" if waiting else "")
    log.info("%s: every training task is done; stopping", role.name)
    return {"status": "finished", "role": role.name, "pid": os.getpid(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def exit_process(code: int = 0) -> None:
    """End a cluster task's process now, its logs flushed.

    TensorFlow cannot stop a started gRPC server (``GrpcServer::Stop`` is unimplemented): ending
    the process closes its port at once, so the other tasks see it gone, instead of a server
    lingering through the interpreter's teardown.
    """
    _flush_logs()
    os._exit(code)


def _flush_logs() -> None:
    """Before ``os._exit``: what the log handlers and std streams hold reaches the files."""
    for handler in logging.getLogger().handlers + log.handlers:
        try:
            handler.flush()
        except Exception:
            pass
    sys.stdout.flush()
    sys.stderr.flush()


def run_task(cfg, output_dir: str, role: Role) -> Dict:
    """Run this process's role of the cluster; returns its result record."""
    from trainer.tfenv import import_tensorflow
    from trainer.train import prepare_config, run, write_json

    output_dir = os.path.abspath(output_dir)
    cfg = prepare_config(cfg, output_dir)  # the chief's checkpoint dir, for every role
    dist = cfg.distributed
    here = task_dir(output_dir, role)
    os.makedirs(here, exist_ok=True)
    log.info("%s of cluster %s%s", role.name, {j: list(a) for j, a in role.cluster.items()},
             " (the chief)" if role.is_chief else "")
    if role.job == "evaluator":
        return evaluate_continuously(cfg, here, role)
    tf = import_tensorflow(cfg.log.tf_verbose)
    watchdog = Watchdog(role)
    try:
        watchdog.expect(dist.max_wait_secs, "starting this task's server")
        server = start_server(tf, role, quiet=not cfg.log.tf_verbose)
        if role.job == "ps":
            watchdog.stop()  # the ps has its own deadline: the training tasks' reachability
            result = serve_ps(tf, role, server, dist.progress_timeout_secs)
            write_json(os.path.join(here, "metrics.json"), result)
            return result
        context = ClusterContext(role, server.target, watchdog, dist.sync_replicas, dist.replicas_to_aggregate,
                                 dist.max_wait_secs, dist.ready_poll_secs, dist.progress_timeout_secs)
        result = run(cfg, here, cluster=context)
        if result.get("status") == "finished":
            signal_done(tf, role, server.target, watchdog, dist.max_wait_secs)
        return result
    finally:
        watchdog.stop()


def evaluate_continuously(cfg, output_dir: str, role: Role) -> Dict:
    """The evaluator: each new checkpoint of ``checkpoint.dir``, until the one at ``train.max_steps``."""
    from trainer.checkpoints import checkpoint_step
    from trainer.modes import evaluate
    from trainer.tfenv import import_tensorflow

    tf = import_tensorflow(cfg.log.tf_verbose)
    ckpt_dir = os.path.abspath(os.path.expanduser(cfg.checkpoint.dir))
    timeout = cfg.distributed.progress_timeout_secs
    log.info("%s: evaluating each new checkpoint in %s until step %d", role.name, ckpt_dir, cfg.train.max_steps)
    eval_cfg = copy.deepcopy(cfg)
    eval_cfg.distributed.kind = "none"  # evaluate() reads checkpoints only: no cluster, no ps
    result = None
    for path in tf.train.checkpoints_iterator(ckpt_dir, min_interval_secs=1, timeout=timeout):
        eval_cfg.eval.checkpoint = path
        result = evaluate(eval_cfg, output_dir)
        if checkpoint_step(path) >= cfg.train.max_steps:
            return result
    raise ClusterError(f"{role.name}: no new checkpoint in {ckpt_dir} for {timeout:.0f}s (last evaluated: "
                       f"{result and result.get('checkpoint')}); is the chief running? "
                       "Raise distributed.progress_timeout_secs for longer gaps")
