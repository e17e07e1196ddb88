"""``data=synthetic``: MNIST-shaped images made from a seed, ``data.train_examples`` /
``data.test_examples`` of them (6000 / 1000 by default)."""

import numpy as np

from trainer.data.arrays import IMAGE_SHAPE, NUM_CLASSES, Arrays, held_out
from trainer.data.sources import ArraySource


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


class SyntheticSource(ArraySource):
    def load(self, data_cfg) -> Arrays:  # as many examples as asked for: nothing to cap
        return held_out(make_synthetic(data_cfg.train_examples or 6000, data_cfg.test_examples or 1000),
                        data_cfg.get("validation_examples"))


SOURCE = SyntheticSource()
