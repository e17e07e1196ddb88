"""Estimator-era programs run through the real ``train`` command with only their imports changed
(tests/programs/): the layers tutorial, the Model Garden's r1 MNIST, a tf.Variable model fed by
queue runners, the custom-Estimator tutorial's feature columns. Each under both backends where
the backends could differ; every evaluation must read the whole eval input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from helpers import TESTS_DIR, TRAIN, read_jsonl, weights
from trainer.errors import TrainingError
from trainer import run as execute

pytestmark = pytest.mark.cli

PROGRAMS = os.path.join(TESTS_DIR, "programs")
TUTORIAL = ["model=model_fn", "model.fn=layers_tutorial.conv_classifier", "data=input_fn",
            "data.train_fn=layers_tutorial.train_input_fn", "data.eval_fn=layers_tutorial.eval_input_fn"]
GARDEN = ["model=model_fn", "model.fn=garden_mnist.model_fn", "+model.params.data_format=channels_last",
          "data=input_fn", "data.train_fn=garden_mnist.train_input_fn", "data.eval_fn=garden_mnist.eval_input_fn",
          "train.batch_size=100", "eval.batch_size=100"]
QUEUES = ["model=model_fn", "model.fn=softmax_queues.model_fn", "+model.params.learning_rate=0.5", "data=input_fn",
          "data.train_fn=softmax_queues.train_input_fn", "data.eval_fn=softmax_queues.eval_input_fn",
          "train.batch_size=50", "eval.batch_size=64"]
QUIET = ["log.progress=off", "checkpoint.every_steps=1000"]
FASHION = "/usr/share/datasets/fashion-mnist"


def train(run_dir, *overrides):
    """``train`` as a user runs it, in ``run_dir`` (hydra.run.dir), the programs importable."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PROGRAMS, TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([TRAIN, f"hydra.run.dir={run_dir}", *QUIET, *overrides], env=env,
                          capture_output=True, text=True, timeout=300)


def evals(run_dir):
    return [row for row in read_jsonl(run_dir / "metrics.jsonl") if row["kind"] == "eval"]


def record(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize("session", ["plain", "monitored"])
def test_layers_tutorial_trains_evaluates_and_logs_its_tensors(tmp_path, session):
    run_dir = tmp_path / "run"
    done = train(run_dir, *TUTORIAL, f"session={session}", "train.max_steps=60", "eval.every_steps=20",
                 "+hook@hooks.log=logging_tensor", "hooks.log.tensors={probabilities: class_probs}",
                 "hooks.log.every_n_iter=25")
    assert done.returncode == 0, done.stderr
    rows = evals(run_dir)
    # Every evaluation reads all 500 eval examples (numpy_input_fn, num_epochs=1).
    assert [(r["step"], r["examples"]) for r in rows] == [(20, 500), (40, 500), (60, 500)]
    assert all(0.3 < r["accuracy"] <= 1 for r in rows), rows  # chance is 0.1
    assert record(run_dir)["eval_examples"] == 500 and record(run_dir)["stop_reason"] == "max_steps"
    # The tutorial's LoggingTensorHook prints through TensorFlow's logger: console and train.log.
    logged = [line for line in done.stdout.splitlines() if "probabilities = [[" in line]
    assert len(logged) == 3, done.stdout[-3000:]  # steps 1, 26, 51
    assert "probabilities = [[" in (run_dir / "train.log").read_text()


def test_layers_tutorial_predicts_and_exports_the_same_classes(tmp_path):
    run_dir = tmp_path / "run"
    assert train(run_dir, *TUTORIAL, "train.max_steps=30", "eval.every_steps=0").returncode == 0
    predicted = train(run_dir, *TUTORIAL, "mode=predict", "predict.input_fn=layers_tutorial.predict_input_fn",
                      f"predict.output={tmp_path / 'p.npz'}")
    assert predicted.returncode == 0, predicted.stderr
    assert json.loads(predicted.stdout.strip().splitlines()[-1])["count"] == 7  # the command prints its record
    exported = train(run_dir, *TUTORIAL, "mode=export", f"export.dir={tmp_path / 'export'}")
    assert exported.returncode == 0, exported.stderr
    with np.load(tmp_path / "p.npz") as f:
        classes, probabilities = f["classes"], f["probabilities"]
    assert classes.shape == (7,) and probabilities.shape == (7, 10)

    sys.path.insert(0, PROGRAMS)
    import layers_tutorial  # the same 7 images the predict_input_fn gives

    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    # The serving input was derived from the eval input: a float32 feature "x" of shape [None, 784].
    out = served(x=tf.constant(layers_tutorial.eval_x[:7]))
    np.testing.assert_array_equal(out["classes"].numpy(), classes)
    np.testing.assert_allclose(out["probabilities"].numpy(), probabilities, rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="apt-get install dataset-fashion-mnist (the program reads its files)")
@pytest.mark.parametrize("session", ["plain", "monitored"])
def test_model_garden_mnist_keras_model_in_model_fn_until_its_input_ends(tmp_path, session):
    run_dir = tmp_path / "run"
    # max_steps=null: train until the input (2 epochs of 1000 examples, batches of 100) ends.
    done = train(run_dir, *GARDEN, f"session={session}", "train.max_steps=null", "eval.every_steps=8")
    assert done.returncode == 0, done.stderr
    assert "evaluation builds a graph of its own" in done.stdout  # a Keras model makes new variables per call
    result = record(run_dir)
    assert (result["global_step"], result["stop_reason"], result["max_steps"]) == (20, "end_of_input", None)
    rows = evals(run_dir)
    # One-shot-iterator eval input: every evaluation still sees all 300 examples, with the current weights.
    assert [(r["step"], r["examples"]) for r in rows] == [(8, 300), (16, 300), (20, 300)]
    assert all(0.3 < r["accuracy"] <= 1 for r in rows) and len({r["loss"] for r in rows}) == 3, rows
    assert os.path.exists(run_dir / "checkpoints" / "model.ckpt-20.index")
    # The same command again: the run is finished, nothing is trained or written.
    before = weights(run_dir / "checkpoints")
    again = train(run_dir, *GARDEN, f"session={session}", "train.max_steps=null", "eval.every_steps=8")
    assert again.returncode == 0 and "already at step 20" in again.stdout, again.stdout[-2000:]
    after = weights(run_dir / "checkpoints")
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("session", ["plain", "monitored"])
def test_tf_variable_model_with_queue_runner_inputs(tmp_path, session):
    run_dir = tmp_path / "run"
    done = train(run_dir, *QUEUES, f"session={session}", "train.max_steps=60", "eval.every_steps=20")
    assert done.returncode == 0, done.stderr
    rows = evals(run_dir)
    # The num_epochs=1 queue is built anew for each evaluation: 500 examples each time.
    assert [(r["step"], r["examples"]) for r in rows] == [(20, 500), (40, 500), (60, 500)]
    assert all(0.3 < r["accuracy"] <= 1 for r in rows), rows
    assert sorted(weights(run_dir / "checkpoints")) == ["W", "b", "global_step"]


def test_custom_estimator_feature_columns_from_a_config_file(tmp_path):
    # The feature columns live in a model config of the user's own, found with --config-dir.
    (tmp_path / "conf" / "model").mkdir(parents=True)
    columns = "".join(f"    - {{_target_: tensorflow.feature_column.numeric_column, key: {k}}}\n"
                      for k in ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth"])
    (tmp_path / "conf" / "model" / "iris.yaml").write_text(
        "defaults:\n  - model_fn\n  - _self_\nname: iris\nfn: custom_estimator.dnn_model\n"
        f"params:\n  feature_columns:\n{columns}  hidden_units: [10, 10]\n  n_classes: 3\n")
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PROGRAMS, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([TRAIN, "--config-dir", str(tmp_path / "conf"), f"hydra.run.dir={run_dir}", *QUIET,
                           "model=iris", "data=input_fn", "data.train_fn=custom_estimator.train_input",
                           "data.eval_fn=custom_estimator.eval_input", "train.max_steps=100", "eval.every_steps=50"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [(r["step"], r["examples"]) for r in evals(run_dir)] == [(50, 150), (100, 150)]
    assert record(run_dir)["eval_accuracy"] > 0.8  # three well-separated species; chance is 1/3


def test_an_evaluation_of_zero_examples_fails_the_run(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.step_by_three", "data=input_fn",
                   "data.train_fn=user_models.train_input", "data.eval_fn=user_models.empty_eval_input")
    with pytest.raises(TrainingError, match="read no example"):
        execute(cfg, str(tmp_path))
    result = record(tmp_path)
    assert result["status"] == "failed" and "eval_accuracy" not in result and "objective_value" not in result


def test_eval_steps_bounds_an_eval_input_that_never_ends(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.step_by_three", "data=input_fn", "train.max_steps=6",
                   "data.train_fn=user_models.train_input", "data.eval_fn=user_models.endless_eval_input",
                   "eval.steps=3", "eval.every_steps=null")
    result = execute(cfg, str(tmp_path))
    assert (result["status"], result["eval_examples"]) == ("finished", 12)  # 3 batches of 4


def test_sigterm_during_an_evaluation_that_never_ends_stops_the_run(tmp_path):
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([TRAIN, f"hydra.run.dir={tmp_path}", *QUIET, "model=model_fn",
                             "model.fn=user_models.step_by_three", "data=input_fn", "train.max_steps=600",
                             "data.train_fn=user_models.train_input", "data.eval_fn=user_models.endless_eval_input",
                             "eval.every_steps=6"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "checkpoints" / "model.ckpt-0.index").exists() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)  # step 6's evaluation has begun, and never ends by itself
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "the evaluation at step 6 was stopped by the signal" in err or "stopped by SIGTERM" in err, err
    assert record(tmp_path)["status"] == "preempted"


def test_a_train_op_moving_the_step_by_three_evaluates_once_per_boundary(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.step_by_three", "train.max_steps=30",
                   "eval.every_steps=5", "log.every_steps=5")
    assert execute(cfg, str(tmp_path))["global_step"] == 30
    # Steps 3, 6, ..., 30: each multiple of 5 reached or passed once.
    assert [r["step"] for r in evals(tmp_path)] == [6, 12, 15, 21, 27, 30]
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl") if r["kind"] == "train"] == [6, 12, 15, 21, 27, 30]


def test_a_train_op_that_never_moves_the_step_fails_instead_of_looping(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.forgets_global_step", "train.stalled_steps_limit=5")
    with pytest.raises(TrainingError, match="global_step=tf.train.get_global_step"):
        execute(cfg, str(tmp_path))
    assert record(tmp_path)["status"] == "failed"
