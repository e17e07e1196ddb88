"""A user's own model_fns and feed functions, outside the trainer package."""

import tensorflow as tf

from trainer.estimator import EstimatorSpec
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


def _linear_classifier(features, labels, mode):
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    return spec, tf1.train.GradientDescentOptimizer(0.1)


def step_by_three(features, labels, mode):
    """A train op that moves the global step by 3 (as models counting examples or sub-steps do)."""
    spec, optimizer = _linear_classifier(features, labels, mode)
    if mode != "train":
        return spec
    step = tf1.train.get_global_step()
    with tf.control_dependencies([optimizer.minimize(spec.loss)]):
        train_op = tf1.assign_add(step, 3)
    return spec._replace(train_op=train_op)


def forgets_global_step(features, labels, mode):
    """The commonest slip: ``minimize(loss)`` without ``global_step``; the step never moves."""
    spec, optimizer = _linear_classifier(features, labels, mode)
    if mode != "train":
        return spec
    return spec._replace(train_op=optimizer.minimize(spec.loss))


def empty_eval_input(params):
    """An eval input_fn whose filter drops every example."""
    images = tf.zeros([8, 28, 28, 1])
    labels = tf.zeros([8], tf.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": images}, labels)).filter(lambda f, l: l > 0).batch(4)


def endless_eval_input(params):
    """An eval input_fn that repeats for ever (a training input_fn reused for evaluation)."""
    images = tf.random.stateless_uniform([16, 28, 28, 1], seed=[5, 6])
    labels = tf.random.stateless_uniform([16], seed=[7, 8], maxval=10, dtype=tf.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": images}, labels)).repeat().batch(4)


def train_input(params):
    images = tf.random.stateless_uniform([64, 28, 28, 1], seed=[1, 2])
    labels = tf.random.stateless_uniform([64], seed=[3, 4], maxval=10, dtype=tf.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": images}, labels)).repeat().batch(params["batch_size"])


def large_classifier_style(features, labels, mode, params):
    """In the style of large Estimator-era classifiers: an optional ``init_from_checkpoint`` of the
    encoder inside the model_fn, a ``loss`` name scope, metrics named ``eval_*``, its own optimizer
    and a train op that assigns the global step itself."""
    with tf1.variable_scope("encoder"):
        hidden = tf1.layers.dense(tf1.layers.flatten(features["x"]), 32, activation=tf.nn.tanh, name="dense")
    with tf1.variable_scope("classifier"):
        logits = tf1.layers.dense(hidden, 10, name="output")
    if params.get("init_checkpoint"):
        tf1.train.init_from_checkpoint(params["init_checkpoint"], {"encoder/": "encoder/"})
    classes = tf.argmax(logits, axis=1)
    if mode == "infer":
        return EstimatorSpec(mode, predictions={"classes": classes})
    with tf1.name_scope("loss"):
        loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == "eval":
        return EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "eval_accuracy": tf1.metrics.accuracy(labels=labels, predictions=classes),
            "eval_loss": tf1.metrics.mean(loss)})
    global_step = tf1.train.get_or_create_global_step()
    tvars = tf1.trainable_variables()
    grads, _ = tf.clip_by_global_norm(tf.gradients(loss, tvars), clip_norm=1.0)
    train_op = tf1.train.AdamOptimizer(1e-3).apply_gradients(zip(grads, tvars))
    train_op = tf.group(train_op, [global_step.assign(global_step + 1)])
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def raises_in_model_fn(features, labels, mode):
    width = 64
    return EstimatorSpec(mode, loss=width.value)


def top1_accuracy_only(features, labels, mode):
    """A classifier whose accuracy metric has a name of its own."""
    spec, _ = _linear_classifier(features, labels, mode)
    if mode == "eval":
        return spec._replace(eval_metric_ops={"top1_accuracy": spec.eval_metric_ops["accuracy"]})
    return spec


def no_accuracy(features, labels, mode):
    """A model with no accuracy metric at all (a regression-like eval: the loss only)."""
    spec, _ = _linear_classifier(features, labels, mode)
    return spec._replace(eval_metric_ops={}) if mode == "eval" else spec


def _at_step(step_value):
    step = tf1.train.get_or_create_global_step()
    return tf.equal(step, step_value)


def batchnorm_nan_at_5(features, labels, mode):
    """Batch norm whose input turns NaN at global step 5: the moving statistics would take the NaN."""
    x = tf1.layers.flatten(features["x"])
    if mode == "train":
        x = x * tf.where(_at_step(5), float("nan"), 1.0)
    x = tf1.layers.batch_normalization(x, training=mode == "train", name="bn")
    return classifier_spec(tf1.layers.dense(x, 10), labels, mode)


def infinite_gradient_at_5(features, labels, mode):
    """A finite loss whose gradient is infinite at global step 5 (sqrt at 0)."""
    layer = tf1.layers.Dense(10, name="out")
    spec = classifier_spec(layer(tf1.layers.flatten(features["x"])), labels, mode)
    if mode != "train":
        return spec
    kernel = layer.kernel
    scale = tf.where(_at_step(5), 0.0, 1.0)
    return spec._replace(loss=spec.loss + 1e-3 * tf.sqrt(scale * tf.reduce_sum(tf.square(kernel))))


def always_nan(features, labels, mode):
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    return spec._replace(loss=spec.loss * float("nan")) if mode == "train" else spec


def nan_except_every_4th_step(features, labels, mode):
    """A training loss that is NaN at three steps of every four: most of a run is skipped."""
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    if mode != "train":
        return spec
    scale = tf.where(tf.equal(tf1.train.get_global_step() % 4, 0), 1.0, float("nan"))
    return spec._replace(loss=spec.loss * scale)


def poisons_a_variable_from_5(features, labels, mode):
    """Its own train op writes NaN into a variable the loss does not read, from global step 5 on:
    the loss stays finite while the state is already bad."""
    spec, optimizer = _linear_classifier(features, labels, mode)
    if mode != "train":
        return spec
    spare = tf1.get_variable("spare", [], initializer=tf1.zeros_initializer())
    step = tf1.train.get_global_step()
    train_op = optimizer.minimize(spec.loss, global_step=step)
    with tf.control_dependencies([train_op]):
        poison = spare.assign(tf.where(step >= 5, float("nan"), 0.0))
    return spec._replace(train_op=tf.group(train_op, poison))


def keras_in_model_fn(features, labels, mode, params):
    """The Keras-inside-model_fn style: a new Sequential (and new weights) on every call."""
    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    logits = model(features["x"], training=mode == "train")
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    return EstimatorSpec(mode=mode, loss=loss, predictions={"classes": tf.argmax(logits, 1)})


def nan_eval_metric(features, labels, mode):
    """An MLP that trains normally but reports a NaN eval metric."""
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    if mode != "eval":
        return spec
    metrics = dict(spec.eval_metric_ops, broken=tf1.metrics.mean(tf.constant(float("nan"))))
    return spec._replace(eval_metric_ops=metrics)


def reads_absl_flags(features, labels, mode):
    """A model_fn cut out of a program whose main() parsed absl flags: it reads FLAGS."""
    from absl import flags

    if "hidden_size" not in flags.FLAGS:
        flags.DEFINE_integer("hidden_size", 8, "")
    logits = tf1.layers.dense(tf1.layers.dense(tf1.layers.flatten(features["x"]), flags.FLAGS.hidden_size), 10)
    return classifier_spec(logits, labels, mode)


def keeps_two_checkpoints(features, labels, mode):
    """A model_fn whose Scaffold brings its own Saver, keeping two checkpoints (as Estimator honoured)."""
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    return spec._replace(scaffold=tf1.train.Scaffold(saver=tf1.train.Saver(max_to_keep=2))) if mode == "train" else spec


def own_momentum_classifier(features, labels, mode):
    """A model_fn with its own train op, as Estimator-era model_fns returned it: ``minimize`` with the
    global step (Momentum: optimizer slots too)."""
    logits = tf1.layers.dense(tf1.layers.dense(tf1.layers.flatten(features["x"]), 16, tf.nn.relu), 10)
    spec = classifier_spec(logits, labels, mode)
    if mode != "train":
        return spec
    optimizer = tf1.train.MomentumOptimizer(0.05, 0.9)
    return spec._replace(train_op=optimizer.minimize(spec.loss, global_step=tf1.train.get_global_step()))


def assigns_its_update(features, labels, mode):
    """A train op that moves the weights without an optimizer (a hand-written SGD step)."""
    logits = tf1.layers.dense(tf1.layers.flatten(features["x"]), 10)
    spec = classifier_spec(logits, labels, mode)
    if mode != "train":
        return spec
    weights = tf1.trainable_variables()
    grads = tf.gradients(spec.loss, weights)
    updates = [w.assign_sub(0.1 * g) for w, g in zip(weights, grads)]
    return spec._replace(train_op=tf.group(*updates, tf1.assign_add(tf1.train.get_global_step(), 1)))
