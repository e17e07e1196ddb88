"""The contenders the runner is measured against, each run in its own process.

``python -m bench.contenders NAME --steps N --warmup W --batch B --examples E`` prints one JSON
line: steady-state ``steps_per_sec`` over the steps after the warm-up, and ``first_step_at``
(epoch seconds when the first training step ended) for the start-up comparison. ``--precision bf16``
runs the hand loop with the runner's bfloat16 rewrite and ``Model.fit`` under Keras's
``mixed_bfloat16`` policy (the logits layer kept in float32, as Keras's guide has it).
"""

import argparse
import json
import os
import sys
import time


def _arrays(examples):
    from trainer.data.sources.synthetic import make_synthetic

    return make_synthetic(examples, 1000)


def hand_loop(args):
    """The runner's own graph (model, input pipeline, train op) driven by ``while True: sess.run(train_op)``."""
    from hydra import compose, initialize_config_module

    from trainer.cli.paths import register_resolvers
    from trainer.config.schema import register_configs
    from trainer.process import import_tensorflow, set_environment

    set_environment()  # as the command does, before TensorFlow is imported
    tf = import_tensorflow()
    from trainer.model.graph import build_graph
    from trainer.plan import graph_recipe
    from trainer.session.device import session_config

    register_configs()
    register_resolvers()
    with initialize_config_module(config_module="trainer.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"model={args.model}", "data=synthetic", f"train.batch_size={args.batch}",
                                           "device=cpu"])
    arrays = _arrays(args.examples)
    graph = build_graph(graph_recipe(cfg), arrays)
    config = tf.compat.v1.ConfigProto()  # TensorFlow's defaults; the bf16 rewrite as the runner turns it on
    config.graph_options.rewrite_options.CopyFrom(
        session_config(cfg.device, "cpu", precision=args.precision).graph_options.rewrite_options)
    with graph.graph.as_default(), tf.compat.v1.Session(config=config) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(tf.compat.v1.local_variables_initializer())
        sess.run(graph.train_input.initializer, graph.train_input.feeds(0))
        sess.run(graph.train_op)
        first = time.time()
        for _ in range(args.warmup - 1):
            sess.run(graph.train_op)
        start = time.time()
        for _ in range(args.steps):
            sess.run(graph.train_op)
        secs = time.time() - start
    return {"steps_per_sec": args.steps / secs, "first_step_at": first}


def _keras_cnn(keras):
    layers = keras.layers
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(32, 5, padding="same", activation="relu"), layers.MaxPooling2D(2, 2),
        layers.Conv2D(64, 5, padding="same", activation="relu"), layers.MaxPooling2D(2, 2),
        layers.Flatten(), layers.Dense(1024, activation="relu"), layers.Dropout(0.4), layers.Dense(10, dtype="float32"),
    ])


def _keras_mlp(keras):
    layers = keras.layers
    return keras.Sequential([keras.Input((28, 28, 1)), layers.Flatten(), layers.Dense(128, activation="relu"),
                             layers.Dense(64, activation="relu"), layers.Dense(10, dtype="float32")])


def keras_fit(args, legacy: bool):
    """The same model with Model.fit: tf_keras (``legacy``) or Keras 3 on the TensorFlow backend."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1" if legacy else "0"
    # The kernels the runner runs with (trainer.process.set_environment): the comparison is of the loops.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if legacy:
        import tf_keras as keras
    else:
        os.environ["KERAS_BACKEND"] = "tensorflow"
        import keras
    import numpy as np
    import tensorflow as tf

    if args.precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    arrays = _arrays(args.examples)
    x = (arrays.train_x[..., None] / 255.0).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, arrays.train_y)).shuffle(len(x), seed=0).repeat()
    ds = ds.batch(args.batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    model = (_keras_cnn if args.model == "mnist" else _keras_mlp)(keras)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    marks = {}

    class Timer(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                marks["first"] = time.time()
            if batch == args.warmup - 1:
                marks["start"] = time.time()

    model.fit(ds, steps_per_epoch=args.warmup + args.steps, epochs=1, verbose=0, callbacks=[Timer()])
    secs = time.time() - marks["start"]
    return {"steps_per_sec": args.steps / secs, "first_step_at": marks["first"]}


def input_pipeline(args):
    """The training input pipeline alone: examples/s with no model."""
    from trainer.process import import_tensorflow, set_environment

    set_environment()  # as the command does, before TensorFlow is imported
    tf = import_tensorflow()
    from trainer.data.pipelines import make_pipeline

    arrays = _arrays(args.examples)
    with tf.Graph().as_default():
        pipeline = make_pipeline(arrays.train_x, arrays.train_y, args.batch, "x", train=True, seed=0)
        with tf.compat.v1.Session() as sess:
            sess.run(pipeline.initializer, pipeline.feeds(0))
            fetch = pipeline.features["x"].op  # run the pipeline, do not copy the batch to Python
            for _ in range(args.warmup):
                sess.run(fetch)
            start = time.time()
            for _ in range(args.steps):
                sess.run(fetch)
            secs = time.time() - start
    return {"examples_per_sec": args.steps * args.batch / secs}


CONTENDERS = {
    "hand_loop": hand_loop,
    "tf_keras_fit": lambda a: keras_fit(a, legacy=True),
    "keras3_fit": lambda a: keras_fit(a, legacy=False),
    "input_pipeline": input_pipeline,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(CONTENDERS))
    parser.add_argument("--model", default="mnist")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--examples", type=int, default=10000)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()
    print(json.dumps(CONTENDERS[args.name](args)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
