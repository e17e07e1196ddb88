"""``distributed=local``: a whole cluster as local processes on one machine, from one command.

``launch`` picks free ports on ``distributed.host``, starts ``distributed.num_ps`` ps tasks and
``distributed.num_workers`` workers (worker 0 is the chief) as child processes, each running
``python -m trainer.cli.local_task`` with the run's config saved as YAML with ``distributed=cluster``
(the same code a real cluster runs), each writing ``<run dir>/logs/<job>-<index>.log``. It streams every task's new
log lines prefixed with the task's name, and returns the chief's metrics once every task has
ended. When a task fails the others are stopped and the run fails naming it; when a task
could not bind its port (another process took it after it was picked) the cluster is
started again on other ports.
"""

import copy
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

from omegaconf import OmegaConf

from trainer.checkpoints.guard import finished_run, metrics_path
from trainer.dist.roles import free_ports
from trainer.errors import ClusterError, PortInUseError, Preempted
from trainer.records import read_json

log = logging.getLogger("trainer")

START_ATTEMPTS = 3
STOP_GRACE_SECS = 20  # a stopped task's time to save and exit before it is killed


class _Task:
    def __init__(self, job: str, index: int, log_path: str):
        self.job, self.index, self.log_path = job, index, log_path
        self.name = f"{job}-{index}"
        self.proc: Optional[subprocess.Popen] = None
        self._offset, self._partial = 0, ""

    def new_lines(self) -> List[str]:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", "replace").replace("\r", "\n")
        lines = text.split("\n")
        self._partial = lines.pop()
        return [line for line in lines if line.strip()]

    def error_line(self) -> str:
        """The task's own one-line error, or its last log line."""
        try:
            with open(self.log_path, errors="replace") as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            return ""
        errors = [line for line in lines if line.startswith("error:")]
        return (errors or lines or [""])[-1]


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the launcher dies, so no task outlives it (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _spawn(task: _Task, config_path: str, output_dir: str) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("TF_CONFIG", None)
    with open(task.log_path, "ab") as out:
        task.proc = subprocess.Popen(
            [sys.executable, "-m", "trainer.cli.local_task", config_path, task.job, str(task.index), output_dir],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,  # signals reach the tasks through the launcher only
            preexec_fn=_die_with_parent,
        )


def _stop(tasks: List[_Task]) -> None:
    """SIGTERM the training tasks first (the chief saves a checkpoint while the ps tasks still hold
    the variables), then the ps tasks; kill whatever is left after the grace period."""
    for group in ([t for t in tasks if t.job != "ps"], [t for t in tasks if t.job == "ps"]):
        for task in group:
            if task.proc and task.proc.poll() is None:
                task.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECS
        for task in group:
            if task.proc:
                try:
                    task.proc.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    task.proc.kill()
                    task.proc.wait()


def _stream(tasks: List[_Task], width: int) -> None:
    for task in tasks:
        for line in task.new_lines():
            print(f"[{task.name:>{width}}] {line}", flush=True)


class _Signals:
    """SIGTERM / SIGINT to the launcher: forwarded to every task (the chief saves a checkpoint)."""

    def __init__(self):
        self.received = None
        self._saved = {}

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._saved[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, frame):
        self.received = signum

    def __exit__(self, *exc):
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)


def _supervise(tasks: List[_Task], chief: _Task, dist, signals: _Signals) -> str:
    """Watch the tasks until they all end: "finished", "port" (a port was taken: start again) or
    "preempted"; raises ClusterError when a task fails."""
    width = max(len(t.name) for t in tasks)
    forwarded, chief_done_at = False, None
    while True:
        time.sleep(0.3)
        _stream(tasks, width)
        if signals.received and not forwarded:
            log.warning("%s: stopping every task (the chief saves a checkpoint)", signal.Signals(signals.received).name)
            for task in tasks:
                if task.job != "ps" and task.proc.poll() is None:
                    task.proc.send_signal(signal.SIGTERM)
            forwarded = True
        codes = {task.name: task.proc.poll() for task in tasks}
        if forwarded:
            if all(code is not None for code in codes.values()):
                _stream(tasks, width)
                return "preempted"
            if all(codes[t.name] is not None for t in tasks if t.job != "ps"):
                for task in tasks:  # the workers are gone: the ps tasks have nothing left to serve
                    if task.proc.poll() is None:
                        task.proc.send_signal(signal.SIGTERM)
            continue
        for task in tasks:
            code = codes[task.name]
            if code in (None, 0):
                continue
            _stop(tasks)
            _stream(tasks, width)
            if code == PortInUseError.exit_code:
                log.warning("%s could not bind its port: %s", task.name, task.error_line())
                return "port"
            raise ClusterError(f"{task.name} failed (exit status {code}): {task.error_line()}; the other tasks were "
                               f"stopped; its log: {task.log_path}")
        if all(code == 0 for code in codes.values()):
            _stream(tasks, width)
            return "finished"
        if codes[chief.name] == 0:
            chief_done_at = chief_done_at or time.monotonic()
            if time.monotonic() - chief_done_at > dist.max_wait_secs + 30:
                left = [t for t in tasks if t.proc.poll() is None]
                _stop(tasks)
                raise ClusterError(f"the chief finished but {', '.join(t.name for t in left)} did not end within "
                                   f"{dist.max_wait_secs + 30:.0f}s; see {os.path.dirname(chief.log_path)}")


def launch(cfg, output_dir: str) -> Dict:
    """Run ``cfg`` on a local cluster of ``distributed.num_ps`` ps tasks and ``distributed.num_workers``
    workers; returns the chief's metrics.

    Raises:
      ClusterError: a task failed (the others are stopped), or the ports could not be bound.
      Preempted: the launcher got SIGTERM / SIGINT (every task was stopped; the chief saved).
    """
    dist = cfg.distributed
    num_ps = 0 if dist.strategy == "collective" else dist.num_ps
    previous = finished_run(cfg.checkpoint.dir, cfg.train.max_steps, output_dir)
    if previous:
        log.info("%s is already at step %d (train.max_steps=%s): nothing to do", output_dir,
                 previous["global_step"], cfg.train.max_steps)
        return previous
    logs = os.path.join(output_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    task_cfg = copy.deepcopy(cfg)
    OmegaConf.resolve(task_cfg)  # the tasks run outside Hydra: no ${hydra:...} left to resolve
    task_cfg.distributed.kind = "cluster"
    config_path = os.path.join(logs, "cluster-config.yaml")
    with _Signals() as signals:
        for attempt in range(1, START_ATTEMPTS + 1):
            ports = free_ports(dist.host, num_ps + dist.num_workers)
            cluster = {"worker": [f"{dist.host}:{p}" for p in ports[num_ps:]]}
            if num_ps:
                cluster["ps"] = [f"{dist.host}:{p}" for p in ports[:num_ps]]
            task_cfg.distributed.cluster = cluster
            with open(config_path + ".tmp", "w") as f:
                f.write(OmegaConf.to_yaml(task_cfg))
            os.replace(config_path + ".tmp", config_path)
            tasks = [_Task(job, i, os.path.join(logs, f"{job}-{i}.log"))
                     for job in ("ps", "worker") for i in range(len(cluster.get(job, ())))]
            log.info("local cluster %s; logs in %s", cluster, logs)
            try:
                for task in tasks:
                    _spawn(task, config_path, output_dir)
                outcome = _supervise(tasks, tasks[num_ps], dist, signals)
            # broad: whatever ends the launcher (Ctrl-C included), its tasks are stopped; the error goes on
            except BaseException:
                _stop(tasks)
                raise
            if outcome != "port":
                break
            if attempt == START_ATTEMPTS:
                raise ClusterError(f"could not start the local cluster: a port was taken {START_ATTEMPTS} times; "
                                   f"see {logs}")
            log.warning("starting the local cluster again on other ports (attempt %d/%d)", attempt + 1, START_ATTEMPTS)
    result = read_json(metrics_path(output_dir))
    if outcome == "preempted":
        code = 130 if signals.received == signal.SIGINT else 143
        raise Preempted(result.get("message") or f"stopped by {signal.Signals(signals.received).name}; "
                        "run the same command to resume", code)
    result["logs"] = logs
    return result
