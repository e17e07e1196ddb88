"""Estimator programs of every era, unedited through ``train-estimator``: the v1 canned family with the
numbers of Estimator 2.15's v1 classes, TF 1.x programs converted on import (tf.flags, tf.logging,
tf.app.run, tf.contrib's pieces, private import paths), a name nothing provides failing in one line,
and the Cloud ML Engine ``trainer/`` package layout beside the runner's own ``trainer``."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")
LAUNCHER = shutil.which("train-estimator") or os.path.join(os.path.dirname(sys.executable), "train-estimator")

# tests/programs/v1_canned_program.py KIND DIR run on real Estimator 2.15 (tensorflow-cpu 2.15.1,
# tensorflow-estimator 2.15.0, this machine): evaluate() after 100 steps.
ESTIMATOR_215 = {
    "dnn": {"accuracy": 0.9921875, "auc": 0.9998235106468201, "average_loss": 0.2427908182144165,
            "loss": 15.538612365722656, "precision": 0.9915611743927002, "prediction/mean": 0.5900530815124512},
    "linear": {"accuracy": 0.96875, "auc": 0.9995627403259277, "average_loss": 0.23396390676498413,
               "loss": 14.973690032958984, "precision": 1.0, "prediction/mean": 0.45600295066833496},
    "dlc": {"accuracy": 0.7734375, "auc": 0.9276946783065796, "average_loss": 0.5621874928474426,
            "loss": 35.97999954223633, "precision": 0.9618320465087891, "prediction/mean": 0.41467732191085815},
}
# Its checkpoints' slot variables (TF1 optimizers; the partitioner's part and t_0 in their names).
ESTIMATOR_215_SLOTS = {
    "dnn": ["dnn/hiddenlayer_0/kernel/t_0/Adagrad", "dnn/logits/bias/t_0/Adagrad",
            "dnn/input_from_feature_columns/input_layer/c_embedding/embedding_weights/t_0/Adagrad"],
    "linear": ["linear/linear_model/c/weights/part_0/Ftrl", "linear/linear_model/x/weights/part_0/Ftrl_1",
               "linear/linear_model/bias_weights/part_0/Ftrl"],
    "dlc": ["dnn/hiddenlayer_0/kernel/Adagrad", "linear/linear_model/c/weights/Ftrl_1"],
}


def launch(*args, cwd, check=True):
    done = subprocess.run([LAUNCHER, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and done.returncode != 0:
        raise AssertionError(f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def printed(done, tag):
    return json.loads(next(line for line in done.stdout.splitlines() if line.startswith(tag + " "))[len(tag) + 1:])


@pytest.mark.cli
@pytest.mark.parametrize("kind", ["dnn", "linear", "dlc"])
def test_v1_canned_family_has_estimator_215s_numbers_and_names(tmp_path, kind):
    done = launch(os.path.join(PROGRAMS, "v1_canned_program.py"), kind, str(tmp_path / "m"), cwd=tmp_path)
    result = printed(done, "RESULT")
    for key, value in ESTIMATOR_215[kind].items():
        assert result[key][1] == pytest.approx(value, rel=2e-5, abs=1e-6), (key, result[key])
    assert result["loss"][0] == "float32" and result["global_step"] == ["int64", 100.0]  # Estimator's types
    variables = printed(done, "VARIABLES")
    assert set(ESTIMATOR_215_SLOTS[kind]) <= set(variables), variables
    assert not any("training/" in v for v in variables)  # no Keras optimizer slots


@pytest.mark.cli
def test_tf1_program_runs_unedited_with_the_v1_numbers(tmp_path):
    program = os.path.join(PROGRAMS, "tf1_estimator_program.py")
    done = launch(program, "--model_dir", str(tmp_path / "dnn"), "--kind", "dnn", cwd=tmp_path)
    # The same program on Estimator 2.15 with its two TF 2 edits (tensorflow.compat.v1 and
    # disable_v2_behavior; the private path as tensorflow_estimator's): loss 17.738866806030273,
    # accuracy 0.9765625. TF 1.x's tf.estimator.DNNClassifier: TF1 Adagrad at 0.05, the summed loss.
    result = printed(done, "RESULT")
    assert result["loss"] == pytest.approx(17.738866806030273, rel=1e-5)
    assert result["accuracy"] == pytest.approx(0.9765625)
    custom = launch(program, "--model_dir", str(tmp_path / "custom"), cwd=tmp_path)
    assert printed(custom, "RESULT")["accuracy"] > 0.9
    names = {name for name, _ in tf.train.list_variables(str(tmp_path / "custom"))}
    assert {"LayerNorm/beta", "LayerNorm/gamma"} <= names, names  # tf.contrib.layers.layer_norm's own names
    with open(program) as handle:
        assert "tf.flags" in handle.read()  # the file itself is as it was


@pytest.mark.cli
def test_a_tf1_name_nothing_provides_fails_in_one_line_naming_the_line(tmp_path):
    (tmp_path / "slim_program.py").write_text(
        "import tensorflow as tf\n"
        "tf.logging.set_verbosity(tf.logging.INFO)\n"
        "def main(_):\n"
        "    net = tf.contrib.slim.fully_connected(tf.zeros([2, 3]), 4)\n"
        "if __name__ == '__main__':\n"
        "    tf.app.run()\n")
    done = launch("slim_program.py", cwd=tmp_path, check=False)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[-1].startswith("error: slim_program.py:4: tf.contrib.slim.fully_connected is not available"), lines[-1]
    assert "upgrader" in lines[-1]


@pytest.mark.cli
@pytest.mark.parametrize("how", ["path", "module"])
def test_cloud_ml_trainer_package_gets_its_own_trainer(tmp_path, how):
    shutil.copytree(os.path.join(PROGRAMS, "cloudml"), tmp_path / "pkg")
    job = str(tmp_path / "job")
    rng = np.random.RandomState(0)
    x = rng.randn(256, 2)
    rows = [f"{a:.4f},{b:.4f},{'yes' if a > 0 else 'no'}" for a, b in x]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    args = ["trainer/task.py"] if how == "path" else ["-m", "trainer.task"]
    done = launch(*args, "--job-dir", job, "--train-files", str(tmp_path / "data.csv"), cwd=tmp_path / "pkg")
    result = printed(done, "RESULT")
    assert result["global_step"] == 50 and result["accuracy"] > 0.8, result
    # tf.decode_csv ran converted inside Dataset.map (AutoGraph reads the converted source, not the file)
    assert "decode_csv" not in done.stderr, done.stderr[-2000:]
    assert any(n.endswith("/t_0/Adagrad") for n, _ in tf.train.list_variables(job))  # TF 1.x's DNNClassifier


def test_private_estimator_paths_resolve_and_a_missing_one_is_one_line():
    from trainer.estimator.alias import alias_estimator

    alias_estimator()
    from tensorflow.python.estimator.model_fn import ModeKeys
    from tensorflow_estimator.python.estimator.canned import metric_keys, prediction_keys
    from tensorflow_estimator.python.estimator.canned.dnn import DNNClassifier, DNNClassifierV2
    from tensorflow_estimator.python.estimator.tpu.tpu_config import InputPipelineConfig

    import trainer.estimator as api
    import trainer.estimator.v1 as v1

    assert ModeKeys is api.ModeKeys and metric_keys.MetricKeys.AUC == "auc"
    assert prediction_keys.PredictionKeys.CLASS_IDS == "class_ids"
    assert DNNClassifier is v1.DNNClassifier and DNNClassifierV2 is api.DNNClassifier
    assert InputPipelineConfig.PER_HOST_V2 == api.tpu.InputPipelineConfig.PER_HOST_V2
    assert tf.compat.v1.estimator.DNNClassifier is v1.DNNClassifier and tf.estimator.DNNClassifier is api.DNNClassifier
    with pytest.raises(SystemExit, match=r"tensorflow_estimator.python.estimator.util_nonesuch is not provided"):
        __import__("tensorflow_estimator.python.estimator.util_nonesuch")


TRAIN_AND_EVALUATE_PROGRAM = '''
"""train_and_evaluate over an evaluation set that takes long to go through."""
import sys

import tensorflow as tf


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def examples(count):
    x = tf.random.stateless_normal([count, 3], seed=[1, 2])
    return tf.data.Dataset.from_tensor_slices(({"x": x}, tf.cast(x[:, 0] > 0, tf.int64)))


def train_input_fn():
    return examples(1000).repeat().batch(10)


def eval_input_fn():
    print("evaluation input built", flush=True)
    return examples(1000).repeat(100000).batch(1)  # a long evaluation


estimator = tf.estimator.Estimator(model_fn, model_dir=sys.argv[1],
                                   config=tf.estimator.RunConfig(save_checkpoints_steps=20))
tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(train_input_fn, max_steps=10000000),
                                tf.estimator.EvalSpec(eval_input_fn, steps=None, throttle_secs=0))
'''


@pytest.mark.cli
def test_a_signal_during_train_and_evaluates_evaluation_stops_within_seconds(tmp_path, signal_number=15, status=143):
    """The evaluation train_and_evaluate runs after a checkpoint is saved (inside the saver's listener)
    ends within seconds of SIGTERM (SIGINT takes the same path): the run stops as in training (one line, the train
    command's status), with the checkpoint it had saved, and no evaluation recorded."""
    import time

    (tmp_path / "program.py").write_text(TRAIN_AND_EVALUATE_PROGRAM)
    model_dir = tmp_path / "m"
    proc = subprocess.Popen([LAUNCHER, "program.py", str(model_dir)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "evaluation input built"
        time.sleep(2)
        assert proc.poll() is None
        proc.send_signal(signal_number)
        sent = time.time()
        out, err = proc.communicate(timeout=60)
        waited = time.time() - sent
    finally:
        proc.kill()
    assert proc.returncode == status, err[-3000:]
    assert waited < 5, waited
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: stopped by SIG"), err[-2000:]
    assert int(tf.train.latest_checkpoint(str(model_dir)).rsplit("-", 1)[1]) >= 20
    assert not os.path.exists(model_dir / "eval") or not os.listdir(model_dir / "eval")


def test_params_recorded_for_resume_come_back_exactly_or_are_asked_for():
    from trainer.estimator.resume_record import _round_trips, _yaml_value

    for exact in ({"a": 1, "b": "x", "l": [1, 2.5, "q"]}, {"s": "é日"}, {"t": True, "n": None}):
        assert _round_trips("+model.params", _yaml_value(exact), exact), exact
    for changed in ({"s": "${oc.env:HOME}"}, {"s": "a\\b"}, {"s": "a\nb"}, {"f": float("inf")}):
        assert not _round_trips("+model.params", _yaml_value(changed), changed), changed


@pytest.mark.cli
@pytest.mark.parametrize("signal_number,status", [(2, 130), (15, 143)])
def test_a_signal_during_a_programs_training_exits_as_the_train_command_does(tmp_path, signal_number, status):
    """SIGINT or SIGTERM while a TF 1.x program trains: the checkpoint is saved, the exit status is the
    train command's (130, 143) and the message is one line, not a traceback."""
    import time

    model_dir = tmp_path / "m"
    proc = subprocess.Popen([LAUNCHER, os.path.join(PROGRAMS, "tf1_estimator_program.py"), f"--model_dir={model_dir}",
                             "--train_steps=100000000"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 120
    while not (model_dir / "checkpoint").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1)
    proc.send_signal(signal_number)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: stopped by SIG")
    assert tf.train.latest_checkpoint(str(model_dir)).rsplit("-", 1)[1] != "0"


def test_a_module_with_syntax_the_upgrader_cannot_read_still_has_its_tf1_names_rewritten():
    """pasta, under TensorFlow's upgrader, fails inside on ':=' (Python 3.8); the module still imports,
    its tf.compat.v1 names rewritten by the second pass, and a module without TensorFlow is left as it is."""
    from trainer.estimator import upgrade

    source = ("import tensorflow as tf\n"
              "def flag_value(values):\n"
              "    if (n := len(values)) > 1:\n"
              "        return n\n"
              "    return tf.flags\n")
    converted = upgrade.convert(source, "walrus_helper.py")
    namespace = {}
    exec(converted.code, namespace)
    assert converted.tf1 and namespace["flag_value"]([]) is tf.compat.v1.flags
    assert namespace["flag_value"]([1, 2]) == 2
    plain = upgrade.convert("def f(x):\n    return (y := x)\n", "no_tf.py")
    assert not plain.tf1 and plain.findings == []


def test_the_runners_own_modules_are_never_taken_for_a_programs(tmp_path):
    """A program inside a checkout of the runner (its root holding trainer/) has its own modules
    converted, never the runner's (they were, and the upgrader failed on them)."""
    from trainer.estimator import upgrade

    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(upgrade.__file__))))
    (tmp_path / "helper_mod.py").write_text("import tensorflow as tf\nLEVEL = tf.logging.INFO\n")
    finder = upgrade.ProgramFinder([checkout, str(tmp_path)])
    sys.path.insert(0, str(tmp_path))
    try:
        assert finder.find_spec("trainer.hooks.assembly", [os.path.join(checkout, "trainer", "hooks")]) is None
        assert isinstance(finder.find_spec("helper_mod").loader, upgrade._ConvertingLoader)
    finally:
        sys.path.remove(str(tmp_path))


def test_a_tf2_program_is_neither_taken_for_tf1_nor_upgraded(tmp_path):
    """TensorFlow's upgrader reads every source as TF 1.x: it renamed a TF 2 program's
    tf.saved_model.load(path) to TF 1.x's loader, and that rename made the program TF 1.x (v1 canned
    classes, another model than the program's Estimator trained)."""
    from trainer.estimator import upgrade

    program = tmp_path / "tf2_program.py"
    program.write_text("import tensorflow as tf\n"
                       "model = tf.estimator.LinearRegressor(feature_columns=[tf.feature_column.numeric_column('a')])\n"
                       "def signatures(path):\n"
                       "    return tf.saved_model.load(path).signatures\n")
    tf1_program = tmp_path / "tf1_program.py"
    tf1_program.write_text("import tensorflow as tf\ntf.logging.set_verbosity(tf.logging.INFO)\n")
    assert not upgrade.uses_tf1([str(program)])
    assert upgrade.uses_tf1([str(program), str(tf1_program)])
    source = program.read_text()
    assert upgrade.convert(source, str(program), upgrade=False).code.co_filename == str(program)  # unchanged
    assert "tf.compat.v1.saved_model.load" in linecache_text(upgrade.convert(source, str(program), upgrade=True))


def linecache_text(converted):
    import linecache

    return "".join(linecache.cache[converted.code.co_filename][2])
