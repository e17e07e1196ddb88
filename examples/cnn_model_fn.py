"""A model_fn as TensorFlow's layers tutorial (2018) wrote it, unedited, for the ``train`` command:

    train model=model_fn model.fn=examples.cnn_model_fn.cnn_model_fn data=fashion_mnist

``tf.estimator`` is ``trainer.estimator`` under the command. The runner feeds the data's images as
``features["x"]`` (float32 ``[batch, 28, 28, 1]`` in [0, 1]) and class ids as ``labels``. The
model_fn returns no train_op, so the ``optimizer`` config trains it (and a sweep can vary it);
``params`` are ``model.params`` (``'+model.params={dropout: 0.3}'``).
"""

import tensorflow as tf

tf1 = tf.compat.v1


def cnn_model_fn(features, labels, mode, params):
    net = tf1.layers.conv2d(features["x"], 32, 5, padding="same", activation=tf.nn.relu, name="conv1")
    net = tf1.layers.max_pooling2d(net, 2, 2)
    net = tf1.layers.conv2d(net, 64, 5, padding="same", activation=tf.nn.relu, name="conv2")
    net = tf1.layers.max_pooling2d(net, 2, 2)
    net = tf1.layers.dense(tf1.layers.flatten(net), 256, activation=tf.nn.relu, name="dense")
    net = tf1.layers.dropout(net, rate=params.get("dropout", 0.4), training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf1.layers.dense(net, 10, name="logits")
    predictions = {"classes": tf.argmax(logits, axis=1), "probabilities": tf.nn.softmax(logits)}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    return tf.estimator.EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops={
        "accuracy": tf1.metrics.accuracy(labels=labels, predictions=predictions["classes"])})
