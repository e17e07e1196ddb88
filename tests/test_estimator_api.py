"""``trainer.estimator``'s Estimator API, in the styles programs used it: the calls' semantics as
Estimator had them, programs run unedited through ``train-estimator``, and with imports changed."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml
import tensorflow as tf

import trainer.estimator as estimator
from helpers import TESTS_DIR, TRAIN

tf1 = tf.compat.v1
PROGRAMS = os.path.join(TESTS_DIR, "programs")
LAUNCHER = shutil.which("train-estimator") or os.path.join(os.path.dirname(sys.executable), "train-estimator")


def _data(seed=0, n=240):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    return x, ((x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0))


def model_fn(features, labels, mode, params):
    logits = tf1.layers.dense(features["x"], 3, name="logits")
    predictions = {"classes": tf.argmax(logits, 1), "probabilities": tf.nn.softmax(logits)}
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == estimator.ModeKeys.EVAL:
        return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": tf1.metrics.accuracy(labels, predictions["classes"])})
    train_op = tf1.train.GradientDescentOptimizer(params["learning_rate"]).minimize(
        loss, global_step=tf1.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _inputs(x, y, batch=24, repeat=True):
    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        return (ds.repeat().shuffle(240, seed=1) if repeat else ds).batch(batch)

    return input_fn


@pytest.fixture
def classifier(tmp_path):
    return estimator.Estimator(model_fn, model_dir=str(tmp_path / "model"), params={"learning_rate": 0.5},
                               config=estimator.RunConfig(tf_random_seed=3, save_checkpoints_steps=10))


def test_steps_count_from_the_restored_step_and_max_steps_is_absolute(classifier):
    x, y = _data()
    assert classifier.train(_inputs(x, y), steps=12) is classifier
    assert classifier.get_variable_value("global_step") == 12
    classifier.train(_inputs(x, y), steps=5)
    assert classifier.get_variable_value("global_step") == 17
    classifier.train(_inputs(x, y), max_steps=15)  # already past: nothing is trained
    assert classifier.get_variable_value("global_step") == 17
    classifier.train(_inputs(x, y), max_steps=20)
    assert classifier.get_variable_value("global_step") == 20
    assert sorted(classifier.get_variable_names()) == ["global_step", "logits/bias", "logits/kernel"]
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps"):
        classifier.train(_inputs(x, y), steps=1, max_steps=30)


def test_training_until_the_input_ends_twice_reads_it_twice(classifier):
    x, y = _data()
    classifier.train(_inputs(x, y, batch=40, repeat=False))  # 240 examples: 6 steps
    assert classifier.get_variable_value("global_step") == 6
    classifier.train(_inputs(x, y, batch=40, repeat=False))
    assert classifier.get_variable_value("global_step") == 12


def test_evaluate_returns_the_metrics_with_the_step_and_writes_summaries(classifier):
    x, y = _data()
    classifier.train(_inputs(x, y), steps=30)
    tx, ty = _data(1, 100)
    result = classifier.evaluate(_inputs(tx, ty, batch=25, repeat=False))
    assert set(result) == {"accuracy", "loss", "global_step"} and result["global_step"] == 30
    assert result["accuracy"] > 0.6  # two thresholds on two features: well above chance (1/3)
    bounded = classifier.evaluate(_inputs(tx, ty, batch=25, repeat=False), steps=2, name="two_batches")
    assert bounded["global_step"] == 30
    from trainer.hooks.early_stopping import read_eval_metrics

    assert read_eval_metrics(classifier.eval_dir())[30]["accuracy"] == pytest.approx(result["accuracy"])
    assert 30 in read_eval_metrics(classifier.eval_dir("two_batches"))


def test_predict_yields_each_example_in_input_order(classifier):
    x, y = _data()
    classifier.train(_inputs(x, y), steps=10)
    predict_input = lambda: tf.data.Dataset.from_tensor_slices({"x": x[:7]}).batch(3)  # noqa: E731
    singles = list(classifier.predict(predict_input))
    assert len(singles) == 7 and set(singles[0]) == {"classes", "probabilities"}
    kernel, bias = classifier.get_variable_value("logits/kernel"), classifier.get_variable_value("logits/bias")
    np.testing.assert_array_equal([p["classes"] for p in singles], np.argmax(x[:7] @ kernel + bias, axis=1))
    batches = list(classifier.predict(predict_input, predict_keys=["classes"], yield_single_examples=False))
    assert [b["classes"].shape for b in batches] == [(3,), (3,), (1,)] and set(batches[0]) == {"classes"}
    with pytest.raises(ValueError, match="Could not find trained model"):
        next(estimator.Estimator(model_fn, model_dir=str(classifier.model_dir) + "-empty").predict(predict_input))


def test_pandas_input_fn_feeds_columns_by_name_and_checks_its_frames(tmp_path):
    pd = pytest.importorskip("pandas")
    x, y = _data()
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "colour": np.where(x[:, 2] > 0, "red", "blue")})
    labels = pd.Series(y, name="label")

    def frame_model_fn(features, labels, mode, params):  # the 2018 census tutorials' style: feature columns
        colour = tf1.feature_column.indicator_column(
            tf1.feature_column.categorical_column_with_vocabulary_list("colour", ["red", "blue"]))
        net = tf1.feature_column.input_layer(features, [tf1.feature_column.numeric_column("a"),
                                                        tf1.feature_column.numeric_column("b"), colour])
        assert features["colour"].dtype == tf.string
        return model_fn({"x": tf.concat([net, tf.zeros_like(net[:, :1])], 1)}, labels, mode, params)

    est = estimator.Estimator(frame_model_fn, model_dir=str(tmp_path / "m"), params={"learning_rate": 0.5},
                              config=estimator.RunConfig(tf_random_seed=3))
    est.train(estimator.inputs.pandas_input_fn(frame, labels, batch_size=24, num_epochs=None, shuffle=True), steps=40)
    result = est.evaluate(estimator.inputs.pandas_input_fn(frame, labels, batch_size=60, shuffle=False))
    assert result["global_step"] == 40 and result["accuracy"] > 0.6
    ordered = est.predict(estimator.inputs.pandas_input_fn(frame[:5], batch_size=2, shuffle=False))
    assert len(list(ordered)) == 5
    with pytest.raises(ValueError, match="index of x and y differ"):
        estimator.inputs.pandas_input_fn(frame, labels.reset_index(drop=True)[::-1], shuffle=False)
    with pytest.raises(ValueError, match="target_column"):
        estimator.inputs.pandas_input_fn(frame.assign(target=1), labels, shuffle=False)
    with pytest.raises(ValueError, match="shuffle must be given"):
        estimator.inputs.pandas_input_fn(frame, labels)


def test_in_memory_evaluator_evaluates_the_live_weights_without_a_checkpoint(classifier):
    from trainer.hooks.early_stopping import read_eval_metrics

    x, y = _data()
    tx, ty = _data(1, 100)
    hook = estimator.experimental.InMemoryEvaluatorHook(classifier, _inputs(tx, ty, batch=50, repeat=False),
                                                        every_n_iter=10)
    classifier.train(_inputs(x, y), steps=25, hooks=[hook])
    assert [r["global_step"] for r in hook.results] == [1, 11, 21, 25]  # after the first step, every 10, at the end
    assert sorted(read_eval_metrics(classifier.eval_dir())) == [1, 11, 21, 25]
    saved = sorted(int(n.split("-")[1].split(".")[0]) for n in os.listdir(classifier.model_dir) if n.endswith(".index"))
    assert saved == [0, 10, 20, 25]  # the model_dir's own checkpoints only (save_checkpoints_steps=10)
    assert classifier.evaluate(_inputs(tx, ty, batch=50, repeat=False))["accuracy"] == \
        pytest.approx(hook.results[-1]["accuracy"])


def test_hooks_and_saving_listeners_of_a_call_run(classifier):
    x, y = _data()
    seen = []

    class Steps(estimator.SessionRunHook):
        def before_run(self, run_context):
            return estimator.SessionRunArgs(tf1.train.get_global_step())

        def after_run(self, run_context, run_values):
            seen.append(int(run_values.results))

    class Saves(estimator.CheckpointSaverListener):
        def after_save(self, session, global_step_value):
            seen.append(("saved", int(global_step_value)))

    classifier.train(_inputs(x, y), steps=10, hooks=[Steps()], saving_listeners=[Saves()])
    steps = [s for s in seen if isinstance(s, int)]
    # one call per step; a plain read of the global step races the train op's increment (as under
    # Estimator), so each value is the step before or after that step's update
    assert len(steps) == 10 and steps == sorted(steps)
    assert all(i <= step <= i + 1 for i, step in enumerate(steps))
    assert ("saved", 10) in seen


def test_run_config_fields_the_runner_cannot_honour_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"RunConfig\(device_fn=...\)"):
        estimator.Estimator(model_fn, str(tmp_path), config=estimator.RunConfig(device_fn=lambda op: "/cpu:0"))
    proto = tf1.ConfigProto(allow_soft_placement=True, graph_options=tf1.GraphOptions(build_cost_model=1))
    with pytest.raises(ValueError, match="graph_options cannot be passed on"):
        estimator.Estimator(model_fn, str(tmp_path), config=estimator.RunConfig(session_config=proto))
    config = estimator.RunConfig(save_checkpoints_steps=50).replace(keep_checkpoint_max=2)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs, config.keep_checkpoint_max) == (50, None, 2)
    assert estimator.RunConfig().save_checkpoints_secs == 600  # Estimator's default
    with pytest.raises(ValueError, match=r"train_distribute=OneDeviceStrategy\): the runner runs MirroredStrategy"):
        estimator.RunConfig(train_distribute=tf.distribute.OneDeviceStrategy("/cpu:0")).settings()
    assert not [k for k in estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy(["/cpu:0"])).settings()
                if k.startswith("device.")]  # one replica: nothing to change

    class MirroredStrategy:  # two GPUs' worth, without the GPUs
        num_replicas_in_sync = 2

    assert estimator.RunConfig(train_distribute=MirroredStrategy()).settings()["device.replicas"] == 2

    class CentralStorageStrategy:  # the variables on the CPU, two towers: the runner's towers
        num_replicas_in_sync = 2

    assert estimator.RunConfig(train_distribute=CentralStorageStrategy()).settings()["device.replicas"] == 2
    strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
    assert estimator.RunConfig(train_distribute=strategy).settings()["distributed.strategy"] == "collective"
    ps_strategy = tf1.distribute.experimental.ParameterServerStrategy()
    assert not [k for k in estimator.RunConfig(train_distribute=ps_strategy).settings() if k.startswith("distributed.")]
    cluster = {"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TF_CONFIG", json.dumps(cluster))
        assert estimator.RunConfig(train_distribute=ps_strategy).settings()["distributed.strategy"] == "ps"

    class ParameterServerStrategyV2:  # TF 2's: a ClusterCoordinator's, never Estimator's
        num_replicas_in_sync = 1

    with pytest.raises(ValueError, match=r"train_distribute=ParameterServerStrategyV2\): the runner runs"):
        estimator.RunConfig(train_distribute=ParameterServerStrategyV2()).settings()
    with pytest.raises(ValueError, match="var_name_to_vocab_info is not supported"):
        estimator.Estimator(model_fn, str(tmp_path), warm_start_from=estimator.WarmStartSettings(
            str(tmp_path), var_name_to_vocab_info={"w": estimator.VocabInfo("new.txt", 3, 1, "old.txt")})).train(
                _inputs(*_data()), steps=1)


def test_labels_as_a_tuple_pass_through_and_a_tpu_spec_is_converted_not_stripped(tmp_path):
    x, y = _data()

    def two_heads(features, labels, mode):
        first, second = labels  # one label per head, as multi-tower and multi-task programs passed them
        logits = tf1.layers.dense(features["x"], 3)
        loss = tf1.losses.sparse_softmax_cross_entropy(first, logits) + 0.0 * tf.reduce_sum(tf.cast(second, tf.float32))
        train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf1.train.get_global_step())
        if mode == estimator.ModeKeys.EVAL:
            def metric_fn(labels, logits):
                return {"accuracy": tf1.metrics.accuracy(labels, tf.argmax(logits, 1))}

            return estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, {"labels": first,
                                                                                             "logits": logits}))
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def tuple_input():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, (y, y))).batch(40)

    est = estimator.Estimator(two_heads, model_dir=str(tmp_path))
    est.train(tuple_input)
    result = est.evaluate(tuple_input)
    assert result["global_step"] == 6 and "accuracy" in result


@pytest.mark.cli
def test_a_flags_and_main_program_runs_unedited_through_the_launcher(tmp_path):
    report = tmp_path / "report.json"
    done = subprocess.run([LAUNCHER, os.path.join(PROGRAMS, "estimator_main.py"), f"--model_dir={tmp_path / 'model'}",
                           f"--report={report}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["metrics"]["global_step"] == 120 and result["metrics"]["accuracy"] > 0.9
    assert result["variables"] == ["global_step", "hidden_0/bias", "hidden_0/kernel", "logits/bias", "logits/kernel"]
    assert len(result["predicted_classes"]) == 10
    best = result["exports"][0]
    assert best.startswith(str(tmp_path / "model" / "export" / "best")) and os.path.isdir(best)
    loaded = tf.saved_model.load(result["exported"])
    out = loaded.signatures["serving_default"](x=tf.constant(np.eye(4, dtype=np.float32)[:3] * 2.0))
    assert out["class_ids"].shape == (3,)
    record = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert record["status"] == "finished" and record["global_step"] == 120


@pytest.mark.cli
def test_the_same_program_with_its_imports_changed(tmp_path):
    source = open(os.path.join(PROGRAMS, "estimator_main.py")).read()
    changed = source.replace("tf.estimator.", "trainer.estimator.").replace(
        "import tensorflow.compat.v1 as tf\n", "import tensorflow.compat.v1 as tf\n\nimport trainer.estimator\n")
    program = tmp_path / "ported.py"
    program.write_text(changed)
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(program), f"--model_dir={tmp_path / 'model'}", f"--report={report}",
                           "--max_steps=40"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(report.read_text())["metrics"]["global_step"] == 40


@pytest.mark.cli
def test_a_script_that_trains_at_import_and_a_tpu_program_run_unedited(tmp_path):
    done = subprocess.run([LAUNCHER, os.path.join(PROGRAMS, "estimator_at_import.py"), str(tmp_path / "a")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    weights = json.loads(done.stdout.split("weights:", 1)[1].strip().splitlines()[0])
    np.testing.assert_allclose(weights, [2.0, -1.0], atol=0.05)  # y = 2 x0 - x1 + 0.5, learned
    report = tmp_path / "tpu.json"
    done = subprocess.run([LAUNCHER, os.path.join(PROGRAMS, "tpu_program.py"), f"--model_dir={tmp_path / 'b'}",
                           f"--report={report}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["global_step"] == 60 and result["eval_accuracy"] > 0.9
    evaluated = json.loads((tmp_path / "b" / "eval_metrics.json").read_text())
    assert evaluated["examples"] == 96  # 100 examples in batches of 16, the remainder dropped: exactly what was read
    done = subprocess.run([LAUNCHER, os.path.join(PROGRAMS, "tpu_program.py"), f"--model_dir={tmp_path / 'c'}",
                           "--use_tpu=true"], capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "there is no TPU here; pass use_tpu=False" in done.stderr
    done = subprocess.run([LAUNCHER, os.path.join(PROGRAMS, "tpu_program.py"), f"--model_dir={tmp_path / 'd'}",
                           "--tpu=my-tpu"], capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "TPUClusterResolver(tpu='my-tpu'): the runner has no TPU" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "d").exists()


def _all_exit_0(procs) -> None:
    """Waits for each task's process (``procs``: task -> Popen, output piped) and asserts it exited 0."""
    try:
        outputs = {task: p.communicate(timeout=300)[0] for task, p in procs.items()}
    finally:
        for p in procs.values():
            p.kill()
    for task, p in procs.items():
        assert p.returncode == 0, f"{task}:\n{outputs[task][-3000:]}"


@pytest.mark.cluster
def test_train_and_evaluate_under_tf_config_runs_each_task_of_the_cluster(tmp_path):
    """The chief, a ps and the evaluator: the same unedited program, each with its TF_CONFIG, on
    real gRPC servers on 127.0.0.1; the evaluator evaluates and exports the chief's checkpoints."""
    from trainer.dist.roles import free_ports

    chief, ps = (f"127.0.0.1:{p}" for p in free_ports("127.0.0.1", 2))
    cluster = {"chief": [chief], "ps": [ps]}
    job_dir = tmp_path / "job"
    procs = {}
    for task in ("ps", "evaluator", "chief"):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": task, "index": 0}}))
        procs[task] = subprocess.Popen([LAUNCHER, os.path.join(PROGRAMS, "estimator_cluster.py"),
                                        f"--job-dir={job_dir}", "--train-steps=200"], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _all_exit_0(procs)
    assert tf.train.load_variable(tf.train.latest_checkpoint(str(job_dir)), "global_step") == 200
    from trainer.hooks.early_stopping import read_eval_metrics

    evaluations = read_eval_metrics(str(job_dir / "eval"))
    assert 200 in evaluations and evaluations[200]["accuracy"] > 0.9  # the final checkpoint, evaluated
    exports = os.listdir(job_dir / "export" / "latest")
    assert len(exports) == 1  # exports_to_keep=1
    assert "model.ckpt" not in " ".join(os.listdir(job_dir / "tasks" / "ps-0"))  # the ps saves nothing


@pytest.mark.cluster
def test_multi_worker_mirrored_strategy_program_trains_as_one_worker_with_the_global_batch(tmp_path):
    """The "multi-worker training with Estimator" tutorial program, unedited: two workers of a TF_CONFIG
    cluster with ``train_distribute=MultiWorkerMirroredStrategy()`` (batch 32 each) end with the
    weights of the same program on one worker with batch 64: the model_fn's own ``minimize`` was
    all-reduced (``distributed.strategy=collective``), and only the chief wrote checkpoints."""
    from trainer.dist.roles import free_ports

    program = os.path.join(PROGRAMS, "estimator_mwms.py")
    one = subprocess.run([LAUNCHER, program, f"--model-dir={tmp_path / 'one'}", "--batch-size=64", "--one-worker"],
                         capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    workers = [f"127.0.0.1:{p}" for p in free_ports("127.0.0.1", 2)]
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                                     "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen([LAUNCHER, program, f"--model-dir={tmp_path / 'two'}", "--batch-size=32"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for index, p in enumerate(procs):
        assert p.returncode == 0, f"worker {index}:\n{outputs[index][-3000:]}"
    chief = tf.train.latest_checkpoint(str(tmp_path / "two"))
    reference = tf.train.latest_checkpoint(str(tmp_path / "one"))
    assert tf.train.load_variable(chief, "global_step") == 40
    names = [name for name, _ in tf.train.list_variables(reference) if name.startswith("dense")]
    assert len(names) == 4 and names == [name for name, _ in tf.train.list_variables(chief) if name.startswith("dense")]
    for name in names:
        np.testing.assert_allclose(tf.train.load_variable(chief, name), tf.train.load_variable(reference, name),
                                   rtol=1e-5, atol=1e-6)
    assert "model.ckpt" not in " ".join(os.listdir(tmp_path / "two" / "tasks" / "worker-1"))


@pytest.mark.cluster
def test_parameter_server_and_central_storage_strategies_run_as_estimator_ran_them(tmp_path):
    """The same tutorial program with a v1 ParameterServerStrategy on a TF_CONFIG cluster of a ps and a
    chief (the ps tasks hold the variables; the chief trains and saves), and with CentralStorageStrategy
    on one machine with one device (one tower: the same weights as no strategy)."""
    from trainer.dist.roles import free_ports

    program = os.path.join(PROGRAMS, "estimator_mwms.py")
    ps, chief = (f"127.0.0.1:{p}" for p in free_ports("127.0.0.1", 2))
    procs = {}
    for task in ("ps", "chief"):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"ps": [ps], "chief": [chief]},
                                                     "task": {"type": task, "index": 0}}))
        procs[task] = subprocess.Popen([LAUNCHER, program, f"--model-dir={tmp_path / 'ps'}", "--steps=30",
                                        "--strategy=parameter_server"], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
    _all_exit_0(procs)
    assert tf.train.load_variable(tf.train.latest_checkpoint(str(tmp_path / "ps")), "global_step") == 30
    runs = {}
    for name, extra in (("central", ["--strategy=central_storage"]), ("none", ["--one-worker"])):
        done = subprocess.run([LAUNCHER, program, f"--model-dir={tmp_path / name}", "--steps=30", *extra],
                              capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CONFIG=""))
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = tf.train.latest_checkpoint(str(tmp_path / name))
    for variable in ("dense/kernel", "dense_1/kernel"):
        np.testing.assert_allclose(tf.train.load_variable(runs["central"], variable),
                                   tf.train.load_variable(runs["none"], variable), rtol=1e-6)


USER_MODULE = '''
import numpy as np
import tensorflow as tf


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 2, name="logits")
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(params["lr"]).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def train_input_fn():
    x = np.random.RandomState(0).normal(size=(200, 3)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (x[:, 0] > 0).astype(np.int64))).repeat().batch(20)
'''

USER_PROGRAM = '''
import tensorflow as tf
import mymodel

estimator = tf.estimator.Estimator(mymodel.model_fn, model_dir="model", params={"lr": 0.1})
estimator.train(mymodel.train_input_fn, steps=30)
estimator.train(lambda: mymodel.train_input_fn(), steps=10)
print("step", estimator.get_variable_value("global_step"))
'''


@pytest.mark.cli
def test_a_programs_model_dir_resumes_under_the_train_command_and_back(tmp_path):
    """The program and the train command are two doors to one model_dir: ``train resume=`` asks for
    the callable the program made on the fly (a lambda), by key, then continues; the program then
    continues from there. The model_fn, written against tf.estimator, runs unedited under ``train``."""
    (tmp_path / "mymodel.py").write_text(USER_MODULE)
    (tmp_path / "program.py").write_text(USER_PROGRAM)

    def step():
        return tf.train.load_variable(tf.train.latest_checkpoint(str(tmp_path / "model")), "global_step")

    def run(*command):
        return subprocess.run(list(command), cwd=tmp_path, capture_output=True, text=True, timeout=600)

    done = run(LAUNCHER, "program.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert step() == 40
    refused = run(TRAIN, "resume=model", "train.max_steps=60")
    assert refused.returncode == 2
    (line,) = [e for e in refused.stderr.splitlines() if e.startswith("error:")]
    assert "data.train_fn=MODULE.FUNCTION" in line and "<lambda> (program.py:7)" in line and "model.fn" not in line
    assert step() == 40
    done = run(TRAIN, "resume=model", "train.max_steps=60", "data.train_fn=mymodel.train_input_fn")
    assert done.returncode == 0, done.stderr[-3000:]
    assert step() == 60
    done = run(TRAIN, "resume=model", "train.max_steps=70")  # the callable given once is part of the record now
    assert done.returncode == 0, done.stderr[-3000:]
    assert step() == 70
    done = run(LAUNCHER, "program.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 110" in done.stdout


FULL_PROGRAM = '''
"""Trains a two-class model on three numbers (the custom Estimator tutorial's shape)."""
import argparse

import numpy as np
import tensorflow as tf


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 2, name="logits")
    predicted = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {"class_ids": predicted, "probabilities": tf.nn.softmax(logits)}
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
            "predict": tf.estimator.export.PredictOutput(predictions)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    accuracy = tf.compat.v1.metrics.accuracy(labels, predicted)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    train_op = tf.compat.v1.train.GradientDescentOptimizer(params["lr"]).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def examples(seed, count):
    x = np.random.RandomState(seed).normal(size=(count, 3)).astype(np.float32)
    return {"x": x}, (x[:, 0] > 0).astype(np.int64)


def input_fn(features, labels, batch_size, training):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return dataset.shuffle(200).repeat().batch(batch_size) if training else dataset.batch(batch_size)


def eval_input_fn():
    return input_fn(*examples(1, 100), 25, training=False)


def serving_input_receiver_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_steps", type=int, default=30)
    args = parser.parse_args()
    classifier = tf.estimator.Estimator(model_fn, model_dir="model", params={"lr": 0.5})
    train_x, train_y = examples(0, 200)
    classifier.train(input_fn=lambda: input_fn(train_x, train_y, 20, training=True), steps=args.train_steps)


if __name__ == "__main__":
    main()
'''


@pytest.mark.cli
def test_the_train_commands_other_modes_run_on_a_programs_model_dir(tmp_path):
    """A program trained into model_dir with a lambda input and never evaluated: ``train
    resume=model_dir mode=evaluate|predict|export`` asks, in one line, only for the input that mode
    reads (never the training input, never eval.enabled), then runs; the record still continues
    the training as the program left it."""
    (tmp_path / "program.py").write_text(FULL_PROGRAM)

    def run(*command):  # the program's own functions are in __main__ there: model.fn names them
        return subprocess.run(list(command), cwd=tmp_path, capture_output=True, text=True, timeout=600)

    def error_line(done):
        assert done.returncode == 2, done.stderr[-3000:]
        (line,) = [e for e in done.stderr.splitlines() if e.startswith("error:")]
        assert "eval.enabled" not in line and "train_fn" not in line, line
        return line

    done = run(LAUNCHER, "program.py")
    assert done.returncode == 0, done.stderr[-3000:]
    saved = (tmp_path / "model" / ".hydra" / "overrides.yaml").read_text()
    assert "mode=evaluate needs data.eval_fn=MODULE.FUNCTION" in error_line(run(TRAIN, "resume=model", "model.fn=program.model_fn", "mode=evaluate"))
    done = run(TRAIN, "resume=model", "model.fn=program.model_fn", "mode=evaluate", "data.eval_fn=program.eval_input_fn")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["global_step"] == 30 and result["examples"] == 100 and result["metrics"]["accuracy"] > 0.8

    assert "export.serving_input_fn=MODULE.FUNCTION" in error_line(run(TRAIN, "resume=model", "model.fn=program.model_fn", "mode=export"))
    done = run(TRAIN, "resume=model", "model.fn=program.model_fn", "mode=export", "export.serving_input_fn=program.serving_input_receiver_fn")
    assert done.returncode == 0, done.stderr[-3000:]
    exported = json.loads(done.stdout.strip().splitlines()[-1])["export_dir"]
    loaded = tf.saved_model.load(exported)
    out = loaded.signatures["serving_default"](x=tf.constant([[2.0, 0, 0], [-2.0, 0, 0]]))
    assert out["class_ids"].numpy().tolist() == [1, 0]

    done = run(TRAIN, "resume=model", "model.fn=program.model_fn", "mode=predict", "data.eval_fn=program.eval_input_fn")
    assert done.returncode == 0, done.stderr[-3000:]
    predictions = np.load(json.loads(done.stdout.strip().splitlines()[-1])["predictions"])
    assert predictions["class_ids"].shape == (100,)

    assert (tmp_path / "model" / ".hydra" / "overrides.yaml").read_text() == saved  # training resumes as before
    needs = yaml.safe_load((tmp_path / "model" / ".hydra" / "program.yaml").read_text())["needs"]
    assert "data.train_fn" in needs  # and a resumed training still asks for the program's lambda input


def test_the_record_names_importable_callables_and_lists_the_rest():
    import functools

    from trainer.estimator.resume_record import _yaml_value, describe, importable_name

    assert importable_name(model_fn) == f"{__name__}.model_fn"
    assert importable_name(lambda: 0) is None
    assert importable_name(functools.partial(model_fn, params={})) is None
    assert importable_name(_inputs(*_data())) is None  # a closure
    assert describe(_inputs(*_data())).startswith("_inputs.<locals>.input_fn (test_estimator_api.py:")
    assert _yaml_value({"lr": 0.1, "units": [8, 4], "name": "a b", "on": True}) == \
        '{lr:0.1,units:[8,4],name:"a b",on:true}'
    assert _yaml_value({"columns": [object()]}) is None and _yaml_value({"not an id": 1}) is None


def test_run_config_takes_what_estimator_took_and_names_a_bad_field_or_tf_config(monkeypatch):
    """keep_checkpoint_max=None keeps every checkpoint and log_step_count_steps=None is quiet, as on
    Estimator; a wrong value fails at construction naming the field; a malformed TF_CONFIG is one line
    naming TF_CONFIG. The errors are ValueErrors, as Estimator's were, and one line at the launcher."""
    from trainer.errors import ConfigError

    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert estimator.RunConfig(keep_checkpoint_max=None).settings()["checkpoint.keep"] == 0
    assert "log.every_steps" not in estimator.RunConfig(log_step_count_steps=None).settings()
    for field, value, says in (("save_summary_steps", "100", "an integer >= 0"), ("tf_random_seed", 1.5, "an integer"),
                               ("log_step_count_steps", 0, "an integer >= 1"),
                               ("keep_checkpoint_every_n_hours", 0, "a number > 0"),
                               ("keep_checkpoint_max", -1, "an integer >= 0")):
        with pytest.raises(ValueError, match=re.escape(f"RunConfig({field}={value!r}): takes {says}")) as raised:
            estimator.RunConfig(**{field: value})
        assert isinstance(raised.value, ConfigError)
    cases = (("{not json", "TF_CONFIG is not JSON"), ("[1, 2]", "TF_CONFIG is a list"),
             ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 2}}',
              "task.index 2 is past the 1 address(es) of job 'worker'"),
             ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "one"}}', "task.index is 'one'"),
             ('{"cluster": {"worker": "a:1"}}', "cluster must map each job to a list of addresses"))
    for raw, says in cases:
        monkeypatch.setenv("TF_CONFIG", raw)
        with pytest.raises(ValueError, match=re.escape(says)):
            estimator.RunConfig()
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": "1"}}')
    assert estimator.RunConfig().task_id == 1  # Estimator read "1" as 1


def _contract_model(case):
    """A model_fn breaking Estimator's contract as ``case`` says (else a plain two-class model)."""
    def contract_model_fn(features, labels, mode):
        logits = tf1.layers.dense(features["x"], 3)
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        loss = {"vector loss": per_example, "integer loss": tf.cast(tf.reduce_sum(per_example), tf.int64),
                "loss of shape [1]": tf.reshape(tf.reduce_mean(per_example), [1])}.get(case, tf.reduce_mean(per_example))
        accuracy = tf1.metrics.accuracy(labels, tf.argmax(logits, 1))
        metrics = {"a metric tensor": {"accuracy": accuracy[0]}, "a metric 3-tuple": {"accuracy": (*accuracy, 1)},
                   "metrics as a list": [accuracy]}.get(case, {"accuracy": accuracy})
        if mode == estimator.ModeKeys.EVAL:
            return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
        train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(per_example),
                                                                    global_step=tf1.train.get_global_step())
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return contract_model_fn


def _contract_input(case):
    x, y = _data()

    def contract_input_fn():
        if case == "features only":
            return tf.data.Dataset.from_tensor_slices({"x": x}).batch(24)
        if case == "an input of three":
            return tf.data.Dataset.from_tensor_slices(({"x": x}, y, y)).batch(24)
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(24)

    return contract_input_fn


@pytest.mark.parametrize("case,says", [
    ("features only", r"the model_fn _contract_model.<locals>.contract_model_fn \(test_estimator_api.py:\d+\) failed in "
                      r"mode train with labels=None \(ValueError: .*\): the input_fn gave features only; return "
                      r"\(features, labels\)"),
    ("an input of three", r"the input_fn _contract_input.<locals>.contract_input_fn \(test_estimator_api.py:\d+\) gave a "
                          r"tuple of 3 per batch; an input_fn gives \(features, labels\)"),
    ("vector loss", r"contract_model_fn \(test_estimator_api.py:\d+\) returned a loss of shape \[None\] for mode train; "
                    r"the loss is a scalar"),
    ("integer loss", r"returned a loss of dtype int64 for mode train; the loss is a floating-point scalar"),
    ("a metric tensor", r"returned eval_metric_ops\['accuracy'\] as a \w+Tensor; each value is a \(metric_value, "
                        r"update_op\) pair"),
    ("a metric 3-tuple", r"returned eval_metric_ops\['accuracy'\] as a 3-tuple"),
    ("metrics as a list", r"returned eval_metric_ops of type list; give a dict"),
])
def test_a_model_fn_or_input_fn_off_estimators_contract_is_one_line_naming_it(tmp_path, case, says):
    """What Estimator's EstimatorSpec and input handling refused (or failed on deep inside
    TensorFlow or the runner's own hooks) is a ValueError naming the program's own function (never
    a name the runner made for it) and what to return; a [1]-shaped loss is taken, as Estimator took it."""
    from trainer.errors import ContractError

    classifier = estimator.Estimator(_contract_model(case), model_dir=str(tmp_path / "model"))
    with pytest.raises(ContractError, match=says) as raised:
        classifier.train(_contract_input(case), steps=3)
        classifier.evaluate(_contract_input(case))
    assert isinstance(raised.value, ValueError) and "\n" not in str(raised.value)
    assert "registry" not in str(raised.value) and "model.fn=" not in str(raised.value)


def test_a_loss_of_shape_one_is_taken_as_estimator_took_it(tmp_path):
    classifier = estimator.Estimator(_contract_model("loss of shape [1]"), model_dir=str(tmp_path / "model"))
    classifier.train(_contract_input("loss of shape [1]"), steps=3)
    assert classifier.evaluate(_contract_input("loss of shape [1]"))["global_step"] == 3


def test_evaluate_predict_and_train_pass_over_a_truncated_newest_checkpoint(classifier, tmp_path, caplog):
    """The newest checkpoint cut short (a kill mid-save, a full disk): evaluate, predict and the
    variable readers use the newest intact one, warning about the damaged one, as training does."""
    import logging

    caplog.set_level(logging.WARNING, logger="trainer")
    x, y = _data()
    classifier.train(_inputs(x, y), steps=20)  # checkpoints at 10 and 20 (save_checkpoints_steps=10)
    data = tmp_path / "model" / "model.ckpt-20.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:len(data.read_bytes()) // 2])
    assert classifier.evaluate(_inputs(x, y, repeat=False))["global_step"] == 10
    assert any("model.ckpt-20" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert classifier.get_variable_value("global_step") == 10
    assert len(list(classifier.predict(_inputs(x[:5], y[:5], repeat=False)))) == 5
    classifier.train(_inputs(x, y), steps=5)
    assert classifier.get_variable_value("global_step") == 15


def test_a_program_record_asks_for_params_it_could_not_keep_in_plain_words(tmp_path):
    """Params holding objects (feature columns) are asked for by key, in a sentence that reads."""
    from trainer.cli.resume import resume_overrides
    from trainer.errors import ConfigError

    class Column:  # an object a program's params might hold
        pass

    from trainer.estimator.plan import Call
    from trainer.estimator.resume_record import write_record

    write_record(str(tmp_path), Call(settings={"model.fn": model_fn, "mode": "train"}), {"model.fn": model_fn},
                 {"columns": [Column()]})
    with pytest.raises(ConfigError) as raised:
        resume_overrides(str(tmp_path), ["train.max_steps=5"])
    message = str(raised.value)
    assert "give model.params='{...}' (the program's params (values that are not plain data))" in message, message
    assert "the program's the" not in message and "model.fn=" not in message


def test_a_serving_input_receiver_fn_returning_the_wrong_thing_is_named_in_the_programs_terms(classifier, tmp_path):
    from trainer.errors import ContractError

    x, y = _data()
    classifier.train(_inputs(x, y), steps=2)

    def serving_input_receiver_fn():
        return tf1.placeholder(tf.float32, [None, 4])  # a tensor, not a receiver

    with pytest.raises(ContractError, match=r"^the serving_input_receiver_fn test_a_serving_input_receiver_fn_returning"
                                            r".*serving_input_receiver_fn \(test_estimator_api.py:\d+\) returned "
                                            r"\w*Tensor; return a tf.estimator.export.ServingInputReceiver") as raised:
        classifier.export_saved_model(str(tmp_path / "export"), serving_input_receiver_fn)
    assert "export.serving_input_fn" not in str(raised.value) and "registry" not in str(raised.value)
    assert not (tmp_path / "export").exists() or not os.listdir(tmp_path / "export")  # nothing half-exported


def test_train_and_evaluate_first_evaluates_the_first_checkpoint_after_its_start(tmp_path):
    """As Estimator's listener did (its first save skipped, then its throttle timer never triggered):
    the first evaluation is of the first checkpoint saved after the starting one, the next waits for
    throttle_secs (600), and the last checkpoint is evaluated at the end; a resumed run likewise."""
    from trainer.hooks.early_stopping import read_eval_metrics

    x, y = _data()
    classifier = estimator.Estimator(model_fn, model_dir=str(tmp_path / "model"), params={"learning_rate": 0.5},
                                     config=estimator.RunConfig(tf_random_seed=3, save_checkpoints_steps=10))
    eval_spec = estimator.EvalSpec(_inputs(x, y, repeat=False), steps=None)
    estimator.train_and_evaluate(classifier, estimator.TrainSpec(_inputs(x, y), max_steps=30), eval_spec)
    assert sorted(read_eval_metrics(str(tmp_path / "model" / "eval"))) == [10, 30]
    estimator.train_and_evaluate(classifier, estimator.TrainSpec(_inputs(x, y), max_steps=60), eval_spec)
    assert sorted(read_eval_metrics(str(tmp_path / "model" / "eval"))) == [10, 30, 40, 60]
