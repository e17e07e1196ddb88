"""The same Estimator program on real Estimator (TensorFlow 2.15 with tensorflow-estimator 2.15, in a
side environment) and on ``trainer.estimator`` (through ``train-estimator``, unedited): metrics after
the same steps, steps/s, seconds from process start to the first step, variable names, and each side
resuming the other's ``model_dir``.

    python3 -m venv ../est215 && ../est215/bin/pip install tensorflow-cpu==2.15.1 tensorflow-estimator==2.15.0
    python -m bench.estimator_compare --reference-python ../est215/bin/python --rounds 3 --json out.json

Each round runs both sides on fresh dirs, one after the other, in alternating order, with the round's
seed (``tf_random_seed``) on both. The sides draw their initial weights differently from the same
seed (the op seeds follow the order ops are made in, and the runner makes its input pipeline's ops
first), so their metrics are compared across the rounds' seeds, not seed by seed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "estimator_program.py")


def _side(name: str, reference_python: str):
    if name == "estimator":
        return [reference_python, PROGRAM]
    return [sys.executable, "-m", "trainer.estimator.launch", PROGRAM]


def _run(command, model_dir: str, steps: int, seed: int = 1) -> dict:
    report = model_dir.rstrip("/") + f"-{os.getpid()}-{steps}.json"
    done = subprocess.run([*command, f"--model_dir={model_dir}", f"--steps={steps}", f"--report={report}",
                           f"--seed={seed}"],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    with open(report) as f:
        return json.load(f)


def measure(args) -> dict:
    work = tempfile.mkdtemp(prefix="estimator-compare-")
    sides = ("estimator", "trainer")
    rounds = {side: [] for side in sides}
    for r in range(args.rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            rounds[side].append(_run(_side(side, args.reference_python), os.path.join(work, f"{side}-{r}"), args.steps,
                                     seed=1 + r))
            print(side, r, json.dumps(rounds[side][-1]), flush=True)
    cross = {
        "trainer resumes estimator's model_dir": _run(_side("trainer", args.reference_python),
                                                      os.path.join(work, "estimator-0"), args.resume_steps),
        "estimator resumes trainer's model_dir": _run(_side("estimator", args.reference_python),
                                                      os.path.join(work, "trainer-0"), args.resume_steps),
    }
    summary = {}
    for side in sides:
        ok = [r for r in rounds[side] if "failed" not in r]
        summary[side] = {
            "accuracy": [r["metrics"]["accuracy"] for r in ok], "loss": [r["metrics"]["loss"] for r in ok],
            "steps_per_sec_median": statistics.median(r["steps_per_sec"] for r in ok) if ok else None,
            "first_step_at_median": statistics.median(r["first_step_at"] for r in ok) if ok else None,
            "variables": ok[0]["variables"] if ok else None, "failed": len(rounds[side]) - len(ok)}
    return {"steps": args.steps, "rounds": rounds, "summary": summary, "cross": cross}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-python", default=os.path.join("..", "est215", "bin", "python"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--resume-steps", type=int, default=50, help="steps each side adds to the other's model_dir")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if not os.path.exists(args.reference_python):
        raise SystemExit(f"error: --reference-python {args.reference_python} does not exist; make the side "
                         "environment first (see this module's docstring)")
    result = measure(args)
    for side, s in result["summary"].items():
        print(f"{side}: accuracy {s['accuracy']} loss {s['loss']} steps/s {s['steps_per_sec_median']} "
              f"first step {s['first_step_at_median']}")
    for what, r in result["cross"].items():
        print(f"{what}: {'failed: ' + r['failed'] if 'failed' in r else 'step ' + str(r['metrics']['global_step'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
