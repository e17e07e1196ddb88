"""MNIST-format files, read with NumPy and gzip alone: IDX files (gzipped or not) and Keras'
``mnist.npz``; and the one line for an ``.npz`` that does not load."""

import gzip
import os
import struct
import zipfile
import zlib
from typing import Optional

import numpy as np

from trainer.data.arrays import IMAGE_SHAPE, Arrays, checked_images, checked_labels
from trainer.errors import DataError, first_line

# What np.load raises for a file that is not a readable .npz/.npy: a cut or damaged zip, a damaged
# compressed member, an empty file, another format, an unreadable file.
NPZ_ERRORS = (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError)

IDX_SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str, key: str = "data.path") -> np.ndarray:
    """Read one IDX file (gzipped or not), checking its magic number and size; errors name ``key``.

    Raises:
      DataError: the file is not IDX, or is shorter or longer than its header says.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):  # in one call, which releases the GIL (the file is read while TensorFlow imports)
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{key}: cannot read {path}: {e}; replace the file or point {key} elsewhere")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES or raw[3] == 0:
        raise DataError(f"{key}: {path} is not an IDX file (bad magic number); use MNIST-format IDX files")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{key}: {path} is truncated (header); download it again")
    dims = struct.unpack(">" + "I" * ndim, raw[4:header])
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DataError(
            f"{key}: {path} holds {len(raw) - header} bytes of data, its header says {expected}; "
            "the file is truncated or corrupt, download it again"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)


def _find_idx(folder: str, stem: str) -> Optional[str]:
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx") + ".gz", stem.replace("-idx", ".idx")):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def load_idx_dir(folder: str) -> Arrays:
    """Load the four MNIST-format IDX files (``train-images-idx3-ubyte[.gz]`` ...) of a folder."""
    arrays = {}
    for split, stems in IDX_SPLITS.items():
        images_stem, labels_stem = stems
        images_path, labels_path = _find_idx(folder, images_stem), _find_idx(folder, labels_stem)
        missing = [s for s, p in ((images_stem, images_path), (labels_stem, labels_path)) if p is None]
        if missing:
            raise DataError(
                f"data.path: {folder} has no {', '.join(missing)}[.gz]; "
                "point data.path at a folder with the four MNIST-format IDX files"
            )
        images, labels = read_idx(images_path), read_idx(labels_path)
        if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE or images.dtype != np.uint8:
            raise DataError(f"data.path: {images_path} holds {images.dtype} images of shape {images.shape[1:]}, not 28x28 uint8")
        if labels.ndim != 1 or len(labels) != len(images):
            raise DataError(f"data.path: {labels_path} has {labels.shape} labels for {len(images)} images in {images_path}")
        arrays[split] = (images, checked_labels(labels, f"data.path: {labels_path}"))
    return Arrays(arrays["train"][0], arrays["train"][1], arrays["test"][0], arrays["test"][1])


def npz_error(path: str, key: str, exc: BaseException) -> str:
    """The one line for an ``.npz`` that does not load (numpy's own text would suggest allow_pickle)."""
    if "pickle" in str(exc):
        return f"{key}: cannot read {path} as .npz: it is not a zip of arrays (pickled data is never loaded); replace it"
    return f"{key}: cannot read {path} as .npz ({type(exc).__name__}: {first_line(exc)}); replace it or point {key} elsewhere"


def load_npz(path: str) -> Arrays:
    """Load Keras' ``mnist.npz`` (keys ``x_train``, ``y_train``, ``x_test``, ``y_test``)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = {"x_train", "y_train", "x_test", "y_test"} - set(f.files)
            if missing:
                raise DataError(f"data.path: {path} lacks {sorted(missing)}; use Keras' mnist.npz format")
            arrays = Arrays(f["x_train"], f["y_train"], f["x_test"], f["y_test"])
    except DataError:
        raise
    except NPZ_ERRORS as e:
        raise DataError(npz_error(path, "data.path", e))
    for name, x, y in (("train", arrays.train_x, arrays.train_y), ("test", arrays.test_x, arrays.test_y)):
        if x.ndim != 3 or x.shape[1:] != IMAGE_SHAPE or len(x) != len(y):
            raise DataError(f"data.path: {path} {name} split has images {x.shape} and labels {y.shape}; expected [N, 28, 28] and [N]")
    where = f"data.path={path}"
    return Arrays(checked_images(arrays.train_x, f"{where} x_train"), checked_labels(arrays.train_y, f"{where} y_train"),
                  checked_images(arrays.test_x, f"{where} x_test"), checked_labels(arrays.test_y, f"{where} y_test"))


def load_path(path: str) -> Arrays:
    """An ``.npz`` file or a folder of IDX files."""
    path = os.path.expanduser(path)
    if os.path.isdir(path):
        return load_idx_dir(path)
    if os.path.isfile(path):
        return load_npz(path)
    raise DataError(f"data.path: {path} does not exist; set data.path to an mnist.npz file or a folder of IDX files")
