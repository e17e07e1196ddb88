"""Both session backends train, checkpoint, resume and agree, through the real run()."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from helpers import dir_state, read_jsonl as losses, weights
from trainer import run
from trainer.errors import CheckpointError


@pytest.mark.parametrize("session", ["plain", "monitored"])
def test_trains_checkpoints_and_writes_metrics(make_cfg, tmp_path, session):
    metrics = run(make_cfg(f"session={session}"), str(tmp_path))
    ckpt_dir = tmp_path / "checkpoints"
    assert tf.train.latest_checkpoint(str(ckpt_dir)).endswith("model.ckpt-20")
    assert {"model.ckpt-10.index", "model.ckpt-20.index"} <= set(os.listdir(ckpt_dir))
    assert any(n.startswith("events.out.tfevents") for n in os.listdir(ckpt_dir))  # summaries
    assert any(n.startswith("events.out.tfevents") for n in os.listdir(ckpt_dir / "eval"))
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved == metrics
    assert saved["global_step"] == 20 and saved["session"] == session and saved["model"] == "mlp"
    for key in ("loss", "eval_accuracy", "eval_loss", "steps_per_sec", "wall_secs"):
        assert isinstance(saved[key], float), key
    assert saved["eval_examples"] == 128 and saved["stop_reason"] == "max_steps"  # the whole test split
    rows = losses(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows if r["kind"] == "eval"] == [10, 20]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [5, 10, 15, 20]


@pytest.mark.slow
def test_training_learns(make_cfg, tmp_path):
    metrics = run(make_cfg("train.max_steps=150", "model.params.hidden_units=[64]"), str(tmp_path))
    assert metrics["eval_accuracy"] > 0.5  # ten classes: chance is 0.1


@pytest.mark.slow
def test_both_backends_same_loss_every_step_and_same_weights(make_cfg, tmp_path):
    results = {}
    for session in ("plain", "monitored"):
        out = tmp_path / session
        out.mkdir()
        cfg = make_cfg(f"session={session}", "model.params.dropout_rate=0.3",
                       f"+hooks.recorder={{_target_: user_hooks.LossRecorder, path: {out / 'losses.jsonl'}}}")
        run(cfg, str(out))
        results[session] = (losses(out / "losses.jsonl"), weights(str(out / "checkpoints")))
    plain_losses, plain_weights = results["plain"]
    monitored_losses, monitored_weights = results["monitored"]
    assert len(plain_losses) == 20
    assert plain_losses == monitored_losses
    assert plain_weights.keys() == monitored_weights.keys()
    for name in plain_weights:
        np.testing.assert_array_equal(plain_weights[name], monitored_weights[name], err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("first,second", [("plain", "monitored"), ("monitored", "plain")])
def test_resume_across_backends_matches_uninterrupted_run(make_cfg, tmp_path, first, second):
    straight = tmp_path / "straight"
    run(make_cfg("session=monitored", "model.params.dropout_rate=0.3"), str(straight))

    split = tmp_path / "split"
    half = run(make_cfg(f"session={first}", "train.max_steps=10", "model.params.dropout_rate=0.3"), str(split))
    assert half["global_step"] == 10
    resumed = run(make_cfg(f"session={second}", "model.params.dropout_rate=0.3"), str(split))
    assert resumed["start_step"] == 10 and resumed["global_step"] == 20
    a, b = weights(str(straight / "checkpoints")), weights(str(split / "checkpoints"))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("session", ["plain", "monitored"])
def test_resuming_leaves_the_restored_checkpoint_as_it_is_and_keeps_rotating(make_cfg, tmp_path, session):
    ckpt = tmp_path / "checkpoints"
    common = (f"session={session}", "checkpoint.every_steps=5", "checkpoint.keep=3")
    run(make_cfg(*common, "train.max_steps=10"), str(tmp_path))

    def files_of_step_10():
        return {name: (st.st_ino, st.st_mtime_ns, st.st_size)
                for name in os.listdir(ckpt) if name.startswith("model.ckpt-10.") for st in [os.stat(ckpt / name)]}

    restored = files_of_step_10()
    assert sorted(restored) == ["model.ckpt-10.data-00000-of-00001", "model.ckpt-10.index", "model.ckpt-10.meta"]
    resumed = run(make_cfg(*common, "train.max_steps=20"), str(tmp_path))
    assert resumed["start_step"] == 10 and resumed["global_step"] == 20
    # The checkpoint the session restored is not written again over itself (same files: inode, time,
    # size), and checkpoint.keep=3 rotates on from the first run's list: 0 and 5 are gone.
    assert files_of_step_10() == restored
    assert tf.train.get_checkpoint_state(str(ckpt)).all_model_checkpoint_paths == [
        str(ckpt / f"model.ckpt-{step}") for step in (10, 15, 20)]
    assert not (ckpt / "model.ckpt-5.index").exists() and not (ckpt / "model.ckpt-0.index").exists()


def test_finished_run_is_a_no_op(make_cfg, tmp_path):
    first = run(make_cfg(), str(tmp_path))
    before = dir_state(tmp_path)
    again = run(make_cfg(), str(tmp_path))
    assert again == first
    assert dir_state(tmp_path) == before


@pytest.mark.slow
def test_finished_checkpoint_without_metrics_is_evaluated_not_trained(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path))
    os.remove(tmp_path / "metrics.json")
    ckpts = dir_state(tmp_path / "checkpoints")
    metrics = run(make_cfg(), str(tmp_path))
    assert metrics["global_step"] == 20 and metrics["start_step"] == 20
    assert dir_state(tmp_path / "checkpoints") == ckpts


def test_another_models_checkpoint_dir_is_refused_untouched(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path / "a"))
    ckpt_dir = tmp_path / "a" / "checkpoints"
    before = dir_state(ckpt_dir)
    with pytest.raises(CheckpointError, match="another model") as e:
        run(make_cfg("model.params.hidden_units=[32]", "train.max_steps=40", f"checkpoint.dir={ckpt_dir}"),
            str(tmp_path / "b"))
    assert "reshaped" in str(e.value)
    assert dir_state(ckpt_dir) == before


@pytest.mark.slow
def test_mnist_cnn_and_linear_build_and_step(make_cfg, tmp_path):
    for model in ("mnist", "linear"):
        metrics = run(make_cfg(f"model={model}", "train.max_steps=3", "eval.every_steps=0"), str(tmp_path / model))
        assert metrics["global_step"] == 3 and metrics["model"] == model


@pytest.mark.parametrize("optimizer, slots", [("sgd", []), ("momentum", ["Momentum"]), ("adam", ["Adam", "Adam_1"]),
                                               ("adamw", ["Adam", "Adam_1"])])
def test_optimizers(make_cfg, tmp_path, optimizer, slots):
    """The optimizer the config names is the one that trained: its slots beside every weight, Adam's
    beta powers after 5 steps (TF1's AdamOptimizer starts them at beta, times beta each step)."""
    metrics = run(make_cfg(f"optimizer={optimizer}", "train.max_steps=5"), str(tmp_path))
    assert metrics["global_step"] == 5
    saved = weights(metrics["checkpoint_dir"])
    model = sorted(n for n in saved if n.startswith("dense") and n.endswith(("kernel", "bias")))
    assert len(model) == 4
    expected = set(model) | {f"{n}/{slot}" for n in model for slot in slots} | {"global_step"}
    if "Adam" in slots:
        expected |= {"beta1_power", "beta2_power"}
        assert saved["beta1_power"] == pytest.approx(0.9 ** 6) and saved["beta2_power"] == pytest.approx(0.999 ** 6)
    assert set(saved) == expected


def test_training_without_evaluation_records_no_objective(make_cfg, tmp_path):
    """eval.enabled=false (Estimator.train): no eval input needed, no evaluation run, the record has the
    loss and no eval metric or objective."""
    cfg = make_cfg("model=model_fn", "model.fn=estimator_models.cnn_model_fn", "data=input_fn",
                   "data.train_fn=estimator_models.train_input_fn", "eval.enabled=false", "train.max_steps=4")
    result = run(cfg, str(tmp_path))
    assert result["status"] == "finished" and result["global_step"] == 4 and result["loss"] is not None
    assert "objective" not in result and not [k for k in result if k.startswith("eval_")]
    assert not (tmp_path / "checkpoints" / "eval").exists() or not os.listdir(tmp_path / "checkpoints" / "eval")
