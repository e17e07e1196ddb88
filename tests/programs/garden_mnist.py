"""A program in the style of the Model Garden's r1 MNIST: a Keras ``Sequential`` built inside a
five-argument model_fn (a new model, with new variables, at every call), records read from the
IDX files with ``FixedLengthRecordDataset``, a training input that ends after ``EPOCHS`` passes,
and an evaluation input returned as the tensors of a one-shot iterator. Written against
``tf.estimator``; the only edit is the import of ``trainer.estimator``.
"""

import os

import tensorflow as tf

import trainer.estimator as estimator

DATA_DIR = os.environ.get("MNIST_DATA_DIR", "/usr/share/datasets/fashion-mnist")
EPOCHS = 2
TRAIN_COUNT, EVAL_COUNT = 1000, 300


def _records(prefix, count):
    """(image, label) pairs of the gzipped IDX files ``prefix``-images/labels."""
    def image(raw):
        return tf.cast(tf.reshape(tf.io.decode_raw(raw, tf.uint8), [784]), tf.float32) / 255.0

    def label(raw):
        return tf.cast(tf.reshape(tf.io.decode_raw(raw, tf.uint8), []), tf.int32)

    path = os.path.join(DATA_DIR, prefix)
    images = tf.data.FixedLengthRecordDataset(path + "-images-idx3-ubyte.gz", 784, header_bytes=16,
                                              compression_type="GZIP").map(image)
    labels = tf.data.FixedLengthRecordDataset(path + "-labels-idx1-ubyte.gz", 1, header_bytes=8,
                                              compression_type="GZIP").map(label)
    return tf.data.Dataset.zip((images, labels)).take(count)


def make_net(data_format):
    shape = [1, 28, 28] if data_format == "channels_first" else [28, 28, 1]
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.Reshape(shape, input_shape=(784,)),
        layers.Conv2D(8, 5, padding="same", data_format=data_format, activation="relu"),
        layers.MaxPooling2D(2, 2, padding="same", data_format=data_format),
        layers.Conv2D(16, 5, padding="same", data_format=data_format, activation="relu"),
        layers.MaxPooling2D(2, 2, padding="same", data_format=data_format),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dropout(0.4),
        layers.Dense(10),
    ])


def model_fn(features, labels, mode, params, config):
    net = make_net(params["data_format"])
    images = features["image"] if isinstance(features, dict) else features
    logits = net(images, training=mode == estimator.ModeKeys.TRAIN)
    classes = tf.argmax(logits, axis=1)
    if mode == estimator.ModeKeys.PREDICT:
        predictions = {"classes": classes, "probabilities": tf.nn.softmax(logits)}
        return estimator.EstimatorSpec(mode, predictions=predictions,
                                       export_outputs={"classify": estimator.export.PredictOutput(predictions)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=classes)
    if mode == estimator.ModeKeys.EVAL:
        return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    tf.identity(accuracy[1], name="train_accuracy")
    tf.compat.v1.summary.scalar("train_accuracy", accuracy[1])
    optimizer = tf.compat.v1.train.AdamOptimizer(1e-3)
    return estimator.EstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(
        loss, tf.compat.v1.train.get_or_create_global_step()))


def train_input_fn(params):
    data = _records("train", TRAIN_COUNT).cache().shuffle(TRAIN_COUNT, seed=1)
    return data.batch(params["batch_size"]).repeat(EPOCHS)


def eval_input_fn(params):
    data = _records("t10k", EVAL_COUNT).batch(params["batch_size"])
    return tf.compat.v1.data.make_one_shot_iterator(data).get_next()
