"""The ``train`` command: Hydra's entry point, and the only place errors become exit statuses."""

import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from trainer.errors import TrainerError
from trainer.paths import register_resolvers
from trainer.schema import register_configs

register_configs()
register_resolvers()

CONFIG_MODULE = "trainer.conf"


def _full_errors() -> bool:
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def _fail(message: str, code: int):
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


@hydra.main(version_base="1.3", config_path="pkg://" + CONFIG_MODULE, config_name="config")
def task(cfg) -> float:
    """One job: returns the eval objective for sweepers."""
    from trainer.modes import execute
    from trainer.resume import resumed_config

    hc = HydraConfig.get()
    single = hc.mode == RunMode.RUN
    if not single:
        from trainer.multirun import run_job

        return run_job(cfg, hc)

    def job():
        resumed = resumed_config(cfg.resume, list(hc.overrides.task)) if cfg.resume else cfg
        return execute(resumed, hc.runtime.output_dir).get("objective_value")

    objective = exit_on_error(job)
    if getattr(cfg.distributed.kind, "value", cfg.distributed.kind) in ("cluster", "tf_config"):
        from trainer.distributed import exit_process

        exit_process(0)  # a cluster task: its gRPC server must go at once
    return objective


def exit_on_error(fn):
    """``fn()``, with the runner's errors turned into one ``error:`` line and their exit status."""
    try:
        return fn()
    except TrainerError as e:
        if _full_errors():
            raise
        _fail(str(e), e.exit_code)
    except Exception as e:  # the CLI boundary: one line, no traceback
        if _full_errors():
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        _fail(f"{type(e).__name__}: {first} (HYDRA_FULL_ERROR=1 shows the traceback)", 1)


def main() -> None:
    from trainer.preflight import preflight

    preflight(sys.argv[1:], CONFIG_MODULE)
    try:
        task()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise SystemExit(130)


if __name__ == "__main__":
    main()
