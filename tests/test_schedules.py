"""optimizer.schedule and warm-up, gradient clipping, decoupled weight decay and train.ema_decay."""

import math

import numpy as np
import pytest
import tensorflow as tf

from helpers import read_jsonl, weights
from trainer import run
from trainer.config.rules import prepare
from trainer.errors import ConfigError
from trainer.model.schedules import expected_rate, learning_rate

tf1 = tf.compat.v1


def _rates(optimizer_cfg, steps, max_steps):
    with tf.Graph().as_default():
        step = tf1.placeholder(tf.int64, [])
        rate = learning_rate(optimizer_cfg, step, max_steps)
        with tf1.Session() as sess:
            return [float(sess.run(rate, {step: s})) for s in steps]


@pytest.mark.parametrize("overrides,known", [
    # Values worked out by hand from each formula.
    (["optimizer.learning_rate=0.1", "optimizer.schedule=exponential", "optimizer.decay_steps=100",
      "optimizer.decay_rate=0.5"], {0: 0.1, 100: 0.05, 200: 0.025, 50: 0.1 * 0.5 ** 0.5}),
    (["optimizer.learning_rate=0.1", "optimizer.schedule=exponential", "optimizer.decay_steps=100",
      "optimizer.decay_rate=0.5", "optimizer.staircase=true"], {99: 0.1, 100: 0.05, 199: 0.05}),
    (["optimizer.schedule=piecewise", "optimizer.boundaries=[100,150]", "optimizer.values=[0.1,0.01,0.001]"],
     {0: 0.1, 100: 0.1, 101: 0.01, 150: 0.01, 151: 0.001, 1000: 0.001}),
    (["optimizer.learning_rate=0.1", "optimizer.schedule=polynomial", "optimizer.end_learning_rate=0.0"],
     {0: 0.1, 100: 0.05, 200: 0.0, 300: 0.0}),
    (["optimizer.learning_rate=0.1", "optimizer.schedule=cosine", "optimizer.end_learning_rate=0.01"],
     {0: 0.1, 100: 0.055, 200: 0.01, 250: 0.01}),
    (["optimizer.learning_rate=0.1", "optimizer.schedule=cosine", "optimizer.warmup_steps=40"],
     {0: 0.0, 20: 0.05, 40: 0.1, 120: 0.05, 200: 0.0}),
    (["optimizer.learning_rate=0.1", "optimizer.warmup_steps=10"], {0: 0.0, 5: 0.05, 10: 0.1, 150: 0.1}),
])
def test_each_schedule_follows_its_formula(make_cfg, overrides, known):
    """The tensor (TensorFlow's decays) and the plain-Python rate (``expected_rate``, which the resume
    warning uses) both give the numbers worked out by hand."""
    cfg = make_cfg("optimizer=sgd", "train.max_steps=200", *overrides)
    steps = sorted(known)
    for step, rate in zip(steps, _rates(cfg.optimizer, steps, 200)):
        assert rate == pytest.approx(known[step], rel=1e-5, abs=1e-8), step
        assert expected_rate(cfg.optimizer, step, 200) == pytest.approx(known[step], rel=1e-5, abs=1e-8), step


@pytest.mark.slow
def test_resume_with_decay_steps_is_bitwise_equal_to_an_uninterrupted_run(make_cfg, tmp_path):
    schedule = ["optimizer=momentum", "optimizer.learning_rate=0.05", "optimizer.schedule=cosine",
                "optimizer.decay_steps=16", "optimizer.warmup_steps=4", "train.deterministic=true",
                "model.params.dropout_rate=0.3"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    for out in (straight, resumed):
        out.mkdir()
    hook = "+hooks.recorder={{_target_: user_hooks.LossRecorder, path: {}}}"
    run(make_cfg(*schedule, "train.max_steps=20", hook.format(straight / "losses.jsonl")), str(straight))
    run(make_cfg(*schedule, "train.max_steps=10", hook.format(resumed / "losses.jsonl")), str(resumed))
    run(make_cfg(*schedule, "train.max_steps=20", hook.format(resumed / "losses.jsonl")), str(resumed))
    losses = [r["loss"] for r in read_jsonl(straight / "losses.jsonl")]
    assert len(losses) == 20 and [r["loss"] for r in read_jsonl(resumed / "losses.jsonl")] == losses
    a, b = weights(str(straight / "checkpoints")), weights(str(resumed / "checkpoints"))
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow
def test_raising_max_steps_under_a_schedule_that_decays_to_it_is_said_on_resume(make_cfg, tmp_path, caplog):
    cosine = ["optimizer=momentum", "optimizer.learning_rate=0.05", "optimizer.schedule=cosine"]
    run(make_cfg(*cosine, "train.max_steps=10"), str(tmp_path / "stretched"))
    with caplog.at_level("WARNING", logger="trainer"):
        run(make_cfg(*cosine, "train.max_steps=20"), str(tmp_path / "stretched"))
    said = [r.getMessage() for r in caplog.records if "decays to train.max_steps" in r.getMessage()]
    # At step 10 the 10-step cosine had reached 0; stretched to 20 steps the rate is back at half its peak.
    assert said == ["optimizer.schedule=cosine decays to train.max_steps, which was 10 and is now 20: the learning "
                    "rate at step 10 goes from 0 to 0.025; set optimizer.decay_steps=10 to keep the former curve"]
    caplog.clear()
    fixed = [*cosine, "optimizer.decay_steps=10"]
    run(make_cfg(*fixed, "train.max_steps=10"), str(tmp_path / "fixed"))
    with caplog.at_level("WARNING", logger="trainer"):
        run(make_cfg(*fixed, "train.max_steps=20"), str(tmp_path / "fixed"))
    assert not [r for r in caplog.records if "decays to train.max_steps" in r.getMessage()]


def test_a_schedule_switched_on_resume_is_said_with_the_rates_jump(make_cfg, tmp_path, caplog):
    cosine = ["optimizer=momentum", "optimizer.learning_rate=0.05", "optimizer.schedule=cosine", "train.max_steps=20"]
    run(make_cfg(*cosine, "train.max_steps=10"), str(tmp_path))
    piecewise = ["optimizer=momentum", "optimizer.schedule=piecewise", "optimizer.boundaries=[15]",
                 "optimizer.values=[0.1,0.01]", "train.max_steps=20"]
    with caplog.at_level("WARNING", logger="trainer"):
        run(make_cfg(*piecewise), str(tmp_path))
    said = [r.getMessage() for r in caplog.records if "schedule changed" in r.getMessage()]
    assert len(said) == 1 and "schedule cosine -> piecewise" in said[0], said
    assert said[0].endswith("the rate at step 10 goes from 0 to 0.1"), said  # the 10-step cosine had reached 0


def _one_step(make_cfg, tmp_path, *overrides):
    """The trainable weights before and after one step of the runner's train op (same batch, same init)."""
    from trainer.data.sources import load_arrays
    from trainer.model.graph import build_graph, single_process
    from trainer.plan import graph_recipe

    cfg = prepare(make_cfg("device=cpu", "optimizer=sgd", "optimizer.learning_rate=0.5", *overrides), str(tmp_path))
    graph = build_graph(graph_recipe(cfg), load_arrays(cfg.data), single_process("cpu"))
    with graph.graph.as_default(), tf1.Session() as sess:
        trainable = tf1.trainable_variables()
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        sess.run(graph.train_input.initializer, feed_dict=graph.train_input.feeds(0))
        before = sess.run(trainable)
        sess.run(graph.train_op)
        after = sess.run(trainable)
    return before, after


@pytest.mark.slow
def test_clip_norm_bounds_the_step(make_cfg, tmp_path):
    before, after = _one_step(make_cfg, tmp_path / "a", "optimizer.clip_norm=0.001")
    moved = math.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(after, before)))
    assert moved == pytest.approx(0.5 * 0.001, rel=1e-3)  # SGD: learning rate x the clipped global norm
    before, after = _one_step(make_cfg, tmp_path / "b")
    unclipped = math.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(after, before)))
    assert unclipped > 10 * moved


@pytest.mark.slow
def test_weight_decay_is_decoupled_from_the_gradient(make_cfg, tmp_path):
    before, plain = _one_step(make_cfg, tmp_path / "a")
    _, decayed = _one_step(make_cfg, tmp_path / "b", "optimizer.weight_decay=0.1")
    for w0, p, d in zip(before, plain, decayed):
        np.testing.assert_allclose(d, p - 0.1 * w0, rtol=1e-4, atol=1e-6)  # w - wd * w, then the same SGD step


@pytest.mark.slow
def test_adamw_config(make_cfg, tmp_path):
    cfg = make_cfg("optimizer=adamw")
    assert cfg.optimizer.weight_decay > 0
    metrics = run(make_cfg("optimizer=adamw", "optimizer.weight_decay=1e-3", "train.max_steps=10",
                           "eval.every_steps=0"), str(tmp_path))
    assert np.isfinite(metrics["loss"]) and metrics["global_step"] == 10


def test_ema_averages_follow_their_recursion(make_cfg, tmp_path):
    from trainer.data.sources import load_arrays
    from trainer.model.graph import build_graph, single_process
    from trainer.plan import graph_recipe

    cfg = prepare(make_cfg("device=cpu", "train.ema_decay=0.5"), str(tmp_path))
    graph = build_graph(graph_recipe(cfg), load_arrays(cfg.data), single_process("cpu"))
    with graph.graph.as_default(), tf1.Session() as sess:
        trainable = tf1.trainable_variables()
        by_name = {v.op.name: v for v in tf1.global_variables()}
        averages = [by_name[v.op.name + "/ExponentialMovingAverage"] for v in trainable]
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        sess.run(graph.train_input.initializer, feed_dict=graph.train_input.feeds(0))
        expected = sess.run(trainable)
        for step in range(1, 6):
            sess.run(graph.train_op)
            decay = min(0.5, (1 + step) / (10 + step))
            now = sess.run(trainable)
            expected = [decay * e + (1 - decay) * w for e, w in zip(expected, now)]
            for got, want in zip(sess.run(averages), expected):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
            assert any(not np.allclose(a, w) for a, w in zip(sess.run(averages), now))  # not a copy


@pytest.mark.slow
@pytest.mark.parametrize("graph_kind", ["shared", "separate"])
def test_evaluation_and_evaluate_mode_read_the_averages(make_cfg, tmp_path, graph_kind):
    train = ["train.ema_decay=0.9", "optimizer.learning_rate=0.01", f"eval.graph={graph_kind}"]
    metrics = run(make_cfg(*train), str(tmp_path))
    evaluated = run(make_cfg(*train, "mode=evaluate", f"checkpoint.dir={tmp_path / 'checkpoints'}"), str(tmp_path / "eval"))
    # The final evaluation in training and mode=evaluate on its checkpoint: both from the averages.
    assert evaluated["metrics"]["loss"] == pytest.approx(metrics["eval_loss"], rel=1e-5)
    without = run(make_cfg("optimizer.learning_rate=0.01", f"eval.graph={graph_kind}", "mode=evaluate",
                           f"checkpoint.dir={tmp_path / 'checkpoints'}"), str(tmp_path / "raw"))
    assert without["metrics"]["loss"] != pytest.approx(metrics["eval_loss"], rel=1e-4)  # the raw weights differ


@pytest.mark.parametrize("overrides,message", [
    (["optimizer.schedule=piecewise", "optimizer.boundaries=[10]", "optimizer.values=[0.1]"],
     r"optimizer.values has 1 rates for 1 boundaries; give len\(boundaries\) \+ 1"),
    (["optimizer.schedule=piecewise", "optimizer.boundaries=[10,5]", "optimizer.values=[0.1,0.2,0.3]"],
     r"optimizer.boundaries=\[10, 5\]: must increase"),
    (["optimizer.schedule=piecewise", "optimizer.boundaries=[10]", "optimizer.values=[0.1,-1]"],
     r"optimizer.values=\[0.1, -1.0\]: every rate must be a finite number > 0"),
    (["optimizer.warmup_steps=20"], r"optimizer.warmup_steps=20: not below train.max_steps=20"),
    (["optimizer.warmup_steps=-1"], r"optimizer.warmup_steps=-1: must be >= 0"),
    (["optimizer.schedule=exponential"], r"optimizer.schedule=exponential needs optimizer.decay_steps"),
    (["optimizer.schedule=exponential", "optimizer.decay_steps=10", "optimizer.decay_rate=0"],
     r"optimizer.decay_rate=0.0: must be a finite number > 0"),
    (["optimizer.schedule=cosine", "optimizer.end_learning_rate=-0.1"], r"optimizer.end_learning_rate=-0.1: must be a finite number >= 0"),
    (["optimizer.clip_norm=0"], r"optimizer.clip_norm=0.0: must be a finite number > 0"),
    (["optimizer.weight_decay=-1"], r"optimizer.weight_decay=-1.0: the fraction of each weight taken off per step .* must lie in \[0, 1\)"),
    (["train.ema_decay=1.5"], r"train.ema_decay=1.5: must lie between 0 and 1"),
])
def test_bad_schedule_values_fail_in_one_line(make_cfg, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message) as e:
        prepare(make_cfg(*overrides), str(tmp_path))
    assert "\n" not in str(e.value)


def test_validation_examples_hold_out_the_end_of_the_training_split(make_cfg):
    from trainer.data.sources import load_arrays
    from trainer.data.sources.synthetic import make_synthetic

    arrays = load_arrays(make_cfg("data.validation_examples=100").data)
    full = make_synthetic(512, 128)
    assert len(arrays.train_x) == 412 and len(arrays.test_x) == 100
    np.testing.assert_array_equal(arrays.test_x, full.train_x[412:])  # held out from training, test split unread
    np.testing.assert_array_equal(arrays.train_y, full.train_y[:412])
    with pytest.raises(ConfigError, match=r"data.validation_examples=512: not below the 512 training examples"):
        load_arrays(make_cfg("data.validation_examples=512").data)
