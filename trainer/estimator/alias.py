"""``tf.estimator`` and the other import paths of Estimator and ``tf.contrib`` resolving to
``trainer.estimator``, and TPU cluster resolution to this process: process-wide effects, made by the
two entry points that run Estimator code (``train-estimator`` and the ``train`` command, once
TensorFlow is imported); importing this module changes nothing."""

import importlib
import sys
import types


class _Deferred(types.ModuleType):
    """Module ``target``, imported when one of its names is first read (a command whose user code never
    touches ``tf.estimator`` does not pay for importing ``trainer.estimator``)."""

    def __init__(self, name: str, target: str):
        super().__init__(name)
        self._target = target

    def __getattr__(self, name):
        if name.startswith("__") and name != "__all__":
            raise AttributeError(name)
        return getattr(importlib.import_module(self._target), name)

    def __dir__(self):
        return dir(importlib.import_module(self._target))


def alias_estimator(tf1: bool = False) -> None:
    """``tf.estimator``, ``tf.compat.v1.estimator`` (with ``.tpu``), ``tensorflow.compat.v1.estimator`` and
    ``tensorflow_estimator`` resolve to ``trainer.estimator`` (imported on first use): the v1 paths to its
    v1 family (``trainer.estimator.v1``), ``tf.estimator`` to the v2 one, or with ``tf1`` (a TF 1.x program,
    whose ``tf.estimator`` was TF 1.x's) to the v1 one too. The private paths programs imported
    (``tensorflow.python.estimator.model_fn``, ``tensorflow_estimator.python.estimator.canned.head``, ...)
    resolve to the matching parts (:mod:`trainer.estimator.paths`), and ``tf.contrib`` to the pieces
    of it the runner provides (:mod:`trainer.estimator.contrib`), the rest failing in one line naming
    what is missing. TensorFlow 2.16+ has none of them; an installed ``tensorflow_estimator``
    (TensorFlow <= 2.15) is left alone."""
    import tensorflow as tf

    if hasattr(tf, "estimator") and not isinstance(tf.estimator, _Deferred):
        return
    aliased = isinstance(getattr(tf.compat.v2, "estimator", None), _Deferred)  # again: only tf.estimator changes
    v2 = tf.compat.v2.estimator if aliased else _Deferred("tensorflow.estimator", "trainer.estimator")
    v1 = tf.compat.v1.estimator if aliased else _Deferred("tensorflow.compat.v1.estimator", "trainer.estimator.v1")
    top = v1 if tf1 else v2
    for name, api in (("tensorflow.estimator", top), ("tensorflow.compat.v2.estimator", v2),
                      ("tensorflow.compat.v1.estimator", v1), ("tensorflow_estimator", v1),
                      ("tensorflow_estimator.estimator", v1), ("tensorflow_estimator.python.estimator.estimator_lib", v1)):
        sys.modules[name] = api
    sys.modules["tensorflow.compat.v1.estimator.tpu"] = _Deferred("tensorflow.compat.v1.estimator.tpu",
                                                                 "trainer.estimator.tpu")
    v1.__path__ = []  # tensorflow_estimator is a package: its private paths import beneath it
    tf.estimator = top
    tf.compat.v1.estimator = v1
    tf.compat.v2.estimator = v2
    from trainer.estimator.paths import install_private_paths

    install_private_paths()
    if not hasattr(tf.compat.v1, "contrib"):
        setattr(tf.compat.v1, "contrib", _Deferred("tensorflow.contrib", "trainer.estimator.contrib"))


def resolve_tpu_locally() -> None:
    """``tf.distribute.cluster_resolver.TPUClusterResolver`` (and ``tf.compat.v1``'s) for a program run by
    ``train-estimator``: built with no TPU name, as TPU programs of the Estimator era built it with
    ``use_tpu=False``, it resolves to this process instead of asking Cloud TPU for one; naming a TPU
    fails in one line (:class:`trainer.estimator.resolver.TPUClusterResolver`)."""
    import tensorflow as tf

    from trainer.estimator.resolver import TPUClusterResolver

    for api in (tf.distribute.cluster_resolver, tf.compat.v1.distribute.cluster_resolver):
        api.TPUClusterResolver = TPUClusterResolver
