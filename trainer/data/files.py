"""Streamed datasets from files: TFRecord files of ``tf.train.Example`` and CSV tables.

Training and evaluation stream the files, never loading one whole (counting the records of a
ZLIB-compressed TFRecord file, before training, decompresses it in memory: zlib has no framing to
stream it by). A source knows its feature spec (from
config, or a CSV's header and first rows), its number of classes, and how to make a training
stream that starts at any global step in time independent of the step:

- Epoch ``e`` reads the files in a permutation drawn from (``train.seed``, ``e``), interleaved
  record by record, through a shuffle buffer seeded with (``train.seed``, ``e``). Its order is
  a function of ``e`` alone.
- The epochs follow one another without a break (a batch can straddle two), so a run resumed at
  step ``s`` starts at epoch ``s * batch // records`` and skips fewer than one epoch's records:
  exact (the batches of an uninterrupted run), and as fast at step 1,000,000 as at step 1,000.
  Only then are the records counted (TFRecord: from the record headers, without reading the
  payloads; CSV: lines).

Bad data gets one line naming the file and the record: a cheap check of the first record before
TensorFlow runs, and, when an input op fails during a run, a scan of the files in Python that
finds the first record that breaks the spec (:meth:`FileSource.diagnose`).
"""

import contextlib
import csv
import glob
import gzip
import logging
import math
import os
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from omegaconf import OmegaConf

from trainer.errors import ConfigError, DataError

log = logging.getLogger(__name__)

DTYPES = ("uint8", "int64", "int32", "float32", "string")
ENCODINGS = (None, "raw", "png", "jpeg", "image")
CYCLE_LENGTH = 4  # files read at once, record by record
DEFAULT_SHUFFLE_BUFFER = 10_000


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


def list_files(pattern, key: str) -> List[str]:
    """The files a glob (or a list of globs and paths) names, sorted.

    Raises:
      DataError: the key is unset, or a pattern matches no file.
    """
    if not pattern:
        raise ConfigError(f"{key} is not set; give a file, a glob ('/data/train-*.tfrecord') or a list of them")
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    files = []
    for p in patterns:
        found = sorted(f for f in glob.glob(os.path.expanduser(str(p))) if os.path.isfile(f))
        if not found:
            raise DataError(f"{key}: {p} matches no file; check the path or the glob")
        files.extend(found)
    return files


# --- counting and reading records in Python ----------------------------------------------------


def _opener(path: str, compression: Optional[str]):
    if compression == "GZIP":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _crc32c_table() -> List[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C, masked (rotated and offset)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


_GZIP_MAGIC = b"\x1f\x8b"


def _not_tfrecord(path: str, index: int, header: bytes, compression: Optional[str]) -> DataError:
    if index == 0 and header.startswith(_GZIP_MAGIC) and compression != "GZIP":
        return DataError(f"{path}: the file is GZIP-compressed; set data.compression=GZIP")
    return DataError(f"{path}: record {index}'s header fails its checksum: not a TFRecord file, or damaged there"
                     f"{' (or compressed: set data.compression)' if index == 0 and not compression else ''}; "
                     "rewrite the file or take it out of the glob")


def tfrecord_records(path: str, compression: Optional[str] = None, payloads: bool = True, checksums: bool = False):
    """Yield each record's payload (or its length) of a TFRecord file, checking the framing: each
    header's checksum, and with ``checksums`` each payload's (in Python: for a diagnosis, not for
    reading a whole dataset).

    Raises:
      DataError: the file is not TFRecord (or compressed otherwise than ``compression`` says), ends
        inside a record (truncated), or a record fails its checksum (damaged).
    """
    try:
        yield from _framed_records(path, compression, payloads, checksums)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        if isinstance(e, EOFError):
            raise DataError(f"{path}: the {compression} stream ends early (the file is truncated); rewrite the file") \
                from None
        raise DataError(f"{path}: not a {compression} file ({e}); fix data.compression (none, GZIP or ZLIB)") from None


def _framed_records(path: str, compression: Optional[str], payloads: bool, checksums: bool):
    if compression == "ZLIB":
        with open(path, "rb") as f:
            data = zlib.decompress(f.read())
        import io
        handle = io.BytesIO(data)
    else:
        handle = _opener(path, compression)
    with handle as f:
        size = None if compression else os.fstat(f.fileno()).st_size
        index = 0
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise DataError(f"{path}: record {index} is truncated (the file ends in its header); rewrite the file")
            (length,) = struct.unpack("<Q", header[:8])
            if _masked_crc32c(header[:8]) != struct.unpack("<I", header[8:])[0]:
                raise _not_tfrecord(path, index, header, compression)
            if size is not None and f.tell() + length + 4 > size:
                raise DataError(f"{path}: record {index} is truncated ({size - f.tell()} of {length + 4} bytes); "
                                "rewrite the file")
            if payloads:
                body, footer = f.read(length), f.read(4)
                if len(body) < length or len(footer) < 4:
                    raise DataError(f"{path}: record {index} is truncated ({len(body)} of {length} bytes); rewrite the file")
                if checksums and _masked_crc32c(body) != struct.unpack("<I", footer)[0]:
                    raise DataError(f"{path}: record {index} fails its checksum (the file is damaged there); rewrite "
                                    "the file, or take it out of the glob")
                yield body
            else:
                if compression:
                    skipped = len(f.read(length + 4))
                else:
                    f.seek(length + 4, os.SEEK_CUR)
                    skipped = length + 4
                if skipped < length + 4:
                    raise DataError(f"{path}: record {index} is truncated; rewrite the file")
                yield length
            index += 1


def _record_marks(kind: str, path: str, compression: Optional[str] = None):
    """One item per record of a file: TFRecord from the headers (payloads are skipped), CSV's
    non-blank lines after the header."""
    if kind == "tfrecord":
        yield from tfrecord_records(path, compression, payloads=False)
        return
    with open(path, "rb") as f:
        lines = (line for line in f if line.strip())
        next(lines, None)  # the header
        yield from lines


def count_records(kind: str, path: str, compression: Optional[str] = None) -> int:
    """Records in one file: TFRecord from the headers (payloads are skipped), CSV rows after the header."""
    return sum(1 for _ in _record_marks(kind, path, compression))


def holds_records(kind: str, paths: Sequence[str], at_least: int = 1, compression: Optional[str] = None) -> bool:
    """Whether ``paths`` together hold ``at_least`` records, reading no further than that."""
    found = 0
    for path in paths:
        for _ in _record_marks(kind, path, compression):
            found += 1
            if found >= at_least:
                return True
    return False


def _example_values(serialized: bytes) -> Dict[str, list]:
    """Each feature of a serialized ``tf.train.Example`` as a list of its values."""
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example()
    example.ParseFromString(serialized)
    return {name: list(getattr(f, f.WhichOneof("kind")).value) for name, f in example.features.feature.items()
            if f.WhichOneof("kind")}


def check_example(serialized: bytes, features: Dict[str, Feature], where: str) -> None:
    """Check one serialized ``tf.train.Example`` against the spec, in Python.

    Raises:
      DataError: ``where``, the feature and what is wrong with it.
    """
    # The protobuf alone; TensorFlow is imported already (files are not read ahead: Source.read_ahead).
    from google.protobuf.message import DecodeError
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example()
    try:
        example.ParseFromString(serialized)
    except DecodeError as e:
        raise DataError(f"{where}: not a tf.train.Example ({e}); write tf.train.Example records")
    found = example.features.feature
    for name, spec in features.items():
        if name not in found:
            if spec.var_len or spec.default is not None:
                continue
            raise DataError(f"{where}: no feature {name!r} (it has {sorted(found)}); fix data.features or the records")
        kind = found[name].WhichOneof("kind")
        if kind != spec.stored:
            raise DataError(f"{where}: feature {name!r} is a {kind}, the spec ({spec.dtype}"
                            f"{', ' + spec.encoding if spec.encoding else ''}) reads a {spec.stored}; fix data.features.{name}")
        values = getattr(found[name], kind).value
        if spec.var_len:
            continue
        if spec.encoding == "raw":
            want = spec.size * np.dtype(spec.dtype).itemsize
            got = len(values[0]) if len(values) == 1 else None
            if got != want:
                raise DataError(f"{where}: feature {name!r} holds {got if got is not None else len(values)} "
                                f"{'bytes' if got is not None else 'byte strings'}, the spec {list(spec.shape)} "
                                f"{spec.dtype} needs {want} bytes; fix data.features.{name}")
        elif spec.encoding:
            if len(values) != 1:
                raise DataError(f"{where}: feature {name!r} holds {len(values)} byte strings, an encoded image is one")
            _check_image(values[0], spec, where)
        elif len(values) != spec.size:
            raise DataError(f"{where}: feature {name!r} holds {len(values)} values, the spec's shape {list(spec.shape)} "
                            f"needs {spec.size}; fix data.features.{name}.shape")


_IMAGE_MAGIC = {b"\x89PNG\r\n\x1a\n": "png", b"\xff\xd8\xff": "jpeg", b"GIF8": "gif", b"BM": "bmp", b"RIFF": "webp"}


def _check_image(data: bytes, spec: "Feature", where: str) -> None:
    """An encoded image: a known format, and a PNG's size (from its header) the spec's."""
    kind = next((k for magic, k in _IMAGE_MAGIC.items() if data.startswith(magic)), None)
    if kind is None:
        raise DataError(f"{where}: feature {spec.name!r} is not an encoded image (PNG, JPEG, GIF, BMP or WebP: it "
                        f"starts {data[:8]!r}); fix the records, or data.features.{spec.name}.encoding")
    if kind == "png" and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        if [height, width] != list(spec.shape[:2]):
            raise DataError(f"{where}: feature {spec.name!r} is a {width}x{height} PNG, the spec's shape "
                            f"{list(spec.shape)} needs {spec.shape[1]}x{spec.shape[0]}; fix data.features.{spec.name}.shape "
                            "or the images")


# Classes counted from the labels (the largest plus one) beyond this are taken for a bad label.
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


# --- CSV -------------------------------------------------------------------------------------


# What tf.io.decode_csv reads as an integer and as a number (checked against it on TF 2.21): Python's
# int() and float() take more (``1_000``, digits of other scripts), which TensorFlow refuses mid-run.
_INTEGER = re.compile(r"[ \t]*[+-]?[0-9]+[ \t]*\Z")
_NUMBER = re.compile(r"[ \t]*[+-]?(?:[0-9]+\.?[0-9]*(?:e[+-]?[0-9]+)?|\.[0-9]+(?:e[+-]?[0-9]+)?|0x[0-9a-f]+"
                     r"|inf(?:inity)?|nan)[ \t]*\Z", re.I | re.A)
_INTEGER_BITS = {"int64": 64, "int32": 32}


def reads_as(value: str, dtype: str) -> bool:
    """Whether TensorFlow's CSV parser reads ``value`` as ``dtype`` (an integer in its range, a number)."""
    if dtype in _INTEGER_BITS:
        bits = _INTEGER_BITS[dtype]
        return bool(_INTEGER.match(value)) and -2 ** (bits - 1) <= int(value) < 2 ** (bits - 1)
    if dtype == "float32":
        return bool(_NUMBER.match(value))
    return True


def csv_number(value) -> float:
    """A CSV value :func:`reads_as` float32, as TensorFlow reads it (hexadecimal included); a number as it is."""
    if not isinstance(value, str):
        return float(value)
    text = value.strip()
    return float.fromhex(text) if "x" in text.lower() else float(text)


@contextlib.contextmanager
def csv_rows(path: str):
    """A ``csv.reader`` over ``path``; a file that is not CSV text fails in one line naming it.

    Raises:
      DataError: the file is not UTF-8 text, or not CSV.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a UTF-8 BOM (Excel's "CSV UTF-8") is not a name
            yield csv.reader(f)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start} is {e.object[e.start:e.start + 1]!r}); data=csv reads "
                        "comma-separated text files: check data.train_files and data.eval_files") from None
    except csv.Error as e:
        raise DataError(f"{path}: not CSV ({e}); data=csv reads comma-separated text files") from None


def csv_columns(path: str, given: Dict[str, Feature], sample_rows: int = 100) -> Dict[str, Feature]:
    """The columns of a CSV file, in order: named by its header, typed by ``given`` or by its first
    rows (int64 when every value is an integer, float32 when a number, else string). The inferred
    types are logged; a column whose sampled values are mostly numbers but not all is refused, naming
    the first value that is not, since reading it as strings would change the model without a word.

    Raises:
      DataError, ConfigError: naming the file, the column and the line.
    """
    with csv_rows(path) as reader:
        header = next(reader, None)
        rows, line = [], reader.line_num
        for _, row in zip(range(sample_rows), reader):
            check_one_line(row, header or [], f"{path}:{line + 1}")
            rows.append((reader.line_num, row))
            line = reader.line_num
    if not header:
        raise DataError(f"{path}: empty, no header line; CSV files need a header naming the columns")
    _check_header(header, path)
    unknown = set(given) - set(header)
    if unknown:
        raise ConfigError(f"data.features: {sorted(unknown)} are not columns of {path} ({', '.join(header)})")
    columns = {}
    for i, name in enumerate(header):
        columns[name] = given[name] if name in given else Feature(name, (), _inferred(path, name, i, rows))
    inferred = [f"{name} {columns[name].dtype}" for name in header if name not in given]
    if inferred:
        log.info("data=csv: column types read off the first %d rows of %s: %s (data.features.NAME.dtype sets one)",
                 len(rows), path, ", ".join(inferred))
    return columns


def _check_header(header: List[str], path: str) -> None:
    """Each column named, once."""
    for i, name in enumerate(header):
        if not name.strip():
            raise DataError(f"{path}:1: column {i + 1} of the header has no name; name every column")
        if name in header[:i]:
            raise DataError(f"{path}:1: the header names column {name!r} twice (columns {header.index(name) + 1} and "
                            f"{i + 1}); give each column its own name")


def check_one_line(row: List[str], header: List[str], where: str) -> None:
    """A row is one line of text: TensorFlow's CSV reader splits at every line break, quoted or not."""
    for i, value in enumerate(row):
        if "\n" in value or "\r" in value:
            name = header[i] if i < len(header) else f"field {i + 1}"
            raise DataError(f"{where}: the quoted value of column {name!r} runs over more than one line, and "
                            "TensorFlow reads a CSV file one line per row; remove the line breaks inside the quotes")


def _inferred(path: str, name: str, index: int, rows: List[Tuple[int, List[str]]]) -> str:
    values = [(line, row[index]) for line, row in rows if index < len(row) and row[index] != ""]
    if values and all(reads_as(v, "int64") for _, v in values):
        return "int64"
    numbers = [v for _, v in values if reads_as(v, "float32")]
    if values and len(numbers) == len(values):
        return "float32"
    if len(numbers) >= 0.9 * len(values) and len(values) >= 10:
        line, value = next((line, v) for line, v in values if not reads_as(v, "float32"))
        raise DataError(
            f"{path}:{line}: column {name!r} is {value!r}, not a number, while {len(numbers)} of its first "
            f"{len(values)} values are numbers; if it is a number column, fix those rows (an empty cell takes "
            f"data.features.{name}.default) and set data.features.{name}.dtype=float32; if it is a category, set "
            f"data.features.{name}.dtype=string")
    return "string"


def check_csv_row(row: List[str], columns: Dict[str, Feature], where: str) -> None:
    if len(row) != len(columns):
        raise DataError(f"{where}: {len(row)} fields, the header has {len(columns)} columns; fix the row")
    for value, spec in zip(row, columns.values()):
        if value == "" and spec.default is None:
            raise DataError(f"{where}: column {spec.name!r} is empty; fill it, or give data.features.{spec.name}.default")
        if value and spec.dtype in ("int64", "int32") and not reads_as(value, spec.dtype):
            raise DataError(f"{where}: column {spec.name!r} is {value!r}, not an integer TensorFlow reads as "
                            f"{spec.dtype} (ASCII digits, an optional sign); fix the row or data.features.{spec.name}.dtype")
        if value and spec.dtype == "float32" and not reads_as(value, "float32"):
            raise DataError(f"{where}: column {spec.name!r} is {value!r}, not a number; fix the row or "
                            f"data.features.{spec.name}.dtype")


# --- the source ------------------------------------------------------------------------------


@dataclass
class FileSource:
    """A TFRecord or CSV dataset: its files, features, label and classes (no TensorFlow until a
    pipeline is built)."""

    kind: str  # tfrecord | csv
    train_files: List[str]
    eval_files: List[str]
    features: Dict[str, Feature]  # every feature (CSV: every column), label included
    label_key: str
    num_classes: int
    label_vocabulary: Optional[List[str]] = None
    compression: Optional[str] = None
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER
    _counts: Dict[str, int] = field(default_factory=dict)

    @property
    def inputs(self) -> Dict[str, Feature]:
        return {k: f for k, f in self.features.items() if k != self.label_key}

    def describe(self) -> str:
        return f"data={self.kind} ({len(self.train_files)} training files, {len(self.eval_files)} evaluation files)"

    def signature(self) -> Dict:
        """What a checkpoint trained on these files depends on beyond its variables' shapes: the
        classes (a label's class id) and each input's dtype, shape and encoding."""
        return {"classes": list(self.label_vocabulary) if self.label_vocabulary is not None else self.num_classes,
                "label_key": self.label_key,
                "features": {k: [f.dtype, list(f.shape), f.encoding] for k, f in sorted(self.inputs.items())}}

    def records(self, files: Sequence[str]) -> int:
        for path in files:
            if path not in self._counts:
                self._counts[path] = count_records(self.kind, path, self.compression)
        return sum(self._counts[p] for p in files)

    def shard(self, replicas) -> Tuple[List[str], Optional[Tuple[int, int]]]:
        """(this task's files, record-level shard or None): by file when every task gets one."""
        count, index = replicas
        if count <= 1:
            return self.train_files, None
        if len(self.train_files) >= count:
            return self.train_files[index::count], None
        return self.train_files, (count, index)

    def check_training_records(self, replicas=(1, 0)) -> None:
        """Refuse a training split (or this task's share of it) that holds no record: its epochs,
        repeated for ever, would each end at once and the input would spin without a batch."""
        files, by_record = self.shard(replicas)
        at_least = 1 if by_record is None else by_record[1] + 1
        if holds_records(self.kind, files, at_least, self.compression):
            return
        share = "" if replicas[0] <= 1 else f" for training task {replicas[1]} of {replicas[0]}"
        raise DataError(f"data.train_files: no {'TFRecord records' if self.kind == 'tfrecord' else 'CSV rows'}"
                        f"{share} in {', '.join(files)}; point data.train_files at files with examples")

    def epoch_records(self, replicas) -> int:
        files, by_record = self.shard(replicas)
        total = self.records(files)
        if by_record is None:
            return total
        count, index = by_record
        return len(range(index, total, count))

    def column_name_error(self, error: Exception) -> Optional[DataError]:
        """TensorFlow's refusal of a name as a scope (a feature column's, a layer's), when the name is
        one of this source's CSV columns: one line naming the header and the fix; None otherwise."""
        found = re.match(r"'(.*)' is not a valid scope name", str(error), re.S)
        if self.kind != "csv" or found is None or found.group(1) not in self.features:
            return None
        name = found.group(1)
        return DataError(f"{self.train_files[0]}:1: column {name!r} of the header is not a name TensorFlow takes for a "
                         "feature column or scope (letters, digits and _ . - / only); rename it in the header of "
                         f"every file, e.g. {re.sub(r'[^A-Za-z0-9_.-]', '_', name)!r}")

    def packed_like(self, ignored=()) -> np.ndarray:
        """An empty array shaped and typed like one batch of the built-in models' packed input (for
        checking ``predict.input``): a single input as stored, several as float32 [0, total size]."""
        inputs = [f for name, f in self.inputs.items() if name not in ignored]
        if len(inputs) == 1 and inputs[0].dtype != "string":
            return np.zeros((0, *inputs[0].shape), np.uint8 if inputs[0].dtype == "uint8" else np.float32)
        return np.zeros((0, sum(f.size for f in inputs)), np.float32)

    # Python-side checks, with file and record in the message.

    def check_first(self) -> None:
        """The first record of the first training and evaluation files against the spec."""
        for path in (self.train_files[0], self.eval_files[0]):
            self._scan(path, limit=1, checksums=True)

    def diagnose(self, files: Sequence[str], numbers: bool = False) -> Optional[str]:
        """The first record of ``files`` that breaks the spec, as one line (None if none does);
        ``numbers``: also a numeric input that is NaN or Inf, or an integer beyond float32's exact range."""
        for path in files:
            try:
                self._scan(path, numbers=numbers, checksums=True)
            except DataError as e:
                return str(e)
        return None

    def _scan(self, path: str, limit: Optional[int] = None, numbers: bool = False, checksums: bool = False) -> None:
        if self.kind == "tfrecord":
            for index, record in enumerate(tfrecord_records(path, self.compression, checksums=checksums)):
                if limit is not None and index >= limit:
                    return
                where = f"{path}: record {index}"
                check_example(record, self.features, where)
                self._check_label_record(record, where)
                if numbers:
                    self._check_numbers(_example_values(record), where)
            return
        with csv_rows(path) as reader:
            next(reader, None)
            line = reader.line_num
            for index, row in enumerate(reader):
                if limit is not None and index >= limit:
                    return
                first, line = line + 1, reader.line_num
                if not row:
                    continue
                where = f"{path}: row {index + 1} (line {first})"
                check_one_line(row, list(self.features), where)
                check_csv_row(row, self.features, where)
                self._check_label(row[list(self.features).index(self.label_key)], where)
                if numbers:
                    self._check_numbers(dict(zip(self.features, row)), where)

    def _check_numbers(self, values: Dict[str, object], where: str) -> None:
        """Each plain numeric input of a record is finite, and an integer is exact in float32."""
        for name, spec in self.inputs.items():
            if spec.encoding or spec.var_len or spec.dtype == "string" or name not in values:
                continue
            raw = values[name]
            found = [csv_number(v) for v in (raw if isinstance(raw, (list, tuple)) else [raw]) if v != ""]
            if not all(math.isfinite(v) for v in found):
                raise DataError(f"{where}: feature {name!r} is NaN or Inf; fix or drop the record")
            if spec.dtype in ("int64", "int32") and any(abs(v) > 2**24 for v in found):
                raise DataError(f"{where}: feature {name!r} holds an integer beyond 2**24 (not exact in float32); "
                                "rescale the feature, or add it to data.ignore")

    def _check_label_record(self, record: bytes, where: str) -> None:
        from tensorflow.core.example import example_pb2

        example = example_pb2.Example()
        example.ParseFromString(record)
        feature = example.features.feature.get(self.label_key)
        kind = feature.WhichOneof("kind") if feature is not None else None
        values = list(getattr(feature, kind).value) if kind else []
        if len(values) == 1:
            value = values[0]
            self._check_label(value.decode() if isinstance(value, bytes) else value, where)

    def _check_label(self, value, where: str) -> None:
        if self.label_vocabulary is not None:
            if str(value) not in self.label_vocabulary:
                raise DataError(f"{where}: label {value!r} is not in data.label_vocabulary {self.label_vocabulary}")
            return
        number = csv_number(value)
        if self.features[self.label_key].dtype == "float32":  # a regressor's number
            if not math.isfinite(number):
                raise DataError(f"{where}: label {value} is not a finite number; fix the record")
            return
        if number != int(number) or not 0 <= number < self.num_classes:
            raise DataError(f"{where}: label {value} is outside the {self.num_classes} classes 0..{self.num_classes - 1}; "
                            "set data.num_classes or fix the label")


def _label_feature(features: Dict[str, Feature], label_key: Optional[str], kind: str) -> str:
    if not label_key:
        raise ConfigError(f"data.label_key is not set; data={kind} needs the name of the label "
                          f"{'feature' if kind == 'tfrecord' else 'column'}, e.g. data.label_key=label")
    return label_key


def _scan_labels(source: FileSource) -> List:
    """Every training label, read in Python (for the classes when data.num_classes is not given)."""
    labels = []
    if source.kind == "csv":
        column = list(source.features).index(source.label_key)
        dtype = source.features[source.label_key].dtype
        for path in source.train_files:
            with csv_rows(path) as reader:
                next(reader, None)
                for row in reader:
                    if not row or column >= len(row):
                        continue
                    if not reads_as(row[column], dtype):
                        raise DataError(f"{path}:{reader.line_num}: label {row[column]!r} is not {dtype} as TensorFlow "
                                        f"reads it; fix the row, or set data.features.{source.label_key}.dtype")
                    labels.append(row[column])
        return labels
    from tensorflow.core.example import example_pb2

    for path in source.train_files:
        for index, record in enumerate(tfrecord_records(path, source.compression)):
            example = example_pb2.Example()
            example.ParseFromString(record)
            feature = example.features.feature.get(source.label_key)
            if feature is None or feature.WhichOneof("kind") != "int64_list" or len(feature.int64_list.value) != 1:
                raise DataError(f"{path}: record {index}: label {source.label_key!r} is not one int64; "
                                "write integer class ids, or set data.label_key")
            labels.append(feature.int64_list.value[0])
    return labels


def _source_features(kind: str, given: Dict[str, Feature], label_key: str, train_files: List[str],
                     eval_files: List[str]) -> Dict[str, Feature]:
    """Every feature of the files, the label's included: TFRecord's from ``data.features``, CSV's from the
    first file's header (every file must have the same one)."""
    if kind == "tfrecord":
        if not given:
            raise ConfigError("data.features is not set; data=tfrecord needs the feature spec, e.g. "
                              "data.features.image='{shape: [32, 32, 3], dtype: uint8, encoding: raw}'")
        features = dict(given)
        features.setdefault(label_key, Feature(label_key, (), "int64"))
        return features
    features = csv_columns(train_files[0], given)
    for path in train_files[1:] + eval_files:
        with csv_rows(path) as reader:
            header = next(reader, None)
        if header != list(features):
            raise DataError(f"{path}: header {header} differs from {train_files[0]}'s {list(features)}; "
                            "give every CSV file the same columns")
    return features


def load_files(data_cfg) -> FileSource:
    """``data=tfrecord`` or ``data=csv`` as config describes it; files listed and the first record of
    each split checked against the spec (nothing is loaded whole).

    Raises:
      ConfigError, DataError: naming the key, or the file and record.
    """
    kind = data_cfg.name
    compression = data_cfg.get("compression") or None
    if compression not in (None, "GZIP", "ZLIB"):
        raise ConfigError(f"data.compression={compression}: use GZIP, ZLIB or null")
    if kind == "csv" and compression:
        raise ConfigError("data.compression: CSV files are read uncompressed; unpack them first")
    train_files = list_files(data_cfg.get("train_files"), "data.train_files")
    eval_files = list_files(data_cfg.get("eval_files"), "data.eval_files")
    given = parse_features(OmegaConf.to_container(data_cfg.features, resolve=True) if data_cfg.get("features") else {})
    label_key = _label_feature(given, data_cfg.get("label_key"), kind)
    features = _source_features(kind, given, label_key, train_files, eval_files)
    if label_key not in features:
        raise ConfigError(f"data.label_key={label_key}: no such {'feature' if kind == 'tfrecord' else 'column'} "
                          f"(there are {', '.join(features)})")
    label = features[label_key]
    if label.shape or label.var_len or label.encoding:
        raise ConfigError(f"data.label_key={label_key}: the label must be one value per record (shape [])")
    vocabulary = list(data_cfg.get("label_vocabulary") or []) or None
    repeated = sorted({str(v) for v in vocabulary or () if [str(w) for w in vocabulary].count(str(v)) > 1})
    if repeated:
        raise ConfigError(f"data.label_vocabulary: {repeated} given more than once; give each label once (its place "
                          "is its class id)")
    if label.dtype == "string" and vocabulary is None:
        if kind != "csv":
            raise ConfigError(f"data.label_key={label_key} is a string feature; set data.label_vocabulary=[...]")
    elif label.dtype not in ("int64", "int32", "string", "float32"):
        raise ConfigError(f"data.label_key={label_key} is {label.dtype}; labels are integer class ids (or strings with "
                          "data.label_vocabulary), or float32 numbers for a regressor")
    buffer = data_cfg.get("shuffle_buffer") or DEFAULT_SHUFFLE_BUFFER
    source = FileSource(kind, train_files, eval_files, features, label_key, 0, vocabulary, compression, buffer)
    source.check_training_records()
    num_classes = data_cfg.get("num_classes")
    if label.dtype == "string" and vocabulary is None:
        source.label_vocabulary = sorted({str(v) for v in _scan_labels(source)})
        log.info("data.label_key=%s: the training files' labels are %s (data.label_vocabulary sets them)", label_key,
                 source.label_vocabulary)
    if label.dtype == "float32":  # a number to regress on, not a class: no classes
        num_classes = 0
    elif source.label_vocabulary is not None:
        num_classes = len(source.label_vocabulary)
    elif num_classes is None:
        labels = [int(csv_number(v)) for v in _scan_labels(source)]
        num_classes = inferred_classes(max(labels), f"data.label_key={label_key}") if labels else 1
        log.info("data.label_key=%s: %d classes (the largest training label plus one; data.num_classes sets it)",
                 label_key, num_classes)
    source.num_classes = int(num_classes)
    source.check_first()
    return source
