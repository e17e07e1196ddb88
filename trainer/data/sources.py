"""Datasets as numpy arrays: files, downloads and synthetic data, without TensorFlow.

Loaders read Keras' ``mnist.npz`` and the gzipped (or plain) IDX files of MNIST and
Fashion-MNIST, download them with checksums when allowed, and make synthetic
MNIST-shaped data. ``trainer.data.pipelines`` turns the arrays into tf.data input.
"""

import gzip
import hashlib
import logging
import os
import shutil
import struct
import tempfile
import zlib
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from trainer.config.targets import callable_name
from trainer.data.ahead import NOT_LOADED, taken
from trainer.data.files import FileSource, inferred_classes, load_files
from trainer.errors import ConfigError, DataError, first_line

log = logging.getLogger(__name__)

IMAGE_SHAPE = (28, 28)
NUM_CLASSES = 10

KERAS_BASE_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
# The sources read by numpy and gzip alone, which a thread may read while TensorFlow imports
# (trainer.data.ahead). TFRecord and CSV sources check records with TensorFlow's protobufs: a
# second thread importing TensorFlow during the main thread's import is a module-lock deadlock.
READ_AHEAD = ("synthetic", "mnist", "fashion_mnist", "numpy")
MNIST_NPZ_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
# Fashion-MNIST's published MD5 sums of the original gzipped files.
FASHION_FILES_MD5 = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
IDX_SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


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


# --- file formats --------------------------------------------------------------------------


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
    except Exception as e:  # zipfile.BadZipFile, ValueError, OSError, EOFError: all "does not parse"
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


NUMPY_KEYS = ("x_train", "y_train", "x_test", "y_test")
_EXACT_IN_FLOAT32 = 2**24  # integers up to this magnitude are exact in float32


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
            except Exception as e:
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
    except Exception as e:
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


# --- downloads -----------------------------------------------------------------------------


def _digest(path: str, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


RESOLVE_SECS = 3.0


def unreachable(url: str, secs: float = RESOLVE_SECS) -> Optional[str]:
    """Why ``url``'s host cannot be reached (no connection to its port 443 within ``secs``), or None.
    Name resolution has no timeout of its own: offline it waited 10-22 s before each download failed."""
    import socket
    import threading
    import urllib.parse

    host = urllib.parse.urlparse(url).hostname or url
    outcome = {}

    def connect():
        try:
            socket.create_connection((host, 443), timeout=secs).close()
        except OSError as e:
            outcome["error"] = e

    worker = threading.Thread(target=connect, daemon=True, name="reach-download-host")
    worker.start()
    worker.join(secs)
    if worker.is_alive():
        return f"{host} gave no answer within {secs:g} s (offline?)"
    return f"{host} cannot be reached ({outcome['error']}; offline?)" if "error" in outcome else None


def download(url: str, dest: str, checksum: str, algorithm: str = "sha256", timeout_secs: float = 20.0) -> str:
    """Download ``url`` to ``dest`` atomically, verifying its checksum.

    Raises:
      DataError: no network, or the file's checksum is wrong (nothing is left at ``dest``).
    """
    import urllib.request  # here: it loads ssl, which no run without a download needs

    why = unreachable(url)
    if why:
        raise DataError(f"cannot download {url}: {why}")
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest) or ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_secs) as response:
            shutil.copyfileobj(response, out)
        actual = _digest(tmp, algorithm)
        if actual != checksum:
            raise DataError(f"download of {url} has {algorithm} {actual}, expected {checksum}; try again later")
        os.replace(tmp, dest)
        return dest
    except OSError as e:  # URLError, timeouts, refused connections
        raise DataError(f"cannot download {url} ({e})") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# --- the built-in sources -----------------------------------------------------------------


def load_mnist(path: Optional[str], allow_download: bool, download_dir: str) -> Arrays:
    """``data.path``, then ``<download_dir>/mnist.npz`` (the Keras cache), then a download."""
    if path:
        return load_path(path)
    cached = os.path.join(os.path.expanduser(download_dir), "mnist.npz")
    if os.path.isfile(cached):
        return load_npz(cached)
    hint = (
        f"put Keras' mnist.npz at {cached}, or set data.path=/path/to/mnist.npz "
        "(or a folder of MNIST IDX files), or use data=fashion_mnist / data=synthetic"
    )
    if not allow_download:
        raise DataError(f"data=mnist: no mnist.npz at {cached} and data.download=false; {hint}")
    try:
        log.info("Downloading mnist.npz to %s", cached)
        download(KERAS_BASE_URL + "mnist.npz", cached, MNIST_NPZ_SHA256)
    except DataError as e:
        raise DataError(f"data=mnist: {e}; {hint}") from None
    return load_npz(cached)


DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def check_download(data_cfg) -> None:
    """Before a sweep's first job: a ``data=mnist`` or ``fashion_mnist`` that would have to download
    its files, and cannot reach the host, fails once here rather than in every job.

    Raises:
      DataError: naming the data, why the host cannot be reached, and what to do instead.
    """
    name, path = data_cfg.get("name"), data_cfg.get("path")
    if name not in ("mnist", "fashion_mnist") or path or not data_cfg.get("download", True):
        return
    folder = os.path.expanduser(data_cfg.get("download_dir") or "~/.keras/datasets")
    if name == "mnist" and os.path.isfile(os.path.join(folder, "mnist.npz")):
        return
    if name == "fashion_mnist" and (os.path.isdir(DEBIAN_FASHION_MNIST) or all(
            os.path.isfile(os.path.join(folder, "fashion-mnist", f)) for f in FASHION_FILES_MD5)):
        return
    why = unreachable(KERAS_BASE_URL)
    if why:
        raise DataError(f"data={name}: its files are not here and must be downloaded, but {why}; set data.path to "
                        f"local files, or use data=fashion_mnist (apt-get install dataset-fashion-mnist) or "
                        f"data=synthetic")


def load_fashion_mnist(path: Optional[str], allow_download: bool, download_dir: str) -> Arrays:
    """IDX files in ``data.path``, else Debian's dataset-fashion-mnist, else downloaded ones."""
    if path:
        return load_path(path)
    if os.path.isdir(DEBIAN_FASHION_MNIST):
        return load_idx_dir(DEBIAN_FASHION_MNIST)
    cache = os.path.join(os.path.expanduser(download_dir), "fashion-mnist")
    if all(os.path.isfile(os.path.join(cache, name)) for name in FASHION_FILES_MD5):
        return load_idx_dir(cache)
    hint = (
        "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist), "
        "or set data.path to a folder with the four Fashion-MNIST IDX files"
    )
    if not allow_download:
        raise DataError(f"data=fashion_mnist: no files in {DEBIAN_FASHION_MNIST} or {cache}, and data.download=false; {hint}")
    try:
        for name, md5 in FASHION_FILES_MD5.items():
            dest = os.path.join(cache, name)
            if not os.path.isfile(dest):
                log.info("Downloading %s to %s", name, dest)
                download(KERAS_BASE_URL + "fashion-mnist/" + name, dest, md5, algorithm="md5")
    except DataError as e:
        raise DataError(f"data=fashion_mnist: {e}; {hint}") from None
    return load_idx_dir(cache)


def make_synthetic(train_examples: int, test_examples: int, seed: int = 0) -> Arrays:
    """MNIST-shaped uint8 images: one fixed random pattern per class plus noise, so models can learn."""
    rng = np.random.default_rng(seed)
    prototypes = rng.uniform(0, 255, size=(NUM_CLASSES,) + IMAGE_SHAPE)

    def split(n):
        labels = rng.integers(0, NUM_CLASSES, size=n)
        noise = rng.normal(0, 120, size=(n,) + IMAGE_SHAPE)
        images = np.clip(prototypes[labels] * 0.25 + noise + 80, 0, 255).astype(np.uint8)
        return images, labels.astype(np.int64)

    train_x, train_y = split(train_examples)
    test_x, test_y = split(test_examples)
    return Arrays(train_x, train_y, test_x, test_y)


def load_arrays(data_cfg) -> Optional[Arrays]:
    """The arrays ``data`` config names, capped at ``train_examples`` / ``test_examples``
    (None for ``data=input_fn``: the input_fns make the tensors)."""
    name = data_cfg.name
    if name == "input_fn":
        return None
    if name == "synthetic":
        return _held_out(make_synthetic(data_cfg.train_examples or 6000, data_cfg.test_examples or 1000),
                         data_cfg.get("validation_examples"))
    if name == "mnist":
        arrays = load_mnist(data_cfg.path, data_cfg.download, data_cfg.download_dir)
    elif name == "fashion_mnist":
        arrays = load_fashion_mnist(data_cfg.path, data_cfg.download, data_cfg.download_dir)
    elif name in ("tfrecord", "csv"):
        for key in ("train_examples", "test_examples", "validation_examples"):
            if data_cfg.get(key):
                raise ConfigError(f"data.{key}: not for data={name} (streamed files); list the files to read in "
                                  "data.train_files and data.eval_files")
        return load_files(data_cfg)
    elif name == "numpy":
        if not data_cfg.path:
            raise ConfigError("data.path is not set; data=numpy needs data.path=arrays.npz (x_train, y_train, x_test, "
                              "y_test) or a folder of those .npy files")
        arrays = load_numpy(data_cfg.path, data_cfg.get("num_classes"))
    else:
        raise NotImplementedError(f"data.name={name!r} has no loader; use mnist, fashion_mnist, numpy or synthetic")
    n, m = data_cfg.train_examples, data_cfg.test_examples
    arrays = replace(arrays, train_x=arrays.train_x[:n], train_y=arrays.train_y[:n], test_x=arrays.test_x[:m],
                     test_y=arrays.test_y[:m])
    return _held_out(arrays, data_cfg.get("validation_examples"))


def num_classes_of(data) -> int:
    """The classes of loaded data (``load_arrays``' result); 10 for input_fns, which cannot tell."""
    return NUM_CLASSES if data is None else int(data.num_classes)


def load_data(data_cfg):
    """The data ``data_cfg`` names: arrays, a ``FileSource``, or None for input_fns (read by a thread
    while TensorFlow imported, ``trainer.run``, else now)."""
    data = taken(data_cfg)
    return load_arrays(data_cfg) if data is NOT_LOADED else data


def eval_source(data_cfg, data) -> str:
    """The evaluation's input as errors and logs name it (``data``: what :func:`load_data` returned)."""
    if data is None:
        return callable_name("data.eval_fn", data_cfg.eval_fn, data_cfg.eval_fn)
    if isinstance(data, FileSource):
        return f"data.eval_files ({len(data.eval_files)} files)"
    if data_cfg.get("validation_examples"):
        return f"the {data_cfg.name} validation split (data.validation_examples={data_cfg.validation_examples})"
    return f"the {data_cfg.name} test split"


def _held_out(arrays: Arrays, validation_examples: Optional[int]) -> Arrays:
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
        except Exception as e:
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
