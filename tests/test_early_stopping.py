"""Early stopping's one mechanism: the rules over evaluations (patience in evaluations for the runner's
hook, in steps for tf.estimator.experimental's, with Estimator's treatment of min_steps), and the
hook that reads an eval dir's event files and stops a real session."""

import pytest
import tensorflow as tf

from trainer.estimator import experimental
from trainer.hooks.early_stopping import (EvalDirStoppingHook, no_improvement_for_evaluations,
                                          no_improvement_for_steps, threshold_reached)

tf1 = tf.compat.v1


def _losses(**by_step):
    return {int(step[1:]): {"loss": value, "accuracy": 1 - value} for step, value in by_step.items()}


def test_patience_counts_evaluations_without_improvement_by_min_delta():
    rule = no_improvement_for_evaluations("loss", "min", patience=2)
    assert rule(_losses(s1=1.0, s2=0.9, s3=0.95)) is None
    assert rule(_losses(s1=1.0, s2=0.9, s3=0.95, s4=0.91)) == "eval loss has not improved on 0.9000 for 2 evaluations"
    assert rule(_losses(s1=1.0, s2=0.9, s3=0.95, s4=0.8, s5=0.85)) is None  # an improvement starts the count again
    small = no_improvement_for_evaluations("accuracy", "max", patience=1, min_delta=0.05)
    assert small(_losses(s1=0.5, s2=0.48)) is not None  # accuracy 0.52 after 0.5: less than min_delta better


def test_steps_without_improvement_as_estimator_counts_them():
    rule = no_improvement_for_steps("loss", lambda v, best: v < best, max_steps_without=20)
    assert rule(_losses(s0=1.0, s10=0.9, s20=0.95)) is None
    assert rule(_losses(s0=1.0, s10=0.9, s20=0.95, s30=0.97)) == \
        "eval loss has not improved on 0.9000 (step 10) for 20 steps"


def test_evaluations_before_min_steps_do_not_count():
    """Estimator skipped them: a best value before min_steps never stops training after it."""
    rule = no_improvement_for_steps("loss", lambda v, best: v < best, max_steps_without=15, min_steps=20)
    assert rule(_losses(s10=0.1, s20=0.5, s30=0.4)) is None
    assert rule(_losses(s10=0.1, s20=0.5, s30=0.6, s40=0.7)) is not None


def test_thresholds_and_a_missing_metric():
    higher = threshold_reached("accuracy", lambda v: v > 0.8, min_steps=10)
    assert higher(_losses(s5=0.1, s10=0.3)) is None  # 0.9 at step 5 is before min_steps
    assert higher(_losses(s5=0.1, s10=0.3, s20=0.15)) == "eval accuracy is 0.8500 at step 20, past its threshold"
    with pytest.raises(ValueError, match=r"metric_name='acc': the evaluation at step 5 has no such metric; use one "
                                         r"of \['accuracy', 'loss'\]"):
        threshold_reached("acc", lambda v: v > 0.8)(_losses(s5=0.1))


def _write_evaluations(eval_dir, evaluations):
    with tf.Graph().as_default():
        writer = tf1.summary.FileWriter(str(eval_dir))
        for step, metrics in evaluations.items():
            values = [tf1.Summary.Value(tag=k, simple_value=v) for k, v in metrics.items()]
            writer.add_summary(tf1.Summary(value=values), step)
        writer.close()


class _FakeEstimator:
    def __init__(self, model_dir):
        self.model_dir = str(model_dir)


def test_estimators_hook_stops_a_session_from_the_eval_dir(tmp_path):
    """stop_if_no_decrease_hook reads <model_dir>/eval every run_every_steps and stops at the next step."""
    _write_evaluations(tmp_path / "eval", _losses(s0=1.0, s10=0.9, s20=0.95, s30=0.97))
    hook = experimental.stop_if_no_decrease_hook(_FakeEstimator(tmp_path), "loss", 20, run_every_steps=3)
    assert isinstance(hook, EvalDirStoppingHook)
    with tf.Graph().as_default():
        step = tf1.train.get_or_create_global_step()
        increment = tf1.assign_add(step, 1)
        with tf1.train.MonitoredSession(hooks=[hook]) as sess:
            runs = 0
            while not sess.should_stop() and runs < 50:
                sess.run(increment)
                runs += 1
    assert runs == 1  # the timer fires at the first step; the evaluations already ask for the stop
    never = experimental.stop_if_lower_hook(_FakeEstimator(tmp_path), "loss", 0.5, run_every_steps=2)
    with tf.Graph().as_default():
        increment = tf1.assign_add(tf1.train.get_or_create_global_step(), 1)
        with tf1.train.MonitoredSession(hooks=[never]) as sess:
            for _ in range(6):
                sess.run(increment)
            assert not sess.should_stop()
