"""A cluster's scaling on one machine's loopback: ``distributed.strategy=ps`` (one ps task, asynchronous
workers) against ``distributed.strategy=collective`` (all-reduce, no ps) with 1, 2 and 4 workers,
each ``train distributed=local`` at the same global batch (``--global-batch`` split over the
workers), in rotating rounds. Per run: the chief's training rate as examples/s, the final
evaluation's loss, and the bytes each worker moves per step, from the model's parameter count:

- ps: each worker step reads every variable from the ps and sends a gradient for each (2 x P x 4
  bytes, all of it through the ps task);
- collective (ring all-reduce): each worker sends and receives 2 x (N - 1) / N x P x 4 bytes.

On a machine with fewer cores than tasks the workers share the cores, so the rates measure the
runner's overhead per task there, not what N machines would give. ``--model-from JSON`` prints
that instead, from a run's measured figures: the one-worker step time t1 at the global batch G
(from ``collective`` with 1 worker, where no byte leaves the process) and the parameter count P,
for N machines on a W Gbit/s network, each step's compute taken as t1 / N:

- ps (one ps task, asynchronous): every worker step moves 2 x P x 4 bytes through the ps task's
  link, which all N workers share, and waits one round trip: examples/s =
  G / max(t1 / N + 64 P / W + 2 a, N x 64 P / W);
- collective (ring all-reduce): examples/s = G / (t1 / N + 2 (N - 1) / N x 32 P / W + 2 (N - 1) a),
  a = 50 microseconds a hop (an assumed datacenter latency, not measured here).

    python -m bench.scaling --model mlp --workers 1 2 4 --rounds 2 --json scaling.json
    python -m bench.scaling --model-from scaling.json
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile

from bench import train_command, write_results

MODELS = {"mlp": ["model=mlp"], "cnn": ["model=mnist"]}


def run_once(model: str, strategy: str, workers: int, args, workdir: str) -> dict:
    command = [train_command(), *MODELS[model], "data=synthetic", "data.shuffle_buffer=1", "distributed=local",
               f"distributed.strategy={strategy}", f"distributed.num_workers={workers}",
               f"train.batch_size={args.global_batch // workers}", f"train.max_steps={args.steps}",
               "checkpoint.every_steps=null", "eval.every_steps=1000000", "summary.every_steps=null",
               "log.progress=off", f"hydra.run.dir={workdir}"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(command)} failed:\n{proc.stderr[-2000:]}")
    record = json.load(open(os.path.join(workdir, "metrics.json")))
    log = open(os.path.join(workdir, "logs", "worker-0.log")).read()
    params = int(re.search(r"model \S+: ([\d,]+) trainable parameters", log).group(1).replace(",", ""))
    # ps: a global step is one worker's batch; collective: every worker's batch at once
    examples_per_step = args.global_batch // workers if strategy == "ps" else args.global_batch
    moved = 2 * params * 4 if strategy == "ps" else 2 * (workers - 1) / workers * params * 4
    return {"model": model, "strategy": strategy, "workers": workers, "params": params,
            "examples_per_sec": round(record["steps_per_sec"] * examples_per_step, 1),
            "eval_loss": record.get("eval_loss"), "global_step": record["global_step"],
            "bytes_per_worker_step": int(moved), "wall_secs": record.get("wall_secs")}


HOP_SECS = 50e-6


def network_model(path: str, machines=(2, 4, 8, 16), gbits=(10, 25, 100)) -> list:
    """Modelled examples/s of ps and collective on N machines (see the module's docstring)."""
    results = json.load(open(path))
    batch = results["args"]["global_batch"]
    (one,) = [m for m in results["medians"] if (m["strategy"], m["workers"]) == ("collective", 1)]
    t1, params = batch / one["examples_per_sec"], one["params"]
    rows = []
    for gbit in gbits:
        bits_per_sec = gbit * 1e9
        for n in machines:
            ps = batch / max(t1 / n + 64 * params / bits_per_sec + 2 * HOP_SECS, n * 64 * params / bits_per_sec)
            ring = batch / (t1 / n + 2 * (n - 1) / n * 32 * params / bits_per_sec + 2 * (n - 1) * HOP_SECS)
            rows.append({"model": one["model"], "gbit": gbit, "machines": n, "ps_examples_per_sec": round(ps),
                         "collective_examples_per_sec": round(ring), "one_machine": round(batch / t1)})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--strategies", nargs="+", default=["ps", "collective"])
    parser.add_argument("--global-batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--model-from", help="a JSON this script wrote: print the N-machine model from it")
    args = parser.parse_args(argv)
    if args.model_from:
        for row in network_model(args.model_from):
            print(json.dumps(row))
        return
    root = tempfile.mkdtemp()
    runs = []
    try:
        for round_index in range(args.rounds):
            for workers in args.workers:
                for strategy in args.strategies:
                    workdir = os.path.join(root, f"{round_index}-{strategy}-{workers}")
                    runs.append(dict(run_once(args.model, strategy, workers, args, workdir), round=round_index))
                    print(json.dumps(runs[-1]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = []
    for workers in args.workers:
        for strategy in args.strategies:
            mine = [r for r in runs if (r["workers"], r["strategy"]) == (workers, strategy)]
            medians.append({**{k: mine[0][k] for k in ("model", "strategy", "workers", "params",
                                                        "bytes_per_worker_step")},
                            "examples_per_sec": statistics.median(r["examples_per_sec"] for r in mine),
                            "eval_loss": [r["eval_loss"] for r in mine]})
    print(json.dumps(medians, indent=1))
    write_results(args.json, args, medians=medians, runs=runs)


if __name__ == "__main__":
    main()
