"""The program the Estimator comparison runs on both sides (``bench/estimator_compare.py``): written
against ``tf.estimator`` as a 2019 program was, a layers-tutorial-style CNN on Fashion-MNIST (the
first 5,000 training and 2,000 test images of Debian's ``dataset-fashion-mnist``; synthetic
MNIST-shaped images where that is not installed). It reports, as JSON: the eval metrics after its
steps, the training steps per second after the first 10, the seconds from process start to the first
step, and the checkpoint's variable names. ``--warm_start`` starts its weights from a checkpoint, as
``warm_start_from`` did."""

import gzip
import json
import os
import time

import numpy as np
import tensorflow.compat.v1 as tf
from absl import app, flags

flags.DEFINE_string("model_dir", None, "")
flags.DEFINE_integer("steps", 200, "training steps of this call")
flags.DEFINE_string("report", None, "")
flags.DEFINE_integer("seed", 1, "tf_random_seed")
flags.DEFINE_string("warm_start", None, "a checkpoint (or dir) to take the initial weights from")
flags.DEFINE_string("data", "/usr/share/datasets/fashion-mnist", "a dir of Fashion-MNIST's IDX files")
FLAGS = flags.FLAGS


def process_age() -> float:
    """Seconds since this process started (Linux)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def images(seed, n):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, n).astype(np.int32)
    x = rng.uniform(0, 1, (n, 28, 28, 1)).astype(np.float32)
    for i, label in enumerate(labels):  # a faint bar in noise whose place is the class: learnable, not at once
        x[i, 2 + 2 * label: 4 + 2 * label, 6:22, 0] += 0.15
    return x, labels


def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion(split, n):
    prefix = {"train": "train", "test": "t10k"}[split]
    x = idx(os.path.join(FLAGS.data, f"{prefix}-images-idx3-ubyte.gz"))[:n]
    y = idx(os.path.join(FLAGS.data, f"{prefix}-labels-idx1-ubyte.gz"))[:n]
    return (x.astype(np.float32) / 255.0).reshape(-1, 28, 28, 1), y.astype(np.int32)


def cnn_model_fn(features, labels, mode):
    net = tf.layers.conv2d(features["x"], 16, 5, padding="same", activation=tf.nn.relu, name="conv1")
    net = tf.layers.max_pooling2d(net, 2, 2)
    net = tf.layers.conv2d(net, 32, 5, padding="same", activation=tf.nn.relu, name="conv2")
    net = tf.layers.max_pooling2d(net, 2, 2)
    net = tf.layers.dense(tf.layers.flatten(net), 128, activation=tf.nn.relu, name="dense")
    logits = tf.layers.dense(net, 10, name="logits")
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        train_op = tf.train.AdamOptimizer(1e-3).minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return tf.estimator.EstimatorSpec(mode, loss=loss,
                                      eval_metric_ops={"accuracy": tf.metrics.accuracy(labels, classes)})


class Timing(tf.train.SessionRunHook):
    def __init__(self):
        self.first_step_at, self.marks = None, []

    def after_run(self, run_context, run_values):
        if self.first_step_at is None:
            self.first_step_at = process_age()
        self.marks.append(time.time())


def main(_):
    real = os.path.exists(os.path.join(FLAGS.data, "train-images-idx3-ubyte.gz"))
    (x, y), (tx, ty) = ((fashion("train", 5000), fashion("test", 2000)) if real
                        else (images(0, 5000), images(1, 1000)))
    estimator = tf.estimator.Estimator(cnn_model_fn, model_dir=FLAGS.model_dir,
                                       config=tf.estimator.RunConfig(tf_random_seed=FLAGS.seed, save_checkpoints_steps=100),
                                       warm_start_from=FLAGS.warm_start)
    timing = Timing()
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).shuffle(5000, seed=2).repeat().batch(64),
                    steps=FLAGS.steps, hooks=[timing])
    metrics = estimator.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": tx}, ty)).batch(200))
    timed = timing.marks[10:]
    report = {"data": "fashion-mnist" if real else "synthetic", "metrics": {k: float(v) for k, v in metrics.items()},
              "steps_per_sec": (len(timed) - 1) / (timed[-1] - timed[0]) if len(timed) > 1 else None,
              "first_step_at": timing.first_step_at, "variables": sorted(estimator.get_variable_names())}
    print(json.dumps(report))
    if FLAGS.report:
        with open(FLAGS.report, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    app.run(main)
