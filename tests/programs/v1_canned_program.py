"""The v1 canned family as a TF 2.x-era program called it (tf.compat.v1.estimator): DNN, linear and wide-and-deep
classifiers over a numeric and a categorical feature, 100 steps, then evaluate. Usage: KIND MODEL_DIR [STEPS]."""
import json
import sys

import numpy as np
import tensorflow as tf

est = tf.compat.v1.estimator
rng = np.random.RandomState(0)
n = 512
x = rng.randn(n, 2).astype(np.float32)
c = rng.choice(["a", "b", "c"], n)
y = ((x[:, 0] + (c == "a")) > 0.3).astype(np.int64)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x, "c": c}, y)).repeat().batch(32)


def eval_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x, "c": c}, y)).batch(64)


num = tf.feature_column.numeric_column("x", shape=[2])
cat = tf.feature_column.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])
emb = tf.feature_column.embedding_column(cat, 3)
kind, model_dir = sys.argv[1], sys.argv[2]
config = est.RunConfig(tf_random_seed=1)
if kind == "dnn":
    model = est.DNNClassifier([8, 4], [num, emb], model_dir=model_dir, config=config)
elif kind == "linear":
    model = est.LinearClassifier([num, cat], model_dir=model_dir, config=config)
else:
    model = est.DNNLinearCombinedClassifier(model_dir=model_dir, linear_feature_columns=[cat],
                                            dnn_feature_columns=[num, emb], dnn_hidden_units=[8], config=config)
model.train(input_fn, steps=int(sys.argv[3]) if len(sys.argv) > 3 else 100)
result = model.evaluate(eval_fn)
print("RESULT " + json.dumps({k: [type(v).__name__, float(v)] for k, v in sorted(result.items())}))
print("VARIABLES " + json.dumps(sorted(name for name, _ in tf.train.list_variables(model_dir))))
