"""Check a single run's command line before Hydra starts the job.

Hydra reports composition errors (an unknown option, a key that does not exist, a
value of the wrong type) as several lines and exits 1. Composing the same
overrides here first turns each into one line naming the key and the fix, with
exit status 2, before any output dir or TensorFlow work exists.
"""

import os
from typing import List

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import MissingConfigException
from omegaconf import ListConfig, OmegaConf

from trainer.config.rules import validate
from trainer.errors import ConfigError, fail, full_errors

# Flags after which Hydra does something other than run one job.
_HYDRA_FLAGS = {
    "-m", "--multirun", "-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--version",
    "-p", "--package", "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir",
    "--resolve", "--run", "-r", "-sc", "--shell-completion", "--experimental-rerun",
}


def one_line(exc: BaseException) -> str:
    """The meaningful lines of a Hydra/OmegaConf error and its causes, joined into one."""
    if isinstance(exc, MissingConfigException) and exc.options:
        group = (exc.missing_cfg_file or "").split("/")[0]
        bad = (exc.missing_cfg_file or "").split("/")[-1]
        return f"{group}={bad}: no such option; choose one of {', '.join(sorted(o for o in exc.options if not o.startswith('base_')))}"
    lines: List[str] = []
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for line in str(exc).splitlines():
            line = line.strip()
            skip = ("full_key:", "object_type", "reference_type", "Config search path", "provider=", "Set the environment")
            if line and not line.startswith(skip) and line not in lines:
                lines.append(line)
        exc = exc.__cause__ or exc.__context__
    text = "; ".join(lines[:3])
    if "not in" in text and "Key" in text:
        text += " (check the spelling: train --cfg job lists every key; add a new key with +key=value)"
    return text


def check_resumable(run_dir: str) -> None:
    """``resume=`` names a run dir the train command made.

    Raises:
      ConfigError: it does not exist, is not a dir, or has no ``.hydra/overrides.yaml``.
    """
    saved = os.path.join(run_dir, ".hydra", "overrides.yaml")
    if not os.path.isdir(run_dir):
        raise ConfigError(f"resume={run_dir}: no such directory; give a run dir the train command made "
                          "(e.g. outputs/NAME)")
    if not os.path.isfile(saved):
        raise ConfigError(f"resume={run_dir}: not a run dir (no {saved}); give a run dir the train command made "
                          "(e.g. outputs/NAME)")
    try:
        loaded = OmegaConf.load(saved)
    except Exception as e:
        raise ConfigError(f"resume={run_dir}: {saved} does not parse ({type(e).__name__}); restore it, or start "
                          "the run again with its overrides") from None
    if not isinstance(loaded, ListConfig) or not all(isinstance(o, str) for o in loaded):
        raise ConfigError(f"resume={run_dir}: {saved} is not a list of overrides; restore it, or start the run "
                          "again with its overrides")


def preflight(argv: List[str], config_module: str) -> None:
    """Compose and validate the overrides of a single run; exit 2 with one line if they are wrong."""
    if any(a.split("=", 1)[0] in _HYDRA_FLAGS for a in argv) or full_errors():
        return  # Hydra's own handling (and, with HYDRA_FULL_ERROR=1, its tracebacks)
    overrides = [a for a in argv if not a.lstrip("+~").startswith(("hydra.", "hydra/"))]
    try:
        with initialize_config_module(config_module=config_module, version_base="1.3"):
            cfg = compose("config", overrides=overrides)
            if cfg.resume:
                check_resumable(cfg.resume)  # before Hydra makes the dir or writes .hydra/resume into it
            else:
                validate(cfg)
    except ConfigError as e:
        fail(str(e), ConfigError.exit_code)
    except Exception as e:
        fail(one_line(e), ConfigError.exit_code)
    finally:
        GlobalHydra.instance().clear()
