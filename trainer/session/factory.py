"""One session interface, two implementations: ``open_session`` picks the backend.

Both are context managers yielding an object with ``run(fetches)`` and ``should_stop()``; the
training loop is written once against it. They behave the same, point by point (each point has a
parity test in ``tests/test_sessions.py``):

* Initialization: ``begin()`` of every hook, the Scaffold finalized, then the latest checkpoint of
  the checkpoint dir restored (else the Scaffold's init op and init_fn), local init and readiness
  as ``SessionManager`` checks them, queue runners started, then every hook's
  ``after_create_session``. Hooks come in two lists, ``hooks`` (every task) and ``chief_hooks``
  (only the chief); both backends run the chief's first, as MonitoredTrainingSession does.
* Run: the hooks' ``before_run`` fetches, feeds and RunOptions merged into one ``Session.run``;
  ``after_run`` with each hook's results; a stop requested by a hook ends the loop.
* Recovery: an ``AbortedError`` or ``UnavailableError`` closes the session (no ``end()``) and
  creates a new one from the latest checkpoint, at most ``session.max_recoveries`` times, after
  ``session.recovery_wait_secs`` each.
* Exit: on a normal stop (a hook's request, ``train.max_steps``, the end of the input) every hook's
  ``end()`` runs, then the threads get ``session.stop_grace_period_secs`` and the session closes;
  on an error ``end()`` is skipped and the error raised.

The one intended difference: ``session=plain`` is a single process's backend; a cluster task
(a worker waiting for the chief, ``max_wait_secs``) needs ``session=monitored``, and the config's
checks refuse the other.
"""

from dataclasses import dataclass
from typing import List, Optional

from trainer.session.monitored import monitored_session
from trainer.session.plain import PlainSession


@dataclass(frozen=True)
class SessionOptions:
    """How to create the session, beyond the Scaffold, hooks and checkpoint dir."""

    is_chief: bool = True
    # a non-chief that initialises its own variables (distributed.strategy=collective: each worker
    # holds them) instead of waiting for the chief's
    initializes: bool = False
    master: str = ""  # a cluster task's own server; "" for an in-process session
    stop_grace_period_secs: int = 120  # queue-runner threads' time to stop when the session closes
    max_recoveries: Optional[int] = None  # monitored: session re-creations after session errors
    recovery_wait_secs: float = 0.0  # monitored: the pause before each recovery
    global_step: object = None  # monitored: logged after a recovery
    max_wait_secs: float = 30 * 60  # a non-chief's wait for the chief to initialise the model
    ready_poll_secs: float = 30.0  # ... checking every this many seconds


def open_session(kind: str, scaffold, hooks: List, chief_hooks: List, checkpoint_dir: Optional[str], config,
                 options: SessionOptions = SessionOptions()):
    """A session context manager of ``session.kind``: ``plain`` or ``monitored``."""
    ordered = (list(chief_hooks) if options.is_chief else []) + list(hooks)
    if kind == "monitored":
        return monitored_session(scaffold, ordered, checkpoint_dir, config, options)
    if kind == "plain":
        return PlainSession(scaffold, ordered, checkpoint_dir, config, options.master, options.stop_grace_period_secs,
                            options.max_recoveries, options.recovery_wait_secs, options.global_step)
    raise NotImplementedError(f"session.kind={kind!r}; use plain or monitored")
