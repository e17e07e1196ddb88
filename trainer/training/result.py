"""The result record of a training run: what ``metrics.json`` says, for the chief and for other workers."""

import logging
import math
import signal
from typing import Dict

import tensorflow as tf

from trainer.errors import TrainingError
from trainer.model.schedules import schedule_record
from trainer.records import eval_key
from trainer.compat import onednn_enabled

log = logging.getLogger("trainer")


def _rounded(timings: Dict) -> Dict:
    return {k: round(v, 3) for k, v in timings.items()}


def _preemption(preemption) -> str:
    return signal.Signals(preemption.signum).name


def stop_reason(max_steps, step: int, stats, preemption) -> str:
    """Why training stopped: ``signal``, ``end_of_input``, ``max_steps``, or ``hook`` (a hook asked:
    early stopping, stop_at_step, a NaN hook that stops)."""
    if preemption.signum is not None:
        return "signal"
    if stats.end_of_input:
        return "end_of_input"
    if max_steps is not None and step >= max_steps:
        return "max_steps"
    return "hook"


def worker_record(run, role, stats, preemption) -> Dict:
    """A cluster worker other than the chief (``role``): its own steps (it never reads the eval metrics).

    ``run`` has the run's ``cfg``, ``device``, ``precision`` and ``timings``."""
    cfg, device, timings = run.cfg, run.device, run.timings
    record = {
        "status": "finished" if preemption.signum is None else "preempted", "role": role.name,
        "global_step": int(stats.last[1]) + 1 if stats.last is not None else None, "local_steps": stats.steps,
        "loss": None, "session": str(cfg.session.kind),
        "steps_per_sec": stats.steps / stats.train_secs if stats.train_secs > 0 else None,
        "model": cfg.model.name, "data": cfg.data.name, "device": device, "precision": run.precision,
        "onednn": onednn_enabled(), "timings": _rounded(timings),
    }
    if preemption.signum is not None:
        record.update(message=f"stopped by {_preemption(preemption)}", exit_code=preemption.exit_code)
    return record


def final_step(metrics, start_step: int) -> int:
    """The last step this run trained or evaluated at (``metrics``: its MetricsLog)."""
    return max(metrics.train.get("step", start_step), metrics.eval.get("step", start_step))


def chief_record(run, start_step: int, metrics, stats, preemption, final_step: int, extra: Dict = None) -> Dict:
    """The run's record at ``final_step``: its training loss, eval metrics and objective (and ``extra``).

    ``run`` has the run's ``cfg``, ``device``, ``precision``, ``timings`` and ``objective``.

    Raises:
      TrainingError: no evaluation recorded the objective (``run.objective``, checked at graph build).
    """
    cfg, device, timings = run.cfg, run.device, run.timings
    record = {
        "global_step": int(final_step), "start_step": int(start_step), "loss": metrics.train.get("loss"),
        "steps_per_sec": (final_step - start_step) / stats.train_secs if stats.train_secs > 0 else None,
        "session": str(cfg.session.kind), "model": cfg.model.name, "data": cfg.data.name, "device": device,
        "precision": run.precision, "onednn": onednn_enabled(), "checkpoint_dir": cfg.checkpoint.dir,
        "timings": _rounded(timings), "max_steps": cfg.train.max_steps,
        "optimizer_schedule": schedule_record(cfg.optimizer),
        "stop_reason": stop_reason(cfg.train.max_steps, final_step, stats, preemption),
    }
    record.update(extra or {})
    if preemption.signum is not None:
        latest = tf.train.latest_checkpoint(cfg.checkpoint.dir)
        message = (f"stopped by {_preemption(preemption)} at step {final_step}; checkpoint saved: {latest}; "
                   "run the same command to resume")
        log.warning(message)
        return dict(record, status="preempted", message=message, exit_code=preemption.exit_code)
    objective = run.objective
    evals = {k: v for k, v in metrics.eval.items() if k not in ("kind", "step", "time")}
    if objective is None:  # trained without evaluation (eval.enabled=false): no result beyond the loss
        _check_finite(record["loss"], {}, int(final_step))
        return dict(record, status="finished")
    if objective not in evals:
        raise TrainingError(f"eval.objective={objective}: no evaluation recorded it; metrics.jsonl has {sorted(evals)}")
    _check_finite(record["loss"], evals, int(final_step))
    record.update(status="finished", objective=objective, objective_value=evals[objective])
    # A model's own eval_loss keeps its key; the runner's mean loss beside it is the Estimator API's "loss".
    record.update({eval_key(k): v for k, v in evals.items() if not (k == "loss" and "eval_loss" in evals)})
    return record


def _check_finite(loss, evals: Dict, step: int) -> None:
    """A run whose final eval metric is NaN or infinite has no result: it fails. A NaN final training
    loss (the last step skipped by ``train.on_nan=skip_step``, or stopped by a user's NaN hook) is
    recorded as null under ``non_finite`` and warned about: the weights are those of the last good step."""
    bad = [k for k, v in sorted(evals.items()) if isinstance(v, float) and not math.isfinite(v)]
    if bad:
        raise TrainingError(f"at step {step}, eval {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} NaN or Inf: "
                            "not a result; lower optimizer.learning_rate or check the input, and restart from an "
                            "earlier checkpoint (checkpoint.restore_step=N)")
    if isinstance(loss, float) and not math.isfinite(loss):
        log.warning("step %d: the last training loss is NaN or Inf (recorded as null in metrics.json)", step)
