"""``train.ema_decay``: an exponential moving average of the trainable variables, the
Estimator-era recipe (``tf.train.ExponentialMovingAverage(decay, global_step)``).

Training updates the averages after every step; they are saved in checkpoints beside the
weights (as ``<variable>/ExponentialMovingAverage``). Evaluation, predict and export read the
averages: the shared evaluation through a custom getter that hands the model_fn each variable's
average, the other graphs by restoring the averages into the model's variables.
"""

import tensorflow as tf

tf1 = tf.compat.v1


def make_average(decay: float, global_step):
    """The moving average; its decay is ``min(decay, (1 + step) / (10 + step))``, so early averages follow the weights."""
    return tf1.train.ExponentialMovingAverage(float(decay), num_updates=global_step)


def averaged_train_op(average, train_op, variables):
    """``train_op``, then the averages' update. The averages are created first, outside any control
    dependency (their initial values are the weights as initialised)."""
    average.apply(variables)
    with tf.control_dependencies([train_op]):
        return tf.group(average.apply(variables), name="train_op_and_average")


def averages_getter(average):
    """A variable-scope custom getter that returns each variable's average (the variable itself when it has none)."""

    def getter(getter, name, *args, **kwargs):  # TensorFlow passes the next getter as `getter`
        variable = getter(name, *args, **kwargs)
        averaged = average.average(variable)
        return variable if averaged is None else averaged

    return getter


def restore_map(decay: float):
    """A Saver's ``var_list`` for a graph without averages: each trainable variable restored from its
    average in the checkpoint, every other variable from its own name."""
    return tf1.train.ExponentialMovingAverage(float(decay)).variables_to_restore()
