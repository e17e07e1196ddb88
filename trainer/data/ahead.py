"""Reading a run's data while TensorFlow imports.

Importing TensorFlow takes seconds of one core; reading the arrays (gzip, numpy) is mostly C code
that releases the GIL, so a thread started before the import has the data ready by the time the
graph needs it (about 0.25 s sooner to the first step on a 2-core CPU, BENCHMARKS.md)::

    with loading_ahead(cfg.data, load_arrays):   # a thread reads the data from here on
        import_tensorflow()
        ...
        arrays = taken(cfg.data)                 # its result (or its error), once; else NOT_LOADED

The thread works on its own resolved copy of the data config. Its log lines are held back and
logged when the result is taken: during the import, file descriptor 2 is silenced (TensorFlow's
C++ noise), and the console would lose them. Nothing here imports TensorFlow.
"""

import contextlib
import json
import logging
import threading
from typing import Callable, Dict, List

from omegaconf import OmegaConf

NOT_LOADED = object()  # what ``taken`` returns when no thread read this data config

_running: Dict[str, "_Reader"] = {}


class _HeldRecords(logging.Filter):
    """On the root logger's handlers: holds back the records of one thread."""

    def __init__(self):
        super().__init__()
        self.thread_id = None
        self.records: List[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.thread_id is None or record.thread != self.thread_id:
            return True
        if not self.records or self.records[-1] is not record:  # each handler sees the same record
            self.records.append(record)
        return False


class _Reader(threading.Thread):
    def __init__(self, load: Callable, data_cfg):
        super().__init__(name="data-ahead", daemon=True)
        self._load, self._cfg = load, data_cfg
        self.result, self.error = None, None
        self._held = _HeldRecords()
        self._handlers = list(logging.getLogger().handlers)
        for handler in self._handlers:
            handler.addFilter(self._held)

    def run(self):
        self._held.thread_id = threading.get_ident()
        try:
            self.result = self._load(self._cfg)
        except Exception as e:  # raised in the thread that takes the result
            self.error = e
        finally:
            self._held.thread_id = None  # a later thread may be given the same id

    def release_log(self) -> None:
        """Log what the thread logged so far, and let the rest through as it comes."""
        for handler in self._handlers:
            handler.removeFilter(self._held)
        records, self._held.records = self._held.records, []
        for record in records:
            logging.getLogger(record.name).handle(record)


def _key(data_cfg) -> str:
    return json.dumps(OmegaConf.to_container(data_cfg, resolve=True), sort_keys=True, default=str)


@contextlib.contextmanager
def loading_ahead(data_cfg, load: Callable):
    """Within the block, a thread runs ``load(copy of data_cfg)`` for ``taken`` to collect.

    A result nobody takes is dropped at the end of the block (the thread, a daemon, is not waited for).
    """
    key = _key(data_cfg)
    reader = _Reader(load, OmegaConf.create(OmegaConf.to_container(data_cfg, resolve=True)))
    _running[key] = reader
    reader.start()
    try:
        yield
    finally:
        if _running.get(key) is reader:
            del _running[key]
        reader.release_log()


def taken(data_cfg):
    """What the thread reading ``data_cfg`` loaded (waiting for it), once; ``NOT_LOADED`` if no thread did.

    Raises:
      whatever loading raised in the thread.
    """
    reader = _running.pop(_key(data_cfg), None)
    if reader is None:
        return NOT_LOADED
    reader.join()
    reader.release_log()
    if reader.error is not None:
        raise reader.error
    return reader.result
