"""The runner's train op: the optimizer from config, guarded so a NaN step never reaches the weights."""

import tensorflow as tf

from trainer.config.targets import instantiate

tf1 = tf.compat.v1


def make_optimizer(optimizer_cfg):
    """The ``optimizer`` config's Optimizer (its ``_target_`` with the other keys as arguments)."""
    return instantiate(optimizer_cfg, f"optimizer._target_={optimizer_cfg._target_}")


def make_train_op(optimizer_cfg, loss, global_step, update_ops, loss_is_finite, sync=None):
    """``optimizer.minimize`` after the model's update ops (batch-norm statistics), guarded:
    a step whose loss is NaN or Inf only advances the global step, so bad values never
    reach the weights (or a checkpoint).

    ``sync`` = (replicas_to_aggregate, total_num_replicas) wraps the optimizer in
    SyncReplicasOptimizer (unguarded: its queues cannot live in a cond branch).

    Returns:
      (train_op, the SyncReplicasOptimizer or None).
    """
    optimizer = make_optimizer(optimizer_cfg)
    if sync is not None:
        optimizer = tf1.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=sync[0],
                                                    total_num_replicas=sync[1])
        with tf.control_dependencies(update_ops):
            grads_and_vars = optimizer.compute_gradients(loss)
        return optimizer.apply_gradients(grads_and_vars, global_step=global_step), optimizer
    with tf.control_dependencies(update_ops):
        grads_and_vars = optimizer.compute_gradients(loss)
    return tf1.cond(
        loss_is_finite,
        lambda: optimizer.apply_gradients(grads_and_vars, global_step=global_step),
        lambda: tf.group(tf1.assign_add(global_step, 1)),
        name="train_op",
    ), None
