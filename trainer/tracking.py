"""Experiment tracking beyond the run dir (``tracking=mlflow``): once a training command or a sweep
job ends, its record goes to MLflow, read from what the run dir already holds:

- params: the command's overrides (``key=value``; a resumed run adds the keys it did not have);
- metrics: every row of ``metrics.jsonl`` not sent before, at its step and time: ``loss``,
  ``steps_per_sec`` (training rows) and ``eval_<metric>`` (evaluations);
- artifacts: ``metrics.json``, ``metrics.csv`` and the run dir's ``export/`` (SavedModels);
- the run's status (``FINISHED``, ``FAILED``, ``KILLED`` for a preempted run) and a ``run_dir`` tag.

The MLflow run id and the rows sent are kept in the run dir's ``.mlflow.json``, so the same command
run again (a resume) continues the same MLflow run without sending a row twice. Tracking never
fails a run that trained: an error sending is logged as a warning, and the rows go the next time.
"""

import contextlib
import logging
import os
from typing import Dict, List, Optional

from trainer.errors import ConfigError
from trainer.records import read_json, read_rows, write_json

log = logging.getLogger("trainer")
STATE = ".mlflow.json"
STATUS = {"finished": "FINISHED", "failed": "FAILED", "preempted": "KILLED"}


def check_tracking(tracking_cfg) -> None:
    """Before any work: the tracking kind is known and its library installed.

    Raises:
      ConfigError: naming ``tracking`` and the fix.
    """
    kind = tracking_cfg.kind
    if kind == "none":
        return
    if kind != "mlflow":
        raise ConfigError(f"tracking.kind={kind}: use none or mlflow")
    import importlib.util

    if importlib.util.find_spec("mlflow") is None:
        raise ConfigError("tracking=mlflow: MLflow is not installed; pip install -e '.[mlflow]' (or mlflow-skinny), "
                          "or drop tracking=mlflow")


def track(tracking_cfg, run_dir: str, overrides: List[str], experiment: Optional[str] = None,
          since: float = 0.0) -> None:
    """Send ``run_dir``'s record to the tracking server of ``tracking_cfg`` (nothing for ``none``), if
    this command wrote its ``metrics.json`` (at or after ``since``), or if an ended run's record was
    not all sent before (a send that failed: the next command, even one with nothing to train, sends
    it). A command refused while another trains the dir sends nothing."""
    record = os.path.join(run_dir, "metrics.json")
    if tracking_cfg.kind == "none" or not os.path.isfile(record):
        return
    written = os.path.getmtime(record)
    unsent = read_json(os.path.join(run_dir, STATE)).get("sent_record") != written
    if written < since and not (unsent and read_json(record).get("status") in STATUS):
        return
    try:
        import mlflow  # before _quiet: importing it sets its loggers' levels

        with _quiet("mlflow", "alembic"):  # their INFO lines (database set-up) stay off the console
            _to_mlflow(mlflow, tracking_cfg, run_dir, overrides, tracking_cfg.experiment or experiment or "train")
    except Exception as e:  # a record the run dir keeps must never fail the run that made it
        log.warning("tracking=mlflow: could not record %s (%s: %s); the next run of the command sends it", run_dir,
                    type(e).__name__, e)


@contextlib.contextmanager
def _quiet(*names):
    """The named loggers at WARNING while inside, as they were after."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _check_sqlite_store(uri: Optional[str]) -> None:
    """A ``sqlite:///`` store that cannot be opened fails here at once: MLflow itself retries opening it
    ten times with backoff, over a minute and a half, holding the finished run.

    Raises:
      OSError: naming the path and why.
    """
    if not uri or not str(uri).startswith("sqlite:///"):
        return
    path = str(uri)[len("sqlite:///"):]
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise OSError(f"{path} is a directory, not an sqlite file")
    if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
        raise OSError(f"{path} cannot be read and written")
    if not os.path.exists(path) and not (os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)):
        raise OSError(f"{parent} does not exist or cannot be written, so {path} cannot be made there")


def _to_mlflow(mlflow, tracking_cfg, run_dir: str, overrides: List[str], experiment: str) -> None:
    from mlflow.entities import Metric, Param

    _check_sqlite_store(tracking_cfg.uri)
    client = mlflow.tracking.MlflowClient(tracking_cfg.uri)
    state_path = os.path.join(run_dir, STATE)
    state = read_json(state_path)
    if state.get("run_id"):
        run_id = state["run_id"]
    else:
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(experiment)
        run_id = client.create_run(experiment_id, run_name=os.path.basename(os.path.abspath(run_dir)),
                                   tags={"run_dir": os.path.abspath(run_dir)}).info.run_id
        state = {"run_id": run_id, "rows": 0}
        write_json(state_path, state)
    logged = client.get_run(run_id).data.params
    params = [Param(key, value[:6000]) for key, value in _params(overrides).items() if key not in logged]
    rows = _rows(run_dir)
    metrics = [Metric(key, value, int(row["time"] * 1000), int(row["step"]))
               for row in rows[state.get("rows", 0):] for key, value in _metric_values(row).items()]
    for start in range(0, max(len(metrics), 1), 1000):  # MLflow takes up to 1000 metrics a batch
        client.log_batch(run_id, metrics=metrics[start:start + 1000], params=params if start == 0 else [])
    for name in ("metrics.json", "metrics.csv"):
        if os.path.isfile(os.path.join(run_dir, name)):
            client.log_artifact(run_id, os.path.join(run_dir, name))
    if os.path.isdir(os.path.join(run_dir, "export")):
        client.log_artifacts(run_id, os.path.join(run_dir, "export"), artifact_path="export")
    status = read_json(os.path.join(run_dir, "metrics.json")).get("status")
    client.set_terminated(run_id, STATUS.get(status, "FINISHED"))
    write_json(state_path, {"run_id": run_id, "rows": len(rows),
                            "sent_record": os.path.getmtime(os.path.join(run_dir, "metrics.json"))})


def _params(overrides: List[str]) -> Dict[str, str]:
    params = {}
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key and not key.startswith(("hydra.", "hydra/")) and key != "resume":
            params[key] = value
    return params


def _rows(run_dir: str) -> List[Dict]:
    return read_rows(os.path.join(run_dir, "metrics.jsonl"))


def _metric_values(row: Dict) -> Dict[str, float]:
    prefix = "eval_" if row.get("kind") == "eval" else ""
    values = {}
    for key, value in row.items():
        if key in ("kind", "step", "time") or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        values[key if key.startswith(prefix) else prefix + key] = float(value)
    return values
