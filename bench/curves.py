"""Accuracy against wall time for whole ``train`` commands, one after the other:
``python -m bench.curves --target 0.92 --run NAME "ARGS" [--run NAME "ARGS" ...] --json out.json``.

Each ARGS is a ``train`` command line; leading ``KEY=VALUE`` words in capitals are environment
variables (``TF_ENABLE_ONEDNN_OPTS=0 model=mnist data=fashion_mnist``). Every run starts in a
fresh run dir; its curve is each evaluation's accuracy with the seconds since the process
started (read from ``metrics.jsonl``), and the first evaluation at or above ``--target`` is the
time to that accuracy. Nothing else should run on the machine meanwhile.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from bench import train_command

_ENV = re.compile(r"^[A-Z][A-Z0-9_]*=")


def curve_of(run_dir: str, started: float) -> dict:
    """A finished run dir's evaluations and first step, in seconds since ``started``."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [json.loads(line) for line in f if '"eval"' in line]
    with open(os.path.join(run_dir, "metrics.json")) as f:
        record = json.load(f)
    return {
        "first_step_secs": round(record["timings"]["first_step_at"] - started, 2),
        "wall_secs": round(record["wall_secs"], 1) if "wall_secs" in record else None,
        "onednn": record.get("onednn"),
        "curve": [{"step": r["step"], "accuracy": round(r["accuracy"], 4), "secs": round(r["time"] - started, 1)}
                  for r in evals],
    }


def reached(curve: list, target: float):
    return next((point for point in curve if point["accuracy"] >= target), None)


def run_one(name: str, args: str, workdir: str) -> dict:
    words = args.split()
    env = dict(os.environ, **dict(w.split("=", 1) for w in words if _ENV.match(w)))
    overrides = [w for w in words if not _ENV.match(w)]
    run_dir = os.path.join(workdir, name)
    cmd = [train_command(), *overrides, f"hydra.run.dir={run_dir}"]
    started = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: train failed:\n{proc.stderr[-3000:]}")
    return {"command": args, **curve_of(run_dir, started), "process_secs": round(time.time() - started, 1)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.curves", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", nargs=2, action="append", metavar=("NAME", "ARGS"), required=True)
    parser.add_argument("--target", type=float, default=0.92)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="curves-")
    runs = {}
    try:
        for name, command in args.run:
            runs[name] = run_one(name, command, workdir)
            hit = reached(runs[name]["curve"], args.target)
            runs[name]["reached"] = hit
            last = runs[name]["curve"][-1]
            print(f"{name}: first step {runs[name]['first_step_secs']} s; last eval {last['accuracy']} at step "
                  f"{last['step']}, {last['secs']} s; {args.target} "
                  + (f"at step {hit['step']}, {hit['secs']} s" if hit else "not reached"), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "target": args.target, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
