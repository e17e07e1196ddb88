"""``tf.compat.v1.estimator.tpu`` on CPU and GPU: ``TPUEstimator(use_tpu=False)`` as TPUEstimator ran
then. The model_fn and input_fns get ``params["batch_size"]`` (the train, eval or predict batch size
of the call), and a ``TPUEstimatorSpec`` becomes an ``EstimatorSpec``: ``eval_metrics=(metric_fn,
tensors)`` gives the eval metric ops, ``scaffold_fn`` the Scaffold, ``host_call=(fn, tensors)``
ops run with every training step. This is the shape of BERT, ALBERT, ELECTRA and EfficientNet.
"""

from typing import Any, Dict, NamedTuple, Optional, Sequence

import tensorflow as tf

from trainer.estimator.core import Estimator
from trainer.estimator.run_config import RunConfig as _RunConfig
from trainer.contract import EstimatorSpec, ModeKeys


class InputPipelineConfig:
    """How a TPU program's input_fn was deployed (``TPUConfig(per_host_input_for_training=...)``); off a TPU
    every value means the one input_fn of this process."""

    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


class TPUConfig(NamedTuple):
    iterations_per_loop: int = 2
    num_shards: Optional[int] = None
    num_cores_per_replica: Optional[int] = None
    per_host_input_for_training: Any = True
    tpu_job_name: Optional[str] = None
    initial_infeed_sleep_secs: Optional[int] = None
    input_partition_dims: Any = None
    eval_training_input_configuration: Any = None
    experimental_host_call_every_n_steps: int = 1
    experimental_allow_per_host_v2_parallel_get_next: bool = False
    experimental_feed_hook: Any = None


class RunConfig(_RunConfig):
    """Estimator's RunConfig with the TPU fields (``tpu_config``, ``master``, ``cluster``) a CPU run ignores."""

    def __init__(self, tpu_config: Optional[TPUConfig] = None, evaluation_master=None, master=None, cluster=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.tpu_config = tpu_config or TPUConfig()
        if cluster is not None and _master_of(cluster):
            raise ValueError(f"tpu.RunConfig(cluster=...): the resolver names a TPU at {_master_of(cluster)!r}; the "
                             f"runner has none: build TPUClusterResolver with no TPU name and set use_tpu=False")
        self.cluster = cluster

    def replace(self, **kwargs):
        tpu_config = kwargs.pop("tpu_config", self.tpu_config)
        base = super().replace(**kwargs)
        copy = RunConfig.__new__(RunConfig)
        copy.__dict__.update(base.__dict__, tpu_config=tpu_config)
        return copy


def _master_of(cluster) -> str:
    """The master a cluster resolver points at; ``''`` (this process) for the one a program builds with no TPU."""
    master = getattr(cluster, "master", None)
    return master() if callable(master) else str(master or "")


class TPUEstimatorSpec(NamedTuple):
    mode: str
    predictions: Optional[Any] = None
    loss: Optional[Any] = None
    train_op: Optional[Any] = None
    eval_metrics: Optional[Any] = None  # (metric_fn, tensors as a list or dict)
    export_outputs: Optional[Dict[str, Any]] = None
    scaffold_fn: Optional[Any] = None
    host_call: Optional[Any] = None  # (fn, tensors as a list or dict)
    training_hooks: Sequence[Any] = ()
    evaluation_hooks: Sequence[Any] = ()
    prediction_hooks: Sequence[Any] = ()

    def as_estimator_spec(self) -> EstimatorSpec:
        """The EstimatorSpec this spec is on one CPU or GPU."""
        hooks = list(self.training_hooks)
        if self.host_call is not None and self.mode == ModeKeys.TRAIN:
            hooks.append(_RunEachStep(_called(self.host_call)))
        return EstimatorSpec(
            mode=self.mode, predictions=self.predictions, loss=self.loss, train_op=self.train_op,
            eval_metric_ops=_called(self.eval_metrics) if self.eval_metrics is not None else None,
            export_outputs=self.export_outputs, training_hooks=hooks, evaluation_hooks=list(self.evaluation_hooks),
            prediction_hooks=list(self.prediction_hooks),
            scaffold=self.scaffold_fn() if self.scaffold_fn is not None else None)


def _called(pair):
    fn, tensors = pair
    return fn(**tensors) if isinstance(tensors, dict) else fn(*tensors)


class _RunEachStep(tf.compat.v1.train.SessionRunHook):
    """Runs a host_call's ops (summaries, most often) with every training step."""

    def __init__(self, ops):
        self._ops = ops

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._ops)


class CrossShardOptimizer(tf.compat.v1.train.Optimizer):
    """On one device there are no shards to sum over: the wrapped optimizer itself."""

    def __init__(self, opt, reduction=None, name="CrossShardOptimizer", group_assignment=None):
        super().__init__(use_locking=False, name=name)
        self._opt = opt

    def compute_gradients(self, loss, var_list=None, **kwargs):
        return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._opt.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._opt.variables()


class TPUEstimator(Estimator):
    """``TPUEstimator(model_fn, model_dir, config, params, use_tpu=False, train_batch_size, eval_batch_size,
    predict_batch_size)`` on CPU or GPU."""

    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True, train_batch_size=None,
                 eval_batch_size=None, predict_batch_size=None, batch_axis=None, eval_on_tpu=True,
                 export_to_tpu=True, export_to_cpu=True, warm_start_from=None, embedding_config_spec=None,
                 export_saved_model_api_version=None):
        if use_tpu:
            raise ValueError("TPUEstimator(use_tpu=True): there is no TPU here; pass use_tpu=False (the program's "
                             "--use_tpu flag) to run on the CPU or GPU")
        if params and "batch_size" in params:
            raise ValueError("params cannot include batch_size: TPUEstimator sets it from train_batch_size, "
                             "eval_batch_size and predict_batch_size")
        if train_batch_size is None:
            raise ValueError("train_batch_size must be set")
        super().__init__(_unwrapping(model_fn), model_dir=model_dir, config=config or RunConfig(), params=params,
                         warm_start_from=warm_start_from)
        self._batch = {ModeKeys.TRAIN: train_batch_size, ModeKeys.EVAL: eval_batch_size or train_batch_size,
                       ModeKeys.PREDICT: predict_batch_size or eval_batch_size or train_batch_size}
        self._call_mode = ModeKeys.TRAIN

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        self._call_mode = ModeKeys.TRAIN
        return super().train(input_fn, hooks, steps, max_steps, saving_listeners)

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        self._call_mode = ModeKeys.EVAL
        return super().evaluate(input_fn, steps, hooks, checkpoint_path, name)

    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None, yield_single_examples=True):
        self._call_mode = ModeKeys.PREDICT
        return super().predict(input_fn, predict_keys, hooks, checkpoint_path, yield_single_examples)

    def _call_params(self) -> Dict:
        return dict(self._params, batch_size=self._batch[self._call_mode], use_tpu=False)


def _unwrapping(model_fn):
    """``model_fn`` with a returned TPUEstimatorSpec turned into an EstimatorSpec."""
    import functools

    @functools.wraps(model_fn)
    def wrapped(**kwargs):
        spec = model_fn(**kwargs)
        return spec.as_estimator_spec() if isinstance(spec, TPUEstimatorSpec) else spec

    return wrapped


__all__ = ["CrossShardOptimizer", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec"]
