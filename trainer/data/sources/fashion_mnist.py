"""``data=fashion_mnist``: IDX files in ``data.path``, else Debian's dataset-fashion-mnist, else a
download checked against the published MD5 sums."""

import logging
import os
from typing import Optional

from trainer.data.arrays import Arrays
from trainer.data.download import KERAS_BASE_URL, check_reachable, download
from trainer.data.mnist_files import load_idx_dir, load_path
from trainer.data.sources import ArraySource
from trainer.errors import DataError

log = logging.getLogger("trainer.data.sources")  # the data's log lines, from whichever module reads it

DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
# Fashion-MNIST's published MD5 sums of the original gzipped files.
FASHION_FILES_MD5 = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}


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


class FashionMnistSource(ArraySource):
    def arrays(self, data_cfg) -> Arrays:
        return load_fashion_mnist(data_cfg.path, data_cfg.download, data_cfg.download_dir)

    def check_download(self, data_cfg) -> None:
        if data_cfg.get("path") or not data_cfg.get("download", True) or os.path.isdir(DEBIAN_FASHION_MNIST):
            return
        folder = os.path.expanduser(data_cfg.get("download_dir") or "~/.keras/datasets")
        if not all(os.path.isfile(os.path.join(folder, "fashion-mnist", f)) for f in FASHION_FILES_MD5):
            check_reachable("fashion_mnist")


SOURCE = FashionMnistSource()
