"""What the runner's training graph costs against the user's own: ``python -m bench.graph_cost``.

The reference is the user's program (``bench/user_cnn.py``): the layers-tutorial CNN as the
Estimator tutorial wrote it, its own ``tf.data`` input and ``AdamOptimizer.minimize``, driven by
``while: sess.run(train_op)``. Against it, in one process, over the same arrays and batch size,
blocks of steps rotate between:

- ``plain`` / ``monitored``: ``train model=mnist`` as the command runs it (default config, the
  runner's graph, its session and default hooks);
- ``runner_graph``: a bare ``sess.run(train_op)`` over the runner's graph (the graph's own cost,
  without the session machinery);
- one variant of the runner's graph per extra, each with one thing switched back or off:
  ``guarded`` (``train.on_nan=skip_step``: the update inside a conditional on the loss and the
  gradients' global norm, which every variable's update waits for; the default before it went),
  ``no_gradient_norm`` (no finite check of the gradients), ``stateful_dropout`` (the model's
  step-keyed stateless dropout replaced by ``tf.compat.v1.layers.dropout``).

Each contender has its graph and session for the whole run, so all see the same machine state;
the table gives each one's median ms per step and its rate relative to the user's loop.
"""

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time

from bench import open_runner_session, write_results
from bench.overhead import _config

VARIANTS = ("guarded", "no_gradient_norm", "stateful_dropout")


@contextlib.contextmanager
def _variant(name):
    """The runner's graph built with one extra switched off (patched for the build only)."""
    import tensorflow as tf

    import trainer.models.mnist as mnist
    import trainer.model.train_op as train_op

    saved = (mnist.dropout, train_op.tf.linalg.global_norm)
    if name == "no_gradient_norm":
        train_op.tf.linalg.global_norm = lambda tensors, name=None: tf.constant(0.0, name=name)
    elif name == "stateful_dropout":
        mnist.dropout = lambda x, rate, mode: tf.compat.v1.layers.dropout(x, rate=rate, training=mode == "train")
    try:
        yield
    finally:
        mnist.dropout, train_op.tf.linalg.global_norm = saved


def _runner_graph(args, workdir, overrides=(), session="plain"):
    from trainer.config.rules import prepare
    from trainer.data.sources import load_arrays
    from trainer.model.graph import build_graph
    from trainer.plan import graph_recipe

    cfg = prepare(_config("mnist", args.batch, args.examples, session, workdir, args.every_steps, overrides), workdir)
    return cfg, build_graph(graph_recipe(cfg), load_arrays(cfg.data))


def _bare(tf, graph):
    """A raw session over a runner graph: variables and the training input initialised."""
    sess = tf.compat.v1.Session(graph=graph.graph)
    with graph.graph.as_default():
        sess.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()])
    sess.run(graph.train_input.initializer, graph.train_input.feeds(0))
    return lambda: sess.run(graph.train_op), sess.close


def _runner(tf, session, args, workdir, stack):
    """The runner's session over its graph with the default hooks, as ``train`` opens it."""
    os.makedirs(workdir)
    cfg, graph = _runner_graph(args, workdir, session=session)
    # The graph stays the default until the session is closed: its hooks' end() saves in it.
    stack.enter_context(graph.graph.as_default())
    sess = stack.enter_context(open_runner_session(session, cfg, graph, workdir))
    return graph, lambda: sess.run(graph.train_op)


def _contenders(tf, args, workdir, stack):
    import numpy as np

    from bench import user_cnn
    from trainer.data.sources.synthetic import make_synthetic

    arrays = make_synthetic(args.examples, 1000)
    user_graph, train_op, inits, feed = user_cnn.build(arrays.train_x, np.asarray(arrays.train_y), args.batch)
    user = tf.compat.v1.Session(graph=user_graph)
    stack.callback(user.close)
    user.run(inits[0])
    user.run(inits[1], feed)
    steps = {"user": lambda: user.run(train_op)}
    for session in ("plain", "monitored"):
        _, steps[session] = _runner(tf, session, args, os.path.join(workdir, session), stack)
    for name in ["runner_graph", *args.variants]:
        overrides = ["train.on_nan=skip_step"] if name == "guarded" else []
        with _variant(name):
            _, graph = _runner_graph(args, os.path.join(workdir, name), overrides)
        steps[name], close = _bare(tf, graph)
        stack.callback(close)
    return steps


def measure(args) -> dict:
    from trainer.process import import_tensorflow, set_environment

    set_environment()  # as the command does, before TensorFlow is imported
    tf = import_tensorflow()
    workdir = tempfile.mkdtemp(prefix="graph-cost-")
    try:
        with contextlib.ExitStack() as stack:
            steps = _contenders(tf, args, workdir, stack)
            for step in steps.values():
                for _ in range(args.warmup):
                    step()
            per_step = {name: [] for name in steps}
            names = list(steps)
            for block in range(args.blocks):
                order = names[block % len(names):] + names[:block % len(names)]  # rotate who goes first
                for name in order:
                    started = time.perf_counter()
                    for _ in range(args.steps):
                        steps[name]()
                    per_step[name].append((time.perf_counter() - started) / args.steps)
        tf.compat.v1.summary.FileWriterCache.clear()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    user = statistics.median(per_step["user"])
    return {name: {"ms": statistics.median(v) * 1e3, "vs_user": user / statistics.median(v),
                   "blocks_ms": [round(x * 1e3, 2) for x in v]} for name, v in per_step.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.graph_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30, help="steps per block")
    parser.add_argument("--blocks", type=int, default=12, help="blocks per contender, in rotating order")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--examples", type=int, default=10000)
    parser.add_argument("--every-steps", type=int, default=100, help="log.every_steps (progress and metrics rows)")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    results = measure(args)
    print(f"layers-tutorial CNN, batch {args.batch}: median ms/step over {args.blocks} rotating blocks of {args.steps}")
    print(f"{'contender':<18} {'ms/step':>9} {'vs user':>9}")
    for name, r in results.items():
        print(f"{name:<18} {r['ms']:>9.2f} {r['vs_user']:>9.3f}")
    write_results(args.json, args, results=results)
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
