"""``resume=RUN_DIR``: the config a run dir was made with, plus this command's overrides."""

import contextlib
import copy
import os
from typing import Callable, List, Tuple

from omegaconf import ListConfig, OmegaConf

from trainer.cli.paths import YAML_ERRORS, override_key
from trainer.errors import ConfigError
from trainer.records import PROGRAM_RECORD


def override_target(override: str) -> str:
    """The config node an override sets: ``hooks.log`` for ``+hook@hooks.log=logging_tensor``
    (each ``+hook@hooks.NAME`` its own), the key itself otherwise."""
    key = override.split("=", 1)[0].lstrip("+~")
    group, _, package = key.partition("@")
    return package or group


def check_resumable(run_dir: str) -> None:
    """``resume=`` names a run dir the train command made.

    Raises:
      ConfigError: it does not exist, is not a dir, or has no ``.hydra/overrides.yaml``.
    """
    saved = os.path.join(run_dir, ".hydra", "overrides.yaml")
    if not os.path.isdir(run_dir):
        what = "a file, not a run dir" if os.path.exists(run_dir) else "no such directory"
        raise ConfigError(f"resume={run_dir}: {what}; give a run dir the train command made (e.g. outputs/NAME)")
    if not os.path.isfile(saved):
        raise ConfigError(f"resume={run_dir}: not a run dir (no {saved}); give a run dir the train command made "
                          "(e.g. outputs/NAME)")
    try:
        loaded = OmegaConf.load(saved)
    except YAML_ERRORS as e:
        raise ConfigError(f"resume={run_dir}: {saved} does not parse ({type(e).__name__}); restore it, or start "
                          "the run again with its overrides") from None
    if not isinstance(loaded, ListConfig) or not all(isinstance(o, str) for o in loaded):
        raise ConfigError(f"resume={run_dir}: {saved} is not a list of overrides; restore it, or start the run "
                          "again with its overrides")


def _check_program_needs(run_dir: str, overrides: List[str]) -> None:
    """A model_dir a Python program trained (``trainer.estimator``) names in ``.hydra/program.yaml`` the
    callables the command cannot import: each must be given on the command line.

    Raises:
      ConfigError: one is not given (naming the keys and where the program defined each).
    """
    path = os.path.join(run_dir, ".hydra", PROGRAM_RECORD)
    if not os.path.isfile(path):
        return
    record = OmegaConf.load(path)
    given = {override_key(o) for o in overrides}
    modes = [o.split("=", 1)[1] for o in overrides if override_key(o) == "mode"]
    training = not modes or modes[-1] in ("train", "train_and_evaluate")
    missing = {k: v for k, v in (record.get("needs") or {}).items()
               if k not in given and (training or k != "data.train_fn")}  # evaluate, predict, export: no training input
    if missing:
        what = "; ".join(_asked(k, v) for k, v in missing.items())
        raise ConfigError(f"resume={run_dir}: trained by the program {record.get('program')}; give {what}, "
                          "or run the program again")


def _asked(key: str, what: str) -> str:
    """How the command asks for one key a program's record could not hold (``what``: the record's words)."""
    if key == "model.params":
        return f"{key}='{{...}}' (the program's {what})"
    if what.startswith("value"):
        return f"{key}=... (the program's {what})"
    return f"{key}=MODULE.FUNCTION (the program's {what} is not importable)"


def resume_overrides(run_dir: str, overrides: List[str]) -> List[str]:
    """The overrides a resumed run is composed from: ``run_dir``'s saved ones, then ``overrides``
    (``resume=`` itself left out), which win key by key. ``~KEY`` drops what the saved overrides set
    at or under KEY; when they had added KEY (``+hook@hooks.log=...``), the node never existed in the
    config and ``~KEY`` goes too (Hydra cannot delete what is not there).

    Raises:
      ConfigError: ``run_dir`` is not a run dir of this runner.
    """
    check_resumable(run_dir)
    _check_program_needs(run_dir, overrides)
    merged = {}
    for o in list(OmegaConf.load(os.path.join(run_dir, ".hydra", "overrides.yaml"))) + list(overrides):
        if override_key(o) == "resume":
            continue
        target = override_target(o)
        if o.startswith("~"):
            dropped = [t for t in merged if t == target or t.startswith(target + ".")]
            added = any(t == target and merged[t].startswith("+") for t in dropped)
            for t in dropped:
                del merged[t]
            if added:
                continue
        merged.pop(target, None)  # re-inserted last: overrides apply in the order given
        merged[target] = o
    return list(merged.values())


def resumed_config(cfg, run_dir: str, overrides: List[str]) -> Tuple[object, Callable[[], None]]:
    """``cfg``, composed from :func:`resume_overrides` (``trainer.cli.preflight.checked_run_config``),
    as the run continues it: its checkpoint dir the run dir's own unless set. The config was checked
    when it was composed; ``trainer.run`` checks it again, as for any caller.

    Returns:
      (the config, a function that records it as the run dir's config). The caller records it
      once the run was accepted (not refused), so a refused command leaves the run dir's record
      as it was.
    """
    merged = [o for o in overrides if override_key(o) != "resume"]
    cfg = copy.deepcopy(cfg)
    if cfg.checkpoint.dir is None:
        cfg.checkpoint.dir = os.path.join(run_dir, "checkpoints")

    def record() -> None:
        """The run dir's record now describes this run: the next resume starts from it."""
        OmegaConf.save(OmegaConf.create(merged), os.path.join(run_dir, ".hydra", "overrides.yaml"))
        OmegaConf.save(cfg, os.path.join(run_dir, ".hydra", "config.yaml"))
        with contextlib.suppress(FileNotFoundError):  # the callables a program left to give are given now
            os.remove(os.path.join(run_dir, ".hydra", PROGRAM_RECORD))

    return cfg, record
