"""The plain backend: a ``tf.compat.v1.Session`` with the chores MonitoredTrainingSession would do.

It is built the way MonitoredSession is, point by point:

- TensorFlow's ``SessionManager`` creates the session: restore the latest checkpoint (and
  ``recover_last_checkpoints``, so ``checkpoint.keep`` still rotates after a resume) or run
  the Scaffold's init op and init_fn, then ``ready_for_local_init_op``, ``local_init_op`` and
  ``ready_op``, as ``ChiefSessionCreator`` does;
- as ``_CoordinatedSessionCreator``: a Coordinator that suppresses no exception, queue
  runners started under it, then every hook's ``after_create_session`` (and, should one raise,
  the threads are stopped and the session closed);
- as ``_HookedSession``: hooks' ``before_run`` requests merged into one ``Session.run`` (feeds
  that clash are refused, RunOptions merged taking the larger numbers), ``after_run`` with
  the hook's results, ``run()`` refused once a stop was requested;
- as ``_CoordinatedSession``: ``should_stop()`` re-raises an exception a thread reported to
  the Coordinator, and an error of ``run()`` is replaced by that root cause when there is one;
- as ``_RecoverableSession``: an ``AbortedError`` or ``UnavailableError`` (a preempted ps or
  worker, a gRPC failure) during a step or the session's creation closes the session without
  the hooks' ``end()`` and creates a new one, restored from the latest checkpoint, whose hooks'
  ``after_create_session`` run again; the recoveries are bounded by ``session.max_recoveries``
  and paced by ``session.recovery_wait_secs`` as in the monitored backend;
- as ``_MonitoredSession.close``: hooks' ``end()`` only on a normal stop (the end of the
  input counts as one), then the threads get ``stop_grace_period_secs`` and the session closes.
"""

import logging
from typing import List, Optional

import tensorflow as tf

from trainer.session.monitored import BoundedRecoveryCreator, session_manager

tf1 = tf.compat.v1
log = logging.getLogger("trainer")

# Errors MonitoredSession lets through as they are (the ones it recovers from).
PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)


def merge_run_options(options, incoming) -> None:
    """Merge a hook's RunOptions into ``options`` as ``_HookedSession`` does: numbers take the
    larger value, flags are or-ed, debug watches are appended."""
    options.trace_level = max(options.trace_level, incoming.trace_level)
    options.timeout_in_ms = max(options.timeout_in_ms, incoming.timeout_in_ms)
    options.inter_op_thread_pool = max(options.inter_op_thread_pool, incoming.inter_op_thread_pool)
    options.output_partition_graphs = options.output_partition_graphs or incoming.output_partition_graphs
    options.debug_options.debug_tensor_watch_opts.extend(incoming.debug_options.debug_tensor_watch_opts)
    options.debug_options.reset_disk_byte_usage |= incoming.debug_options.reset_disk_byte_usage
    options.report_tensor_allocations_upon_oom |= incoming.report_tensor_allocations_upon_oom


def _log_preemption(error) -> None:
    log.warning("%s: the session will be closed and a new one created (a preempted ps or worker, or a gRPC "
                "failure): %s", type(error).__name__, str(error).splitlines()[0] if str(error) else "")


def _refuse_clash(feeds, more, message: str) -> None:
    clash = set(feeds) & set(more)
    if clash:
        raise RuntimeError(f"{message} Conflict(s): {list(clash)}")


class _ChiefCreator(tf1.train.SessionCreator):
    """``ChiefSessionCreator``'s work: restore the latest checkpoint of ``checkpoint_dir``, or initialise."""

    def __init__(self, scaffold, checkpoint_dir: Optional[str], config, master: str):
        self._scaffold, self._dir, self._config, self._master = scaffold, checkpoint_dir, config, master
        self._manager = session_manager(scaffold)

    def create_session(self):
        s = self._scaffold
        return self._manager.prepare_session(self._master, saver=s.saver, checkpoint_dir=self._dir, config=self._config,
                                             init_op=s.init_op, init_feed_dict=s.init_feed_dict, init_fn=s.init_fn)


class PlainSession:
    """A session context manager with ``run(fetches)`` and ``should_stop()``, hooks run in order."""

    def __init__(self, scaffold, hooks: List, checkpoint_dir: Optional[str], config, master: str = "",
                 stop_grace_period_secs: int = 120, max_recoveries: Optional[int] = None,
                 recovery_wait_secs: float = 0.0, global_step=None):
        self._hooks = hooks
        self._grace = stop_grace_period_secs
        self._stop_requested = False
        for hook in hooks:
            hook.begin()
        scaffold.finalize()
        self._creator = BoundedRecoveryCreator(_ChiefCreator(scaffold, checkpoint_dir, config, master),
                                               max_recoveries, recovery_wait_secs, global_step)
        self._sess = self._coord = None
        self._open()

    def _open(self) -> None:
        """Create the session (again, after a preemption error), start its threads, run the hooks'
        ``after_create_session``; a preemption error meanwhile starts over."""
        while True:
            self._sess = None
            try:
                self._sess = self._creator.create_session()
                self._coord = tf1.train.Coordinator(clean_stop_exception_types=[])
                if tf1.get_collection(tf1.GraphKeys.QUEUE_RUNNERS):
                    tf1.train.start_queue_runners(sess=self._sess, coord=self._coord)
                for hook in self._hooks:
                    hook.after_create_session(self._sess, self._coord)
                return
            except PREEMPTION_ERRORS as e:
                _log_preemption(e)
                if self._sess is not None:
                    try:
                        self._close_session()
                    # broad: closing a session that failed must not hide the preemption being handled
                    except Exception:
                        pass
            # broad: whatever failed the creation (Ctrl-C included), the half-made session is closed; re-raised
            except BaseException:
                if self._sess is not None:
                    self._close_session()
                raise

    @property
    def raw_session(self):
        return self._sess

    def should_stop(self) -> bool:
        self._coord.raise_requested_exception()
        return self._coord.should_stop() or self._stop_requested

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """``Session.run`` with every hook's requests; the caller's fetches come back. A preemption
        error recovers (a new session) and runs the step again."""
        if self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        while True:
            try:
                return self._coordinated_run(fetches, feed_dict, options, run_metadata)
            except PREEMPTION_ERRORS as e:
                _log_preemption(e)
                try:
                    self._close_session()
                except Exception:  # the failed session's threads report the same error: it is being handled
                    pass
                self._open()

    def _coordinated_run(self, fetches, feed_dict, options, run_metadata):
        try:
            return self._hooked_run(fetches, feed_dict, options, run_metadata)
        except PREEMPTION_ERRORS:
            raise
        # broad: any error of a step: a thread's error the Coordinator holds is the root cause
        except Exception as original:
            # A thread's error reported to the Coordinator is the root cause: raise that instead.
            try:
                self._coord.raise_requested_exception()
            except PREEMPTION_ERRORS:
                raise
            # broad: the Coordinator's error, if any, is the root cause; else the step's own
            except Exception:
                raise original from None
            raise

    def _hooked_run(self, fetches, feed_dict, options, run_metadata):
        context = tf1.train.SessionRunContext(tf1.train.SessionRunArgs(fetches, feed_dict), self._sess)
        options = options or tf1.RunOptions()
        run_metadata = run_metadata or tf1.RunMetadata()
        hook_fetches, hook_feeds = {}, {}
        for index, hook in enumerate(self._hooks):
            request = hook.before_run(context)
            if request is None:
                continue
            if request.fetches is not None:
                hook_fetches[index] = request.fetches
            if request.feed_dict:
                _refuse_clash(hook_feeds, request.feed_dict, "Same tensor is fed by two hooks.")
                hook_feeds.update(request.feed_dict)
            if request.options:
                merge_run_options(options, request.options)
        if feed_dict and hook_feeds:
            _refuse_clash(feed_dict, hook_feeds, "Same tensor is fed by a SessionRunHook and user.")
        feeds = {**hook_feeds, **(feed_dict or {})}
        results = self._sess.run({"caller": fetches, "hooks": hook_fetches}, feed_dict=feeds or None,
                                 options=options, run_metadata=run_metadata)
        for index, hook in enumerate(self._hooks):
            values = tf1.train.SessionRunValues(results=results["hooks"].get(index), options=options,
                                                run_metadata=run_metadata)
            hook.after_run(context, values)
        self._stop_requested = self._stop_requested or context.stop_requested
        return results["caller"]

    def close(self, run_end_hooks: bool = True) -> None:
        try:
            if run_end_hooks:
                for hook in self._hooks:
                    hook.end(self._sess)
        finally:
            self._close_session()

    def _close_session(self) -> None:
        self._coord.request_stop()
        try:
            self._coord.join(stop_grace_period_secs=self._grace, ignore_live_threads=True)
        finally:
            try:
                self._sess.close()
            except Exception:  # as _CoordinatedSession: join() already reported what matters
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # As MonitoredSession: the end of the input (OutOfRangeError) is a normal stop,
        # and hooks' end() runs only on a normal stop.
        normal = exc_type is None or issubclass(exc_type, (tf.errors.OutOfRangeError, StopIteration))
        self.close(run_end_hooks=normal)
        return normal and exc_type is not None
