"""Graph building: one ``tf.Graph`` per run, returned as a small frozen record of handles.

The model_fn is called twice in the same graph: for TRAIN, then for EVAL inside the
root variable scope re-entered with ``reuse=True``, so evaluation reads the very
variables training updates (no checkpoint round trip) and unnamed ``tf.layers``
find their variables again.
"""

from dataclasses import dataclass
from typing import Dict, Optional

import hydra.utils
from omegaconf import OmegaConf

from trainer.data import Pipeline, make_pipeline
from trainer.errors import ConfigError
from trainer.estimator import EstimatorSpec, ModeKeys


@dataclass(frozen=True)
class TrainGraph:
    graph: object
    global_step: object
    loss: object  # the training loss, also reachable by the name "loss"
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


def make_train_op(tf, optimizer_cfg, loss, global_step, update_ops):
    """``optimizer.minimize`` after the model's update ops (batch-norm statistics)."""
    try:
        optimizer = hydra.utils.instantiate(optimizer_cfg)
    except Exception as e:
        raise ConfigError(f"optimizer._target_={optimizer_cfg._target_}: cannot build it ({e})") from None
    with tf.control_dependencies(update_ops):
        return optimizer.minimize(loss, global_step=global_step)


def build_graph(tf, cfg, device: str) -> TrainGraph:
    """Build the training and evaluation graph for ``cfg`` on ``device`` (``"cpu"`` or ``"gpu"``)."""
    tf1 = tf.compat.v1
    model_fn = load_model_fn(cfg.model.fn)
    params = OmegaConf.to_container(cfg.model.params, resolve=True)
    graph = tf.Graph()
    with graph.as_default():
        if cfg.train.seed is not None:
            # tf_keras (behind tf.compat.v1.layers) draws initializer seeds from its own Python
            # generator, not the graph seed: its set_random_seed seeds both (and Python, NumPy).
            import tf_keras

            tf_keras.utils.set_random_seed(int(cfg.train.seed))
        global_step = tf1.train.get_or_create_global_step()
        with tf.device("/device:CPU:0"):
            train_input = make_pipeline(
                tf, cfg.train.batch_size, cfg.data.feature_key, train=True,
                seed=cfg.train.seed, shuffle_buffer=cfg.data.shuffle_buffer,
            )
            eval_input = make_pipeline(tf, cfg.eval.batch_size, cfg.data.feature_key, train=False)

        model_device = "/device:GPU:0" if device == "gpu" else None
        with tf.device(model_device):
            # Entering the root scope here too makes the EVAL call below count layer names from the
            # same start, so unnamed tf.layers get the same names and reuse their variables.
            with tf1.variable_scope(tf1.get_variable_scope()):
                spec = _as_spec(model_fn(train_input.features, train_input.labels, ModeKeys.TRAIN, params), "train", cfg.model.fn)
            if spec.loss is None:
                raise ConfigError(f"model.fn={cfg.model.fn} returned no loss for mode train")
            loss = tf.identity(spec.loss, name="loss")
            train_summaries = list(tf1.get_collection(tf1.GraphKeys.SUMMARIES))
            train_op = spec.train_op
            if train_op is None:
                train_op = make_train_op(tf, cfg.optimizer, spec.loss, global_step, tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))

            variables = set(tf1.global_variables())
            with tf1.variable_scope(tf1.get_variable_scope(), reuse=True):
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
            with tf1.name_scope("eval_metrics"):
                metric_ops = dict(eval_spec.eval_metric_ops or {})
                metric_ops.setdefault("loss", tf1.metrics.mean(eval_spec.loss))
        eval_metrics = {name: value for name, (value, _) in metric_ops.items()}
        eval_update_op = tf.group(*[update for _, update in metric_ops.values()])
        eval_reset_op = tf1.variables_initializer(tf1.get_collection(tf1.GraphKeys.METRIC_VARIABLES))

        if not train_summaries:
            train_summaries = [tf1.summary.scalar("loss", loss)]
        summary_op = tf1.summary.merge(train_summaries)
        # Relative paths: a checkpoint dir copied elsewhere still finds its files.
        saver = tf1.train.Saver(max_to_keep=cfg.checkpoint.keep, save_relative_paths=True)
        tf1.add_to_collection(tf1.GraphKeys.SAVERS, saver)
        scaffold = tf1.train.Scaffold(saver=saver, summary_op=summary_op)
    return TrainGraph(
        graph=graph, global_step=global_step, loss=loss, train_op=train_op,
        train_input=train_input, eval_input=eval_input, eval_metrics=eval_metrics,
        eval_update_op=eval_update_op, eval_reset_op=eval_reset_op, summary_op=summary_op,
        saver=saver, scaffold=scaffold, spec=spec,
    )
