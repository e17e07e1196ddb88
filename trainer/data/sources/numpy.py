"""``data=numpy``: arrays a user saved with NumPy, an ``.npz`` (x_train, y_train, x_test, y_test) or
a folder of those four ``.npy`` files (memory-mapped)."""

import logging
import os
from typing import Optional

import numpy as np

from trainer.data.arrays import Arrays, checked_features, checked_labels
from trainer.data.features import inferred_classes
from trainer.data.mnist_files import NPZ_ERRORS, npz_error
from trainer.data.sources import ArraySource, given
from trainer.errors import ConfigError, DataError

log = logging.getLogger("trainer.data.sources")  # the data's log lines, from whichever module reads it

NUMPY_KEYS = ("x_train", "y_train", "x_test", "y_test")


def _numpy_arrays(path: str) -> dict:
    """The four arrays of an ``.npz`` (read into memory) or of a folder of ``.npy`` files (memory-mapped)."""
    if os.path.isdir(path):
        missing = [k for k in NUMPY_KEYS if not os.path.isfile(os.path.join(path, k + ".npy"))]
        if missing:
            raise DataError(f"data.path: {path} has no {', '.join(k + '.npy' for k in missing)}; data=numpy reads "
                            "an .npz or a folder of x_train.npy, y_train.npy, x_test.npy, y_test.npy")
        found = {}
        for k in NUMPY_KEYS:
            file = os.path.join(path, k + ".npy")
            try:
                found[k] = np.load(file, mmap_mode="r", allow_pickle=False)
            except NPZ_ERRORS as e:
                raise DataError(npz_error(file, "data.path", e).replace(" as .npz", " as .npy")) from None
        return found
    try:
        with np.load(path, allow_pickle=False) as f:
            if not hasattr(f, "files"):
                raise DataError(f"data.path: {path} is one array; data=numpy reads an .npz with x_train, y_train, "
                                "x_test, y_test (np.savez) or a folder of those four .npy files")
            missing = [k for k in NUMPY_KEYS if k not in f.files]
            if missing:
                raise DataError(f"data.path: {path} lacks {missing} (it has {sorted(f.files)}); save x_train, y_train, "
                                "x_test, y_test with np.savez")
            return {k: f[k] for k in NUMPY_KEYS}
    except DataError:
        raise
    except NPZ_ERRORS as e:
        raise DataError(npz_error(path, "data.path", e)) from None


def load_numpy(path: str, num_classes: Optional[int] = None) -> Arrays:
    """``data=numpy``: features of any shape and numeric dtype, integer labels. The number of classes
    is ``num_classes``, else the largest label plus one."""
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise DataError(f"data.path: {path} does not exist; set data.path to an .npz or a folder of .npy files")
    a = _numpy_arrays(path)
    for split in ("train", "test"):
        x, y = a["x_" + split], a["y_" + split]
        if x.ndim < 1 or y.ndim != 1 or len(x) != len(y):
            raise DataError(f"data.path={path}: x_{split} has shape {x.shape} and y_{split} {y.shape}; give [N, ...] "
                            "features and [N] labels")
        checked_features(x, f"data.path={path} x_{split}")
    if a["x_train"].shape[1:] != a["x_test"].shape[1:]:
        raise DataError(f"data.path={path}: x_train's examples have shape {a['x_train'].shape[1:]}, x_test's "
                        f"{a['x_test'].shape[1:]}; give both splits the same shape")
    if a["x_train"].dtype != a["x_test"].dtype:
        raise DataError(f"data.path={path}: x_train is {a['x_train'].dtype}, x_test {a['x_test'].dtype}; "
                        "give both splits one dtype")
    if num_classes is None:
        tops = [int(np.max(y)) for y in (a["y_train"], a["y_test"]) if y.size and np.issubdtype(y.dtype, np.number)]
        num_classes = inferred_classes(max(tops), f"data.path={path}") if tops else 1
        log.info("data.path=%s: %d classes (the largest label plus one; data.num_classes sets it)", path, num_classes)
    where = f"data.path={path}"
    return Arrays(a["x_train"], checked_labels(np.asarray(a["y_train"]), f"{where} y_train", num_classes),
                  a["x_test"], checked_labels(np.asarray(a["y_test"]), f"{where} y_test", num_classes), num_classes)


class NumpySource(ArraySource):
    path_hint = "an .npz or a folder of .npy files"

    def check(self, data_cfg) -> None:
        if not given(data_cfg, "path"):
            raise ConfigError("data.path is not set; data=numpy needs data.path=arrays.npz (x_train, y_train, x_test, "
                              "y_test) or a folder of those .npy files")
        super().check(data_cfg)

    def arrays(self, data_cfg) -> Arrays:
        if not data_cfg.path:
            raise ConfigError("data.path is not set; data=numpy needs data.path=arrays.npz (x_train, y_train, x_test, "
                              "y_test) or a folder of those .npy files")
        return load_numpy(data_cfg.path, data_cfg.get("num_classes"))


SOURCE = NumpySource()
