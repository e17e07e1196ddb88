"""Estimator-era model_fns and input_fns: train under both backends, evaluate, predict, export, serve."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from helpers import read_jsonl
from trainer.errors import ConfigError
from trainer import run as execute

BACKENDS = ["plain", "monitored"]
FASHION = "/usr/share/datasets/fashion-mnist"
CNN = ["model=model_fn", "model.fn=estimator_models.cnn_model_fn", "+model.params.learning_rate=0.1"]
INPUT_FNS = ["data=input_fn", "data.train_fn=estimator_models.train_input_fn", "data.eval_fn=estimator_models.eval_input_fn"]


@pytest.fixture
def trained(make_cfg, tmp_path):
    """The tutorial CNN model_fn trained 30 steps on synthetic data (monitored backend)."""
    cfg = make_cfg(*CNN, "train.max_steps=30", "session=monitored")
    metrics = execute(cfg, str(tmp_path))
    return tmp_path, metrics


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(FASHION), reason="apt-get install dataset-fashion-mnist")
@pytest.mark.parametrize("session", BACKENDS)
def test_tutorial_cnn_model_fn_trains_with_its_own_train_op(make_cfg, tmp_path, session):
    metrics = execute(make_cfg(*CNN, f"session={session}", "train.max_steps=60", "data=fashion_mnist",
                               "data.train_examples=2000", "data.test_examples=500"), str(tmp_path))
    assert metrics["global_step"] == 60 and metrics["eval_examples"] == 500  # the whole test split
    # Real images: measured 0.51 at step 60 (chance is 0.1); the eval loss falls from evaluation to evaluation.
    assert metrics["eval_accuracy"] > 0.3, metrics
    losses = [r["loss"] for r in read_jsonl(tmp_path / "metrics.jsonl") if r["kind"] == "eval"]
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.5, losses
    assert "accuracy" in json.loads((tmp_path / "metrics.json").read_text())["objective"]


def test_evaluate_reports_eval_metric_ops(make_cfg, trained):
    run_dir, train_metrics = trained
    result = execute(make_cfg(*CNN, "mode=evaluate"), str(run_dir))
    assert result["global_step"] == 30
    assert result["metrics"]["accuracy"] == pytest.approx(train_metrics["eval_accuracy"])
    assert result["metrics"]["loss"] == pytest.approx(train_metrics["eval_loss"], rel=1e-5)
    assert json.loads((run_dir / "eval_metrics.json").read_text())["metrics"] == result["metrics"]


def test_evaluate_a_given_checkpoint(make_cfg, trained):
    run_dir, _ = trained
    result = execute(make_cfg(*CNN, "mode=evaluate", f"eval.checkpoint={run_dir / 'checkpoints' / 'model.ckpt-0'}"),
                     str(run_dir))
    assert result["global_step"] == 0


def test_predict_writes_predictions(make_cfg, trained):
    run_dir, _ = trained
    result = execute(make_cfg(*CNN, "mode=predict"), str(run_dir))
    with np.load(result["predictions"]) as f:
        assert f["classes"].shape == (128,) and f["probabilities"].shape == (128, 10)  # the test split
        np.testing.assert_allclose(f["probabilities"].sum(axis=1), 1, rtol=1e-5)


def _checkpoint_predicts(ckpt_dir, images):
    """What the checkpoint's weights give for ``images`` (uint8 pixels, read as pixel / 255 as the runner
    reads them) through the model_fn in PREDICT mode, restored by a plain Saver."""
    import estimator_models

    with tf.Graph().as_default():
        x = tf.constant(images.astype(np.float32) / 255.0)
        spec = estimator_models.cnn_model_fn({"x": x}, None, "infer", {})
        with tf.compat.v1.Session() as sess:
            tf.compat.v1.train.Saver().restore(sess, tf.train.latest_checkpoint(str(ckpt_dir)))
            return sess.run(spec.predictions)


def test_predict_a_given_file(make_cfg, trained, tmp_path):
    """mode=predict gives what the trained checkpoint gives for those images."""
    run_dir, _ = trained
    images = np.random.RandomState(0).randint(0, 256, (5, 28, 28)).astype(np.uint8)
    np.savez(tmp_path / "few.npz", x=images)
    result = execute(make_cfg(*CNN, "mode=predict", f"predict.input={tmp_path / 'few.npz'}",
                              f"predict.output={tmp_path / 'out.npz'}"), str(run_dir))
    assert result["count"] == 5 and result["predictions"] == str(tmp_path / "out.npz")
    expected = _checkpoint_predicts(run_dir / "checkpoints", images)
    with np.load(tmp_path / "out.npz") as f:
        np.testing.assert_allclose(f["probabilities"], expected["probabilities"], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(f["classes"], expected["classes"])


def test_predict_replaces_no_file_it_was_not_told_to(make_cfg, trained, tmp_path):
    """An existing predict.output is replaced only with predict.overwrite=true; the input never."""
    run_dir, _ = trained
    np.savez(tmp_path / "few.npz", x=np.zeros((5, 28, 28), np.uint8))
    inputs, out = tmp_path / "few.npz", tmp_path / "kept.npz"
    out.write_bytes(b"the user's file")
    given = (*CNN, "mode=predict", f"predict.input={inputs}")
    with pytest.raises(ConfigError, match=r"predict.output=.*kept.npz exists; set predict.overwrite=true"):
        execute(make_cfg(*given, f"predict.output={out}"), str(run_dir))
    assert out.read_bytes() == b"the user's file"
    before = inputs.read_bytes()
    with pytest.raises(ConfigError, match=r"predict.output=.*few.npz is a file this run reads its data from"):
        execute(make_cfg(*given, f"predict.output={inputs}", "predict.overwrite=true"), str(run_dir))
    assert inputs.read_bytes() == before
    result = execute(make_cfg(*given, f"predict.output={out}", "predict.overwrite=true"), str(run_dir))
    with np.load(out) as f:
        assert result["count"] == 5 and f["classes"].shape == (5,)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


@pytest.mark.cli
def test_export_a_servable_saved_model(make_cfg, trained):
    run_dir, _ = trained
    result = execute(make_cfg(*CNN, "mode=export"), str(run_dir))
    export_dir = result["export_dir"]
    assert export_dir.endswith(os.path.join("export", "30"))
    cli = shutil.which("saved_model_cli")
    if cli:
        shown = subprocess.run([cli, "show", "--all", "--dir", export_dir], capture_output=True, text=True)
        assert shown.returncode == 0 and "serving_default" in shown.stdout and "classes" in shown.stdout
    loaded = tf.saved_model.load(export_dir)
    pixels = np.random.default_rng(0).integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    out = loaded.signatures["serving_default"](x=tf.constant(pixels[..., None].astype(np.float32) / 255))
    assert out["classes"].shape == (3,) and out["probabilities"].shape == (3, 10)
    # The SavedModel gives what the checkpoint predicts in graph mode (mode=predict on the same images).
    np.savez(run_dir / "three.npz", x=pixels)
    predicted = execute(make_cfg(*CNN, "mode=predict", f"predict.input={run_dir / 'three.npz'}"), str(run_dir))
    with np.load(predicted["predictions"]) as f:
        np.testing.assert_array_equal(out["classes"].numpy(), f["classes"])
        np.testing.assert_allclose(out["probabilities"].numpy(), f["probabilities"], rtol=1e-4, atol=1e-6)
    with pytest.raises(ConfigError, match="exists"):
        execute(make_cfg(*CNN, "mode=export"), str(run_dir))


def test_an_export_that_fails_midway_leaves_nothing_at_its_final_path(make_cfg, tmp_path, monkeypatch):
    """The SavedModel is written beside its final path and renamed into place when complete; a
    leftover of a killed export (a dead process's temporary dir) is removed by the next export."""
    cfg = ("model=model_fn", "model.fn=estimator_models.cnn_model_fn_exports")
    execute(make_cfg(*cfg, "train.max_steps=2"), str(tmp_path))
    leftover = tmp_path / "export" / "temp-2-999999999"  # a pid no process has
    (leftover / "variables").mkdir(parents=True)
    saved = tf.compat.v1.saved_model.Builder.save

    def save_then_die(self, *args, **kwargs):
        saved(self, *args, **kwargs)  # the files are written; the process dies before the rename
        raise RuntimeError("killed")

    monkeypatch.setattr(tf.compat.v1.saved_model.Builder, "save", save_then_die)
    with pytest.raises(RuntimeError, match="killed"):
        execute(make_cfg(*cfg, "mode=export"), str(tmp_path))
    assert sorted(os.listdir(tmp_path / "export")) == []  # neither the leftover nor a partial export/2
    monkeypatch.setattr(tf.compat.v1.saved_model.Builder, "save", saved)
    result = execute(make_cfg(*cfg, "mode=export"), str(tmp_path))
    assert os.listdir(tmp_path / "export") == ["2"] and tf.saved_model.load(result["export_dir"]) is not None


def test_export_outputs_name_the_signatures(make_cfg, tmp_path):
    execute(make_cfg("model=model_fn", "model.fn=estimator_models.cnn_model_fn_exports", "train.max_steps=2"), str(tmp_path))
    result = execute(make_cfg("model=model_fn", "model.fn=estimator_models.cnn_model_fn_exports", "mode=export"), str(tmp_path))
    assert result["signatures"] == ["classify", "serving_default"]
    loaded = tf.saved_model.load(result["export_dir"])
    out = loaded.signatures["classify"](x=tf.zeros((2, 28, 28, 1)))
    assert set(out) == {"scores", "classes"}


@pytest.mark.slow
@pytest.mark.parametrize("session", BACKENDS)
def test_spec_hooks_and_scaffold_are_honoured(make_cfg, tmp_path, session):
    from estimator_models import CountingHook

    CountingHook.runs.clear()
    model = ["model=model_fn", "model.fn=estimator_models.model_fn_with_hooks"]
    execute(make_cfg(*model, f"session={session}"), str(tmp_path))
    # evaluation_hooks run at each evaluation during training too (2 evaluations of 2 batches),
    # as under Estimator's train_and_evaluate: the model's evaluation gets a session of its own.
    assert CountingHook.runs == {"training": 20, "chief": 20, "evaluation": 4}
    reader = tf.train.load_checkpoint(str(tmp_path / "checkpoints" / "model.ckpt-0"))
    assert reader.get_tensor("init_fn_marker") == 42.0  # the spec's Scaffold init_fn ran
    execute(make_cfg(*model, "mode=evaluate"), str(tmp_path))
    assert CountingHook.runs["evaluation"] == 6  # and 2 more: 128 test examples in batches of 64
    execute(make_cfg(*model, "mode=predict"), str(tmp_path))
    assert CountingHook.runs["prediction"] == 2


@pytest.mark.parametrize("train_fn", ["train_input_fn", "train_input_fn_tensors"])
def test_input_fns_returning_a_dataset_or_tensors(make_cfg, tmp_path, train_fn):
    cfg = make_cfg(*CNN, "data=input_fn", f"data.train_fn=estimator_models.{train_fn}",
                   "data.eval_fn=estimator_models.eval_input_fn", "eval.every_steps=10")
    metrics = execute(cfg, str(tmp_path))
    assert metrics["global_step"] == 20
    evals = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"eval"' in l]
    assert [e["step"] for e in evals] == [10, 20]  # the eval Dataset is re-initialised for every evaluation


@pytest.mark.slow
def test_input_fn_dataset_resumes_its_position(make_cfg, tmp_path):
    # A model without stateful random ops (tf.layers.dropout restarts its random state on resume).
    base = ["model=linear", *INPUT_FNS]
    execute(make_cfg(*base, "train.max_steps=20"), str(tmp_path / "straight"))
    execute(make_cfg(*base, "train.max_steps=10"), str(tmp_path / "split"))
    execute(make_cfg(*base, "train.max_steps=20"), str(tmp_path / "split"))
    a = tf.train.load_checkpoint(str(tmp_path / "straight" / "checkpoints" / "model.ckpt-20"))
    b = tf.train.load_checkpoint(str(tmp_path / "split" / "checkpoints" / "model.ckpt-20"))
    for name in a.get_variable_to_shape_map():
        np.testing.assert_array_equal(a.get_tensor(name), b.get_tensor(name), err_msg=name)


@pytest.mark.slow
def test_train_and_evaluate_needs_an_eval_cadence(make_cfg, tmp_path):
    with pytest.raises(ConfigError, match="eval.every_steps"):
        execute(make_cfg(*CNN, "mode=train_and_evaluate", "eval.every_steps=0"), str(tmp_path))
    metrics = execute(make_cfg(*CNN, "mode=train_and_evaluate", "eval.every_steps=5"), str(tmp_path))
    assert metrics["global_step"] == 20


def test_missing_model_fn_is_a_config_error(make_cfg, tmp_path):
    with pytest.raises(ConfigError, match="model.fn is not set"):
        execute(make_cfg("model=model_fn"), str(tmp_path))


def test_evaluate_without_a_checkpoint_is_refused(make_cfg, tmp_path):
    from trainer.errors import CheckpointError

    with pytest.raises(CheckpointError, match="has no checkpoint"):
        execute(make_cfg(*CNN, "mode=evaluate"), str(tmp_path))


def test_the_specs_own_saver_saves_and_rotates(make_cfg, tmp_path):
    from helpers import ckpt_steps

    cfg = make_cfg("model=model_fn", "model.fn=user_models.keeps_two_checkpoints", "train.max_steps=40",
                   "checkpoint.every_steps=10", "checkpoint.keep=5")
    execute(cfg, str(tmp_path))
    assert ckpt_steps(tmp_path / "checkpoints") == [30, 40]  # the spec's max_to_keep=2, not checkpoint.keep=5
