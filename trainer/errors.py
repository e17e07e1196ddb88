"""The runner's errors, the exit status each maps to, and the one-line error boundary.

Inside the runner errors are raised, never turned into ``sys.exit``: a Hydra
multirun runs every job in one process and a SystemExit would end the whole
sweep. Only a process boundary (the ``train`` command, a local cluster's task)
calls :func:`exit_on_error`, which prints one ``error:`` line and exits with the
error's status.
"""

import logging
import os
import re
import sys
import sysconfig
import traceback
from typing import List, Optional, Tuple


class TrainerError(Exception):
    """Base class: a failure the runner explains in one line."""

    exit_code = 1


class TrainingError(TrainerError):
    """Training itself failed (NaN loss, an error in the loop)."""

    exit_code = 1


class ConfigError(TrainerError):
    """A config value is wrong; the message names the key and the fix."""

    exit_code = 2


class DataError(ConfigError):
    """Data files are missing or do not parse."""


class ArgumentError(ConfigError, ValueError):
    """A value the Estimator API refuses, as Estimator refused it (a ``ValueError`` a program may catch);
    one line at the launcher's boundary."""


class ContractError(ConfigError, ValueError):
    """A model_fn or input_fn returned what Estimator's contract does not take (a ValueError, as
    Estimator raised it); the message names the function and what to return."""


class CheckpointError(TrainerError):
    """A checkpoint dir cannot be used (unreadable, another model, other shapes)."""

    exit_code = 3


class NanLossError(TrainingError):
    """The loss became NaN or Inf (``train.on_nan=stop``)."""


class CheckpointLockedError(TrainerError):
    """Another live run holds the checkpoint dir."""

    exit_code = 4


class Preempted(TrainerError):
    """Stopped by SIGTERM or SIGINT after saving a checkpoint; the same command resumes."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class RecordError(TrainerError):
    """A file of the run's record (``metrics.json``, ``metrics.jsonl``, ...) cannot be written: the
    disk is full or the dir read-only. The checkpoints written so far are kept."""

    exit_code = 7


class RecoveryLimitError(TrainingError):
    """The session failed again after ``session.max_recoveries`` recoveries."""


class ClusterError(TrainerError):
    """A cluster task is unreachable or stopped making progress, or a task of a local cluster failed."""

    exit_code = 5


class PortInUseError(ClusterError):
    """This task's port is taken by another process (``distributed=local`` picks other ports)."""

    exit_code = 6


def full_errors() -> bool:
    """``HYDRA_FULL_ERROR=1``: show tracebacks instead of one line."""
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def first_line(exc: BaseException) -> str:
    """The line that says what went wrong (for TensorFlow's "Graph execution error:", the failing
    op's own message, which comes after its stack)."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    if lines and lines[0] == "Graph execution error:":
        node = next((i for i, line in enumerate(lines) if line.startswith("Node: ")), None)
        if node is not None and node + 1 < len(lines) and lines[node + 1]:
            return f"{lines[node + 1]} ({lines[node][len('Node: '):]})"
        told = next((line for line in lines[1:] if line and not line.startswith(("Detected at node", "[[", "File "))),
                    None)
        if told:  # an error inside a tf.data function: its message, after TensorFlow's preamble
            return re.sub(r"^Error in user-defined function passed to .*? transformation with iterator: \S+: ", "",
                          told)
    return (lines or [""])[0]


_LIBRARIES = ("trainer", "tensorflow", "tf_keras", "keras", "absl", "hydra", "omegaconf", "google", "numpy")


def _library_dirs() -> List[str]:
    dirs = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")]
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        for path in getattr(module, "__path__", None) or []:
            dirs.append(path)
    return [os.path.join(os.path.realpath(d), "") for d in dirs]


def user_frame(exc: BaseException) -> Optional[str]:
    """Where in the user's code ``exc`` came from: ``file.py:LINE in function`` of the innermost
    frame outside the runner, TensorFlow, the standard library and the config libraries. For a
    TensorFlow op error, the frame that created the failing op."""
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    op = getattr(exc, "op", None)
    if op is not None and getattr(op, "traceback", None):
        frames = [(f.filename, f.lineno, f.name) for f in op.traceback]
    libraries = _library_dirs()
    for filename, lineno, name in reversed(frames):
        path = os.path.realpath(filename)
        if not filename.startswith("<") and not any(path.startswith(d) for d in libraries):
            return f"{os.path.basename(filename)}:{lineno} in {name}"
    return None


_RAISED_IN_PYTHON = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def _raised_in_python(exc: BaseException) -> Optional[Tuple[str, str]]:
    """(type name, message) of the Python exception a ``tf.numpy_function`` / ``py_func`` op raised,
    which TensorFlow reports inside its own error, after the traceback; None for other errors."""
    text = str(exc)
    if "Traceback (most recent call last)" not in text:
        return None
    after = text.split("Traceback (most recent call last)", 1)[1]
    for line in after.splitlines():
        found = _RAISED_IN_PYTHON.match(line.strip())
        if found:
            return found.group(1), found.group(2)
    return None


def _runner_error_names() -> set:
    names, todo = set(), [TrainerError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def describe(exc: BaseException) -> str:
    """The one line an error is reported as: the runner's own message, or ``Type: first line``
    with the innermost frame of the user's code it came from (``at model.py:12 in model_fn``).
    An error raised in Python inside a graph op (the runner's batch readers, a user's
    ``numpy_function``) is reported as that error, not as TensorFlow's wrapper around it."""
    if isinstance(exc, TrainerError):
        return str(exc)
    inner = _raised_in_python(exc)
    if inner is not None and inner[0].rsplit(".", 1)[-1] in _runner_error_names():
        return inner[1]
    where = user_frame(exc)
    if inner is not None:
        return f"{inner[0]}: {inner[1]}" + (f" (at {where})" if where else "")
    line = f"{type(exc).__name__}: {first_line(exc)}" + (f" (at {where})" if where else "")
    if type(exc).__name__ == "UnparsedFlagAccessError":  # absl: a model_fn of a program, taken out of it
        line += ("; the program's flags were never parsed: run the program itself (train-estimator PROGRAM.py "
                 "--flag=...), or pass the value in model.params and read it from params")
    return line


def _to_log_files(message: str) -> None:
    """``message`` as an ERROR record in the run's log files (train.log), not on the console again."""
    record = logging.LogRecord("trainer", logging.ERROR, __file__, 0, message, None, None)
    for handler in logging.getLogger().handlers + logging.getLogger("trainer").handlers:
        if isinstance(handler, logging.FileHandler):
            try:
                handler.handle(record)
                handler.flush()
            # broad: a log file that fails must not hide the error being reported
            except Exception:
                pass


def fail(message: str, code: int):
    """Print ``error: message`` on stderr (and into the run's log file) and exit with ``code``."""
    _to_log_files(f"error: {message}")
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def exit_on_error(fn):
    """``fn()``, with any error turned into one ``error:`` line and its exit status (1 for errors
    that are not the runner's). ``HYDRA_FULL_ERROR=1`` lets the traceback through."""
    try:
        return fn()
    except TrainerError as e:
        if full_errors():
            raise
        fail(str(e), e.exit_code)
    # broad: the command's last resort: any error is one line and exit 1 (HYDRA_FULL_ERROR=1: the traceback)
    except Exception as e:
        if full_errors():
            raise
        fail(f"{describe(e)} (HYDRA_FULL_ERROR=1 shows the traceback)", 1)


def flush_logs() -> None:
    """What the log handlers and std streams hold reaches its files (before ``os._exit``)."""
    for handler in logging.getLogger().handlers + logging.getLogger("trainer").handlers:
        try:
            handler.flush()
        # broad: a log file that fails must not stop the exit
        except Exception:
            pass
    sys.stdout.flush()
    sys.stderr.flush()


def exit_now(code: int = 0) -> None:
    """End the process at once, its logs flushed.

    For a cluster task: TensorFlow cannot stop a started gRPC server (``GrpcServer::Stop`` is
    unimplemented), so ending the process is what closes its port, instead of a server lingering
    through the interpreter's teardown.
    """
    flush_logs()
    os._exit(code)
