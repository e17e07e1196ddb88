"""The ``device`` keys against plain fp32: steady-state steps/s of ``train`` for each variant,
interleaved in rounds (each run its own process), and the eval accuracy after the same steps.

    python -m bench.device --rounds 3 --json device.json
    python -m bench.device --variants fp32 bf16 --model mnist   # bf16: only where the rewrite runs

Variants: fp32 (the default), bf16 (device.precision=bf16), xla (device.xla=true), replicas2
(device.replicas=2 on two logical CPUs, or two GPUs with --device gpu), fp16 (GPU only).
Contenders on the same synthetic data and batch (``bench.contenders``), in the same rounds:
hand_loop:fp32 and hand_loop:bf16 (a bare ``sess.run(train_op)`` loop over the runner's graph,
without and with the bfloat16 rewrite), tf_keras_fit:fp32|bf16 and keras3_fit:fp32|bf16
(``Model.fit``, bf16 under the ``mixed_bfloat16`` policy).

    python -m bench.device --variants fp32 bf16 hand_loop:fp32 hand_loop:bf16 tf_keras_fit:bf16 keras3_fit:bf16
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
from bench.run import run_contender, steady_rate

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = {
    "fp32": [],
    "bf16": ["device.precision=bf16"],
    "fp16": ["device.precision=fp16"],
    "xla": ["device.xla=true"],
    "replicas2": ["device.replicas=2"],
}
CONTENDERS = [f"{name}:{precision}" for name in ("hand_loop", "tf_keras_fit", "keras3_fit") for precision in ("fp32", "bf16")]


def run_variant(name, args, workdir, round_index):
    if name in CONTENDERS:
        contender, precision = name.split(":")
        try:
            return run_contender(contender, args, precision)
        except RuntimeError as e:
            return {"error": str(e).strip().splitlines()[-1]}
    run_dir = os.path.join(workdir, f"{name}-{round_index}")
    total = args.warmup + args.steps
    cmd = [train_command(), f"model={args.model}", f"data={args.data}", f"train.batch_size={args.batch}",
           f"train.max_steps={total}", "session=monitored", f"device={args.device}", "eval.every_steps=0",
           f"log.every_steps={args.warmup}", "log.progress=lines", "train.seed=0", f"hydra.run.dir={run_dir}",
           *VARIANTS[name]]
    if args.data == "synthetic":
        cmd += [f"data.train_examples={args.examples}", "data.test_examples=1000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    return {"steps_per_sec": steady_rate(run_dir, args.warmup),
            "eval_accuracy": metrics.get("eval_accuracy"), "loss": metrics.get("loss"),
            "precision": metrics.get("precision")}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.device", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=["fp32", "xla", "replicas2", "bf16"], choices=sorted(VARIANTS) + CONTENDERS)
    parser.add_argument("--model", default="mnist")
    parser.add_argument("--data", default="synthetic")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--examples", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.data != "synthetic" and set(args.variants) & set(CONTENDERS):
        parser.error("the contenders train on synthetic data only: leave them out or use --data synthetic")
    results = {v: [] for v in args.variants}
    workdir = tempfile.mkdtemp(prefix="bench-device-")
    try:
        for round_index in range(args.rounds):
            shift = round_index % len(args.variants)
            for name in args.variants[shift:] + args.variants[:shift]:
                result = run_variant(name, args, workdir, round_index)
                results[name].append(result)
                print(f"round {round_index + 1}/{args.rounds} {name}: {json.dumps(result)}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base = [r["steps_per_sec"] for r in results[args.variants[0]] if "steps_per_sec" in r]
    summary = {}
    for name, rows in results.items():
        rates = [r["steps_per_sec"] for r in rows if "steps_per_sec" in r]
        if not rates:
            summary[name] = {"error": rows[0].get("error")}
            continue
        summary[name] = {"median_steps_per_sec": round(statistics.median(rates), 2),
                         "ratio_to_" + args.variants[0]: round(statistics.median(rates) / statistics.median(base), 3)
                         if base else None,
                         "eval_accuracy": [r.get("eval_accuracy") for r in rows]}
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "date": time.strftime("%Y-%m-%d"), "rounds": results, "summary": summary},
                      f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
