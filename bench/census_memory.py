"""The census table from memory, for ``bench.csv_canned``: an input_fn of the Estimator era that reads
the CSV once with numpy and serves it with ``from_tensor_slices``, cached, shuffled and batched,
with the labels the CSV source gives (``>50K`` is class 1). The files: ``$CENSUS_TRAIN``,
``$CENSUS_TEST``."""

import csv
import os

import numpy as np
import tensorflow as tf

NUMERIC = ("age", "fnlwgt", "education_num", "hours_per_week")


def _columns(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    columns = {name: [row[i] for row in rows] for i, name in enumerate(header)}
    labels = np.array([value == ">50K" for value in columns.pop("income_bracket")], np.int64)
    features = {name: np.array(values, np.float32 if name in NUMERIC else object)
                for name, values in columns.items()}
    return features, labels


def train_input_fn(params):
    features, labels = _columns(os.environ["CENSUS_TRAIN"])
    ds = tf.data.Dataset.from_tensor_slices((features, labels)).cache()
    return ds.shuffle(10_000, seed=1).repeat().batch(params["batch_size"], drop_remainder=True)


def eval_input_fn(params):
    features, labels = _columns(os.environ["CENSUS_TEST"])
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(params["batch_size"])
