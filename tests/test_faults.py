"""The fault matrix: a signal or a kill in each phase of a run, on each backend where their paths
differ, then the same command again.

Each row asserts: the process ends within 5 s of the signal with the status of that signal (143
SIGTERM, 130 SIGINT; killed by SIGKILL), one ``error:`` line for a signal it handled, a
``metrics.json`` that is valid JSON (``preempted`` at the step of the newest checkpoint where a
step ran), every checkpoint the ``checkpoint`` file lists intact, and the same command run again
finishing from there. Other faults (a full disk, a file cut under the run, a second writer, a
damaged record) have their own tests, listed in RELIABILITY.md with this matrix.
"""

import json
import os
import signal
import subprocess
import time

import pytest
import tensorflow as tf

from helpers import TESTS_DIR, TRAIN, wait_for_step

pytestmark = [pytest.mark.cli, pytest.mark.slow]

BASE = ["data=synthetic", "data.train_examples=512", "data.test_examples=64", "model=mlp",
        "model.params.hidden_units=[16]", "train.batch_size=32", "log.progress=off", "log.every_steps=1",
        "train.max_steps=40"]
SLOW = "+hooks.slow={_target_: user_hooks.SlowSteps, secs: 0.05}"
ENDLESS_EVAL = ["log.progress=off", "model=model_fn", "model.fn=user_models.step_by_three", "data=input_fn",
                "data.train_fn=user_models.train_input", "data.eval_fn=user_models.endless_eval_input",
                "eval.every_steps=6", "train.max_steps=30"]


def _wait_for(path, proc, timeout=120):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.02)


def _phase(name, run_dir):
    """(the run's overrides, what to wait for before the fault, the rerun's overrides: the same run
    without what slowed it down)."""
    if name == "start-up":
        return [*BASE, SLOW], lambda proc: time.sleep(0.4), BASE
    if name == "step":
        return [*BASE, SLOW], lambda proc: wait_for_step(run_dir, 5, proc), BASE
    if name == "checkpoint save":
        marker = run_dir.parent / "saving"
        listener = f"+checkpoint.listeners.slow={{_target_: user_hooks.SlowSave, marker: '{marker}', secs: 2.0}}"
        saves = "checkpoint.every_steps=10"
        return [*BASE, SLOW, saves, listener], lambda proc: _wait_for(marker, proc), [*BASE, saves]
    if name == "a step that does not end":
        hang = ["+hooks.hang={_target_: user_hooks.HangingStep, step: 5}", "train.stop_grace_secs=1"]
        return [*BASE, *hang], lambda proc: (wait_for_step(run_dir, 4, proc), time.sleep(1.0)), BASE
    if name == "evaluation":
        def begun(proc):
            _wait_for(run_dir / "checkpoints" / "model.ckpt-0.index", proc)
            time.sleep(2.0)  # step 6's evaluation has begun, and never ends by itself
        return ENDLESS_EVAL, begun, [*ENDLESS_EVAL, "eval.steps=2"]
    raise ValueError(name)


ROWS = [(phase, fault, "monitored") for phase in ("start-up", "step", "checkpoint save", "evaluation")
        for fault in ("SIGTERM", "SIGINT", "SIGKILL")]
ROWS += [(phase, "SIGTERM", "plain") for phase in ("step", "checkpoint save", "evaluation")]
ROWS += [("a step that does not end", "SIGTERM", "monitored"), ("a step that does not end", "SIGINT", "plain")]


def _intact(ckpt_dir):
    """Every checkpoint the ``checkpoint`` file lists loads; returns the newest one's step."""
    state = tf.train.get_checkpoint_state(str(ckpt_dir))
    if state is None:
        return None
    for path in state.all_model_checkpoint_paths:
        tf.train.load_checkpoint(path).get_tensor("global_step")
    return int(tf.train.load_variable(state.model_checkpoint_path, "global_step"))


@pytest.mark.parametrize("phase,fault,session", ROWS, ids=[f"{p}-{f}-{s}" for p, f, s in ROWS])
def test_fault(tmp_path, phase, fault, session):
    run_dir = tmp_path / "run"
    overrides, ready, rerun = _phase(phase, run_dir)
    command = [TRAIN, *overrides, f"session={session}", f"hydra.run.dir={run_dir}"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready(proc)
        sent = time.time()
        proc.send_signal(getattr(signal, fault))
        _, err = proc.communicate(timeout=60)
        took = time.time() - sent
    finally:
        proc.kill()
    assert took < 5, f"{took:.1f}s after {fault}\n{err[-2000:]}"
    number = getattr(signal, fault).value
    if fault == "SIGKILL":
        assert proc.returncode == -number
    else:
        assert proc.returncode in (128 + number, -number), err[-3000:]
        handled = proc.returncode == 128 + number
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == (1 if handled else 0), err[-3000:]
    newest = _intact(run_dir / "checkpoints")
    if (run_dir / "metrics.json").exists():
        record = json.loads((run_dir / "metrics.json").read_text())  # valid JSON, whatever the moment
        if record.get("status") == "preempted":
            assert record["global_step"] == newest, (record, newest)
    again = subprocess.run([TRAIN, *rerun, f"session={session}", f"hydra.run.dir={run_dir}"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "finished" and record["start_step"] == (newest or 0), record
    print(f"\n| {phase} | {fault} | {session} | {proc.returncode} | {took:.2f} | {newest} | {record['start_step']} |")
