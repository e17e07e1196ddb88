"""What the built-in classifiers share: the spec around logits, and step-keyed dropout."""

import tensorflow as tf

from trainer.estimator import EstimatorSpec, ModeKeys

tf1 = tf.compat.v1


def classifier_spec(logits, labels, mode) -> EstimatorSpec:
    """Softmax cross-entropy loss, class predictions and an accuracy metric for ``logits``.

    No ``train_op``: the runner adds one from the ``optimizer`` config.
    """
    classes = tf.argmax(logits, axis=1)
    predictions = {"classes": classes, "probabilities": tf.nn.softmax(logits, name="softmax")}
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode=mode, predictions=predictions)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    eval_metric_ops = {"accuracy": tf1.metrics.accuracy(labels=labels, predictions=classes)}
    return EstimatorSpec(mode=mode, predictions=predictions, loss=loss, eval_metric_ops=eval_metric_ops)


def dropout(x, rate: float, mode):
    """Dropout whose mask is a function of (seed, global step, call site), not of a random state.

    Stateful random ops restart from their seed after a restore; keyed by the
    restored global step, a resumed run draws the masks an uninterrupted run would.
    """
    if mode != ModeKeys.TRAIN or not rate:
        return x
    seed = tf1.get_default_graph().seed or 0  # train.seed
    step = tf.cast(tf1.train.get_or_create_global_step(), tf.int32)
    site = len(tf1.get_collection("stateless_dropout_sites"))
    tf1.add_to_collection("stateless_dropout_sites", x)
    return tf.nn.experimental.stateless_dropout(x, rate=rate, seed=tf.stack([seed + site, step]))
