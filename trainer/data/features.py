"""A record's features as ``data.features`` declares them (:class:`Feature`, :func:`parse_features`),
and the number of classes inferred from integer labels. No TensorFlow here."""

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

from trainer.errors import ConfigError, DataError

DTYPES = ("uint8", "int64", "int32", "float32", "string")
ENCODINGS = (None, "raw", "png", "jpeg", "image")


@dataclass(frozen=True)
class Feature:
    """One feature of a record: a fixed shape and dtype; bytes decoded by ``encoding`` (raw: the
    array's bytes; png/jpeg/image: an encoded image); or of variable length (a SparseTensor)."""

    name: str
    shape: Tuple[int, ...] = ()
    dtype: str = "float32"
    encoding: Optional[str] = None
    var_len: bool = False
    default: Optional[object] = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    @property
    def stored(self) -> str:
        """The tf.train.Feature list it is stored in: bytes_list, int64_list or float_list."""
        if self.encoding or self.dtype == "string":
            return "bytes_list"
        return "float_list" if self.dtype == "float32" else "int64_list"


def parse_features(spec, key: str = "data.features") -> Dict[str, Feature]:
    """``data.features`` ({name: {shape, dtype, encoding, var_len, default}}) as Features.

    Raises:
      ConfigError: an unknown dtype or encoding, a bad shape, or an unknown entry.
    """
    features = {}
    for name, entry in (spec or {}).items():
        entry = dict(entry or {})
        unknown = set(entry) - {"shape", "dtype", "encoding", "var_len", "default"}
        if unknown:
            raise ConfigError(f"{key}.{name}: unknown entries {sorted(unknown)}; give shape, dtype, encoding, var_len, default")
        shape = entry.get("shape", [])
        if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and d > 0 for d in shape):
            raise ConfigError(f"{key}.{name}.shape={shape}: give a list of positive sizes, e.g. [32, 32, 3] ([] for a scalar)")
        dtype = str(entry.get("dtype", "float32"))
        if dtype not in DTYPES:
            raise ConfigError(f"{key}.{name}.dtype={dtype}: use one of {', '.join(DTYPES)}")
        encoding = entry.get("encoding")
        if encoding not in ENCODINGS:
            raise ConfigError(f"{key}.{name}.encoding={encoding}: use raw (the array's bytes), png, jpeg, image or null")
        if encoding in ("png", "jpeg", "image") and (len(shape) != 3 or dtype != "uint8"):
            raise ConfigError(f"{key}.{name}: an encoded image needs shape [H, W, C] and dtype uint8")
        if encoding == "raw" and dtype == "string":
            raise ConfigError(f"{key}.{name}: encoding raw needs a numeric dtype (the bytes of a uint8, int64 or float32 array)")
        if not encoding and dtype == "uint8":
            raise ConfigError(f"{key}.{name}: tf.train.Example stores no uint8 list; give dtype int64, or encoding raw "
                              "for bytes")
        features[name] = Feature(name, tuple(shape), dtype, encoding, bool(entry.get("var_len", False)),
                                 entry.get("default"))
    return features


MAX_INFERRED_CLASSES = 100_000


def inferred_classes(largest: int, where: str) -> int:
    """The number of classes of labels whose largest is ``largest``: that plus one.

    Raises:
      DataError: more than :data:`MAX_INFERRED_CLASSES` (a label such as 10**9 would make a model
        with a class per id up to it).
    """
    count = max(int(largest) + 1, 1)
    if count > MAX_INFERRED_CLASSES:
        raise DataError(f"{where}: a label of {int(largest)} makes {count} classes (the largest label plus one); "
                        f"give class ids 0..N-1, or set data.num_classes if there really are more than "
                        f"{MAX_INFERRED_CLASSES}")
    return count
