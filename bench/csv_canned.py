"""A canned model fed by the CSV source against the same model fed from memory: ``train
model=census_wide_deep`` (and ``model=dnn_classifier`` with the same deep columns) on a census-style
table of ``--rows`` rows, ``data=csv`` (streamed and parsed a batch at a time) against ``data=input_fn``
(``bench/census_memory.py``: the table read once into numpy, ``from_tensor_slices``, cached). The
real ``train`` command, alternating, ``--rounds`` times; steps/s is the mean of the logged rates after
the first log interval.

    python -m bench.csv_canned --rounds 3 --json bench/results/csv-canned-2026-12-06.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench.census import write_csv

MODELS = {"census_wide_deep": [], "dnn_classifier": [
    "model.params.hidden_units=[100,50]",
    "model.params.feature_columns=[{numeric: age}, {numeric: education_num}, {numeric: hours_per_week}, "
    "{categorical: workclass, vocabulary: [Private, Self-emp-not-inc, Self-emp-inc, Federal-gov, Local-gov, State-gov]}, "
    "{indicator: workclass}, {categorical: occupation, hash_buckets: 1000}, {embedding: occupation, dimension: 8}]"]}


def _run(work: str, model: str, source: str, data, steps: int) -> float:
    run_dir = tempfile.mkdtemp(dir=work)
    inputs = (["data=csv", f"data.train_files={data[0]}", f"data.eval_files={data[1]}", "data.label_key=income_bracket"]
              if source == "csv" else
              ["data=input_fn", "data.train_fn=bench.census_memory.train_input_fn",
               "data.eval_fn=bench.census_memory.eval_input_fn", "model.params.num_classes=2"])
    env = dict(os.environ, CENSUS_TRAIN=data[0], CENSUS_TEST=data[1])
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "train"), f"model={model}", *MODELS[model],
                           *inputs, f"train.max_steps={steps}", "train.batch_size=64", "log.every_steps=250",
                           "eval.every_steps=null", "log.progress=off", f"hydra.run.dir={run_dir}"],
                          capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode:
        raise SystemExit(f"{model} {source}: {done.stderr.strip().splitlines()[-1]}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    rates = [r["steps_per_sec"] for r in records if r.get("kind") == "train" and "steps_per_sec" in r][1:]
    return statistics.mean(rates)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--rows", type=int, default=32000)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="csv-canned-")
    data = (write_csv(os.path.join(work, "train.csv"), args.rows, 0),
            write_csv(os.path.join(work, "test.csv"), args.rows // 4, 1))
    result = {"rows": args.rows, "steps": args.steps, "models": {}}
    for model in MODELS:
        rates = {"csv": [], "memory": []}
        for r in range(args.rounds):
            for source in (("csv", "memory") if r % 2 == 0 else ("memory", "csv")):
                rates[source].append(_run(work, model, source, data, args.steps))
            print(model, r, {k: round(v[-1], 1) for k, v in rates.items()}, flush=True)
        medians = {k: statistics.median(v) for k, v in rates.items()}
        result["models"][model] = {"steps_per_sec": rates, "median": medians,
                                   "csv_over_memory": medians["csv"] / medians["memory"]}
        print(model, json.dumps(result["models"][model]["median"]), round(medians["csv"] / medians["memory"], 3))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
