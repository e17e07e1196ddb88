"""Hooks and Scaffold from config, with the same behaviour under both session backends."""

import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from trainer.errors import ConfigError
from helpers import read_jsonl, weights as _weights
from trainer import run

BACKENDS = ["plain", "monitored"]


def hook(name, target, **kwargs):
    args = ", ".join(f"{k}: {v}" for k, v in kwargs.items())
    return f"+hooks.{name}={{_target_: {target}{', ' + args if args else ''}}}"


@pytest.mark.parametrize("session", BACKENDS)
def test_counting_hook_sees_the_same_lifecycle(make_cfg, tmp_path, session):
    counts = tmp_path / "counts.json"
    run(make_cfg(f"session={session}", hook("count", "user_hooks.CountingHook", path=counts)), str(tmp_path))
    assert json.loads(counts.read_text()) == {"begin": 1, "after_create_session": 1, "before_run": 20, "after_run": 20, "end": 1}


@pytest.mark.parametrize("session", BACKENDS)
def test_chief_role_hooks_run_in_a_single_process(make_cfg, tmp_path, session):
    counts = tmp_path / "counts.json"
    run(make_cfg(f"session={session}", hook("count", "user_hooks.CountingHook", path=counts, role="chief")), str(tmp_path))
    assert json.loads(counts.read_text())["after_run"] == 20


def test_bad_role_is_refused(make_cfg, tmp_path):
    with pytest.raises(ConfigError, match="hooks.count.role=boss"):
        run(make_cfg(hook("count", "user_hooks.CountingHook", path=tmp_path / "c", role="boss")), str(tmp_path))


@pytest.mark.parametrize("session", BACKENDS)
def test_logging_tensor_hook_logs_named_tensors(make_cfg, tmp_path, session, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    run(make_cfg(f"session={session}", "+hook@hooks.logging=logging_tensor", "hooks.logging.every_n_iter=10"), str(tmp_path))
    lines = [r.getMessage() for r in caplog.records if "accuracy = " in r.getMessage()]
    assert len(lines) == 2 and "loss = " in lines[0]  # steps 0 and 10 of 20


def test_unknown_tensor_name_fails_before_training(make_cfg, tmp_path):
    with pytest.raises(ConfigError, match="hooks.logging: no tensor named 'nope'"):
        run(make_cfg("+hook@hooks.logging=logging_tensor", "hooks.logging.tensors=[nope]"), str(tmp_path))
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("session", BACKENDS)
def test_profiler_hook_writes_a_timeline(make_cfg, tmp_path, session):
    run(make_cfg(f"session={session}", "+hook@hooks.profiler=profiler", "hooks.profiler.save_steps=10"), str(tmp_path))
    timelines = [n for n in os.listdir(tmp_path / "checkpoints" / "profile") if n.startswith("timeline-")]
    # TensorFlow's ProfilerHook names a trace by the global step it read in the same run as the train op,
    # unordered with the increment: step 10's trace is timeline-10 or, on a busy machine, timeline-9
    first = min(timelines, key=lambda n: int(n[len("timeline-"):-len(".json")]))
    assert first in ("timeline-9.json", "timeline-10.json"), timelines
    trace = json.loads((tmp_path / "checkpoints" / "profile" / first).read_text())
    assert trace["traceEvents"]


@pytest.mark.parametrize("session", BACKENDS)
def test_nan_tensor_hook_raises_on_nan_loss(make_cfg, tmp_path, session):
    with pytest.raises(tf.compat.v1.train.NanLossDuringTrainingError):
        # train.on_nan=skip_step: the runner's own guard lets the step through to NanTensorHook.
        run(make_cfg(f"session={session}", "model.fn=user_models.nan_after_5", "+hook@hooks.nan=nan_tensor",
                     "train.on_nan=skip_step"), str(tmp_path))


@pytest.mark.parametrize("session", BACKENDS)
def test_nan_tensor_hook_can_stop_instead(make_cfg, tmp_path, session):
    metrics = run(make_cfg(f"session={session}", "model.fn=user_models.nan_after_5", "+hook@hooks.nan=nan_tensor",
                           "hooks.nan.fail_on_nan_loss=false", "train.on_nan=skip_step"), str(tmp_path))
    assert metrics["global_step"] == 6  # the NaN step ran, then the hook asked to stop


@pytest.mark.parametrize("session", BACKENDS)
def test_stop_at_step_and_final_ops_and_waiter(make_cfg, tmp_path, session, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    metrics = run(make_cfg(f"session={session}", "+hook@hooks.stop=stop_at_step", "hooks.stop.num_steps=7",
                           "+hook@hooks.final=final_ops", "+hook@hooks.wait=global_step_waiter"), str(tmp_path))
    assert metrics["global_step"] == 7
    assert any("final ops" in r.getMessage() and "'global_step': 7" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("session", BACKENDS)
def test_feed_fn_hook_feeds_by_name(make_cfg, tmp_path, session):
    losses = tmp_path / "losses.jsonl"
    run(make_cfg(f"session={session}", "model.fn=user_models.scaled_loss", "+hook@hooks.feed=feed_fn",
                 "hooks.feed.fn=user_models.zero_scale", hook("rec", "user_hooks.LossRecorder", path=losses)), str(tmp_path))
    assert {json.loads(line)["loss"] for line in losses.read_text().splitlines()} == {0.0}


@pytest.mark.slow
@pytest.mark.parametrize("session", BACKENDS)
def test_extra_savers_and_listeners(make_cfg, tmp_path, session, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    run(make_cfg(f"session={session}", "+hook@hooks.summaries=summary_saver",
                 "+hook@hooks.ckpt=checkpoint_saver", "hooks.ckpt.save_steps=5", "hooks.ckpt.checkpoint_basename=extra.ckpt",
                 "+checkpoint.listeners.log={_target_: trainer.hooks.standard.LogCheckpointListener}"), str(tmp_path))
    files = os.listdir(tmp_path / "checkpoints")
    assert "extra.ckpt-15.index" in files
    saved = [r.getMessage() for r in caplog.records if r.getMessage().startswith("saved checkpoint at step")]
    assert saved == ["saved checkpoint at step 0", "saved checkpoint at step 10", "saved checkpoint at step 20"]


@pytest.mark.parametrize("session", BACKENDS)
def test_early_stopping_stops_before_max_steps(make_cfg, tmp_path, session):
    metrics = run(make_cfg(f"session={session}", "eval.every_steps=2", "+hook@hooks.early=early_stopping",
                           "hooks.early.patience=2", "hooks.early.min_delta=100"), str(tmp_path))
    # Evaluations at 2 (the first is a best), 4 and 6 (no improvement of 100): stop at 6.
    assert metrics["global_step"] == 6 and metrics["stop_reason"] == "hook"
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith("-6")
    # The same command again: the run is finished for this train.max_steps, nothing retrains.
    again = run(make_cfg(f"session={session}", "eval.every_steps=2", "+hook@hooks.early=early_stopping",
                         "hooks.early.patience=2", "hooks.early.min_delta=100"), str(tmp_path))
    assert again == metrics and tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith("-6")


@pytest.mark.parametrize("session", BACKENDS)
def test_best_checkpoint_export(make_cfg, tmp_path, session):
    run(make_cfg(f"session={session}", "eval.every_steps=5", "+hook@hooks.best=best_checkpoint",
                 "hooks.best.metric=loss", "hooks.best.mode=min"), str(tmp_path))
    best_dir = tmp_path / "checkpoints" / "best"
    best = json.loads((best_dir / "best.json").read_text())
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"eval"' in l]
    lowest = min(rows, key=lambda r: r["loss"])
    assert best["step"] == lowest["step"] and best["value"] == pytest.approx(lowest["loss"])
    assert tf.train.latest_checkpoint(str(best_dir)).endswith(f"-{lowest['step']}")


@pytest.mark.slow
def test_warm_start_restores_mapped_variables_only(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path / "a"))
    source = _weights(tf.train.latest_checkpoint(str(tmp_path / "a" / "checkpoints")))
    run(make_cfg("model.params.hidden_units=[16,8]", f"init_from.checkpoint={tmp_path / 'a' / 'checkpoints'}",
                 "init_from.vars_to_warm_start=dense/.*", "train.max_steps=1"), str(tmp_path / "b"))
    start = _weights(str(tmp_path / "b" / "checkpoints" / "model.ckpt-0"))
    np.testing.assert_array_equal(start["dense/kernel"], source["dense/kernel"])
    np.testing.assert_array_equal(start["dense/bias"], source["dense/bias"])
    assert start["dense_1/kernel"].shape == (16, 8)  # a new layer: its own initial values
    np.testing.assert_array_equal(start["dense_2/bias"], np.zeros(10))


@pytest.mark.slow
def test_warm_start_with_a_name_map(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path / "a"))
    source = _weights(tf.train.latest_checkpoint(str(tmp_path / "a" / "checkpoints")))
    # dense_1 (16 -> 10) of the source becomes dense_2 of a deeper model.
    run(make_cfg("model.params.hidden_units=[16,16]", f"init_from.checkpoint={tmp_path / 'a' / 'checkpoints'}",
                 "init_from.vars_to_warm_start=dense/.*",
                 "+init_from.var_name_map={dense_2/kernel: dense_1/kernel, dense_2/bias: dense_1/bias}",
                 "train.max_steps=1"), str(tmp_path / "b"))
    start = _weights(str(tmp_path / "b" / "checkpoints" / "model.ckpt-0"))
    np.testing.assert_array_equal(start["dense_2/kernel"], source["dense_1/kernel"])


def test_warm_start_mismatch_lists_every_problem(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path / "a"))
    with pytest.raises(ConfigError) as e:
        run(make_cfg("model.params.hidden_units=[16,8]", f"init_from.checkpoint={tmp_path / 'a' / 'checkpoints'}"),
            str(tmp_path / "b"))
    message = str(e.value)
    assert "other shapes" in message and "dense_1/kernel [16, 8] vs dense_1/kernel [16, 10]" in message
    assert "not in the checkpoint ['dense_2/bias', 'dense_2/kernel']" in message
    assert not (tmp_path / "b" / "checkpoints").exists()


def test_scaffold_ops_from_config(make_cfg, tmp_path):
    from trainer.data.sources import load_arrays
    from trainer.model.graph import build_graph
    from trainer.plan import graph_recipe

    cfg = make_cfg("scaffold.local_init_op=[accuracy/total/Assign]")
    graph = build_graph(graph_recipe(cfg), load_arrays(cfg.data))
    assert [op.name for op in graph.scaffold.local_init_op.control_inputs] == ["accuracy/total/Assign"]
    with pytest.raises(ConfigError, match="scaffold.ready_op: no tensor named 'nope'"):
        build_graph(make_cfg("scaffold.ready_op=nope"), load_arrays(cfg.data))


@pytest.mark.parametrize("session", BACKENDS)
def test_custom_local_init_op_runs_under_both_backends(make_cfg, tmp_path, session):
    # TensorFlow's default local_init_op initialises every local variable (the eval metrics' too);
    # one that leaves some out fails the default ready_op, in both backends alike.
    cfg = make_cfg(f"session={session}", "scaffold.local_init_op=[accuracy/total/Assign]")
    with pytest.raises(RuntimeError, match="(?s)Init operations did not make model ready.*accuracy_1/total"):
        run(cfg, str(tmp_path))


def _saver_hook_graph():
    tf1 = tf.compat.v1
    step = tf1.train.get_or_create_global_step()
    tf1.get_variable("w", [3])
    return tf1.train.Saver(), step


def test_the_input_is_initialised_while_the_first_checkpoint_is_written(tmp_path):
    """The chief's CheckpointSaverHook runs the input's initialisation (handed to it by InputInitHook)
    on a thread while it writes the first checkpoint; both are done when its after_create_session returns."""
    import threading

    from trainer.hooks.builtin import CheckpointSaverHook

    tf1 = tf.compat.v1
    initialising, saving, done = threading.Event(), threading.Event(), []

    class Listener(tf1.train.CheckpointSaverListener):
        def before_save(self, session, global_step_value):
            saving.set()
            assert initialising.wait(20), "the input's initialisation did not start before the save"

    def initialise(session):
        initialising.set()
        assert saving.wait(20), "the save did not start while the input was being initialised"
        done.append(int(session.run(step)))

    with tf.Graph().as_default():
        saver, step = _saver_hook_graph()
        hook = CheckpointSaverHook(str(tmp_path), save_steps=10, saver=saver, listeners=[Listener()],
                                   alongside=initialise)
        hook.begin()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            hook.after_create_session(sess, None)
            assert done == [0]
            assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-0")
        hook.wait_for_graph_files()


def test_an_error_initialising_the_input_alongside_the_first_save_is_raised_after_it(tmp_path):
    from trainer.hooks.builtin import CheckpointSaverHook

    tf1 = tf.compat.v1

    def initialise(session):
        raise tf.errors.InvalidArgumentError(None, None, "the input's feed is wrong")

    with tf.Graph().as_default():
        saver, _ = _saver_hook_graph()
        hook = CheckpointSaverHook(str(tmp_path), save_steps=10, saver=saver, alongside=initialise)
        hook.begin()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            with pytest.raises(tf.errors.InvalidArgumentError, match="the input's feed is wrong"):
                hook.after_create_session(sess, None)
        hook.wait_for_graph_files()
    # The save it ran meanwhile finished: the checkpoint is whole and readable.
    reader = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-0"))
    assert reader.get_tensor("w").shape == (3,)


def test_a_resumed_session_initialises_the_input_without_writing_the_restored_checkpoint_again(tmp_path):
    from trainer.hooks.builtin import CheckpointSaverHook

    tf1 = tf.compat.v1
    initialised = []
    with tf.Graph().as_default():
        saver, _ = _saver_hook_graph()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            saver.save(sess, str(tmp_path / "model.ckpt"), global_step=0)
            written = os.stat(tmp_path / "model.ckpt-0.index").st_mtime_ns
            hook = CheckpointSaverHook(str(tmp_path), save_steps=10, saver=saver, alongside=initialised.append)
            hook.begin()
            hook.after_create_session(sess, None)
        hook.wait_for_graph_files()
    assert len(initialised) == 1
    assert os.stat(tmp_path / "model.ckpt-0.index").st_mtime_ns == written


def test_metrics_csv_holds_the_jsonl_rows_and_widens_its_header_across_a_resume(tmp_path):
    import csv

    from trainer.records import MetricsLog

    path = str(tmp_path / "metrics.jsonl")
    first = MetricsLog(path)
    first.record("train", 5, {"loss": 1.5, "steps_per_sec": 10.0})
    first.record("eval", 5, {"loss": 1.25, "accuracy": 0.5})  # a new key: the header widens
    first.record("train", 10, {"loss": 1.0, "steps_per_sec": 11.0})
    resumed = MetricsLog(path)  # a resumed run appends to the same files
    resumed.record("train", 15, {"loss": 0.75, "steps_per_sec": 12.0})
    resumed.record("eval", 15, {"loss": 0.5, "accuracy": 0.75, "auc": 0.9})
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["kind", "step", "time", "accuracy", "auc", "loss", "steps_per_sec"]
    expected = read_jsonl(path)
    assert len(rows) == len(expected) == 5
    for row, record in zip(rows, expected):
        assert {k: v for k, v in row.items() if v != ""} == {k: str(v) for k, v in record.items()}


def test_a_metrics_log_cut_off_mid_line_by_a_kill_is_mended_on_resume(tmp_path, caplog):
    """A kill in the middle of an append leaves half a line: the resumed run drops it (and says so)
    instead of writing its next row onto it; readers leave such a line out and name any other bad line."""
    import csv

    import pytest

    from trainer.errors import RecordError
    from trainer.records import MetricsLog, read_rows
    from trainer.tracking import _rows

    path = tmp_path / "metrics.jsonl"
    first = MetricsLog(str(path))
    first.record("train", 5, {"loss": 1.5})
    first.record("eval", 5, {"loss": 1.25, "accuracy": 0.5})
    with open(path, "a") as f:
        f.write('{"kind": "train", "step": 10, "lo')  # the kill
    assert [r["step"] for r in read_rows(str(path))] == [5, 5] == [r["step"] for r in _rows(str(tmp_path))]
    with caplog.at_level("WARNING", logger="trainer.records"):
        MetricsLog(str(path)).record("eval", 10, {"loss": 1.0, "accuracy": 0.75, "auc": 0.5})  # widens the CSV too
    assert "its last line was cut off" in caplog.text
    assert [(r["kind"], r["step"]) for r in read_rows(str(path))] == [("train", 5), ("eval", 5), ("eval", 10)]
    with open(tmp_path / "metrics.csv", newline="") as f:
        assert [row["step"] for row in csv.DictReader(f)] == ["5", "5", "10"]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(RecordError, match=r"metrics.jsonl:2: not a row of the metrics log \('not json'\); delete"):
        read_rows(str(path))


def test_checkpoint_saver_reads_the_step_again_only_when_a_save_is_due(tmp_path, monkeypatch):
    """TensorFlow's CheckpointSaverHook ran the session a second time after every step to read the
    global step; given the step read after the train op, the runner's hook runs once a step and saves
    at the same steps."""
    from trainer.hooks.builtin import CheckpointSaverHook

    tf1 = tf.compat.v1
    runs = []
    real_run = tf1.Session.run
    monkeypatch.setattr(tf1.Session, "run", lambda self, *a, **k: runs.append(1) or real_run(self, *a, **k))
    with tf.Graph().as_default():
        step = tf1.train.get_or_create_global_step()
        train_op = tf1.assign_add(step, 1)
        with tf.control_dependencies([train_op]):
            step_after = tf.identity(step)
        hook = CheckpointSaverHook(str(tmp_path), save_steps=5, step_after=step_after)
        with tf1.train.MonitoredSession(hooks=[hook]) as sess:
            before = len(runs)
            for _ in range(12):
                sess.run(train_op)
            during = len(runs) - before
    saved = sorted(int(p.rsplit("-", 1)[1]) for p in tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths)
    assert saved == [0, 5, 10, 12]
    assert during == 12 + 2 * 2, during  # one run a step; a step read and the save's own run at 5 and 10
