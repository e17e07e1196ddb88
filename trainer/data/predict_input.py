"""The examples of ``predict.input``: an ``.npz``, an ``.npy`` or an IDX file, checked against the
training features."""

import os
from typing import Optional

import numpy as np

from trainer.data.arrays import checked_features, checked_images
from trainer.data.mnist_files import NPZ_ERRORS, npz_error, read_idx
from trainer.errors import DataError


def load_prediction_input(path: str, like: Optional[np.ndarray]) -> np.ndarray:
    """The examples of ``predict.input``, checked against the training features ``like`` (shape and
    kind; None: data=input_fn, any shape): an ``.npz`` (key ``x``, ``images`` or ``x_test``), an ``.npy``, or an IDX file.

    Raises:
      DataError: no such file, no such array, or examples of another shape than the training data's.
    """
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise DataError(f"predict.input={path}: no such file; give an .npz (key x, images or x_test), an .npy "
                        "or an IDX images file")
    if path.endswith((".npz", ".npy")):
        try:
            with open(path, "rb") as handle:
                loaded = np.load(handle, allow_pickle=False)
                if isinstance(loaded, np.ndarray):
                    images = loaded
                else:
                    with loaded as f:
                        name = next((k for k in ("x", "images", "x_test") if k in f.files), None)
                        if name is None:
                            raise DataError(f"predict.input={path}: no array named x, images or x_test; it has {f.files}")
                        images = f[name]
        except DataError:
            raise
        except NPZ_ERRORS as e:
            raise DataError(npz_error(path, "predict.input", e)) from None
    else:
        images = read_idx(path, "predict.input")
    where = f"predict.input={path}"
    if like is None:
        return checked_features(images, where)
    shape = like.shape[1:]
    if images.shape[1:] != shape and images.ndim == len(shape) + 2 and images.shape[-1] == 1:
        images = images[..., 0]  # [N, H, W, 1] for [N, H, W] training images
    if images.shape[1:] != shape:
        raise DataError(f"predict.input={path}: examples of shape {images.shape[1:]}, the model was trained on "
                        f"{'x'.join(map(str, shape)) or 'scalars'}")
    return checked_images(images, where) if like.dtype == np.uint8 else checked_features(images, where)
