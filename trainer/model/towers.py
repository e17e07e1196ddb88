"""In-graph replication (``device.replicas=N``): the model_fn called once per device on its share
of the batch, the gradients averaged where the variables live and applied once (TF1's
multi-GPU pattern, Estimator's ``replicate_model_fn``).

Tower 0 is built exactly as a one-device model (same op names, summaries, update ops and
hooks); towers 1..N-1 reuse its variables under the name scopes ``tower_1``, ... Each tower's
loss is weighted by its number of examples, so the loss and the averaged gradient are those
of the whole batch, for any batch size.
"""

from dataclasses import dataclass
from typing import List

import tensorflow as tf

from trainer.errors import ConfigError

tf1 = tf.compat.v1

# Ops that hold a variable's state: placed on the variables' device, every other op on its tower's.
_VARIABLE_OPS = frozenset({"Variable", "VariableV2", "VarHandleOp", "AutoReloadVariable", "_VarHandlesOp"})


@dataclass(frozen=True)
class Tower:
    device: str
    loss: object  # the tower's own loss (a mean over its examples)
    examples: object  # float32: how many examples of the batch it read


def tower_device(device: str, variables_device: str):
    """A device function: variable ops on ``variables_device``, the rest on ``device``."""

    def place(op):
        return variables_device if op.type in _VARIABLE_OPS else device

    return place


def _split(value, sizes, what: str):
    if isinstance(value, tf.SparseTensor):
        raise ConfigError(f"device.replicas={len(sizes)}: {what} is a SparseTensor, which the runner cannot split "
                          "across towers; densify it in the input_fn, or set device.replicas=1")
    return tf.split(value, tf.stack(sizes), num=len(sizes), axis=0)


def split_batch(features, labels, replicas: int):
    """``replicas`` shares of one batch, as even as its size allows (sizes differ by at most one).

    Returns:
      A list of (features, labels, examples) per tower; ``examples`` an int32 tensor.
    """
    leaves = tf.nest.flatten(features)
    if not leaves:
        raise ConfigError(f"device.replicas={replicas}: the input has no features to split; set device.replicas=1")
    batch = tf.shape(leaves[0], out_type=tf.int32)[0]
    sizes = [(batch + replicas - 1 - i) // replicas for i in range(replicas)]
    split_leaves = [_split(leaf, sizes, "a feature") for leaf in leaves]
    label_leaves = [] if labels is None else [_split(leaf, sizes, "the labels") for leaf in tf.nest.flatten(labels)]
    shares = []
    for i in range(replicas):
        share_features = tf.nest.pack_sequence_as(features, [parts[i] for parts in split_leaves])
        share_labels = None if labels is None else tf.nest.pack_sequence_as(labels, [parts[i] for parts in label_leaves])
        shares.append((share_features, share_labels, sizes[i]))
    return shares


def _weighted(value, tower: Tower, total):
    """``value`` times the tower's share of the batch; zero for a tower that read nothing (its mean is NaN)."""
    share = tf.cast(tower.examples / total, value.dtype)
    return tf.where(tower.examples > 0, value * share, tf.zeros_like(value))


def weighted_mean(values: List, towers: List[Tower], name=None):
    """The mean over the whole batch of per-tower means ``values``."""
    total = tf.add_n([t.examples for t in towers])
    return tf.identity(tf.add_n([_weighted(v, t, total) for v, t in zip(values, towers)]), name=name)


def average_gradients(tower_grads: List[List], towers: List[Tower]):
    """One (gradient, variable) list: each variable's gradient averaged over the towers by examples.

    ``tower_grads`` holds each tower's ``compute_gradients`` result, variables in the same order.
    """
    total = tf.add_n([t.examples for t in towers])
    averaged = []
    for per_tower in zip(*tower_grads):
        var = per_tower[0][1]
        grads = [g for g, _ in per_tower]
        if all(g is None for g in grads):
            averaged.append((None, var))
            continue
        with tf.name_scope("average_gradients"):
            weighted = []
            for g, tower in zip(grads, towers):
                if g is None:
                    continue
                if isinstance(g, tf.IndexedSlices):
                    g = tf.convert_to_tensor(g)  # sparse gradients (embeddings) summed densely
                weighted.append(_weighted(g, tower, total))
            averaged.append((tf.add_n(weighted), var))
    return averaged
