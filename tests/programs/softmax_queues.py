"""A program in the 2017 style: softmax regression on ``tf.Variable`` weights (the model of the
"MNIST for ML beginners" era, in a model_fn) fed by queue runners (``slice_input_producer`` and
``shuffle_batch``; the evaluation input reads one epoch, ``num_epochs=1``). Written against
``tf.estimator``; the only edits are the imports.
"""

import tensorflow.compat.v1 as tf

import trainer.estimator

import fashion

train_images, train_labels = fashion.load("train", 2000)
test_images, test_labels = fashion.load("t10k", 500)


def model_fn(features, labels, mode, params):
    x = features["pixels"]
    W = tf.Variable(tf.zeros([784, 10]), name="W")
    b = tf.Variable(tf.zeros([10]), name="b")
    logits = tf.matmul(x, W) + b
    classes = tf.argmax(logits, 1)
    if mode == trainer.estimator.ModeKeys.PREDICT:
        return trainer.estimator.EstimatorSpec(mode, predictions={"classes": classes, "logits": logits})
    cross_entropy = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    if mode == trainer.estimator.ModeKeys.TRAIN:
        train_step = tf.train.GradientDescentOptimizer(params["learning_rate"]).minimize(
            cross_entropy, global_step=tf.train.get_global_step())
        return trainer.estimator.EstimatorSpec(mode, loss=cross_entropy, train_op=train_step)
    accuracy = tf.metrics.accuracy(labels, classes)
    return trainer.estimator.EstimatorSpec(mode, loss=cross_entropy, eval_metric_ops={"accuracy": accuracy})


def train_input_fn(params):
    image, label = tf.train.slice_input_producer([train_images, train_labels], shuffle=True, seed=7)
    images, labels = tf.train.shuffle_batch([image, label], batch_size=params["batch_size"], capacity=1000,
                                            min_after_dequeue=200, seed=7)
    return {"pixels": images}, labels


def eval_input_fn(params):
    image, label = tf.train.slice_input_producer([test_images, test_labels], num_epochs=1, shuffle=False)
    images, labels = tf.train.batch([image, label], batch_size=params["batch_size"], allow_smaller_final_batch=True)
    return {"pixels": images}, labels
