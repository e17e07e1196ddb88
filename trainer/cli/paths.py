"""Run-dir names, from the command's overrides rather than the clock.

The same command lands in the same run dir, so its default checkpoint dir (inside
the run dir) is found again and the run resumes. Keys that change the schedule,
the backend or the environment but not the experiment (``train.max_steps``,
``session``, ``device``, cadences, hooks, logging) are left out of single-run names,
so ``train ... train.max_steps=4000`` continues the run that stopped at 2000.
Multirun job dirs keep every override: jobs of one sweep never share a dir.

Names are short: a config group's default option is dropped (``model=mnist`` names the same run
as no override), keys lose their dotted prefix, paths keep their last part and long values are
cut; whenever anything was shortened, a hash of the full overrides is appended, so two different
experiments never share a dir. A run dir made under the former full-length name is still found
and resumed.
"""

import functools
import hashlib
import os
import re
from typing import List

import yaml
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from trainer.dist.roles import resolve_role
from trainer.errors import ConfigError

# What reading a YAML record can raise: no such file or no access, not YAML, not UTF-8, not a config.
YAML_ERRORS = (OSError, yaml.YAMLError, ValueError, OmegaConfBaseException)

RUNS_ROOT = "outputs"
_SCHEDULE_KEYS = {
    "train.max_steps", "session", "device", "hooks", "hook", "resume",
    "eval.every_steps", "eval.batch_size", "eval.steps", "checkpoint.every_steps", "checkpoint.every_secs", "checkpoint.keep",
    "summary.every_steps", "mode", "distributed", "train.stalled_steps_limit", "train.stop_grace_secs", "checkpoint.restore_step",
    "train.max_skipped_steps",
}
_SCHEDULE_PREFIXES = ("session.", "device.", "hooks.", "hook.", "log.", "predict.", "export.", "eval.checkpoint",
                      "eval.objective", "eval.direction", "eval.graph",
                      "distributed.")
_MAX_NAME = 200  # file names may be 255 bytes
_SHORT_NAME = 72  # the readable part of a shortened name
_SHORT_VALUE = 20


def override_key(override: str) -> str:
    key = override.split("=", 1)[0]
    return key.lstrip("+~").split("@", 1)[0]


def _name(overrides) -> str:
    # key=value -> key-value, joined by "+": no "=" or "," so that the dir can be passed back
    # unquoted as resume=outputs/NAME on Hydra's command line.
    name = "+".join(sorted(o.replace("=", "-", 1) for o in overrides)) or "default"
    name = re.sub(r"[^A-Za-z0-9._+@~-]", "_", name)
    if len(name) > _MAX_NAME:
        name = name[: _MAX_NAME - 9] + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


@functools.lru_cache(maxsize=1)
def _default_options() -> dict:
    """{group: its default option} from the root config's defaults list (read with plain YAML: this
    runs inside Hydra's composition, as a resolver)."""
    try:
        import trainer.conf

        with open(os.path.join(trainer.conf.__path__[0], "config.yaml")) as f:
            defaults = yaml.safe_load(f).get("defaults", [])
        return {str(k): str(v) for entry in defaults if isinstance(entry, dict) for k, v in entry.items()}
    except (OSError, yaml.YAMLError, AttributeError, TypeError):  # an unusual install: drop nothing
        return {}


def _short_value(value: str, whole: bool = False) -> str:
    """``value`` for a dir name: a path's last part, other characters as ``_``, cut to ``_SHORT_VALUE``
    characters unless ``whole`` (a swept value, which tells the jobs apart)."""
    if "/" in value:  # a path or glob: its last part
        value = value.rstrip("/").rsplit("/", 1)[-1] or value
    value = re.sub(r"[^A-Za-z0-9.@~-]+", "_", value).strip("_") or "_"
    return value if whole or len(value) <= _SHORT_VALUE else value[:_SHORT_VALUE - 2] + "__"


def short_name(overrides, first=frozenset()) -> str:
    """The run-dir name of these experiment overrides (module doc): readable, at most ~80 characters;
    the keys in ``first`` (a sweep's swept keys), then group choices, then the rest."""
    defaults = _default_options()
    kept = [o for o in overrides
            if override_key(o) in first
            or not ("=" in o and o[0] not in "+~" and defaults.get(o.split("=", 1)[0]) == o.split("=", 1)[1])]
    exact = _name(kept)
    parts = []
    for o in kept:
        key, has_value, value = o.partition("=")
        leaf = override_key(o).rsplit(".", 1)[-1]
        swept = override_key(o) in first
        part = ("no-" if key.startswith("~") else "") + leaf + (f"-{_short_value(value, swept)}" if has_value else "")
        parts.append((not swept, "." in override_key(o), part))
    readable = re.sub(r"[^A-Za-z0-9._+@~-]", "_", "+".join(p[-1] for p in sorted(parts))) or "default"
    if readable == exact:
        return exact
    digest = hashlib.sha1("\n".join(sorted(kept)).encode()).hexdigest()[:6]
    swept_length = len("+".join(p[-1] for p in parts if not p[0]))  # the swept values are never cut
    return f"{readable[:max(_SHORT_NAME, swept_length)].rstrip('+')}--{digest}"


def _found_again(root: str, overrides, first=frozenset()) -> str:
    """``short_name``, unless only the former full-length name exists under ``root`` (a run made
    before names were shortened): then that one, so that the same command still resumes it."""
    name = short_name(overrides, first)
    former = _name(overrides)
    if former != name and not os.path.exists(os.path.join(root, name)) and os.path.isdir(os.path.join(root, former)):
        return former
    return name


def run_dir(overrides) -> str:
    """``resume=DIR`` itself, else ``outputs/<experiment overrides>``."""
    overrides = list(overrides)
    for o in overrides:
        if override_key(o) == "resume":
            return o.split("=", 1)[1]
    kept = [o for o in overrides if override_key(o) not in _SCHEDULE_KEYS and not override_key(o).startswith(_SCHEDULE_PREFIXES)]
    return f"{RUNS_ROOT}/{_found_again(RUNS_ROOT, kept)}"


LATEST = "latest"
LATEST_RECORD = ".latest"


def point_latest(run_dir: str) -> None:
    """Record ``run_dir`` as the newest run in ``outputs/.latest`` (its name, one line) when it lies
    in ``outputs/``; ``train resume=outputs/latest`` then continues it (:func:`resolve_latest`). A
    record, not a link: TensorBoard follows links and listed the newest run twice. An
    ``outputs/latest`` link of an earlier version is removed (never a real file or dir)."""
    root = os.path.abspath(RUNS_ROOT)
    run_dir = os.path.abspath(run_dir)
    if os.path.dirname(run_dir) != root or os.path.basename(run_dir) in (LATEST, LATEST_RECORD):
        return
    record = os.path.join(root, LATEST_RECORD)
    temporary = f"{record}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w") as f:
            f.write(os.path.basename(run_dir) + "\n")
        os.replace(temporary, record)  # atomic: a concurrent reader sees the old name or the new one
        if os.path.islink(os.path.join(root, LATEST)):
            os.unlink(os.path.join(root, LATEST))
    except OSError:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def resolve_latest(argv: List[str]) -> List[str]:
    """``argv`` with ``resume=DIR/latest`` (no such dir there) read as the run ``DIR/.latest`` names."""
    resolved = []
    for arg in argv:
        if override_key(arg) == "resume" and "=" in arg:
            key, value = arg.split("=", 1)
            parent, name = os.path.split(value.rstrip("/"))
            record = os.path.join(parent, LATEST_RECORD)
            if name == LATEST and not os.path.isdir(value) and os.path.isfile(record):
                with open(record) as f:
                    arg = f"{key}={os.path.join(parent, f.read().strip())}"
        resolved.append(arg)
    return resolved


def job_dir(overrides, sweep_dir: str = RUNS_ROOT + "/multirun") -> str:
    """A multirun job's subdir in ``sweep_dir``: every override of the job but the sweep's own controls."""
    kept = [o for o in overrides if override_key(o) != "resume" and not override_key(o).startswith("sweep.")]
    return _found_again(str(sweep_dir), kept, swept_keys(str(sweep_dir)))


def swept_keys(sweep_dir: str) -> frozenset:
    """The keys a sweep varies, from the ``multirun.yaml`` Hydra writes in the sweep dir before the
    jobs start: its sweep overrides (``key=a,b``, ``range(...)``...) and an Optuna-style sweeper's
    ``params``. Empty when there is none to read."""
    path = os.path.join(sweep_dir, "multirun.yaml")
    try:
        keys = _swept_keys(path, os.stat(path).st_mtime_ns)
    except OSError:
        keys = frozenset()
    try:  # a sweeper that writes no multirun.yaml (Optuna's): the keys the command recorded before it began
        with open(os.path.join(sweep_dir, SWEPT_RECORD)) as f:
            return keys | frozenset(line.strip() for line in f if line.strip())
    except OSError:
        return keys


SWEPT_RECORD = ".swept_keys"


def record_swept_keys(sweep_dir: str, keys) -> None:
    """Write the keys a sweeper varies (its ``params``) into ``sweep_dir`` before the first job, one a
    line, for :func:`swept_keys`: Optuna's sweeper writes no ``multirun.yaml`` to read them from."""
    os.makedirs(sweep_dir, exist_ok=True)
    with open(os.path.join(sweep_dir, SWEPT_RECORD), "w") as f:
        f.write("".join(f"{key}\n" for key in sorted(keys)))


@functools.lru_cache(maxsize=8)
def _swept_keys(path: str, _mtime: int) -> frozenset:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        hydra_cfg = OmegaConf.load(path).hydra
        parsed = OverridesParser.create().parse_overrides(list(hydra_cfg.overrides.task))
        keys = {o.key_or_group for o in parsed if o.is_sweep_override()}
        keys.update(str(k) for k in (OmegaConf.select(hydra_cfg, "sweeper.params") or {}))
    except (*YAML_ERRORS, HydraException):  # an unreadable or unusual file: no keys first
        return frozenset()
    return frozenset(keys)


def _task_name(distributed) -> str:
    """``worker-1`` for a cluster task other than the chief, else "" (malformed configs are
    reported by the config checks, not here)."""
    try:
        role = resolve_role(distributed)
    except (ConfigError, NotImplementedError):
        return ""
    return "" if role.is_chief else role.name


def output_subdir(overrides, distributed=None) -> str:
    """Where Hydra saves the job's config. The training run's own ``.hydra`` is kept intact by a
    resumed run (the runner rewrites it with the merged config once composed), by the modes
    that only read the run (evaluate, predict, export) and by a cluster's other tasks sharing
    the run dir (on one machine or a shared file system): they save theirs beside it."""
    task = _task_name(distributed) if distributed is not None else ""
    if task:
        return ".hydra/" + task
    for o in overrides:
        if override_key(o) == "resume":
            return ".hydra/resume"
        if override_key(o) == "mode" and o.split("=", 1)[1] not in ("train", "train_and_evaluate"):
            return ".hydra/" + re.sub(r"[^A-Za-z0-9_]", "_", o.split("=", 1)[1])
    return ".hydra"


def log_name(distributed=None) -> str:
    """The run dir's log file: ``train.log``, or ``train-worker-1.log`` for a cluster's other tasks."""
    task = _task_name(distributed) if distributed is not None else ""
    return f"train-{task}.log" if task else "train.log"


def register_resolvers() -> None:
    for name, fn in (("trainer_run_dir", run_dir), ("trainer_job_dir", job_dir), ("trainer_output_subdir", output_subdir),
                     ("trainer_log_name", log_name)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
