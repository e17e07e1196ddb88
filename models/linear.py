"""Softmax regression on the raw pixels."""

import tensorflow as tf

from trainer.models.common import classifier_spec

tf1 = tf.compat.v1


def model_fn(features, labels, mode, params):
    logits = tf1.layers.dense(tf1.layers.flatten(features[params.get("feature_key", "x")]), units=params.get("num_classes", 10))
    return classifier_spec(logits, labels, mode)
