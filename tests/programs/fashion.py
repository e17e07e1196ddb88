"""Reading MNIST-format IDX files the way TF1-era programs did (``mnist.load_data`` style), from
Debian's Fashion-MNIST copy, or synthetic images where that is not installed."""

import gzip
import os

import numpy as np

DATA_DIR = os.environ.get("MNIST_DATA_DIR", "/usr/share/datasets/fashion-mnist")


def _read(name, offset, shape):
    with gzip.open(os.path.join(DATA_DIR, name), "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset).reshape(shape)


def load(split, count):
    """(images float32 [count, 784] in [0, 1], labels int32 [count]) of ``split`` ('train' or 't10k')."""
    if not os.path.isdir(DATA_DIR):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, 10, count).astype(np.int32)
        images = rng.uniform(0, 0.3, (count, 784)).astype(np.float32)
        images[np.arange(count), labels * 70] = 1.0
        return images, labels
    images = _read(f"{split}-images-idx3-ubyte.gz", 16, (-1, 784))[:count]
    labels = _read(f"{split}-labels-idx1-ubyte.gz", 8, (-1,))[:count]
    return (images / 255.0).astype(np.float32), labels.astype(np.int32)
