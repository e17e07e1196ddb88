"""``tracking=mlflow``: runs and sweep jobs recorded in MLflow, read back with MLflow's own client from
the sqlite store the command made in its working dir."""

import os
import subprocess

import pytest

from helpers import TRAIN, read_jsonl

mlflow = pytest.importorskip("mlflow")
pytestmark = pytest.mark.cli

TINY = ["data=synthetic", "data.train_examples=256", "data.test_examples=64", "model=linear", "train.batch_size=32",
        "log.progress=off", "eval.every_steps=10", "log.every_steps=5", "tracking=mlflow"]


def train(cwd, *args):
    return subprocess.run([TRAIN, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def client(cwd):
    return mlflow.tracking.MlflowClient(f"sqlite:///{cwd}/mlflow.db")


def test_a_run_and_its_resume_are_one_mlflow_run_with_every_row_once(tmp_path):
    first = train(tmp_path, *TINY, "train.max_steps=20")
    assert first.returncode == 0, first.stderr
    assert "mlflow.store" not in first.stderr + first.stdout  # MLflow's set-up lines stay off the console
    resumed = train(tmp_path, *TINY, "train.max_steps=30")  # the same run dir, continued
    assert resumed.returncode == 0, resumed.stderr
    (run_dir,) = [d for d in (tmp_path / "outputs").iterdir() if d.is_dir()]
    store = client(tmp_path)
    (run,) = store.search_runs([store.get_experiment_by_name("train").experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    assert run.data.params["model"] == "linear" and run.data.params["train.max_steps"] == "20"  # the first value kept
    assert run.data.tags["run_dir"] == str(run_dir)
    evals = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "eval"]
    history = store.get_metric_history(run.info.run_id, "eval_accuracy")
    assert [(m.step, m.value) for m in history] == [(r["step"], pytest.approx(r["accuracy"])) for r in evals]
    assert [m.step for m in history] == [10, 20, 30]  # each row once, across the two commands
    losses = store.get_metric_history(run.info.run_id, "loss")
    assert [m.step for m in losses] == [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert {a.path for a in store.list_artifacts(run.info.run_id)} >= {"metrics.json", "metrics.csv"}


def test_each_sweep_job_is_a_run_of_the_sweeps_experiment(tmp_path):
    proc = train(tmp_path, "-m", *TINY, "train.max_steps=10", "optimizer.learning_rate=0.1,0.01",
                 f"hydra.sweep.dir={tmp_path / 'lr_sweep'}")
    assert proc.returncode == 0, proc.stderr
    store = client(tmp_path)
    runs = store.search_runs([store.get_experiment_by_name("lr_sweep").experiment_id])
    assert sorted(r.data.params["optimizer.learning_rate"] for r in runs) == ["0.01", "0.1"]
    assert all(r.info.status == "FINISHED" and "eval_accuracy" in r.data.metrics for r in runs)


def test_tracking_needs_mlflow_and_a_known_kind(make_cfg, monkeypatch):
    import importlib.util

    from trainer.config.rules import validate
    from trainer.errors import ConfigError

    with pytest.raises(ConfigError, match=r"tracking.kind=wandb: use none or mlflow"):
        validate(make_cfg("tracking.kind=wandb"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(ConfigError, match=r"tracking=mlflow: MLflow is not installed; pip install -e '.\[mlflow\]'"):
        validate(make_cfg("tracking=mlflow"))
    assert os.environ.get("MLFLOW_TRACKING_URI") is None  # the runner sets no MLflow environment


def test_a_send_that_failed_goes_with_the_next_command_even_with_nothing_to_train(tmp_path):
    """The store cannot be written when the run ends: the run still succeeds and says the next command
    sends it; the same command run again has nothing to train, and sends the record then, once."""
    (tmp_path / "mlflow.db").mkdir()  # sqlite cannot open a directory: every send fails
    first = train(tmp_path, *TINY, "train.max_steps=20")
    assert first.returncode == 0, first.stderr
    assert "mlflow.db is a directory, not an sqlite file); the next run of the command sends it" in first.stdout
    assert "retried" not in first.stdout + first.stderr  # no backoff holding the finished run
    (tmp_path / "mlflow.db").rmdir()
    again = train(tmp_path, *TINY, "train.max_steps=20")
    assert again.returncode == 0 and "nothing to do" in again.stdout + again.stderr, again.stdout
    (run_dir,) = [d for d in (tmp_path / "outputs").iterdir() if d.is_dir()]
    store = client(tmp_path)
    (run,) = store.search_runs([store.get_experiment_by_name("train").experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["run_dir"] == str(run_dir)
    evals = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "eval"]
    assert [m.step for m in store.get_metric_history(run.info.run_id, "eval_accuracy")] == evals == [10, 20]
    third = train(tmp_path, *TINY, "train.max_steps=20")  # all sent: nothing goes twice
    assert third.returncode == 0, third.stderr
    assert [m.step for m in store.get_metric_history(run.info.run_id, "eval_accuracy")] == [10, 20]
