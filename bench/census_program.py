"""The canned-model program the comparison runs on both sides (``bench/canned_compare.py``), written
as the TensorFlow wide-and-deep census tutorial (2018-2020) wrote it: absl flags, ``decode_csv`` over a
``TextLineDataset``, feature columns, and a canned ``tf.estimator`` model chosen by ``--model_type``.

It trains ``--steps`` steps (from the model_dir's checkpoint, if any), evaluates, predicts a few rows,
exports a SavedModel parsing ``tf.Example``s, and reports as JSON: the eval metrics, the training
steps per second after the first 10, the checkpoint's variables with their shapes, the prediction
keys, and the export's signatures."""

import json
import tempfile
import time

import tensorflow as tf
from absl import app, flags

flags.DEFINE_string("model_dir", None, "")
flags.DEFINE_string("model_type", "wide_deep", "wide, deep, wide_deep, baseline, or their _regressor forms; "
                    "one_numeric_regressor: a linear model over age alone (the smallest step)")
flags.DEFINE_string("train_data", None, "census-style CSV with a header line")
flags.DEFINE_string("test_data", None, "")
flags.DEFINE_integer("steps", 200, "training steps of this call")
flags.DEFINE_integer("batch_size", 64, "")
flags.DEFINE_integer("seed", 1, "tf_random_seed")
flags.DEFINE_string("report", None, "where to write the JSON report")
flags.DEFINE_boolean("export", True, "export a SavedModel and list its signatures")
FLAGS = flags.FLAGS

_CSV_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "relationship", "occupation",
                "hours_per_week", "income_bracket"]
_CSV_COLUMN_DEFAULTS = [[0.0], [""], [0.0], [""], [0.0], [""], [""], [0.0], [""]]


def build_model_columns():
    """The wide and the deep feature columns."""
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

    base_columns = [education, relationship, workclass, occupation, age_buckets]
    crossed_columns = [
        tf.feature_column.crossed_column(["education", "occupation"], hash_bucket_size=100),
        tf.feature_column.crossed_column([age_buckets, "education", "occupation"], hash_bucket_size=100),
    ]
    wide_columns = base_columns + crossed_columns
    deep_columns = [
        age, education_num, hours_per_week,
        tf.feature_column.indicator_column(workclass),
        tf.feature_column.indicator_column(education),
        tf.feature_column.indicator_column(relationship),
        tf.feature_column.embedding_column(occupation, dimension=8),
    ]
    return wide_columns, deep_columns


def build_estimator(model_dir, model_type):
    wide_columns, deep_columns = build_model_columns()
    hidden_units = [32, 16]
    run_config = tf.estimator.RunConfig(tf_random_seed=FLAGS.seed, save_checkpoints_steps=1000)
    regressor = model_type.endswith("_regressor")
    kind = model_type[:-len("_regressor")] if regressor else model_type
    if regressor:
        deep_columns = [c for c in deep_columns if c.name != "hours_per_week"]
    if kind == "one_numeric":
        return tf.estimator.LinearRegressor(model_dir=model_dir, feature_columns=[tf.feature_column.numeric_column("age")],
                                            config=run_config)
    if kind == "wide":
        cls = tf.estimator.LinearRegressor if regressor else tf.estimator.LinearClassifier
        return cls(model_dir=model_dir, feature_columns=wide_columns, config=run_config)
    if kind == "deep":
        if regressor:
            return tf.estimator.DNNRegressor(model_dir=model_dir, feature_columns=deep_columns,
                                             hidden_units=hidden_units, config=run_config)
        return tf.estimator.DNNClassifier(model_dir=model_dir, feature_columns=deep_columns, weight_column="fnlwgt",
                                          hidden_units=hidden_units, optimizer="Adam", config=run_config)
    if kind == "baseline":
        cls = tf.estimator.BaselineRegressor if regressor else tf.estimator.BaselineClassifier
        return cls(model_dir=model_dir, config=run_config)
    if regressor:
        return tf.estimator.DNNLinearCombinedRegressor(
            model_dir=model_dir, linear_feature_columns=wide_columns, dnn_feature_columns=deep_columns,
            dnn_hidden_units=hidden_units, config=run_config)
    return tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir, linear_feature_columns=wide_columns, dnn_feature_columns=deep_columns,
        dnn_hidden_units=hidden_units, label_vocabulary=["<=50K", ">50K"], config=run_config)


def input_fn(data_file, num_epochs, shuffle, batch_size, regressor, string_labels):
    """An input function for training or evaluation, as the tutorial's."""

    def parse_csv(value):
        columns = tf.io.decode_csv(value, record_defaults=_CSV_COLUMN_DEFAULTS)
        features = dict(zip(_CSV_COLUMNS, columns))
        labels = features.pop("income_bracket")
        if regressor:
            return features, features.pop("hours_per_week")
        return features, (labels if string_labels else tf.cast(tf.equal(labels, ">50K"), tf.int32))

    dataset = tf.data.TextLineDataset(data_file).skip(1)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=5000, seed=FLAGS.seed)
    dataset = dataset.map(parse_csv, num_parallel_calls=2)
    return dataset.repeat(num_epochs).batch(batch_size)


class Timing(tf.estimator.SessionRunHook):
    def __init__(self):
        self.marks = []

    def after_run(self, run_context, run_values):
        self.marks.append(time.time())


def _export(model, columns):
    spec = tf.feature_column.make_parse_example_spec(columns)
    serving_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)
    path = model.export_saved_model(tempfile.mkdtemp(), serving_fn)
    path = path.decode() if isinstance(path, bytes) else path
    loaded = tf.saved_model.load(path)
    return {key: sorted(fn.structured_outputs) for key, fn in loaded.signatures.items()}


def main(_):
    regressor = FLAGS.model_type.endswith("_regressor")
    string_labels = FLAGS.model_type == "wide_deep"
    model = build_estimator(FLAGS.model_dir, FLAGS.model_type)
    timing = Timing()
    model.train(input_fn=lambda: input_fn(FLAGS.train_data, None, True, FLAGS.batch_size, regressor, string_labels),
                steps=FLAGS.steps, hooks=[timing])
    results = model.evaluate(input_fn=lambda: input_fn(FLAGS.test_data, 1, False, 500, regressor, string_labels))
    predictions = model.predict(input_fn=lambda: input_fn(FLAGS.test_data, 1, False, 4, regressor, string_labels))
    first = next(predictions)
    predictions.close()  # leaves predict's graph, so the export below builds in its own
    wide_columns, deep_columns = build_model_columns()
    if FLAGS.model_type == "one_numeric_regressor":
        wide_columns, deep_columns = [tf.feature_column.numeric_column("age")], []
    timed = timing.marks[10:]
    report = {
        "metrics": {k: float(v) for k, v in results.items()},
        "steps_per_sec": (len(timed) - 1) / (timed[-1] - timed[0]) if len(timed) > 1 else None,
        "variables": {name: list(model.get_variable_value(name).shape) for name in model.get_variable_names()},
        "predictions": {k: [str(v.dtype), list(v.shape)] for k, v in first.items()},
        "signatures": _export(model, wide_columns + deep_columns) if FLAGS.export else None,
    }
    print(json.dumps(report))
    if FLAGS.report:
        with open(FLAGS.report, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    app.run(main)
