"""Benchmarks of the runner against a hand-written loop and Model.fit (see BENCHMARKS.md)."""

import json
import os
import shutil
import sys


def train_command() -> str:
    """The ``train`` console script beside the interpreter the benchmark and its contenders run on,
    rather than whatever PATH finds first: a pyenv shim there adds 0.06-0.1 s to every start."""
    script = os.path.join(os.path.dirname(sys.executable), "train")
    return script if os.access(script, os.X_OK) else (shutil.which("train") or "train")


def write_results(path, args, **results) -> None:
    """``--json PATH``: the script's arguments and its results in one file (nothing when PATH is None)."""
    if path:
        with open(path, "w") as f:
            json.dump({"args": vars(args), **results}, f, indent=1)


def add_reference_python(parser) -> None:
    """``--reference-python``: the interpreter of the side environment with Estimator 2.15."""
    parser.add_argument("--reference-python", default=os.path.join("..", "est215", "bin", "python"))


def check_reference_python(args) -> None:
    if not os.path.exists(args.reference_python):
        raise SystemExit(f"error: --reference-python {args.reference_python} does not exist; make the side "
                         "environment first (see the script's docstring)")


def open_runner_session(session: str, cfg, graph, workdir: str):
    """The runner's session over ``graph`` with the default hooks, as ``train`` opens it (a context
    manager; ``graph.graph`` must be the default graph until it is closed: the hooks' end() saves in it)."""
    from trainer.hooks.assembly import RunParts, make_training_hooks, make_user_hooks
    from trainer.hooks.evaluation import SharedEvaluation
    from trainer.records import MetricsLog
    from trainer.session.device import session_config
    from trainer.session.factory import open_session
    from trainer.training.preemption import PreemptionHandler
    from trainer.training.single_process import SingleProcess
    from trainer.plan import hook_cadence

    parts = RunParts(MetricsLog(os.path.join(workdir, "metrics.jsonl")), PreemptionHandler(),
                     SharedEvaluation(graph.evaluation))
    hooks = make_training_hooks(hook_cadence(cfg), graph, make_user_hooks(cfg.hooks, cfg.checkpoint.listeners), parts,
                                SingleProcess())
    return open_session(session, graph.scaffold, hooks.every, hooks.chief, cfg.checkpoint.dir,
                        session_config(cfg.device, "cpu"))
