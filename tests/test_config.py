"""Every option of every config group composes; wrong values fail before any TensorFlow work."""

import os

import pytest
from omegaconf import OmegaConf

from trainer.errors import ConfigError
from trainer.cli.paths import job_dir, run_dir
from trainer.config.rules import validate

CONF = os.path.join(os.path.dirname(__file__), "..", "conf")
GROUPS = sorted(d for d in os.listdir(CONF) if os.path.isdir(os.path.join(CONF, d)) and not d.startswith("_"))


def options(group):
    return sorted(f[:-5] for f in os.listdir(os.path.join(CONF, group)) if f.endswith(".yaml"))


def test_groups_of_the_public_contract_exist():
    assert {"model", "data", "session", "device", "optimizer", "hooks", "distributed"} <= set(GROUPS)
    assert {"mnist", "mlp", "linear"} <= set(options("model"))
    assert {"mnist", "fashion_mnist", "synthetic"} <= set(options("data"))
    assert {"plain", "monitored"} <= set(options("session"))
    assert {"cpu", "gpu", "auto"} <= set(options("device"))
    assert {"adam", "sgd", "momentum"} <= set(options("optimizer"))


# `hook` holds single hooks, added under a name of the hooks dict (+hook@hooks.NAME=OPTION).
# Options with a required value (???) get one here.
REQUIRED = {
    "feed_fn": ["hooks.extra.fn=user_models.zero_scale"],
    "model_fn": ["model.fn=estimator_models.cnn_model_fn"],
    "input_fn": ["data.train_fn=estimator_models.train_input_fn", "data.eval_fn=estimator_models.eval_input_fn"],
    "numpy": ["data.path=/"],  # an existing path; its contents are read at load time, not here
    "tfrecord": ["data.train_files=/train-*", "data.eval_files=/eval-*"],
    "csv": ["data.train_files=train.csv", "data.eval_files=test.csv", "data.label_key=label"],
    "cluster": ["+distributed.cluster={ps:['127.0.0.1:2222'],worker:['127.0.0.1:2223']}", "distributed.job_name=worker"],
}
TF_CONFIG = '{"cluster": {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]}, "task": {"type": "worker", "index": 0}}'


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_validates(make_cfg, monkeypatch, group, option):
    if option == "tf_config":
        monkeypatch.setenv("TF_CONFIG", TF_CONFIG)
    if option == "slurm":  # what srun sets for task 1 of 2 on one node
        for name, value in (("SLURM_PROCID", "1"), ("SLURM_STEP_NUM_TASKS", "2"), ("SLURM_STEP_NODELIST", "node01"),
                            ("SLURM_STEP_TASKS_PER_NODE", "2")):
            monkeypatch.setenv(name, value)
    if group == "hook":
        cfg = make_cfg(f"+hook@hooks.extra={option}", *REQUIRED.get(option, []))
        assert cfg.hooks.extra._target_ and cfg.hooks.extra.role in ("chief", "all")
    elif group == "sweep":  # search spaces, added to a multirun with +sweep=NAME
        cfg = make_cfg(f"+sweep={option}")
    elif group == "budget":  # the budget of one model and dataset: picked by the two choices
        model = next(m for m in options("model") if option.startswith(m + "_"))
        data = option[len(model) + 1:]
        assert data in options("data"), option
        cfg = make_cfg(f"model={model}", f"data={data}")
    elif group == "recipe":  # the defaults of one model, dataset and optimizer: picked by the three choices
        model = next(m for m in options("model") if option.startswith(m + "_"))
        optimizer = next(o for o in options("optimizer") if option.endswith("_" + o))
        data = option[len(model) + 1:-len(optimizer) - 1]
        assert data in options("data"), option
        cfg = make_cfg(f"model={model}", f"data={data}", f"optimizer={optimizer}")
    else:
        cfg = make_cfg(f"{group}={option}", *REQUIRED.get(option, []))
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    validate(cfg)


def test_defaults(make_cfg):
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="trainer.conf", version_base="1.3"):
        cfg = compose("config")
    assert cfg.model.name == "mnist" and cfg.data.name == "mnist"
    assert cfg.session.kind == "monitored" and cfg.device.kind == "auto"
    assert cfg.checkpoint.dir is None and cfg.train.max_steps > 0


def test_the_defaults_of_one_model_on_one_dataset():
    """conf/budget/mnist_fashion_mnist.yaml applies to that pair with every optimizer (a sweep over
    optimizers compares them on the same budget), conf/recipe/mnist_fashion_mnist_adam.yaml to Adam
    there, both under the command line."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="trainer.conf", version_base="1.3"):
        pair = compose("config", overrides=["model=mnist", "data=fashion_mnist"])
        other_model = compose("config", overrides=["model=mlp", "data=fashion_mnist"])
        other_data = compose("config", overrides=["model=mnist", "data=mnist"])
        other_optimizer = compose("config", overrides=["model=mnist", "data=fashion_mnist", "optimizer=momentum"])
        overridden = compose("config", overrides=["model=mnist", "data=fashion_mnist", "optimizer.schedule=constant",
                                                  "train.max_steps=30"])
    assert pair.optimizer.schedule == "cosine" and pair.optimizer.learning_rate == 0.002
    assert pair.train.max_steps == 2500 and pair.eval.every_steps == 500
    for cfg in (other_model, other_data):
        assert cfg.optimizer.schedule == "constant" and cfg.train.max_steps == 2000
    # momentum on the same pair: the same budget, its own default rate
    assert other_optimizer.optimizer.schedule == "cosine" and other_optimizer.train.max_steps == 2500
    assert other_optimizer.eval.every_steps == 500 and other_optimizer.optimizer.learning_rate == 0.01
    assert overridden.optimizer.schedule == "constant" and overridden.train.max_steps == 30
    validate(pair)


# The bad-input catalogue: (overrides, a fragment of the one-line message that must name the key).
BAD_VALUES = [
    (["train.max_steps=-5"], "train.max_steps=-5"),
    (["train.max_steps=0"], "train.max_steps=0"),
    (["train.batch_size=0"], "train.batch_size=0"),
    (["train.seed=-1"], "train.seed=-1"),
    (["checkpoint.every_steps=-1"], "checkpoint.every_steps=-1"),
    (["checkpoint.every_secs=60"], "set only one"),
    (["checkpoint.keep=-2"], "checkpoint.keep=-2"),
    (["eval.batch_size=0"], "eval.batch_size=0"),
    (["eval.every_steps=-10"], "eval.every_steps=-10"),
    (["summary.every_steps=-1"], "summary.every_steps=-1"),
    (["log.every_steps=0"], "log.every_steps=0"),
    (["optimizer.learning_rate=0"], "optimizer.learning_rate=0"),
    (["optimizer.learning_rate=-0.1"], "optimizer.learning_rate=-0.1"),
    (["data.train_examples=0"], "data.train_examples=0"),
    (["device.intra_op_threads=-1"], "device.intra_op_threads=-1"),
    (["data.feature_key="], "data.feature_key"),
    (["session.max_recoveries=-1"], "session.max_recoveries=-1"),
    (["session.recovery_wait_secs=-2"], "session.recovery_wait_secs=-2"),
    (["checkpoint.keep_every_n_hours=0"], "checkpoint.keep_every_n_hours=0"),
    (["data.path=/no/such/mnist.npz"], "data.path=/no/such/mnist.npz: no such file"),
    (["init_from.checkpoint=/no/such/ckpt"], "init_from.checkpoint=/no/such/ckpt"),
    (["data.shuffle_buffer=0"], "data.shuffle_buffer=0"),
    (["data.test_examples=-3"], "data.test_examples=-3"),
    (["summary.every_steps=-5"], "summary.every_steps=-5"),
    (["model=mlp", "model.params.hidden_units=[64,0]"], "model.params.hidden_units[1]=0"),
    (["model=mlp", "model.params.dropout_rate=1.0"], "model.params.dropout_rate=1.0"),
    (["model=mnist", "model.params.num_classes=1"], "model.params.num_classes=1"),
    (["model=dnn_classifier", "model.params.hidden_units=[-3]"], "model.params.hidden_units[0]=-3"),
    (["model=dnn_classifier", "model.params.dropout=1.5"], "model.params.dropout=1.5"),
]


@pytest.mark.parametrize("overrides,fragment", BAD_VALUES)
def test_bad_values_are_refused_naming_the_key(make_cfg, overrides, fragment):
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*overrides))
    message = str(e.value)
    assert fragment in message and "\n" not in message


def test_run_dir_is_named_from_experiment_overrides_only():
    assert run_dir([]) == "outputs/default"
    a = run_dir(["model=mnist", "data=fashion_mnist", "session=plain", "train.max_steps=2000"])
    b = run_dir(["data=fashion_mnist", "model=mnist", "session=monitored", "train.max_steps=4000"])
    assert a == b == "outputs/data-fashion_mnist"  # model=mnist is the default: the same run as no override
    assert run_dir(["resume=outputs/x", "train.max_steps=9"]) == "outputs/x"
    assert run_dir(["optimizer.learning_rate=0.1"]) != run_dir(["optimizer.learning_rate=0.01"])
    assert "/" not in run_dir(["data.path=/a/b"])[len("outputs/"):]
    assert len(run_dir([f"model.params.x{i}={i}" for i in range(50)])) <= len("outputs/") + 80


def test_run_dir_names_are_short_readable_and_never_shared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = ["+model.params.hidden_units=[10,10]", "++model.params.n_classes=3", "data=input_fn", "model=model_fn",
             "data.train_fn=my_pkg.inputs.train_input_fn", "data.eval_fn=my_pkg.inputs.eval_input_fn",
             "model.fn=my_pkg.model.model_fn"]
    name = run_dir(sweep)
    assert name.startswith("outputs/data-input_fn+model-model_fn+") and len(name) <= len("outputs/") + 80
    assert run_dir(list(reversed(sweep))) == name  # the same command (any order) finds the same dir
    assert run_dir(["data=tfrecord", "data.train_files=/data/a/train-*"]) != run_dir(
        ["data=tfrecord", "data.train_files=/data/b/train-*"])  # same last part, another experiment
    assert run_dir(["model.params.x=1"]) != run_dir(["optimizer.x=1"])  # same leaf key, another experiment
    assert run_dir(["model=mlp"]) == "outputs/model-mlp"  # nothing shortened: no hash
    # A run dir made under the former full-length name is found again by the same command.
    from trainer.cli.paths import _name
    os.makedirs(os.path.join("outputs", _name(sweep)))
    assert run_dir(sweep) == os.path.join("outputs", _name(sweep))
    os.makedirs(name)  # both exist: the new name wins
    assert run_dir(sweep) == name


def test_a_jobs_name_shows_its_swept_values_in_full_and_first():
    from trainer.cli.paths import short_name

    jobs = [["optimizer=momentum", "sweep=mnist_lr", f"optimizer.learning_rate={lr}", "train.batch_size=128",
             "model=mnist", "data=fashion_mnist"] for lr in (0.0012345678901234, 0.0012345678901299)]
    swept = frozenset({"optimizer", "optimizer.learning_rate", "train.batch_size"})
    names = [short_name(job, swept) for job in jobs]
    assert names[0].startswith("optimizer-momentum+batch_size-128+learning_rate-0.0012345678901234+")
    assert "learning_rate-0.0012345678901299+" in names[1]  # told apart by their names, not only the hash


def test_sweep_jobs_keep_every_override():
    assert job_dir(["session=plain", "optimizer.learning_rate=0.1"]) != job_dir(["session=monitored", "optimizer.learning_rate=0.1"])


def test_gpu_slot_picks_one_gpu_per_job(make_cfg):
    from trainer.session.device import session_config

    cfg = make_cfg("device=gpu", "device.gpu_slot=5")
    assert session_config(cfg.device, "gpu", num_gpus=4).gpu_options.visible_device_list == "1"
    assert session_config(cfg.device, "gpu", num_gpus=4).gpu_options.allow_growth
    assert session_config(make_cfg("device=cpu").device, "cpu").device_count["GPU"] == 0


@pytest.mark.parametrize("overrides, message", [
    (["model=mlp", "+model.params.hiden_units=[8]"], "model.params.hiden_units: model=mlp has no such param"),
    (["model=mnist", "+model.params.hidden_units=[8]"], "model.params.hidden_units: model=mnist has no such param"),
    (["optimizer.learning_rate=inf"], "optimizer.learning_rate=inf: must be a finite number"),
    (["optimizer.learning_rate=nan"], "optimizer.learning_rate=nan: must be a finite number"),
    (["train.max_steps=99999999999999999999"], "larger than TensorFlow's int64"),
    (["checkpoint.restore_step=10", "train.max_steps=5"], "checkpoint.restore_step=10 is beyond train.max_steps=5"),
    (["optimizer=adamw", "optimizer.weight_decay=2"], r"optimizer.weight_decay=2(.0)?: the fraction .* \[0, 1\)"),
    (["optimizer=adam", "optimizer.beta1=1.5"], r"optimizer.beta1=1.5: must lie in \[0, 1\)"),
    (["optimizer=adam", "optimizer.epsilon=-1"], r"optimizer.epsilon=-1(.0)?: must be a finite number > 0"),
    (["optimizer=momentum", "optimizer.momentum=1.0"], r"optimizer.momentum=1.0: must lie in \[0, 1\)"),
])
def test_values_that_would_be_ignored_or_run_for_ever_are_refused(make_cfg, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(make_cfg(*overrides))


def test_a_users_model_fn_keeps_free_form_params(make_cfg):
    validate(make_cfg("model=model_fn", "model.fn=estimator_models.cnn_model_fn", "+model.params.anything=1"))


def test_built_in_model_params_are_typed(make_cfg):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="hidden_units"):
        make_cfg("model=mlp", "model.params.hidden_units=[abc]")


def test_resume_overrides_merge_key_by_key_and_removal_cancels_an_addition(tmp_path):
    from omegaconf import OmegaConf

    from trainer.cli.resume import resume_overrides

    (tmp_path / ".hydra").mkdir()
    OmegaConf.save(OmegaConf.create(["model=mlp", "+hook@hooks.log=logging_tensor", "hooks.log.every_n_iter=2",
                                     "train.max_steps=5"]), tmp_path / ".hydra" / "overrides.yaml")
    merged = resume_overrides(str(tmp_path), [f"resume={tmp_path}", "~hooks.log", "train.max_steps=9", "~hooks.progress"])
    assert merged == ["model=mlp", "train.max_steps=9", "~hooks.progress"]  # a default hook's removal stays


@pytest.mark.parametrize("content, problem", [(b"- model=mlp\n- [", "ParserError"), (b"\xff\xfe- x", "UnicodeDecodeError"),
                                              (b"- a=${", "GrammarParseError")])
def test_a_damaged_run_record_is_one_line_naming_it(tmp_path, content, problem):
    """resume= on a run dir whose .hydra/overrides.yaml does not parse: one line naming the file."""
    from trainer.cli.resume import check_resumable

    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_bytes(content)
    with pytest.raises(ConfigError, match=rf"resume={tmp_path}: .*overrides.yaml does not parse \({problem}\); "
                                          "restore it"):
        check_resumable(str(tmp_path))


@pytest.mark.parametrize("content", [b"a: [", b"\xff\xfe: 1", b"a: ${"])
def test_a_config_dir_file_that_does_not_load_is_named(tmp_path, content):
    from trainer.cli.preflight import check_config_dirs

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mine.yaml").write_bytes(content)
    with pytest.raises(ConfigError, match=r"model/mine.yaml.*; fix the YAML"):
        check_config_dirs(["--config-dir", str(tmp_path)])
