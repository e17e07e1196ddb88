"""``resume=RUN_DIR``: the config a run dir was made with, plus this command's overrides."""

import os
from typing import Callable, List, Tuple

from hydra import compose
from omegaconf import OmegaConf

from trainer.cli.paths import override_key
from trainer.cli.preflight import check_resumable
from trainer.config.rules import validate


def override_target(override: str) -> str:
    """The config node an override sets: ``hooks.log`` for ``+hook@hooks.log=logging_tensor``
    (each ``+hook@hooks.NAME`` its own), the key itself otherwise."""
    key = override.split("=", 1)[0].lstrip("+~")
    group, _, package = key.partition("@")
    return package or group


def resumed_config(run_dir: str, overrides: List[str], config_name: str = "config") -> Tuple[object, Callable[[], None]]:
    """Compose the saved overrides of ``run_dir`` with ``overrides`` (which win), inside a Hydra app.

    Returns:
      (the config, a function that records it as the run dir's config). The caller records it
      once the run was accepted (not refused), so a refused command leaves the run dir's record
      as it was.

    Raises:
      ConfigError: ``run_dir`` is not a run dir of this runner.
    """
    check_resumable(run_dir)
    saved = os.path.join(run_dir, ".hydra", "overrides.yaml")
    merged = {}
    for o in list(OmegaConf.load(saved)) + list(overrides):
        if override_key(o) != "resume":
            merged[override_target(o)] = o
    merged = list(merged.values())
    cfg = compose(config_name, overrides=merged)
    if cfg.checkpoint.dir is None:
        cfg.checkpoint.dir = os.path.join(run_dir, "checkpoints")
    validate(cfg)

    def record() -> None:
        """The run dir's record now describes this run: the next resume starts from it."""
        OmegaConf.save(OmegaConf.create(merged), saved)
        OmegaConf.save(cfg, os.path.join(run_dir, ".hydra", "config.yaml"))

    return cfg, record
