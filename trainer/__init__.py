"""Config-driven training runner for TensorFlow graph-mode models.

:func:`run` is the one entry point: the ``train`` command, sweep jobs, cluster tasks and
tests all call it. The package reads top to bottom::

    cli/          the train command: Hydra's main, preflight, run-dir names, resume=
    sweep/        one sweep job around run(); sweep summaries and train-report
    dist/         cluster roles: servers, the watchdog, the evaluator, the local launcher
    training/     a training run: orchestration, the loop, its result, signals
    modes/        evaluate, predict, export
    hooks/        the runner's hooks, evaluation, the library, early stopping, the assembly of a run's hooks
    checkpoints/  a checkpoint dir: intact checkpoints, manifest, lock, the claim before writing
    session/      TensorFlow's environment, the device, the plain and monitored backends
    model/        the model_fn, the graph per mode, the train op, the Scaffold, warm start
    data/         the sources, one module per data.name (no TensorFlow), and tf.data pipelines
    config/       schemas, cross-field rules, user code by dotted path or _target_
    estimator/    tf.estimator's API on run(): Estimator, RunConfig, train_and_evaluate, the heads, the
                  canned families (v2 and v1), TPUEstimator, train-estimator and TF 1.x conversion
    plan.py       the config cut into the parts each layer takes (the graph's Recipe, the hooks'
                  Cadence, the checkpoint Request, the model_fn's RunConfig): the entry points call it
    contract.py   the model_fn contract every layer reads: ModeKeys, EstimatorSpec, the RunConfig a
                  model_fn gets, the export outputs and ServingInputReceiver
    records.py, errors.py, interrupts.py, process.py (every process-wide effect), compat.py
    (TensorFlow's and Hydra's private internals), tracking.py (MLflow)

Importing this package sets one variable, ``TF_USE_LEGACY_KERAS=1`` (unless set), which TensorFlow
must see before it is imported: ``tf.compat.v1.layers`` raises under Keras 3; with tf-keras installed
and this set, TF1 model code runs unchanged. Every other process-wide effect (the rest of
TensorFlow's environment, excepthooks, the garbage collector) is made by ``trainer.process``, which
the command and :func:`run` call; importing a module changes nothing.

Nothing here imports TensorFlow.
"""

import os
from typing import Callable, Dict, Iterator, Optional

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

__all__ = ["predictions", "run"]


def run(cfg, workdir: str, on_accepted: Optional[Callable[[], None]] = None) -> Dict:
    """Do what ``cfg`` says (``mode``, ``distributed``) in the run dir ``workdir``; returns the result record.

    Modes: ``train`` / ``train_and_evaluate`` (metrics.json), ``evaluate`` (eval_metrics.json),
    ``predict`` (predictions.npz), ``export`` (a SavedModel). Roles: one process, one task of a
    cluster (``cluster``, ``tf_config``), or a whole cluster of local processes (``local``).

    The config is checked before TensorFlow is imported; the modules that use TensorFlow are
    imported after it (quietly), which is why the imports below sit in this function.

    ``on_accepted`` (a training run in one process) is called once the run holds its checkpoint dir,
    has passed every check and will train: the command writes the run dir's record then.

    Raises:
      trainer.errors.TrainerError: a failure explained in one line, with its exit status.
    """
    import contextlib

    from trainer.config.rules import prepare
    from trainer.data.ahead import loading_ahead
    from trainer.data.sources import load_arrays, source_of
    from trainer.dist.roles import resolve_role
    from trainer.process import set_environment

    set_environment()  # before TensorFlow is imported (no effect once it is)
    workdir = os.path.abspath(workdir)
    cfg = prepare(cfg, workdir)
    role = resolve_role(cfg.distributed)
    # Arrays are read by a thread while TensorFlow imports, in the processes that load them.
    reads_data = source_of(cfg.data).read_ahead and (role.kind == "none" or (role.distributed and role.job != "ps"))
    with loading_ahead(cfg.data, load_arrays) if reads_data else contextlib.nullcontext():
        return _run(cfg, workdir, role, on_accepted)


def predictions(cfg, workdir: str, checkpoint: str) -> Iterator[Dict]:
    """The predictions of ``checkpoint`` (a prefix) batch by batch, in input order, for a caller that
    takes them as they come (``Estimator.predict``): ``cfg`` (``mode=predict``) checked as :func:`run`
    checks it; nothing is written. A batch is a dict of arrays, a ``BareTensor`` for a model_fn that
    predicts one tensor.

    Raises:
      trainer.errors.TrainerError: a failure explained in one line, with its exit status.
    """
    from trainer.config.rules import prepare
    from trainer.process import import_tensorflow, set_environment

    set_environment()  # before TensorFlow is imported (no effect once it is)
    cfg = prepare(cfg, os.path.abspath(workdir))
    import_tensorflow(cfg.log.tf_verbose)
    from trainer.modes.predict import predicted_batches

    yield from predicted_batches(cfg, checkpoint)


def _run(cfg, workdir: str, role, on_accepted) -> Dict:
    import logging

    from trainer.interrupts import release_ctrl_c
    from trainer.process import import_tensorflow

    release_ctrl_c()  # the config is built: a Ctrl-C held since the command started ends it now
    import_tensorflow(cfg.log.tf_verbose)
    if role.kind == "local":
        from trainer.dist.local import launch

        return launch(cfg, workdir)
    if role.distributed:
        from trainer.dist.task import run_task

        return run_task(cfg, workdir, role)
    if os.environ.get("TF_CONFIG"):
        logging.getLogger("trainer").info(
            "TF_CONFIG is set but distributed=none: running as a single process; "
            "use distributed=tf_config to join the cluster it describes")
    if cfg.mode in ("train", "train_and_evaluate"):
        from trainer.training.train import train

        return train(cfg, workdir, on_accepted=on_accepted)
    if cfg.mode == "evaluate":
        from trainer.modes.evaluate import evaluate

        return evaluate(cfg, workdir)
    if cfg.mode == "predict":
        from trainer.modes.predict import predict

        return predict(cfg, workdir)
    if cfg.mode == "export":
        from trainer.modes.export import export

        return export(cfg, workdir)
    raise NotImplementedError(f"mode={cfg.mode}; use train, train_and_evaluate, evaluate, predict or export")
