"""The runner's errors and the exit status each maps to at the command line.

Inside the task function errors are raised, never turned into ``sys.exit``:
a Hydra multirun runs every job in one process and a SystemExit would end the
whole sweep. Only the single-run CLI boundary (``trainer.cli``) maps them.
"""


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


class RecoveryLimitError(TrainingError):
    """The session failed again after ``session.max_recoveries`` recoveries."""


class ClusterError(TrainerError):
    """A cluster task is unreachable or stopped making progress, or a task of a local cluster failed."""

    exit_code = 5


class PortInUseError(ClusterError):
    """This task's port is taken by another process (``distributed=local`` picks other ports)."""

    exit_code = 6
