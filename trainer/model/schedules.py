"""Learning-rate schedules from the ``optimizer`` config: functions of the global step (so a
resumed run continues the same curve), built from TensorFlow's own ``tf.compat.v1.train`` decay
functions, each with an optional linear warm-up.

With ``optimizer.warmup_steps=W`` the rate rises linearly from 0 at step 0 to the schedule's
first rate at step W; the decay then runs over the steps after W (``decay_steps``, or the rest of
``train.max_steps``). ``piecewise`` boundaries are absolute global steps.
"""

import math

import tensorflow as tf

tf1 = tf.compat.v1

# The optimizer config's keys the runner reads itself; the rest are the optimizer's arguments.
SCHEDULE_KEYS = ("schedule", "warmup_steps", "decay_steps", "decay_rate", "staircase", "boundaries", "values",
                 "end_learning_rate", "power", "clip_norm", "weight_decay")


def is_constant(optimizer_cfg) -> bool:
    return str(optimizer_cfg.get("schedule", "constant")) == "constant" and not optimizer_cfg.get("warmup_steps")


def peak_rate(optimizer_cfg) -> float:
    """The rate the schedule starts from after warm-up: ``values[0]`` for piecewise, else ``learning_rate``."""
    if str(optimizer_cfg.schedule) == "piecewise":
        return float(optimizer_cfg["values"][0])
    return float(optimizer_cfg.learning_rate)


def decay_horizon(optimizer_cfg, max_steps):
    """The steps the decay runs over: ``decay_steps``, else the steps of ``max_steps`` after warm-up."""
    if optimizer_cfg.decay_steps:
        return int(optimizer_cfg.decay_steps)
    if max_steps is None:
        return None
    return int(max_steps) - int(optimizer_cfg.warmup_steps)


def stretched(optimizer_cfg, step: int, before, now):
    """The warning for a resumed run whose schedule decays to ``train.max_steps`` when that changed
    from ``before`` to ``now``: the curve is stretched (or shrunk) from ``step`` on. None otherwise."""
    if ("schedule" not in optimizer_cfg or str(optimizer_cfg.schedule) not in ("cosine", "polynomial")
            or optimizer_cfg.decay_steps or before is None or now is None or int(before) == int(now)):
        return None
    was, becomes = expected_rate(optimizer_cfg, step, before), expected_rate(optimizer_cfg, step, now)
    return (f"optimizer.schedule={optimizer_cfg.schedule} decays to train.max_steps, which was {before} and is now "
            f"{now}: the learning rate at step {step} goes from {was:.3g} to {becomes:.3g}; set "
            f"optimizer.decay_steps={int(before) - int(optimizer_cfg.warmup_steps)} to keep the former curve")


def schedule_record(optimizer_cfg):
    """The learning rate and the schedule's keys, as plain values (a run's record keeps them, so that
    a resume can say how its rate moved). None for an optimizer config without the runner's keys."""
    if "schedule" not in optimizer_cfg:
        return None
    keys = ("learning_rate",) + SCHEDULE_KEYS
    return {k: (list(optimizer_cfg[k]) if k in ("boundaries", "values") else
                str(optimizer_cfg[k]) if k == "schedule" else optimizer_cfg[k]) for k in keys if k in optimizer_cfg}


def rescheduled(previous, optimizer_cfg, step: int, max_before, max_now):
    """The warning for a resumed run whose schedule keys changed from ``previous`` (a
    :func:`schedule_record`): the rate at ``step`` moves from the old curve to the new one. None
    when nothing changed."""
    now = schedule_record(optimizer_cfg)
    if not previous or now is None or previous == now:
        return None
    from omegaconf import OmegaConf

    changed = ", ".join(f"{k} {previous.get(k)} -> {now.get(k)}" for k in now if previous.get(k) != now.get(k))
    try:
        was = expected_rate(OmegaConf.create(previous), step, max_before)
    except Exception:  # a record the current keys cannot read: say what changed without the rate
        return f"the learning-rate schedule changed since the checkpoint ({changed})"
    becomes = expected_rate(optimizer_cfg, step, max_now)
    return (f"the learning-rate schedule changed since the checkpoint ({changed}): the rate at step {step} goes from "
            f"{was:.3g} to {becomes:.3g}")


def learning_rate(optimizer_cfg, global_step, max_steps):
    """The scheduled learning rate, a float32 tensor of ``global_step``."""
    kind = str(optimizer_cfg.schedule)
    warmup = int(optimizer_cfg.warmup_steps)
    base = peak_rate(optimizer_cfg)
    with tf1.name_scope("learning_rate_schedule"):
        step = tf.cast(global_step, tf.int64)
        after = tf.maximum(step - warmup, 0)  # steps since the end of warm-up
        if kind == "constant":
            rate = tf.constant(base, tf.float32)
        elif kind == "exponential":
            rate = tf1.train.exponential_decay(base, after, int(optimizer_cfg.decay_steps),
                                               float(optimizer_cfg.decay_rate), staircase=bool(optimizer_cfg.staircase))
        elif kind == "piecewise":
            rate = tf1.train.piecewise_constant(step, [int(b) for b in optimizer_cfg.boundaries],
                                                [float(v) for v in optimizer_cfg["values"]])
        elif kind == "polynomial":
            rate = tf1.train.polynomial_decay(base, after, decay_horizon(optimizer_cfg, max_steps),
                                              float(optimizer_cfg.end_learning_rate), power=float(optimizer_cfg.power))
        elif kind == "cosine":
            alpha = float(optimizer_cfg.end_learning_rate) / base
            rate = tf1.train.cosine_decay(base, tf.minimum(after, decay_horizon(optimizer_cfg, max_steps)),
                                          decay_horizon(optimizer_cfg, max_steps), alpha=alpha)
        else:
            raise NotImplementedError(f"optimizer.schedule={kind}")
        rate = tf.cast(rate, tf.float32)
        if warmup:
            ramp = tf.cast(tf.minimum(step, warmup), tf.float32) / float(warmup)
            rate = tf.where(step < warmup, ramp * base, rate)
        return rate


def expected_rate(optimizer_cfg, step: int, max_steps) -> float:
    """The schedule's formula in plain Python (the tests check the tensor against it)."""
    kind, warmup, base = str(optimizer_cfg.schedule), int(optimizer_cfg.warmup_steps), peak_rate(optimizer_cfg)
    if step < warmup:
        return base * step / warmup
    after = step - warmup
    if kind == "constant":
        return base
    if kind == "exponential":
        exponent = after / optimizer_cfg.decay_steps
        return base * optimizer_cfg.decay_rate ** (math.floor(exponent) if optimizer_cfg.staircase else exponent)
    if kind == "piecewise":
        for boundary, value in zip(optimizer_cfg.boundaries, optimizer_cfg["values"]):
            if step <= boundary:
                return value
        return optimizer_cfg["values"][-1]
    horizon = decay_horizon(optimizer_cfg, max_steps)
    end = optimizer_cfg.end_learning_rate
    if kind == "polynomial":
        return (base - end) * (1 - min(after, horizon) / horizon) ** optimizer_cfg.power + end
    if kind == "cosine":
        return end + (base - end) * 0.5 * (1 + math.cos(math.pi * min(after, horizon) / horizon))
    raise NotImplementedError(kind)
