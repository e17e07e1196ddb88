"""The TensorFlow layers-tutorial CNN for 28x28 grey images, in its TF1 ``tf.layers`` form."""

import tensorflow as tf

from trainer.models.common import classifier_spec, dropout

tf1 = tf.compat.v1


def model_fn(features, labels, mode, params):
    x = features[params.get("feature_key", "x")]  # [batch, 28, 28, 1]
    conv1 = tf1.layers.conv2d(x, filters=32, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool1 = tf1.layers.max_pooling2d(conv1, pool_size=[2, 2], strides=2)
    conv2 = tf1.layers.conv2d(pool1, filters=64, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool2 = tf1.layers.max_pooling2d(conv2, pool_size=[2, 2], strides=2)
    flat = tf.reshape(pool2, [-1, 7 * 7 * 64])
    dense = tf1.layers.dense(flat, units=1024, activation=tf.nn.relu)
    dense = dropout(dense, params.get("dropout_rate", 0.4), mode)
    logits = tf1.layers.dense(dense, units=params.get("num_classes", 10))
    return classifier_spec(logits, labels, mode)
