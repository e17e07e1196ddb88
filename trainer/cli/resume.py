"""``resume=RUN_DIR``: the config a run dir was made with, plus this command's overrides."""

import os
from typing import List

from hydra import compose
from omegaconf import OmegaConf

from trainer.errors import ConfigError
from trainer.cli.paths import override_key
from trainer.config.rules import validate


def resumed_config(run_dir: str, overrides: List[str], config_name: str = "config"):
    """Compose the saved overrides of ``run_dir`` with ``overrides`` (which win), inside a Hydra app.

    Raises:
      ConfigError: ``run_dir`` is not a run dir of this runner.
    """
    saved = os.path.join(run_dir, ".hydra", "overrides.yaml")
    if not os.path.isfile(saved):
        raise ConfigError(f"resume={run_dir}: no {saved}; give a run dir the train command made (e.g. outputs/NAME)")
    merged = {}
    for o in list(OmegaConf.load(saved)) + list(overrides):
        if override_key(o) != "resume":
            merged[override_key(o)] = o
    merged = list(merged.values())
    cfg = compose(config_name, overrides=merged)
    if cfg.checkpoint.dir is None:
        cfg.checkpoint.dir = os.path.join(run_dir, "checkpoints")
    validate(cfg)  # before the run dir's record is touched
    # The run dir's record now describes this run: the next resume starts from it.
    OmegaConf.save(OmegaConf.create(merged), saved)
    OmegaConf.save(cfg, os.path.join(run_dir, ".hydra", "config.yaml"))
    return cfg
