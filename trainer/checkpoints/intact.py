"""Which checkpoint of a dir is intact, and the repairs a dir needs before a run restores from it.

Stock TensorFlow restarts silently at step 0 when the ``checkpoint`` state file is
garbage or deleted, and fails without a fallback when the newest checkpoint's
files are missing or truncated. Here the newest *intact* checkpoint is found from
the files themselves, a damaged one is reported, and a dir that has checkpoints
but none intact is refused rather than trained over.
"""

import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from typing import List, Optional

import tensorflow as tf

from trainer.errors import CheckpointError, ConfigError

log = logging.getLogger("trainer")

_CKPT_INDEX = re.compile(r"^(?P<prefix>.+)-(?P<step>\d+)\.index$")


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
    # broad: TensorFlow's checkpoint reader raises OpError, IndexError (a cut data file) and
    # others: any of them means unreadable
    except Exception as e:
        return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
    return None


# Names TensorFlow and the runner give files while writing them: removed when a save was cut short.
_TEMP_DIR = re.compile(r".+-\d+_temp(_[0-9a-f]{32})?$")  # a sharded save's <prefix>-<step>_temp[_<uuid>]/
# TensorFlow's atomic writes (the ``checkpoint`` state, ``.meta``, ``graph.pbtxt``) go through <name>.tmp<uuid>.
_TEMP_FILE = re.compile(r"(.+\.tempstate\d+|.+\.tmp[0-9a-f]{32}|.+\.json\.\d+\.tmp)$")


def clean_leftovers(checkpoint_dir: str) -> None:
    """Remove what an interrupted save leaves: TensorFlow's ``<prefix>-<step>_temp`` dirs, its
    ``.tempstate`` and ``<name>.tmp<uuid>`` files, and the runner's ``*.json.<pid>.tmp``. Names
    only so shaped are touched (a user's ``my_templates`` stays)."""
    for name in os.listdir(checkpoint_dir):
        path = os.path.join(checkpoint_dir, name)
        if _TEMP_DIR.match(name) and os.path.isdir(path):
            log.warning("removing %s, left by an interrupted save", path)
            shutil.rmtree(path, ignore_errors=True)
        elif _TEMP_FILE.match(name) and os.path.isfile(path):
            log.warning("removing %s, left by an interrupted write", path)
            os.remove(path)


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
    # broad: a damaged checkpoint state file reads as none: the intact checkpoint found is used
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
    # broad: TensorFlow's checkpoint reader raises OpError, IndexError (a cut data file) and
    # others: any of them means unreadable
    except Exception as e:
        raise CheckpointError(
            f"checkpoint {path} is unreadable ({type(e).__name__}: {str(e).splitlines()[0]}); "
            "restore its files or point checkpoint.dir at another dir"
        ) from None


def latest_step(checkpoint_dir: str) -> Optional[int]:
    """The step of the checkpoint the dir's state file names; None when there is none."""
    path = tf.train.latest_checkpoint(checkpoint_dir)
    return checkpoint_step(path) if path else None


def roll_back(checkpoint_dir: str, step: int) -> Optional[str]:
    """Make ``model.ckpt-<step>`` the newest checkpoint of the dir: the newer ones are moved, not
    deleted, into ``rolled-back-<time>/`` and the state file names ``step``. Returns that folder
    (None when no checkpoint was newer).

    Raises:
      ConfigError: no intact ``model.ckpt-<step>`` in the dir (the steps it has are listed).
    """
    candidates = _candidates(checkpoint_dir)
    target = os.path.join(checkpoint_dir, f"model.ckpt-{step}")
    have = sorted(int(os.path.basename(p).rsplit("-", 1)[1]) for p in candidates)
    if target not in candidates or verify(target) is not None:
        raise ConfigError(f"checkpoint.restore_step={step}: no intact model.ckpt-{step} in {checkpoint_dir}; "
                          f"it has steps {have}")
    newer = [p for p in candidates if int(os.path.basename(p).rsplit("-", 1)[1]) > step]
    aside = None
    if newer:
        aside = os.path.join(checkpoint_dir, time.strftime("rolled-back-%Y%m%d-%H%M%S"))
        os.makedirs(aside, exist_ok=True)
        for prefix in newer:
            for name in os.listdir(checkpoint_dir):
                if name.startswith(os.path.basename(prefix) + "."):
                    os.replace(os.path.join(checkpoint_dir, name), os.path.join(aside, name))
    kept = [os.path.basename(p) for p in reversed(candidates) if p not in newer]
    tf.compat.v1.train.update_checkpoint_state(checkpoint_dir, kept[-1], all_model_checkpoint_paths=kept)
    return aside
