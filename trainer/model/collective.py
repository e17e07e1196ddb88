"""Synchronous data parallelism over TensorFlow's collective ops (``distributed.strategy=collective``):
every worker holds the variables, each step's gradients are all-reduced (averaged) across the
workers, and the chief's values are broadcast to the others once their session is created (the
chief's own initialisation, or the checkpoint it restored). These are the ops ``MultiWorkerMirroredStrategy``
runs, over the tasks' gRPC servers; the session config names the chief as the group's leader.

Every worker builds the same graph, so the collective ops get the same instance keys in the same
order on each: a worker whose graph differs would wait for a peer op that never comes (the ops'
``timeout`` then ends the step). The ops of a step run one after another, in that order: run in
whatever order each worker's executor picks, two workers each held threads blocked in ops the
other had not started (seen with 2 workers on 2 cores: the step never ended).
"""

import contextlib
import sys
import threading
from typing import List

import tensorflow as tf
from tensorflow.python.ops import collective_ops

tf1 = tf.compat.v1

GROUP_KEY = 1
KERAS_OPTIMIZER_MODULE = "tf_keras.src.optimizers.legacy.optimizer_v2"  # graph-mode Keras optimizers
_applying = threading.local()  # inside a patched apply_gradients: a wrapped optimizer's inner one


class Collective:
    """The collective ops of one worker's graph: ``group_size`` workers, this one the source of the
    broadcast when ``is_source`` (the chief); ``timeout`` seconds before a missing peer fails a step."""

    def __init__(self, group_size: int, is_source: bool, timeout: float):
        self.group_size, self.is_source, self.timeout = int(group_size), bool(is_source), float(timeout)
        self._next_key = 1
        self._last = None  # the collective op made last: the next one waits for it
        self.averaged = 0  # gradients averaged so far (mean_gradients)

    def _key(self) -> int:
        key, self._next_key = self._next_key, self._next_key + 1
        return key

    def _after_last(self):
        return tf.control_dependencies([self._last] if self._last is not None else [])

    def _made(self, op):
        self._last = op
        return op

    def mean(self, tensor):
        """``tensor`` averaged over the workers (a sparse gradient is made dense first)."""
        tensor = tf.convert_to_tensor(tensor)
        if self.group_size == 1:  # a cluster of one worker: nothing to average
            return tensor
        with self._after_last():
            return self._made(collective_ops.all_reduce(tensor, self.group_size, GROUP_KEY, self._key(),
                                                        merge_op="Add", final_op="Div", timeout=self.timeout))

    def all_true(self, flag):
        """True on every worker when ``flag`` (a bool tensor) is true on every worker."""
        if self.group_size == 1:
            return flag
        with self._after_last():
            bad = self._made(collective_ops.all_reduce(tf.cast(tf.logical_not(flag), tf.float32), self.group_size,
                                                       GROUP_KEY, self._key(), merge_op="Add", final_op="Id",
                                                       timeout=self.timeout))
        return tf.equal(bad, 0.0)

    def mean_gradients(self, grads_and_vars: List) -> List:
        """Each gradient averaged over the workers, in the order given (the same on every worker)."""
        self.averaged += sum(g is not None for g, _ in grads_and_vars)
        with tf1.name_scope("all_reduce"):
            return [(None if g is None else self.mean(g), v) for g, v in grads_and_vars]

    def stop_flags(self, after):
        """``(requested, anywhere)``: a bool this worker feeds (it was asked to stop), and that flag
        all-reduced once ``after`` (the step's update) is done: some worker asked. Fetched in every
        step by every worker, so that all of them stop after the same step."""
        requested = tf1.placeholder_with_default(False, [], name="stop_requested")
        with tf.control_dependencies([after]):
            anywhere = tf.logical_not(self.all_true(tf.logical_not(requested)), name="stop_anywhere")
        return requested, anywhere

    def broadcast_op(self, variables: List):
        """An op giving every worker the chief's values of ``variables`` (sorted by name here, so the
        keys match across workers)."""
        ops, self._last = [], None  # an op of its own, run before any step
        if self.group_size == 1:
            return tf.no_op(name="broadcast_from_chief")
        with tf1.name_scope("broadcast_from_chief"):
            for v in sorted(variables, key=lambda v: v.op.name):
                shape, dtype, key = v.shape, v.dtype.base_dtype, self._key()
                with self._after_last():
                    if self.is_source:
                        ops.append(self._made(collective_ops.broadcast_send(
                            v.read_value(), shape, dtype, self.group_size, GROUP_KEY, key, timeout=self.timeout)))
                    else:
                        value = self._made(collective_ops.broadcast_recv(shape, dtype, self.group_size, GROUP_KEY,
                                                                         key, timeout=self.timeout))
                        ops.append(v.assign(value, read_value=False))
        return tf.group(*ops, name="broadcast_from_chief")


def _optimizer_classes() -> List[type]:
    """The optimizer base classes whose ``apply_gradients`` a model_fn calls: TF1's, and the legacy
    Keras one where tf_keras is loaded (Keras optimizers in graph mode)."""
    classes = [tf1.train.Optimizer]
    keras = sys.modules.get(KERAS_OPTIMIZER_MODULE)
    if keras is not None:
        classes.append(keras.OptimizerV2)
    return classes


@contextlib.contextmanager
def all_reduced_optimizers(collective: Collective):
    """While a model_fn builds its own train op: each optimizer's ``apply_gradients`` first averages
    the gradients over the workers (what ``MultiWorkerMirroredStrategy`` did for a model_fn under
    Estimator). Once per update: an optimizer wrapping another (loss scaling) all-reduces in the
    outer call only. The methods are restored on leaving."""
    originals = {cls: cls.__dict__["apply_gradients"] for cls in _optimizer_classes()}

    def wrap(original):
        def apply_gradients(self, grads_and_vars, *args, **kwargs):
            if getattr(_applying, "depth", 0):
                return original(self, grads_and_vars, *args, **kwargs)
            _applying.depth = 1
            try:
                return original(self, collective.mean_gradients(list(grads_and_vars)), *args, **kwargs)
            finally:
                _applying.depth = 0
        return apply_gradients

    for cls, original in originals.items():
        cls.apply_gradients = wrap(original)
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.apply_gradients = original


def made_any(collective: Collective) -> bool:
    """Whether a model_fn's train op applied its update through an optimizer (whose gradients went
    through ``collective``, even for a cluster of one worker, which averages nothing)."""
    return collective.averaged > 0
