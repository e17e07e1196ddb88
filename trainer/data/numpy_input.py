"""``numpy_input_fn``: Estimator's input_fn over numpy arrays, on ``tf.data``.

Estimator's version fed arrays through queues; this one reads them through a generator (the arrays
never become graph constants), batches in the same order, and shuffles with a seed (the graph's
seed, ``train.seed``), so a resumed run continues the same sequence. It returns a
``tf.data.Dataset``, so the runner re-initialises an evaluation input for every evaluation.
"""

from typing import Dict, Optional, Union

import numpy as np
import tensorflow as tf

Arrays = Union[np.ndarray, Dict[str, np.ndarray]]


def _as_dict(arrays: Arrays, what: str) -> Dict[str, np.ndarray]:
    if isinstance(arrays, dict):
        if not arrays:
            raise ValueError(f"numpy_input_fn: {what} is an empty dict")
        return {k: np.asarray(v) for k, v in arrays.items()}
    return {"": np.asarray(arrays)}


def _spec(array: np.ndarray) -> tf.TensorSpec:
    return tf.TensorSpec([None, *array.shape[1:]], tf.as_dtype(array.dtype))


def numpy_input_fn(x: Arrays, y: Optional[Arrays] = None, batch_size: int = 128, num_epochs: Optional[int] = 1,
                   shuffle: Optional[bool] = None, queue_capacity: int = 1000, num_threads: int = 1):
    """An input_fn giving ``(features, labels)`` batches of ``x`` (an array or a dict of arrays) and
    ``y``, ``num_epochs`` times (None: forever), shuffled each epoch if ``shuffle``.

    As Estimator's: ``shuffle`` must be given; the last batch of a finite input may be smaller;
    ``queue_capacity`` and ``num_threads`` are accepted and have no effect.
    """
    if not isinstance(shuffle, bool):
        raise ValueError("numpy_input_fn: shuffle must be given explicitly (True or False)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"numpy_input_fn: batch_size must be a positive int, got {batch_size!r}")
    if num_epochs is not None and (not isinstance(num_epochs, int) or num_epochs < 1):
        raise ValueError(f"numpy_input_fn: num_epochs must be a positive int or None, got {num_epochs!r}")
    features = _as_dict(x, "x")
    labels = None if y is None else _as_dict(y, "y")
    columns = {**{("x", k): v for k, v in features.items()}, **{("y", k): v for k, v in (labels or {}).items()}}
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"numpy_input_fn: x and y have different lengths {sorted(lengths)}")
    (count,) = lengths
    if count == 0:
        raise ValueError("numpy_input_fn: x has no examples")
    keys = sorted(columns)

    def unflatten(values):
        parts = dict(zip(keys, values))
        feats = {k: parts[("x", k)] for k in features}
        labs = None if labels is None else {k: parts[("y", k)] for k in labels}
        feats = feats[""] if "" in feats else feats
        labs = labs if labs is None or "" not in labs else labs[""]
        return feats if labs is None else (feats, labs)

    def input_fn():
        seed = tf.compat.v1.get_default_graph().seed or 0

        def batches():
            epoch = 0
            while num_epochs is None or epoch < num_epochs:
                order = np.random.default_rng([seed, epoch]).permutation(count) if shuffle else np.arange(count)
                for start in range(0, count, batch_size):
                    index = order[start:start + batch_size]
                    yield tuple(columns[k][index] for k in keys)
                epoch += 1

        signature = tuple(_spec(columns[k]) for k in keys)
        dataset = tf.data.Dataset.from_generator(batches, output_signature=signature)
        return dataset.map(tf.autograph.experimental.do_not_convert(lambda *values: unflatten(values))).prefetch(2)

    return input_fn
