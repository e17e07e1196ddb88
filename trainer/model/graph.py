"""Graph building: each graph its own ``tf.Graph``, returned as a small frozen record of handles.

Training builds the model_fn in TRAIN mode. Evaluation either shares that graph (the model_fn
called again in EVAL mode inside the root variable scope re-entered with ``reuse=True``, so it
reads the very variables training updates, fast) or gets a graph of its own per evaluation, as
Estimator built one: the only way for a model_fn that builds a Keras model or ``tf.Variable``s
each call, or an eval input that cannot be read twice (tensors from a one-shot iterator or
queues). ``eval.graph`` picks: ``auto`` shares where it can. PREDICT graphs (predict, export)
are built on their own.
"""

import contextlib
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import tensorflow as tf

from trainer.compat import seed_tf_keras
from trainer.data.pipelines import Pipeline, batch_size_of, make_eval_input, make_train_input
from trainer.data.sources import num_classes_of
from trainer.errors import ConfigError
from trainer.contract import EstimatorSpec, ModeKeys, RunConfig
from trainer.model.model_fn import ModelFn, load_model_fn, model_params
from trainer.model.averaging import averaged_train_op, averages_getter, make_average, restore_map
from trainer.model.names import TRAIN_SUMMARY_COLLECTION, name_tensor
from trainer.model.scaffold import make_scaffold
from trainer.model.schedules import is_constant
from trainer.model.collective import Collective, all_reduced_optimizers, made_any
from trainer.model.towers import Tower, split_batch, tower_device, weighted_mean
from trainer.model.train_op import make_train_op

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


@dataclass(frozen=True)
class Placement:
    """Where a graph's parts go: the defaults of one process, or one task of a cluster."""

    model_device: Optional[str] = None  # the model's ops (e.g. /device:GPU:0); None: TensorFlow's choice
    device_fn: Optional[Callable] = None  # a device function over the whole graph (replica_device_setter)
    local_device: Optional[str] = None  # evaluation's metric variables: this task's own, not the ps's
    replicas: Tuple = (1, 0)  # (training tasks, this task's index[, in lockstep]): the training data's shard
    sync: Optional[Tuple[int, int]] = None  # (replicas_to_aggregate, total replicas): SyncReplicasOptimizer
    towers: Tuple[str, ...] = ()  # device.replicas > 1: each tower's device (the model's variables on the CPU)
    loss_scale: bool = False  # fp16: dynamic loss scaling around the optimizer
    collective: Optional[Tuple[int, bool, float]] = None  # (workers, this is the chief, timeout secs): all-reduce


def single_process(device: str, replicas: int = 1, precision: str = "fp32") -> Placement:
    """The placement of a one-process run on ``device`` (``"cpu"`` or ``"gpu"``), with ``replicas``
    towers (logical CPU devices on the CPU) and ``precision``'s loss scaling."""
    towers = ()
    if replicas > 1:
        kind = "GPU" if device == "gpu" else "CPU"
        towers = tuple(f"/device:{kind}:{i}" for i in range(replicas))
    return Placement(model_device="/device:GPU:0" if device == "gpu" else None, towers=towers,
                     loss_scale=precision == "fp16")


@dataclass(frozen=True)
class EvalGraph:
    """An evaluation: its input and the model's metrics over it, in the training graph or its own."""

    graph: object
    global_step: object
    input: Pipeline
    metrics: Dict[str, object]  # metric name -> value tensor
    update_op: object
    reset_op: object
    examples: object  # how many examples the updates since the last reset read
    spec: EstimatorSpec  # what model_fn returned for EVAL (its evaluation_hooks)
    saver: Optional[object] = None  # a graph of its own: restores the model's variables


@dataclass(frozen=True)
class TrainGraph:
    graph: object
    global_step: object
    step_before: object  # the global step read before this run's update (exact for the runner's train op)
    step_after: object  # the global step read once this run's train op is done: the step a hook reports
    loss: object  # the training loss, also reachable by the name "loss"
    step_is_finite: object  # the step was finite: the loss (and, for the runner's train op, the gradient norm)
    train_op: object
    train_input: Pipeline
    evaluation: Optional[EvalGraph]  # the evaluation sharing this graph; None: each one builds its own
    summary_op: Optional[object]  # the model's own training summaries (None: it writes none)
    saver: object
    scaffold: object
    spec: EstimatorSpec  # what model_fn returned for TRAIN (its hooks, scaffold)
    sync_optimizer: Optional[object] = None  # distributed.sync_replicas: the SyncReplicasOptimizer
    sync_release_op: Optional[object] = None  # ... and an op handing every worker a token at the end
    average: Optional[object] = None  # train.ema_decay: the ExponentialMovingAverage of the trainable variables
    broadcast_op: Optional[object] = None  # distributed.strategy=collective: the chief's values to every worker
    stop_flags: Optional[Tuple] = None  # ... and (this worker asks to stop, some worker asked): Collective.stop_flags


class NotShareable(Exception):
    """Evaluation cannot share the training graph; the reason is the message."""


def _device(name: Optional[str]):
    """``tf.device(name)``, or nothing for None (``tf.device(None)`` would drop the enclosing placement)."""
    return tf.device(name) if name else contextlib.nullcontext()


def seed_graph(seed: Optional[int]) -> None:
    """Seed the default graph and tf_keras (behind ``tf.compat.v1.layers``), which draws initializer
    seeds from its own Python generator, not the graph seed. Python's and NumPy's global generators
    are the user's: left alone, as Estimator left them."""
    if seed is not None:
        seed_tf_keras(int(seed))


@dataclass(frozen=True)
class Recipe:
    """What the graph layer reads of a run's config (``trainer.plan.graph_recipe`` cuts it out): the
    model and its optimizer, the training and evaluation inputs and schedule, the Saver's rotation,
    the Scaffold and the warm start."""

    model: Any
    optimizer: Any
    train: Any
    data: Any
    eval: Any
    checkpoint: Any
    scaffold: Any
    init_from: Any


@dataclass(frozen=True)
class _Model:
    """The model_fn with what every call of it gets: its params and RunConfig."""

    recipe: Recipe
    fn: ModelFn
    params: dict
    run_config: RunConfig

    def call(self, pipeline: Pipeline, mode: str, reuse: bool = False, getter=None) -> EstimatorSpec:
        with tf1.variable_scope(tf1.get_variable_scope(), reuse=True if reuse else None, custom_getter=getter):
            return self.fn(pipeline.features, pipeline.labels, mode, self.params, self.run_config)


def _model(recipe: Recipe, run_config: Optional[RunConfig], data=None) -> _Model:
    """The model_fn with its params; a built-in model's null ``num_classes`` becomes the data's
    (``trainer.model.model_fn.load_data_for`` fills the config itself where the modes load the data)."""
    params = model_params(recipe.model)
    if "num_classes" in params and params["num_classes"] is None:
        params["num_classes"] = num_classes_of(data)
    return _Model(recipe, load_model_fn(recipe.model.fn), params, run_config or RunConfig())


def _add_train_accuracy(spec, labels) -> None:
    """A tensor named ``accuracy``: the training batch's accuracy, for classifiers (fetched only on demand).
    It compares the predicted ``class_ids`` (or ``classes``) with one integer (or string) label per example;
    for other labels (floats, several per example, a dict) there is none."""
    predictions = spec.predictions
    if not isinstance(labels, (tf.Tensor, tf.Variable)) or not isinstance(predictions, dict):
        return  # a dict, list or tuple of labels (one per tower, ...)
    if labels.dtype.is_floating or (labels.shape.rank or 0) > 2 or (labels.shape.rank == 2 and labels.shape[-1] != 1):
        return
    textual = labels.dtype == tf.string
    predicted = predictions.get("classes") if textual else predictions.get("class_ids", predictions.get("classes"))
    if not isinstance(predicted, tf.Tensor) or (predicted.dtype == tf.string) != textual:
        return
    predicted = tf.reshape(predicted if textual else tf.cast(predicted, labels.dtype), [-1])
    hits = tf.equal(predicted, tf.reshape(labels, [-1]))
    name_tensor("accuracy", tf.reduce_mean(tf.cast(hits, tf.float32), name="train_accuracy"))


def _no_loss(model: _Model):
    return ConfigError(f"{model.fn.name} returned no loss for mode train")


def _towers(model: _Model, train_input: Pipeline, devices: Tuple[str, ...]):
    """The model_fn once per device on its share of the batch (see ``trainer.model.towers``).

    Returns:
      (tower 0's spec, the Towers, the update ops of tower 0).
    """
    replicas = len(devices)
    graph = tf1.get_default_graph()
    towers, specs, update_ops, kept_summaries = [], [], [], []
    shares = split_batch(train_input.features, train_input.labels, replicas)
    for i, (device, (features, labels, size)) in enumerate(zip(devices, shares)):
        variables = set(tf1.global_variables())
        updates_before = len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
        share = Pipeline(features, labels, None, train_input.feeds)
        scope = tf.name_scope(f"tower_{i}") if i else contextlib.nullcontext()
        with tf1.device(tower_device(device, "/device:CPU:0")), scope:
            spec = model.call(share, ModeKeys.TRAIN, reuse=i > 0)
        if spec.loss is None:
            raise _no_loss(model)
        if i == 0:
            if spec.train_op is not None:
                raise ConfigError(f"device.replicas={replicas}: {model.fn.name} returns its own train_op, which "
                                  "the runner cannot replicate; return no train_op, or set device.replicas=1")
            update_ops = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)[updates_before:]
            kept_summaries = list(tf1.get_collection(tf1.GraphKeys.SUMMARIES))
        else:
            created = sorted(v.op.name for v in set(tf1.global_variables()) - variables)
            if created:
                raise ConfigError(f"device.replicas={replicas}: {model.fn.name} makes new variables on each call "
                                  f"({', '.join(created[:3])}: a Keras model or tf.Variable built inside it), so the "
                                  "towers cannot share weights; use tf.compat.v1.layers or get_variable, or set "
                                  "device.replicas=1")
        with tf.device(device):
            examples = tf.cast(size, tf.float32)
        towers.append(Tower(device, spec.loss, examples))
        specs.append(spec)
    # Towers 1.. repeat tower 0's summaries and update ops: one copy (tower 0's) is kept.
    graph.get_collection_ref(tf1.GraphKeys.SUMMARIES)[:] = kept_summaries
    graph.get_collection_ref(tf1.GraphKeys.UPDATE_OPS)[:] = update_ops
    return specs, towers, update_ops


def _add_towers_accuracy(specs, labels) -> None:
    predictions = [s.predictions for s in specs]
    if labels is not None and all(isinstance(p, dict) and "classes" in p for p in predictions):
        classes = tf.concat([p["classes"] for p in predictions], axis=0)
        _add_train_accuracy(EstimatorSpec(mode=ModeKeys.TRAIN, predictions={"classes": classes}), labels)


def _check_own_train_op(model: _Model, sync, collective) -> None:
    """What a model_fn returning its own train_op cannot have: SyncReplicasOptimizer, the NaN guard's
    skipped steps, the config's schedule, clipping and decay; under the collective strategy its update
    must have gone through an optimizer (else nothing was all-reduced and the workers would drift apart).

    Raises:
      ConfigError: naming the key and the way out.
    """
    recipe, name = model.recipe, model.fn.name
    if sync is not None:
        raise ConfigError(f"distributed.sync_replicas=true: {name} returns its own train_op, "
                          "which the runner cannot wrap in SyncReplicasOptimizer; return no train_op")
    if collective is not None and not made_any(collective):
        raise ConfigError(f"distributed.strategy=collective: {name} returns a train_op that updates the weights "
                          "without an optimizer's apply_gradients/minimize, so no gradient is all-reduced and the "
                          "workers would drift apart; use an optimizer, return no train_op, or use distributed.strategy=ps")
    if recipe.train.on_nan == "skip_step":
        raise ConfigError(f"train.on_nan=skip_step: {name} returns its own train_op, which the "
                          "runner cannot guard; use train.on_nan=stop or return no train_op")
    optimizer = recipe.optimizer
    if not is_constant(optimizer) or optimizer.get("clip_norm") or optimizer.get("weight_decay"):
        raise ConfigError(f"optimizer.schedule/clip_norm/weight_decay: {name} returns its own "
                          "train_op, built with its own optimizer; drop those keys or return no train_op")


def _train_part(model: _Model, train_input, global_step, placement: Placement, collective=None):
    """TRAIN mode: the spec, the loss, the NaN guard and the train op (the model's own, or one from config)."""
    recipe, sync = model.recipe, placement.sync
    towers = None
    if len(placement.towers) > 1:
        specs, towers, update_ops = _towers(model, train_input, placement.towers)
        spec = specs[0]
        loss = weighted_mean([t.loss for t in towers], towers, name="loss")
        _add_towers_accuracy(specs, train_input.labels)
    else:
        # Under the collective strategy a model_fn's own optimizer all-reduces its gradients.
        with all_reduced_optimizers(collective) if collective is not None else contextlib.nullcontext():
            spec = model.call(train_input, ModeKeys.TRAIN)
        if spec.loss is None:
            raise _no_loss(model)
        loss = tf.identity(spec.loss, name="loss")
        _add_train_accuracy(spec, train_input.labels)
        update_ops = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
    name_tensor("loss", loss)
    loss_is_finite = tf.math.is_finite(loss, name="loss_is_finite")
    # The global step as this run found it: the runner's train op waits for this read, so hooks
    # fetching it know the step exactly (a plain read of the variable races the update).
    step_before = tf.identity(global_step.read_value(), name="step_before_update")
    name_tensor("step_before", step_before)
    if spec.train_op is not None:
        _check_own_train_op(model, sync, collective)
        return spec, loss, loss_is_finite, step_before, spec.train_op, None
    # A step that is not finite is skipped in the graph where skipping is asked for, and where other
    # tasks share the variables (a cluster: they may save them first); elsewhere NanGuardHook stops
    # the run before anything saves it, and the update needs no barrier (make_train_op).
    guard_update = recipe.train.on_nan == "skip_step" or placement.device_fn is not None
    with tf.control_dependencies([step_before]):
        train_op, sync_optimizer, step_ok = make_train_op(
            recipe.optimizer, spec.loss if towers is None else towers, global_step, update_ops, loss_is_finite, sync,
            loss_scale=placement.loss_scale, max_steps=recipe.train.max_steps, schedule_step=step_before,
            guard_update=guard_update, collective=collective)
    return spec, loss, step_ok, step_before, train_op, sync_optimizer


def _step_after(train_op, global_step):
    """The global step read once ``train_op`` is done: exact whatever the train op does to the step
    (the runner's increments it; a model's own may assign it)."""
    with tf.control_dependencies([train_op]):
        step_after = tf.identity(global_step.read_value(), name="step_after_update")
    name_tensor("step_after", step_after)
    return step_after


def _metrics(eval_spec, eval_input, local_device=None):
    """The model's eval_metric_ops, the mean loss, and a count of the examples read."""
    with _device(local_device), tf1.name_scope("eval_metrics"):
        metric_ops = metric_pairs(eval_spec.eval_metric_ops)
        if eval_spec.loss is not None and "loss" not in metric_ops:
            # The mean batch loss, as Estimator reported it (beside an "eval_loss" of the model's, as BERT's
            # metric_fn gives); never in place of a model's own "loss" metric.
            metric_ops["loss"] = tf1.metrics.mean(eval_spec.loss)
        examples = tf1.Variable(0, dtype=tf.int64, trainable=False, name="examples",
                                collections=[tf1.GraphKeys.LOCAL_VARIABLES, tf1.GraphKeys.METRIC_VARIABLES])
        count = examples.assign_add(batch_size_of(eval_input.features, eval_input.labels))
    metrics = {name: value for name, (value, _) in metric_ops.items()}
    update_op = tf.group(count, *[update for _, update in metric_ops.values()])
    return metrics, update_op, examples


def metric_pairs(eval_metric_ops) -> dict:
    """``eval_metric_ops`` as ``name -> (value, update_op)``. A Keras metric object (its ``update_state``
    called by the model_fn, as TF2-era model_fns and ``add_metrics`` did) becomes its result and update,
    and its variables join the local and metric collections, so they are initialised and reset with
    the others, as Estimator did."""
    pairs = {}
    for name, value in (eval_metric_ops or {}).items():
        if hasattr(value, "update_state") and hasattr(value, "result"):
            if not getattr(value, "updates", None):
                raise ValueError(f"eval_metric_ops[{name!r}] is a Keras metric whose update_state was never called "
                                 f"in the model_fn; call it on the batch's labels and predictions")
            for variable in value.variables:
                for key in (tf1.GraphKeys.LOCAL_VARIABLES, tf1.GraphKeys.METRIC_VARIABLES):
                    if variable not in tf1.get_collection(key):
                        tf1.add_to_collection(key, variable)
            value = (value.result(), value.updates[0])
        pairs[name] = value
    return pairs


def _shared_eval(model: _Model, arrays, placement: Placement, global_step, average=None) -> EvalGraph:
    """EVAL mode in the training graph, reusing TRAIN's variables (its reset op is added once the
    graph's metric variables all exist).

    Raises:
      NotShareable: the eval input cannot restart, or the EVAL call makes variables of its own.
    """
    with tf.device("/device:CPU:0"):
        eval_input = make_eval_input(model.recipe.data, model.recipe.eval.batch_size, arrays, model.params,
                                     model.run_config)
    if eval_input.initializer is None:
        raise NotShareable("the eval input_fn returns tensors, which cannot be read again for the next evaluation")
    variables = set(tf1.global_variables())
    with _device(placement.local_device):
        try:
            eval_spec = model.call(eval_input, ModeKeys.EVAL, reuse=True,
                                   getter=averages_getter(average) if average is not None else None)
        except ValueError as e:
            raise NotShareable(f"calling model.fn again for EVAL makes variables of its own ({e})") from None
    created = sorted(v.op.name for v in set(tf1.global_variables()) - variables)
    if created:
        raise NotShareable(f"calling model.fn again for EVAL makes variables of its own {created[:5]}")
    if eval_spec.evaluation_hooks:
        raise NotShareable("the model's evaluation_hooks run in an evaluation session of their own")
    metrics, update_op, examples = _metrics(eval_spec, eval_input, placement.local_device)
    return EvalGraph(tf1.get_default_graph(), global_step, eval_input, metrics, update_op, None, examples, eval_spec)


def _spec_saver(spec):
    """The Saver of the model_fn's own Scaffold: it saves and rotates the checkpoints, as under Estimator
    (``checkpoint.keep`` and ``checkpoint.keep_every_n_hours`` then do not apply)."""
    saver = getattr(spec.scaffold, "saver", None) if spec.scaffold is not None else None
    if saver is not None:
        log.info("the model_fn's Scaffold has a Saver: it saves the checkpoints (max_to_keep=%s; checkpoint.keep "
                 "does not apply)", saver.saver_def.max_to_keep if saver.saver_def else "?")
    return saver


def make_saver(checkpoint_cfg):
    """The run's Saver (``checkpoint.keep``, ``keep_every_n_hours``, ``sharded``), with relative paths: a
    checkpoint dir copied elsewhere still finds its files."""
    saver = tf1.train.Saver(
        max_to_keep=checkpoint_cfg.keep, keep_checkpoint_every_n_hours=checkpoint_cfg.keep_every_n_hours,
        sharded=checkpoint_cfg.sharded, save_relative_paths=True,
    )
    tf1.add_to_collection(tf1.GraphKeys.SAVERS, saver)
    return saver


def build_graph(recipe: Recipe, arrays=None, placement: Placement = Placement(),
                run_config: Optional[RunConfig] = None) -> TrainGraph:
    """Build the training graph of ``recipe``, with the evaluation in it when ``eval.graph`` allows.

    ``arrays`` is the loaded dataset; None for ``data=input_fn``. ``placement`` puts the model
    on a device, or makes the graph one replica of between-graph training (variables on the ps
    tasks, every other op on this task, the training data sharded by task).

    Raises:
      ConfigError: the model_fn or the inputs do not fit (``eval.graph=shared`` that cannot share).
    """
    if recipe.eval.graph != "separate" and recipe.eval.enabled:
        try:
            return _build(recipe, arrays, placement, run_config, shared_eval=True)
        except NotShareable as e:
            if recipe.eval.graph == "shared":
                raise ConfigError(f"eval.graph=shared: {e}; use eval.graph=auto or separate") from None
            log.info("evaluation builds a graph of its own for each evaluation, as Estimator did: %s", e)
    return _build(recipe, arrays, placement, run_config, shared_eval=False)


def _build(recipe: Recipe, arrays, placement: Placement, run_config, shared_eval: bool) -> TrainGraph:
    model = _model(recipe, run_config, arrays)
    graph = tf.Graph()
    device_fn = graph.device(placement.device_fn) if placement.device_fn else contextlib.nullcontext()
    collective = Collective(*placement.collective) if placement.collective else None
    with graph.as_default(), device_fn:
        seed_graph(recipe.train.seed)
        global_step = tf1.train.get_or_create_global_step()
        with tf.device("/device:CPU:0"):
            train_input = make_train_input(recipe.data, recipe.train, arrays, model.params, model.run_config,
                                           placement.replicas)
        with _device(placement.model_device):
            spec, loss, step_is_finite, step_before, train_op, sync_optimizer = _train_part(
                model, train_input, global_step, placement, collective)
            average = None
            if recipe.train.ema_decay:
                average = make_average(recipe.train.ema_decay, global_step)
                train_op = averaged_train_op(average, train_op, tf1.trainable_variables())
            step_after = _step_after(train_op, global_step)
            train_summaries = list(tf1.get_collection(tf1.GraphKeys.SUMMARIES))
            evaluation = _shared_eval(model, arrays, placement, global_step, average) if shared_eval else None
        if evaluation is not None:
            reset = tf1.variables_initializer(tf1.get_collection(tf1.GraphKeys.METRIC_VARIABLES))
            evaluation = dataclasses.replace(evaluation, reset_op=reset)
        sync_release_op = None
        if sync_optimizer is not None:
            sync_release_op = sync_optimizer.get_init_tokens_op(num_tokens=placement.replicas[0])
        summary_op = tf1.summary.merge(train_summaries) if train_summaries else None
        if summary_op is not None:
            tf1.add_to_collection(TRAIN_SUMMARY_COLLECTION, summary_op)
        # Every worker starts from the chief's values (what it initialised or restored).
        broadcast_op = collective.broadcast_op(tf1.global_variables()) if collective is not None else None
        saver = _spec_saver(spec) or make_saver(recipe.checkpoint)
        scaffold = make_scaffold(recipe.scaffold, recipe.init_from, saver, summary_op, spec.scaffold)
    return TrainGraph(
        graph=graph, global_step=global_step, step_before=step_before, step_after=step_after, loss=loss,
        step_is_finite=step_is_finite, train_op=train_op, train_input=train_input, evaluation=evaluation, summary_op=summary_op, saver=saver,
        scaffold=scaffold, spec=spec, sync_optimizer=sync_optimizer, sync_release_op=sync_release_op,
        average=average, broadcast_op=broadcast_op, stop_flags=collective.stop_flags if collective else None,
    )


def build_eval_graph(recipe: Recipe, arrays, device: str, run_config: Optional[RunConfig] = None) -> EvalGraph:
    """An evaluation graph of its own: the eval input, the model_fn in EVAL mode, its metrics, and a
    Saver of its variables (to restore a checkpoint, or to be loaded with the training weights)."""
    model = _model(recipe, run_config, arrays)
    graph = tf.Graph()
    with graph.as_default():
        seed_graph(recipe.train.seed)
        global_step = tf1.train.get_or_create_global_step()
        with tf.device("/device:CPU:0"):
            eval_input = make_eval_input(recipe.data, recipe.eval.batch_size, arrays, model.params, model.run_config)
        with _device(single_process(device).model_device):
            eval_spec = model.call(eval_input, ModeKeys.EVAL)
        metrics, update_op, examples = _metrics(eval_spec, eval_input)
        reset = tf1.variables_initializer(tf1.get_collection(tf1.GraphKeys.METRIC_VARIABLES))
        saver = tf1.train.Saver(var_list=_restored(recipe.train.ema_decay), save_relative_paths=True)
    return EvalGraph(graph, global_step, eval_input, metrics, update_op, reset, examples, eval_spec, saver)


def build_predict_part(recipe: Recipe, features, device: str, run_config: Optional[RunConfig] = None):
    """A PREDICT-mode model around ``features`` in the default graph.

    Returns:
      (spec, saver, global_step).
    """
    model = _model(recipe, run_config)
    global_step = tf1.train.get_or_create_global_step()
    with _device(single_process(device).model_device):
        spec = model.call(Pipeline(features, None, None, lambda step=0: {}), ModeKeys.PREDICT)
    if spec.predictions is None:
        raise ConfigError(f"{model.fn.name} returned no predictions for mode predict")
    return spec, tf1.train.Saver(var_list=_restored(recipe.train.ema_decay), save_relative_paths=True), global_step


def _restored(ema_decay):
    """What a graph without training restores: the weights, or with ``train.ema_decay`` their averages."""
    return restore_map(ema_decay) if ema_decay else tf1.global_variables()
