"""A checkpoint dir before a run touches it: which checkpoint is intact, whether it fits
the graph, who else is writing there.

Stock TensorFlow restarts silently at step 0 when the ``checkpoint`` state file is
garbage or deleted, and fails without a fallback when the newest checkpoint's
files are missing or truncated. Here the newest *intact* checkpoint is found from
the files themselves, a damaged one is reported, and a dir that has checkpoints
but none intact is refused rather than trained over.
"""

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import tensorflow as tf

from trainer.errors import CheckpointError, CheckpointLockedError

log = logging.getLogger("trainer")

MANIFEST = "manifest.json"
LOCK = "train.lock"
_CKPT_INDEX = re.compile(r"^(?P<prefix>.+)-(?P<step>\d+)\.index$")


# --- finding an intact checkpoint ------------------------------------------------------------


def _candidates(checkpoint_dir: str, basename: str = "model.ckpt") -> List[str]:
    """Checkpoint prefixes in the dir, newest step first, from the ``.index`` files present."""
    found = []
    for name in os.listdir(checkpoint_dir):
        m = _CKPT_INDEX.match(name)
        if m and m.group("prefix") == basename:
            found.append((int(m.group("step")), os.path.join(checkpoint_dir, name[: -len(".index")])))
    return [path for _, path in sorted(found, reverse=True)]


def verify(path: str) -> Optional[str]:
    """None if checkpoint ``path`` reads back completely, else what is wrong with it."""
    try:
        reader = tf.train.load_checkpoint(path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)  # reads every byte: truncated data files fail here
    except Exception as e:
        return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
    return None


def clean_leftovers(checkpoint_dir: str) -> None:
    """Remove the temporary dirs an interrupted save leaves (``*_temp*``)."""
    for name in os.listdir(checkpoint_dir):
        path = os.path.join(checkpoint_dir, name)
        if "_temp" in name and os.path.isdir(path):
            log.warning("removing %s, left by an interrupted save", path)
            shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class Intact:
    """The newest intact checkpoint of a dir, and what restoring from it needs."""

    path: str
    older: List[str]  # the other intact checkpoints, oldest first
    state_ok: bool  # the `checkpoint` state file already names ``path``


def find_intact(checkpoint_dir: str) -> Optional[Intact]:
    """The newest intact checkpoint of ``checkpoint_dir``, None for a dir with no checkpoint.

    Raises:
      CheckpointError: checkpoints exist but none reads back.
    """
    if not os.path.isdir(checkpoint_dir):
        return None
    candidates = _candidates(checkpoint_dir)
    if not candidates:
        data_files = [n for n in os.listdir(checkpoint_dir) if ".data-" in n]
        if data_files:
            raise CheckpointError(
                f"checkpoint.dir={checkpoint_dir} has checkpoint data ({data_files[0]}) but no .index file; "
                "restore the missing files or use another checkpoint.dir"
            )
        return None
    damaged = []
    for path in candidates:
        problem = verify(path)
        if problem is None:
            break
        damaged.append(f"{os.path.basename(path)} ({problem})")
        log.warning("checkpoint %s is damaged: %s; trying the previous one", path, problem)
    else:
        raise CheckpointError(
            f"checkpoint.dir={checkpoint_dir}: no intact checkpoint ({'; '.join(damaged)}); "
            "restore the files, or use another checkpoint.dir (this one is left as it is)"
        )
    try:
        state_path = tf.train.latest_checkpoint(checkpoint_dir)
    except Exception:
        state_path = None
    state_ok = state_path is not None and os.path.abspath(state_path) == os.path.abspath(path)
    if not state_ok and not damaged:
        log.warning("checkpoint state of %s is missing, unreadable or stale; rebuilt from the files: %s",
                    checkpoint_dir, os.path.basename(path))
    return Intact(path, list(reversed(candidates[len(damaged) + 1:])), state_ok)


def repair_state(checkpoint_dir: str, intact: Intact) -> None:
    """Point the ``checkpoint`` state file at ``intact.path`` (relative paths), so both backends restore it."""
    if intact.state_ok:
        return
    names = [os.path.basename(p) for p in intact.older + [intact.path]]
    # Bare file names are written as given: relative to the dir, as the runner's Saver writes them.
    tf.compat.v1.train.update_checkpoint_state(checkpoint_dir, names[-1], all_model_checkpoint_paths=names)


def checkpoint_step(path: str) -> int:
    """The global step stored in checkpoint ``path``."""
    try:
        return int(tf.train.load_variable(path, "global_step"))
    except Exception as e:
        raise CheckpointError(
            f"checkpoint {path} is unreadable ({type(e).__name__}: {str(e).splitlines()[0]}); "
            "restore its files or point checkpoint.dir at another dir"
        ) from None


# --- fitting the graph: manifest and variables ----------------------------------------------


def graph_variables(graph) -> Dict[str, List]:
    with graph.as_default():
        return {v.op.name: [v.shape.as_list(), v.dtype.base_dtype.name] for v in tf.compat.v1.global_variables()}


def config_hash(graph_config: Dict) -> str:
    return hashlib.sha256(json.dumps(graph_config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _diff(stored: Dict[str, List], wanted: Dict[str, List]) -> List[str]:
    missing = sorted(set(wanted) - set(stored))
    unexpected = sorted(set(stored) - set(wanted))
    reshaped = sorted(f"{n} {stored[n][0]} -> {wanted[n][0]}" for n in set(wanted) & set(stored) if list(stored[n][0]) != wanted[n][0])
    retyped = sorted(f"{n} {stored[n][1]} -> {wanted[n][1]}" for n in set(wanted) & set(stored)
                     if len(stored[n]) > 1 and stored[n][1] and stored[n][1] != wanted[n][1])
    parts = []
    for label, items in (("missing", missing), ("reshaped", reshaped), ("retyped", retyped), ("unexpected", unexpected)):
        if items:
            parts.append(f"{label} {items[:5]}{' ...' if len(items) > 5 else ''}")
    return parts


def check_compatible(path: str, graph, checkpoint_dir: str, model_name: str, graph_config: Dict) -> None:
    """Refuse a checkpoint dir of another model: the manifest and the checkpoint's variables must fit.

    Config changes that do not shape the graph are allowed and logged.

    Raises:
      CheckpointError: another model, or variables missing, reshaped or retyped (a readable diff).
    """
    wanted = graph_variables(graph)
    hint = "use init_from.checkpoint to warm start from it, or another checkpoint.dir"
    manifest = read_manifest(checkpoint_dir)
    if manifest:
        if manifest.get("model") != model_name:
            raise CheckpointError(
                f"checkpoint.dir={checkpoint_dir} belongs to model={manifest.get('model')}, not model={model_name}; {hint}"
            )
        changed = {k: (manifest.get("graph_config", {}).get(k), v) for k, v in graph_config.items()
                   if manifest.get("graph_config", {}).get(k) != v}
        if changed:
            log.info("graph config changed since the checkpoint: %s",
                     ", ".join(f"{k} {a} -> {b}" for k, (a, b) in sorted(changed.items())))
    try:
        stored = {name: [shape] for name, shape in tf.train.list_variables(path)}
    except Exception as e:
        raise CheckpointError(f"checkpoint {path} is unreadable ({type(e).__name__}); restore its files or use another checkpoint.dir") from None
    problems = [p for p in _diff(stored, wanted) if not p.startswith("unexpected")]
    if problems:
        raise CheckpointError(f"checkpoint.dir={checkpoint_dir} holds another model ({'; '.join(problems)}); {hint}")


def read_manifest(checkpoint_dir: str) -> Dict:
    try:
        with open(os.path.join(checkpoint_dir, MANIFEST)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def write_manifest(checkpoint_dir: str, graph, model_name: str, graph_config: Dict) -> None:
    """Record what the checkpoints of this dir hold (kept when it exists: it describes the first run)."""
    path = os.path.join(checkpoint_dir, MANIFEST)
    if os.path.exists(path):
        return
    payload = {"model": model_name, "graph_config_hash": config_hash(graph_config), "graph_config": graph_config,
               "variables": graph_variables(graph)}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# --- one writer per dir -----------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DirLock:
    """``train.lock`` (pid, host, start time) in the checkpoint dir, held for the run.

    Raises (on enter):
      CheckpointLockedError: a live process holds it (or one on another host).
    """

    def __init__(self, checkpoint_dir: str):
        self.path = os.path.join(checkpoint_dir, LOCK)
        self._held = False

    def __enter__(self):
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._read()
                same_host = holder.get("host") == me["host"]
                if holder and same_host and not _alive(int(holder.get("pid", 0))):
                    log.warning("taking over the stale lock of pid %s (started %s), which is no longer running",
                                holder.get("pid"), holder.get("started"))
                    os.remove(self.path)
                    continue
                raise CheckpointLockedError(
                    f"checkpoint.dir={os.path.dirname(self.path)} is in use by pid {holder.get('pid')} on "
                    f"{holder.get('host')} since {holder.get('started')}; wait for it, stop it, or use another "
                    f"checkpoint.dir (delete {self.path} only if that run is gone)"
                ) from None
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self._held = True
            return self
        raise CheckpointLockedError(f"cannot take the lock {self.path}")

    def _read(self) -> Dict:
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def __exit__(self, *exc):
        if self._held:
            try:
                os.remove(self.path)
            except OSError:
                pass
            self._held = False
        return False
