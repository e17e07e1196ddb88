"""An Estimator-era program as its author wrote it (2019 style), unedited: absl flags, a model_fn
factory closure, Dataset input_fns as lambdas over arrays, ``tf.estimator.train_and_evaluate`` with a
``BestExporter``, an early-stopping hook, then ``predict`` and ``export_saved_model`` in ``main()``.

It runs on TensorFlow <= 2.15 with tensorflow-estimator, and here through the launcher
(``train-estimator estimator_main.py --model_dir=...``), or with ``tf.estimator`` changed to
``trainer.estimator``.
"""

import json
import os

import numpy as np
import tensorflow.compat.v1 as tf
from absl import app, flags

flags.DEFINE_string("model_dir", None, "where checkpoints go")
flags.DEFINE_integer("max_steps", 120, "training steps")
flags.DEFINE_float("learning_rate", 0.1, "SGD learning rate")
flags.DEFINE_integer("batch_size", 32, "examples per step")
flags.DEFINE_string("report", None, "write the results here as JSON")
FLAGS = flags.FLAGS

N_CLASSES = 3


def make_data(seed, count):
    rng = np.random.RandomState(seed)
    centres = np.array([[2.0, 0.0, 0.0, 1.0], [0.0, 2.0, 1.0, 0.0], [0.0, 0.0, 2.0, 2.0]], np.float32)
    labels = rng.randint(0, N_CLASSES, count).astype(np.int64)
    values = centres[labels] + rng.normal(0, 0.6, (count, 4)).astype(np.float32)
    return values, labels


def make_model_fn(hidden_units, learning_rate):
    def model_fn(features, labels, mode, params, config):
        net = features["x"]
        for i, width in enumerate(hidden_units):
            net = tf.layers.dense(net, width, activation=tf.nn.relu, name="hidden_%d" % i)
        logits = tf.layers.dense(net, N_CLASSES, name="logits")
        classes = tf.argmax(logits, axis=1)
        predictions = {"class_ids": classes, "probabilities": tf.nn.softmax(logits)}
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(
                mode, predictions=predictions,
                export_outputs={"predict": tf.estimator.export.PredictOutput(predictions)})
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.EVAL:
            metrics = {"accuracy": tf.metrics.accuracy(labels=labels, predictions=classes)}
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
        optimizer = tf.train.GradientDescentOptimizer(learning_rate)
        train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
        logging_hook = tf.train.LoggingTensorHook({"loss": loss}, every_n_iter=50)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[logging_hook])

    return model_fn


def serving_input_receiver_fn():
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def main(_):
    train_x, train_y = make_data(0, 600)
    test_x, test_y = make_data(1, 150)
    config = tf.estimator.RunConfig(tf_random_seed=7, save_checkpoints_steps=40, save_summary_steps=20,
                                    log_step_count_steps=40)
    estimator = tf.estimator.Estimator(model_fn=make_model_fn([16], FLAGS.learning_rate), model_dir=FLAGS.model_dir,
                                       config=config)
    train_input = lambda: tf.data.Dataset.from_tensor_slices(  # noqa: E731
        ({"x": train_x}, train_y)).shuffle(600, seed=1).repeat().batch(FLAGS.batch_size)
    eval_input = lambda: tf.data.Dataset.from_tensor_slices(({"x": test_x}, test_y)).batch(50)  # noqa: E731
    early_stop = tf.estimator.experimental.stop_if_no_decrease_hook(
        estimator, "loss", max_steps_without_decrease=1000, run_every_secs=None, run_every_steps=40)
    exporter = tf.estimator.BestExporter(name="best", serving_input_receiver_fn=serving_input_receiver_fn,
                                         exports_to_keep=2)
    train_spec = tf.estimator.TrainSpec(input_fn=train_input, max_steps=FLAGS.max_steps, hooks=[early_stop])
    eval_spec = tf.estimator.EvalSpec(input_fn=eval_input, steps=None, exporters=[exporter], throttle_secs=0,
                                      start_delay_secs=0)
    metrics, exports = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    predicted = list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": test_x[:10]}).batch(4)))
    exported = estimator.export_saved_model(os.path.join(FLAGS.model_dir, "export", "final"),
                                            serving_input_receiver_fn)
    report = {"metrics": {k: float(v) for k, v in metrics.items()}, "exports": [e and e.decode() for e in exports],
              "predicted_classes": [int(p["class_ids"]) for p in predicted], "exported": exported.decode(),
              "variables": sorted(estimator.get_variable_names())}
    print(json.dumps(report))
    if FLAGS.report:
        with open(FLAGS.report, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    flags.mark_flag_as_required("model_dir")
    app.run(main)
