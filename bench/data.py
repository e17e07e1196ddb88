"""The file sources against the in-memory arrays: the training input's examples/s alone and inside a
training step (the runner's graph, ``model=mlp`` and ``model=mnist``), and the time to the first
batch after a resume at step 1,000 and at step 1,000,000 (the restored step is fed to the
pipeline, as the runner does after a restore). Sources, all of Fashion-MNIST's 60,000 training
images: ``data=numpy`` (an .npz in memory, and a folder of .npy memory-mapped), ``data=tfrecord``
(8 shards of raw-byte images); and ``data=csv``, a 60,000-row table of 14 numeric columns.
Variants run interleaved, ``--rounds`` times, in one process.

    python -m bench.data --rounds 3 --json bench/results/data-2026-12-03.json
"""

import argparse
import csv
import json
import os
import statistics
import tempfile
import time

import numpy as np

import trainer.process

trainer.process.set_environment()  # a benchmark script: as the command does, before TensorFlow
import tensorflow as tf  # noqa: E402
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from trainer.cli.paths import register_resolvers
from trainer.config.schema import register_configs
from trainer.data.pipelines import make_train_input
from trainer.data.mnist_files import load_idx_dir
from trainer.data.sources import load_data
from trainer.data.sources.fashion_mnist import DEBIAN_FASHION_MNIST
from trainer.model.model_fn import load_data_for
from trainer.model.graph import build_graph, single_process
from trainer.plan import graph_recipe
from bench import write_results

tf1 = tf.compat.v1
BATCH = 100


def write_sources(folder: str) -> dict:
    """The data once, in every format: {source name: config overrides}."""
    arrays = load_idx_dir(DEBIAN_FASHION_MNIST)
    x, y, tx, ty = arrays.train_x, arrays.train_y, arrays.test_x, arrays.test_y
    np.savez(os.path.join(folder, "fashion.npz"), x_train=x, y_train=y, x_test=tx, y_test=ty)
    mapped = os.path.join(folder, "npy")
    os.makedirs(mapped)
    for key, value in dict(x_train=x, y_train=y, x_test=tx, y_test=ty).items():
        np.save(os.path.join(mapped, key + ".npy"), value)
    for split, (images, labels, shards) in {"train": (x, y, 8), "eval": (tx, ty, 1)}.items():
        for shard in range(shards):
            with tf.io.TFRecordWriter(os.path.join(folder, f"{split}-{shard:02d}.tfrecord")) as writer:
                for image, label in zip(images[shard::shards], labels[shard::shards]):
                    writer.write(tf.train.Example(features=tf.train.Features(feature={
                        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                    })).SerializeToString())
    rng = np.random.default_rng(0)
    for split, rows in (("train", 60000), ("test", 10000)):
        table = rng.normal(size=(rows, 13))
        with open(os.path.join(folder, f"{split}.csv"), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([f"f{i}" for i in range(13)] + ["label"])
            for row in table:
                writer.writerow([f"{v:.5f}" for v in row] + [int(row[0] > 0) + int(row[1] > 0)])
    images = ["data.features.image={shape: [28, 28], dtype: uint8, encoding: raw}", "data.label_key=label",
              "data.num_classes=10"]
    return {
        "numpy_npz": ["data=numpy", f"data.path={folder}/fashion.npz"],
        "numpy_mmap": ["data=numpy", f"data.path={mapped}"],
        "tfrecord": ["data=tfrecord", f"data.train_files={folder}/train-*", f"data.eval_files={folder}/eval-*", *images],
        "csv": ["data=csv", f"data.train_files={folder}/train.csv", f"data.eval_files={folder}/test.csv",
                "data.label_key=label", "data.num_classes=3"],
    }


def make_cfg(overrides):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="trainer.conf", version_base="1.3"):
        return compose("config", overrides=[f"train.batch_size={BATCH}", "train.seed=0", *overrides])


def input_rate(cfg, data, batches: int) -> float:
    """Examples/s of the training input alone (after a warm-up batch)."""
    with tf.Graph().as_default():
        pipeline = make_train_input(cfg.data, cfg.train, data, {}, None)
        with tf1.Session() as sess:
            sess.run(pipeline.initializer, pipeline.feeds(0))
            sess.run(pipeline.labels)
            start = time.perf_counter()
            for _ in range(batches):
                sess.run(pipeline.labels)
            return batches * BATCH / (time.perf_counter() - start)


def train_rate(cfg, data, steps: int) -> float:
    """Examples/s of the runner's training step (input, forward, backward, update)."""
    graph = build_graph(graph_recipe(cfg), data, single_process("cpu"))
    with graph.graph.as_default(), tf1.Session() as sess:
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        sess.run(graph.train_input.initializer, graph.train_input.feeds(0))
        for _ in range(3):
            sess.run(graph.train_op)
        start = time.perf_counter()
        for _ in range(steps):
            sess.run(graph.train_op)
        return steps * BATCH / (time.perf_counter() - start)


def resume_secs(cfg, data, step: int) -> float:
    """Seconds from initialising the training input at global step ``step`` to its first batch."""
    with tf.Graph().as_default():
        pipeline = make_train_input(cfg.data, cfg.train, data, {}, None)
        with tf1.Session() as sess:
            start = time.perf_counter()
            sess.run(pipeline.initializer, pipeline.feeds(step))
            sess.run(pipeline.labels)
            return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    register_configs()
    register_resolvers()
    with tempfile.TemporaryDirectory() as folder:
        sources = write_sources(folder)
        loaded = {name: load_data(make_cfg([*o, "model=mlp"]).data) for name, o in sources.items()}
        samples = {}
        for round_index in range(args.rounds):
            for name, overrides in sources.items():
                models = ["mlp"] if name == "csv" else ["mlp", "mnist"]
                cfg = make_cfg([*overrides, "model=mlp"])
                row = samples.setdefault(name, {})
                row.setdefault("input_examples_per_sec", []).append(input_rate(cfg, loaded[name], args.batches))
                for model in models:
                    model_cfg = make_cfg([*overrides, f"model={model}"])
                    load_data_for(model_cfg.model, model_cfg.data)  # fills model.params.num_classes
                    row.setdefault(f"train_{model}_examples_per_sec", []).append(
                        train_rate(model_cfg, loaded[name], args.steps if model == "mnist" else 5 * args.steps))
                for step in (1000, 1000000):
                    row.setdefault(f"resume_at_{step}_secs", []).append(resume_secs(cfg, loaded[name], step))
                print(json.dumps({"round": round_index, "source": name,
                                  **{k: round(v[-1], 3) for k, v in row.items()}}), flush=True)
    medians = {name: {k: round(statistics.median(v), 3) for k, v in row.items()} for name, row in samples.items()}
    print(json.dumps(medians, indent=1))
    write_results(args.json, args, medians=medians, samples=samples)


if __name__ == "__main__":
    main()
