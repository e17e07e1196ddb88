"""Config schemas: one dataclass per config group, registered once in Hydra's ConfigStore.

The YAML files in ``conf/`` start from these schemas in their defaults lists, so a
typo in a key or a value of the wrong type fails when the config is composed, before
any TensorFlow work. Rules that span several fields live in ``trainer.config.rules``.

Environment (``device``, ``distributed``) is kept apart from schedule (``train``,
``checkpoint``, ``summary``, ``eval``) and from the backend (``session``).
"""

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


class Choice(str, Enum):
    """A choice the runner owns. A ``str`` too, so ``cfg.session.kind == "plain"`` holds whether the
    config was composed (an Enum member) or loaded from a YAML file (a plain string)."""

    def __str__(self) -> str:
        return self.value


class SessionKind(Choice):
    plain = "plain"  # tf.compat.v1.Session, chores done by the runner
    monitored = "monitored"  # tf.compat.v1.train.MonitoredTrainingSession


class DeviceKind(Choice):
    cpu = "cpu"
    gpu = "gpu"
    auto = "auto"


class Precision(Choice):
    fp32 = "fp32"  # float32 everywhere
    bf16 = "bf16"  # CPU: oneDNN's bfloat16 graph rewrite (fast on CPUs with AVX512_BF16 or AMX)
    fp16 = "fp16"  # GPU: the CUDA float16 graph rewrite, with dynamic loss scaling
    auto = "auto"  # bf16 on a CPU with native bfloat16, fp16 on a GPU with tensor cores, else fp32


class Schedule(Choice):
    constant = "constant"  # optimizer.learning_rate throughout
    exponential = "exponential"  # learning_rate * decay_rate ** (step / decay_steps)
    piecewise = "piecewise"  # values[i] between boundaries (absolute global steps)
    polynomial = "polynomial"  # from learning_rate to end_learning_rate over decay_steps (or max_steps), ** power
    cosine = "cosine"  # a half cosine from learning_rate to end_learning_rate over decay_steps (or max_steps)


class DistributedKind(Choice):
    none = "none"  # one process
    cluster = "cluster"  # one task of distributed.cluster: distributed.job_name, distributed.task_index
    tf_config = "tf_config"  # the cluster and this task from the TF_CONFIG environment variable
    local = "local"  # spawn a whole cluster of local processes on 127.0.0.1 (development and tests)
    slurm = "slurm"  # the cluster and this task from SLURM's environment (srun): TF's SlurmClusterResolver


class DistributedStrategy(Choice):
    ps = "ps"  # the variables on ps tasks; each worker updates them (asynchronous, or sync_replicas)
    collective = "collective"  # every worker holds the variables; gradients all-reduced each step (synchronous)


class OnNan(Choice):
    stop = "stop"  # fail naming the step; the latest checkpoint stays the last good one
    skip_step = "skip_step"  # skip the update of that step (weights unchanged) and go on


class Mode(Choice):
    train = "train"  # train to train.max_steps, evaluating every eval.every_steps and at the end
    train_and_evaluate = "train_and_evaluate"  # the same; eval.every_steps must be set
    evaluate = "evaluate"  # evaluate eval.checkpoint (default: the latest in checkpoint.dir)
    predict = "predict"  # predictions for the test split or predict.input
    export = "export"  # a SavedModel for TensorFlow Serving


class EvalGraphKind(Choice):
    auto = "auto"  # share the training graph where the model_fn and the eval input allow it, else separate
    shared = "shared"  # EVAL in the training graph and session, reusing its variables (fast)
    separate = "separate"  # a graph of its own per evaluation, loaded with the current weights (as Estimator)


class ProgressKind(Choice):
    auto = "auto"  # a bar on a terminal, log lines otherwise
    bar = "bar"
    lines = "lines"
    off = "off"


@dataclass
class ModelConfig:
    name: str = MISSING  # recorded in metrics.json and the run name
    fn: Any = MISSING  # dotted path of model_fn(features, labels, mode, params) (the Estimator API: the function)
    params: Dict[str, Any] = field(default_factory=dict)  # passed to model_fn as `params`


# The built-in models' params, typed: a misspelt `+model.params.<key>` or a value of the wrong type
# fails at composition, naming the key (model=model_fn keeps free-form params).
@dataclass
class LinearParams:
    feature_key: str = "x"
    num_classes: Optional[int] = None  # null: the data's number of classes


@dataclass
class MlpParams(LinearParams):
    hidden_units: List[int] = field(default_factory=lambda: [128, 64])
    dropout_rate: float = 0.0


@dataclass
class MnistParams(LinearParams):
    dropout_rate: float = 0.4


@dataclass
class CannedParams:
    """Estimator's canned classifiers and regressors from config (``models/canned.py``)."""

    kind: str = MISSING  # a family of trainer/estimator/canned: dnn | linear | dnn_linear_combined | baseline
    head: str = "classifier"  # classifier (class-id labels) | regressor (float32 labels: mean squared error)
    num_classes: Optional[int] = None  # null: the data's number of classes
    weight_column: Optional[str] = None  # a feature weighting each example's loss and metrics
    label_vocabulary: Optional[List[str]] = None  # the classes' names (predicted "classes"); null: the data's
    hidden_units: List[int] = field(default_factory=lambda: [100, 50])
    feature_columns: Optional[List[Any]] = None  # dnn, linear; null: read off the table
    linear_feature_columns: Optional[List[Any]] = None  # dnn_linear_combined's wide part; null: the table's
    dnn_feature_columns: Optional[List[Any]] = None  # dnn_linear_combined's deep part; null: the table's
    activation: str = "relu"
    dropout: Optional[float] = None
    batch_norm: bool = False
    sparse_combiner: str = "sum"


@dataclass
class CannedModelConfig(ModelConfig):
    params: CannedParams = field(default_factory=CannedParams)


@dataclass
class LinearModelConfig(ModelConfig):
    params: LinearParams = field(default_factory=LinearParams)


@dataclass
class MlpModelConfig(ModelConfig):
    params: MlpParams = field(default_factory=MlpParams)


@dataclass
class MnistModelConfig(ModelConfig):
    params: MnistParams = field(default_factory=MnistParams)


@dataclass
class DataConfig:
    name: str = MISSING  # mnist | fashion_mnist | numpy | tfrecord | csv | synthetic | input_fn
    path: Optional[str] = None  # mnist: an mnist.npz or a folder of IDX files; numpy: an .npz or a folder of .npy
    download: bool = True  # fetch the files (with checksums) when they are not found locally
    download_dir: str = "~/.keras/datasets"  # where downloads go (the Keras cache by default)
    feature_key: str = "x"  # model_fn receives features as {feature_key: images}
    num_classes: Optional[int] = None  # numpy, tfrecord, csv: null: the largest label plus one
    train_examples: Optional[int] = None  # use the first N training examples (synthetic: how many to make)
    test_examples: Optional[int] = None  # use the first N test examples (synthetic: how many to make)
    validation_examples: Optional[int] = None  # evaluate on the last N training examples (held out), not the test split
    shuffle_buffer: Optional[int] = None  # null: the whole training split (a full shuffle)
    # data=tfrecord and data=csv (trainer/data/files.py):
    train_files: Optional[Any] = None  # a file, a glob or a list of them
    eval_files: Optional[Any] = None  # a file, a glob or a list of them (read once, in order, per evaluation)
    # {name: {shape, dtype, encoding, var_len, default}}; open: data.features.<name>=... adds one without a +
    features: Dict[str, Any] = field(default_factory=lambda: OmegaConf.create({}, flags={"struct": False}))
    label_key: Optional[str] = None  # the feature (column) holding the class id
    label_vocabulary: Optional[List[str]] = None  # string labels, in class-id order (csv: null reads them)
    ignore: List[str] = field(default_factory=list)  # features the built-in models do not get
    compression: Optional[str] = None  # tfrecord: GZIP | ZLIB | null
    train_fn: Optional[Any] = None  # data=input_fn: dotted path of the training input_fn (the Estimator API: the function)
    eval_fn: Optional[Any] = None  # data=input_fn: dotted path of the evaluation input_fn (a finite Dataset)
    skip_trained_batches: bool = True  # data=input_fn: a resumed run skips the batches trained on; false: restart the input (as each Estimator.train call did)


@dataclass
class OptimizerConfig:
    _target_: str = MISSING  # a tf.compat.v1.train.Optimizer class, or your own
    learning_rate: float = MISSING
    # Read by the runner, not passed to the optimizer (trainer/model/schedules.py):
    schedule: Schedule = Schedule.constant  # the learning rate as a function of the global step
    warmup_steps: int = 0  # linear warm-up from 0 to the schedule's first rate over the first N steps
    decay_steps: Optional[int] = None  # exponential: steps per decay_rate; polynomial/cosine: horizon (null: max_steps)
    decay_rate: float = 0.5  # exponential
    staircase: bool = False  # exponential: decay in whole steps of decay_steps
    boundaries: List[int] = field(default_factory=list)  # piecewise: global steps where the rate changes
    values: List[float] = field(default_factory=list)  # piecewise: len(boundaries) + 1 rates
    end_learning_rate: float = 0.0  # polynomial and cosine: the final rate
    power: float = 1.0  # polynomial
    clip_norm: Optional[float] = None  # clip the gradients to this global norm
    weight_decay: float = 0.0  # decoupled weight decay per step (as tf.contrib.opt.AdamWOptimizer), scaled by the schedule


@dataclass
class SGDConfig(OptimizerConfig):
    _target_: str = "tensorflow.compat.v1.train.GradientDescentOptimizer"
    learning_rate: float = 0.01


@dataclass
class MomentumConfig(OptimizerConfig):
    _target_: str = "tensorflow.compat.v1.train.MomentumOptimizer"
    learning_rate: float = 0.01
    momentum: float = 0.9
    use_nesterov: bool = False


@dataclass
class AdamConfig(OptimizerConfig):
    _target_: str = "tensorflow.compat.v1.train.AdamOptimizer"
    learning_rate: float = 0.001
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8


@dataclass
class AdamWConfig(AdamConfig):
    weight_decay: float = 1e-4


@dataclass
class SessionConfig:
    kind: SessionKind = MISSING
    stop_grace_period_secs: int = 120  # how long queue-runner threads get to stop at the end
    max_recoveries: Optional[int] = 10  # session re-creations after session errors (monitored); null: no bound
    recovery_wait_secs: float = 1.0  # pause before each recovery


@dataclass
class DeviceConfig:
    kind: DeviceKind = MISSING
    intra_op_threads: int = 0  # threads inside one op; 0: TensorFlow picks (all cores)
    inter_op_threads: int = 0  # ops run at once; 0: TensorFlow picks
    allow_growth: bool = True  # GPU memory grows as needed instead of taking it all at start
    log_placement: bool = False  # log which device each op runs on
    gpu_slot: Optional[int] = None  # use GPU number (gpu_slot mod #GPUs), e.g. ${hydra:job.num} in a parallel sweep
    precision: Precision = Precision.fp32  # compute precision; variables and checkpoints stay float32
    xla: bool = False  # XLA auto-clustering (JIT) of the session's graph
    replicas: int = 1  # towers of the model, one per device (GPUs, or logical CPUs on device=cpu), gradients averaged


@dataclass
class DistributedConfig:
    kind: DistributedKind = MISSING
    # job -> ["host:port", ...] for the jobs chief (at most one task), worker and ps; the evaluator
    # is not part of it. The same dict on every machine; each machine sets its own job_name/task_index.
    cluster: Any = None
    job_name: Optional[str] = None  # this task's job: chief | worker | ps | evaluator
    task_index: int = 0  # this task's index in its job
    strategy: DistributedStrategy = DistributedStrategy.ps  # ps | collective (all-reduce, no ps tasks)
    sync_replicas: bool = False  # SyncReplicasOptimizer: each update averages replicas_to_aggregate gradients
    replicas_to_aggregate: Optional[int] = None  # null: every training task (chief + workers)
    max_wait_secs: float = 120.0  # how long a task waits for the cluster to answer and for the chief's init
    ready_poll_secs: float = 1.0  # seconds between a waiting worker's checks that the model is ready (TF: 30)
    progress_timeout_secs: float = 600.0  # watchdog: a task with no step done for this long exits naming the unreachable tasks
    num_ps: int = 1  # distributed=local: ps tasks to spawn; =slurm: SLURM tasks that are ps (none under strategy=collective)
    port_base: int = 8888  # distributed=slurm: each node's tasks listen on port_base, port_base + 1, ...
    num_workers: int = 2  # distributed=local: training tasks to spawn (worker 0 is the chief)
    host: str = "127.0.0.1"  # distributed=local: the address every task is given


@dataclass
class TrainConfig:
    max_steps: Optional[int] = 2000  # absolute global-step target (a resumed run stops at the same step); null: until the input ends
    batch_size: int = 100
    seed: Optional[int] = 0  # graph-level seed and shuffle seed; null: nondeterministic
    deterministic: bool = False  # tf.config.experimental.enable_op_determinism(): bitwise-exact resumption
    on_nan: OnNan = OnNan.stop  # what a NaN or Inf loss (or gradient norm) does
    max_skipped_steps: int = 10  # on_nan=skip_step: fail after this many skipped steps in a row
    ema_decay: Optional[float] = None  # keep a moving average of the weights; evaluate, predict and export with it
    stalled_steps_limit: int = 100  # fail when the global step stays the same this many steps in a row; 0: off
    stop_grace_secs: float = 4.0  # after SIGTERM/SIGINT, how long the step in progress may take to end; then exit without its checkpoint


@dataclass
class CheckpointConfig:
    dir: Optional[str] = None  # null: checkpoints/ inside the run dir; a dir with checkpoints is resumed
    every_steps: Optional[int] = 500  # save every N global steps (a final save always happens)
    every_secs: Optional[float] = None  # or every N seconds; only one of the two
    keep: int = 5  # newest checkpoints kept (Saver max_to_keep); 0 keeps all
    keep_every_n_hours: float = 10000.0  # also keep one checkpoint per N hours of training (Saver's default: never)
    sharded: bool = False  # one checkpoint shard per device (Saver sharded=True)
    restore_step: Optional[int] = None  # restart from model.ckpt-N once: newer checkpoints moved to rolled-back-*/
    listeners: Dict[str, Any] = field(default_factory=dict)  # name -> {_target_: a CheckpointSaverListener, ...}


@dataclass
class ScaffoldConfig:
    # Each: null for TensorFlow's default, or an op / tensor name (or a list of them, grouped).
    init_op: Any = None  # run on a fresh start (default: initialise all global variables)
    ready_op: Any = None  # empty when the model is ready (default: report uninitialised variables)
    ready_for_local_init_op: Any = None  # empty when local_init_op may run (default: global variables ready)
    local_init_op: Any = None  # run after every session creation (default: local variables and tables)


@dataclass
class InitFromConfig:
    # Warm start a fresh run from another run's weights (ignored once checkpoint.dir has its own checkpoint).
    checkpoint: Optional[str] = None  # a checkpoint prefix, or a dir whose latest checkpoint is used
    vars_to_warm_start: str = ".*"  # regex over trainable variable names, as Estimator's WarmStartSettings
    var_name_map: Dict[str, str] = field(default_factory=dict)  # variable name in this graph -> name in the checkpoint


@dataclass
class SummaryConfig:
    every_steps: Optional[int] = 100  # TensorBoard summaries every N steps; null or 0: off


@dataclass
class EvalConfig:
    every_steps: Optional[int] = 1000  # evaluate on the test split every N steps; null or 0: only at the end
    steps: Optional[int] = None  # batches per evaluation (EvalSpec's steps); null: until the eval input ends
    enabled: bool = True  # false: train only, no evaluation and no objective (Estimator.train); mode=train only
    batch_size: int = 1000
    checkpoint: Optional[str] = None  # mode=evaluate: a checkpoint prefix; null: the latest in checkpoint.dir
    objective: str = "accuracy"  # eval metric the task returns to sweepers
    graph: EvalGraphKind = EvalGraphKind.auto  # where evaluation runs: auto | shared | separate
    direction: str = "auto"  # maximize | minimize | auto (minimize losses and errors) for summaries


@dataclass
class PredictConfig:
    input: Optional[str] = None  # an .npz (key x, images or x_test) or IDX images file; null: the test split
    input_fn: Optional[Any] = None  # or a dotted path of an input_fn (mode infer) giving the features to predict
    output: Optional[str] = None  # null: predictions.npz in the run dir (replaced by the next prediction)
    overwrite: bool = False  # replace an existing predict.output (never a file the run reads)
    checkpoint: Optional[str] = None  # null: the latest in checkpoint.dir


@dataclass
class ExportConfig:
    dir: Optional[str] = None  # null: export/<global step> in the run dir (must not exist yet)
    checkpoint: Optional[str] = None  # null: the latest in checkpoint.dir
    serving_input_fn: Optional[Any] = None  # dotted path returning a ServingInputReceiver (or (receivers, features)); null: like the eval features


@dataclass
class SweepConfig:
    rerun_finished: bool = False  # a rerun sweep trains finished jobs again (their old checkpoints set aside)
    fail_fast: bool = False  # stop the sweep at the first failed job (default: record it and go on)


@dataclass
class LogConfig:
    every_steps: int = 100  # progress lines / bar refresh and metrics.jsonl rows every N steps
    progress: ProgressKind = ProgressKind.auto
    tf_verbose: bool = False  # true: keep TensorFlow's C++ and Python log noise


@dataclass
class TrackingConfig:
    """Where a run is also recorded (``conf/tracking/``): ``none``, or ``mlflow`` (the mlflow extra)."""

    kind: str = "none"  # none | mlflow
    uri: str = "sqlite:///mlflow.db"  # MLflow's tracking URI; relative paths from the working dir (artifacts: ./mlruns)
    experiment: Optional[str] = None  # the MLflow experiment; null: "train" for a run, the sweep dir's name for a job


@dataclass
class Config:
    model: ModelConfig = MISSING
    data: DataConfig = MISSING
    optimizer: OptimizerConfig = MISSING
    session: SessionConfig = MISSING
    device: DeviceConfig = MISSING
    distributed: DistributedConfig = MISSING
    hooks: Dict[str, Any] = field(default_factory=dict)  # name -> {_target_, role: chief|all, kwargs}
    train: TrainConfig = field(default_factory=TrainConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    scaffold: ScaffoldConfig = field(default_factory=ScaffoldConfig)
    init_from: InitFromConfig = field(default_factory=InitFromConfig)
    summary: SummaryConfig = field(default_factory=SummaryConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    mode: Mode = Mode.train
    predict: PredictConfig = field(default_factory=PredictConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    resume: Optional[str] = None  # a run dir: continue it with its saved config plus these overrides
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


_registered = False


def register_configs() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    global _registered
    if _registered:
        return
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    cs.store(group="model", name="base_model", node=ModelConfig)
    cs.store(group="model", name="base_linear", node=LinearModelConfig)
    cs.store(group="model", name="base_mlp", node=MlpModelConfig)
    cs.store(group="model", name="base_mnist", node=MnistModelConfig)
    cs.store(group="model", name="base_canned", node=CannedModelConfig)
    cs.store(group="data", name="base_data", node=DataConfig)
    cs.store(group="tracking", name="base_tracking", node=TrackingConfig)
    cs.store(group="optimizer", name="base_sgd", node=SGDConfig)
    cs.store(group="optimizer", name="base_momentum", node=MomentumConfig)
    cs.store(group="optimizer", name="base_adam", node=AdamConfig)
    cs.store(group="optimizer", name="base_adamw", node=AdamWConfig)
    cs.store(group="session", name="base_session", node=SessionConfig)
    cs.store(group="device", name="base_device", node=DeviceConfig)
    cs.store(group="distributed", name="base_distributed", node=DistributedConfig)
    _registered = True
