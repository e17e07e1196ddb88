"""The checkpoint a mode reads: one given by the user, or the newest intact one of ``checkpoint.dir``."""

import os
from typing import Optional

from trainer.checkpoints.intact import find_intact
from trainer.errors import CheckpointError


def checkpoint_to_read(ckpt_dir: str, explicit: Optional[str]) -> str:
    """``explicit`` (a prefix or a dir), else the newest intact checkpoint of ``ckpt_dir`` (``checkpoint.dir``).

    Raises:
      CheckpointError: there is none.
    """
    if explicit:
        path = os.path.expanduser(explicit)
        if os.path.isdir(path):
            found = find_intact(path)
            path = found.path if found else None
        if not path or not os.path.exists(path + ".index"):
            raise CheckpointError(f"checkpoint {explicit}: not found; give a checkpoint prefix such as DIR/model.ckpt-1000")
        return path
    found = find_intact(ckpt_dir)
    if not found:
        raise CheckpointError(f"checkpoint.dir={ckpt_dir} has no checkpoint; train first or set checkpoint.dir")
    return found.path
