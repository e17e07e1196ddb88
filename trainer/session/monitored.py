"""The monitored backend: ``MonitoredSession`` over the session creators ``MonitoredTrainingSession``
would build, with two changes: a worker polls for the chief's initialisation more often, and
recoveries from session errors are bounded and logged."""

import logging
import time
from typing import List, Optional

import tensorflow as tf

from trainer.errors import RecoveryLimitError

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def session_manager(scaffold, recovery_wait_secs: float = 30.0):
    """TensorFlow's SessionManager over ``scaffold``'s ops, as MonitoredSession's creators make it;
    ``recovery_wait_secs``: a worker's pause between checks that the chief has initialised the model."""
    return tf1.train.SessionManager(
        local_init_op=scaffold.local_init_op, local_init_feed_dict=scaffold.local_init_feed_dict,
        ready_op=scaffold.ready_op, ready_for_local_init_op=scaffold.ready_for_local_init_op,
        graph=tf1.get_default_graph(), recovery_wait_secs=recovery_wait_secs)


class PollingWorkerSessionCreator(tf1.train.WorkerSessionCreator):
    """A WorkerSessionCreator that checks for the chief's initialisation every ``ready_poll_secs``
    (TensorFlow's SessionManager sleeps 30 s between checks)."""

    def __init__(self, scaffold, master: str, config, max_wait_secs: float, ready_poll_secs: float):
        super().__init__(scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs)
        self._ready_poll_secs = ready_poll_secs

    def _get_session_manager(self):
        if not self._session_manager:
            self._session_manager = session_manager(self._scaffold, recovery_wait_secs=self._ready_poll_secs)
        return self._session_manager


class BoundedRecoveryCreator(tf1.train.SessionCreator):
    """Wraps a session creator: each creation after the first is a recovery, logged with its step,
    made after ``wait_secs``, and refused past ``max_recoveries`` (None: no bound)."""

    def __init__(self, inner, max_recoveries: Optional[int], wait_secs: float, global_step=None):
        self._inner, self._max, self._wait = inner, max_recoveries, wait_secs
        self._global_step = global_step
        self.recoveries = 0
        self._created = False

    def create_session(self):
        if self._created:
            self.recoveries += 1
            if self._max is not None and self.recoveries > self._max:
                raise RecoveryLimitError(
                    f"session.max_recoveries={self._max}: the session failed again after {self._max} recoveries; "
                    "see the log for the errors, or raise session.max_recoveries"
                )
            log.warning("recovering the session (%d%s) after an error; waiting %.1fs",
                        self.recoveries, f"/{self._max}" if self._max is not None else "", self._wait)
            time.sleep(self._wait)
        session = self._inner.create_session()
        self._created = True
        if self.recoveries and self._global_step is not None:
            log.warning("recovered: training continues from step %d", session.run(self._global_step))
        return session


def monitored_session(scaffold, hooks: List, checkpoint_dir: Optional[str], config, options):
    """A MonitoredSession as ``MonitoredTrainingSession`` builds it, the runner's hooks in place of its
    defaults. ``options`` is a :class:`trainer.session.factory.SessionOptions`."""
    if options.is_chief or options.initializes:
        creator = tf1.train.ChiefSessionCreator(scaffold=scaffold, master=options.master, config=config,
                                                checkpoint_dir=checkpoint_dir if options.is_chief else None)
    else:
        creator = PollingWorkerSessionCreator(scaffold, options.master, config, options.max_wait_secs,
                                              options.ready_poll_secs)
    creator = BoundedRecoveryCreator(creator, options.max_recoveries, options.recovery_wait_secs,
                                     options.global_step)
    return tf1.train.MonitoredSession(session_creator=creator, hooks=hooks,
                                      stop_grace_period_secs=options.stop_grace_period_secs)
