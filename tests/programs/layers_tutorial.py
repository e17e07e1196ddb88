"""A program in the style of TensorFlow's 2018 layers tutorial: a three-argument model_fn built
from ``tf.layers``, input_fns from ``numpy_input_fn`` made at module level, and a tensor named in
the graph for a ``LoggingTensorHook`` to print. Written against ``tf.estimator``; the only edits
are the imports (``tensorflow.compat.v1``, ``trainer.estimator``).
"""

import tensorflow.compat.v1 as tf

import trainer.estimator as estimator

import fashion

tf.logging.set_verbosity(tf.logging.INFO)


def conv_classifier(features, labels, mode):
    is_training = mode == estimator.ModeKeys.TRAIN
    net = tf.reshape(features["x"], [-1, 28, 28, 1])
    for filters in (8, 16):
        net = tf.layers.conv2d(net, filters, [5, 5], padding="same", activation=tf.nn.relu)
        net = tf.layers.max_pooling2d(net, [2, 2], 2)
    net = tf.layers.dense(tf.reshape(net, [-1, 7 * 7 * 16]), 128, activation=tf.nn.relu)
    net = tf.layers.dropout(net, rate=0.4, training=is_training)
    logits = tf.layers.dense(net, 10)

    # Named so that a LoggingTensorHook can print it.
    probs = tf.nn.softmax(logits, name="class_probs")
    predictions = {"classes": tf.argmax(logits, axis=1), "probabilities": probs}
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode=mode, predictions=predictions)

    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if is_training:
        step = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
        return estimator.EstimatorSpec(mode=mode, loss=loss, train_op=step)
    return estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops={
        "accuracy": tf.metrics.accuracy(labels=labels, predictions=predictions["classes"])})


train_x, train_y = fashion.load("train", 2000)
eval_x, eval_y = fashion.load("t10k", 500)

train_input_fn = estimator.inputs.numpy_input_fn(x={"x": train_x}, y=train_y, batch_size=50,
                                                 num_epochs=None, shuffle=True)
eval_input_fn = estimator.inputs.numpy_input_fn(x={"x": eval_x}, y=eval_y, num_epochs=1, shuffle=False)
predict_input_fn = estimator.inputs.numpy_input_fn(x={"x": eval_x[:7]}, num_epochs=1, shuffle=False)
