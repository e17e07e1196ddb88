"""A cloud-training program as its author wrote it (the 2018 "trainer/task.py" style), unedited:
argparse, a canned-free model_fn, ``RunConfig()`` left to read the cluster and this task's role
from ``TF_CONFIG``, and ``tf.estimator.train_and_evaluate`` with a ``LatestExporter``. The same
program runs as the chief, a ps, a worker or the evaluator: the platform sets ``TF_CONFIG``.
"""

import argparse

import numpy as np
import tensorflow as tf


def make_data(seed, count):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(count, 4)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.int64)


def model_fn(features, labels, mode, params):
    net = tf.compat.v1.layers.dense(features["x"], params["hidden"], activation=tf.nn.relu, name="hidden")
    logits = tf.compat.v1.layers.dense(net, 2, name="logits")
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes},
                                          export_outputs={"predict": tf.estimator.export.PredictOutput(
                                              {"classes": classes})})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": tf.compat.v1.metrics.accuracy(labels, classes)})
    train_op = tf.compat.v1.train.AdagradOptimizer(0.3).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def serving_input_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--train-steps", type=int, default=200)
    args = parser.parse_args()
    train_x, train_y = make_data(0, 1000)
    test_x, test_y = make_data(1, 200)
    run_config = tf.estimator.RunConfig(save_checkpoints_steps=50, tf_random_seed=5)
    estimator = tf.estimator.Estimator(model_fn, model_dir=args.job_dir, config=run_config, params={"hidden": 8})
    train_spec = tf.estimator.TrainSpec(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": train_x}, train_y)).repeat().shuffle(1000).batch(50),
        max_steps=args.train_steps)
    exporter = tf.estimator.LatestExporter("latest", serving_input_fn, exports_to_keep=1)
    eval_spec = tf.estimator.EvalSpec(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": test_x}, test_y)).batch(100), steps=None,
        exporters=[exporter], start_delay_secs=1, throttle_secs=1)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)


if __name__ == "__main__":
    main()
