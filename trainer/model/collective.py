"""Synchronous data parallelism over TensorFlow's collective ops (``distributed.strategy=collective``):
every worker holds the variables, each step's gradients are all-reduced (averaged) across the
workers, and the chief's values are broadcast to the others once their session is created (the
chief's own initialisation, or the checkpoint it restored). These are the ops ``MultiWorkerMirroredStrategy``
runs, over the tasks' gRPC servers; the session config names the chief as the group's leader.

Every worker builds the same graph, so the collective ops get the same instance keys in the same
order on each: a worker whose graph differs would wait for a peer op that never comes (the ops'
``timeout`` then ends the step). A step's gradients and flags go as one packed tensor per dtype,
those collectives one after another: run in whatever order each worker's executor picked, two
workers each held threads blocked in ops the other had not started (seen with 2 workers on 2
cores: the step never ended), and one op per variable cost a round trip each.
"""

import contextlib
import sys
import threading
from typing import List, Tuple

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
        self.averaged = 0  # gradients averaged so far (step)
        self.stop_flags = None  # (this worker asks to stop, some worker asked): made by the first step()

    def _key(self) -> int:
        key, self._next_key = self._next_key, self._next_key + 1
        return key

    def _after_last(self):
        return tf.control_dependencies([self._last] if self._last is not None else [])

    def _made(self, op):
        self._last = op
        return op

    def _mean(self, tensor):
        with self._after_last():
            return self._made(collective_ops.all_reduce(tensor, self.group_size, GROUP_KEY, self._key(),
                                                        merge_op="Add", final_op="Div", timeout=self.timeout))

    def step(self, grads_and_vars: List, flags: Tuple = ()) -> Tuple[List, List]:
        """A step's all-reduce: each gradient averaged over the workers, and for each bool tensor of
        ``flags`` whether it is true on any worker; with them this worker's stop request
        (``stop_flags``: fed by the hook, all-reduced, fetched). Gradients of one dtype (sparse ones
        made dense) and the flags travel as one packed tensor: one collective a step, not one per
        variable (each is a round trip between the workers).

        Returns:
          (the averaged (gradient, variable) pairs in the order given, the flags' "true anywhere").
        """
        self.averaged += sum(g is not None for g, _ in grads_and_vars)
        first = self.stop_flags is None
        if first:
            requested = tf1.placeholder_with_default(False, [], name="stop_requested")
            flags = (*flags, requested)
        if self.group_size == 1:  # a cluster of one worker: nothing to average
            anywhere = list(flags)
        else:
            with tf1.name_scope("all_reduce"):
                grads_and_vars, anywhere = self._packed(grads_and_vars, flags)
        if first:
            self.stop_flags = (requested, tf.identity(anywhere.pop(), name="stop_anywhere"))
        return grads_and_vars, anywhere

    def _packed(self, grads_and_vars: List, flags: Tuple) -> Tuple[List, List]:
        dense = [(i, tf.convert_to_tensor(g)) for i, (g, _) in enumerate(grads_and_vars) if g is not None]
        groups = {}
        for i, g in dense:
            groups.setdefault(g.dtype.base_dtype, []).append((i, g))
        groups.setdefault(tf.float32, [])  # the flags ride with the float32 gradients
        out, anywhere = list(grads_and_vars), []
        for dtype in sorted(groups, key=lambda d: d.name):  # the same order on every worker
            members = groups[dtype]
            parts = [tf.reshape(g, [-1]) for _, g in members]
            if dtype == tf.float32:
                parts += [tf.reshape(tf.cast(f, tf.float32), [1]) for f in flags]
            mean = self._mean(tf.concat(parts, axis=0))
            sizes = [g.shape.num_elements() for _, g in members] + ([1] * len(flags) if dtype == tf.float32 else [])
            pieces = tf.split(mean, sizes)
            for (i, g), piece in zip(members, pieces):
                out[i] = (tf.reshape(piece, tf.shape(g)), grads_and_vars[i][1])
            if dtype == tf.float32:
                anywhere = [tf.greater(piece[0], 0.0) for piece in pieces[len(members):]]
        return out, anywhere

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
                return original(self, collective.step(list(grads_and_vars))[0], *args, **kwargs)
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
