"""No progress lost and no checkpoint dir damaged: NaN, signals, errors, damaged files, locks, kills."""

import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from helpers import TRAIN, ckpt_steps, dir_state as files, latest_step, wait_for_step as _wait_for_step, weights
from trainer import run
from trainer.errors import (CheckpointError, CheckpointLockedError, ConfigError, NanLossError, RecoveryLimitError,
                            TrainingError)

BACKENDS = ["plain", "monitored"]
SMALL = ["data=synthetic", "data.train_examples=512", "data.test_examples=64", "model=mlp",
         "model.params.hidden_units=[16]", "model.params.dropout_rate=0.3", "train.batch_size=32",
         "log.progress=off", "eval.every_steps=0"]


# --- NaN -------------------------------------------------------------------------------------


@pytest.mark.parametrize("session", BACKENDS)
def test_nan_stops_naming_the_step_and_keeps_the_last_good_checkpoint(make_cfg, tmp_path, session):
    # The NaN step (6) is also a save step: its checkpoint must not be written.
    cfg = make_cfg(f"session={session}", "model.fn=user_models.nan_after_5", "checkpoint.every_steps=6")
    with pytest.raises(NanLossError, match="at step 6.*model.ckpt-0"):
        run(cfg, str(tmp_path))
    ckpt = tmp_path / "checkpoints"
    assert latest_step(ckpt) == 0 and not (ckpt / "model.ckpt-6.index").exists()
    assert all(np.isfinite(v).all() for v in weights(tf.train.latest_checkpoint(str(ckpt))).values())


def _strict_json(path):
    """A JSON file or JSON-lines file parsed as JSON is defined: bare NaN or Infinity fails."""
    def refuse(constant):
        raise ValueError(f"{path}: {constant} is not JSON")

    text = open(path).read()
    if str(path).endswith(".jsonl"):
        return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("session", BACKENDS)
def test_nan_skip_step_leaves_the_weights_unchanged(make_cfg, tmp_path, session):
    # Steps 6-20 are skipped: the weights stay those of step 5. Most of the run was skipped, so it has
    # no result (it fails); the last step's loss is NaN, recorded as null (JSON has no NaN).
    with pytest.raises(NanLossError, match="15 of this run's 20 steps were NaN or Inf and skipped"):
        run(make_cfg(f"session={session}", "model.fn=user_models.nan_after_5", "train.on_nan=skip_step",
                     "train.max_skipped_steps=20", "checkpoint.every_steps=5"), str(tmp_path))
    assert _strict_json(tmp_path / "metrics.json")["status"] == "failed"
    rows = [r for r in _strict_json(tmp_path / "metrics.jsonl") if r["kind"] == "train"]
    assert rows[-1]["step"] == 20 and rows[-1]["loss"] is None and rows[-1]["non_finite"] == ["loss"]
    ckpt = tmp_path / "checkpoints"
    at_5, at_20 = weights(ckpt / "model.ckpt-5"), weights(ckpt / "model.ckpt-20")
    for name in at_5:
        if name != "global_step":
            np.testing.assert_array_equal(at_5[name], at_20[name], err_msg=name)


# --- errors, recovery -------------------------------------------------------------------------


@pytest.mark.parametrize("session", BACKENDS)
def test_an_error_in_the_loop_saves_the_last_state(make_cfg, tmp_path, session, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    with pytest.raises(RuntimeError, match="planted failure"):
        run(make_cfg(f"session={session}", "+hooks.fail={_target_: user_hooks.FailAt, step: 7}"), str(tmp_path))
    assert latest_step(tmp_path / "checkpoints") == 7
    assert any("saved the last state before the error" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_the_exit_checkpoint_pushes_no_older_checkpoint_out(make_cfg, tmp_path):
    with pytest.raises(RuntimeError, match="planted failure"):
        run(make_cfg("checkpoint.every_steps=2", "checkpoint.keep=2",
                     "+hooks.fail={_target_: user_hooks.FailAt, step: 7}"), str(tmp_path))
    ckpt = tmp_path / "checkpoints"
    assert ckpt_steps(ckpt) == [4, 6, 7]  # keep=2 rotation of the run's saves, plus the exit checkpoint
    state = tf.train.get_checkpoint_state(str(ckpt))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model.ckpt-4", "model.ckpt-6",
                                                                              "model.ckpt-7"]
    assert run(make_cfg("checkpoint.every_steps=2", "checkpoint.keep=2"), str(tmp_path))["start_step"] == 7


def test_a_state_holding_nan_is_not_saved_at_the_error(make_cfg, tmp_path, caplog):
    # A user hook stops the run on purpose (it saw divergence); the state already holds NaN.
    with pytest.raises(RuntimeError, match="planted failure"):
        run(make_cfg("model=model_fn", "model.fn=user_models.poisons_a_variable_from_5", "checkpoint.every_steps=4",
                     "+hooks.fail={_target_: user_hooks.FailAt, step: 7}"), str(tmp_path))
    assert latest_step(tmp_path / "checkpoints") == 4
    assert "not saving the state at the error: it holds NaN or Inf values" in caplog.text


@pytest.mark.parametrize("group_bytes", [1 << 28, 16])
def test_the_finite_check_reads_every_float_variable_in_its_groups(group_bytes):
    """The check before the exit checkpoint: a NaN or an Inf in any float variable (float32, bfloat16,
    in a later group of fetches) is found; integer variables are not checked; no op is added."""
    from trainer.training.loop import weights_finite

    with tf.Graph().as_default() as graph:
        w = tf.compat.v1.get_variable("w", initializer=tf.ones([3, 4]))
        half = tf.Variable(tf.ones([5], tf.bfloat16), name="half")
        steps = tf.Variable(7, dtype=tf.int64, name="steps")
        everything = [w, half, steps]
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            poison = {v: (v.assign(tf.constant(np.full(v.shape, value), v.dtype)))
                      for v, value in [(w, np.nan), (half, np.inf)]}
            restore = {v: v.assign(tf.ones(v.shape, v.dtype)) for v in (w, half)}
            graph.finalize()
            assert weights_finite(sess, everything, group_bytes)
            for v in (w, half):
                sess.run(poison[v])
                assert not weights_finite(sess, everything, group_bytes), v.name
                sess.run(restore[v])
            assert weights_finite(sess, everything, group_bytes)


@pytest.mark.slow
def test_recoveries_are_bounded_and_logged(make_cfg, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    with pytest.raises(RecoveryLimitError, match="session.max_recoveries=2"):
        run(make_cfg("session=monitored", "session.max_recoveries=2", "session.recovery_wait_secs=0",
                     "+hooks.abort={_target_: user_hooks.AbortFrom, step: 12}"), str(tmp_path))
    recoveries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("recovering the session")]
    assert len(recoveries) == 2
    assert any("training continues from step 10" in r.getMessage() for r in caplog.records)


# --- damaged checkpoint dirs ----------------------------------------------------------------


@pytest.mark.slow
def test_truncated_latest_checkpoint_falls_back_to_the_previous(make_cfg, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    run(make_cfg(), str(tmp_path))  # checkpoints at 0, 10, 20
    data = tmp_path / "checkpoints" / "model.ckpt-20.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:100])
    metrics = run(make_cfg("train.max_steps=30"), str(tmp_path))
    assert (metrics["start_step"], metrics["global_step"]) == (10, 30)
    assert any("model.ckpt-20" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "deleted"])
def test_a_broken_state_file_is_rebuilt_not_restarted_from_zero(make_cfg, tmp_path, damage):
    run(make_cfg(), str(tmp_path))
    state = tmp_path / "checkpoints" / "checkpoint"
    if damage == "garbage":
        state.write_text("this is not a checkpoint state {{{")
    else:
        state.unlink()
    metrics = run(make_cfg("train.max_steps=30"), str(tmp_path))
    assert metrics["start_step"] == 20


@pytest.mark.slow
def test_missing_index_of_the_latest_falls_back(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path))
    (tmp_path / "checkpoints" / "model.ckpt-20.index").unlink()
    assert run(make_cfg("train.max_steps=30"), str(tmp_path))["start_step"] == 10


@pytest.mark.slow
def test_no_intact_checkpoint_is_refused_untouched(make_cfg, tmp_path):
    run(make_cfg("checkpoint.keep=1"), str(tmp_path))
    ckpt = tmp_path / "checkpoints"
    for p in ckpt.glob("model.ckpt-*.data-*"):
        p.write_bytes(p.read_bytes()[:50])
    before = files(ckpt)
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        run(make_cfg("train.max_steps=30"), str(tmp_path))
    assert files(ckpt) == before


@pytest.mark.slow
def test_leftover_temp_dirs_are_cleaned(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path))
    ckpt = tmp_path / "checkpoints"
    leftovers = [ckpt / "model.ckpt-30_temp", ckpt / f"model.ckpt-30_temp_{'ab' * 16}"]
    for leftover in leftovers:
        leftover.mkdir()
        (leftover / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    partial = [ckpt / "model.ckpt-30.data-00000-of-00001.tempstate1234", ckpt / f"checkpoint.tmp{'cd' * 16}",
               ckpt / "manifest.json.999.tmp"]
    for path in partial:
        path.write_bytes(b"x")
    # Names that merely contain "_temp" or "tmp" are the user's: kept.
    kept = [ckpt / "my_templates", ckpt / "eval_temperature", ckpt / "notes.tmp.txt"]
    kept[0].mkdir()
    kept[1].mkdir()
    kept[2].write_text("mine")
    run(make_cfg("train.max_steps=25"), str(tmp_path))
    assert not any(p.exists() for p in leftovers + partial)
    assert all(p.exists() for p in kept)


@pytest.mark.slow
def test_a_garbage_manifest_is_reported_and_written_again(make_cfg, tmp_path, caplog):
    run(make_cfg(), str(tmp_path))
    manifest = tmp_path / "checkpoints" / "manifest.json"
    manifest.write_bytes(b"\x00not json")
    assert run(make_cfg("train.max_steps=30"), str(tmp_path))["start_step"] == 20
    assert "manifest.json does not parse" in caplog.text
    assert json.loads(manifest.read_text())["model"] == "mlp"


@pytest.mark.slow
def test_checkpoint_dir_moved_elsewhere_still_resumes(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path / "a"))
    shutil.move(str(tmp_path / "a" / "checkpoints"), str(tmp_path / "moved"))
    metrics = run(make_cfg("train.max_steps=30", f"checkpoint.dir={tmp_path / 'moved'}"), str(tmp_path / "b"))
    assert metrics["start_step"] == 20


@pytest.mark.slow
def test_another_model_name_is_refused(make_cfg, tmp_path):
    run(make_cfg(), str(tmp_path / "a"))
    ckpt = tmp_path / "a" / "checkpoints"
    before = files(ckpt)
    with pytest.raises(CheckpointError, match="belongs to model=mlp, not model=linear.*init_from.checkpoint"):
        run(make_cfg("model=linear", "train.max_steps=30", f"checkpoint.dir={ckpt}"), str(tmp_path / "b"))
    assert files(ckpt) == before


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
def test_changing_the_optimizer_on_resume_is_refused_and_the_checkpoint_kept(make_cfg, tmp_path, optimizer):
    run(make_cfg(), str(tmp_path))  # adam
    ckpt = tmp_path / "checkpoints"
    before = files(ckpt)
    with pytest.raises(CheckpointError, match=r"trained with optimizer._target_=.*AdamOptimizer.*unexpected.*Adam.*"
                                              r"keeps its optimizer.*init_from.checkpoint"):
        run(make_cfg(f"optimizer={optimizer}", "train.max_steps=30"), str(tmp_path))
    assert files(ckpt) == before
    assert run(make_cfg("train.max_steps=30"), str(tmp_path))["start_step"] == 20  # the original command goes on


@pytest.mark.cli
def test_learning_rate_change_is_allowed_and_logged(make_cfg, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    run(make_cfg(), str(tmp_path))
    metrics = run(make_cfg("train.max_steps=30", "optimizer.learning_rate=0.0005", "model.params.dropout_rate=0.1"),
                  str(tmp_path))
    assert metrics["start_step"] == 20
    assert any("graph config changed since the checkpoint: model.params" in r.getMessage() for r in caplog.records)


# --- one writer ------------------------------------------------------------------------------


HOLD_LOCK = """
import fcntl, json, os, socket, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "now"}).encode())
print("held", flush=True)
time.sleep(120)
"""


def hold_lock(path):
    """Another process holding ``path``'s kernel lock, as a running ``train`` does."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_live_lock_refuses_a_second_run(make_cfg, tmp_path):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    holder = hold_lock(ckpt / "train.lock")
    try:
        with pytest.raises(CheckpointLockedError, match=f"in use by pid {holder.pid}"):
            run(make_cfg(), str(tmp_path))
        assert not (ckpt / "model.ckpt-0.index").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_whose_holder_was_killed_is_taken_over(make_cfg, tmp_path, caplog):
    # kill -9 (or a container's PID 1 going away) leaves the file; the kernel lock went with the process.
    caplog.set_level(logging.INFO, logger="trainer")
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    holder = hold_lock(ckpt / "train.lock")
    holder.kill()
    holder.wait()
    assert run(make_cfg(), str(tmp_path))["global_step"] == 20
    assert any(f"stale lock of pid {holder.pid}" in r.getMessage() for r in caplog.records)
    assert (ckpt / "train.lock").read_text() == ""  # released: no holder named


@pytest.mark.parametrize("content", [b"", b"\x00\xffgarbage", b'{"pid": 1, "host": "%s", "started": "x"}'])
def test_a_lock_file_without_a_live_holder_never_blocks(make_cfg, tmp_path, content):
    # A 0-byte file (a full disk), garbage, or PID 1 of this host (always alive): no kernel lock, no block.
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    content = content.replace(b"%s", socket.gethostname().encode())
    (ckpt / "train.lock").write_bytes(content)
    assert run(make_cfg(), str(tmp_path))["global_step"] == 20


def test_another_hosts_lease_is_respected_until_it_lapses(make_cfg, tmp_path, caplog):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    lease = {"pid": 4242, "host": "other-pod", "started": "then", "renewed_at": time.time()}
    (ckpt / "train.lock").write_text(json.dumps(lease))
    with pytest.raises(CheckpointLockedError, match="in use by pid 4242 on other-pod.*renewed its lease"):
        run(make_cfg(), str(tmp_path))
    assert not (ckpt / "model.ckpt-0.index").exists()
    lease["renewed_at"] = time.time() - 600  # the pod is gone: its lease lapsed
    (ckpt / "train.lock").write_text(json.dumps(lease))
    assert run(make_cfg(), str(tmp_path))["global_step"] == 20
    assert "stale lock of pid 4242 on other-pod" in caplog.text


@pytest.mark.slow
def test_rerun_finished_sets_nothing_aside_until_it_holds_the_dir(make_cfg, tmp_path):
    """sweep.rerun_finished moves a finished run's files aside only once the run holds the dir's lock:
    a rerun refused because another live run holds it leaves the finished run as it was."""
    assert run(make_cfg(), str(tmp_path))["global_step"] == 20
    ckpt = tmp_path / "checkpoints"
    lease = {"pid": 4242, "host": "other-pod", "started": "then", "renewed_at": time.time()}
    (ckpt / "train.lock").write_text(json.dumps(lease))
    with pytest.raises(CheckpointLockedError):
        run(make_cfg("sweep.rerun_finished=true"), str(tmp_path))
    assert (ckpt / "model.ckpt-20.index").exists() and not list(tmp_path.glob("*.replaced-*"))
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "finished"
    lease["renewed_at"] = time.time() - 600
    (ckpt / "train.lock").write_text(json.dumps(lease))
    assert run(make_cfg("sweep.rerun_finished=true"), str(tmp_path))["start_step"] == 0
    aside = list(tmp_path.glob("checkpoints.replaced-*"))
    assert len(aside) == 1 and (aside[0] / "model.ckpt-20.index").exists() and not (aside[0] / "train.lock").exists()
    assert list(tmp_path.glob("metrics.json.replaced-*"))


@pytest.mark.cli
def test_the_lock_is_released_when_the_watchdog_ends_the_process(tmp_path):
    # os._exit (the watchdog's exit 5, a cluster task's end) skips every finally: the kernel lock goes anyway.
    from trainer.checkpoints.lock import DirLock

    script = (f"import os, sys; sys.path.insert(0, {os.getcwd()!r}); from trainer.checkpoints.lock import DirLock; "
              f"DirLock({str(tmp_path)!r}).__enter__(); os._exit(5)")
    assert subprocess.run([sys.executable, "-c", script]).returncode == 5
    with DirLock(str(tmp_path)):
        pass


# --- signals and kills: the real command ---------------------------------------------------------


@pytest.mark.cli
@pytest.mark.parametrize("session", BACKENDS)
def test_sigterm_saves_and_exits_143(tmp_path, session):
    args = [TRAIN, *SMALL, f"session={session}", "train.max_steps=100000", "log.every_steps=1",
            "+hooks.slow={_target_: user_hooks.SlowSteps, secs: 0.02}", f"hydra.run.dir={tmp_path}"]
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_for_step(tmp_path, 15, proc)
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert time.time() - sent < 30
    assert proc.returncode == 143, err
    assert "stopped by SIGTERM" in err and "run the same command to resume" in err
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["status"] == "preempted"
    assert latest_step(tmp_path / "checkpoints") == metrics["global_step"] >= 15


@pytest.mark.cli
def test_a_memory_mapped_array_cut_short_under_a_running_job_fails_in_one_line(tmp_path):
    """Truncating a ``.npy`` file the run reads memory-mapped used to kill it with SIGBUS (exit 135,
    no line, no record): now the next batch read fails naming the file, and the record says so."""
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    rng = np.random.RandomState(0)
    for split, count in (("train", 20000), ("test", 100)):
        np.save(arrays / f"x_{split}.npy", rng.rand(count, 64).astype(np.float32))
        np.save(arrays / f"y_{split}.npy", rng.randint(0, 10, count))
    run_dir = tmp_path / "run"
    args = [TRAIN, "data=numpy", f"data.path={arrays}/", "model=mlp", "model.params.hidden_units=[16]",
            "train.max_steps=1000000", "log.every_steps=1", "log.progress=off", "eval.every_steps=0",
            f"hydra.run.dir={run_dir}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_step(run_dir, 20, proc)
    os.truncate(arrays / "x_train.npy", 100_000)
    _, err = proc.communicate(timeout=60)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1, err[-3000:]
    assert f"{arrays}/x_train.npy: the memory-mapped array file was cut to 100000 bytes" in errors[0]
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "failed" and "x_train.npy" in record["error"] and record["global_step"] >= 20


def _tmpfs(mount, size: str):
    """A tmpfs of ``size`` mounted at ``mount`` while the test runs (root only; skipped where mounting
    is not allowed)."""
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs."""
    yield from _tmpfs(tmp_path / "small", "512k")


@pytest.mark.cli
def test_a_full_disk_under_the_run_dir_is_one_line_and_the_rerun_brings_the_record_up_to_date(tmp_path, small_disk):
    """The run dir on a disk that fills up (its checkpoints elsewhere): one line naming the file,
    exit 7, no temporary file left, the checkpoints kept; with space back, the same command resumes
    and its record is up to date."""
    filler = small_disk / "filler"
    filler.write_bytes(b"x" * 416 * 1024)  # 96 KiB left: 1,200 steps of metrics.jsonl and metrics.csv need more
    command = [TRAIN, *SMALL, "train.max_steps=1200", "log.every_steps=1", f"checkpoint.dir={tmp_path / 'ckpt'}",
               f"hydra.run.dir={small_disk / 'run'}"]
    full = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    errors = [line for line in full.stderr.splitlines() if line.startswith("error:")]
    assert full.returncode == 7 and len(errors) == 1, full.stderr[-3000:]
    assert f"cannot write {small_disk / 'run'}/metrics." in errors[0] and "No space left on device" in errors[0]
    assert "Logging error" not in full.stderr and "Traceback" not in full.stderr
    assert not [n for n in os.listdir(small_disk / "run") if n.endswith(".tmp")]
    saved = latest_step(tmp_path / "ckpt")
    assert saved is not None and 0 < saved < 1200
    filler.unlink()
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    record = json.loads((small_disk / "run" / "metrics.json").read_text())
    assert record["status"] == "finished" and record["global_step"] == 1200 and record["start_step"] == saved


FULL_DISK_PROGRAM = '''
import sys

import numpy as np
import tensorflow as tf


def model_fn(features, labels, mode):
    hidden = tf.compat.v1.layers.dense(features["x"], 64, activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(hidden, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x = np.random.RandomState(0).normal(size=(200, 30)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (x[:, 0] > 0).astype(np.int64))).repeat().batch(20)


config = tf.estimator.RunConfig(save_checkpoints_steps=10, keep_checkpoint_max=100)
tf.estimator.Estimator(model_fn, model_dir=sys.argv[1], config=config).train(input_fn, max_steps=60)
'''


@pytest.fixture
def megabyte_disk(tmp_path):
    """A 1 MiB tmpfs, which a test may grow by remounting it."""
    yield from _tmpfs(tmp_path / "megabyte", "1m")


@pytest.mark.cli
def test_a_program_training_into_a_full_disk_names_the_checkpoint_and_resumes(tmp_path, megabyte_disk):
    """A program's model_dir (checkpoints and records together) on a disk that fills up: one line
    about the checkpoint the disk refused (not a later failure to write metrics.json), exit 7, no
    half-written file left; with space back, the same command resumes from the newest intact one."""
    import shutil as sh

    (tmp_path / "program.py").write_text(FULL_DISK_PROGRAM)
    model_dir = megabyte_disk / "model"
    command = [sh.which("train-estimator"), "program.py", str(model_dir)]
    full = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    errors = [line for line in full.stderr.splitlines() if line.startswith("error:")]
    assert full.returncode == 7 and len(errors) == 1, full.stderr[-3000:]
    assert errors[0].startswith(f"error: cannot write a checkpoint in {model_dir} (No space left on device)"), errors
    assert "Traceback" not in full.stderr
    assert not [n for n in os.listdir(model_dir) if ".tmp" in n or "tempstate" in n]
    saved = latest_step(model_dir)
    assert saved is not None and saved < 60
    subprocess.run(["mount", "-o", "remount,size=16m", str(megabyte_disk)], check=True)  # space back
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert latest_step(model_dir) == 60


@pytest.mark.cli
def test_second_ctrl_c_exits_at_once(tmp_path):
    args = [TRAIN, *SMALL, "train.max_steps=100000", "log.every_steps=1", f"hydra.run.dir={tmp_path}",
            "+hooks.slow={_target_: user_hooks.SlowSteps, secs: 2}"]
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_for_step(tmp_path, 1, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    # The second Ctrl-C's own exit (not the first's checkpoint after the 2-second step); how soon it
    # comes is the business of a benchmark, not of a test on a machine that may be loaded.
    assert proc.returncode == 130, err
    assert "interrupted again" in err


@pytest.mark.slow
def test_kill_9_at_random_moments_resumes_bitwise_equal(tmp_path):
    # Three kills at seeded random steps and delays (some land inside a checkpoint save); the longer
    # fault run, alternating the backends, is `python tests/fault_kill9.py --rounds N`.
    from fault_kill9 import kill_and_resume

    result = kill_and_resume(str(tmp_path), kills=3, rng=random.Random(0), session="plain")
    assert len(result["kills"]) == 3 and result["final_start_step"] < 60


# --- NaN guards: the model's state, the gradients, runs that learn nothing --------------------------


@pytest.mark.parametrize("session", BACKENDS)
def test_a_skipped_nan_step_leaves_batch_norm_statistics_alone(make_cfg, tmp_path, session):
    cfg = make_cfg(f"session={session}", "model=model_fn", "model.fn=user_models.batchnorm_nan_at_5",
                   "train.on_nan=skip_step", "checkpoint.every_steps=4")
    assert run(cfg, str(tmp_path))["global_step"] == 20
    for step in (4, 8, 20):
        saved = weights(tmp_path / "checkpoints" / f"model.ckpt-{step}")
        assert all(np.isfinite(v).all() for v in saved.values()), step
    # Steps 1-4 moved the statistics; step 5 (skipped) left them as step 4 did, so steps 6-8 resume from there.
    before, after = weights(tmp_path / "checkpoints" / "model.ckpt-4"), weights(tmp_path / "checkpoints" / "model.ckpt-8")
    assert not np.array_equal(before["bn/moving_mean"], after["bn/moving_mean"])


def test_an_infinite_gradient_with_a_finite_loss_is_caught(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.infinite_gradient_at_5", "checkpoint.every_steps=4")
    with pytest.raises(NanLossError, match=r"at step 6.*checkpoints kept: model.ckpt-0, model.ckpt-4; "
                                           r"the latest, model.ckpt-4, has finite weights"):
        run(cfg, str(tmp_path))
    assert latest_step(tmp_path / "checkpoints") == 4


@pytest.mark.parametrize("session", BACKENDS)
def test_an_infinite_gradient_at_a_save_step_never_reaches_a_checkpoint(make_cfg, tmp_path, session):
    """train.on_nan=stop applies the update without waiting for the gradients' norm: the bad step's
    weights are in the session when the guard stops the run, and must go no further."""
    cfg = make_cfg(f"session={session}", "model=model_fn", "model.fn=user_models.infinite_gradient_at_5",
                   "checkpoint.every_steps=6")
    with pytest.raises(NanLossError, match=r"at step 6.*checkpoints kept: model.ckpt-0;"):
        run(cfg, str(tmp_path))
    ckpt = tmp_path / "checkpoints"
    assert latest_step(ckpt) == 0 and not (ckpt / "model.ckpt-6.index").exists()
    assert all(np.isfinite(v).all() for v in weights(tf.train.latest_checkpoint(str(ckpt))).values())


def _ancestors(op):
    seen, todo = set(), [op]
    while todo:
        op = todo.pop()
        for parent in [t.op for t in op.inputs] + list(op.control_inputs):
            if parent.name not in seen:
                seen.add(parent.name)
                todo.append(parent)
    return seen


@pytest.mark.parametrize("on_nan, waits", [("stop", False), ("skip_step", True)])
def test_the_update_waits_for_the_gradients_norm_only_when_skipping(make_cfg, tmp_path, on_nan, waits):
    """The conditional update (a barrier: no variable's update before the global norm of all
    gradients) is built only where a bad step is skipped in the graph."""
    from trainer.config.rules import prepare
    from trainer.data.sources import load_arrays
    from trainer.model.graph import build_graph
    from trainer.plan import graph_recipe

    cfg = prepare(make_cfg(f"train.on_nan={on_nan}"), str(tmp_path))
    graph = build_graph(graph_recipe(cfg), load_arrays(cfg.data))
    train_op = graph.train_op if isinstance(graph.train_op, tf.Operation) else graph.train_op.op
    assert any(name.startswith("gradient_norm") for name in _ancestors(train_op)) == waits
    assert any(name.startswith("gradient_norm") for name in _ancestors(graph.step_is_finite.op))


def test_a_nan_eval_metric_fails_the_run_and_the_record_stays_json(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.nan_eval_metric")
    with pytest.raises(TrainingError, match="at step 20, eval broken is NaN or Inf: not a result"):
        run(cfg, str(tmp_path))
    assert _strict_json(tmp_path / "metrics.json")["status"] == "failed"
    evals = [r for r in _strict_json(tmp_path / "metrics.jsonl") if r["kind"] == "eval"]
    assert evals and all(r["broken"] is None and r["non_finite"] == ["broken"] for r in evals)


def test_skipping_nan_steps_fails_after_max_skipped_steps_in_a_row(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.always_nan", "train.on_nan=skip_step",
                   "train.max_skipped_steps=5")
    with pytest.raises(NanLossError, match="5 steps in a row up to step 5"):
        run(cfg, str(tmp_path))
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "failed"


def test_a_run_whose_every_step_was_skipped_is_not_finished(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.always_nan", "train.on_nan=skip_step",
                   "train.max_skipped_steps=100", "train.max_steps=8")
    with pytest.raises(NanLossError, match=r"every step of this run \(8\) was NaN or Inf"):
        run(cfg, str(tmp_path))
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "failed"


def test_a_run_that_skipped_most_of_its_steps_fails_and_its_record_stays_json(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.nan_except_every_4th_step", "train.on_nan=skip_step",
                   "train.max_skipped_steps=100", "train.max_steps=12")
    with pytest.raises(NanLossError, match=r"9 of this run's 12 steps were NaN or Inf and skipped"):
        run(cfg, str(tmp_path))
    record = _strict_json(tmp_path / "metrics.json")
    assert record["status"] == "failed" and "objective_value" not in record


@pytest.mark.slow
def test_restore_step_restarts_from_an_earlier_checkpoint_once(make_cfg, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="trainer")
    run(make_cfg("checkpoint.every_steps=5"), str(tmp_path))  # checkpoints 0, 5, 10, 15, 20
    ckpt = tmp_path / "checkpoints"
    before = weights(ckpt / "model.ckpt-20")
    metrics = run(make_cfg("checkpoint.every_steps=5", "checkpoint.restore_step=10"), str(tmp_path))
    assert (metrics["start_step"], metrics["global_step"]) == (10, 20)
    aside = [p for p in ckpt.iterdir() if p.name.startswith("rolled-back-")]
    assert len(aside) == 1 and ckpt_steps(aside[0]) == [15, 20]  # moved, not deleted
    assert all(np.array_equal(before[k], v) for k, v in weights(aside[0] / "model.ckpt-20").items())
    # The same command again: already rolled back once; the run is finished, nothing moves.
    state = files(ckpt)
    again = run(make_cfg("checkpoint.every_steps=5", "checkpoint.restore_step=10"), str(tmp_path))
    assert again["global_step"] == 20 and files(ckpt) == state
    assert "checkpoint.restore_step=10 was applied" in caplog.text


@pytest.mark.slow
def test_restore_step_without_that_checkpoint_is_refused(make_cfg, tmp_path):
    run(make_cfg("checkpoint.every_steps=5"), str(tmp_path))
    state = files(tmp_path / "checkpoints")
    with pytest.raises(ConfigError, match=r"restore_step=7: no intact model.ckpt-7 .* it has steps \[0, 5, 10, 15, 20\]"):
        run(make_cfg("checkpoint.every_steps=5", "checkpoint.restore_step=7"), str(tmp_path))
    assert files(tmp_path / "checkpoints") == state


def test_a_refused_run_calls_none_of_its_hooks_targets(make_cfg, tmp_path):
    """A hook's _target_ is imported and checked before the run, but called only once the run is accepted:
    a run refused by the checkpoint check (another model's dir) has run none of the user's code."""
    run(make_cfg(), str(tmp_path))
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    hook = f"+hooks.x={{_target_: pathlib.Path.unlink, self: {victim}}}"
    with pytest.raises(CheckpointError, match="belongs to model=mlp, not model=linear"):
        run(make_cfg("model=linear", hook), str(tmp_path))
    assert victim.read_text() == "keep me"
    with pytest.raises(ConfigError, match=r"hooks.y: collections.OrderedDict is not a SessionRunHook"):
        run(make_cfg("+hooks.y={_target_: collections.OrderedDict}"), str(tmp_path / "other"))
    assert not (tmp_path / "other" / "checkpoints").exists()
