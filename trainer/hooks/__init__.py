"""SessionRunHooks: the runner's own, the library users pick from config, and the assembly of a run's hooks.

The library's hooks are importable from here, as ``_target_: trainer.hooks.EarlyStoppingHook``.
"""

from trainer.hooks.early_stopping import EarlyStoppingHook
from trainer.hooks.library import BestCheckpointHook, ProgressHook

__all__ = ["BestCheckpointHook", "EarlyStoppingHook", "ProgressHook"]
