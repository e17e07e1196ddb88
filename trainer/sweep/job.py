"""One job of a Hydra multirun: the checks and records a sweep needs around ``run()``.

Jobs of the basic launcher share one process, so errors are raised (a SystemExit
would end the whole sweep) after the job's ``metrics.json`` records the failure;
Hydra finishes the other jobs and the sweep exits non-zero. ``sweep.fail_fast``
ends the sweep at the first failure instead. SIGTERM or SIGINT during a job ends
the whole sweep (status 143 or 130), the job recorded ``preempted``.
"""

import logging
import os
import time

from omegaconf import OmegaConf

import trainer
from trainer.config.rules import checkpoint_dir_for, prepare
from trainer.errors import ConfigError, Preempted, describe, fail
from trainer.records import failure_record, read_json, write_json
from trainer.tracking import track

log = logging.getLogger("trainer")


# Hydra values that differ from job to job: a checkpoint.dir built from one is the job's own.
_PER_JOB = ("${hydra:job.num}", "${hydra:job.id}", "${hydra:job.override_dirname}", "${hydra:runtime.output_dir}",
            "${hydra:sweep.subdir}")


def check_own_checkpoint_dir(checkpoint_cfg, job_dir: str) -> None:
    """An explicit ``checkpoint.dir`` must be the job's own: built from a per-job Hydra value
    (``${hydra:job.num}``, ...) or inside the job's dir. Jobs never share one."""
    raw = OmegaConf.to_container(checkpoint_cfg, resolve=False).get("dir")
    if raw is None or any(key in str(raw) for key in _PER_JOB):
        return
    path = os.path.abspath(os.path.expanduser(str(checkpoint_cfg.dir)))
    if os.path.basename(job_dir) in path.split(os.sep):
        return
    raise ConfigError(
        f"checkpoint.dir={checkpoint_cfg.dir}: every job of this sweep would share it; leave it unset (each job gets "
        "its own) or include the job, e.g. checkpoint.dir=/ckpts/${hydra:job.num}"
    )


def _launcher_jobs(hc) -> int:
    launcher = hc.launcher
    target = str(launcher.get("_target_", ""))
    if "joblib" in target.lower():
        n_jobs = launcher.get("n_jobs", -1)
        return os.cpu_count() if n_jobs in (None, -1) else max(1, int(n_jobs))
    return 1


def _finished_already(cfg, output_dir: str):
    """The job's record when it finished at its target with its newest intact checkpoint there (a
    sweep run again), else None; ``sweep.rerun_finished`` and cluster jobs always run."""
    if cfg.sweep.rerun_finished or str(cfg.distributed.kind) != "none" or cfg.mode not in ("train", "train_and_evaluate"):
        return None
    if read_json(os.path.join(output_dir, "metrics.json")).get("status") != "finished":
        return None
    from trainer.checkpoints.guard import finished_run

    cfg = prepare(cfg, output_dir)
    return finished_run(cfg.checkpoint.dir, cfg.train.max_steps, output_dir)


def run_job(cfg, hc, swept=frozenset()) -> float:
    """Run one sweep job; record a failure in its ``metrics.json`` (and return None for it).
    ``swept``: the keys the sweep varies (its HParams). With ``tracking``, the job's record also goes
    there (experiment: the sweep dir's name)."""
    started = time.time()
    try:
        return _run_job(cfg, hc, swept)
    finally:
        track(cfg.tracking, hc.runtime.output_dir, list(hc.overrides.task),
              experiment=os.path.basename(os.path.abspath(hc.sweep.dir)), since=started)


def _run_job(cfg, hc, swept) -> float:
    output_dir = hc.runtime.output_dir
    try:
        check_own_checkpoint_dir(cfg.checkpoint, output_dir)
        parallel = _launcher_jobs(hc)
        if parallel > 1 and not cfg.device.intra_op_threads:
            # Parallel jobs share the cores: split them rather than let each take them all.
            threads = max(1, (os.cpu_count() or 1) // parallel)
            cfg.device.intra_op_threads = threads
            cfg.device.inter_op_threads = threads
            log.info("%d parallel jobs: %d intra-op and inter-op threads each", parallel, threads)
        done = _finished_already(cfg, output_dir)
        if done is not None:  # a sweep run again: skip it before building anything, and write nothing
            log.info("job %s finished already at step %s: skipped", os.path.basename(output_dir), done.get("global_step"))
            return done.get("objective_value")
        result = trainer.run(cfg, output_dir)
        checkpoints = checkpoint_dir_for(cfg.checkpoint.dir, output_dir)
        write_hparams(output_dir, list(hc.overrides.task), os.path.join(checkpoints, "eval"), swept, result)
        return result.get("objective_value")
    except Preempted as e:
        # A signal stops the whole sweep, not this job alone: the job recorded itself `preempted`
        # with its step, and running the sweep again resumes it and runs the jobs after it.
        log.error("job %s: %s; the sweep stops here (run it again to go on)", os.path.basename(output_dir), e)
        raise SystemExit(e.exit_code) from None
    # broad: a failed job of a sweep is recorded and the sweep goes on, whatever the job raised
    except Exception as e:
        reason = describe(e)
        path = os.path.join(output_dir, "metrics.json")
        written = read_json(path)
        if not (written.get("status") == "failed" and written.get("pid") == os.getpid()):
            # Training records its own failure (with the step reached); otherwise it failed before.
            os.makedirs(output_dir, exist_ok=True)
            write_json(path, failure_record(cfg.model.name, cfg.session.kind, reason))
        log.error("job %s failed: %s", os.path.basename(output_dir), reason)
        if cfg.sweep.fail_fast:
            raise SystemExit(1)  # ends the sweep here, as sweep.fail_fast asks
        # The other jobs go on; the sweep exits non-zero at its end (report_failed_jobs), in one
        # line rather than with this job's traceback. A sweeper reads None as a failed trial.
        return None


def _hparam_value(text: str):
    """An override's value as TensorBoard's HParams take it: a number, a bool or the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def write_hparams(output_dir: str, overrides, eval_dir: str, swept=frozenset(), result=None) -> None:
    """TensorBoard HParams for this job, so that ``tensorboard --logdir outputs/multirun`` compares
    the jobs: the swept keys' values (every override where the sweep's keys are unknown) as the
    session's hparams, written into the job's eval summaries dir (the session is then that run, its
    eval scalars the metrics, and no empty run is added per job); and, once per sweep, the
    experiment at the sweep dir's root naming those keys and the eval metrics only (not
    ``global_step/sec`` or ``learning_rate``)."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    hparams = {}
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key and not key.startswith(("hydra.", "sweep.")) and key != "resume" and (not swept or key in swept):
            hparams[key] = _hparam_value(value)
    metrics = sorted(k[len("eval_"):] for k, v in (result or {}).items()
                     if k.startswith("eval_") and k != "eval_examples" and isinstance(v, (int, float)))
    root = os.path.dirname(os.path.abspath(output_dir))
    try:
        if not os.path.isdir(eval_dir):
            return  # no evaluation: no metrics to compare
        with tf.summary.create_file_writer(eval_dir).as_default():
            hp.hparams(hparams, trial_id=os.path.basename(output_dir))
        if metrics and not any(n.startswith("events.out.tfevents") for n in os.listdir(root)):
            with tf.summary.create_file_writer(root).as_default():
                hp.hparams_config(hparams=[hp.HParam(k) for k in sorted(hparams)],
                                  metrics=[hp.Metric(m, display_name=f"eval {m}") for m in metrics])
    except Exception as e:  # TensorBoard's extras must never fail a finished job
        log.warning("could not write the job's TensorBoard hparams: %s", e)


def report_failed_jobs(argv, since: float) -> None:
    """After a sweep: exit 1 with one line when a job of it (a ``metrics.json`` written since
    ``since`` in the sweep dir) failed."""
    sweep_dir = next((a.split("=", 1)[1] for a in argv if a.startswith("hydra.sweep.dir=")), "outputs/multirun")
    if not os.path.isdir(sweep_dir):
        return
    ran, failed = 0, []
    for name in sorted(os.listdir(sweep_dir)):
        path = os.path.join(sweep_dir, name, "metrics.json")
        if os.path.isfile(path) and os.path.getmtime(path) >= since:
            ran += 1
            record = read_json(path)
            if record.get("status") == "failed":
                failed.append((name, record.get("error", "?")))
    if failed:
        name, error = failed[0]
        fail(f"{len(failed)} of {ran} sweep jobs failed, the first {name}: {error}; every job's status is in "
             f"{os.path.join(sweep_dir, 'summary.md')}", 1)
