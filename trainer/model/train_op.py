"""The runner's train op: the optimizer from config, guarded so a NaN step never reaches the weights
nor the model's other state (batch-norm statistics)."""

import logging
from typing import List

import tensorflow as tf

from trainer.compat import add_control_inputs, optimizer_learning_rate
from trainer.config.targets import instantiate, plain
from trainer.model.names import name_tensor
from trainer.model.schedules import SCHEDULE_KEYS, is_constant, learning_rate, peak_rate
from trainer.model.towers import average_gradients

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def make_optimizer(optimizer_cfg, rate=None):
    """The ``optimizer`` config's Optimizer: its ``_target_`` with the other keys as arguments, but
    the runner's own (schedule, clipping, weight decay); ``rate`` (a tensor) replaces ``learning_rate``."""
    entry = {k: v for k, v in plain(optimizer_cfg).items() if k not in SCHEDULE_KEYS}
    key = f"optimizer._target_={optimizer_cfg._target_}"
    if rate is None:
        return instantiate(entry, key)
    return instantiate(dict(entry, _partial_=True), key)(learning_rate=rate)


def _as_op(op_or_tensor):
    return op_or_tensor if isinstance(op_or_tensor, tf.Operation) else op_or_tensor.op


def _snapshot_before(update_ops: List, global_step) -> List:
    """(variable, its value read before ``update_ops`` change it) for the model's non-trainable state:
    what a skipped step puts back. The update ops are made to wait for the reads."""
    trainable = {v.ref() for v in tf1.trainable_variables()}
    state = [v for v in tf1.global_variables()
             if v.ref() not in trainable and v.ref() != global_step.ref() and v.dtype.base_dtype.is_floating]
    if not state or not update_ops:
        return []
    with tf1.name_scope("state_before_step"):
        before = [(v, tf.identity(v.read_value())) for v in state]
    reads = [value.op for _, value in before]
    for op in {_as_op(u) for u in update_ops}:
        try:
            add_control_inputs(op, reads)  # TF1 graphs: order ops the model_fn built
        except (ValueError, TypeError) as e:  # an update op inside a control-flow context
            log.warning("train.on_nan: cannot order the update op %s after the state snapshot (%s); a skipped "
                        "step may still change it", op.name, e)
    return before


def _name_learning_rate(optimizer) -> None:
    """The optimizer's learning rate as the tensor named ``learning_rate`` (TensorBoard's tag)."""
    rate = optimizer_learning_rate(optimizer)
    if rate is None or callable(rate):
        return
    name_tensor("learning_rate", tf.identity(tf.cast(rate, tf.float32), name="learning_rate"))


def _loss_scaled(optimizer):
    """``optimizer`` with dynamic loss scaling (fp16). Its loss-scale state is local to the session
    (reset on restart, as it adapts within a few steps), so checkpoints keep the fp32 variables only
    and restore under any precision."""
    graph = tf1.get_default_graph()
    variables = set(tf1.global_variables())
    scaled = tf1.train.experimental.MixedPrecisionLossScaleOptimizer(optimizer, loss_scale="dynamic")
    kept = graph.get_collection_ref(tf1.GraphKeys.GLOBAL_VARIABLES)
    for v in [v for v in kept if v not in variables]:
        kept.remove(v)
        graph.add_to_collection(tf1.GraphKeys.LOCAL_VARIABLES, v)
    return scaled


def _gradients(optimizer, loss_or_towers, update_ops):
    """(gradient, variable) pairs of one loss, or of towers' losses averaged by their examples."""
    with tf.control_dependencies(update_ops):
        if not isinstance(loss_or_towers, list):
            return optimizer.compute_gradients(loss_or_towers)
        per_tower = []
        for tower in loss_or_towers:
            with tf.device(tower.device):
                per_tower.append(optimizer.compute_gradients(tower.loss, colocate_gradients_with_ops=True))
    with tf.device("/device:CPU:0"):
        return average_gradients(per_tower, loss_or_towers)


def _clipped(grads_and_vars, clip_norm, norm=None):
    """The gradients scaled so that their global norm is at most ``clip_norm`` (``norm``: their global
    norm, when already computed)."""
    pairs = [(g, v) for g, v in grads_and_vars if g is not None]
    if norm is None:
        norm = tf.linalg.global_norm([g for g, _ in pairs])
    clipped, _ = tf.clip_by_global_norm([g for g, _ in pairs], clip_norm, use_norm=norm)
    return [(c, v) for c, (_, v) in zip(clipped, pairs)] + [(g, v) for g, v in grads_and_vars if g is None]


def _decayed(optimizer_cfg, rate, grads_and_vars):
    """Decoupled weight decay (AdamW's): each variable with a gradient shrinks by ``weight_decay`` times the
    schedule's current fraction of its peak rate, once its gradient has been computed. Returns the ops."""
    decay = float(optimizer_cfg.get("weight_decay") or 0.0)
    if not decay:
        return []
    fraction = 1.0 if rate is None else rate / peak_rate(optimizer_cfg)
    with tf1.name_scope("weight_decay"), tf.control_dependencies([g.op for g, _ in grads_and_vars if g is not None]):
        return [v.assign_sub(decay * tf.cast(fraction, v.dtype.base_dtype) * v.read_value(), read_value=False)
                for g, v in grads_and_vars if g is not None]


def _scheduled_optimizer(optimizer_cfg, schedule_step, max_steps, loss_scale: bool):
    """``(optimizer, rate)``: the config's optimizer at the schedule's rate (``rate`` None: constant),
    the rate named for TensorBoard, wrapped in dynamic loss scaling with ``loss_scale``."""
    rate = None if is_constant(optimizer_cfg) else learning_rate(optimizer_cfg, schedule_step, max_steps)
    optimizer = make_optimizer(optimizer_cfg, rate)
    _name_learning_rate(optimizer)
    return (_loss_scaled(optimizer) if loss_scale else optimizer), rate


def make_train_op(optimizer_cfg, loss, global_step, update_ops, loss_is_finite, sync=None, loss_scale=False,
                  max_steps=None, schedule_step=None, guard_update=True, collective=None):
    """``optimizer.minimize`` after the model's update ops (batch-norm statistics), with a flag
    saying whether the step's loss and gradient norm were finite.

    ``guard_update`` (``train.on_nan=skip_step``, and every task of a cluster, whose variables other
    tasks read and save): a step that is not finite only advances the global step; the weights, the
    optimizer's slots and the model's update-op state (read before the step) stay as they were.
    That conditional makes every variable's update wait for the global norm of all gradients.
    Without it (``train.on_nan=stop`` in one process) the update runs as the user's own
    ``minimize`` would, the flag is computed beside it, and ``NanGuardHook`` stops the run in the
    same step's ``after_run``, before any other hook (the checkpoint saver) runs: bad values are
    then in the session, never in a checkpoint (the save after an error checks them too).

    ``loss`` is a tensor, or a list of ``trainer.model.towers.Tower`` whose gradients are averaged.
    ``sync`` = (replicas_to_aggregate, total_num_replicas) wraps the optimizer in
    SyncReplicasOptimizer (unguarded: its queues cannot live in a cond branch). ``loss_scale``
    wraps it in dynamic loss scaling: an overflowing fp16 step is then the loss scaler's to skip
    (it lowers the scale), so only a non-finite loss counts as a bad step. ``collective`` (a
    ``trainer.model.collective.Collective``) averages the gradients over the workers, and a step is
    finite only where it is finite on every worker, so all of them apply or skip it alike.

    The learning rate follows ``optimizer.schedule`` at ``schedule_step`` (the global step before
    the update); ``optimizer.clip_norm`` clips the gradients' global norm and
    ``optimizer.weight_decay`` shrinks the weights before the update.

    Returns:
      (train_op, the SyncReplicasOptimizer or None, a bool tensor: the step was applied).
    """
    optimizer, rate = _scheduled_optimizer(optimizer_cfg, global_step if schedule_step is None else schedule_step,
                                           max_steps, loss_scale)
    clip_norm = optimizer_cfg.get("clip_norm")
    if sync is not None:
        optimizer = tf1.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=sync[0],
                                                    total_num_replicas=sync[1])
        grads_and_vars = _clipped(_gradients(optimizer, loss, update_ops), clip_norm) if clip_norm else \
            _gradients(optimizer, loss, update_ops)
        return optimizer.apply_gradients(grads_and_vars, global_step=global_step), optimizer, loss_is_finite
    before = _snapshot_before(update_ops, global_step) if guard_update else []
    grads_and_vars = _gradients(optimizer, loss, update_ops)
    if collective is not None:
        grads_and_vars, (not_finite_anywhere,) = collective.step(grads_and_vars, (tf.logical_not(loss_is_finite),))
        loss_is_finite = tf.logical_not(not_finite_anywhere)
    grads = [g for g, _ in grads_and_vars if g is not None]
    norm = tf.linalg.global_norm(grads, name="gradient_norm") if grads else None
    grads_finite = tf.math.is_finite(norm) if grads and not loss_scale else tf.constant(True)
    step_ok = tf.logical_and(loss_is_finite, grads_finite, name="step_is_finite")
    if clip_norm and grads:
        grads_and_vars = _clipped(grads_and_vars, clip_norm, norm)

    def apply():
        with tf.control_dependencies(_decayed(optimizer_cfg, rate, grads_and_vars)):
            return optimizer.apply_gradients(grads_and_vars, global_step=global_step)

    if not guard_update:
        return tf.group(apply(), name="train_op"), None, step_ok

    def skip():
        restore = [v.assign(value, read_value=False) for v, value in before]
        return tf.group(tf1.assign_add(global_step, 1), *restore)

    train_op = tf1.cond(step_ok, apply, skip, name="train_op")
    return train_op, None, step_ok
