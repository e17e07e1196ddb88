"""Tensors by name: what config entries (hooks, Scaffold ops) may name in the built graph.

``loss`` (the training loss), ``accuracy`` (the training batch's accuracy, for
classifiers), ``step_before`` (the global step read before this run's update),
``global_step``, or any tensor or op name in the graph (``dense/BiasAdd:0``).
"""

import tensorflow as tf

from trainer.errors import ConfigError

tf1 = tf.compat.v1

TRAIN_SUMMARY_COLLECTION = "trainer_train_summary_op"
NAMED_TENSOR_PREFIX = "trainer_tensor_"  # one collection per short name: loss, accuracy, step_before


def name_tensor(short_name: str, value) -> None:
    """Make ``value`` reachable as ``short_name`` in the default graph."""
    tf1.add_to_collection(NAMED_TENSOR_PREFIX + short_name, value)


def tensor(name: str):
    """The tensor ``name`` of the default graph (``loss`` means the training loss)."""
    if name == "global_step":
        return tf1.train.get_global_step()
    named = tf1.get_collection(NAMED_TENSOR_PREFIX + name)
    if named:
        return named[0]
    graph = tf1.get_default_graph()
    try:
        return graph.get_tensor_by_name(name if ":" in name else name + ":0")
    except (KeyError, ValueError):
        raise ConfigError(
            f"no tensor named {name!r} in the graph; use loss, accuracy, global_step or a graph tensor name such as dense/BiasAdd:0"
        ) from None


def op(name: str):
    """The op or tensor ``name`` of the default graph."""
    graph = tf1.get_default_graph()
    try:
        return graph.as_graph_element(name, allow_tensor=True, allow_operation=True)
    except (KeyError, ValueError):
        raise ConfigError(f"no op or tensor named {name!r} in the graph") from None
