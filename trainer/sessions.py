"""One session interface, two implementations: a plain ``tf.compat.v1.Session`` loop and
``MonitoredTrainingSession``.

Both are context managers yielding an object with ``run(fetches)`` and
``should_stop()``; the training loop is written once against it. The plain
backend does by hand what MonitoredTrainingSession's wrappers do: it initialises
or restores variables from the Scaffold, starts queue runners under a
Coordinator, and drives the SessionRunHook protocol in the same order with the
same SessionRunArgs / SessionRunValues (as ``_HookedSession`` does).

Hooks are passed in two lists: ``hooks`` (every worker) and ``chief_hooks`` (only
the chief); both backends run chief hooks first, as MonitoredTrainingSession does.
"""

import logging
import time
from typing import List, Optional

import tensorflow as tf

from trainer.errors import RecoveryLimitError

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def open_session(kind: str, scaffold, hooks: List, chief_hooks: List, checkpoint_dir: Optional[str],
                 config, is_chief: bool = True, master: str = "", stop_grace_period_secs: int = 120,
                 max_recoveries: Optional[int] = None, recovery_wait_secs: float = 0.0, global_step=None,
                 max_wait_secs: float = 30 * 60, ready_poll_secs: float = 30.0):
    """A session context manager of ``session.kind``: ``plain`` or ``monitored``.

    ``monitored`` is what ``MonitoredTrainingSession`` builds (a Chief or Worker session
    creator from the Scaffold inside a MonitoredSession), with the runner's own checkpoint,
    summary and step-counter hooks in place of its defaults, and a creator that bounds the
    recoveries of ``_RecoverableSession`` (it retries session errors forever otherwise).
    A non-chief waits up to ``max_wait_secs`` for the chief to initialise the model, checking
    every ``ready_poll_secs``.
    """
    if kind == "monitored":
        if is_chief:
            creator = tf1.train.ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                                    checkpoint_dir=checkpoint_dir)
        else:
            creator = PollingWorkerSessionCreator(scaffold, master, config, max_wait_secs, ready_poll_secs)
        creator = BoundedRecoveryCreator(creator, max_recoveries, recovery_wait_secs, global_step)
        all_hooks = (list(chief_hooks) if is_chief else []) + list(hooks)
        return tf1.train.MonitoredSession(session_creator=creator, hooks=all_hooks,
                                          stop_grace_period_secs=stop_grace_period_secs)
    if kind == "plain":
        ordered = (list(chief_hooks) if is_chief else []) + list(hooks)
        return PlainSession(scaffold, ordered, checkpoint_dir, config, master, stop_grace_period_secs)
    raise NotImplementedError(f"session.kind={kind!r}; use plain or monitored")


class PollingWorkerSessionCreator(tf1.train.WorkerSessionCreator):
    """A WorkerSessionCreator that checks for the chief's initialisation every ``ready_poll_secs``
    (TensorFlow's SessionManager sleeps 30 s between checks)."""

    def __init__(self, scaffold, master: str, config, max_wait_secs: float, ready_poll_secs: float):
        super().__init__(scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs)
        self._ready_poll_secs = ready_poll_secs

    def _get_session_manager(self):
        if not self._session_manager:
            scaffold = self._scaffold
            self._session_manager = tf1.train.SessionManager(
                local_init_op=scaffold.local_init_op, local_init_feed_dict=scaffold.local_init_feed_dict,
                ready_op=scaffold.ready_op, ready_for_local_init_op=scaffold.ready_for_local_init_op,
                graph=tf1.get_default_graph(), recovery_wait_secs=self._ready_poll_secs,
            )
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


def _merge_run_options(options, incoming):
    """Merge a hook's RunOptions into ``options`` as MonitoredSession does."""
    options.trace_level = max(options.trace_level, incoming.trace_level)
    if incoming.timeout_in_ms:
        options.timeout_in_ms = min(options.timeout_in_ms or incoming.timeout_in_ms, incoming.timeout_in_ms)
    options.output_partition_graphs |= incoming.output_partition_graphs
    options.debug_options.debug_tensor_watch_opts.extend(incoming.debug_options.debug_tensor_watch_opts)
    options.debug_options.reset_disk_byte_usage |= incoming.debug_options.reset_disk_byte_usage
    options.report_tensor_allocations_upon_oom |= incoming.report_tensor_allocations_upon_oom


class PlainSession:
    """A ``tf.compat.v1.Session`` with the chores MonitoredTrainingSession would do, done here."""

    def __init__(self, scaffold, hooks: List, checkpoint_dir: Optional[str], config, master: str = "",
                 stop_grace_period_secs: int = 120):
        self._hooks = hooks
        self._grace = stop_grace_period_secs
        for hook in hooks:
            hook.begin()
        scaffold.finalize()
        self._sess = tf1.Session(master, config=config)
        try:
            self._initialize(scaffold, checkpoint_dir)
            self._coord = tf1.train.Coordinator()
            self._threads = tf1.train.start_queue_runners(self._sess, self._coord)
            for hook in hooks:
                hook.after_create_session(self._sess, self._coord)
        except BaseException:
            self._sess.close()
            raise
        self._stop_requested = False

    def _initialize(self, scaffold, checkpoint_dir):
        ckpt = tf.train.latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
        if ckpt:
            scaffold.saver.restore(self._sess, ckpt)
        else:
            self._sess.run(scaffold.init_op, feed_dict=scaffold.init_feed_dict)
            if scaffold.init_fn is not None:
                scaffold.init_fn(self._sess)
        if scaffold.local_init_op is not None:
            self._sess.run(scaffold.local_init_op, feed_dict=scaffold.local_init_feed_dict)
        not_ready = self._sess.run(scaffold.ready_op)
        if not_ready is not None and len(not_ready):
            names = ", ".join(n.decode() if isinstance(n, bytes) else str(n) for n in not_ready[:5])
            raise RuntimeError(f"Init operations did not make model ready: variables not initialized: {names}")

    @property
    def raw_session(self):
        return self._sess

    def should_stop(self) -> bool:
        return self._stop_requested or self._coord.should_stop()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        original = tf1.train.SessionRunArgs(fetches, feed_dict, options)
        context = tf1.train.SessionRunContext(original, self._sess)
        options = options or tf1.RunOptions()
        feeds = dict(feed_dict or {})
        hook_fetches = {}
        for index, hook in enumerate(self._hooks):
            args = hook.before_run(context)
            if args is None:
                continue
            if args.fetches is not None:
                hook_fetches[index] = args.fetches
            if args.feed_dict:
                clash = set(feeds) & set(args.feed_dict)
                if clash:
                    raise RuntimeError(f"the same tensor is fed by two hooks or by a hook and the caller: {clash}")
                feeds.update(args.feed_dict)
            if args.options:
                _merge_run_options(options, args.options)
        run_metadata = run_metadata or tf1.RunMetadata()
        results = self._sess.run(
            {"caller": fetches, "hooks": hook_fetches}, feed_dict=feeds or None, options=options, run_metadata=run_metadata
        )
        for index, hook in enumerate(self._hooks):
            hook.after_run(
                context, tf1.train.SessionRunValues(results=results["hooks"].get(index), options=options, run_metadata=run_metadata)
            )
        self._stop_requested = self._stop_requested or context.stop_requested
        return results["caller"]

    def close(self, run_end_hooks: bool = True):
        try:
            if run_end_hooks:
                for hook in self._hooks:
                    hook.end(self._sess)
        finally:
            self._coord.request_stop()
            try:
                self._coord.join(self._threads, stop_grace_period_secs=self._grace)
            finally:
                self._sess.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # As MonitoredSession: the end of the input (OutOfRangeError) is a normal stop,
        # and hooks' end() runs only on a normal stop.
        normal = exc_type is None or issubclass(exc_type, (tf.errors.OutOfRangeError, StopIteration))
        self.close(run_end_hooks=normal)
        return normal and exc_type is not None
