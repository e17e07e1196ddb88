"""A user's own hooks, outside the trainer package, given to the runner by ``_target_``."""

import json

import tensorflow as tf

tf1 = tf.compat.v1


class LossRecorder(tf1.train.SessionRunHook):
    """Appends ``{"step", "loss"}`` for every training step to a JSON-lines file."""

    def __init__(self, path: str):
        self.path = path

    def begin(self):
        self._loss = tf1.get_default_graph().get_tensor_by_name("loss:0")
        self._step = tf1.train.get_global_step()

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs({"loss": self._loss, "step": self._step})

    def after_run(self, run_context, run_values):
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": int(run_values.results["step"]), "loss": float(run_values.results["loss"])}) + "\n")


class CountingHook(tf1.train.SessionRunHook):
    """Counts each lifecycle call into a JSON file written at end()."""

    def __init__(self, path: str):
        self.path = path
        self.calls = {"begin": 0, "after_create_session": 0, "before_run": 0, "after_run": 0, "end": 0}

    def begin(self):
        self.calls["begin"] += 1

    def after_create_session(self, session, coord):
        self.calls["after_create_session"] += 1

    def before_run(self, run_context):
        self.calls["before_run"] += 1

    def after_run(self, run_context, run_values):
        self.calls["after_run"] += 1

    def end(self, session):
        self.calls["end"] += 1
        with open(self.path, "w") as f:
            json.dump(self.calls, f)


class FailAt(tf1.train.SessionRunHook):
    """Raises ``error()`` after the step that reaches ``step`` (a RuntimeError by default)."""

    def __init__(self, step: int):
        self.step = step

    def error(self):
        return RuntimeError(f"planted failure at step {self.step}")

    def begin(self):
        self._global_step = tf1.train.get_global_step()

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        if run_values.results + 1 >= self.step:
            raise self.error()


class AbortFrom(FailAt):
    """Raises AbortedError (a session error MonitoredSession recovers from) from ``step`` on."""

    def error(self):
        return tf.errors.AbortedError(None, None, "planted session error")


class SlowSteps(tf1.train.SessionRunHook):
    """Sleeps after every step, so that a test can signal a run in the middle of it."""

    def __init__(self, secs: float):
        self.secs = secs

    def after_run(self, run_context, run_values):
        import time

        time.sleep(self.secs)


class HangingStep(tf1.train.SessionRunHook):
    """Makes the step at ``step`` hang inside ``Session.run`` (an op that sleeps for ``secs``), as a
    huge batch or an input that never answers does."""

    def __init__(self, step: int, secs: float = 600.0):
        self.step, self.secs = step, secs

    def begin(self):
        import time

        def sleep_at(step):
            if int(step) == self.step:
                time.sleep(self.secs)
            return step

        self._op = tf.py_function(sleep_at, [tf1.train.get_global_step()], tf.int64)

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._op)


class AbortOnceHook(tf.compat.v1.train.SessionRunHook):
    """Raises one AbortedError at the 7th step of its process, as a preempted parameter server does."""

    def __init__(self):
        self._steps = 0

    def before_run(self, run_context):
        self._steps += 1
        if self._steps == 7:
            raise tf.errors.AbortedError(None, None, "a parameter server was preempted")


class SlowSave(tf.compat.v1.train.CheckpointSaverListener):
    """Marks (a file) and sleeps in each save after the first, so that a test can signal a run while
    a checkpoint is being written."""

    def __init__(self, marker: str, secs: float):
        self.marker, self.secs = marker, secs

    def before_save(self, session, global_step_value):
        import time

        if global_step_value:
            open(self.marker, "w").close()
            time.sleep(self.secs)
