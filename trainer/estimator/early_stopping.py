"""``tf.estimator.experimental``'s early stopping: hooks that stop training from the evaluations in the
model_dir's eval dir, on the runner's one mechanism (``trainer.hooks.early_stopping``); patience is
counted in steps, as Estimator's was."""

import os

from trainer.hooks.early_stopping import EvalDirStoppingHook, no_improvement_for_steps, threshold_reached


def _eval_dir(estimator, eval_dir) -> str:
    return eval_dir or os.path.join(estimator.model_dir, "eval")


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    rule = no_improvement_for_steps(metric_name, lambda v, best: v < best, max_steps_without_decrease, min_steps)
    return EvalDirStoppingHook(_eval_dir(estimator, eval_dir), rule, run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    rule = no_improvement_for_steps(metric_name, lambda v, best: v > best, max_steps_without_increase, min_steps)
    return EvalDirStoppingHook(_eval_dir(estimator, eval_dir), rule, run_every_secs, run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                        run_every_steps=None):
    rule = threshold_reached(metric_name, lambda v: v > threshold, min_steps)
    return EvalDirStoppingHook(_eval_dir(estimator, eval_dir), rule, run_every_secs, run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                       run_every_steps=None):
    rule = threshold_reached(metric_name, lambda v: v < threshold, min_steps)
    return EvalDirStoppingHook(_eval_dir(estimator, eval_dir), rule, run_every_secs, run_every_steps)
