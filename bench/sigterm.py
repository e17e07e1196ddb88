"""How long ``train`` takes to exit after SIGTERM, mid-run (Kubernetes gives 30 s by default).

Each try starts ``train`` on a fresh run dir, waits until it has trained for a random time (after
the first step and at least one evaluation), sends SIGTERM, and measures the time to exit. It
reports every try and the worst, and checks each run exited as preempted with a checkpoint.

    python -m bench.sigterm --tries 20 --json sigterm.json
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

from bench import write_results

TRAIN = [sys.executable, "-c", "from trainer.cli import main; main()"]


def one_try(workdir: str, train_secs: float, args) -> dict:
    command = [*TRAIN, f"hydra.run.dir={workdir}", f"model={args.model}", f"data={args.data}", "log.progress=lines",
               "log.every_steps=10", "train.max_steps=1000000", f"eval.every_steps={args.eval_every}"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = os.path.join(workdir, "metrics.jsonl")
    deadline = time.time() + 300
    while not os.path.exists(metrics):  # the first logged step
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"train ended before its first step: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    time.sleep(train_secs)
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        return {"train_secs": train_secs, "exit_secs": None, "returncode": None}
    exit_secs = time.time() - sent
    with open(os.path.join(workdir, "metrics.json")) as f:
        record = json.load(f)
    return {"train_secs": round(train_secs, 1), "exit_secs": round(exit_secs, 2), "returncode": proc.returncode,
            "status": record.get("status"), "global_step": record.get("global_step"),
            "last_line": (err.strip().splitlines() or [""])[-1][:200]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sigterm")
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--model", default="mnist")
    parser.add_argument("--data", default="synthetic")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--min-secs", type=float, default=5.0)
    parser.add_argument("--max-secs", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the tries here")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    tries = []
    for i in range(args.tries):
        with tempfile.TemporaryDirectory() as workdir:
            result = one_try(workdir, rng.uniform(args.min_secs, args.max_secs), args)
        tries.append(result)
        print(json.dumps(dict(result, attempt=i + 1)), flush=True)
    exits = [t["exit_secs"] for t in tries if t["exit_secs"] is not None]
    summary = {"tries": len(tries), "worst_exit_secs": max(exits) if exits else None,
               "median_exit_secs": sorted(exits)[len(exits) // 2] if exits else None,
               "hung": sum(t["exit_secs"] is None for t in tries),
               "not_preempted": sum(t.get("status") != "preempted" for t in tries)}
    print(json.dumps(summary), flush=True)
    write_results(args.json, args, summary=summary, tries=tries)


if __name__ == "__main__":
    main()
