"""The TensorFlow layers-tutorial CNN, in its TF1 ``tf.layers`` form: written for 28x28 grey images, it
takes images of any size and channels ([batch, H, W, C]; the dense layer follows the size)."""

import tensorflow as tf

from trainer.errors import ConfigError
from trainer.models.common import classifier_spec, dropout

tf1 = tf.compat.v1


def model_fn(features, labels, mode, params):
    x = features[params.get("feature_key", "x")]  # [batch, H, W, C]; MNIST: [batch, 28, 28, 1]
    if x.shape.rank != 4:
        raise ConfigError(f"model=mnist: takes images [batch, H, W, C], the data's features are {x.shape}; "
                          "use model=mlp or model=linear")
    conv1 = tf1.layers.conv2d(x, filters=32, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool1 = tf1.layers.max_pooling2d(conv1, pool_size=[2, 2], strides=2)
    conv2 = tf1.layers.conv2d(pool1, filters=64, kernel_size=[5, 5], padding="same", activation=tf.nn.relu)
    pool2 = tf1.layers.max_pooling2d(conv2, pool_size=[2, 2], strides=2)
    flat = tf1.layers.flatten(pool2)  # 7 * 7 * 64 for 28x28
    dense = tf1.layers.dense(flat, units=1024, activation=tf.nn.relu)
    dense = dropout(dense, params.get("dropout_rate", 0.4), mode)
    logits = tf1.layers.dense(dense, units=params.get("num_classes", 10))
    return classifier_spec(logits, labels, mode)
