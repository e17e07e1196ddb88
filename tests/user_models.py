"""A user's own model_fns and feed functions, outside the trainer package."""

import tensorflow as tf

from trainer.models.common import classifier_spec

tf1 = tf.compat.v1


def nan_after_5(features, labels, mode, params):
    """An MLP whose training loss turns NaN from global step 5 on."""
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    if mode != "train":
        return spec
    step = tf1.train.get_or_create_global_step()
    loss = tf.where(step >= 5, tf.constant(float("nan")), spec.loss)
    return spec._replace(loss=loss)


def scaled_loss(features, labels, mode, params):
    """A linear model whose loss is multiplied by a feedable ``loss_scale`` (default 1)."""
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    if mode != "train":
        return spec
    scale = tf1.placeholder_with_default(1.0, [], name="loss_scale")
    return spec._replace(loss=spec.loss * scale)


def zero_scale():
    return {"loss_scale": 0.0}
