"""Estimator's canned models on real Estimator (TensorFlow 2.15 with tensorflow-estimator 2.15, in a side
environment) and on ``trainer.estimator`` (the same program through ``train-estimator``, unedited):
``bench/census_program.py`` on a generated census-style table (``bench/census.py``).

    python3 -m venv ../est215 && ../est215/bin/pip install tensorflow-cpu==2.15.1 tensorflow-estimator==2.15.0
    python -m bench.canned_compare --reference-python ../est215/bin/python --rounds 3 --json out.json

``--runner-old-tf PYTHON`` adds a third side: this tree's runner on the reference's TensorFlow
(``python3 -m venv ../tf215r && ../tf215r/bin/pip install tensorflow-cpu==2.15.1 "tf-keras~=2.15.0"
hydra-core omegaconf``), which tells TensorFlow's share of a speed difference from the runner's.

For each model type and round (sides in alternating order, so drift of the machine hits both): the eval
metrics after the same steps from the same seed (both sides draw the same initial weights here, so the
metrics should agree to float noise), and the training steps/s after the first 10 steps. Then each side
trains 50 more steps in the other's model_dir and evaluates it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench import add_reference_python, check_reference_python
from bench.census import write_csv

SIDES = ("estimator", "trainer")
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "census_program.py")
MODELS = ("wide", "deep", "wide_deep", "wide_deep_regressor")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _side(name: str, reference_python: str, runner_old_tf: str = None):
    if name == "estimator":
        return [reference_python, PROGRAM]
    if name == "trainer_old_tf":  # this tree's runner on another TensorFlow: which side of a gap is TensorFlow's
        return ["env", f"PYTHONPATH={ROOT}", runner_old_tf, "-m", "trainer.estimator.launch", PROGRAM]
    return [sys.executable, "-m", "trainer.estimator.launch", PROGRAM]


def _run(command, model_dir: str, model_type: str, data, steps: int, export: bool = False, batch_size: int = 64) -> dict:
    report = model_dir.rstrip("/") + f"-{steps}.json"
    done = subprocess.run([*command, f"--model_dir={model_dir}", f"--model_type={model_type}", f"--steps={steps}",
                           f"--batch_size={batch_size}",
                           f"--train_data={data[0]}", f"--test_data={data[1]}", f"--report={report}",
                           f"--export={'true' if export else 'false'}"],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    with open(report) as f:
        return json.load(f)


def _agreement(a: dict, b: dict) -> dict:
    """Largest metric difference, and whether the variables (names and shapes) are the same."""
    if "failed" in a or "failed" in b:
        return {"failed": a.get("failed") or b.get("failed")}
    return {"max_metric_difference": max(abs(a["metrics"][k] - b["metrics"][k]) for k in a["metrics"]),
            "same_variables": a["variables"] == b["variables"],
            "same_prediction_keys": a["predictions"] == b["predictions"]}


def measure(args) -> dict:
    work = tempfile.mkdtemp(prefix="canned-compare-")
    data = (write_csv(os.path.join(work, "train.csv"), args.rows, 0),
            write_csv(os.path.join(work, "test.csv"), args.rows // 4, 1))
    results = {}
    all_sides = SIDES + (("trainer_old_tf",) if args.runner_old_tf else ())
    for model_type in args.models:
        rounds = []
        for r in range(args.rounds):
            sides = all_sides if r % 2 == 0 else all_sides[::-1]
            runs = {side: _run(_side(side, args.reference_python, args.runner_old_tf),
                               os.path.join(work, f"{model_type}-{side}-{r}"),
                               model_type, data, args.steps, batch_size=args.batch_size) for side in sides}
            rounds.append({"runs": runs, "agreement": _agreement(runs["estimator"], runs["trainer"])})
            print(model_type, r, json.dumps(rounds[-1]["agreement"]),
                  {s: runs[s].get("steps_per_sec") for s in all_sides}, flush=True)
        cross = {f"{reader} resumes {writer}'s model_dir": _run(_side(reader, args.reference_python),
                                                                os.path.join(work, f"{model_type}-{writer}-0"),
                                                                model_type, data, args.resume_steps,
                                                                batch_size=args.batch_size)
                 for reader, writer in (("trainer", "estimator"), ("estimator", "trainer"))}
        results[model_type] = {"rounds": rounds, "summary": _summary(rounds), "cross": {
            what: ({"failed": r["failed"]} if "failed" in r else
                   {"global_step": r["metrics"]["global_step"], "metrics": r["metrics"]}) for what, r in cross.items()}}
    return {"steps": args.steps, "rows": args.rows, "batch_size": args.batch_size, "models": results}


def _summary(rounds) -> dict:
    summary = {}
    for side in rounds[0]["runs"]:
        rates = [r["runs"][side]["steps_per_sec"] for r in rounds if "failed" not in r["runs"][side]]
        summary[side] = {"steps_per_sec_median": statistics.median(rates) if rates else None, "steps_per_sec": rates}
    est, ours = summary["estimator"]["steps_per_sec_median"], summary["trainer"]["steps_per_sec_median"]
    summary["speed_ratio_trainer_over_estimator"] = ours / est if est and ours else None
    if "trainer_old_tf" in summary:
        old = summary["trainer_old_tf"]["steps_per_sec_median"]
        summary["speed_ratio_trainer_old_tf_over_estimator"] = old / est if est and old else None
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_reference_python(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=8000, help="training rows (the test table has a quarter)")
    parser.add_argument("--resume-steps", type=int, default=50, help="steps each side adds to the other's model_dir")
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        help=f"model types of bench/census_program.py (default: {' '.join(MODELS)}); "
                             "one_numeric_regressor is the smallest step, a linear model over one numeric column")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--runner-old-tf", help="an interpreter with the reference's TensorFlow (2.15.1 and tf-keras 2.15, "
                                                "hydra-core, omegaconf; no Estimator): this tree's runner also runs there")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    check_reference_python(args)
    result = measure(args)
    for model_type, r in result["models"].items():
        print(model_type, json.dumps(r["summary"]), json.dumps({k: v.get("global_step", v.get("failed"))
                                                                 for k, v in r["cross"].items()}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
