"""The runner's own cost per step, measured without the noise between processes:
``python -m bench.overhead [--model mnist] [--steps 50] [--blocks 8]``.

In one process, over one graph and one session per backend, blocks of steps alternate between
the runner's session (its wrappers and the default hooks: checkpoints, summaries, step counter,
progress lines, metrics, NaN guard) and a bare ``sess.run(train_op)`` on the same raw
``tf.Session``. Both see the same model, input pipeline, threads and machine state, so the
difference per step is the runner's overhead; separate processes on this 2-core VM differ by
more than that from run to run.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from bench import open_runner_session, write_results


def _config(model: str, batch: int, examples: int, session: str, output_dir: str, every_steps: int, extra=()):
    from hydra import compose, initialize_config_module

    from trainer.cli.paths import register_resolvers
    from trainer.config.schema import register_configs

    register_configs()
    register_resolvers()
    with initialize_config_module(config_module="trainer.conf", version_base="1.3"):
        return compose("config", overrides=[
            f"model={model}", "data=synthetic", f"data.train_examples={examples}", "data.test_examples=1000",
            f"train.batch_size={batch}", "train.max_steps=1000000", f"session={session}", "device=cpu",
            "eval.every_steps=0", f"log.every_steps={every_steps}", "log.progress=lines",
            f"checkpoint.dir={os.path.join(output_dir, 'checkpoints')}", *extra,
        ])


def _measure_in(workdir: str, session: str, args) -> dict:
    from trainer.process import import_tensorflow, set_environment

    set_environment()  # as the command does, before TensorFlow is imported
    tf = import_tensorflow()  # first, quietly: the modules below import TensorFlow too
    from trainer.config.rules import prepare
    from trainer.data.sources import load_arrays
    from trainer.model.graph import build_graph
    from trainer.plan import graph_recipe

    cfg = prepare(_config(args.model, args.batch, args.examples, session, workdir, args.every_steps), workdir)
    graph = build_graph(graph_recipe(cfg), load_arrays(cfg.data))
    with graph.graph.as_default():
        with open_runner_session(session, cfg, graph, workdir) as sess:
            raw = sess.raw_session if hasattr(sess, "raw_session") else sess._tf_sess()
            contenders = {"runner": lambda: sess.run(graph.train_op), "bare": lambda: raw.run(graph.train_op)}
            for _ in range(args.warmup):
                contenders["runner"]()
            per_step = {name: [] for name in contenders}
            for block in range(args.blocks):
                order = list(contenders) if block % 2 == 0 else list(reversed(contenders))
                for name in order:
                    started = time.perf_counter()
                    for _ in range(args.steps):
                        contenders[name]()
                    per_step[name].append((time.perf_counter() - started) / args.steps)
    tf.compat.v1.summary.FileWriterCache.clear()
    return per_step


def measure(session: str, args) -> dict:
    workdir = tempfile.mkdtemp(prefix=f"overhead-{session}-")
    try:
        per_step = _measure_in(workdir, session, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    runner, bare = statistics.median(per_step["runner"]), statistics.median(per_step["bare"])
    return {"session": session, "runner_ms": runner * 1e3, "bare_ms": bare * 1e3,
            "overhead_ms": (runner - bare) * 1e3, "ratio": bare / runner,
            "blocks": {k: [round(v * 1e3, 3) for v in vs] for k, vs in per_step.items()}}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mnist", help="mnist (the layers-tutorial CNN) or mlp")
    parser.add_argument("--session", choices=["plain", "monitored", "both"], default="both")
    parser.add_argument("--steps", type=int, default=50, help="steps per block")
    parser.add_argument("--blocks", type=int, default=8, help="blocks per contender, alternating")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--examples", type=int, default=10000)
    parser.add_argument("--every-steps", type=int, default=100, help="log.every_steps (progress and metrics rows)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    sessions = ["plain", "monitored"] if args.session == "both" else [args.session]
    results = [measure(s, args) for s in sessions]
    print(f"model={args.model} batch={args.batch}: median ms/step over {args.blocks} alternating blocks of {args.steps}")
    print(f"{'session':<10} {'runner':>9} {'bare':>9} {'overhead':>9} {'bare/runner':>12}")
    for r in results:
        print(f"{r['session']:<10} {r['runner_ms']:>9.3f} {r['bare_ms']:>9.3f} {r['overhead_ms']:>9.3f} {r['ratio']:>12.3f}")
    write_results(args.json, args, results=results)
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
