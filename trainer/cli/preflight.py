"""Check a command line before Hydra starts the job.

Hydra reports composition errors (an unknown option, a key that does not exist, a
value of the wrong type) as several lines and exits 1. Here each becomes one line
naming the key and the fix, with exit status 2, before any output dir or TensorFlow
work exists: a single run's config is composed once, checked, and then run as it is
(:func:`checked_run_config`); a sweep's overrides are composed for every value first
(:func:`preflight`).
"""

import contextlib
import os
import re
import shutil
import json
from typing import List

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import MissingConfigException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from trainer.cli.paths import YAML_ERRORS, override_key, record_swept_keys
from trainer.cli.resume import check_resumable, resume_overrides
from trainer.config.rules import check_writable_dir, validate
from trainer.data.sources import check_download
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
            # Hydra's unfilled message templates ('$VALUE' of type '$VALUE_TYPE') and bare "None" say nothing.
            if line and not line.startswith(skip) and line not in lines and "$VALUE" not in line and line != "None":
                lines.append(line)
        exc = exc.__cause__ or exc.__context__
    text = "; ".join(lines[:3])
    missing_equal = re.search(r"Error parsing override '([^']*)'; missing EQUAL", text)
    if missing_equal:
        return (f"'{missing_equal.group(1)}' is not a key=value override: a value with spaces must be quoted, "
                "e.g. model.fn='a b' or 'hooks.x={_target_: my.Hook, role: all}'")
    if "no viable alternative at input" in text or "mismatched input" in text:
        text = text.split("; See https://hydra.cc")[0] + (" (Hydra's override grammar: key=value, lists [a,b], "
                                                          "dicts {k: v, k2: v2}; quote values with spaces)")
    unknown = re.search(r"Could not override '([\w.]+)'.*Key '(\w+)' not in '(\w+)'", text)
    if unknown:
        return _no_such_key(*unknown.groups())
    if "not in" in text and "Key" in text:
        text += " (check the spelling: train --cfg job lists every key)"
    return text


def _no_such_key(full_key: str, key: str, schema: str) -> str:
    """``train.max_stepz=3``: the key is not in the schema of its node; the nearest one that is."""
    import dataclasses

    from trainer.config import schema as schemas
    from trainer.config.rules import nearest

    kind = getattr(schemas, schema, None)
    declared = [f.name for f in dataclasses.fields(kind)] if dataclasses.is_dataclass(kind) else []
    parent = full_key.rsplit(".", 1)[0] if "." in full_key else ""
    hint = nearest(key, declared, parent) or (f"; the keys of {parent} are {', '.join(sorted(declared))}"
                                              if declared else "")
    return f"{full_key}: no such key{hint} (train --cfg job lists every key)"


_MULTIRUN = {"-m", "--multirun"}
_MAX_SWEEP_CHECKS = 64  # compositions a sweep's preflight makes at most


def sweep_variants(overrides: List[str]) -> List[List[str]]:
    """Single-run override lists covering every value of a sweep: the first value of each swept
    key, then each other value of one key at a time (so each bad value is found). Continuous
    sweeps (``interval(...)``, for Optuna) are checked at neither end; their keys are left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    fixed, swept = [], []
    for override, text in zip(parsed, overrides):
        if not override.is_sweep_override():
            fixed.append(text)
            continue
        if override.is_interval_sweep():
            continue
        key = text.split("=", 1)[0]
        values = [f"{key}={v}" for v in override.sweep_string_iterator()]
        if values:
            swept.append(values)
    base = fixed + [values[0] for values in swept]
    variants = [base]
    for i, values in enumerate(swept):
        for value in values[1:]:
            variants.append(fixed + [v[0] if j != i else value for j, v in enumerate(swept)])
    return variants[:_MAX_SWEEP_CHECKS]


def _check_output_dir(argv: List[str], overrides: List[str], multirun: bool) -> None:
    """The run dir (or sweep dir) Hydra is about to make can be made and written.

    Raises:
      ConfigError: naming hydra.run.dir / hydra.sweep.dir, or the working dir it defaults under.
    """
    from trainer.cli.paths import run_dir

    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = next((a.split("=", 1)[1] for a in argv if a.startswith(key + "=")), None)
    if given is not None:
        check_writable_dir(given, key)
        if not multirun:
            _check_not_foreign(given, key)
        return
    default = "outputs/multirun" if multirun else run_dir(overrides)
    try:
        check_writable_dir(default, key)
    except ConfigError:
        raise ConfigError(f"cannot write the run dir {default} under the working dir {os.getcwd()}; run from a "
                          f"writable dir or set {key}=DIR") from None


def _check_not_foreign(path: str, key: str) -> None:
    """A run dir given by hand is new, empty, or a run dir (it has ``.hydra/``): the run writes
    ``metrics.json``, ``train.log`` and ``checkpoints/`` into it, over whatever else is there."""
    if not os.path.isdir(path) or os.path.isdir(os.path.join(path, ".hydra")):
        return
    entries = sorted(os.listdir(path))
    if entries:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise ConfigError(f"{key}={path} is a dir with other files ({shown}), not a run dir: the run would write "
                          f"its metrics.json, train.log and checkpoints into it; give a new or empty dir")


def hydra_handles(argv: List[str]) -> bool:
    """Whether Hydra's own entry point takes this command line: a flag (``--cfg``, ``--help``, ...) or
    ``HYDRA_FULL_ERROR=1`` (its tracebacks)."""
    return any(a.split("=", 1)[0] in _HYDRA_FLAGS for a in argv if a not in _MULTIRUN) or full_errors()


def check_config_dirs(argv: List[str]) -> None:
    """Every YAML file of a ``--config-dir`` / ``-cd`` loads (Hydra, which composes such a command
    itself, reports a bad one with a traceback).

    Raises:
      ConfigError: the dir does not exist, or a file does not load (naming it, with the line).
    """
    dirs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--config-dir", "-cd")]
    dirs += [a.split("=", 1)[1] for a in argv if a.startswith(("--config-dir=", "-cd="))]
    for folder in dirs:
        if not os.path.isdir(folder):
            raise ConfigError(f"--config-dir {folder}: no such directory")
        for root, _, names in os.walk(folder):
            for name in sorted(n for n in names if n.endswith((".yaml", ".yml"))):
                path = os.path.join(root, name)
                try:
                    OmegaConf.load(path)
                except YAML_ERRORS as e:
                    mark = getattr(e, "problem_mark", None)
                    where = f" line {mark.line + 1}" if mark is not None else ""
                    problem = getattr(e, "problem", None) or str(e).strip().splitlines()[0]
                    raise ConfigError(f"{path}{where}: {problem}; fix the YAML (a config holds plain values: no "
                                      "!!python tags)") from None


def is_single_run(argv: List[str]) -> bool:
    """One run, neither ``-m`` nor ``hydra.mode=`` asking for a sweep, nor a flag for Hydra."""
    return (not any(a in _MULTIRUN or a.startswith("hydra.mode=") for a in argv)) and not hydra_handles(argv)


def _check(cfg) -> None:
    try:
        if cfg.resume:
            check_resumable(cfg.resume)  # before Hydra makes the dir or writes .hydra/resume into it
        else:
            validate(cfg)
    except InterpolationResolutionError as e:
        _unless_hydra_value(e)  # a value naming ${hydra:...}: only the job itself can resolve it (and checks it then)


def _unless_hydra_value(error: InterpolationResolutionError) -> None:
    """Let an interpolation that only the job can resolve (``${hydra:...}``) pass; any other (an
    ``${oc.env:...}`` of the wrong type, a missing variable) is a config error.

    Raises:
      ConfigError: naming the key and what its interpolation gave.
    """
    if "HydraConfig was not set" in str(error):
        return
    key = getattr(error, "full_key", None) or "config"
    message = str(error).strip().splitlines()[0]
    raise ConfigError(f"{key}: {message}; fix the value or the environment variable it reads") from None


def _task_overrides(argv: List[str]) -> List[str]:
    """The overrides of the config itself, without Hydra's own (``hydra.*``, ``hydra/...``)."""
    return [a for a in argv if not a.lstrip("+~").startswith(("hydra.", "hydra/"))]


@contextlib.contextmanager
def _exit_2_in_one_line():
    """Any error inside: exit 2 with one line (``error: ...``)."""
    try:
        yield
    except ConfigError as e:
        fail(str(e), ConfigError.exit_code)
    # broad: the checks before a job: any error is one line and exit 2
    except Exception as e:
        fail(one_line(e), ConfigError.exit_code)


def _resumed_argv(argv: List[str]) -> List[str]:
    """``argv`` of a ``resume=RUN_DIR`` command as the run is composed: the run dir's saved overrides
    merged with these (``trainer.cli.resume.resume_overrides``), then ``resume=`` and Hydra's own."""
    task = _task_overrides(argv)
    resume = [o.split("=", 1)[1] for o in task if override_key(o) == "resume"]
    if not resume or not resume[-1]:
        return argv
    return [*resume_overrides(resume[-1], task), f"resume={resume[-1]}", *[a for a in argv if a not in task]]


def _check_resumed(cfg) -> None:
    try:
        validate(cfg)  # composed from the run's own overrides: checked as a new run is
    except InterpolationResolutionError as e:
        _unless_hydra_value(e)


def checked_run_config(hydra_app, argv: List[str]) -> DictConfig:
    """A single run's whole config, ``hydra`` node included, composed as ``Hydra.run`` composes it
    and checked; exit 2 with one line if it is wrong. The job then runs on this very config
    (a resumed run's: composed once, from the saved and the new overrides)."""
    with _exit_2_in_one_line():
        _check_output_dir(argv, _task_overrides(argv), False)
        argv = _resumed_argv(argv)
        # hydra.mode=RUN: the override @hydra.main adds when the config leaves the mode unset.
        cfg = hydra_app.compose_config("config", overrides=[*argv, "hydra.mode=RUN"], run_mode=RunMode.RUN)
        _check(cfg)
        if cfg.resume:
            _check_resumed(cfg)
        return cfg


def _check_launcher(overrides: List[str]) -> None:
    """``hydra/launcher=submitit_slurm`` where SLURM's ``srun`` is not on the PATH fails here, in one
    line, instead of in the launcher's traceback ("Could not detect srun")."""
    if "hydra/launcher=submitit_slurm" in overrides and not shutil.which("srun"):
        raise ConfigError("hydra/launcher=submitit_slurm: no srun on this machine's PATH (it is not a SLURM login "
                          "node); run the command where SLURM is, or use hydra/launcher=submitit_local here")


def _record_sweeper_params(config_module: str, one_job: List[str]) -> None:
    """The keys a sweeper with ``params`` (Optuna's) varies, recorded in its sweep dir for the jobs'
    dir names and HParams (``trainer.cli.paths.swept_keys``). ``one_job``: the overrides of one job
    with Hydra's own."""
    with initialize_config_module(config_module=config_module, version_base="1.3"):
        hydra_cfg = compose("config", overrides=one_job, return_hydra_config=True).hydra
    params = OmegaConf.select(hydra_cfg, "sweeper.params")
    if params:
        record_swept_keys(str(hydra_cfg.sweep.dir), [str(key) for key in params])


def _check_sweep_resources(composed) -> None:
    """What every job of a sweep needs and the machine may lack, checked once before the first job:
    the data's download host, and a GPU for ``device=gpu`` (TensorFlow is imported for that only)."""
    for data in {json.dumps(OmegaConf.to_container(c.data, resolve=False), sort_keys=True): c.data
                 for c in composed}.values():
        check_download(data)
    gpu = next((c for c in composed if c.device.kind == "gpu"), None)
    if gpu is not None:  # TensorFlow is imported for this only: a sweep asking for a GPU
        from trainer.process import import_tensorflow

        import_tensorflow()  # quietly, as the jobs do
        from trainer.session.device import resolve_device

        resolve_device(gpu.device)


def preflight(argv: List[str], config_module: str) -> None:
    """Before ``@hydra.main`` (a sweep, ``hydra.mode=``): compose and validate the overrides of
    every value of a sweep (``-m``), or the one run; exit 2 with one line if they are wrong."""
    multirun = any(a in _MULTIRUN for a in argv)
    flags = [a for a in argv if a not in _MULTIRUN]
    if hydra_handles(argv):
        if not full_errors():
            with _exit_2_in_one_line():
                check_config_dirs(argv)
        return  # Hydra's own handling (and, with HYDRA_FULL_ERROR=1, its tracebacks)
    overrides = _task_overrides(flags)
    try:
        with _exit_2_in_one_line():
            if any(override_key(o) == "resume" for o in overrides):
                raise ConfigError("resume= continues one run, composed from the run dir's saved overrides; run it "
                                  "without -m and hydra.mode= (a sweep's jobs resume by running the sweep again)")
            _check_output_dir(flags, overrides, multirun)
            _check_launcher(flags)
            variants = sweep_variants(overrides) if multirun else [overrides]
            with initialize_config_module(config_module=config_module, version_base="1.3"):
                composed = [compose("config", overrides=variant) for variant in variants]
                for cfg in composed:
                    _check(cfg)
            if multirun:  # once for the sweep, not in each job after TensorFlow's import
                _check_sweep_resources(composed)
                hydra_flags = [a for a in flags if a not in overrides]  # hydra.*, hydra/...: no sweep values
                _record_sweeper_params(config_module, variants[0] + hydra_flags)
    finally:
        GlobalHydra.instance().clear()
