"""A notebook exported as a script (2018 style): no main(), everything at import, ``tf.estimator``'s
canned calls on a custom model_fn with ``numpy_input_fn`` inputs. Unedited."""

import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

rng = np.random.RandomState(3)
x_train = rng.normal(size=(400, 2)).astype(np.float32)
y_train = (x_train[:, 0] * 2.0 - x_train[:, 1] + 0.5).astype(np.float32)


def linear_model(features, labels, mode):
    w = tf1.get_variable("w", [2, 1])
    b = tf1.get_variable("b", [1], initializer=tf1.zeros_initializer())
    y = tf.reshape(tf.matmul(features["x"], w) + b, [-1])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": y})
    loss = tf1.losses.mean_squared_error(labels, y)
    step = tf1.train.get_global_step()
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(linear_model, model_dir=sys.argv[1])
train_input = tf1.estimator.inputs.numpy_input_fn({"x": x_train}, y_train, batch_size=40, num_epochs=3, shuffle=True)
estimator.train(train_input)  # until the input ends: 3 epochs of 10 batches
eval_input = tf1.estimator.inputs.numpy_input_fn({"x": x_train}, y_train, batch_size=100, shuffle=False)
print("evaluation:", estimator.evaluate(eval_input))
print("weights:", estimator.get_variable_value("w").ravel().round(3).tolist())
