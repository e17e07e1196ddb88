"""kill -9 at random moments, resume, and compare the final weights bitwise with a run never killed.

Each round trains the same deterministic run to ``MAX_STEPS`` once straight through, then again
while killing it with SIGKILL at random moments (a random step, then a random delay of up to a
step and a half, so kills also land inside checkpoint saves), resuming each time with the same
command. The finished weights must equal the straight run's, bit for bit, under both backends.

    python tests/fault_kill9.py --rounds 10 --kills 4 --seed 1     # a longer fault run
    (tests/test_reliability.py runs one round of it)
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpers import TESTS_DIR, TRAIN, wait_for_step, weights  # noqa: E402

MAX_STEPS = 60
COMMON = ["data=synthetic", "data.train_examples=512", "data.test_examples=64", "model=mlp",
          "model.params.hidden_units=[16]", "model.params.dropout_rate=0.3", "train.batch_size=32",
          "log.progress=off", "eval.every_steps=0", f"train.max_steps={MAX_STEPS}", "train.deterministic=true",
          "checkpoint.every_steps=5", "log.every_steps=1", "optimizer=momentum"]
ENV = dict(os.environ, PYTHONPATH=TESTS_DIR)


def _train(run_dir, *extra):
    return [TRAIN, *COMMON, f"hydra.run.dir={run_dir}", *extra]


def kill_and_resume(workdir: str, kills: int, rng: random.Random, session: str = "monitored") -> dict:
    """One round; returns what was done. Raises AssertionError when the weights differ."""
    straight, killed = os.path.join(workdir, "straight"), os.path.join(workdir, "killed")
    done = subprocess.run(_train(straight, f"session={session}"), capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    steps = sorted(rng.sample(range(2, MAX_STEPS - 5), kills))
    log = []
    for step in steps:
        delay = rng.uniform(0, 0.075)  # SlowSteps makes a step at least 0.05 s
        proc = subprocess.Popen(_train(killed, f"session={session}",
                                       "+hooks.slow={_target_: user_hooks.SlowSteps, secs: 0.05}"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
        try:
            reached = wait_for_step(killed, step, proc)
        except AssertionError:  # it resumed past this step already, or ended: kill wherever it is
            reached = None
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        log.append({"kill_at_step": step, "reached": reached, "delay": round(delay, 3)})
        metrics = os.path.join(killed, "metrics.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)  # the next run's progress is watched afresh
    final = subprocess.run(_train(killed, f"session={session}"), capture_output=True, text=True, env=ENV)
    assert final.returncode == 0, final.stderr
    with open(os.path.join(killed, "metrics.json")) as f:
        record = json.load(f)
    assert record["global_step"] == MAX_STEPS, record
    a = weights(os.path.join(straight, "checkpoints"))
    b = weights(os.path.join(killed, "checkpoints"))
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=f"{name} after kills {log}")
    return {"session": session, "kills": log, "final_start_step": record["start_step"]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python tests/fault_kill9.py")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    for i in range(args.rounds):
        session = ("plain", "monitored")[i % 2]
        with tempfile.TemporaryDirectory() as workdir:
            result = kill_and_resume(workdir, args.kills, rng, session)
        print(json.dumps(dict(result, round=i + 1, equal=True)), flush=True)


if __name__ == "__main__":
    main()
