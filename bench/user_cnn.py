"""The reference a user holds: the layers-tutorial CNN as TensorFlow's Estimator tutorial wrote it,
trained by the user's own ``while: sess.run(train_op)`` loop, with no runner anywhere.

The model_fn is the tutorial's (``tf.layers``, ``tf.layers.dropout(training=...)``, sparse softmax
cross-entropy, ``AdamOptimizer.minimize`` with the global step); the input is the tutorial-era
``tf.data`` pipeline over in-memory arrays fed through placeholders (a full shuffle, repeat, batch,
prefetch). The runner is measured against this graph: what the runner adds to every step shows
only here, not in a bare loop over the runner's own graph.
"""

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def cnn_model_fn(features, labels, mode, params):
    x = tf.reshape(features["x"], [-1, 28, 28, 1])
    conv1 = tf1.layers.conv2d(x, filters=32, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool1 = tf1.layers.max_pooling2d(conv1, pool_size=[2, 2], strides=2)
    conv2 = tf1.layers.conv2d(pool1, filters=64, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool2 = tf1.layers.max_pooling2d(conv2, pool_size=[2, 2], strides=2)
    flat = tf.reshape(pool2, [-1, 7 * 7 * 64])
    dense = tf1.layers.dense(flat, units=1024, activation=tf.nn.relu)
    dropout = tf1.layers.dropout(dense, rate=0.4, training=mode == "train")
    logits = tf1.layers.dense(dropout, units=10)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    optimizer = tf1.train.AdamOptimizer(learning_rate=params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
    return loss, train_op


def build(images: np.ndarray, labels: np.ndarray, batch_size: int, seed: int = 0):
    """The user's graph. Returns (graph, train_op, the iterator's initializer, its feed dict)."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(seed)
        tf1.train.get_or_create_global_step()
        x_ph = tf1.placeholder(tf.float32, [None, 28, 28])
        y_ph = tf1.placeholder(tf.int64, [None])
        ds = tf.data.Dataset.from_tensor_slices(({"x": x_ph}, y_ph)).shuffle(len(images), seed=seed).repeat()
        ds = ds.batch(batch_size).prefetch(1)
        iterator = tf1.data.make_initializable_iterator(ds)
        features, batch_labels = iterator.get_next()
        _, train_op = cnn_model_fn(features, batch_labels, "train", {"learning_rate": 1e-3})
        init = tf1.global_variables_initializer()
    feed = {x_ph: images.astype(np.float32) / 255.0, y_ph: labels.astype(np.int64)}
    return graph, train_op, (init, iterator.initializer), feed
