"""The ``train`` command: Hydra's entry point, the checks before a job starts, run-dir names, ``resume=``."""

import sys

from trainer.interrupts import hold_ctrl_c
from trainer.process import hold_collector, preload_libraries, prepare_command


def _imports_tensorflow(argv) -> bool:
    """A single run, which imports TensorFlow once its config is checked: no flag (Hydra's ``--help``,
    ``--cfg``, ``-m``, ...), no ``hydra.mode=`` sweep, and no ``log.tf_verbose`` (whose C++ lines of
    the libraries' start-up the import shows)."""
    return not any(a.startswith("-") or a.startswith("hydra.mode=") or "tf_verbose" in a for a in argv)


# The extension modules that the command loads before TensorFlow: Hydra's and OmegaConf's imports,
# the config's composition, the run dir's files and the data read ahead (the standard library's,
# PyYAML's, NumPy's). Importing one waits for the loader's lock, which loading TensorFlow's
# libraries holds for 0.4 s: they are imported first, in a few milliseconds (NumPy: 0.05 s).
# ``zipfile`` stands for the ones it brings (``shutil``'s ``_bz2`` and ``_lzma``, ``zlib``,
# ``binascii``): Hydra's plugin scan during composition imports it, unless something the environment
# imports at start-up (a ``.pth`` file, an editable install's finder) already has.
_EXTENSIONS = ("_blake2", "_contextvars", "_csv", "_ctypes", "_datetime", "_decimal", "_hashlib", "_heapq", "_json",
               "_opcode", "_pickle", "_queue", "_socket", "_uuid", "array", "select", "unicodedata", "yaml._yaml",
               "zipfile", "numpy.random")


def _import_extensions() -> None:
    import importlib

    for name in _EXTENSIONS:
        try:
            importlib.import_module(name)
        except ImportError:  # not built into this Python, or PyYAML without libyaml: loaded by no one
            pass


def _alias_estimator() -> None:
    """Model_fns written against ``tf.estimator`` run unedited (once TensorFlow is imported: importing
    ``trainer.estimator`` imports it)."""
    from trainer.estimator.alias import alias_estimator

    alias_estimator()


def version() -> str:
    """``train --version``: the runner's version and the versions of what it runs on (read from the
    installed packages' metadata: nothing is imported)."""
    from importlib import metadata

    def of(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return (f"tf-graph-trainer {of('tf-graph-trainer')} (TensorFlow {of('tensorflow')}, tf-keras {of('tf-keras')}, "
            f"Hydra {of('hydra-core')}, Python {sys.version.split()[0]})")


def main() -> None:
    """The console script: Ctrl-C at any moment once Python has started this package, even while the
    command is still importing Hydra and TensorFlow, ends it with one line and status 130."""
    if sys.argv[1:] == ["--version"]:
        print(version())
        return
    prepare_command(after_tensorflow=[_alias_estimator])
    try:
        # Held while the config is built (trainer.interrupts): the import registers the schemas, and
        # OmegaConf turns a KeyboardInterrupt inside its work into other errors.
        hold_ctrl_c()
        if _imports_tensorflow(sys.argv[1:]):
            hold_collector()  # until TensorFlow is imported: Hydra's imports and composition too
            _import_extensions()
            preload_libraries()  # on the second core while Hydra imports and composes the config
        from trainer.cli.main import main as run

        run()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
