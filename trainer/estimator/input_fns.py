"""``tf.estimator.inputs``: Estimator's input functions over NumPy arrays and pandas frames
(``trainer.data.numpy_input``, ``trainer.data.pandas_input``)."""


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1):
    """Estimator's ``inputs.numpy_input_fn`` (see ``trainer.data.numpy_input``)."""
    from trainer.data.numpy_input import numpy_input_fn as make

    return make(x, y, batch_size, num_epochs, shuffle, queue_capacity, num_threads)


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1,
                    target_column="target"):
    """Estimator's ``inputs.pandas_input_fn`` (see ``trainer.data.pandas_input``)."""
    from trainer.data.pandas_input import pandas_input_fn as make

    return make(x, y, batch_size, num_epochs, shuffle, queue_capacity, num_threads, target_column)


class inputs:  # noqa: N801  (mirrors the tf.estimator.inputs namespace)
    numpy_input_fn = staticmethod(numpy_input_fn)
    pandas_input_fn = staticmethod(pandas_input_fn)
