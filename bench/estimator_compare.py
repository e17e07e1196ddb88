"""The same Estimator program on real Estimator (TensorFlow 2.15 with tensorflow-estimator 2.15, in a
side environment) and on ``trainer.estimator`` (through ``train-estimator``, unedited): metrics after
the same steps, steps/s, seconds from process start to the first step, variable names, and each side
resuming the other's ``model_dir``.

    python3 -m venv ../est215 && ../est215/bin/pip install tensorflow-cpu==2.15.1 tensorflow-estimator==2.15.0
    python -m bench.estimator_compare --reference-python ../est215/bin/python --rounds 5 --json out.json

Each round has its own seed (``tf_random_seed``) and runs each side twice, in alternating order:

- **same start**: both sides warm-start from one checkpoint (Estimator's, after one step) and train
  the same steps on the same shuffled batches, so their metrics should agree to float noise (the two
  TensorFlow versions differ);
- **own start**: each side draws its initial weights from the seed. They draw them differently (op
  seeds follow the order ops are made in, and the runner makes its input pipeline's ops first), so
  these metrics are compared across the rounds, mean and spread, not seed by seed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench import add_reference_python, check_reference_python

SIDES = ("estimator", "trainer")
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "estimator_program.py")


def _side(name: str, reference_python: str):
    if name == "estimator":
        return [reference_python, PROGRAM]
    return [sys.executable, "-m", "trainer.estimator.launch", PROGRAM]


def _run(command, model_dir: str, steps: int, seed: int = 1, warm_start: str = None) -> dict:
    report = model_dir.rstrip("/") + f"-{os.getpid()}-{steps}.json"
    extra = [f"--warm_start={warm_start}"] if warm_start else []
    done = subprocess.run([*command, f"--model_dir={model_dir}", f"--steps={steps}", f"--report={report}",
                           f"--seed={seed}", *extra],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    with open(report) as f:
        return json.load(f)


def _round(args, work: str, r: int) -> dict:
    """One seed: an initial checkpoint, then each side from it and from its own start."""
    seed, sides = 1 + r, (SIDES if r % 2 == 0 else SIDES[::-1])
    init = os.path.join(work, f"init-{r}")
    made = _run(_side("estimator", args.reference_python), init, 1, seed=seed)
    out = {"seed": seed, "same start": {}, "own start": {}}
    for side in sides:
        out["same start"][side] = (made if "failed" in made else
                                   _run(_side(side, args.reference_python), os.path.join(work, f"{side}-warm-{r}"),
                                        args.steps, seed=seed, warm_start=init))
        out["own start"][side] = _run(_side(side, args.reference_python), os.path.join(work, f"{side}-{r}"),
                                      args.steps, seed=seed)
    return out


def _spread(values) -> dict:
    return {"mean": statistics.mean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "values": values} if values else {}


def _summary(rounds) -> dict:
    summary = {}
    for side in SIDES:
        own = [r["own start"][side] for r in rounds if "failed" not in r["own start"][side]]
        summary[side] = {
            "own start accuracy": _spread([o["metrics"]["accuracy"] for o in own]),
            "own start loss": _spread([o["metrics"]["loss"] for o in own]),
            "steps_per_sec_median": statistics.median(o["steps_per_sec"] for o in own) if own else None,
            "first_step_at_median": statistics.median(o["first_step_at"] for o in own) if own else None,
            "variables": own[0]["variables"] if own else None, "failed": len(rounds) - len(own)}
    pairs = [r["same start"] for r in rounds if not any("failed" in v for v in r["same start"].values())]
    summary["same start"] = {
        key: [abs(p["trainer"]["metrics"][key] - p["estimator"]["metrics"][key]) for p in pairs]
        for key in ("accuracy", "loss")}
    summary["same start"]["pairs"] = len(pairs)
    return summary


def measure(args) -> dict:
    work = tempfile.mkdtemp(prefix="estimator-compare-")
    rounds = []
    for r in range(args.rounds):
        rounds.append(_round(args, work, r))
        print(json.dumps(rounds[-1])[:2000], flush=True)
    cross = {
        "trainer resumes estimator's model_dir": _run(_side("trainer", args.reference_python),
                                                      os.path.join(work, "estimator-0"), args.resume_steps),
        "estimator resumes trainer's model_dir": _run(_side("estimator", args.reference_python),
                                                      os.path.join(work, "trainer-0"), args.resume_steps),
    }
    return {"steps": args.steps, "rounds": rounds, "summary": _summary(rounds), "cross": cross}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_reference_python(parser)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--resume-steps", type=int, default=50, help="steps each side adds to the other's model_dir")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    check_reference_python(args)
    result = measure(args)
    for side in SIDES:
        s = result["summary"][side]
        print(f"{side}: own-start accuracy {s['own start accuracy']} steps/s {s['steps_per_sec_median']} "
              f"first step {s['first_step_at_median']} failed {s['failed']}")
    print(f"same start, |trainer - estimator|: {result['summary']['same start']}")
    for what, r in result["cross"].items():
        print(f"{what}: {'failed: ' + r['failed'] if 'failed' in r else 'step ' + str(r['metrics']['global_step'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
