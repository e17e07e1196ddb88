"""Everything the runner does to the process as a whole, in one place. Importing a ``trainer`` module
changes none of it (the one exception: importing ``trainer`` sets ``TF_USE_LEGACY_KERAS=1`` unless
set, which TensorFlow must see before it is imported for ``tf.compat.v1.layers`` to work). The
``train`` command's ``main()`` calls :func:`prepare_command` first; :func:`trainer.run` calls
:func:`set_environment` and :func:`import_tensorflow`. A library user who calls neither gets
TensorFlow's defaults.

The effects, each documented where it is made:

- environment variables TensorFlow reads at import (:func:`set_environment`);
- ``logging.raiseExceptions`` off: a log file on a full disk loses lines instead of printing a
  traceback for each (:func:`prepare_command`);
- ``sys.path``: the working dir first, so the config's dotted paths find the user's modules
  (:func:`import_from_working_dir`, the ``train`` command only);
- ``sys.excepthook``: a Ctrl-C outside the command's ``main()`` is one line and status 130
  (:func:`install_excepthook`);
- ``threading.excepthook``: SyncReplicas' cancelled queue-runner threads end silently
  (:func:`ignore_cancelled_queue_runners`, called by a cluster's chief);
- the cyclic garbage collector held off while the command starts (:func:`hold_collector`);
- file descriptor 2 and ``sys.stderr`` while TensorFlow's libraries load (:func:`preload_libraries`,
  :func:`quiet_stderr`), and TensorFlow's Python logger routed into the run's log
  (:func:`route_tensorflow_log`);
- TensorFlow's op determinism (:func:`set_determinism`);
- ``tf.estimator`` and its other import paths resolving to ``trainer.estimator``, made by the two
  entry points that run Estimator code (``trainer.estimator.alias``: the ``train`` command once
  TensorFlow is imported, and ``train-estimator``).

Python's and NumPy's global random generators are never touched (``train.seed`` seeds the graph
and tf_keras' own generator only, as Estimator seeded the graph only).
"""

import atexit
import contextlib
import gc
import io
import logging
import os
import sys
import threading
import time
import warnings
from typing import Callable, Iterable, List

from trainer import compat

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _stderr_to_devnull():
    """Silence file descriptor 2: TensorFlow's C++ start-up lines bypass Python's sys.stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def quiet_stderr(quiet: bool = True):
    """File descriptor 2 silenced while ``quiet`` (TensorFlow's C++ logging writes there)."""
    return _stderr_to_devnull() if quiet else contextlib.nullcontext()


def set_environment() -> None:
    """The environment TensorFlow reads when it is imported (nothing happens to a variable the user set):

    - ``TF_CPP_MIN_LOG_LEVEL=2``: TensorFlow's C++ info and warning lines are off (``log.tf_verbose=true``
      turns them back on).
    - ``TF_ENABLE_ONEDNN_OPTS=1``: TensorFlow's oneDNN CPU kernels on every x86 CPU (TensorFlow turns
      them on by itself only on CPUs with AVX-512 VNNI, BF16 or AMX). On an AVX2 CPU they ran the
      layers-tutorial CNN at 1.85x the speed of TensorFlow's own kernels (BENCHMARKS.md);
      ``TF_ENABLE_ONEDNN_OPTS=0`` turns them off. ``metrics.json`` records which.
    - ``TF_XLA_FLAGS`` gains ``--tf_xla_cpu_global_jit``: ``device.xla=true`` then clusters on the CPU
      too. TensorFlow reads the flags once, early; they change nothing for a session whose
      ConfigProto leaves the JIT off (the default).

    - MLflow's HTTP client (``tracking=mlflow`` with an ``http(s)://`` server) tries a request twice,
      5 seconds each, instead of MLflow's 8 tries with exponential backoff over minutes: a server that
      does not answer holds a finished run for seconds, and the next command sends what is missing.

    After TensorFlow is imported these change nothing (a library user who imported it first keeps
    TensorFlow's defaults).
    """
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    if "--tf_xla_cpu_global_jit" not in os.environ.get("TF_XLA_FLAGS", ""):
        os.environ["TF_XLA_FLAGS"] = (os.environ.get("TF_XLA_FLAGS", "") + " --tf_xla_cpu_global_jit").strip()


def _interrupted(kind, value, traceback) -> None:
    if issubclass(kind, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)
    sys.__excepthook__(kind, value, traceback)


def install_excepthook() -> None:
    """``sys.excepthook`` of the command: a Ctrl-C outside its ``main()`` (the console script's own
    lines around the call) is one line and status 130, like one inside it."""
    sys.excepthook = _interrupted


_after_tensorflow: List[Callable[[], None]] = []  # what the command runs once import_tensorflow() imported it


def prepare_command(after_tensorflow: Iterable[Callable[[], None]] = ()) -> None:
    """What the ``train`` command does to its process before anything else; ``after_tensorflow`` runs once
    :func:`import_tensorflow` has imported TensorFlow."""
    install_excepthook()
    set_environment()
    import_from_working_dir()
    # A log file that cannot be written (a full disk) costs its lines, not a traceback per record:
    # the run's own records fail in one line naming the file (trainer.errors.RecordError).
    logging.raiseExceptions = False
    _after_tensorflow.extend(after_tensorflow)


def import_from_working_dir() -> None:
    """User code named by dotted path (``model.fn=my_pkg.model.model_fn``) imports from the working dir,
    as under ``python -m``: a console script's ``sys.path`` starts at its own bin dir instead."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def ignore_cancelled_queue_runners() -> None:
    """Queue-runner threads cancelled by a session's close end silently instead of printing a traceback.
    SyncReplicasOptimizer's chief queue runner stays blocked for gradients that no longer come, and
    closing the session cancels it; the thread may wake after the session is gone, so this stays for
    the process."""
    previous = threading.excepthook
    if getattr(previous, "ignores_cancelled_queue_runners", False):
        return

    def hook(args):
        import tensorflow as tf

        if issubclass(args.exc_type, tf.errors.CancelledError) and args.thread is not None \
                and args.thread.name.startswith("QueueRunnerThread-"):
            return
        previous(args)

    hook.ignores_cancelled_queue_runners = True
    threading.excepthook = hook


_import_secs = {}

# TensorFlow's C++ libraries, which its Python extension links against (Linux wheels), in load order.
_LIBRARIES = ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2")
_preloading = []  # the thread loading them, while it may still run


def preload_libraries() -> None:
    """Start loading TensorFlow's two C++ libraries on a thread, before the ``train`` command composes
    its config; :func:`import_tensorflow` then finds them loaded.

    Loading them (relocations and the static initialisers that register every op and kernel) is
    0.35-0.4 s of ``import tensorflow`` on a 2-core CPU, and ``dlopen`` called through ctypes runs
    without the GIL, so it takes the second core while the first composes the config. They are
    plain C++ libraries (no Python symbols); the import's own ``dlopen`` of them, as dependencies of
    its extension module, then returns the loaded ones. Their start-up lines (absl writes them to
    file descriptor 2 whatever ``TF_CPP_MIN_LOG_LEVEL`` says) go to /dev/null, as during the import;
    Python's ``sys.stderr`` writes to a duplicate of descriptor 2 meanwhile, so an error of the
    command still shows. Only on Linux with glibc, when TensorFlow is installed and not imported,
    and not when the user asked for TensorFlow's C++ log (``TF_CPP_MIN_LOG_LEVEL`` below 2): then
    nothing happens and the import loads the libraries itself. (The ``train`` command does not call
    this when ``log.tf_verbose`` is on its command line; set in a config file, the libraries' own
    start-up lines are then not shown, the rest of TensorFlow's log is.)
    """
    if _preloading or "tensorflow" in sys.modules or not sys.platform.startswith("linux"):
        return
    if not os.confstr("CS_GNU_LIBC_VERSION") or os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2").strip() in ("0", "1"):
        return
    import importlib.util

    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return
    if spec is None or not spec.submodule_search_locations:
        return
    paths = [os.path.join(spec.submodule_search_locations[0], name) for name in _LIBRARIES]
    if not all(os.path.isfile(path) for path in paths):
        return
    import ctypes

    try:
        dlopen = ctypes.CDLL(None).dlopen
    except (OSError, AttributeError):
        return
    dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    sys.stderr.flush()
    python_stderr = sys.stderr
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    # Never closed: a handler made meanwhile may hold this stream; it writes where stderr went.
    ours = io.TextIOWrapper(io.FileIO(saved, "w", closefd=False), encoding=python_stderr.encoding,
                            errors=python_stderr.errors, line_buffering=True, write_through=True)
    sys.stderr = ours
    os.dup2(devnull, 2)
    os.close(devnull)

    def load():
        try:
            for path in paths:
                if not dlopen(path.encode(), sys.getdlopenflags()):
                    break  # the import loads it itself, and reports what is wrong
        finally:
            os.dup2(saved, 2)
            if sys.stderr is ours:
                sys.stderr = python_stderr

    thread = threading.Thread(target=load, name="tensorflow-libraries", daemon=True)
    _preloading.append(thread)
    thread.start()
    # An exit while they load (a config error) waits for them: exit() runs the C++ destructors of
    # what the libraries' initialisers have built so far under the running initialisers, which
    # then spin forever (seen in 1 of 25 error exits without this).
    atexit.register(_preloaded)


def _preloaded() -> None:
    """Wait for :func:`preload_libraries`' thread (descriptor 2 is back when it ends)."""
    while _preloading:
        _preloading.pop().join()


_collector_held = []  # True while hold_collector() has the cyclic garbage collector off


def hold_collector() -> None:
    """Turn Python's cyclic garbage collector off until TensorFlow is imported (see
    :func:`import_tensorflow`, which turns it back on). Start-up makes about 455,000 objects that
    live as long as the process (Hydra's and TensorFlow's modules, the composed config); each full
    collection walks all of them and frees nothing. Five of them ran during ``import tensorflow``:
    0.4-0.5 s of its 2.2 s on a 2-core CPU. Nothing happens if the collector is already off."""
    if gc.isenabled() and not _collector_held:
        gc.disable()
        _collector_held.append(True)


def _release_collector() -> None:
    """The collector back on, what start-up allocated moved out of its reach (``gc.freeze``: later
    full collections, during the run, walk only what the run itself allocates)."""
    if _collector_held:
        _collector_held.clear()
        gc.freeze()
        gc.enable()


def import_tensorflow(verbose: bool = False):
    """Import TensorFlow with its C++ and deprecation noise off unless ``verbose``, and without the
    cyclic garbage collector (:func:`hold_collector`)."""
    _preloaded()
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    try:
        if "tensorflow" not in sys.modules:
            started = time.time()
            hold_collector()
            with quiet_stderr(not verbose):
                import tensorflow  # noqa: F401
            _import_secs["tensorflow"] = time.time() - started
        while _after_tensorflow:  # still start-up: the collector stays off for it too
            _after_tensorflow.pop(0)()
    finally:
        _release_collector()  # also when the command held it and something else imported TensorFlow first
    import tensorflow as tf

    route_tensorflow_log(verbose)
    if not verbose:
        warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"(tensorflow|tf_keras|keras).*")
    return tf


class _NoDeprecations(logging.Filter):
    """Drops TensorFlow's deprecation notices (a dozen per run of TF1 code), keeps everything else."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return "is deprecated" not in message and "Instructions for updating" not in message


class _ConsoleQuiet(logging.Filter):
    """Keeps TensorFlow's session and checkpoint chatter off the console (it still goes to
    ``train.log``): of a checkpoint save, the console shows TensorFlow's one "Saving checkpoints for
    N into PATH" line, not the listeners' two around it; nor the graph finalizing and local init."""

    CHATTER = ("Calling checkpoint listeners", "Create CheckpointSaverHook", "Graph was finalized",
               "Running local_init_op", "Done running local_init_op")

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != "tensorflow" or not record.getMessage().startswith(self.CHATTER)


def _quiet_consoles() -> None:
    for handler in logging.getLogger().handlers:
        console = isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
        if console and not any(isinstance(f, _ConsoleQuiet) for f in handler.filters):
            handler.addFilter(_ConsoleQuiet())


def route_tensorflow_log(verbose: bool = False) -> None:
    """TensorFlow's Python logger (``tf.compat.v1.logging``, LoggingTensorHook, MonitoredSession's
    lines) at INFO into the run's own handlers (console and ``train.log``) instead of its own
    stderr handler; deprecation notices dropped unless ``verbose``, and its session and checkpoint
    chatter kept to ``train.log`` (:class:`_ConsoleQuiet`)."""
    import tensorflow as tf

    logger = tf.get_logger()  # made on first use, with its own handler: make it now, then route it
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.propagate = True
    logger.setLevel(logging.INFO)
    for existing in list(logger.filters):
        if isinstance(existing, _NoDeprecations):
            logger.removeFilter(existing)
    if not verbose:
        logger.addFilter(_NoDeprecations())
        _quiet_consoles()


def import_secs() -> float:
    """How long this process took to import TensorFlow (0 when something else imported it first)."""
    return _import_secs.get("tensorflow", 0.0)


def set_determinism(deterministic: bool) -> None:
    """Turn op determinism on or off for this process (a sweep may mix both)."""
    import tensorflow as tf

    if deterministic:
        tf.config.experimental.enable_op_determinism()
    elif compat.op_determinism_enabled():
        compat.disable_op_determinism()
