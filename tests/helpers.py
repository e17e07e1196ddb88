"""What the tests share: reading checkpoints, dirs and metrics, and waiting on a running ``train``."""

import glob
import hashlib
import json
import os
import re
import shutil
import sys
import time

import tensorflow as tf

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
TRAIN = shutil.which("train") or os.path.join(os.path.dirname(sys.executable), "train")


def weights(path):
    """Every variable of checkpoint ``path`` (a prefix, or a dir: its latest checkpoint)."""
    path = str(path)
    if os.path.isdir(path):
        path = tf.train.latest_checkpoint(path)
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def latest_step(ckpt_dir):
    path = tf.train.latest_checkpoint(str(ckpt_dir))
    return int(tf.train.load_variable(path, "global_step")) if path else None


def ckpt_steps(ckpt_dir):
    """The steps of the ``model.ckpt-N`` checkpoints in ``ckpt_dir``, ascending."""
    return sorted(int(m.group(1)) for p in glob.glob(os.path.join(str(ckpt_dir), "model.ckpt-*.index"))
                  if (m := re.search(r"ckpt-(\d+)\.index$", p)))


def dir_state(path):
    """Every file under ``path`` with its content digest: equal states mean nothing was written."""
    state = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                state[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return state


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def wait_for_step(run_dir, step, proc=None, timeout=120):
    """Wait until ``run_dir/metrics.jsonl`` records ``step`` (``proc``, if given, must stay alive)."""
    deadline = time.time() + timeout
    path = os.path.join(str(run_dir), "metrics.jsonl")
    while time.time() < deadline:
        if proc is not None:
            assert proc.poll() is None, proc.communicate()
        if os.path.exists(path):
            steps = [row.get("step", 0) for row in read_jsonl(path)]
            if steps and max(steps) >= step:
                return max(steps)
        time.sleep(0.05)
    raise AssertionError(f"step {step} not reached in {path}")
