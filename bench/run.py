"""Benchmark the runner on this machine: ``python -m bench`` (``--help`` for the knobs).

Contenders run in separate processes, interleaved, round after round; the table gives
medians over the rounds and the ratios the targets in BENCHMARKS.md are stated in:

1. steady-state steps/s of ``train`` (``session=plain`` and ``session=monitored``, default
   hooks on) against a hand-written ``sess.run(train_op)`` loop over the same graph;
2. the same model with tf_keras and Keras 3 ``Model.fit``;
3. time from process start to the end of the first training step, and the runner's phases;
4. the ``.meta`` file and the checkpoint dir after the run;
5. (``--accuracy``) wall time for the CNN to reach 0.91 test accuracy on Fashion-MNIST;
6. the input pipeline alone, in examples/s.
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

from bench import train_command

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _popen_json(cmd, env=None):
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return started, proc


def run_contender(name, args, precision="fp32"):
    cmd = [sys.executable, "-m", "bench.contenders", name, "--model", args.model, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--batch", str(args.batch), "--examples", str(args.examples),
           "--precision", precision]
    started, proc = _popen_json(cmd)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "first_step_at" in result:
        result["first_step_secs"] = result["first_step_at"] - started
    return result


def steady_rate(run_dir, warmup):
    """Steps/s between the first ``metrics.jsonl`` training record at or after ``warmup`` and the last."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if '"train"' in line]
    warm = next(r for r in rows if r["step"] >= warmup)
    last = rows[-1]
    return (last["step"] - warm["step"]) / (last["time"] - warm["time"])


def run_train(session, args, workdir, round_index):
    run_dir = os.path.join(workdir, f"{session}-{round_index}")
    total = args.warmup + args.steps
    cmd = [train_command(), f"model={args.model}", "data=synthetic",
           f"data.train_examples={args.examples}", "data.test_examples=1000", f"train.batch_size={args.batch}",
           f"train.max_steps={total}", f"session={session}", "device=cpu", "eval.every_steps=0",
           f"log.every_steps={args.warmup}", "log.progress=lines", f"hydra.run.dir={run_dir}"]
    started, _ = _popen_json(cmd)
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    ckpt = metrics["checkpoint_dir"]
    meta = max((os.path.join(ckpt, n) for n in os.listdir(ckpt) if n.endswith(".meta")), key=os.path.getmtime)
    return {
        "steps_per_sec": steady_rate(run_dir, args.warmup),
        "first_step_secs": metrics["timings"]["first_step_at"] - started,
        "timings": metrics["timings"],
        "meta_bytes": os.path.getsize(meta),
        "ckpt_dir_bytes": sum(os.path.getsize(os.path.join(ckpt, n)) for n in os.listdir(ckpt)
                              if os.path.isfile(os.path.join(ckpt, n))),
    }


def time_to_accuracy(target, workdir, max_steps):
    """Wall time and step at which the CNN first evaluates at ``target`` on Fashion-MNIST."""
    run_dir = os.path.join(workdir, "accuracy")
    cmd = [train_command(), "model=mnist", "data=fashion_mnist", "session=monitored", "device=cpu",
           f"train.max_steps={max_steps}", "eval.every_steps=250", "log.progress=lines", f"hydra.run.dir={run_dir}"]
    started, _ = _popen_json(cmd)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [json.loads(line) for line in f if '"eval"' in line]
    hit = next((r for r in evals if r["accuracy"] >= target), None)
    best = max(evals, key=lambda r: r["accuracy"])
    return {"target": target, "reached": hit is not None, "step": hit["step"] if hit else None,
            "secs": hit["time"] - started if hit else None, "best_accuracy": best["accuracy"], "best_step": best["step"],
            "command": " ".join(cmd[:-1])}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mnist", help="mnist (the layers-tutorial CNN) or mlp")
    parser.add_argument("--steps", type=int, default=300, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--examples", type=int, default=10000, help="synthetic training examples")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the table shows medians")
    parser.add_argument("--skip-keras", action="store_true", help="leave out the Model.fit contenders")
    parser.add_argument("--accuracy", action="store_true", help="also time the CNN to 0.91 on Fashion-MNIST")
    parser.add_argument("--accuracy-max-steps", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="a few steps of a small model: checks the script runs")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.steps, args.warmup, args.rounds, args.examples = "mlp", 10, 5, 1, 500

    contenders = ["hand_loop", "train:plain", "train:monitored"] + ([] if args.skip_keras else ["tf_keras_fit", "keras3_fit"])
    results = {c: [] for c in contenders + ["input_pipeline"]}
    workdir = tempfile.mkdtemp(prefix="bench-")
    try:
        for round_index in range(args.rounds):
            order = contenders[round_index % len(contenders):] + contenders[: round_index % len(contenders)]
            for name in order + ["input_pipeline"]:
                if name.startswith("train:"):
                    result = run_train(name.split(":")[1], args, workdir, round_index)
                else:
                    result = run_contender(name, args)
                results[name].append(result)
                print(f"round {round_index + 1}/{args.rounds} {name}: "
                      + ", ".join(f"{k} {v:.3f}" for k, v in result.items() if isinstance(v, float)), flush=True)
        accuracy = time_to_accuracy(0.91, workdir, args.accuracy_max_steps) if args.accuracy else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = summarize(results, args, accuracy)
    print(summary["table"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results, "accuracy": accuracy, "summary": summary["numbers"]}, f,
                      indent=1)


def _median(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def summarize(results, args, accuracy):
    rate = {name: _median(rows, "steps_per_sec") for name, rows in results.items() if name != "input_pipeline"}
    first = {name: _median(rows, "first_step_secs") for name, rows in results.items() if name != "input_pipeline"}
    hand = rate["hand_loop"]
    n = {"steps_per_sec": rate, "first_step_secs": first}
    lines = [f"model={args.model} batch={args.batch} timed steps={args.steps} (after {args.warmup}) rounds={args.rounds}",
             "", "| contender | steps/s (median) | vs hand loop | time to first step (s) |", "| --- | --- | --- | --- |"]
    for name in rate:
        lines.append(f"| {name} | {rate[name]:.2f} | {rate[name] / hand:.3f}x | {first[name]:.2f} |")
    lines.append("")
    for name in ("tf_keras_fit", "keras3_fit"):
        if name in rate:
            for backend in ("train:plain", "train:monitored"):
                ratio = rate[backend] / rate[name]
                n[f"{backend}/{name}"] = ratio
                lines.append(f"- {backend} / {name}: {ratio:.3f}x steps/s")
    for backend in ("train:plain", "train:monitored"):
        n[f"{backend}/hand_loop"] = rate[backend] / hand
    phases = {}
    for key in ("tensorflow_import", "data", "graph", "session"):
        phases[key] = statistics.median(r["timings"][key] for b in ("train:plain", "train:monitored") for r in results[b])
    n["phases"] = phases
    lines.append("- runner phases (median s): " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    meta = _median(results["train:monitored"], "meta_bytes")
    ckpt = _median(results["train:monitored"], "ckpt_dir_bytes")
    n["meta_bytes"], n["ckpt_dir_bytes"] = meta, ckpt
    lines.append(f"- .meta file: {meta / 1e6:.3f} MB; checkpoint dir after {args.warmup + args.steps} steps: {ckpt / 1e6:.1f} MB")
    pipeline = _median(results["input_pipeline"], "examples_per_sec")
    training = max(rate["train:plain"], rate["train:monitored"]) * args.batch
    n["input_examples_per_sec"], n["input_vs_training"] = pipeline, pipeline / training
    lines.append(f"- input pipeline alone: {pipeline:.0f} examples/s = {pipeline / training:.1f}x the training rate ({training:.0f} examples/s)")
    if accuracy:
        n["accuracy"] = accuracy
        if accuracy["reached"]:
            lines.append(f"- time to {accuracy['target']} test accuracy on Fashion-MNIST: {accuracy['secs']:.0f} s "
                         f"(step {accuracy['step']}); `{accuracy['command']}`")
        else:
            lines.append(f"- {accuracy['target']} not reached in {args.accuracy_max_steps} steps: best "
                         f"{accuracy['best_accuracy']:.4f} at step {accuracy['best_step']}")
    return {"table": "\n".join(lines), "numbers": n}


if __name__ == "__main__":
    main()
