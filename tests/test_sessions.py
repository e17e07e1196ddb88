"""The plain backend behaves as MonitoredSession does, point by point, on small graphs."""

import threading

import pytest
import tensorflow as tf

from helpers import ckpt_steps
from trainer import run
from trainer.session.factory import SessionOptions, open_session

tf1 = tf.compat.v1
BACKENDS = ["plain", "monitored"]


def _graph():
    """A counter the "train op" increments, and a global step."""
    graph = tf.Graph()
    with graph.as_default():
        step = tf1.train.get_or_create_global_step()
        counter = tf1.get_variable("counter", [], tf.int64, initializer=tf1.zeros_initializer())
        train_op = tf.group(counter.assign_add(1), step.assign_add(1))
    return graph, train_op


def _open(kind, hooks, checkpoint_dir=None, scaffold=None):
    return open_session(kind, scaffold or tf1.train.Scaffold(), hooks, [], checkpoint_dir, tf1.ConfigProto(),
                        SessionOptions(stop_grace_period_secs=5))


class OptionsHook(tf1.train.SessionRunHook):
    """Asks for a RunOptions timeout and records the options the step ran with."""

    def __init__(self, timeout_ms):
        self.timeout_ms, self.seen = timeout_ms, []

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(None, options=tf1.RunOptions(timeout_in_ms=self.timeout_ms))

    def after_run(self, run_context, run_values):
        self.seen.append(run_values.options.timeout_in_ms)


class StopAfterFirst(tf1.train.SessionRunHook):
    def after_run(self, run_context, run_values):
        run_context.request_stop()


class ReportToCoordinator(tf1.train.SessionRunHook):
    """What a queue-runner thread does when it fails: report the error to the Coordinator."""

    def after_create_session(self, session, coord):
        try:
            raise ValueError("a thread failed")
        except ValueError as e:
            coord.request_stop(e)  # as a QueueRunner thread does with its error


@pytest.mark.parametrize("kind", BACKENDS)
def test_hooks_run_options_merge_taking_the_larger_timeout(kind):
    graph, train_op = _graph()
    short, long = OptionsHook(100), OptionsHook(60_000)
    with graph.as_default(), _open(kind, [short, long]) as sess:
        sess.run(train_op)
    assert short.seen == long.seen == [60_000]


@pytest.mark.parametrize("kind", BACKENDS)
def test_run_after_a_stop_request_is_refused(kind):
    graph, train_op = _graph()
    with graph.as_default(), _open(kind, [StopAfterFirst()]) as sess:
        sess.run(train_op)
        assert sess.should_stop()
        with pytest.raises(RuntimeError, match="Run called even after should_stop requested"):
            sess.run(train_op)


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_error_reported_to_the_coordinator_is_raised_by_should_stop(kind):
    graph, _ = _graph()
    with graph.as_default():
        with pytest.raises(ValueError, match="a thread failed"):
            with _open(kind, [ReportToCoordinator()]) as sess:
                sess.should_stop()


@pytest.mark.parametrize("kind", BACKENDS)
def test_feeds_of_two_hooks_that_clash_are_refused(kind):
    graph = tf.Graph()
    with graph.as_default():
        tf1.train.get_or_create_global_step()
        x = tf1.placeholder_with_default(1.0, [], name="x")
        fetch = x * 2

        class Feed(tf1.train.SessionRunHook):
            def before_run(self, run_context):
                return tf1.train.SessionRunArgs(None, feed_dict={x: 3.0})

        with _open(kind, [Feed(), Feed()]) as sess:
            with pytest.raises(RuntimeError, match="Same tensor is fed by two hooks"):
                sess.run(fetch)


def test_plain_stops_queue_runner_threads_when_a_hook_fails_to_start():
    """MonitoredSession leaves the queue runners of a failed start running; the plain backend stops them."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.train.get_or_create_global_step()
        queue = tf1.FIFOQueue(10, tf.float32, shapes=[[]])
        tf1.train.add_queue_runner(tf1.train.QueueRunner(queue, [queue.enqueue(1.0)]))

        class FailToStart(tf1.train.SessionRunHook):
            def after_create_session(self, session, coord):
                raise RuntimeError("hook failed")

        with pytest.raises(RuntimeError, match="hook failed"):
            _open("plain", [FailToStart()])
    assert not [t for t in threading.enumerate() if t.name.startswith("QueueRunnerThread") and t.is_alive()]


@pytest.mark.parametrize("kind", BACKENDS)
def test_ready_for_local_init_op_is_checked(kind):
    graph, _ = _graph()
    with graph.as_default():
        never_ready = tf.constant(["not ready"], name="never_ready")
        scaffold = tf1.train.Scaffold(ready_for_local_init_op=never_ready)
        with pytest.raises(RuntimeError, match="ready for local_init"):
            _open(kind, [], scaffold=scaffold)


@pytest.mark.slow
@pytest.mark.parametrize("kind", BACKENDS)
def test_checkpoint_keep_still_rotates_after_a_resume(make_cfg, tmp_path, kind):
    run(make_cfg(f"session={kind}", "checkpoint.every_steps=5", "checkpoint.keep=2"), str(tmp_path))
    assert ckpt_steps(tmp_path / "checkpoints") == [15, 20]
    run(make_cfg(f"session={kind}", "checkpoint.every_steps=5", "checkpoint.keep=2", "train.max_steps=30"),
        str(tmp_path))
    # The restored run's Saver knows the older checkpoints (recover_last_checkpoints): they are rotated out.
    assert ckpt_steps(tmp_path / "checkpoints") == [25, 30]


class AbortOnce(tf1.train.SessionRunHook):
    """Raises one AbortedError from the ``times``-th step's before_run (a preempted ps, as gRPC reports it)."""

    def __init__(self, at_step=3, times=1):
        self.at_step, self.times, self.steps, self.created, self.ended = at_step, times, 0, 0, 0

    def after_create_session(self, session, coord):
        self.created += 1

    def before_run(self, run_context):
        self.steps += 1
        if self.steps >= self.at_step and self.times > 0:
            self.times -= 1
            raise tf.errors.AbortedError(None, None, "the ps was preempted")

    def end(self, session):
        self.ended += 1


def _recovering(kind, hooks, checkpoint_dir, max_recoveries):
    return open_session(kind, tf1.train.Scaffold(), hooks, [], checkpoint_dir, tf1.ConfigProto(),
                        SessionOptions(stop_grace_period_secs=5, max_recoveries=max_recoveries, recovery_wait_secs=0))


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_aborted_step_recovers_from_the_latest_checkpoint(kind, tmp_path):
    """Recovery: the session is made again (restored from the checkpoint, hooks' after_create_session
    run again, no end() meanwhile) and the loop goes on."""
    graph, train_op = _graph()
    with graph.as_default():
        step = tf1.train.get_global_step()
        saver_hook = tf1.train.CheckpointSaverHook(str(tmp_path), save_steps=1)
        abort = AbortOnce(at_step=3)
        with _recovering(kind, [saver_hook, abort], str(tmp_path), max_recoveries=2) as sess:
            while not sess.should_stop() and sess.run(step) < 5:
                sess.run(train_op)
        assert (abort.created, abort.ended) == (2, 1)
    assert tf.train.load_variable(str(tmp_path), "global_step") == 5
    assert tf.train.load_variable(str(tmp_path), "counter") == 5  # no step lost or run twice


@pytest.mark.parametrize("kind", BACKENDS)
def test_recoveries_past_the_bound_fail_in_one_line(kind, tmp_path):
    from trainer.errors import RecoveryLimitError

    graph, train_op = _graph()
    with graph.as_default():
        abort = AbortOnce(at_step=1, times=10)
        with pytest.raises(RecoveryLimitError, match="session.max_recoveries=2"):
            with _recovering(kind, [abort], str(tmp_path), max_recoveries=2) as sess:
                while not sess.should_stop():
                    sess.run(train_op)
        assert (abort.created, abort.ended) == (3, 0)  # the first session, two recoveries; no end() on an error


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_train_command_survives_an_aborted_step(make_cfg, tmp_path, kind):
    """The whole run, as a user's hook raising one AbortedError showed the difference: both finish."""
    cfg = make_cfg(f"session={kind}", "+hooks.abort._target_=user_hooks.AbortOnceHook", "session.recovery_wait_secs=0")
    result = run(cfg, str(tmp_path / "run"))
    assert (result["status"], result["global_step"]) == ("finished", 20)
