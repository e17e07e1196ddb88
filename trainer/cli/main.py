"""The ``train`` command: Hydra's entry point, and the place errors become exit statuses.

The task composes the config and hands it to :func:`trainer.run`; a sweep job goes
through :func:`trainer.sweep.job.run_job`, which calls the same function.
"""

import sys
import time

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

import trainer
from trainer.cli.paths import point_latest, register_resolvers
from trainer.cli.preflight import preflight
from trainer.cli.resume import resumed_config
from trainer.config.schema import register_configs
from trainer.errors import CheckpointError, CheckpointLockedError, ConfigError, exit_now, exit_on_error
from trainer.sweep.job import report_failed_jobs, run_job

register_configs()
register_resolvers()

CONFIG_MODULE = "trainer.conf"


@hydra.main(version_base="1.3", config_path="pkg://" + CONFIG_MODULE, config_name="config")
def task(cfg) -> float:
    """One job: returns the eval objective for sweepers."""
    hc = HydraConfig.get()
    if hc.mode != RunMode.RUN:
        return run_job(cfg, hc)

    point_latest(hc.runtime.output_dir)

    def job():
        if not cfg.resume:
            return trainer.run(cfg, hc.runtime.output_dir).get("objective_value")
        resumed, record = resumed_config(cfg.resume, list(hc.overrides.task))
        trains = str(resumed.mode) in ("train", "train_and_evaluate")
        try:
            result = trainer.run(resumed, hc.runtime.output_dir)
        except (ConfigError, CheckpointError, CheckpointLockedError):
            raise  # refused: the run dir's record stays as it was
        except BaseException:
            if trains:
                record()  # it ran: a failure or a signal mid-run, resumed by the same command
            raise
        if trains:
            record()
        return result.get("objective_value")

    objective = exit_on_error(job)
    if cfg.distributed.kind in ("cluster", "tf_config"):
        exit_now(0)  # a cluster task: its gRPC server goes only with the process
    return objective


def main() -> None:
    argv = sys.argv[1:]
    preflight(argv, CONFIG_MODULE)
    started = time.time()
    task()
    if "-m" in argv or "--multirun" in argv:
        report_failed_jobs(argv, started)


if __name__ == "__main__":
    main()
