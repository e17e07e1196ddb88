"""Time from process start to the first training step of ``train``, for two source trees of this
project run alternately (A, B, A, B, ...): the change between two commits, interleaved.

    git worktree add /tmp/before <commit>
    python -m bench.startup --trees /tmp/before . --rounds 5 --json startup.json

Each run is a fresh ``train model=mnist data=fashion_mnist train.max_steps=3`` in a new dir, with
``PYTHONPATH`` set to the tree (so its ``trainer`` package is the one imported); the first step's
time comes from the run's ``metrics.json`` (``timings.first_step_at``), as in ``bench.run``.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from bench import write_results

COMMAND = ["model=mnist", "data=fashion_mnist", "train.max_steps=3", "log.progress=off", "eval.every_steps=null",
           "hooks=minimal"]


def first_step_secs(tree: str, workdir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    started = time.time()
    proc = subprocess.run([sys.executable, "-c", "from trainer.cli import main; main()", *COMMAND,
                           f"hydra.run.dir={workdir}"], cwd=workdir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"train failed in {tree}: {proc.stderr[-2000:]}")
    with open(os.path.join(workdir, "metrics.json")) as f:
        timings = json.load(f)["timings"]
    return {"first_step_secs": timings["first_step_at"] - started, "data_secs": timings.get("data")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup")
    parser.add_argument("--trees", nargs=2, required=True, help="two source trees: before and after")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    samples = {tree: [] for tree in args.trees}
    root = tempfile.mkdtemp()
    try:
        for round_index in range(args.rounds):
            for tree in args.trees:
                workdir = os.path.join(root, f"{round_index}-{len(samples[tree])}-{os.path.basename(os.path.abspath(tree))}")
                os.makedirs(workdir)
                samples[tree].append(first_step_secs(tree, workdir))
                print(json.dumps({"round": round_index, "tree": tree, **samples[tree][-1]}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = {tree: {k: round(statistics.median(s[k] for s in rows), 3) for k in rows[0]}
               for tree, rows in samples.items()}
    print(json.dumps(medians, indent=1))
    write_results(args.json, args, medians=medians, samples=samples)


if __name__ == "__main__":
    main()
