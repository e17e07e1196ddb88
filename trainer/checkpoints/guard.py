"""The protocol a training run follows in its checkpoint dir before it writes there, and the one
answer to "has this run finished?".

:func:`claim` locks the dir, removes an interrupted save's leftovers, finds the newest intact
checkpoint, refuses another model's, repairs the state file and records the manifest; only
then may the run write.
"""

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Dict, Optional

from omegaconf import OmegaConf

from trainer.checkpoints.intact import checkpoint_step, clean_leftovers, find_intact, repair_state, roll_back
from trainer.checkpoints.lock import LOCK, DirLock
from trainer.checkpoints.manifest import MANIFEST, check_compatible, check_same_data, read_manifest, write_manifest
from trainer.config.targets import target_name
from trainer.errors import ConfigError
from trainer.records import read_json, write_json

log = logging.getLogger("trainer")


def graph_config(model_cfg, optimizer_cfg) -> Dict:
    """The config that shapes the graph's variables: what a resumed run must not change."""
    return {
        "model.fn": target_name(model_cfg.fn),
        "model.params": OmegaConf.to_container(model_cfg.params, resolve=True),
        "optimizer._target_": optimizer_cfg._target_,
    }


@dataclass(frozen=True)
class Request:
    """What a training run asks of its checkpoint dir (``checkpoint.dir``): the model it trains (its
    name and :func:`graph_config`), its target step, and ``checkpoint.restore_step`` /
    ``sweep.rerun_finished``."""

    dir: str
    model_name: str
    graph_config: Dict
    max_steps: Optional[int]
    restore_step: Optional[int] = None
    rerun_finished: bool = False


def metrics_path(workdir: str) -> str:
    return os.path.join(workdir, "metrics.json")


def _is_final(record: Dict, step: Optional[int], max_steps: Optional[int]) -> bool:
    """``record`` (a run's metrics.json) is the final record of the checkpoint at ``step`` for the
    target ``max_steps``: the run reached it, or it ended otherwise (early stopping, the end of the
    input) with that same target. A higher target trains on."""
    if step is None or record.get("status") != "finished" or record.get("global_step") != step:
        return False
    if max_steps is not None and step >= max_steps:
        return True
    return "max_steps" in record and record["max_steps"] == max_steps


def finished_run(ckpt_dir: str, max_steps: Optional[int], workdir: str) -> Optional[Dict]:
    """The run's ``metrics.json`` if the run has finished (at ``max_steps``, its newest intact checkpoint
    in ``ckpt_dir`` at the step the record gives), else None."""
    record = read_json(metrics_path(workdir))
    if record.get("status") != "finished":
        return None
    intact = find_intact(ckpt_dir)
    return record if intact and _is_final(record, checkpoint_step(intact.path), max_steps) else None


@dataclass(frozen=True)
class Claim:
    start_step: int  # the restored checkpoint's step, 0 for a new run
    finished: Optional[Dict]  # the finished run's record: there is nothing to do


def _restore_step(ckpt_dir: str, step: int) -> None:
    """``checkpoint.restore_step``: roll the dir back to ``model.ckpt-<step>`` once (the manifest
    records it, so the same command run again resumes instead of rolling back again)."""
    manifest = read_manifest(ckpt_dir)
    done = [r for r in manifest.get("rollbacks", []) if r.get("to") == step]
    if done:
        log.info("checkpoint.restore_step=%d was applied at %s (newer checkpoints in %s); resuming from the newest "
                 "checkpoint (drop checkpoint.restore_step from the command)", step, done[-1].get("at"),
                 done[-1].get("set_aside"))
        return
    aside = roll_back(ckpt_dir, step)
    log.warning("checkpoint.restore_step=%d: training restarts from model.ckpt-%d; the newer checkpoints were moved "
                "to %s", step, step, aside or "(none were newer)")
    if manifest:
        manifest.setdefault("rollbacks", []).append(
            {"to": step, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "set_aside": aside})
        write_json(os.path.join(ckpt_dir, MANIFEST), manifest, indent=1)


def _set_aside(workdir: str, ckpt_dir: str) -> None:
    """sweep.rerun_finished: the finished run's checkpoints and metrics kept under a dated name, the run
    started afresh. Called holding the dir's lock, once every check has passed: the lock file stays."""
    suffix = time.strftime(".replaced-%Y%m%d-%H%M%S")
    while os.path.exists(ckpt_dir + suffix):
        suffix += "-1"
    os.makedirs(ckpt_dir + suffix)
    for name in os.listdir(ckpt_dir):
        if name != LOCK:
            os.replace(os.path.join(ckpt_dir, name), os.path.join(ckpt_dir + suffix, name))
    for path in (metrics_path(workdir), os.path.join(workdir, "metrics.jsonl")):
        if os.path.exists(path):
            os.replace(path, path + suffix)
    log.info("sweep.rerun_finished: the finished run's checkpoints and metrics were set aside (*%s)", suffix)


@contextlib.contextmanager
def claim(request: Request, graph, workdir: str, data: Optional[Dict] = None):
    """Hold ``request.dir`` for a training run of ``graph`` on ``data`` (its signature, recorded in the
    manifest and checked on resume); yields a :class:`Claim`.

    Raises:
      CheckpointLockedError: another live run holds the dir.
      CheckpointError: no intact checkpoint among several, or another model's (the dir is untouched).
    """
    ckpt_dir = request.dir
    held = contextlib.ExitStack()
    try:
        os.makedirs(ckpt_dir, exist_ok=True)
        held.enter_context(DirLock(ckpt_dir))
    except OSError as e:  # a read-only mount, a full disk, a name too long: before anything was written
        raise ConfigError(f"checkpoint.dir={ckpt_dir}: cannot write there ({e.strerror or e}); give checkpoint.dir "
                          "a directory you can write to") from None
    with held:
        if request.rerun_finished and read_json(metrics_path(workdir)).get("status") == "finished":
            _set_aside(workdir, ckpt_dir)
        clean_leftovers(ckpt_dir)
        if request.restore_step is not None:
            _restore_step(ckpt_dir, request.restore_step)
        intact = find_intact(ckpt_dir)
        start_step = checkpoint_step(intact.path) if intact else 0
        if intact:
            check_compatible(intact.path, graph.graph, ckpt_dir, request.model_name, request.graph_config)
            check_same_data(ckpt_dir, data)
        previous = read_json(metrics_path(workdir))
        if intact and _is_final(previous, start_step, request.max_steps):
            log.info("checkpoint.dir %s is already at step %d (the run finished: %s; train.max_steps=%s): nothing to do; "
                     "metrics in %s", ckpt_dir, start_step, previous.get("stop_reason", "max_steps"),
                     request.max_steps, metrics_path(workdir))
            yield Claim(start_step, previous)
            return
        if intact:
            repair_state(ckpt_dir, intact)
        write_manifest(ckpt_dir, graph.graph, request.model_name, request.graph_config, data)
        os.makedirs(workdir, exist_ok=True)
        log.info("run dir %s", workdir)
        yield Claim(start_step, None)
