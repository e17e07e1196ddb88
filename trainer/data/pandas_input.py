"""``pandas_input_fn``: Estimator's input_fn over a pandas DataFrame, on ``numpy_input_fn``.

Each column of ``x`` becomes a feature of that name; ``y`` (a Series) the labels, or (a DataFrame)
a dict of labels by column. pandas is optional: install the ``pandas`` extra
(``pip install -e ".[pandas]"``) to use it.
"""

from typing import Optional

import numpy as np

from trainer.data.numpy_input import numpy_input_fn


def _columns(frame) -> dict:
    """Column name -> array (text columns as strings, which become ``tf.string``)."""
    out = {}
    for name in frame.columns:
        values = frame[name].to_numpy()
        out[str(name)] = values.astype(str).astype(object) if values.dtype == object else values
    return out


def pandas_input_fn(x, y=None, batch_size: int = 128, num_epochs: Optional[int] = 1, shuffle: Optional[bool] = None,
                    queue_capacity: int = 1000, num_threads: int = 1, target_column: str = "target"):
    """An input_fn giving ``(features, labels)`` batches of DataFrame ``x`` and ``y`` (a Series or a
    DataFrame, with ``x``'s index), as Estimator's ``inputs.pandas_input_fn``.

    Raises:
      TypeError: ``x`` is not a DataFrame, or ``y`` not a Series or DataFrame.
      ValueError: ``shuffle`` not given, ``x`` and ``y`` indexed differently, or ``target_column``
        already a column of ``x``.
    """
    import pandas as pd

    if not isinstance(x, pd.DataFrame):
        raise TypeError(f"pandas_input_fn: x must be a pandas DataFrame, got {type(x).__name__}")
    if not isinstance(shuffle, bool):
        raise ValueError("pandas_input_fn: shuffle must be given explicitly (True or False)")
    labels = None
    if y is not None:
        if target_column in x.columns:
            raise ValueError(f"pandas_input_fn: cannot use name {target_column!r} for the target column: x already "
                             "has a column with that name; pass another target_column")
        if not isinstance(y, (pd.Series, pd.DataFrame)):
            raise TypeError(f"pandas_input_fn: y must be a pandas Series or DataFrame, got {type(y).__name__}")
        if not np.array_equal(x.index, y.index):
            raise ValueError("pandas_input_fn: the index of x and y differ; give y with x's index "
                             "(e.g. y = y.reindex(x.index))")
        labels = _columns(y) if isinstance(y, pd.DataFrame) else np.asarray(y.to_numpy())
    return numpy_input_fn(_columns(x), labels, batch_size, num_epochs, shuffle, queue_capacity, num_threads)
