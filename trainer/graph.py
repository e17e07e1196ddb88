"""Graph building: one ``tf.Graph`` per run, returned as a small frozen record of handles.

The model_fn is called twice in the same graph: for TRAIN, then for EVAL inside the
root variable scope re-entered with ``reuse=True``, so evaluation reads the very
variables training updates (no checkpoint round trip) and unnamed ``tf.layers``
find their variables again.
"""

import contextlib
from dataclasses import dataclass
from typing import Dict, Optional

import hydra.utils
from omegaconf import OmegaConf

from trainer.data import Pipeline, make_input_fn_pipeline, make_pipeline
from trainer.errors import ConfigError
from trainer.estimator import EstimatorSpec, ModeKeys
from trainer.tf_hooks import NAMED_TENSOR_PREFIX, TRAIN_SUMMARY_COLLECTION, op, tensor
from trainer.warm_start import make_warm_start_fn


@dataclass(frozen=True)
class TrainGraph:
    graph: object
    global_step: object
    step_before: object  # the global step read before this run's update (exact for the runner's train op)
    loss: object  # the training loss, also reachable by the name "loss"
    loss_is_finite: object
    train_op: object
    train_input: Pipeline
    eval_input: Pipeline
    eval_metrics: Dict[str, object]  # metric name -> value tensor
    eval_update_op: object
    eval_reset_op: object
    summary_op: Optional[object]  # the training summaries only (eval summaries would pull eval input)
    saver: object
    scaffold: object
    spec: EstimatorSpec  # what model_fn returned for TRAIN (its hooks, scaffold)
    eval_spec: EstimatorSpec  # ... and for EVAL (its evaluation_hooks)
    sync_optimizer: Optional[object] = None  # distributed.sync_replicas: the SyncReplicasOptimizer
    sync_release_op: Optional[object] = None  # ... and an op handing every worker a token at the end


def _device(tf, name: Optional[str]):
    """``tf.device(name)``, or nothing for None (``tf.device(None)`` would drop the enclosing placement)."""
    return tf.device(name) if name else contextlib.nullcontext()


def load_model_fn(path: str):
    try:
        fn = hydra.utils.get_method(path)
    except Exception as e:
        raise ConfigError(f"model.fn={path}: cannot import it ({e}); give a dotted path such as models.mnist.model_fn") from None
    return fn


def _as_spec(result, mode: str, path: str) -> EstimatorSpec:
    if isinstance(result, EstimatorSpec):
        return result
    # Specs of look-alike classes (an Estimator-era namedtuple) are taken field by field.
    if hasattr(result, "_asdict"):
        fields = {k: v for k, v in result._asdict().items() if k in EstimatorSpec._fields}
        return EstimatorSpec(**fields)
    raise ConfigError(f"model.fn={path} returned {type(result).__name__} for mode {mode}; return trainer.estimator.EstimatorSpec")


def make_train_op(tf, optimizer_cfg, loss, global_step, update_ops, loss_is_finite, sync=None):
    """``optimizer.minimize`` after the model's update ops (batch-norm statistics), guarded:
    a step whose loss is NaN or Inf only advances the global step, so bad values never
    reach the weights (or a checkpoint).

    ``sync`` = (replicas_to_aggregate, total_num_replicas) wraps the optimizer in
    SyncReplicasOptimizer (unguarded: its queues cannot live in a cond branch); returns
    (train_op, sync_optimizer or None).
    """
    tf1 = tf.compat.v1
    try:
        optimizer = hydra.utils.instantiate(optimizer_cfg)
    except Exception as e:
        raise ConfigError(f"optimizer._target_={optimizer_cfg._target_}: cannot build it ({e})") from None
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


def _add_train_accuracy(tf, spec, labels) -> None:
    """A tensor named ``accuracy``: the training batch's accuracy, for classifiers (fetched only on demand)."""
    predictions = spec.predictions
    if isinstance(predictions, dict) and "classes" in predictions and labels is not None:
        classes = tf.cast(predictions["classes"], labels.dtype)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(classes, labels), tf.float32), name="train_accuracy")
        tf.compat.v1.add_to_collection(NAMED_TENSOR_PREFIX + "accuracy", accuracy)


def _group(tf, names, key: str):
    if names is None:
        return None
    names = [names] if isinstance(names, str) else list(names)
    try:
        return tf.group(*[op(n) for n in names], name=key.replace(".", "_"))
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}") from None


def _report_tensor(name, key: str):
    """A readiness check: a 1-D string tensor naming what is not ready (empty when ready)."""
    if name is None:
        return None
    try:
        found = tensor(name)
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}") from None
    if found.dtype.name != "string" or found.shape.rank != 1:
        raise ConfigError(f"{key}={name}: must be a 1-D string tensor (names of what is not ready), e.g. from report_uninitialized_variables")
    return found


def make_scaffold(tf, cfg, saver, summary_op, spec_scaffold=None):
    """The Scaffold both backends use: config's ops (TensorFlow's defaults where null), the Saver, warm start.

    Fields the model_fn's own Scaffold sets are used where the config leaves TensorFlow's default.
    """
    tf1 = tf.compat.v1
    sc = cfg.scaffold
    fields = {
        "init_op": _group(tf, sc.init_op, "scaffold.init_op"),
        "ready_op": _report_tensor(sc.ready_op, "scaffold.ready_op"),
        "ready_for_local_init_op": _report_tensor(sc.ready_for_local_init_op, "scaffold.ready_for_local_init_op"),
        "local_init_op": _group(tf, sc.local_init_op, "scaffold.local_init_op"),
    }
    if spec_scaffold is not None:
        for key in fields:
            if fields[key] is None:
                fields[key] = getattr(spec_scaffold, key)
    init_fn = make_warm_start_fn(cfg.init_from) if cfg.init_from.checkpoint else None
    if init_fn is None and spec_scaffold is not None and spec_scaffold.init_fn is not None:
        init_fn = lambda scaffold, session: spec_scaffold.init_fn(session)  # noqa: E731
    return tf1.train.Scaffold(saver=saver, summary_op=summary_op, init_fn=init_fn, **fields)


def make_inputs(tf, cfg, arrays, params, replicas=(1, 0)):
    """The training and evaluation pipelines: over the loaded arrays, or from the config's input_fns.

    ``replicas`` = (number of training tasks, this task's index): each reads its own shard.
    """
    if arrays is None:
        input_params = dict(params, batch_size=params.get("batch_size", cfg.train.batch_size))
        fns = []
        for key in ("train_fn", "eval_fn"):
            path = cfg.data.get(key)
            if not path:
                raise ConfigError(f"data.{key} is not set; data=input_fn needs data.train_fn and data.eval_fn (dotted paths)")
            try:
                fns.append(hydra.utils.get_method(path))
            except Exception as e:
                raise ConfigError(f"data.{key}={path}: cannot import it ({e})") from None
        return (make_input_fn_pipeline(tf, fns[0], True, cfg.data.feature_key, input_params),
                make_input_fn_pipeline(tf, fns[1], False, cfg.data.feature_key, input_params))
    return (
        make_pipeline(tf, arrays.train_x, arrays.train_y, cfg.train.batch_size, cfg.data.feature_key, train=True,
                      seed=cfg.train.seed, shuffle_buffer=cfg.data.shuffle_buffer, replicas=replicas),
        make_pipeline(tf, arrays.test_x, arrays.test_y, cfg.eval.batch_size, cfg.data.feature_key, train=False),
    )


def build_graph(tf, cfg, device: str, arrays=None, cluster=None) -> TrainGraph:
    """Build the training and evaluation graph for ``cfg`` on ``device`` (``"cpu"`` or ``"gpu"``).

    ``arrays`` is the loaded dataset; None for ``data=input_fn``. With ``cluster`` (a
    ``trainer.distributed.ClusterContext``) the graph is one replica of between-graph training:
    variables on the ps tasks, every other op on this task, the training data sharded by task.
    """
    tf1 = tf.compat.v1
    model_fn = load_model_fn(cfg.model.fn)
    params = OmegaConf.to_container(cfg.model.params, resolve=True)
    graph = tf.Graph()
    placement, replicas, sync, local_device = contextlib.nullcontext(), (1, 0), None, None
    if cluster is not None:
        from trainer.distributed import make_device_setter

        role = cluster.role
        placement = graph.device(make_device_setter(tf, role, device))  # (tf.device takes no functions)
        replicas = (role.num_replicas, role.replica_index)
        if cluster.sync_replicas:
            sync = (cluster.replicas_to_aggregate or role.num_replicas, role.num_replicas)
        # Evaluation's metric variables are this task's own, not shared through the ps.
        local_device = role.device() + ("/device:GPU:0" if device == "gpu" else "/device:CPU:0")
    with graph.as_default(), placement:
        if cfg.train.seed is not None:
            # tf_keras (behind tf.compat.v1.layers) draws initializer seeds from its own Python
            # generator, not the graph seed: its set_random_seed seeds both (and Python, NumPy).
            import tf_keras

            tf_keras.utils.set_random_seed(int(cfg.train.seed))
        global_step = tf1.train.get_or_create_global_step()
        with tf.device("/device:CPU:0"):
            train_input, eval_input = make_inputs(tf, cfg, arrays, params, replicas)

        model_device = "/device:GPU:0" if device == "gpu" and cluster is None else None
        sync_optimizer = sync_release_op = None
        with _device(tf, model_device):
            # Entering the root scope here too makes the EVAL call below count layer names from the
            # same start, so unnamed tf.layers get the same names and reuse their variables.
            with tf1.variable_scope(tf1.get_variable_scope()):
                spec = _as_spec(model_fn(train_input.features, train_input.labels, ModeKeys.TRAIN, params), "train", cfg.model.fn)
            if spec.loss is None:
                raise ConfigError(f"model.fn={cfg.model.fn} returned no loss for mode train")
            loss = tf.identity(spec.loss, name="loss")
            tf1.add_to_collection(NAMED_TENSOR_PREFIX + "loss", loss)
            _add_train_accuracy(tf, spec, train_input.labels)
            train_summaries = list(tf1.get_collection(tf1.GraphKeys.SUMMARIES))
            loss_is_finite = tf.math.is_finite(loss, name="loss_is_finite")
            # The global step as this run found it: the runner's train op waits for this read, so
            # hooks fetching it know the step exactly (a plain read of the variable races the update).
            step_before = tf.identity(global_step.read_value(), name="step_before_update")
            tf1.add_to_collection(NAMED_TENSOR_PREFIX + "step_before", step_before)
            train_op = spec.train_op
            if train_op is None:
                with tf.control_dependencies([step_before]):
                    train_op, sync_optimizer = make_train_op(
                        tf, cfg.optimizer, spec.loss, global_step, tf1.get_collection(tf1.GraphKeys.UPDATE_OPS),
                        loss_is_finite, sync)
                if sync_optimizer is not None:
                    sync_release_op = sync_optimizer.get_init_tokens_op(num_tokens=replicas[0])
            elif sync is not None:
                raise ConfigError(f"distributed.sync_replicas=true: model.fn={cfg.model.fn} returns its own train_op, "
                                  "which the runner cannot wrap in SyncReplicasOptimizer; return no train_op")
            elif getattr(cfg.train.on_nan, "value", cfg.train.on_nan) == "skip_step":
                raise ConfigError(
                    f"train.on_nan=skip_step: model.fn={cfg.model.fn} returns its own train_op, which the runner "
                    "cannot guard; use train.on_nan=stop or return no train_op"
                )

            variables = set(tf1.global_variables())
            with _device(tf, local_device), tf1.variable_scope(tf1.get_variable_scope(), reuse=True):
                try:
                    eval_spec = _as_spec(
                        model_fn(eval_input.features, eval_input.labels, ModeKeys.EVAL, params), "eval", cfg.model.fn
                    )
                except ValueError as e:
                    raise ConfigError(
                        f"model.fn={cfg.model.fn}: calling it again for evaluation creates new variables ({e}); "
                        "create variables with tf.compat.v1.layers or tf.compat.v1.get_variable so they can be reused"
                    ) from None
            created = sorted(v.op.name for v in set(tf1.global_variables()) - variables)
            if created:
                raise ConfigError(
                    f"model.fn={cfg.model.fn}: the evaluation call created new variables {created[:5]}; "
                    "build layers with tf.compat.v1.layers or tf.compat.v1.get_variable so they are reused"
                )
            with _device(tf, local_device), tf1.name_scope("eval_metrics"):
                metric_ops = dict(eval_spec.eval_metric_ops or {})
                metric_ops.setdefault("loss", tf1.metrics.mean(eval_spec.loss))
        eval_metrics = {name: value for name, (value, _) in metric_ops.items()}
        eval_update_op = tf.group(*[update for _, update in metric_ops.values()])
        eval_reset_op = tf1.variables_initializer(tf1.get_collection(tf1.GraphKeys.METRIC_VARIABLES))

        if not train_summaries:
            train_summaries = [tf1.summary.scalar("loss", loss)]
        summary_op = tf1.summary.merge(train_summaries)
        tf1.add_to_collection(TRAIN_SUMMARY_COLLECTION, summary_op)
        # Relative paths: a checkpoint dir copied elsewhere still finds its files.
        saver = tf1.train.Saver(
            max_to_keep=cfg.checkpoint.keep, keep_checkpoint_every_n_hours=cfg.checkpoint.keep_every_n_hours,
            sharded=cfg.checkpoint.sharded, save_relative_paths=True,
        )
        tf1.add_to_collection(tf1.GraphKeys.SAVERS, saver)
        scaffold = make_scaffold(tf, cfg, saver, summary_op, spec.scaffold)
    return TrainGraph(
        graph=graph, global_step=global_step, step_before=step_before, loss=loss, loss_is_finite=loss_is_finite, train_op=train_op,
        train_input=train_input, eval_input=eval_input, eval_metrics=eval_metrics,
        eval_update_op=eval_update_op, eval_reset_op=eval_reset_op, summary_op=summary_op,
        saver=saver, scaffold=scaffold, spec=spec, eval_spec=eval_spec,
        sync_optimizer=sync_optimizer, sync_release_op=sync_release_op,
    )
