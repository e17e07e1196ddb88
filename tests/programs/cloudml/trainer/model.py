"""The model of a Cloud ML Engine trainer package (trainer/model.py), TF 1.x style."""
import tensorflow as tf

CSV_COLUMNS = ["x0", "x1", "label"]
SERVING_FUNCTIONS = {"JSON": None}


def input_fn(features, labels, batch_size=32, num_epochs=None):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return dataset.repeat(num_epochs).batch(batch_size)


def build_estimator(model_dir, hidden_units):
    columns = [tf.feature_column.numeric_column("x0"), tf.feature_column.numeric_column("x1")]
    return tf.estimator.DNNClassifier(hidden_units, columns, model_dir=model_dir,
                                      config=tf.estimator.RunConfig(tf_random_seed=3))
