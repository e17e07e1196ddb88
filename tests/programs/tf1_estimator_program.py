"""A TF 1.x Estimator program of 2018: tf.flags, tf.logging, tf.app.run, tf.contrib, a canned and a custom model."""
import json

import numpy as np
import tensorflow as tf
from tensorflow.python.estimator.model_fn import ModeKeys
from tensorflow_estimator.python.estimator.canned import metric_keys

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", "tf1_model", "where to write")
flags.DEFINE_integer("train_steps", 100, "steps")
flags.DEFINE_string("kind", "custom", "custom or dnn")

tf.logging.set_verbosity(tf.logging.INFO)


def make_data(n=512, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 4).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int32)
    return x, y


def model_fn(features, labels, mode, params):
    net = tf.layers.dense(features["x"], params.hidden, activation=tf.nn.relu)
    net = tf.contrib.layers.layer_norm(net)
    logits = tf.layers.dense(net, 2)
    predictions = {"class": tf.argmax(logits, 1)}
    if mode == ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == ModeKeys.EVAL:
        acc = tf.metrics.accuracy(labels, predictions["class"])
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={metric_keys.MetricKeys.ACCURACY: acc})
    opt = tf.train.AdagradOptimizer(params.learning_rate)
    train_op = opt.minimize(loss, global_step=tf.contrib.framework.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(_):
    x, y = make_data()
    train_input = tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=32, num_epochs=None, shuffle=False)
    eval_input = tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=128, num_epochs=1, shuffle=False)
    config = tf.estimator.RunConfig(tf_random_seed=1)
    if FLAGS.kind == "dnn":
        columns = [tf.feature_column.numeric_column("x", shape=[4])]
        est = tf.estimator.DNNClassifier([8], columns, model_dir=FLAGS.model_dir, config=config)
    else:
        hparams = tf.contrib.training.HParams(hidden=8, learning_rate=0.1)
        est = tf.estimator.Estimator(model_fn, model_dir=FLAGS.model_dir, params=hparams, config=config)
    est.train(train_input, steps=FLAGS.train_steps)
    result = est.evaluate(eval_input)
    tf.logging.info("result %s", result)
    print("RESULT " + json.dumps({k: float(v) for k, v in sorted(result.items())}))


if __name__ == "__main__":
    tf.app.run()
