"""Estimator-era user code, ported by changing imports only: TensorFlow's layers-tutorial CNN
model_fn in its TF1 form, and input_fns.

The only edits from the tutorial: ``import tensorflow.compat.v1 as tf`` and
``tf.estimator.`` -> ``trainer.estimator.``.
"""

import numpy as np
import tensorflow.compat.v1 as tf

import trainer.estimator
from trainer.data.sources.synthetic import make_synthetic


def cnn_model_fn(features, labels, mode, params):
    input_layer = tf.reshape(features["x"], [-1, 28, 28, 1])
    conv1 = tf.layers.conv2d(inputs=input_layer, filters=8, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool1 = tf.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)
    conv2 = tf.layers.conv2d(inputs=pool1, filters=16, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool2 = tf.layers.max_pooling2d(inputs=conv2, pool_size=[2, 2], strides=2)
    pool2_flat = tf.reshape(pool2, [-1, 7 * 7 * 16])
    dense = tf.layers.dense(inputs=pool2_flat, units=64, activation=tf.nn.relu)
    dropout = tf.layers.dropout(inputs=dense, rate=0.4, training=mode == trainer.estimator.ModeKeys.TRAIN)
    logits = tf.layers.dense(inputs=dropout, units=10)

    predictions = {
        "classes": tf.argmax(input=logits, axis=1),
        "probabilities": tf.nn.softmax(logits, name="softmax_tensor"),
    }
    if mode == trainer.estimator.ModeKeys.PREDICT:
        return trainer.estimator.EstimatorSpec(mode=mode, predictions=predictions)

    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)

    if mode == trainer.estimator.ModeKeys.TRAIN:
        optimizer = tf.train.GradientDescentOptimizer(learning_rate=params.get("learning_rate", 0.1))
        train_op = optimizer.minimize(loss=loss, global_step=tf.train.get_global_step())
        return trainer.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    eval_metric_ops = {"accuracy": tf.metrics.accuracy(labels=labels, predictions=predictions["classes"])}
    return trainer.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=eval_metric_ops)


class CountingHook(tf.train.SessionRunHook):
    """Records how often it ran, under a name, into a class-level table."""

    runs = {}

    def __init__(self, name):
        self.name = name

    def after_run(self, run_context, run_values):
        CountingHook.runs[self.name] = CountingHook.runs.get(self.name, 0) + 1


def model_fn_with_hooks(features, labels, mode, params):
    """A linear model whose spec carries training, chief, evaluation and prediction hooks and a Scaffold."""
    logits = tf.layers.dense(tf.layers.flatten(features["x"]), 10)
    predictions = {"classes": tf.argmax(logits, 1)}
    if mode == trainer.estimator.ModeKeys.PREDICT:
        return trainer.estimator.EstimatorSpec(mode=mode, predictions=predictions,
                                               prediction_hooks=[CountingHook("prediction")])
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == trainer.estimator.ModeKeys.TRAIN:
        marker = tf.get_variable("init_fn_marker", [], initializer=tf.zeros_initializer(), trainable=False)
        set_marker = marker.assign(42.0)  # ops must exist before the graph is finalized

        def init_fn(scaffold, session):
            session.run(set_marker)

        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=tf.train.get_global_step())
        return trainer.estimator.EstimatorSpec(
            mode=mode, loss=loss, train_op=train_op, training_hooks=[CountingHook("training")],
            training_chief_hooks=[CountingHook("chief")], scaffold=tf.train.Scaffold(init_fn=init_fn))
    return trainer.estimator.EstimatorSpec(
        mode=mode, loss=loss, eval_metric_ops={"accuracy": tf.metrics.accuracy(labels, predictions["classes"])},
        evaluation_hooks=[CountingHook("evaluation")])


def _data():
    data = make_synthetic(512, 128)
    return (data.train_x[..., None] / 255.0).astype(np.float32), data.train_y, \
        (data.test_x[..., None] / 255.0).astype(np.float32), data.test_y


def train_input_fn(params):
    x, y, _, _ = _data()
    ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
    return ds.shuffle(512, seed=1).repeat().batch(params["batch_size"], drop_remainder=True)


def eval_input_fn(params):
    _, _, x, y = _data()
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(64)


def train_input_fn_tensors(params):
    """The older style: (features, labels) tensors from a one-shot iterator."""
    it = tf.data.make_one_shot_iterator(train_input_fn(params))
    return it.get_next()


def cnn_model_fn_exports(features, labels, mode, params):
    """The tutorial CNN with explicit export_outputs, as Estimator users wrote them."""
    spec = cnn_model_fn(features, labels, mode, params)
    if mode != trainer.estimator.ModeKeys.PREDICT:
        return spec
    predictions = spec.predictions
    return spec._replace(export_outputs={
        "serving_default": trainer.estimator.export.PredictOutput(predictions),
        "classify": trainer.estimator.export.ClassificationOutput(scores=predictions["probabilities"],
                                                                  classes=tf.as_string(predictions["classes"])),
    })
