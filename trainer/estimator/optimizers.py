"""The optimizers of Estimator's canned models and heads: a name (``'Adagrad'``, ``'Adam'``, ``'Ftrl'``,
``'RMSProp'``, ``'SGD'``), an instance, or a callable returning one, each as Estimator took it.

Names build the Keras (``tf_keras.optimizers.legacy``) optimizers Estimator 2.x built, so checkpoints
carry its slot names (``training/Adagrad/dnn/logits/kernel/accumulator``). Instances may also be TF1
optimizers (``tf.compat.v1.train.ProximalAdagradOptimizer(...)``, as TF1 programs passed them) or the
newer Keras optimizers, which are rebuilt as their legacy twins (Estimator refused them in graph mode).
A Keras instance is copied from its config for every graph, since one instance cannot serve the
training graph and then an evaluation graph.
"""

import inspect

import tensorflow as tf

NAMES = ("Adagrad", "Adam", "Ftrl", "RMSProp", "SGD")


def _keras():
    import tf_keras

    return tf_keras


def _legacy_classes():
    legacy = _keras().optimizers.legacy
    return {"Adagrad": legacy.Adagrad, "Adam": legacy.Adam, "Ftrl": legacy.Ftrl, "RMSProp": legacy.RMSprop,
            "SGD": legacy.SGD}


def get_optimizer(opt, learning_rate=None):
    """The optimizer for one graph. A name gets ``learning_rate``, or the Keras class's own default
    where ``learning_rate`` is None (as Estimator's DNN models did)."""
    if isinstance(opt, str):
        if opt not in NAMES:
            raise ValueError(f"optimizer {opt!r} is not one of {', '.join(NAMES)}; give one of those names, "
                             f"an optimizer instance, or a function returning one")
        cls = _legacy_classes()[opt]
        if learning_rate is None and not _has_default_learning_rate(cls):
            learning_rate = 0.05
        return cls() if learning_rate is None else cls(learning_rate=learning_rate)
    if callable(opt) and not _is_optimizer(opt):
        opt = opt()
    if isinstance(opt, tf.compat.v1.train.Optimizer):
        return opt
    keras = _keras()
    if isinstance(opt, keras.optimizers.legacy.Optimizer):
        return type(opt).from_config(opt.get_config())
    if isinstance(opt, keras.optimizers.Optimizer):
        return keras.__internal__.optimizers.convert_to_legacy_optimizer(opt)
    raise ValueError(f"optimizer must be one of {', '.join(NAMES)}, a tf_keras or tf.compat.v1.train optimizer, "
                     f"or a function returning one; got {type(opt).__name__}")


def _is_optimizer(opt) -> bool:
    keras = _keras()
    return isinstance(opt, (tf.compat.v1.train.Optimizer, keras.optimizers.legacy.Optimizer,
                            keras.optimizers.Optimizer))


def _has_default_learning_rate(cls) -> bool:
    parameter = inspect.signature(cls.__init__).parameters.get("learning_rate")
    return parameter is not None and parameter.default is not inspect.Parameter.empty


def is_tf1(opt) -> bool:
    return isinstance(opt, tf.compat.v1.train.Optimizer)


def minimize(opt, loss, var_list, advance_step: bool = True):
    """The op applying ``opt``'s update of ``var_list`` for ``loss``; with ``advance_step`` it also adds
    one to the global step (the Keras optimizer counts its iterations in it, as under Estimator)."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    if is_tf1(opt):
        return opt.minimize(loss, global_step=global_step if advance_step else None, var_list=var_list)
    if advance_step:
        opt.iterations = global_step
    return opt.get_updates(loss, var_list)[0]


def _tf1_classes():
    train = tf.compat.v1.train
    return {"Adagrad": train.AdagradOptimizer, "Adam": train.AdamOptimizer, "Ftrl": train.FtrlOptimizer,
            "RMSProp": train.RMSPropOptimizer, "SGD": train.GradientDescentOptimizer}


def get_optimizer_v1(opt, learning_rate: float):
    """The optimizer of a v1 canned model (TF 1.x's ``get_optimizer_instance``): a name is TF1's class at
    ``learning_rate``; an instance or a callable returning one is taken as :func:`get_optimizer` takes it."""
    if isinstance(opt, str):
        if opt not in NAMES:
            raise ValueError(f"optimizer {opt!r} is not one of {', '.join(NAMES)}; give one of those names, "
                             f"an optimizer instance, or a function returning one")
        return _tf1_classes()[opt](learning_rate=learning_rate)
    return get_optimizer(opt)
