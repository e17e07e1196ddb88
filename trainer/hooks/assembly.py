"""A training run's hooks, in the order both backends run them: the runner's own, the model's
(``training_hooks``, ``training_chief_hooks``), the config's, and a cluster's.

The chief's list runs first, as MonitoredTrainingSession runs them. Within it the NaN guard
comes first, so a NaN step is refused before any other hook (the checkpoint saver) sees it.
"""

import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

import tensorflow as tf

from trainer.config.targets import instantiate, load_callable
from trainer.errors import ConfigError
from trainer.hooks.evaluation import EvalHook
from trainer.hooks.builtin import (BroadcastHook, CheckpointSaverHook, CollectiveStopHook, InputInitHook, MetricsHook, NanGuardHook, PreemptionHook,
                                  ReleaseSyncWorkersHook, StalledStepHook, StopAtLastStepHook, TrainingSummaryHook,
                                  open_event_writers)

tf1 = tf.compat.v1

ROLES = ("chief", "all")
NEVER_STEPS = 2 ** 62  # a save cadence no run reaches


@dataclass(frozen=True)
class UserHooks:
    """What the config adds: hooks for every task, hooks for the chief, CheckpointSaverListeners."""

    every: List
    chief: List
    listeners: List


def check_user_hooks(hooks_cfg, listeners_cfg) -> List[str]:
    """The config's hooks and listeners checked without building any: each ``_target_`` imports, and a
    class is a SessionRunHook (or CheckpointSaverListener). Nothing of the user's is called: a run is
    refused before any of its code runs. Returns ``NAME=TARGET`` of each, as the run will build them.

    Raises:
      ConfigError: naming the entry.
    """
    found = []
    entries = [(f"hooks.{n}", e, tf1.train.SessionRunHook) for n, e in (hooks_cfg or {}).items()]
    entries += [(f"checkpoint.listeners.{n}", e, tf1.train.CheckpointSaverListener)
                for n, e in (listeners_cfg or {}).items()]
    for key, entry, kind in entries:
        if entry is None:
            continue
        if "_target_" not in entry:
            raise ConfigError(f"{key}: no _target_; give the class or factory to build, e.g. {{_target_: my_pkg.MyHook}}")
        if key.startswith("hooks.") and entry.get("role", "all") not in ROLES:
            raise ConfigError(f"{key}.role={entry.get('role')}: use chief or all")
        target = load_callable(entry["_target_"], f"{key}._target_")
        if isinstance(target, type) and not issubclass(target, kind):
            raise ConfigError(f"{key}: {entry['_target_']} is not a {kind.__name__}")
        found.append(f"{key.split('.')[-1]}={entry['_target_']}")
    return found


def make_config_hooks(hooks_cfg) -> Tuple[List, List]:
    """Instantiate the ``hooks`` config (in the built graph): ``(all_hooks, chief_hooks)``.

    Each entry is ``{_target_, role, **kwargs}``; ``role`` is ``chief`` or ``all`` (default).
    A null entry is skipped, so ``hooks.NAME=null`` switches a hook off too.
    """
    all_hooks, chief_hooks = [], []
    for name, entry in (hooks_cfg or {}).items():
        if entry is None:
            continue
        entry = dict(entry)
        role = entry.pop("role", "all")
        if role not in ROLES:
            raise ConfigError(f"hooks.{name}.role={role}: use chief or all")
        hook = instantiate(entry, f"hooks.{name}")
        if not isinstance(hook, tf1.train.SessionRunHook):
            raise ConfigError(f"hooks.{name}: {entry['_target_']} made a {type(hook).__name__}, not a SessionRunHook")
        (chief_hooks if role == "chief" else all_hooks).append(hook)
    return all_hooks, chief_hooks


def make_listeners(listeners_cfg) -> List:
    """CheckpointSaverListeners from ``{name: {_target_, ...}}``."""
    made = []
    for name, entry in (listeners_cfg or {}).items():
        if entry is None:
            continue
        listener = instantiate(entry, f"checkpoint.listeners.{name}")
        if not isinstance(listener, tf1.train.CheckpointSaverListener):
            raise ConfigError(f"checkpoint.listeners.{name}: {type(listener).__name__} is not a CheckpointSaverListener")
        made.append(listener)
    return made


def make_user_hooks(hooks_cfg, listeners_cfg) -> UserHooks:
    """The config's hooks and listeners (``hooks``, ``checkpoint.listeners``), built in the default graph: a
    wrong tensor name fails here."""
    every, chief = make_config_hooks(hooks_cfg)
    return UserHooks(every, chief, make_listeners(listeners_cfg))


@dataclass(frozen=True)
class Cadence:
    """When and where the runner's hooks act during training, from the config's ``checkpoint``, ``train``,
    ``eval``, ``log`` and ``summary`` keys."""

    ckpt_dir: str  # checkpoint.dir: checkpoints, the training summaries; eval/ beneath it
    save_steps: Optional[int]  # checkpoint.every_steps
    save_secs: Optional[int]  # checkpoint.every_secs
    max_steps: Optional[int]  # train.max_steps
    on_nan: str  # train.on_nan
    max_skipped_steps: Optional[int]  # train.max_skipped_steps
    stalled_steps_limit: Optional[int]  # train.stalled_steps_limit
    eval_every_steps: Optional[int]  # eval.every_steps
    eval_steps: Optional[int]  # eval.steps
    log_every_steps: int  # log.every_steps
    summary_every_steps: Optional[int]  # summary.every_steps


@dataclass(frozen=True)
class RunParts:
    """What the runner's hooks report to and act on during one training run."""

    metrics: object  # a MetricsLog: metrics.jsonl and the last records
    preemption: object  # a PreemptionHandler: ``signum`` once a signal came
    evaluation: object  # a SharedEvaluation or SeparateEvaluation
    eval_source: str = "the eval input"  # named in errors: the test split, data.eval_fn=...


@dataclass(frozen=True)
class TrainingHooks:
    every: List  # every training task's
    chief: List  # the chief's (run first)
    eval_hook: Optional[EvalHook]  # None: a run without evaluation (eval.enabled=false)


def _make_saver_hook(cadence: Cadence, graph, listeners, alongside=None):
    every_steps, every_secs = cadence.save_steps, cadence.save_secs
    if not every_steps and not every_secs:
        every_steps = cadence.max_steps or NEVER_STEPS  # only the first and the final save
    return CheckpointSaverHook(cadence.ckpt_dir, save_secs=every_secs or None, save_steps=every_steps or None,
                               saver=graph.saver, listeners=listeners, alongside=alongside, step_after=graph.step_after)


def make_training_hooks(cadence: Cadence, graph, user: UserHooks, parts: RunParts, role) -> TrainingHooks:
    """The hooks of a training run. ``role`` (``trainer.training.single_process``) adds its own hooks and
    tells whether this task is the chief."""
    is_chief = role.is_chief
    metrics, preemption = parts.metrics, parts.preemption
    eval_dir = os.path.join(cadence.ckpt_dir, "eval")
    if is_chief:  # before the hooks below, which look their writers up by dir
        # The checkpoint dir's graph and meta graph: the CheckpointSaverHook's thread writes them.
        open_event_writers({cadence.ckpt_dir: None, **({eval_dir: graph.graph} if parts.evaluation is not None else {})})
    input_init = InputInitHook(graph.train_input, graph.global_step)
    stop = PreemptionHook(preemption) if graph.stop_flags is None else CollectiveStopHook(preemption, graph.stop_flags)
    every = [*role.hooks, input_init, stop]
    if graph.broadcast_op is not None:
        every.insert(0, BroadcastHook(graph.broadcast_op))
    if cadence.max_steps:
        every.insert(-1, StopAtLastStepHook(graph.step_after, cadence.max_steps))
    eval_hook = None
    if parts.evaluation is not None:
        eval_hook = EvalHook(graph, parts.evaluation, cadence.eval_every_steps, metrics, summary_dir=eval_dir,
                             listeners=[h for h in user.every + user.chief if hasattr(h, "on_eval")],
                             skip_final=lambda: preemption.signum is not None, source=parts.eval_source,
                             steps=cadence.eval_steps)
    chief = [
        NanGuardHook(graph.step_is_finite, graph.step_after, cadence.on_nan, cadence.ckpt_dir,
                     cadence.max_skipped_steps),
        # The chief's hooks run first: the input is initialised while the first checkpoint is written.
        _make_saver_hook(cadence, graph, user.listeners, alongside=input_init.hand_over() if is_chief else None),
        MetricsHook(graph.loss, graph.global_step, graph.step_after, cadence.log_every_steps, metrics),
    ]
    if eval_hook is not None:
        chief.append(eval_hook)
    if cadence.summary_every_steps:
        chief.append(TrainingSummaryHook(graph.loss, graph.step_after, cadence.summary_every_steps, cadence.ckpt_dir))
        if graph.summary_op is not None:  # the model's own summaries
            chief.append(tf1.train.SummarySaverHook(save_steps=cadence.summary_every_steps, output_dir=cadence.ckpt_dir,
                                                    summary_op=graph.summary_op))
    if cadence.stalled_steps_limit:
        every.append(StalledStepHook(graph.step_after, cadence.stalled_steps_limit))
    if graph.sync_optimizer is not None:
        # On every worker, not only the chief: it initialises each worker's local step.
        every.append(graph.sync_optimizer.make_session_run_hook(is_chief, num_tokens=-1))
        chief.append(ReleaseSyncWorkersHook(graph.sync_release_op))
    every += list(graph.spec.training_hooks) + user.every
    chief += list(graph.spec.training_chief_hooks) + user.chief
    return TrainingHooks(every, chief, eval_hook)
