"""An Estimator-era program, unedited: absl flags, the census tutorial's feature columns, a canned
``DNNLinearCombinedClassifier`` and ``train_and_evaluate`` with an exporter. It runs on TensorFlow
<= 2.15 with tensorflow-estimator as it always did, and on TensorFlow 2.21 through the launcher:

    python -m bench.census census/
    train-estimator examples/wide_deep_program.py --model_dir=models/wide_deep \
        --train_data=census/train.csv --test_data=census/test.csv --train_steps=2000
"""

import tensorflow as tf
from absl import app, flags

flags.DEFINE_string("model_dir", "models/wide_deep", "where checkpoints, eval summaries and exports go")
flags.DEFINE_string("train_data", "census/train.csv", "")
flags.DEFINE_string("test_data", "census/test.csv", "")
flags.DEFINE_integer("train_steps", 2000, "")
FLAGS = flags.FLAGS

_CSV_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "relationship", "occupation",
                "hours_per_week", "income_bracket"]
_CSV_COLUMN_DEFAULTS = [[0.0], [""], [0.0], [""], [0.0], [""], [""], [0.0], [""]]


def build_model_columns():
    age = tf.feature_column.numeric_column("age")
    education = tf.feature_column.categorical_column_with_vocabulary_list(
        "education", ["Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college", "Assoc-acdm",
                      "Assoc-voc", "7th-8th", "Doctorate", "Prof-school", "10th"])
    relationship = tf.feature_column.categorical_column_with_vocabulary_list(
        "relationship", ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative"])
    occupation = tf.feature_column.categorical_column_with_hash_bucket("occupation", hash_bucket_size=1000)
    age_buckets = tf.feature_column.bucketized_column(age, boundaries=[18, 25, 30, 35, 40, 45, 50, 55, 60, 65])
    wide = [education, relationship, occupation, age_buckets,
            tf.feature_column.crossed_column(["education", "occupation"], hash_bucket_size=1000)]
    deep = [age, tf.feature_column.numeric_column("education_num"), tf.feature_column.numeric_column("hours_per_week"),
            tf.feature_column.indicator_column(education), tf.feature_column.indicator_column(relationship),
            tf.feature_column.embedding_column(occupation, dimension=8)]
    return wide, deep


def input_fn(data_file, num_epochs, shuffle, batch_size):
    def parse_csv(value):
        columns = tf.io.decode_csv(value, record_defaults=_CSV_COLUMN_DEFAULTS)
        features = dict(zip(_CSV_COLUMNS, columns))
        return features, tf.equal(features.pop("income_bracket"), ">50K")

    dataset = tf.data.TextLineDataset(data_file).skip(1)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=10000, seed=1)
    return dataset.map(parse_csv, num_parallel_calls=2).repeat(num_epochs).batch(batch_size)


def main(_):
    wide, deep = build_model_columns()
    model = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=FLAGS.model_dir, linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[100, 50], config=tf.estimator.RunConfig(tf_random_seed=1))
    serving = tf.estimator.export.build_parsing_serving_input_receiver_fn(
        tf.feature_column.make_parse_example_spec(wide + deep))
    train_spec = tf.estimator.TrainSpec(lambda: input_fn(FLAGS.train_data, None, True, 64), max_steps=FLAGS.train_steps)
    eval_spec = tf.estimator.EvalSpec(lambda: input_fn(FLAGS.test_data, 1, False, 500), steps=None,
                                      exporters=[tf.estimator.LatestExporter("census", serving)])
    metrics, _ = tf.estimator.train_and_evaluate(model, train_spec, eval_spec)
    print("accuracy %.4f auc %.4f" % (metrics["accuracy"], metrics["auc"]))


if __name__ == "__main__":
    app.run(main)
