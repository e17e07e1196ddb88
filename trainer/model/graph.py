"""Graph building: one ``tf.Graph`` per run, returned as a small frozen record of handles.

The model_fn is called twice in the same graph: for TRAIN, then for EVAL inside the
root variable scope re-entered with ``reuse=True``, so evaluation reads the very
variables training updates (no checkpoint round trip) and unnamed ``tf.layers``
find their variables again. PREDICT graphs (predict, export) are built on their own.
"""

import contextlib
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf
from omegaconf import OmegaConf

from trainer.data.pipelines import Pipeline, make_inputs
from trainer.errors import ConfigError
from trainer.estimator import EstimatorSpec, ModeKeys
from trainer.model.model_fn import call_model_fn, load_model_fn
from trainer.model.names import TRAIN_SUMMARY_COLLECTION, name_tensor
from trainer.model.scaffold import make_scaffold
from trainer.model.train_op import make_train_op

tf1 = tf.compat.v1


@dataclass(frozen=True)
class Placement:
    """Where a graph's parts go: the defaults of one process, or one task of a cluster."""

    model_device: Optional[str] = None  # the model's ops (e.g. /device:GPU:0); None: TensorFlow's choice
    device_fn: Optional[Callable] = None  # a device function over the whole graph (replica_device_setter)
    local_device: Optional[str] = None  # evaluation's metric variables: this task's own, not the ps's
    replicas: Tuple[int, int] = (1, 0)  # (training tasks, this task's index): the training data's shard
    sync: Optional[Tuple[int, int]] = None  # (replicas_to_aggregate, total replicas): SyncReplicasOptimizer


def single_process(device: str) -> Placement:
    """The placement of a one-process run on ``device`` (``"cpu"`` or ``"gpu"``)."""
    return Placement(model_device="/device:GPU:0" if device == "gpu" else None)


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


def _device(name: Optional[str]):
    """``tf.device(name)``, or nothing for None (``tf.device(None)`` would drop the enclosing placement)."""
    return tf.device(name) if name else contextlib.nullcontext()


def seed_graph(seed: Optional[int]) -> None:
    """Seed the default graph and tf_keras (behind ``tf.compat.v1.layers``), which draws initializer
    seeds from its own Python generator, not the graph seed; its set_random_seed seeds both (and
    Python's and NumPy's)."""
    if seed is not None:
        import tf_keras

        tf_keras.utils.set_random_seed(int(seed))


def _add_train_accuracy(spec, labels) -> None:
    """A tensor named ``accuracy``: the training batch's accuracy, for classifiers (fetched only on demand)."""
    predictions = spec.predictions
    if isinstance(predictions, dict) and "classes" in predictions and labels is not None:
        classes = tf.cast(predictions["classes"], labels.dtype)
        name_tensor("accuracy", tf.reduce_mean(tf.cast(tf.equal(classes, labels), tf.float32), name="train_accuracy"))


def _train_part(cfg, model_fn, params, train_input, global_step, sync):
    """TRAIN mode: the spec, the loss, the NaN guard and the train op (the model's own, or one from config)."""
    with tf1.variable_scope(tf1.get_variable_scope()):
        spec = call_model_fn(model_fn, cfg.model.fn, train_input.features, train_input.labels, ModeKeys.TRAIN, params)
    if spec.loss is None:
        raise ConfigError(f"model.fn={cfg.model.fn} returned no loss for mode train")
    loss = tf.identity(spec.loss, name="loss")
    name_tensor("loss", loss)
    _add_train_accuracy(spec, train_input.labels)
    loss_is_finite = tf.math.is_finite(loss, name="loss_is_finite")
    # The global step as this run found it: the runner's train op waits for this read, so hooks
    # fetching it know the step exactly (a plain read of the variable races the update).
    step_before = tf.identity(global_step.read_value(), name="step_before_update")
    name_tensor("step_before", step_before)
    if spec.train_op is not None:
        if sync is not None:
            raise ConfigError(f"distributed.sync_replicas=true: model.fn={cfg.model.fn} returns its own train_op, "
                              "which the runner cannot wrap in SyncReplicasOptimizer; return no train_op")
        if cfg.train.on_nan == "skip_step":
            raise ConfigError(f"train.on_nan=skip_step: model.fn={cfg.model.fn} returns its own train_op, which the "
                              "runner cannot guard; use train.on_nan=stop or return no train_op")
        return spec, loss, loss_is_finite, step_before, spec.train_op, None
    with tf.control_dependencies([step_before]):
        train_op, sync_optimizer = make_train_op(cfg.optimizer, spec.loss, global_step,
                                                 tf1.get_collection(tf1.GraphKeys.UPDATE_OPS), loss_is_finite, sync)
    return spec, loss, loss_is_finite, step_before, train_op, sync_optimizer


def _eval_part(cfg, model_fn, params, eval_input, local_device):
    """EVAL mode, reusing TRAIN's variables: the spec and its metrics (the loss's mean added)."""
    variables = set(tf1.global_variables())
    with _device(local_device), tf1.variable_scope(tf1.get_variable_scope(), reuse=True):
        try:
            eval_spec = call_model_fn(model_fn, cfg.model.fn, eval_input.features, eval_input.labels, ModeKeys.EVAL, params)
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
    with _device(local_device), tf1.name_scope("eval_metrics"):
        metric_ops = dict(eval_spec.eval_metric_ops or {})
        metric_ops.setdefault("loss", tf1.metrics.mean(eval_spec.loss))
    return eval_spec, metric_ops


def make_saver(cfg):
    """The run's Saver, with relative paths: a checkpoint dir copied elsewhere still finds its files."""
    saver = tf1.train.Saver(
        max_to_keep=cfg.checkpoint.keep, keep_checkpoint_every_n_hours=cfg.checkpoint.keep_every_n_hours,
        sharded=cfg.checkpoint.sharded, save_relative_paths=True,
    )
    tf1.add_to_collection(tf1.GraphKeys.SAVERS, saver)
    return saver


def build_graph(cfg, arrays=None, placement: Placement = Placement()) -> TrainGraph:
    """Build the training and evaluation graph for ``cfg``.

    ``arrays`` is the loaded dataset; None for ``data=input_fn``. ``placement`` puts the model
    on a device, or makes the graph one replica of between-graph training (variables on the ps
    tasks, every other op on this task, the training data sharded by task).
    """
    model_fn = load_model_fn(cfg.model.fn)
    params = OmegaConf.to_container(cfg.model.params, resolve=True)
    graph = tf.Graph()
    device_fn = graph.device(placement.device_fn) if placement.device_fn else contextlib.nullcontext()
    with graph.as_default(), device_fn:
        seed_graph(cfg.train.seed)
        global_step = tf1.train.get_or_create_global_step()
        with tf.device("/device:CPU:0"):
            train_input, eval_input = make_inputs(cfg, arrays, params, placement.replicas)
        with _device(placement.model_device):
            spec, loss, loss_is_finite, step_before, train_op, sync_optimizer = _train_part(
                cfg, model_fn, params, train_input, global_step, placement.sync)
            train_summaries = list(tf1.get_collection(tf1.GraphKeys.SUMMARIES))
            eval_spec, metric_ops = _eval_part(cfg, model_fn, params, eval_input, placement.local_device)
        sync_release_op = None
        if sync_optimizer is not None:
            sync_release_op = sync_optimizer.get_init_tokens_op(num_tokens=placement.replicas[0])
        summary_op = tf1.summary.merge(train_summaries or [tf1.summary.scalar("loss", loss)])
        tf1.add_to_collection(TRAIN_SUMMARY_COLLECTION, summary_op)
        eval_update_op = tf.group(*[update for _, update in metric_ops.values()])
        eval_reset_op = tf1.variables_initializer(tf1.get_collection(tf1.GraphKeys.METRIC_VARIABLES))
        saver = make_saver(cfg)
        scaffold = make_scaffold(cfg, saver, summary_op, spec.scaffold)
    return TrainGraph(
        graph=graph, global_step=global_step, step_before=step_before, loss=loss, loss_is_finite=loss_is_finite,
        train_op=train_op, train_input=train_input, eval_input=eval_input,
        eval_metrics={name: value for name, (value, _) in metric_ops.items()},
        eval_update_op=eval_update_op, eval_reset_op=eval_reset_op,
        summary_op=summary_op, saver=saver, scaffold=scaffold, spec=spec, eval_spec=eval_spec,
        sync_optimizer=sync_optimizer, sync_release_op=sync_release_op,
    )


def build_predict_part(cfg, features, device: str):
    """A PREDICT-mode model around ``features`` in the default graph.

    Returns:
      (spec, saver, global_step).
    """
    model_fn = load_model_fn(cfg.model.fn)
    params = OmegaConf.to_container(cfg.model.params, resolve=True)
    global_step = tf1.train.get_or_create_global_step()
    with _device(single_process(device).model_device), tf1.variable_scope(tf1.get_variable_scope()):
        spec = call_model_fn(model_fn, cfg.model.fn, features, None, ModeKeys.PREDICT, params)
    if spec.predictions is None:
        raise ConfigError(f"model.fn={cfg.model.fn} returned no predictions for mode predict")
    return spec, tf1.train.Saver(save_relative_paths=True), global_step
