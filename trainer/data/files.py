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
import glob
import logging
import math
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from omegaconf import OmegaConf

from trainer.data.csv_files import check_csv_row, check_one_line, csv_columns, csv_number, csv_rows, reads_as
from trainer.data.features import Feature, inferred_classes, parse_features
from trainer.data.tfrecord_files import check_example, example_values, tfrecord_records
from trainer.errors import ConfigError, DataError

log = logging.getLogger(__name__)

CYCLE_LENGTH = 4  # files read at once, record by record
DEFAULT_SHUFFLE_BUFFER = 10_000


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


# --- counting records in Python -----------------------------------------------------------------


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
        count, index = replicas[0], replicas[1]
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
                    self._check_numbers(example_values(record), where)
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
