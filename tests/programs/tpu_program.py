"""A TPUEstimator program as BERT-era code wrote it, run with --use_tpu=false: the model_fn returns a
TPUEstimatorSpec with ``eval_metrics=(metric_fn, [labels, logits])`` and a ``scaffold_fn`` that warm
starts from another checkpoint; input_fns read ``params["batch_size"]``; the RunConfig gets a
``TPUClusterResolver`` built with no TPU name. Unedited."""

import json

import numpy as np
import tensorflow.compat.v1 as tf
from absl import app, flags

flags.DEFINE_string("model_dir", None, "")
flags.DEFINE_string("init_checkpoint", None, "a checkpoint to start the encoder from")
flags.DEFINE_bool("use_tpu", False, "")
flags.DEFINE_string("tpu", None, "the Cloud TPU to use")
flags.DEFINE_integer("train_steps", 60, "")
flags.DEFINE_string("report", None, "")
FLAGS = flags.FLAGS


def data(seed, n):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.int32)


def input_fn_builder(x, y, is_training):
    def input_fn(params):
        batch_size = params["batch_size"]
        d = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        if is_training:
            d = d.repeat().shuffle(200, seed=2)
        return d.batch(batch_size, drop_remainder=True)
    return input_fn


def model_fn_builder(init_checkpoint, use_tpu):
    def model_fn(features, labels, mode, params):
        with tf.variable_scope("encoder"):
            hidden = tf.layers.dense(features["x"], 8, activation=tf.nn.tanh, name="dense")
        logits = tf.layers.dense(hidden, 2, name="output")
        scaffold_fn = None
        if init_checkpoint:
            def tpu_scaffold():
                tf.train.init_from_checkpoint(init_checkpoint, {"encoder/": "encoder/"})
                return tf.train.Scaffold()
            scaffold_fn = tpu_scaffold
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"logits": logits}, scaffold_fn=scaffold_fn)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == tf.estimator.ModeKeys.TRAIN:
            optimizer = tf.train.AdamOptimizer(0.05)
            if use_tpu:
                optimizer = tf.estimator.tpu.CrossShardOptimizer(optimizer)
            train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
            return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn)

        def metric_fn(labels, logits):
            return {"eval_accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}

        return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]),
                                                 scaffold_fn=scaffold_fn)
    return model_fn


def main(_):
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(FLAGS.tpu if (FLAGS.tpu or FLAGS.use_tpu) else "")
    run_config = tf.estimator.tpu.RunConfig(
        cluster=resolver, model_dir=FLAGS.model_dir, save_checkpoints_steps=30, tf_random_seed=5,
        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=10))
    estimator = tf.estimator.tpu.TPUEstimator(
        use_tpu=FLAGS.use_tpu, model_fn=model_fn_builder(FLAGS.init_checkpoint, FLAGS.use_tpu), config=run_config,
        train_batch_size=32, eval_batch_size=16, predict_batch_size=8)
    x, y = data(0, 512)
    estimator.train(input_fn_builder(x, y, True), max_steps=FLAGS.train_steps)
    tx, ty = data(1, 100)  # 100 examples, batches of 16 dropping the remainder: 96 are read
    result = estimator.evaluate(input_fn_builder(tx, ty, False), steps=None)
    out = {k: float(v) for k, v in result.items()}
    print(json.dumps(out))
    if FLAGS.report:
        with open(FLAGS.report, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    app.run(main)
