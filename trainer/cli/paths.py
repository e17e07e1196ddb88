"""Run-dir names, from the command's overrides rather than the clock.

The same command lands in the same run dir, so its default checkpoint dir (inside
the run dir) is found again and the run resumes. Keys that change the schedule,
the backend or the environment but not the experiment (``train.max_steps``,
``session``, ``device``, cadences, hooks, logging) are left out of single-run names,
so ``train ... train.max_steps=4000`` continues the run that stopped at 2000.
Multirun job dirs keep every override: jobs of one sweep never share a dir.
"""

import hashlib
import os
import re

from omegaconf import OmegaConf

from trainer.dist.roles import resolve_role

RUNS_ROOT = "outputs"
_SCHEDULE_KEYS = {
    "train.max_steps", "session", "device", "hooks", "hook", "resume",
    "eval.every_steps", "eval.batch_size", "checkpoint.every_steps", "checkpoint.every_secs", "checkpoint.keep",
    "summary.every_steps", "mode", "distributed", "train.stalled_steps_limit", "checkpoint.restore_step",
    "train.max_skipped_steps",
}
_SCHEDULE_PREFIXES = ("session.", "device.", "hooks.", "hook.", "log.", "predict.", "export.", "eval.checkpoint",
                      "eval.objective", "eval.direction", "eval.graph",
                      "distributed.")
_MAX_NAME = 200  # file names may be 255 bytes


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


def run_dir(overrides) -> str:
    """``resume=DIR`` itself, else ``outputs/<experiment overrides>``."""
    overrides = list(overrides)
    for o in overrides:
        if override_key(o) == "resume":
            return o.split("=", 1)[1]
    kept = [o for o in overrides if override_key(o) not in _SCHEDULE_KEYS and not override_key(o).startswith(_SCHEDULE_PREFIXES)]
    return f"{RUNS_ROOT}/{_name(kept)}"


LATEST = "latest"


def point_latest(run_dir: str) -> None:
    """Make ``outputs/latest`` a link to ``run_dir`` when the run dir lies in ``outputs/`` (never
    replacing a real file or dir of that name); ``train resume=outputs/latest`` then continues it."""
    root = os.path.abspath(RUNS_ROOT)
    run_dir = os.path.abspath(run_dir)
    if os.path.dirname(run_dir) != root or os.path.basename(run_dir) == LATEST:
        return
    link = os.path.join(root, LATEST)
    if os.path.lexists(link) and not os.path.islink(link):
        return
    temporary = f"{link}.{os.getpid()}.tmp"
    try:
        os.symlink(os.path.basename(run_dir), temporary)
        os.replace(temporary, link)  # atomic: a concurrent reader sees the old link or the new one
    except OSError:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def job_dir(overrides) -> str:
    """A multirun job's subdir: every override of the job but the sweep's own controls."""
    return _name([o for o in overrides if override_key(o) != "resume" and not override_key(o).startswith("sweep.")])


def _task_name(distributed) -> str:
    """``worker-1`` for a cluster task other than the chief, else "" (malformed configs are
    reported by the config checks, not here)."""
    try:
        role = resolve_role(distributed)
    except Exception:
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
