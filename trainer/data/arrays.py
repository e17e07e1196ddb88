"""Datasets as NumPy arrays, without TensorFlow: the ``Arrays`` of a source, the checks that keep
every value as the user gave it (pixels, labels, features), and the held-out validation split."""

import logging
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from trainer.data.files import FileSource
from trainer.errors import ConfigError, DataError

log = logging.getLogger("trainer.data.sources")  # the data's log lines, from whichever module reads it

IMAGE_SHAPE = (28, 28)
NUM_CLASSES = 10
_EXACT_IN_FLOAT32 = 2**24  # integers up to this magnitude are exact in float32


@dataclass(frozen=True)
class Arrays:
    """One dataset as arrays (in memory, or memory-mapped ``.npy``): features [N, ...] of any shape
    (uint8 pixels, scaled to [0, 1] by the pipeline; other numbers cast to float32 as they are)
    and int64 labels [N] in [0, num_classes) per split."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    num_classes: int = NUM_CLASSES


def checked_images(images: np.ndarray, where: str) -> np.ndarray:
    """``images`` as the pipelines take them, never silently changed: uint8 pixels (scaled to [0, 1]
    by the pipeline), other integers losslessly as uint8 when they are all in 0..255, floats as
    float32 used as they are (already scaled).

    Raises:
      DataError: integers outside 0..255, NaN or Inf, or another dtype.
    """
    if images.dtype == np.uint8:
        return images
    if np.issubdtype(images.dtype, np.integer) or images.dtype == np.bool_:
        low, high = (int(images.min()), int(images.max())) if images.size else (0, 0)
        if low < 0 or high > 255:
            raise DataError(f"{where}: {images.dtype} pixels range over [{low}, {high}]; give uint8 pixels 0..255, "
                            "or floats already scaled as the model wants them")
        return images.astype(np.uint8)
    if np.issubdtype(images.dtype, np.floating):
        if images.size and not np.isfinite(images).all():
            raise DataError(f"{where}: the {images.dtype} images hold NaN or Inf values; fix or drop those images")
        if images.size:
            log.info("%s: %s images are fed as they are (values in [%.3g, %.3g]), not rescaled", where,
                     images.dtype, float(images.min()), float(images.max()))
        return images.astype(np.float32, copy=False)
    raise DataError(f"{where}: images of dtype {images.dtype}; give uint8 pixels 0..255 or float images")


def checked_labels(labels: np.ndarray, where: str, num_classes: int = NUM_CLASSES) -> np.ndarray:
    """``labels`` as int64 class ids in [0, num_classes), refused rather than cast when they are not.

    Raises:
      DataError: fractional, negative or too large labels.
    """
    if labels.ndim != 1:
        raise DataError(f"{where}: labels of shape {labels.shape}; give one integer class id per example ([N])")
    if labels.size and not (np.issubdtype(labels.dtype, np.integer) or np.issubdtype(labels.dtype, np.floating)):
        kind = "text" if labels.dtype.kind in "USO" else f"dtype {labels.dtype}"
        raise DataError(f"{where}: labels are {kind} ({labels.dtype}); give integer class ids 0..N-1 (map each "
                        "label to its index, e.g. np.unique(y, return_inverse=True)[1])")
    if labels.size and np.issubdtype(labels.dtype, np.floating):
        if not np.isfinite(labels).all() or not np.array_equal(labels, np.round(labels)):
            raise DataError(f"{where}: the {labels.dtype} labels are not all whole numbers; give integer class ids "
                            f"0..{num_classes - 1}")
    if labels.size:
        low, high = labels.min(), labels.max()
        if low < 0 or high >= num_classes:
            raise DataError(f"{where}: labels range over [{low:g}, {high:g}], outside the {num_classes} classes "
                            f"0..{num_classes - 1}; set data.num_classes or fix the labels")
    return labels.astype(np.int64)


def checked_features(x: np.ndarray, where: str) -> np.ndarray:
    """``x`` unchanged if the pipeline can feed it without changing a value: uint8 (pixels, scaled to
    [0, 1]), bool, small integers and floats (cast to float32 in the graph).

    Raises:
      DataError: NaN or Inf, integers too large for float32 to hold exactly, float64 beyond float32's
        range, or a dtype that is not numeric.
    """
    kind = x.dtype
    if kind.byteorder == ">" and kind.kind in "iuf":  # on a little-endian machine: TensorFlow reads native order
        raise DataError(f"{where}: big-endian {kind.name} features ({kind.str}); TensorFlow reads native byte order: "
                        f"save them as {kind.newbyteorder('<').str} (x.astype('{kind.newbyteorder('<').str}'))")
    if kind == np.uint8 or kind == np.bool_ or kind in (np.int8, np.int16, np.uint16, np.float16, np.float32):
        if kind in (np.float16, np.float32) and x.size and not np.isfinite(x).all():
            raise DataError(f"{where}: the {kind} features hold NaN or Inf values; fix or drop those examples")
        return x
    if np.issubdtype(kind, np.integer):
        if x.size and max(abs(int(x.min())), abs(int(x.max()))) > _EXACT_IN_FLOAT32:
            raise DataError(f"{where}: {kind} features range over [{x.min()}, {x.max()}], beyond what float32 holds "
                            f"exactly (|x| <= 2**24); rescale them or store them as float32")
        return x
    if kind == np.float64:
        if x.size and not np.isfinite(x).all():
            raise DataError(f"{where}: the float64 features hold NaN or Inf values; fix or drop those examples")
        if x.size and float(np.abs(x).max()) > float(np.finfo(np.float32).max):
            raise DataError(f"{where}: float64 features beyond float32's range; rescale them")
        log.info("%s: float64 features are fed as float32", where)
        return x
    raise DataError(f"{where}: features of dtype {kind}; give numeric arrays (uint8 pixels, integers or floats)")


def held_out(arrays: Arrays, validation_examples: Optional[int]) -> Arrays:
    """With ``data.validation_examples=N``: the last N training examples become the evaluation split
    (the test split is left unread, for choosing a recipe without tuning on it)."""
    if not validation_examples:
        return arrays
    if validation_examples >= len(arrays.train_x):
        raise ConfigError(f"data.validation_examples={validation_examples}: not below the {len(arrays.train_x)} "
                          "training examples; hold out fewer")
    cut = len(arrays.train_x) - validation_examples
    log.info("evaluating on a validation split: the last %d of %d training examples (the test split is not read)",
             validation_examples, len(arrays.train_x))
    return replace(arrays, train_x=arrays.train_x[:cut], train_y=arrays.train_y[:cut], test_x=arrays.train_x[cut:],
                   test_y=arrays.train_y[cut:])


def check_training_arrays(arrays: Optional[Arrays], batch_size: int) -> None:
    """A training split of at least one batch and a test split that is not empty.

    Raises:
      ConfigError: either is not so, naming the key to change.
    """
    if arrays is None or isinstance(arrays, FileSource):
        return
    if len(arrays.train_x) < batch_size:
        raise ConfigError(f"train.batch_size={batch_size}: larger than the {len(arrays.train_x)} training examples; "
                          "lower train.batch_size or use more data")
    if len(arrays.test_x) == 0:
        raise ConfigError("data.test_examples: the test split is empty; evaluation needs at least one example")
