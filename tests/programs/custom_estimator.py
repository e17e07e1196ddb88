"""A program in the style of TensorFlow's custom-Estimator tutorial: a model_fn that reads its
feature columns, hidden layer sizes and class count from ``params`` and builds its input layer
with ``tf.feature_column.input_layer``; Dataset input_fns that take their arrays and batch size
as arguments. Written against ``tf.estimator``: besides the imports, main()'s
``lambda: train_input_fn(train_x, train_y, batch_size)`` became the module-level functions at the
end, which take the batch size from ``params``. The feature columns come from the config.
"""

import numpy as np
import tensorflow.compat.v1 as tf

import trainer.estimator as estimator

MEASUREMENTS = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth"]


def flowers(seed, count):
    """Iris-like data: three species of four measurements each, in clusters that overlap a little."""
    rng = np.random.default_rng(seed)
    species = rng.integers(0, 3, count)
    centres = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]], np.float32)
    values = centres[species] + rng.normal(0, 0.25, (count, 4)).astype(np.float32)
    return {name: values[:, i] for i, name in enumerate(MEASUREMENTS)}, species.astype(np.int32)


def training_batches(features, labels, batch_size):
    examples = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    return examples.shuffle(1000, seed=3).repeat().batch(batch_size)


def evaluation_batches(features, labels, batch_size):
    examples = dict(features) if labels is None else (dict(features), labels)
    return tf.data.Dataset.from_tensor_slices(examples).batch(batch_size)


def dnn_model(features, labels, mode, params):
    net = tf.feature_column.input_layer(features, params["feature_columns"])
    for width in params["hidden_units"]:
        net = tf.layers.dense(net, width, activation=tf.nn.relu)
    logits = tf.layers.dense(net, params["n_classes"])
    predicted = tf.argmax(logits, 1)
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"class_ids": predicted[:, tf.newaxis],
                                                          "probabilities": tf.nn.softmax(logits)})
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.metrics.accuracy(labels=labels, predictions=predicted, name="acc_op")
    tf.summary.scalar("accuracy", accuracy[1])
    if mode == estimator.ModeKeys.EVAL:
        return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    train_op = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


(train_x, train_y), (test_x, test_y) = flowers(0, 600), flowers(1, 150)


def train_input(params):
    return training_batches(train_x, train_y, params["batch_size"])


def eval_input(params):
    return evaluation_batches(test_x, test_y, params["batch_size"])
