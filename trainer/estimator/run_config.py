"""``RunConfig`` as a program builds it for an Estimator: Estimator's fields and defaults, ``replace``,
and the cluster read from ``TF_CONFIG`` as Estimator read it. Each field becomes a key of the
runner's config (:meth:`RunConfig.settings`); a field the runner cannot honour is refused in one
line naming it, never ignored."""

import json
import numbers
import os
from typing import Any, Dict, List, Optional

from trainer.errors import ArgumentError

_DEFAULT = object()  # save_checkpoints_steps / secs left unset: Estimator's 600 seconds

# Fields the runner has no equivalent for: refused when set.
_UNSUPPORTED = ("device_fn", "eval_distribute", "experimental_distribute", "experimental_max_worker_delay_secs",
                "protocol")


class RunConfig:
    """Estimator's RunConfig: how often to save and log, the seed, the session's ConfigProto, and this
    process's place in a cluster (``TF_CONFIG``)."""

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100, save_checkpoints_steps=_DEFAULT,
                 save_checkpoints_secs=_DEFAULT, session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100, train_distribute=None, device_fn=None,
                 protocol=None, eval_distribute=None, experimental_distribute=None,
                 experimental_max_worker_delay_secs=None, session_creation_timeout_secs=7200,
                 checkpoint_save_graph_def=True):
        if save_checkpoints_steps is not _DEFAULT and save_checkpoints_secs is not _DEFAULT \
                and save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError("Can not provide both save_checkpoints_steps and save_checkpoints_secs.")
        if save_checkpoints_steps is _DEFAULT and save_checkpoints_secs is _DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, 600
        elif save_checkpoints_steps is _DEFAULT:
            save_checkpoints_steps = None
        elif save_checkpoints_secs is _DEFAULT:
            save_checkpoints_secs = None
        self.model_dir = model_dir
        self.tf_random_seed = tf_random_seed
        self.save_summary_steps = save_summary_steps
        self.save_checkpoints_steps = save_checkpoints_steps
        self.save_checkpoints_secs = save_checkpoints_secs
        self.session_config = session_config
        self.keep_checkpoint_max = keep_checkpoint_max
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self.log_step_count_steps = log_step_count_steps
        self.train_distribute = train_distribute
        self.device_fn = device_fn
        self.protocol = protocol
        self.eval_distribute = eval_distribute
        self.experimental_distribute = experimental_distribute
        self.experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self.session_creation_timeout_secs = session_creation_timeout_secs
        self.checkpoint_save_graph_def = checkpoint_save_graph_def
        self._check_fields()
        self._read_cluster(os.environ.get("TF_CONFIG"))

    def _check_fields(self) -> None:
        """Each field holds what Estimator's RunConfig took (None where it took None).

        Raises:
          ArgumentError: naming the field and what it takes.
        """
        for name, kind, least in _FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            is_kind = isinstance(value, numbers.Integral if kind == "integer" else numbers.Real)
            if isinstance(value, bool) or not is_kind or (least is not None and value < least) or \
                    (least is None and kind == "number" and value <= 0):
                bound = f" >= {least}" if least is not None else " > 0" if kind == "number" else ""
                article = "an" if kind == "integer" else "a"
                raise ArgumentError(f"RunConfig({name}={value!r}): takes {article} {kind}{bound} or None")
        if self.model_dir is not None and not isinstance(self.model_dir, (str, os.PathLike)):
            raise ArgumentError(f"RunConfig(model_dir={self.model_dir!r}): takes a path (a str) or None")

    def _read_cluster(self, raw: Optional[str]) -> None:
        config = _tf_config(raw)
        cluster = config.get("cluster") or {}
        task = config.get("task") or {}
        self.cluster_spec: Dict[str, List[str]] = {job: list(a) for job, a in cluster.items()}
        self.task_type = task.get("type", "worker")
        self.task_id = task.get("index", 0)
        self.num_ps_replicas = len(cluster.get("ps", ()))
        self.num_worker_replicas = max(len(cluster.get("chief", ())) + len(cluster.get("worker", ())), 1)
        has_chief = bool(cluster.get("chief"))
        self.is_chief = (not cluster) or self.task_type == "chief" or (
            not has_chief and self.task_type == "worker" and self.task_id == 0)
        address = cluster.get(self.task_type, [None] * (self.task_id + 1))
        self.master = f"grpc://{address[self.task_id]}" if cluster and self.task_type != "evaluator" else ""
        self.evaluation_master = ""
        self.global_id_in_cluster = (0 if self.task_type == "chief" else
                                     self.task_id + (1 if has_chief else 0) if self.task_type == "worker" else 0)
        self.service = None

    @property
    def distributed(self) -> bool:
        """Whether ``TF_CONFIG`` places this process in a cluster of more than one task."""
        return sum(len(a) for a in self.cluster_spec.values()) > 1

    def replace(self, **kwargs) -> "RunConfig":
        """A copy with ``kwargs`` changed (the cluster is read from ``TF_CONFIG`` again)."""
        known = set(RunConfig.__init__.__code__.co_varnames[1:RunConfig.__init__.__code__.co_argcount])
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"RunConfig.replace: {unknown} are not RunConfig fields")
        fields = {k: getattr(self, k) for k in known}
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" not in kwargs:
            fields["save_checkpoints_secs"] = None
        if "save_checkpoints_secs" in kwargs and "save_checkpoints_steps" not in kwargs:
            fields["save_checkpoints_steps"] = None
        fields.update(kwargs)
        return RunConfig(**fields)

    def settings(self) -> Dict[str, Any]:
        """The runner's config keys for these fields, with their values.

        Raises:
          ValueError: a field the runner cannot honour is set (naming it).
        """
        for name in _UNSUPPORTED:
            if getattr(self, name) is not None:
                raise ValueError(f"RunConfig({name}=...): the runner has no equivalent; leave it unset")
        out = {**_strategy_settings(self.train_distribute, self.distributed), "train.seed": _plain(self.tf_random_seed),
               "summary.every_steps": _plain(self.save_summary_steps or 0),
               "checkpoint.every_steps": _plain(self.save_checkpoints_steps),
               "checkpoint.every_secs": _plain(self.save_checkpoints_secs),
               "checkpoint.keep": _plain(self.keep_checkpoint_max or 0),  # None or 0: Estimator kept every checkpoint
               "checkpoint.keep_every_n_hours": _plain(self.keep_checkpoint_every_n_hours or 10000)}
        if self.log_step_count_steps:  # None or 0: no step rate lines; the runner's progress keeps its default
            out["log.every_steps"] = _plain(self.log_step_count_steps)
        return {**out, **_session_config_settings(self.session_config)}


# (field, "integer" or "number", the least value; None: any integer, a number > 0): what Estimator's
# RunConfig validated.
_FIELDS = (("tf_random_seed", "integer", None), ("save_summary_steps", "integer", 0),
           ("save_checkpoints_steps", "integer", 0), ("save_checkpoints_secs", "number", 0),
           ("keep_checkpoint_max", "integer", 0), ("keep_checkpoint_every_n_hours", "number", None),
           ("log_step_count_steps", "integer", 1), ("session_creation_timeout_secs", "number", None))


def _tf_config(raw: Optional[str]) -> Dict:
    """``TF_CONFIG`` read and checked: a JSON object whose ``cluster`` maps job names to address lists and
    whose ``task`` has a string ``type`` and an integer ``index`` within its job.

    Raises:
      ArgumentError: naming TF_CONFIG and what is wrong.
    """
    if not raw:
        return {}
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise ArgumentError(f"TF_CONFIG is not JSON ({e}); set it to a JSON object with cluster and task") from None
    if not isinstance(config, dict):
        raise ArgumentError(f"TF_CONFIG is a {type(config).__name__}; set it to a JSON object with cluster and task")
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    if not isinstance(cluster, dict) or not all(isinstance(a, list) for a in cluster.values()):
        raise ArgumentError('TF_CONFIG: cluster must map each job to a list of addresses, e.g. {"worker": '
                            '["host:port"]}')
    if not isinstance(task, dict):
        raise ArgumentError('TF_CONFIG: task must be an object, e.g. {"type": "worker", "index": 0}')
    kind, index = task.get("type", "worker"), task.get("index", 0)
    if not isinstance(kind, str):
        raise ArgumentError(f"TF_CONFIG: task.type is {kind!r}; give a job name of the cluster")
    try:
        index = int(index)  # Estimator took "1" as 1
    except (TypeError, ValueError):
        index = -1
    if isinstance(task.get("index"), bool) or index < 0:
        raise ArgumentError(f"TF_CONFIG: task.index is {task.get('index')!r}; give an integer from 0")
    task["index"] = index
    if cluster and kind in cluster and index >= len(cluster[kind]):
        raise ArgumentError(f"TF_CONFIG: task.index {index} is past the {len(cluster[kind])} address(es) of job "
                            f"{kind!r}")
    return config


# train_distribute's classes (TF 2's and tf.compat.v1's names) and what the runner runs for each.
TOWERS = ("MirroredStrategy", "MirroredStrategyV1", "CentralStorageStrategy", "CentralStorageStrategyV1")
COLLECTIVE = ("CollectiveAllReduceStrategy", "CollectiveAllReduceStrategyV1")  # MultiWorkerMirroredStrategy
PARAMETER_SERVER = ("ParameterServerStrategyV1",)  # tf.compat.v1.distribute.experimental.ParameterServerStrategy


def _strategy_settings(strategy, cluster: bool) -> Dict[str, Any]:
    """``train_distribute`` as the runner's keys, the way Estimator ran each strategy:

    - ``MirroredStrategy`` and ``CentralStorageStrategy``: the runner's towers (``device.replicas``: one
      per device, the variables on the CPU, gradients averaged); so is ``ParameterServerStrategy``
      without a ``TF_CONFIG`` cluster (Estimator's local mode);
    - ``MultiWorkerMirroredStrategy``: ``distributed.strategy=collective`` (every worker of the
      ``TF_CONFIG`` cluster holds the variables, gradients all-reduced each step);
    - ``ParameterServerStrategy`` with a cluster: the ps tasks hold the variables and each worker
      updates them asynchronously (``distributed.strategy=ps``).

    Any other strategy is refused by name (TF 2's ``ParameterServerStrategy`` needs a
    ``ClusterCoordinator``, which Estimator never ran)."""
    if strategy is None:
        return {}
    kind = type(strategy).__name__
    if kind in COLLECTIVE:
        return {"distributed.strategy": "collective"}
    if kind in PARAMETER_SERVER and cluster:
        return {"distributed.strategy": "ps"}
    if kind not in TOWERS + PARAMETER_SERVER:
        raise ValueError(f"RunConfig(train_distribute={kind}): the runner runs MirroredStrategy and "
                         "CentralStorageStrategy (its towers), MultiWorkerMirroredStrategy (all-reduce across the "
                         "TF_CONFIG cluster's workers) and tf.compat.v1's ParameterServerStrategy; leave it unset "
                         "(one process), or use one of those")
    replicas = int(strategy.num_replicas_in_sync)
    return {"device.replicas": replicas} if replicas > 1 else {}


def _plain(value):
    """A number as the Python number it holds (a NumPy scalar's ``item()``), None as it is."""
    return value.item() if hasattr(value, "item") else value


def _session_config_settings(config) -> Dict[str, Any]:
    """The ConfigProto fields the runner's ``device`` keys set; any other field set is refused."""
    if config is None:
        return {}
    import tensorflow as tf

    out, default = {}, tf.compat.v1.ConfigProto()
    if config.intra_op_parallelism_threads:
        out["device.intra_op_threads"] = int(config.intra_op_parallelism_threads)
    if config.inter_op_parallelism_threads:
        out["device.inter_op_threads"] = int(config.inter_op_parallelism_threads)
    if config.log_device_placement:
        out["device.log_placement"] = True
    if config.HasField("gpu_options"):
        out["device.allow_growth"] = bool(config.gpu_options.allow_growth)
    handled = {"intra_op_parallelism_threads", "inter_op_parallelism_threads", "log_device_placement",
               "allow_soft_placement", "gpu_options", "device_count"}
    extra = sorted(f.name for f, v in config.ListFields() if f.name not in handled and getattr(default, f.name) != v)
    if config.HasField("gpu_options"):
        gpu = config.gpu_options
        extra += [f"gpu_options.{f.name}" for f, _ in gpu.ListFields() if f.name != "allow_growth"]
    if extra:
        raise ValueError(f"RunConfig(session_config=...): the runner sets the session's ConfigProto from its device "
                         f"config; {', '.join(extra)} cannot be passed on: leave them unset")
    return out
