"""The files README.md and docs/ name in their commands, written as a user would have them, for
``test_docs.py``: a package ``my_pkg`` with an Estimator-era model_fn, input_fns and a hook, an
Estimator program ``my_program.py`` with absl flags, ``my_arrays.npz`` and ``my_arrays/`` (the four
arrays as .npy files), ``train.csv`` / ``test.csv`` (a census-style table: numeric columns, a text
label), ``census/{train,test}.csv`` (``bench.census``'s table) and ``data/{train,eval}-0.tfrecord``
(32x32x3 uint8 images)."""

import os
import shutil

import numpy as np

from bench.census import main as census

MODEL = '''"""A layers-tutorial CNN model_fn and its input_fns, as 2018 programs wrote them."""

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def _images(seed, count):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, count).astype(np.int32)
    images = rng.uniform(0, 1, (count, 28, 28, 1)).astype(np.float32)
    images[np.arange(count), labels * 2 + 4, 4:24, 0] += 1.0  # a bar whose row is the class
    return images, labels


def cnn_model_fn(features, labels, mode, params):
    net = tf1.layers.conv2d(features["x"], 8, 5, padding="same", activation=tf.nn.relu)
    net = tf1.layers.max_pooling2d(net, 2, 2)
    logits = tf1.layers.dense(tf1.layers.flatten(net), 10)
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes, "logits": logits})
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss,
                                          eval_metric_ops={"accuracy": tf1.metrics.accuracy(labels, classes)})
    train_op = tf1.train.AdamOptimizer(params.get("learning_rate", 1e-3)).minimize(
        loss, global_step=tf1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def train_input_fn(params):
    x, y = _images(0, 512)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).shuffle(512, seed=1).repeat().batch(params["batch_size"])


def eval_input_fn(params):
    x, y = _images(1, 128)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(params["batch_size"])
'''

HOOK = '''"""The user's own hook: logs the global step every ``every`` steps."""

import tensorflow as tf


class MyHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, every=10):
        self.every = every

    def begin(self):
        self._step = tf.compat.v1.train.get_global_step()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        if run_values.results % self.every == 0:
            tf.compat.v1.logging.info("my hook: step %d", run_values.results)
'''

PROGRAM = '''"""An Estimator program as its author wrote it: absl flags, a main() that trains and evaluates."""

import numpy as np
import tensorflow as tf
from absl import app, flags

flags.DEFINE_string("model_dir", None, "where the checkpoints go")
flags.DEFINE_integer("train_steps", 1000, "training steps")
FLAGS = flags.FLAGS


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))})
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(_):
    x = np.random.RandomState(0).normal(size=(400, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    estimator = tf.estimator.Estimator(model_fn, model_dir=FLAGS.model_dir)
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(40),
                    steps=FLAGS.train_steps)
    print(estimator.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(100)))


if __name__ == "__main__":
    app.run(main)
'''


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _arrays(here: str) -> None:
    rng = np.random.RandomState(0)
    arrays = {}
    for split, count in (("train", 600), ("test", 200)):
        y = rng.randint(0, 10, count).astype(np.int64)
        x = rng.uniform(0, 1, (count, 28, 28)).astype(np.float32)
        x[np.arange(count), y * 2 + 4, 4:24] += 1.0
        arrays[f"x_{split}"], arrays[f"y_{split}"] = x, y
    np.savez(os.path.join(here, "my_arrays.npz"), **arrays)
    os.makedirs(os.path.join(here, "my_arrays"), exist_ok=True)
    for name, value in arrays.items():
        np.save(os.path.join(here, "my_arrays", f"{name}.npy"), value)


def _csv(here: str) -> None:
    rng = np.random.RandomState(1)
    for name, count in (("train.csv", 400), ("test.csv", 100)):
        age = rng.randint(18, 80, count)
        hours = rng.randint(10, 70, count)
        gain = rng.exponential(1000, count).round(1)
        label = np.where(hours + age / 2 + rng.normal(0, 5, count) > 60, ">50K", "<=50K")
        rows = ["age,hours_per_week,capital_gain,income_bracket"]
        rows += [f"{a},{h},{g},{lab}" for a, h, g, lab in zip(age, hours, gain, label)]
        _write(os.path.join(here, name), "\n".join(rows) + "\n")


def _tfrecords(here: str) -> None:
    import tensorflow as tf

    rng = np.random.RandomState(2)
    os.makedirs(os.path.join(here, "data"), exist_ok=True)
    for split, count in (("train", 300), ("eval", 100)):
        with tf.io.TFRecordWriter(os.path.join(here, "data", f"{split}-0.tfrecord")) as writer:
            for _ in range(count):
                label = int(rng.randint(0, 10))
                image = rng.randint(0, 255, (32, 32, 3)).astype(np.uint8)
                image[label * 3:label * 3 + 2] = 255
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}))
                writer.write(example.SerializeToString())


def write_fixtures(here: str) -> None:
    _write(os.path.join(here, "my_pkg", "__init__.py"), "from my_pkg.hooks import MyHook  # noqa: F401\n")
    _write(os.path.join(here, "my_pkg", "model.py"), MODEL)
    _write(os.path.join(here, "my_pkg", "hooks.py"), HOOK)
    _write(os.path.join(here, "my_program.py"), PROGRAM)
    _arrays(here)
    _csv(here)
    census([os.path.join(here, "census"), "--rows", "800"])  # as README's `python -m bench.census census/`
    shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"),
                    os.path.join(here, "examples"))  # the examples, as in the repository root
    _tfrecords(here)
