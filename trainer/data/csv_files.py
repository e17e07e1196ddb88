"""CSV tables read in Python: rows as TensorFlow's ``decode_csv`` reads them (a number is what it
parses), the header, and the columns' types inferred from the first rows."""

import contextlib
import csv
import logging
import re
from typing import Dict, List, Tuple

from trainer.data.features import Feature
from trainer.errors import ConfigError, DataError

log = logging.getLogger("trainer.data.files")


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
