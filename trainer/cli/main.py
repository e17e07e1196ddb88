"""The ``train`` command: Hydra's entry point, and the place errors become exit statuses.

A single run is composed once, checked and run as ``@hydra.main`` runs it (same run dir,
``.hydra/`` files, logging and callbacks); ``-m`` sweeps and Hydra's flags go through
``@hydra.main`` itself. The task hands the config to :func:`trainer.run`; a sweep job goes
through :func:`trainer.sweep.job.run_job`, which calls the same function.
"""

import json
import sys
import time

import hydra
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

import trainer
from trainer.cli.paths import point_latest, register_resolvers, resolve_latest, swept_keys
from trainer.cli.preflight import checked_run_config, is_single_run, preflight
from trainer.cli.hydra_record import discard_staged, stage_record, staged_record
from trainer.cli.resume import resumed_config
from trainer.compat import hydra_run
from trainer.config.schema import register_configs
from trainer.dist.roles import DISTRIBUTED_KINDS
from trainer.errors import exit_now, exit_on_error
from trainer.interrupts import release_ctrl_c
from trainer.sweep.job import report_failed_jobs, run_job
from trainer.tracking import track

register_configs()
register_resolvers()

CONFIG_MODULE = "trainer.conf"


def job_function(cfg) -> float:
    """One job: returns the eval objective for sweepers."""
    hc = HydraConfig.get()
    if hc.mode != RunMode.RUN:
        return run_job(cfg, hc, swept_keys(hc.sweep.dir))

    point_latest(hc.runtime.output_dir)

    def job():
        # The run dir's record (.hydra/) is written once the run holds its checkpoint dir and will
        # train: a command refused (the lock, a check) or with nothing to do leaves it as it was.
        if not cfg.resume:
            run_cfg, record = cfg, staged_record(hc.runtime.output_dir, hc.output_subdir)
        else:
            run_cfg, record = resumed_config(cfg, cfg.resume, list(hc.overrides.task))
        started = time.time()
        try:
            result = trainer.run(run_cfg, hc.runtime.output_dir, on_accepted=record)
        finally:  # a failed or preempted run is recorded too
            if str(run_cfg.mode) in ("train", "train_and_evaluate"):
                track(run_cfg.tracking, hc.runtime.output_dir, list(hc.overrides.task), since=started)
        if str(run_cfg.mode) in ("evaluate", "predict", "export"):
            print(json.dumps(result, sort_keys=True), flush=True)  # the record, for scripts reading stdout
        return result.get("objective_value")

    try:
        objective = exit_on_error(job)
    finally:
        discard_staged(hc.runtime.output_dir, hc.output_subdir)
    if cfg.distributed.kind in DISTRIBUTED_KINDS:
        exit_now(0)  # a cluster task: its gRPC server goes only with the process
    return objective


task = hydra.main(version_base="1.3", config_path="pkg://" + CONFIG_MODULE, config_name="config")(job_function)


def run_single(argv) -> float:
    """One run, as ``Hydra.run`` does it, on the config :func:`checked_run_config` composed and
    checked. ``@hydra.main`` would compose twice more (once to read ``hydra.mode``, once to run),
    each about 0.3 s before the first step."""
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3", job_name="train"):
            app = GlobalHydra.instance().hydra
            cfg = stage_record(checked_run_config(app, argv))
            return hydra_run(app, cfg, job_function)
    finally:
        release_ctrl_c(raise_pending=False)  # an error before the run began: that error is the one reported


def main() -> None:
    argv = sys.argv[1:] = resolve_latest(sys.argv[1:])  # Hydra's own parse (sweeps) reads sys.argv
    if is_single_run(argv):
        run_single(argv)
        return
    preflight(argv, CONFIG_MODULE)
    release_ctrl_c()  # a sweep's jobs (or Hydra's own flags) run from here: Ctrl-C as usual
    started = time.time()
    task()
    if "-m" in argv or "--multirun" in argv:
        report_failed_jobs(argv, started)


if __name__ == "__main__":
    main()
