"""``run(cfg, output_dir)``: train (or resume) one model as the config says.

The order of work: validate the config, import TensorFlow, load data, read the
checkpoint dir, build the graph, check the checkpoint fits it, build hooks, then
one training loop over either session backend, and finally ``metrics.json``.
"""

import copy
import functools
import json
import logging
import os
import signal
import time
from typing import Dict

from omegaconf import OmegaConf


from trainer.errors import ClusterError, ConfigError, NanLossError, Preempted, RecoveryLimitError, TrainingError
from trainer.tfenv import import_tensorflow, resolve_device, session_config, set_determinism, visible_gpus
from trainer.validate import validate

log = logging.getLogger("trainer")


def _kind(value) -> str:
    return getattr(value, "value", value)


def prepare_config(cfg, output_dir: str):
    """A copy of ``cfg`` with run-dependent defaults filled in and every rule checked."""
    cfg = copy.deepcopy(cfg)
    if cfg.checkpoint.dir is None:
        cfg.checkpoint.dir = os.path.join(output_dir, "checkpoints")
    validate(cfg)
    return cfg


def write_json(path: str, payload: Dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _read_metrics(output_dir: str) -> Dict:
    try:
        with open(os.path.join(output_dir, "metrics.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def run(cfg, output_dir: str, cluster=None) -> Dict:
    """Train to ``train.max_steps`` (resuming from ``checkpoint.dir``), evaluate, write ``metrics.json``.

    Args:
      cfg: a composed config (see ``trainer.schema.Config``).
      output_dir: the run dir: ``metrics.json``, ``metrics.jsonl`` and, by default, ``checkpoints/``.
      cluster: a ``trainer.distributed.ClusterContext`` when this process is one training task of
        a cluster; only its chief reads and writes ``checkpoint.dir``.

    Returns:
      The metrics written to ``metrics.json``.

    Raises:
      ConfigError: a config value or data file is wrong (nothing has been written).
      CheckpointError: the checkpoint dir cannot be resumed (it is left untouched).
    """
    started = time.time()
    output_dir = os.path.abspath(output_dir)
    cfg = prepare_config(cfg, output_dir)
    if cfg.sweep.rerun_finished and _read_metrics(output_dir).get("status") == "finished":
        _set_aside(output_dir, cfg.checkpoint.dir)
    tf = import_tensorflow(cfg.log.tf_verbose)
    timings = {"tensorflow_import": time.time() - started}

    # Imported after TensorFlow is (quietly) imported.
    from trainer.data import load_arrays
    from trainer.graph import build_graph

    set_determinism(tf, cfg.train.deterministic)
    device = resolve_device(tf, cfg.device)
    mark = time.time()
    arrays = load_arrays(cfg.data)
    timings["data"] = time.time() - mark
    if arrays is not None and len(arrays.train_x) < cfg.train.batch_size:
        raise ConfigError(
            f"train.batch_size={cfg.train.batch_size}: larger than the {len(arrays.train_x)} training examples; "
            "lower train.batch_size or use more data"
        )
    if arrays is not None and len(arrays.test_x) == 0:
        raise ConfigError("data.test_examples: the test split is empty; evaluation needs at least one example")

    ckpt_dir = os.path.abspath(os.path.expanduser(cfg.checkpoint.dir))
    if os.path.exists(ckpt_dir) and not os.path.isdir(ckpt_dir):
        raise ConfigError(f"checkpoint.dir={ckpt_dir} is a file; give a directory")
    mark = time.time()
    graph = build_graph(tf, cfg, device, arrays, cluster=cluster)
    timings["graph"] = time.time() - mark
    graph_config = _graph_config(cfg)
    from trainer.hooks import make_config_hooks
    from trainer.tf_hooks import make_listeners

    with graph.graph.as_default():  # config hooks name tensors: a wrong name fails here, before any write
        listeners = make_listeners(cfg.checkpoint.listeners)
        config_hooks = make_config_hooks(cfg.hooks)
    train = functools.partial(_train, tf, cfg, graph, device, ckpt_dir, output_dir, listeners=listeners,
                              config_hooks=config_hooks, timings=timings, cluster=cluster)
    try:
        if cluster is not None and not cluster.role.is_chief:
            # A worker never touches the chief's checkpoint dir: the chief restores and saves.
            os.makedirs(output_dir, exist_ok=True)
            log.info("task dir %s", output_dir)
            result, finished_before = train(start_step=None), False
        else:
            result, finished_before = _train_in_checkpoint_dir(cfg, graph, ckpt_dir, output_dir, graph_config,
                                                               cluster, train)
    finally:
        # Summary writers hold their graph: close them so that the next job of a sweep starts clean.
        tf.compat.v1.summary.FileWriterCache.clear()
    if finished_before:
        return result  # the finished run's metrics, as they were
    result["wall_secs"] = round(time.time() - started, 3)
    result["pid"] = os.getpid()
    result["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started))
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    write_json(os.path.join(output_dir, "metrics.json"), result)
    if result["status"] == "preempted":
        raise Preempted(result["message"], result.pop("exit_code"))
    if cluster is not None and not cluster.role.is_chief:
        log.info("%s: done after %d steps of its own (global step %s); metrics in %s", cluster.role.name,
                 result["local_steps"], result["global_step"], os.path.join(output_dir, "metrics.json"))
        return result
    loss = "n/a" if result["loss"] is None else f"{result['loss']:.4f}"
    log.info("done at step %d: loss %s, %s; metrics in %s", result["global_step"], loss,
             " ".join(f"{k} {v:.4f}" for k, v in sorted(result.items()) if k.startswith("eval_")),
             os.path.join(output_dir, "metrics.json"))
    return result


def _train_in_checkpoint_dir(cfg, graph, ckpt_dir, output_dir, graph_config, cluster, train):
    """The chief's part: lock, check and repair ``ckpt_dir``, then ``train`` from its newest intact
    checkpoint. Returns (metrics, whether the run had already finished: nothing was done)."""
    from trainer import checkpoints

    os.makedirs(ckpt_dir, exist_ok=True)
    with checkpoints.DirLock(ckpt_dir):
        checkpoints.clean_leftovers(ckpt_dir)
        intact = checkpoints.find_intact(ckpt_dir)
        start_step = checkpoints.checkpoint_step(intact.path) if intact else 0
        if intact:
            checkpoints.check_compatible(intact.path, graph.graph, ckpt_dir, cfg.model.name, graph_config)
        previous = _read_metrics(output_dir)
        # A cluster's chief goes on even so: its workers wait for it to restore the variables.
        if cluster is None and intact and start_step >= cfg.train.max_steps \
                and previous.get("status") == "finished" and previous.get("global_step") == start_step:
            log.info("checkpoint.dir %s is already at step %d (train.max_steps=%d): nothing to do; metrics in %s",
                     ckpt_dir, start_step, cfg.train.max_steps, os.path.join(output_dir, "metrics.json"))
            return previous, True
        if intact:
            checkpoints.repair_state(ckpt_dir, intact)
        checkpoints.write_manifest(ckpt_dir, graph.graph, cfg.model.name, graph_config)
        os.makedirs(output_dir, exist_ok=True)
        log.info("run dir %s", output_dir)
        return train(start_step=start_step), False


def _set_aside(output_dir: str, ckpt_dir: str) -> None:
    """sweep.rerun_finished: keep the finished run's files under a dated name and start afresh."""
    suffix = time.strftime(".replaced-%Y%m%d-%H%M%S")
    while os.path.exists(ckpt_dir + suffix):
        suffix += "-1"
    for path in (ckpt_dir, os.path.join(output_dir, "metrics.json"), os.path.join(output_dir, "metrics.jsonl")):
        if os.path.exists(path):
            os.replace(path, path + suffix)
    log.info("sweep.rerun_finished: the finished run's checkpoints and metrics were set aside (*%s)", suffix)


def _graph_config(cfg) -> Dict:
    """The config that shapes the graph's variables: what a resumed run must not change."""
    return {
        "model.fn": cfg.model.fn,
        "model.params": OmegaConf.to_container(cfg.model.params, resolve=True),
        "optimizer._target_": cfg.optimizer._target_,
    }


def make_training_hooks(tf, cfg, graph, ckpt_dir, metrics, preemption, listeners, config_hooks, is_chief=True,
                        cluster=None):
    """The hooks of a training run: (every task's, the chief's, the EvalHook among them), in the
    order both backends run them (the chief's first)."""
    from trainer.hooks import EvalHook, InputInitHook, MetricsHook, NanGuardHook, ReleaseSyncWorkersHook
    from trainer.preemption import PreemptionHook

    tf1 = tf.compat.v1
    every_steps, every_secs = cfg.checkpoint.every_steps, cfg.checkpoint.every_secs
    if not every_steps and not every_secs:
        every_steps = cfg.train.max_steps  # only the first and the final save
    hooks = [
        InputInitHook(graph.train_input, graph.global_step),
        tf1.train.StopAtStepHook(last_step=cfg.train.max_steps),
        PreemptionHook(preemption),
    ]
    eval_hook = EvalHook(graph, cfg.eval.every_steps, metrics,
                         summary_dir=os.path.join(ckpt_dir, "eval"))
    eval_hook.skip_final = lambda: preemption.signum is not None
    config_all, config_chief = config_hooks
    chief_hooks = [
        # First: a NaN step is refused before any other hook (the checkpoint saver) sees it.
        NanGuardHook(graph.loss_is_finite, graph.step_before, cfg.train.on_nan, ckpt_dir),
        tf1.train.CheckpointSaverHook(ckpt_dir, save_secs=every_secs or None, save_steps=every_steps or None,
                                      saver=graph.saver, listeners=listeners),
        MetricsHook(graph.loss, graph.global_step, graph.step_before, cfg.log.every_steps, metrics),
        eval_hook,
    ]
    if cfg.summary.every_steps:
        chief_hooks.append(tf1.train.SummarySaverHook(save_steps=cfg.summary.every_steps, output_dir=ckpt_dir,
                                                      summary_op=graph.summary_op))
    if cluster is not None:
        from trainer.distributed import make_watchdog_hook

        hooks.insert(0, make_watchdog_hook(tf, cluster.watchdog, cluster.progress_timeout_secs))
    if graph.sync_optimizer is not None:
        # On every worker, not only the chief: it initialises each worker's local step.
        hooks.append(graph.sync_optimizer.make_session_run_hook(is_chief, num_tokens=-1))
        chief_hooks.append(ReleaseSyncWorkersHook(graph.sync_release_op))
    hooks += list(graph.spec.training_hooks) + config_all
    chief_hooks += list(graph.spec.training_chief_hooks) + config_chief
    eval_hook.listeners = [h for h in config_all + config_chief if hasattr(h, "on_eval")]
    return hooks, chief_hooks, eval_hook


def _train(tf, cfg, graph, device, ckpt_dir, output_dir, start_step, listeners, config_hooks, timings,
           cluster=None) -> Dict:
    """The training loop over either backend; returns the metrics (or the preemption record).

    ``start_step`` is the restored checkpoint's step, or None for a cluster's non-chief worker
    (which never reads the checkpoint dir).
    """
    from trainer.hooks import EvalHook, MetricsLog
    from trainer.preemption import PreemptionHandler
    from trainer.sessions import open_session

    session_kind = _kind(cfg.session.kind)
    config = session_config(tf, cfg.device, device, len(visible_gpus(tf)) if device == "gpu" else 0)
    is_chief, master, dist_kwargs = True, "", {}
    if cluster is not None:
        is_chief, master = cluster.role.is_chief, cluster.target
        config.device_filters.extend(cluster.device_filters())
        dist_kwargs = dict(max_wait_secs=cluster.max_wait_secs, ready_poll_secs=cluster.ready_poll_secs)
    metrics = MetricsLog(os.path.join(output_dir, "metrics.jsonl"))
    preemption = PreemptionHandler()
    train_secs = 0.0
    local_steps, last_step = 0, None

    if start_step is not None and start_step >= cfg.train.max_steps:
        # Running a step would move a finished run past its target: evaluate only, write nothing to ckpt_dir.
        log.info("checkpoint.dir %s is already at step %d (train.max_steps=%d): nothing to train",
                 ckpt_dir, start_step, cfg.train.max_steps)
        eval_hook = EvalHook(graph, None, metrics, summary_dir=None)
        with graph.graph.as_default(), open_session("plain", graph.scaffold, [eval_hook], [], ckpt_dir, config,
                                                    master=master):
            pass
    else:
        if is_chief:
            log.info("checkpoint.dir %s: %s", ckpt_dir, f"resuming from step {start_step}" if start_step else "new run")
        hooks, chief_hooks, eval_hook = make_training_hooks(tf, cfg, graph, ckpt_dir, metrics, preemption, listeners,
                                                            config_hooks, is_chief, cluster)
        log.info("session=%s device=%s model=%s data=%s", session_kind, device, cfg.model.name, cfg.data.name)
        if is_chief:
            log.info("hooks (chief): %s", ", ".join(type(h).__name__ for h in chief_hooks))
        log.info("hooks (all): %s", ", ".join(type(h).__name__ for h in hooks))
        if cluster is not None:
            role = cluster.role
            waits_for = "the ps tasks" if is_chief else f"the chief ({role.describe(*role.chief)}) to initialise the model"
            log.info("%s: waiting up to %.0fs for %s", role.name, cluster.max_wait_secs, waits_for)
            cluster.watchdog.expect(cluster.max_wait_secs + (0 if is_chief else 30), f"waiting for {waits_for}")

        mark = time.time()
        fetches = graph.train_op if cluster is None else [graph.train_op, graph.step_before]
        grace = cfg.session.stop_grace_period_secs
        if graph.sync_optimizer is not None and is_chief:
            # SyncReplicasOptimizer's chief queue runner stays blocked for gradients that no longer
            # come: closing the session cancels it, so waiting the whole grace period is pointless.
            grace = min(grace, 3)
            _ignore_cancelled_queue_runners(tf)
        with preemption, graph.graph.as_default():
            try:
                session = open_session(session_kind, graph.scaffold, hooks, chief_hooks, ckpt_dir if is_chief else None,
                                       config, is_chief=is_chief, master=master,
                                       stop_grace_period_secs=grace,
                                       max_recoveries=cfg.session.max_recoveries,
                                       recovery_wait_secs=cfg.session.recovery_wait_secs,
                                       global_step=graph.global_step, **dist_kwargs)
            except tf.errors.DeadlineExceededError as e:
                raise ClusterError(f"{cluster.role.name}: gave up after distributed.max_wait_secs={cluster.max_wait_secs:g} "
                                   f"waiting for {waits_for} ({e.message}); start it, or raise distributed.max_wait_secs") from None
            with session as sess:
                loop_started = time.time()
                timings["session"] = loop_started - mark  # creation, restore, hooks' after_create_session
                try:
                    if not sess.should_stop():
                        last_step = sess.run(fetches)
                        local_steps += 1
                        timings["first_step_at"] = time.time()
                    while not sess.should_stop():
                        last_step = sess.run(fetches)
                        local_steps += 1
                    if cluster is not None:
                        _leave_session_open(sess)
                except tf.errors.OutOfRangeError as e:
                    # MonitoredSession would read this as the end of the input and exit cleanly; the
                    # training input repeats for ever, so it is a failure here.
                    if is_chief:
                        _save_on_error(sess, graph, ckpt_dir)
                    raise TrainingError(f"unexpected end of input or a truncated file during training: {e.message}") from e
                except (NanLossError, RecoveryLimitError):
                    raise
                except Exception:
                    if is_chief:
                        _save_on_error(sess, graph, ckpt_dir)
                    raise
                train_secs = time.time() - loop_started

    if not is_chief:
        step = int(last_step[1]) + 1 if last_step is not None else None
        return {
            "status": "finished" if preemption.signum is None else "preempted", "role": cluster.role.name,
            "global_step": step, "local_steps": local_steps, "loss": None, "session": session_kind,
            "steps_per_sec": local_steps / train_secs if train_secs > 0 else None, "model": cfg.model.name,
            "data": cfg.data.name, "device": device, "timings": {k: round(v, 3) for k, v in timings.items()},
            **({"message": f"stopped by {signal.Signals(preemption.signum).name}", "exit_code": preemption.exit_code}
               if preemption.signum is not None else {}),
        }
    final_step = max(metrics.train.get("step", start_step), metrics.eval.get("step", start_step))
    base = {
        "global_step": int(final_step),
        "start_step": int(start_step),
        "loss": metrics.train.get("loss"),
        "steps_per_sec": (final_step - start_step) / train_secs if train_secs > 0 else None,
        "session": session_kind,
        "model": cfg.model.name,
        "data": cfg.data.name,
        "device": device,
        "checkpoint_dir": ckpt_dir,
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    if cluster is not None:
        base.update(role=cluster.role.name, local_steps=local_steps,
                    cluster={job: list(a) for job, a in cluster.role.cluster.items()})
    if preemption.signum is not None:
        latest = tf.train.latest_checkpoint(ckpt_dir)
        message = (f"stopped by {signal.Signals(preemption.signum).name} at step {final_step}; checkpoint saved: "
                   f"{latest}; run the same command to resume")
        log.warning(message)
        return dict(base, status="preempted", message=message, exit_code=preemption.exit_code)
    objective = cfg.eval.objective
    if objective not in metrics.eval:
        known = sorted(k for k in metrics.eval if k not in ("kind", "step", "time"))
        raise ConfigError(f"eval.objective={objective}: the model has no such eval metric; use one of {known}")
    result = dict(base, status="finished", objective=objective, objective_value=metrics.eval[objective])
    result.update({f"eval_{k}": v for k, v in metrics.eval.items() if k not in ("kind", "step", "time")})
    return result


def _leave_session_open(sess) -> None:
    """A cluster task at its normal end: hooks' ``end()`` still runs (final checkpoint and
    evaluation), but the gRPC session is not closed: the process ends right after, and closing
    blocked on the ps for 5 to 46 s at the end of cluster runs here (cause not found in TF)."""
    raw = sess._tf_sess() if hasattr(sess, "_tf_sess") else None
    if raw is not None:
        raw.close = lambda: None


def _ignore_cancelled_queue_runners(tf) -> None:
    """Queue-runner threads cancelled by a session's close end silently instead of printing a traceback
    (they may wake after the session is gone, so this stays for the process)."""
    import threading

    previous = threading.excepthook
    if getattr(previous, "ignores_cancelled_queue_runners", False):
        return

    def hook(args):
        if issubclass(args.exc_type, tf.errors.CancelledError) and args.thread is not None \
                and args.thread.name.startswith("QueueRunnerThread-"):
            return
        previous(args)

    hook.ignores_cancelled_queue_runners = True
    threading.excepthook = hook


def _save_on_error(sess, graph, ckpt_dir) -> None:
    """After an error in the loop, save the session's state if it can still be read (hooks' end()
    does not run on an exception, so no other save happens)."""

    def save(raw_session):
        path = graph.saver.save(raw_session, os.path.join(ckpt_dir, "model.ckpt"), global_step=graph.global_step)
        log.warning("saved the last state before the error: %s", path)

    try:
        if hasattr(sess, "raw_session"):
            save(sess.raw_session)
        else:
            sess.run_step_fn(lambda step_context: save(step_context.session))
    except Exception as e:
        log.warning("could not save a checkpoint after the error (%s: %s)", type(e).__name__,
                    (str(e).splitlines() or [""])[0])
