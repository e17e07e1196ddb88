"""Estimator's canned models and heads (``trainer.estimator.DNNClassifier``, ..., ``BinaryClassHead``, ...),
written as the census tutorial wrote them: feature columns over a CSV read with ``decode_csv``.

The reference is real Estimator: ``tests/data/estimator_2_15_census.json`` holds what TensorFlow 2.15 with
tensorflow-estimator 2.15 reported for ``bench/census_program.py`` (100 steps of each model on the same
generated table): its eval metrics, checkpoint variables and shapes, prediction keys and export
signatures. The same models built here must give the same names, keys and signatures, and (the same
seed, data and steps) the same metrics."""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import trainer.estimator as estimator
from bench.census import write_csv
from helpers import TESTS_DIR, TRAIN

tf1 = tf.compat.v1
REFERENCE = json.load(open(os.path.join(TESTS_DIR, "data", "estimator_2_15_census.json")))["models"]

_CSV_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "relationship", "occupation",
                "hours_per_week", "income_bracket"]
_CSV_COLUMN_DEFAULTS = [[0.0], [""], [0.0], [""], [0.0], [""], [""], [0.0], [""]]


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    """The tables bench/census_program.py was run on for the reference."""
    root = tmp_path_factory.mktemp("census")
    return write_csv(str(root / "train.csv"), 4000, 0), write_csv(str(root / "test.csv"), 1000, 1)


def build_model_columns():
    """The census program's wide and deep columns."""
    age = tf.feature_column.numeric_column("age")
    education_num = tf.feature_column.numeric_column("education_num")
    hours_per_week = tf.feature_column.numeric_column("hours_per_week")
    education = tf.feature_column.categorical_column_with_vocabulary_list(
        "education", ["Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college", "Assoc-acdm",
                      "Assoc-voc", "7th-8th", "Doctorate", "Prof-school", "10th"])
    relationship = tf.feature_column.categorical_column_with_vocabulary_list(
        "relationship", ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative"])
    workclass = tf.feature_column.categorical_column_with_vocabulary_list(
        "workclass", ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov"])
    occupation = tf.feature_column.categorical_column_with_hash_bucket("occupation", hash_bucket_size=100)
    age_buckets = tf.feature_column.bucketized_column(age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65])
    wide = [education, relationship, workclass, occupation, age_buckets,
            tf.feature_column.crossed_column(["education", "occupation"], hash_bucket_size=100),
            tf.feature_column.crossed_column([age_buckets, "education", "occupation"], hash_bucket_size=100)]
    deep = [age, education_num, hours_per_week, tf.feature_column.indicator_column(workclass),
            tf.feature_column.indicator_column(education), tf.feature_column.indicator_column(relationship),
            tf.feature_column.embedding_column(occupation, dimension=8)]
    return wide, deep


def build_estimator(model_dir, model_type):
    """The census program's models, built the same way."""
    wide, deep = build_model_columns()
    config = estimator.RunConfig(tf_random_seed=1, save_checkpoints_steps=1000)
    if model_type.endswith("_regressor"):
        deep = [c for c in deep if c.name != "hours_per_week"]
    models = {
        "deep": lambda: estimator.DNNClassifier(model_dir=model_dir, feature_columns=deep, weight_column="fnlwgt",
                                                hidden_units=[32, 16], optimizer="Adam", config=config),
        "wide": lambda: estimator.LinearClassifier(model_dir=model_dir, feature_columns=wide, config=config),
        "wide_deep": lambda: estimator.DNNLinearCombinedClassifier(
            model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[32, 16],
            label_vocabulary=["<=50K", ">50K"], config=config),
        "deep_regressor": lambda: estimator.DNNRegressor(model_dir=model_dir, feature_columns=deep,
                                                         hidden_units=[32, 16], config=config),
        "wide_regressor": lambda: estimator.LinearRegressor(model_dir=model_dir, feature_columns=wide, config=config),
        "wide_deep_regressor": lambda: estimator.DNNLinearCombinedRegressor(
            model_dir=model_dir, linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[32, 16],
            config=config),
    }
    return models[model_type]()


def input_fn(data_file, num_epochs, shuffle, batch_size, model_type="wide"):
    def parse_csv(value):
        columns = tf.io.decode_csv(value, record_defaults=_CSV_COLUMN_DEFAULTS)
        features = dict(zip(_CSV_COLUMNS, columns))
        labels = features.pop("income_bracket")
        if model_type.endswith("_regressor"):
            return features, features.pop("hours_per_week")
        return features, (labels if model_type == "wide_deep" else tf.cast(tf.equal(labels, ">50K"), tf.int32))

    dataset = tf.data.TextLineDataset(data_file).skip(1)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=5000, seed=1)
    dataset = dataset.map(parse_csv, num_parallel_calls=2)
    return dataset.repeat(num_epochs).batch(batch_size)


def _export_signatures(model, tmp_path):
    wide, deep = build_model_columns()
    spec = tf.feature_column.make_parse_example_spec(wide + deep)
    path = model.export_saved_model(str(tmp_path / "export"),
                                    estimator.export.build_parsing_serving_input_receiver_fn(spec)).decode()
    loaded = tf.saved_model.load(path)
    return {key: sorted(fn.structured_outputs) for key, fn in loaded.signatures.items()}, loaded


def _run_like_the_program(census, model_type, tmp_path, export=False):
    train, test = census
    model = build_estimator(str(tmp_path / model_type), model_type)
    model.train(lambda: input_fn(train, None, True, 64, model_type), steps=100)
    metrics = model.evaluate(lambda: input_fn(test, 1, False, 500, model_type))
    predictions = model.predict(lambda: input_fn(test, 1, False, 4, model_type))
    first = next(predictions)
    predictions.close()
    report = {"metrics": {k: float(v) for k, v in metrics.items()},
              "variables": {n: list(model.get_variable_value(n).shape) for n in model.get_variable_names()},
              "predictions": {k: [str(v.dtype), list(v.shape)] for k, v in first.items()}}
    if export:
        report["signatures"], report["loaded"] = _export_signatures(model, tmp_path)
    return model, report


def _same_as_estimator(report, model_type):
    reference = REFERENCE[model_type]
    assert report["variables"] == reference["variables"]  # names and shapes: model_dirs pass both ways
    assert report["predictions"] == reference["predictions"]
    assert sorted(report["metrics"]) == sorted(reference["metrics"])
    for key, value in reference["metrics"].items():
        assert report["metrics"][key] == pytest.approx(value, rel=2e-3, abs=2e-3), key


@pytest.mark.slow
def test_wide_and_deep_classifier_matches_estimator_names_keys_signatures_and_numbers(census, tmp_path):
    model, report = _run_like_the_program(census, "wide_deep", tmp_path, export=True)
    _same_as_estimator(report, "wide_deep")
    assert report["signatures"] == REFERENCE["wide_deep"]["signatures"]
    # the export serves tf.Examples: the classes come back as the label vocabulary's strings
    row = {"age": 52.0, "education_num": 16.0, "hours_per_week": 60.0, "workclass": b"Self-emp-inc",
           "education": b"Doctorate", "relationship": b"Husband", "occupation": b"occ-001"}
    example = tf.train.Example(features=tf.train.Features(feature={
        k: tf.train.Feature(float_list=tf.train.FloatList(value=[v])) if isinstance(v, float)
        else tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) for k, v in row.items()}))
    served = report["loaded"].signatures["serving_default"](examples=tf.constant([example.SerializeToString()]))
    assert served["classes"].numpy().tolist() == [[b"<=50K", b">50K"]]
    assert served["scores"].numpy().sum() == pytest.approx(1.0, rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["deep", "wide", "deep_regressor", "wide_regressor", "wide_deep_regressor"])
def test_each_canned_model_matches_estimator(census, tmp_path, model_type):
    _, report = _run_like_the_program(census, model_type, tmp_path)
    _same_as_estimator(report, model_type)


@pytest.mark.slow
def test_canned_classifiers_learn_the_table_and_resume_from_their_checkpoints(census, tmp_path):
    train, test = census
    wide, deep = build_model_columns()
    model = estimator.DNNLinearCombinedClassifier(
        model_dir=str(tmp_path / "m"), linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[16], dnn_optimizer=lambda: tf1.train.AdamOptimizer(0.01),
        config=estimator.RunConfig(tf_random_seed=2))
    model.train(lambda: input_fn(train, None, True, 64), steps=300)
    first = model.evaluate(lambda: input_fn(test, 1, False, 500))
    assert first["global_step"] == 300
    assert first["accuracy"] > first["accuracy_baseline"] + 0.2  # the rule behind the labels, not the majority
    assert first["auc"] > 0.85
    model.train(lambda: input_fn(train, None, True, 64), steps=100)
    assert model.get_variable_value("global_step") == 400


def test_a_baseline_learns_the_label_mean(census, tmp_path):
    train, test = census
    model = estimator.BaselineClassifier(model_dir=str(tmp_path / "b"), n_classes=2)
    model.train(lambda: input_fn(train, None, True, 64), steps=200)
    metrics = model.evaluate(lambda: input_fn(test, 1, False, 500))
    assert metrics["prediction/mean"] == pytest.approx(0.5, abs=0.05)
    assert metrics["auc"] == pytest.approx(0.5)  # one score for every example ranks nothing
    assert sorted(model.get_variable_names()) == [
        "baseline/bias", "global_step", "training/Ftrl/baseline/bias/accumulator",
        "training/Ftrl/baseline/bias/linear", "training/Ftrl/beta", "training/Ftrl/decay",
        "training/Ftrl/l1_regularization_strength", "training/Ftrl/l2_regularization_strength",
        "training/Ftrl/learning_rate", "training/Ftrl/learning_rate_power"]


# --- heads in a custom model_fn -----------------------------------------------------------------

def _points(seed=0, n=400, classes=3):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    angle = np.arctan2(x[:, 1], x[:, 0])
    return x, ((angle + np.pi) / (2 * np.pi) * classes).astype(np.int64) % classes


def head_model_fn(features, labels, mode, params):
    """A model_fn of the TF2 Estimator style: its own logits, a head for the rest."""
    head = params["head"]
    net = tf1.layers.dense(features["x"], 16, activation=tf.nn.relu, name="hidden")
    logits = tf1.layers.dense(net, head.logits_dimension, name="logits")
    if params.get("tf1"):
        return head.create_estimator_spec(
            features, mode, logits, labels,
            train_op_fn=lambda loss: tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_global_step()))
    import tf_keras

    return head.create_estimator_spec(features, mode, logits, labels,
                                      optimizer=tf_keras.optimizers.legacy.Adam(0.05),
                                      trainable_variables=tf1.trainable_variables())


def _fit(tmp_path, head, x, y, steps=150, tf1_style=False, batch=40):
    model = estimator.Estimator(head_model_fn, model_dir=str(tmp_path / "h"),
                                params={"head": head, "tf1": tf1_style}, config=estimator.RunConfig(tf_random_seed=1))
    model.train(estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=batch, num_epochs=None, shuffle=True),
                steps=steps)
    metrics = model.evaluate(estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=100, shuffle=False))
    return model, metrics


def test_a_multi_class_head_with_a_vocabulary_trains_and_predicts_its_strings(tmp_path):
    x, y = _points()
    names = np.array(["east", "north", "west"])[y]
    head = estimator.MultiClassHead(3, label_vocabulary=["east", "north", "west"])
    model, metrics = _fit(tmp_path, head, x, names)
    assert sorted(metrics) == ["accuracy", "average_loss", "global_step", "loss"]
    assert metrics["accuracy"] > 0.85
    first = next(model.predict(estimator.inputs.numpy_input_fn({"x": x[:1]}, shuffle=False)))
    assert sorted(first) == ["all_class_ids", "all_classes", "class_ids", "classes", "logits", "probabilities"]
    assert first["classes"][0].decode() == names[0]
    assert [c.decode() for c in first["all_classes"]] == ["east", "north", "west"]


def test_tf1_head_factories_take_a_train_op_fn_and_named_heads_suffix_their_metrics(tmp_path):
    x, y = _points(classes=2)
    head = estimator.binary_classification_head(thresholds=[0.3], name="side")
    _, metrics = _fit(tmp_path, head, x, y, tf1_style=True)
    assert metrics["accuracy/side"] > 0.85
    assert {"auc/side", "auc_precision_recall/side", "accuracy/positive_threshold_0.3/side",
            "label/mean/side", "prediction/mean/side", "accuracy_baseline/side"} <= set(metrics)


@pytest.mark.slow
def test_regression_and_multi_label_heads(tmp_path):
    x, _ = _points()
    target = (2 * x[:, :1] - x[:, 1:]).astype(np.float32)
    _, metrics = _fit(tmp_path / "r", estimator.RegressionHead(), x, target, steps=200)
    assert sorted(metrics) == ["average_loss", "global_step", "label/mean", "loss", "prediction/mean"]
    assert metrics["average_loss"] < 0.05 * float(np.var(target))
    multi_hot = np.stack([x[:, 0] > 0, x[:, 1] > 0, x.sum(1) > 0], axis=1).astype(np.int64)
    _, metrics = _fit(tmp_path / "m", estimator.MultiLabelHead(3), x, multi_hot, steps=200)
    assert sorted(metrics) == ["auc", "auc_precision_recall", "average_loss", "global_step", "loss"]
    assert metrics["auc"] > 0.95


def test_a_multi_head_trains_two_objectives_and_keys_predictions_by_head(tmp_path):
    x, _ = _points()
    labels = {"side": (x[:, 0] > 0).astype(np.int64), "size": np.linalg.norm(x, axis=1, keepdims=True)}
    head = estimator.MultiHead([estimator.BinaryClassHead(name="side"), estimator.RegressionHead(name="size")])

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, labels)).repeat().shuffle(400, seed=1).batch(40)

    model = estimator.Estimator(head_model_fn, model_dir=str(tmp_path / "multi"), params={"head": head},
                                config=estimator.RunConfig(tf_random_seed=1))
    model.train(input_fn, steps=200)
    metrics = model.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, labels)).batch(100))
    assert {"accuracy/side", "auc/side", "loss/side", "average_loss/size", "loss/size", "loss"} <= set(metrics)
    assert metrics["accuracy/side"] > 0.9
    assert metrics["average_loss/size"] < 0.2 * float(np.var(labels["size"]))
    first = next(model.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": x[:2]}).batch(2)))
    assert ("side", "class_ids") in first and ("size", "predictions") in first


@pytest.mark.slow
def test_add_metrics_adds_keras_and_tf1_metrics_to_a_canned_model(census, tmp_path):
    train, test = census
    wide, _ = build_model_columns()
    model = estimator.LinearClassifier(model_dir=str(tmp_path / "w"), feature_columns=wide)

    def my_metrics(labels, predictions):
        import tf_keras

        auc = tf_keras.metrics.AUC(name="my_auc")
        auc.update_state(y_true=labels, y_pred=predictions["logistic"])
        return {"my_auc": auc, "my_mean": tf1.metrics.mean(predictions["logistic"])}

    model = estimator.add_metrics(model, my_metrics)
    model.train(lambda: input_fn(train, None, True, 64), steps=60)
    metrics = model.evaluate(lambda: input_fn(test, 1, False, 500))
    assert metrics["my_auc"] == pytest.approx(metrics["auc"], abs=0.01)
    assert metrics["my_mean"] == pytest.approx(metrics["prediction/mean"], abs=1e-5)
    again = model.evaluate(lambda: input_fn(test, 1, False, 500))  # the Keras metric is reset, not accumulated
    assert again["my_auc"] == pytest.approx(metrics["my_auc"], abs=1e-6)


# --- bad input, one line each ----------------------------------------------------------------------

def test_bad_canned_arguments_are_refused_at_construction():
    wide, deep = build_model_columns()
    with pytest.raises(ValueError, match=r"hidden_units is empty"):
        estimator.DNNClassifier(hidden_units=[], feature_columns=deep)
    with pytest.raises(ValueError, match=r"feature_columns declares \['age'\] more than once"):
        estimator.DNNClassifier(hidden_units=[4], feature_columns=deep + [tf.feature_column.numeric_column("age")])
    with pytest.raises(ValueError, match=r"n_classes must be >= 2"):
        estimator.LinearClassifier(feature_columns=wide, n_classes=1)
    with pytest.raises(ValueError, match=r"label_vocabulary has 3 entries but there are 2 classes"):
        estimator.LinearClassifier(feature_columns=wide, label_vocabulary=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"give linear_feature_columns or dnn_feature_columns"):
        estimator.DNNLinearCombinedClassifier()


@pytest.mark.slow
def test_bad_labels_and_optimizers_fail_in_one_line_naming_the_fix(census, tmp_path):
    train, _ = census
    wide, _ = build_model_columns()
    strings = estimator.LinearClassifier(model_dir=str(tmp_path / "s"), feature_columns=wide)
    with pytest.raises(ValueError, match=r"labels are strings: give label_vocabulary"):
        strings.train(lambda: input_fn(train, None, True, 64, "wide_deep"), steps=1)
    missing = estimator.LinearClassifier(model_dir=str(tmp_path / "v"), feature_columns=wide,
                                         label_vocabulary=["<=50K", "rich"])
    with pytest.raises(Exception, match=r"a label is not in label_vocabulary"):
        missing.train(lambda: input_fn(train, None, True, 64, "wide_deep"), steps=1)
    assert not os.path.exists(str(tmp_path / "v" / "checkpoint")) or missing.get_variable_value("global_step") == 0
    unknown = estimator.LinearClassifier(model_dir=str(tmp_path / "o"), feature_columns=wide, optimizer="Adadelta")
    with pytest.raises(ValueError, match=r"optimizer 'Adadelta' is not one of Adagrad, Adam, Ftrl, RMSProp, SGD"):
        unknown.train(lambda: input_fn(train, None, True, 64), steps=1)
    weighted = estimator.LinearClassifier(model_dir=str(tmp_path / "w"), feature_columns=wide, weight_column="w")
    with pytest.raises(ValueError, match=r"weight_column 'w' is not among the features"):
        weighted.train(lambda: input_fn(train, None, True, 64), steps=1)


# --- from config, without Python --------------------------------------------------------------------

CSV_DATA = ["data=csv", "data.train_examples=null", "data.test_examples=null", "data.label_key=income_bracket",
            "eval.every_steps=null", "train.batch_size=64"]


@pytest.mark.slow
def test_a_dnn_classifier_trains_from_config_with_columns_read_off_the_table(make_cfg, census, tmp_path):
    from trainer import run

    train, test = census
    cfg = make_cfg("model=dnn_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                   "train.max_steps=300", "model.params.hidden_units=[32,16]")
    result = run(cfg, str(tmp_path / "run"))
    assert result["eval_examples"] == 1000
    assert result["eval_accuracy"] > result["eval_accuracy_baseline"] + 0.15
    assert result["eval_auc"] > 0.8
    names = tf.train.list_variables(str(tmp_path / "run" / "checkpoints"))
    shapes = dict(names)
    # 4 numbers (fnlwgt too: no weight_column) + one-hot workclass (6 + 1 OOV), education (12 + 1),
    # relationship (5 + 1) + occupation's embedding
    embedding = "dnn/input_from_feature_columns/input_layer/occupation_embedding/embedding_weights"
    assert shapes[embedding][0] == len({r.split(",")[6] for r in open(train).read().splitlines()[1:]}) + 1
    assert shapes["dnn/hiddenlayer_0/kernel"] == [4 + 7 + 13 + 6 + shapes[embedding][1], 32]
    assert shapes["dnn/logits/kernel"] == [16, 1]


@pytest.mark.slow
def test_a_dnn_regressor_trains_from_config_on_a_float_label(make_cfg, census, tmp_path):
    from trainer import run
    from trainer.errors import ConfigError

    train, test = census
    regress = ["model=dnn_regressor", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
               "data.label_key=education_num", "model.params.hidden_units=[32,16]", "train.max_steps=300"]
    as_ids = make_cfg(*regress[:-1], "train.max_steps=2")  # whole numbers are read as int64 class ids
    with pytest.raises(ConfigError, match=r"the labels are integer class ids; declare the label column as float32"):
        run(as_ids, str(tmp_path / "ids"))
    cfg = make_cfg(*regress, "data.features.education_num.dtype=float32", "eval.objective=average_loss",
                   "optimizer=adam", "optimizer.learning_rate=0.01")
    result = run(cfg, str(tmp_path / "run"))
    labels = [float(r.split(",")[4]) for r in open(test).read().splitlines()[1:]]
    # education_num is the education's rank give or take one: well below the labels' variance
    assert result["eval_average_loss"] < 0.15 * float(np.var(labels))
    assert result["eval_label/mean"] == pytest.approx(float(np.mean(labels)), rel=1e-5)


@pytest.mark.cli
def test_the_census_wide_and_deep_model_trains_from_yaml_alone(census, tmp_path):
    train, test = census
    done = subprocess.run([TRAIN, "model=census_wide_deep", "data=csv", f"data.train_files={train}",
                           f"data.eval_files={test}", "data.label_key=income_bracket", "train.max_steps=300",
                           "log.progress=off", f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.load(open(tmp_path / "run" / "metrics.json"))
    assert metrics["eval_accuracy"] > 0.72 and metrics["eval_auc"] > 0.8
    names = dict(tf.train.list_variables(str(tmp_path / "run" / "checkpoints")))
    assert names["linear/linear_model/age_bucketized_X_education_X_occupation/weights"] == [1000, 1]
    assert "dnn/hiddenlayer_3/kernel" in names
    predicted = subprocess.run([TRAIN, "resume=run", "mode=predict"], capture_output=True, text=True, timeout=300,
                               cwd=str(tmp_path))
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    with np.load(json.loads(predicted.stdout.strip().splitlines()[-1])["predictions"], allow_pickle=True) as f:
        assert f["all_classes"][0].tolist() == [b"<=50K", b">50K"]  # the CSV's label names, as Estimator's
        assert set(f["classes"].ravel().tolist()) <= {b"<=50K", b">50K"} and len(f["classes"]) == 1000


def test_a_bad_column_spec_is_one_line_naming_the_entry_and_the_fix(make_cfg, census, tmp_path):
    from trainer import run
    from trainer.errors import ConfigError

    train, test = census
    bad = {
        "[{embedding: occupation, dimension: 4}]": r"feature_columns\[0\]: \{embedding: occupation\} refers to "
                                                   r"'occupation', which no list declares; add \{categorical: occupation",
        "[{categorical: workclass, hash_buckets: 10}]": r"'workclass' is categorical, which a DNN cannot read as is; "
                                                        r"add \{indicator: workclass\}",
        "[{numeric: age, bins: 3}]": r"feature_columns\[0\]: unknown keys \['bins'\]",
        "[{numeric: age}, {numeric: age}]": r"declares \['age'\] more than once",
    }
    for columns, message in bad.items():
        cfg = make_cfg("model=dnn_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                       "train.max_steps=2", f"model.params.feature_columns={columns}")
        with pytest.raises(ConfigError, match=message) as raised:
            run(cfg, str(tmp_path / "bad"))
        assert "\n" not in str(raised.value)
        assert not os.path.exists(tmp_path / "bad" / "checkpoints" / "checkpoint")
    missing = make_cfg("model=linear_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                       "train.max_steps=2", "model.params.feature_columns=[{categorical: job, hash_buckets: 10}]")
    with pytest.raises(ConfigError, match=r"feature_columns\[0\]: the data has no feature 'job' \(it has age, "):
        run(missing, str(tmp_path / "missing"))


@pytest.mark.parametrize("columns,message", [
    ("[{bucketized: age, boundaries: 5}]", r"\[0\]: boundaries takes a list of numbers"),
    ("[{bucketized: age, boundaries: [b, c]}]", r"\[0\]: the boundaries of 'age' are a list of increasing numbers"),
    ("[{bucketized: age, boundaries: '18,25'}]", r"\[0\]: boundaries takes a list of numbers"),
    ("[{numeric: age, shape: [a]}]", r"\[0\]: shape=\['a'\]; it takes a list of positive sizes"),
    ("[{numeric: [age, fnlwgt]}]", r"\[0\]: numeric takes one feature name, e.g. \{numeric: age\}"),
    ("[{numeric: age}, {categorical: workclass, vocabulary: Private}]", r"\[1\]: vocabulary takes a list of values"),
    ("[{crossed: education, hash_buckets: 10}]", r"\[0\]: crossed takes a list of feature names"),
    ("[{crossed: [education], hash_buckets: 10}]", r"\[0\]: crossed takes a list of two or more feature names"),
    ("[{categorical: workclass, hash_buckets: ten}]", r"\[0\]: hash_buckets='ten'; it takes an integer >= 1"),
    ("[{categorical: workclass, hash_buckets: 10, oov_buckets: -1}]", r"oov_buckets=-1; it takes an integer >= 0"),
    ("[{numeric: occupation}]", r"\[0\]: \{numeric: occupation\} reads numbers, and the feature 'occupation' "
                                r"holds string; use \{categorical: occupation"),
    ("[{categorical: workclass, identity: 5}]", r"\{categorical: workclass, identity: N\} reads integers"),
])
def test_a_column_spec_of_the_wrong_type_is_one_line_naming_the_entry(make_cfg, census, tmp_path, columns, message):
    """Each field of each column kind takes its type (a name, a list of names, of numbers, of values,
    a count); a string where a list goes is not read letter by letter; a numeric column over strings
    and an identity column over strings are refused before the graph runs, naming the entry."""
    from trainer import run
    from trainer.errors import ConfigError

    train, test = census
    cfg = make_cfg("model=linear_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                   "train.max_steps=2", f"model.params.feature_columns={columns}")
    with pytest.raises(ConfigError, match=r"^model.params.feature_columns.*" + message) as raised:
        run(cfg, str(tmp_path / "bad"))
    assert "\n" not in str(raised.value)
    assert not os.path.exists(tmp_path / "bad" / "checkpoints" / "checkpoint")


def test_a_label_vocabulary_short_of_the_classes_names_the_key(make_cfg, census, tmp_path):
    from trainer import run
    from trainer.errors import ConfigError

    train, test = census
    cfg = make_cfg("model=linear_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                   "train.max_steps=2", "model.params.label_vocabulary=['<=50K']")
    with pytest.raises(ConfigError, match=r"^model.params.label_vocabulary=\['<=50K'\]: 1 name\(s\) for 2 classes"):
        run(cfg, str(tmp_path / "bad"))


@pytest.mark.slow
def test_an_identity_column_smaller_than_its_values_fails_naming_the_column(make_cfg, census, tmp_path):
    """education_num runs 1..16: identity: 5 would fail deep in TensorFlow naming no column."""
    from trainer import run

    train, test = census
    cfg = make_cfg("model=linear_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                   "train.max_steps=2", "model.params.feature_columns=[{categorical: education_num, identity: 5}]")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"feature_columns\[0\]: a value of education_num is "
                                                             r"outside its identity: 5 buckets \(0..4\).*set identity"):
        run(cfg, str(tmp_path / "small"))
    covered = make_cfg("model=linear_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                       "train.max_steps=2", "model.params.feature_columns=[{categorical: education_num, identity: 17}]")
    assert run(covered, str(tmp_path / "covered"))["global_step"] == 2


@pytest.mark.slow
def test_a_value_outside_a_declared_vocabulary_fails_naming_the_column(make_cfg, census, tmp_path):
    """TensorFlow gives such a value no weight without a word; without oov_buckets it is an error."""
    from trainer import run

    train, test = census
    cfg = make_cfg("model=linear_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                   "train.max_steps=2", "model.params.feature_columns=[{categorical: workclass, vocabulary: [Private]}]")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"feature_columns\[0\]: a value of workclass is not "
                                                             r"in its vocabulary.*set oov_buckets: 1"):
        run(cfg, str(tmp_path / "oov"))
    covered = make_cfg("model=linear_classifier", *CSV_DATA, f"data.train_files={train}", f"data.eval_files={test}",
                       "train.max_steps=2",
                       "model.params.feature_columns=[{categorical: workclass, vocabulary: [Private], oov_buckets: 1}]")
    assert run(covered, str(tmp_path / "covered"))["global_step"] == 2


def test_the_canned_families_are_the_modules_that_adapt_model_params():
    """model.params.kind names a module of trainer.estimator.canned with COLUMN_LISTS and
    logits_from_params; any other name is one line listing them."""
    from trainer.errors import ConfigError
    from trainer.estimator import canned

    assert canned.families() == ["baseline", "dnn", "dnn_linear_combined", "linear"]
    assert canned.family("dnn_linear_combined").COLUMN_LISTS == {"linear_feature_columns": "linear",
                                                                 "dnn_feature_columns": "dnn"}
    with pytest.raises(ConfigError, match=r"model.params.kind='wide': one of baseline, dnn, dnn_linear_combined, "
                                          r"linear$"):
        canned.family("wide")
