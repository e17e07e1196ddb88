"""A model_fn that owns its train op, loss and metric names: exact steps, names kept as the model
gave them, the objective checked before training, errors that point at the user's code."""

import os
import re
import subprocess

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from helpers import TESTS_DIR, TRAIN, read_jsonl, weights
from trainer.errors import ConfigError
from trainer import run as execute

LARGE = ["model=model_fn", "model.fn=user_models.large_classifier_style"]


def scalar_tags(folder):
    events = EventAccumulator(str(folder))
    events.Reload()
    return set(events.Tags()["scalars"])


@pytest.mark.parametrize("session", ["plain", "monitored"])
def test_a_train_op_assigning_the_step_is_counted_exactly(make_cfg, tmp_path, session):
    metrics = execute(make_cfg(*LARGE, f"session={session}", "train.max_steps=40", "eval.every_steps=4",
                               "log.every_steps=4", "summary.every_steps=4"), str(tmp_path))
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    # Ten evaluation boundaries: each evaluated once, at its step; the same for the train records.
    assert [r["step"] for r in rows if r["kind"] == "eval"] == list(range(4, 41, 4))
    assert [r["step"] for r in rows if r["kind"] == "train"] == list(range(4, 41, 4))
    assert all(r["steps_per_sec"] > 0 for r in rows if r["kind"] == "train")
    # The model's own metric names, prefixed once; its eval_loss is not shadowed by the runner's mean loss.
    assert metrics["global_step"] == 40 and metrics["objective"] == "eval_accuracy"
    assert {k for k in metrics if k.startswith("eval_")} == {"eval_accuracy", "eval_loss", "eval_examples"}
    assert metrics["objective_value"] == metrics["eval_accuracy"]
    last = [r for r in rows if r["kind"] == "eval"][-1]
    assert metrics["eval_loss"] == last["eval_loss"]
    # TensorBoard has the training loss under its fixed tag, whatever the model's name scopes.
    assert {"loss", "global_step/sec"} <= scalar_tags(tmp_path / "checkpoints")


@pytest.mark.slow
def test_init_from_checkpoint_in_the_model_fn(make_cfg, tmp_path):
    execute(make_cfg(*LARGE, "train.max_steps=20"), str(tmp_path / "first"))
    source = str(tmp_path / "first" / "checkpoints" / "model.ckpt-20")
    execute(make_cfg(*LARGE, "train.max_steps=2", f"+model.params.init_checkpoint={source}"), str(tmp_path / "second"))
    trained = weights(source)
    started = weights(tmp_path / "second" / "checkpoints" / "model.ckpt-0")
    np.testing.assert_array_equal(started["encoder/dense/kernel"], trained["encoder/dense/kernel"])
    assert not np.array_equal(started["classifier/output/kernel"], trained["classifier/output/kernel"])


def test_an_objective_the_model_lacks_fails_before_training(make_cfg, tmp_path):
    with pytest.raises(ConfigError, match=r"eval.objective=auc: .*\['eval_accuracy', 'eval_loss', 'loss'\]"):
        execute(make_cfg(*LARGE, "eval.objective=auc"), str(tmp_path))
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "metrics.json").exists()


@pytest.mark.parametrize("model, objective", [("top1_accuracy_only", "top1_accuracy"), ("no_accuracy", "loss")])
def test_the_default_objective_stands_in_with_a_warning(make_cfg, tmp_path, caplog, model, objective):
    metrics = execute(make_cfg("model=model_fn", f"model.fn=user_models.{model}"), str(tmp_path))
    assert metrics["objective"] == objective and metrics["objective_value"] == metrics[f"eval_{objective}"]
    assert f"eval.objective=accuracy: the model has no such eval metric; using {objective}" in caplog.text


@pytest.mark.cli
def test_changing_the_objective_keeps_the_run_dir(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    base = [TRAIN, "data=synthetic", "data.train_examples=256", "data.test_examples=64", *LARGE,
            "train.max_steps=4", "log.progress=off"]
    first = subprocess.run(base, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([*base, "eval.objective=eval_loss"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    newest = (tmp_path / "outputs" / ".latest").read_text().strip()
    assert sorted(os.listdir(tmp_path / "outputs")) == sorted([".latest", newest])


@pytest.mark.cli
def test_a_model_fn_reading_unparsed_absl_flags_names_the_fix(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([TRAIN, f"hydra.run.dir={tmp_path}", "data=synthetic", "model=model_fn",
                           "model.fn=user_models.reads_absl_flags", "train.max_steps=2"], env=env, capture_output=True,
                          text=True, timeout=300)
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "UnparsedFlagAccessError" in last and "train-estimator PROGRAM.py" in last and "model.params" in last, last


@pytest.mark.cli
def test_an_error_in_the_model_fn_names_the_user_code(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([TRAIN, f"hydra.run.dir={tmp_path}", "data=synthetic", "model=model_fn",
                           "model.fn=user_models.raises_in_model_fn"], env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.fullmatch(r"error: AttributeError: 'int' object has no attribute 'value' "
                        r"\(at user_models\.py:\d+ in raises_in_model_fn\).*", lines[-1]), lines[-1]
    assert lines[-1] in (tmp_path / "train.log").read_text()  # the run's log says how it ended, too
