"""The model of a Cloud ML Engine trainer package (trainer/model.py), TF 1.x style."""
import tensorflow as tf

CSV_COLUMNS = ["x0", "x1", "label"]
CSV_DEFAULTS = [[0.0], [0.0], [""]]
LABELS = ["no", "yes"]
SERVING_FUNCTIONS = {"JSON": None}


def _decode_csv(line):
    columns = tf.decode_csv(line, record_defaults=CSV_DEFAULTS)
    return dict(zip(CSV_COLUMNS, columns))


def input_fn(filenames, batch_size=32, num_epochs=None):
    """CSV lines parsed in Dataset.map (a function AutoGraph converts), the label's index from a contrib
    lookup table, as the census sample read its data."""
    dataset = tf.data.TextLineDataset(filenames).map(_decode_csv)
    features = dataset.repeat(num_epochs).batch(batch_size).make_one_shot_iterator().get_next()
    table = tf.contrib.lookup.index_table_from_tensor(tf.constant(LABELS))
    return features, table.lookup(features.pop("label"))


def build_estimator(model_dir, hidden_units):
    columns = [tf.feature_column.numeric_column("x0"), tf.feature_column.numeric_column("x1")]
    return tf.estimator.DNNClassifier(hidden_units, columns, model_dir=model_dir,
                                      config=tf.estimator.RunConfig(tf_random_seed=3))
