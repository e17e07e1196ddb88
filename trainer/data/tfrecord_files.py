"""TFRecord files read in Python, without TensorFlow: the record framing (lengths and masked CRC32C
checksums, plain, GZIP or ZLIB), and one ``tf.train.Example`` checked against its features (the
protobuf alone), images by their magic numbers."""

import gzip
import os
import struct
import zlib
from typing import Dict, List, Optional

import numpy as np

from trainer.data.features import Feature
from trainer.errors import DataError


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


def example_values(serialized: bytes) -> Dict[str, list]:
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
