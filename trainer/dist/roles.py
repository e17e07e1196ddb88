"""Who this process is in a TensorFlow cluster: the ``distributed`` config (or ``TF_CONFIG``)
read into a ``Role``, checked before any TensorFlow work.

Pure Python (no TensorFlow import): the config checks (``trainer.config.rules``) and run-dir naming use it too.
"""

import json
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from trainer.errors import ConfigError

log = logging.getLogger("trainer")

DISTRIBUTED_KINDS = ("cluster", "tf_config", "slurm")  # this process is one task of a cluster
TRAINING_JOBS = ("chief", "worker")
CLUSTER_JOBS = ("chief", "worker", "ps")
ROLE_JOBS = CLUSTER_JOBS + ("evaluator",)


@dataclass(frozen=True)
class Role:
    """One task of a cluster (or the single process of ``distributed=none``)."""

    kind: str  # none | cluster | tf_config | local | slurm
    cluster: Dict[str, Tuple[str, ...]] = field(default_factory=dict)  # job -> addresses; no evaluator
    job: str = "chief"
    index: int = 0

    @property
    def distributed(self) -> bool:
        return self.kind in DISTRIBUTED_KINDS

    @property
    def name(self) -> str:
        """``worker-1``: used in log lines, log files and the task's dir."""
        return f"{self.job}-{self.index}"

    @property
    def is_chief(self) -> bool:
        """The chief job's task, or worker 0 when there is no chief job (TensorFlow's convention)."""
        if not self.distributed:
            return True
        if self.job == "chief":
            return True
        return self.job == "worker" and self.index == 0 and not self.cluster.get("chief")

    @property
    def training_tasks(self) -> List[Tuple[str, int]]:
        """(job, index) of every task that trains: the chief first, then the workers."""
        return [(job, i) for job in TRAINING_JOBS for i in range(len(self.cluster.get(job, ())))]

    @property
    def num_replicas(self) -> int:
        return max(len(self.training_tasks), 1)

    @property
    def replica_index(self) -> int:
        """This training task's position among ``training_tasks`` (0 for the chief)."""
        tasks = self.training_tasks
        return tasks.index((self.job, self.index)) if (self.job, self.index) in tasks else 0

    @property
    def address(self) -> Optional[str]:
        addresses = self.cluster.get(self.job, ())
        return addresses[self.index] if self.index < len(addresses) else None

    @property
    def chief(self) -> Tuple[str, int]:
        return ("chief", 0) if self.cluster.get("chief") else ("worker", 0)

    def device(self, job: Optional[str] = None, index: Optional[int] = None) -> str:
        return f"/job:{job or self.job}/task:{self.index if index is None else index}"

    def describe(self, job: str, index: int) -> str:
        return f"{job} {index} at {self.cluster[job][index]}"


def _split_address(key: str, address) -> Tuple[str, int]:
    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{key}: {address!r} is not host:port; give addresses such as 10.0.0.1:2222")
    return host.strip("[]"), int(port)


def _check_cluster(cluster, source: str, strategy: str = "ps") -> Dict[str, Tuple[str, ...]]:
    if not cluster:
        raise ConfigError(f"{source} is not set; give {{ps: [host:port], worker: [host:port, ...]}} (and chief: [host:port] if you want a separate chief)")
    checked = {}
    for job, addresses in dict(cluster).items():
        if job not in CLUSTER_JOBS:
            hint = " (the evaluator is not part of the cluster: leave it out)" if job == "evaluator" else ""
            raise ConfigError(f"{source}.{job}: unknown job{hint}; the jobs are chief, worker and ps")
        if isinstance(addresses, str) or addresses is None:
            raise ConfigError(f"{source}.{job}: must be a list of host:port addresses, e.g. [\"10.0.0.1:2222\"]")
        for address in addresses:
            _split_address(f"{source}.{job}", address)
        checked[job] = tuple(str(a) for a in addresses)
    if len(checked.get("chief", ())) > 1:
        raise ConfigError(f"{source}.chief has {len(checked['chief'])} tasks; a cluster has at most one chief")
    if strategy == "collective" and checked.get("ps"):
        raise ConfigError(f"{source} has ps tasks, but distributed.strategy=collective keeps the variables on every "
                          "worker and all-reduces the gradients: remove the ps job, or use distributed.strategy=ps")
    if strategy != "collective" and not checked.get("ps"):
        raise ConfigError(f"{source} has no ps task; between-graph training keeps the variables on ps tasks: add ps: [host:port]")
    if not (checked.get("chief") or checked.get("worker")):
        raise ConfigError(f"{source} has no chief or worker task; add worker: [host:port, ...]")
    every = [a for addresses in checked.values() for a in addresses]
    duplicates = sorted({a for a in every if every.count(a) > 1})
    if duplicates:
        raise ConfigError(f"{source}: {', '.join(duplicates)} is given to more than one task; give every task its own port")
    return checked


def _check_task(cluster, job, index, job_key: str, index_key: str) -> None:
    if job is None:
        raise ConfigError(f"{job_key} is not set; give this task's job: one of {', '.join(j for j in ROLE_JOBS)}")
    if job not in ROLE_JOBS:
        raise ConfigError(f"{job_key}={job}: unknown job; use one of {', '.join(ROLE_JOBS)}")
    if job == "evaluator":
        if index != 0:
            raise ConfigError(f"{index_key}={index}: there is one evaluator; use 0")
        return
    tasks = len(cluster.get(job, ()))
    if tasks == 0:
        raise ConfigError(f"{job_key}={job}: the cluster has no {job} job; use one of {', '.join(sorted(cluster))}")
    if not 0 <= index < tasks:
        raise ConfigError(f"{index_key}={index}: job {job} has {tasks} task(s), so the index must be 0..{tasks - 1}")


def read_tf_config(environ=None) -> Tuple[Dict, str, int]:
    """(cluster, task type, task index) from ``TF_CONFIG``."""
    environ = os.environ if environ is None else environ
    raw = environ.get("TF_CONFIG")
    if not raw:
        raise ConfigError("distributed=tf_config: the TF_CONFIG environment variable is not set; set it "
                          "(as training operators do) or use distributed=cluster with distributed.cluster")
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"TF_CONFIG is not valid JSON ({e}); give {{\"cluster\": {{...}}, \"task\": {{\"type\": ..., \"index\": ...}}}}") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("task"), dict):
        raise ConfigError("TF_CONFIG has no task; give \"task\": {\"type\": \"worker\", \"index\": 0}")
    task = parsed["task"]
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise ConfigError(f"TF_CONFIG task.index={task.get('index')!r}: must be an integer") from None
    return parsed.get("cluster") or {}, task.get("type"), index


def resolve_role(dist, environ=None) -> Role:
    """The Role that ``distributed`` (a DistributedConfig) gives this process.

    Raises:
      ConfigError: the cluster or the role is malformed, named in one line.
    """
    environ = os.environ if environ is None else environ
    kind = dist.kind
    if kind == "none":
        return Role("none")
    strategy = str(dist.strategy)
    if kind == "local":
        for key in ("num_workers",) if strategy == "collective" else ("num_ps", "num_workers"):
            if getattr(dist, key) < 1:
                raise ConfigError(f"distributed.{key}={getattr(dist, key)}: distributed=local needs at least 1")
        return Role("local")
    if kind == "cluster":
        cluster = _check_cluster(dist.cluster, "distributed.cluster", strategy)
        _check_task(cluster, dist.job_name, dist.task_index, "distributed.job_name", "distributed.task_index")
        return Role("cluster", cluster, dist.job_name, int(dist.task_index))
    if kind == "tf_config":
        raw_cluster, job, index = read_tf_config(environ)
        cluster = _check_cluster(raw_cluster, "TF_CONFIG cluster", strategy)
        _check_task(cluster, job, index, "TF_CONFIG task.type", "TF_CONFIG task.index")
        return Role("tf_config", cluster, job, index)
    if kind == "slurm":
        cluster, job, index = read_slurm(dist, environ)
        return Role("slurm", _check_cluster(cluster, "the SLURM cluster", strategy), job, index)
    raise NotImplementedError(f"distributed.kind={kind!r}; use none, cluster, tf_config, local or slurm")


SLURM_VARIABLES = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")


def read_slurm(dist, environ=None) -> Tuple[Dict, str, int]:
    """(cluster, job, index) from the environment ``srun`` gives each task, through TensorFlow's
    ``SlurmClusterResolver``: the step's tasks in rank order, the first ``distributed.num_ps`` the
    ps tasks (none under ``distributed.strategy=collective``), the rest workers (worker 0 the
    chief); each node's tasks on ``distributed.port_base``, ``port_base + 1``, ... GPUs are TF's to
    share out (``CUDA_VISIBLE_DEVICES`` per task) where the node has them.

    Raises:
      ConfigError: not inside a SLURM job step, or fewer tasks than ps tasks + 1.
    """
    environ = os.environ if environ is None else environ
    missing = [name for name in SLURM_VARIABLES if name not in environ]
    if missing:
        raise ConfigError(f"distributed=slurm: {', '.join(missing)} not set; run each task under srun (e.g. srun "
                          "--ntasks=3 train ... distributed=slurm), or use distributed=cluster")
    num_ps = 0 if str(dist.strategy) == "collective" else int(dist.num_ps)
    tasks = int(environ["SLURM_STEP_NUM_TASKS"])
    if tasks <= num_ps:
        raise ConfigError(f"distributed.num_ps={num_ps}: the SLURM step has {tasks} task(s), none left to train; "
                          f"run more tasks (srun --ntasks={num_ps + 1} or more) or lower distributed.num_ps")
    from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import SlurmClusterResolver, get_num_gpus

    saved = {name: os.environ.get(name) for name in SLURM_VARIABLES}
    os.environ.update({name: environ[name] for name in SLURM_VARIABLES})  # the resolver reads os.environ
    try:
        jobs = {"worker": tasks - num_ps, **({"ps": num_ps} if num_ps else {})}
        per_node = max(int(n.split("(")[0]) for n in environ["SLURM_STEP_TASKS_PER_NODE"].split(","))
        gpus = _gpus_per_node(get_num_gpus)
        resolver = SlurmClusterResolver(jobs=jobs, port_base=int(dist.port_base),
                                        gpus_per_node=gpus or per_node, gpus_per_task=None if gpus else 1,
                                        auto_set_gpu=bool(gpus))
        cluster = {job: list(addresses) for job, addresses in resolver.cluster_spec().as_dict().items()}
        job, index = resolver.get_task_info()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return cluster, job, int(index)


def _gpus_per_node(count) -> int:
    """The node's GPUs as TensorFlow's SLURM resolver counts them; 0 where there is no nvidia-smi.
    (With none, the resolver is given one per task and leaves CUDA_VISIBLE_DEVICES alone: it
    cannot place tasks on a node without GPUs otherwise.)"""
    try:
        return int(count())
    except (OSError, RuntimeError, ValueError):
        return 0


def check_distributed(cfg) -> None:
    """The cross-field rules of a cluster run (``trainer.config.rules.validate`` calls this)."""
    dist = cfg.distributed
    role = resolve_role(dist)
    if role.kind == "none":
        return
    for key in ("max_wait_secs", "ready_poll_secs", "progress_timeout_secs"):
        if not getattr(dist, key) > 0:
            raise ConfigError(f"distributed.{key}={getattr(dist, key):g}: must be > 0")
    session = cfg.session.kind
    if session != "monitored":
        raise ConfigError(f"session={session}: a cluster needs MonitoredTrainingSession's chief/worker coordination "
                          "(readiness waits, recovery); use session=monitored")
    mode = cfg.mode
    if mode not in ("train", "train_and_evaluate"):
        raise ConfigError(f"mode={mode}: a cluster only trains; run mode={mode} with distributed=none on the chief's checkpoint dir")
    if dist.strategy == "collective" and dist.sync_replicas:
        raise ConfigError("distributed.sync_replicas=true: with distributed.strategy=collective every step is already "
                          "synchronous (the gradients are all-reduced); drop sync_replicas")
    if dist.sync_replicas and cfg.train.on_nan == "skip_step":
        raise ConfigError("train.on_nan=skip_step: SyncReplicasOptimizer's update cannot be guarded; use train.on_nan=stop "
                          "with distributed.sync_replicas=true")
    if role.kind == "local":
        replicas = dist.num_workers
    else:
        replicas = role.num_replicas
    if dist.replicas_to_aggregate is not None and not 1 <= dist.replicas_to_aggregate <= replicas:
        raise ConfigError(f"distributed.replicas_to_aggregate={dist.replicas_to_aggregate}: must be 1..{replicas} "
                          "(the training tasks); or null for all of them")


def probe(address: str, timeout: float = 2.0) -> Optional[str]:
    """None if something listens at ``address``, else why not (``connection refused``, ``timed out``)."""
    host, port = _split_address("address", address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__.replace("Error", " error").lower() or str(e)


def unreachable(role: Role, tasks=None) -> List[str]:
    """'ps 0 at 127.0.0.1:2222 (connection refused)' for each task of ``tasks`` (default: every other task)
    that does not answer."""
    if tasks is None:
        tasks = [(job, i) for job in role.cluster for i in range(len(role.cluster[job]))
                 if (job, i) != (role.job, role.index)]
    found = []
    for job, index in tasks:
        why = probe(role.cluster[job][index])
        if why:
            found.append(f"{role.describe(job, index)} ({why})")
    return found


def free_ports(host: str, count: int) -> List[int]:
    """``count`` distinct ports nothing listens on now (the kernel's pick; another process may
    still take one before the task binds it: the local launcher retries on that)."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


def port_in_use(port: int) -> bool:
    """Whether ``port`` is taken on any interface (TensorFlow's server binds them all)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return True
    return False
