"""The run dir's record of how it was made (``.hydra/config.yaml``, ``overrides.yaml``,
``hydra.yaml``), which ``resume=`` reads: written only by a process that trains the run.

Hydra saves a job's record before the job starts. A single training run has it saved in a staging
dir (``.hydra/staged-<pid>``) instead; the runner moves it into ``.hydra/`` once the run holds its
checkpoint dir and has passed every check (``trainer.run``'s ``on_accepted``), and removes the
staging dir whatever happens. A second command refused by the lock, or one that finds the run
finished, leaves the record as it was.
"""

import os
import shutil
from typing import Callable

from omegaconf import open_dict

_RECORD = ".hydra"


def stage_record(cfg):
    """``cfg`` (a single run's whole config) with Hydra's record of a one-process training run sent
    to a staging dir (a cluster's tasks keep theirs as they are)."""
    if cfg.hydra.output_subdir == _RECORD and str(cfg.distributed.kind) == "none":
        with open_dict(cfg):
            cfg.hydra.output_subdir = f"{_RECORD}/staged-{os.getpid()}"
    return cfg


def _is_staged(subdir) -> bool:
    return bool(subdir) and os.path.basename(str(subdir)).startswith("staged-")


def staged_record(run_dir: str, subdir) -> Callable[[], None]:
    """What moves the staged record into ``.hydra/`` (nothing when the run's record was not staged)."""

    def record() -> None:
        if not _is_staged(subdir):
            return
        staged = os.path.join(run_dir, str(subdir))
        for name in sorted(os.listdir(staged)):
            os.replace(os.path.join(staged, name), os.path.join(run_dir, _RECORD, name))

    return record


def discard_staged(run_dir: str, subdir) -> None:
    """The staging dir removed (its record was moved into place, or the run was refused)."""
    if _is_staged(subdir):
        shutil.rmtree(os.path.join(run_dir, str(subdir)), ignore_errors=True)
