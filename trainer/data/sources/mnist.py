"""``data=mnist``: ``data.path`` (Keras' ``mnist.npz`` or a folder of IDX files), else the Keras cache,
else a checksummed download."""

import logging
import os
from typing import Optional
from trainer.data.arrays import Arrays
from trainer.data.download import KERAS_BASE_URL, check_reachable, download
from trainer.data.mnist_files import load_npz, load_path
from trainer.data.sources import ArraySource
from trainer.errors import DataError

log = logging.getLogger("trainer.data.sources")  # the data's log lines, from whichever module reads it

MNIST_NPZ_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"


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


class MnistSource(ArraySource):
    def arrays(self, data_cfg) -> Arrays:
        return load_mnist(data_cfg.path, data_cfg.download, data_cfg.download_dir)

    def check_download(self, data_cfg) -> None:
        if data_cfg.get("path") or not data_cfg.get("download", True):
            return
        folder = os.path.expanduser(data_cfg.get("download_dir") or "~/.keras/datasets")
        if not os.path.isfile(os.path.join(folder, "mnist.npz")):
            check_reachable("mnist")


SOURCE = MnistSource()
