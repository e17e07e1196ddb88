"""The data sources, one module each, named by ``data.name``: ``trainer/data/sources/<name>.py`` defines
``SOURCE``, a :class:`Source`; ``conf/data/<name>.yaml`` selects it. Adding a source is that module and
that config file.

A source checks its own keys before anything is read (:meth:`Source.check`), loads its data without
TensorFlow where it can (arrays, which a thread reads while TensorFlow imports: ``read_ahead``), and
says whether its training input ends (``ends``). ``trainer.data.pipelines`` turns what it loaded into
tf.data input.
"""

import importlib
import logging
import os
import pkgutil
from dataclasses import replace

from omegaconf import OmegaConf

from trainer.config.targets import callable_name
from trainer.data.ahead import NOT_LOADED, taken
from trainer.data.arrays import NUM_CLASSES, Arrays, held_out
from trainer.data.files import FileSource, load_files
from trainer.errors import ConfigError

log = logging.getLogger(__name__)


def given(data_cfg, key: str):
    """``data.KEY``'s value, None where it is unset or ``???``."""
    return None if OmegaConf.is_missing(data_cfg, key) else data_cfg.get(key)


class Source:
    """One kind of data. The defaults: its data is not read ahead, its training input repeats."""

    read_ahead = False  # NumPy and gzip alone: a thread may read it while TensorFlow imports (trainer.data.ahead)
    ends = False  # its training input ends (an input_fn's may): train.max_steps=null trains until it does
    path_hint = "an mnist.npz file or a folder of IDX files"  # what data.path names, in the message when it is absent

    def check(self, data_cfg) -> None:
        """The source's rules for its keys, before anything is read.

        Raises:
          ConfigError: naming the key and the fix.
        """
        if given(data_cfg, "path") and not os.path.exists(os.path.expanduser(data_cfg.path)):
            raise ConfigError(f"data.path={data_cfg.path}: no such file or dir; give {self.path_hint}")

    def check_download(self, data_cfg) -> None:
        """Before a sweep's first job: files that would have to be downloaded from a host that cannot be
        reached fail once, not in every job (nothing to download by default)."""

    def load(self, data_cfg):
        """What the pipelines read: ``Arrays``, a ``FileSource``, or None (the input_fns make the tensors)."""
        raise NotImplementedError


class ArraySource(Source):
    """A source of arrays in memory: ``arrays()`` capped at ``data.train_examples`` /
    ``data.test_examples``, and ``data.validation_examples`` held out of the training split."""

    read_ahead = True

    def arrays(self, data_cfg) -> Arrays:
        raise NotImplementedError

    def load(self, data_cfg) -> Arrays:
        arrays = self.arrays(data_cfg)
        n, m = data_cfg.train_examples, data_cfg.test_examples
        arrays = replace(arrays, train_x=arrays.train_x[:n], train_y=arrays.train_y[:n], test_x=arrays.test_x[:m],
                         test_y=arrays.test_y[:m])
        return held_out(arrays, data_cfg.get("validation_examples"))


class StreamedFiles(Source):
    """``data=tfrecord`` and ``data=csv``: records streamed from files (``trainer.data.files``)."""

    read_ahead = False  # its records are checked with TensorFlow's protobufs: a second thread importing
    # TensorFlow during the main thread's import is a module-lock deadlock

    def __init__(self, name: str):
        self.name = name

    def check(self, data_cfg) -> None:
        # "???" in a data yaml does not survive the merge onto the schema's defaults: unset reads None.
        for key in ("train_files", "eval_files", "label_key"):
            if not given(data_cfg, key):
                raise ConfigError(f"data.{key} is not set; data={self.name} needs data.train_files, data.eval_files "
                                  "(files or globs) and data.label_key")
        super().check(data_cfg)

    def load(self, data_cfg) -> FileSource:
        for key in ("train_examples", "test_examples", "validation_examples"):
            if data_cfg.get(key):
                raise ConfigError(f"data.{key}: not for data={self.name} (streamed files); list the files to read in "
                                  "data.train_files and data.eval_files")
        return load_files(data_cfg)


def source_names():
    """The ``data.name`` values a module of this package serves."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def source_of(data_cfg) -> Source:
    """The source ``data.name`` names.

    Raises:
      ConfigError: no module of this package serves that name.
    """
    name = str(data_cfg.name)
    if name not in source_names():
        raise ConfigError(f"data.name={name}: no such data source; use one of {', '.join(source_names())} (or add "
                          f"trainer/data/sources/{name}.py with its SOURCE)")
    return importlib.import_module(f"{__name__}.{name}").SOURCE


def load_arrays(data_cfg):
    """What ``data_cfg``'s source loads (arrays, a ``FileSource``, or None for input_fns)."""
    return source_of(data_cfg).load(data_cfg)


def load_data(data_cfg):
    """The data ``data_cfg`` names: arrays, a ``FileSource``, or None for input_fns (read by a thread
    while TensorFlow imported, ``trainer.run``, else now)."""
    data = taken(data_cfg)
    return load_arrays(data_cfg) if data is NOT_LOADED else data


def num_classes_of(data) -> int:
    """The classes of loaded data (``load_arrays``' result); 10 for input_fns, which cannot tell."""
    return NUM_CLASSES if data is None else int(data.num_classes)


def eval_source(data_cfg, data) -> str:
    """The evaluation's input as errors and logs name it (``data``: what :func:`load_data` returned)."""
    if data is None:
        return callable_name("data.eval_fn", data_cfg.eval_fn, data_cfg.eval_fn)
    if isinstance(data, FileSource):
        return f"data.eval_files ({len(data.eval_files)} files)"
    if data_cfg.get("validation_examples"):
        return f"the {data_cfg.name} validation split (data.validation_examples={data_cfg.validation_examples})"
    return f"the {data_cfg.name} test split"


def check_download(data_cfg) -> None:
    """Before a sweep's first job (``Source.check_download``)."""
    if data_cfg.get("name") in source_names():
        source_of(data_cfg).check_download(data_cfg)
