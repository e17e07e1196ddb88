"""One job of a Hydra multirun: the checks and records a sweep needs around ``run()``.

Jobs of the basic launcher share one process, so errors are raised (a SystemExit
would end the whole sweep) after the job's ``metrics.json`` records the failure;
Hydra finishes the other jobs and the sweep exits non-zero. ``sweep.fail_fast``
ends the sweep at the first failure instead.
"""

import json
import logging
import os

from trainer.errors import ConfigError
from trainer.modes import execute

log = logging.getLogger("trainer")


def check_own_checkpoint_dir(cfg, job_name: str, job_num: int) -> None:
    """An explicit ``checkpoint.dir`` must name the job (its dir name or number): jobs never share one."""
    path = cfg.checkpoint.dir
    if path is None:
        return
    parts = set(os.path.normpath(str(path)).split(os.sep)) | {os.path.basename(str(path))}
    if job_name in str(path) or any(part == str(job_num) or part.endswith(f"-{job_num}") or part.endswith(f"_{job_num}")
                                     for part in parts):
        return
    raise ConfigError(
        f"checkpoint.dir={path}: every job of this sweep would share it; leave it unset (each job gets its own) "
        "or include the job, e.g. checkpoint.dir=/ckpts/${hydra:job.num}"
    )


def _launcher_jobs(hc) -> int:
    launcher = hc.launcher
    target = str(launcher.get("_target_", ""))
    if "joblib" in target.lower():
        n_jobs = launcher.get("n_jobs", -1)
        return os.cpu_count() if n_jobs in (None, -1) else max(1, int(n_jobs))
    return 1


def run_job(cfg, hc) -> float:
    """Run one sweep job; record a failure in its ``metrics.json`` and raise it."""
    output_dir = hc.runtime.output_dir
    try:
        check_own_checkpoint_dir(cfg, os.path.basename(output_dir), hc.job.num)
        parallel = _launcher_jobs(hc)
        if parallel > 1 and not cfg.device.intra_op_threads:
            # Parallel jobs share the cores: split them rather than let each take them all.
            threads = max(1, (os.cpu_count() or 1) // parallel)
            cfg.device.intra_op_threads = threads
            cfg.device.inter_op_threads = threads
            log.info("%d parallel jobs: %d intra-op and inter-op threads each", parallel, threads)
        return execute(cfg, output_dir).get("objective_value")
    except Exception as e:
        reason = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        os.makedirs(output_dir, exist_ok=True)
        with open(os.path.join(output_dir, "metrics.json"), "w") as f:
            json.dump({"status": "failed", "error": reason, "model": cfg.model.name, "session": str(cfg.session.kind.value)}, f)
        log.error("job %s failed: %s", os.path.basename(output_dir), reason)
        if cfg.sweep.fail_fast:
            raise SystemExit(1)  # ends the sweep here, as sweep.fail_fast asks
        raise
