"""A fully connected ReLU network on the flattened image."""

import tensorflow as tf

from trainer.models.common import classifier_spec, dropout

tf1 = tf.compat.v1


def model_fn(features, labels, mode, params):
    h = tf1.layers.flatten(features[params.get("feature_key", "x")])
    for units in params.get("hidden_units", [128, 64]):
        h = tf1.layers.dense(h, units=units, activation=tf.nn.relu)
        h = dropout(h, params.get("dropout_rate", 0.0), mode)
    logits = tf1.layers.dense(h, units=params.get("num_classes", 10))
    return classifier_spec(logits, labels, mode)
