"""TensorFlow's standard SessionRunHooks, built from config with tensors given by name.

Each factory is a ``_target_`` for a ``hooks`` entry (see ``conf/hook/``). It runs
inside the built graph, so a tensor name that does not exist is a ConfigError
before the session starts. Names: ``loss`` (training loss), ``accuracy``
(training-batch accuracy, for classifiers), ``global_step``, or any tensor or op
name in the graph (``dense/BiasAdd:0``, ``dense/BiasAdd``).
"""

import logging
from typing import Dict, List, Optional, Union

import tensorflow as tf

from trainer.config.targets import load_callable
from trainer.hooks.assembly import make_listeners
from trainer.model.names import TRAIN_SUMMARY_COLLECTION, tensor

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def _tensor_map(tensors: Union[List[str], Dict[str, str], str]) -> Dict[str, object]:
    if isinstance(tensors, str):
        tensors = [tensors]
    if isinstance(tensors, dict):
        return {label: tensor(name) for label, name in tensors.items()}
    return {name: tensor(name) for name in tensors}


def logging_tensor(tensors=None, every_n_iter: Optional[int] = None, every_n_secs: Optional[float] = None, at_end: bool = False):
    """LoggingTensorHook: log the named tensors every N steps or seconds, or at the end (TensorFlow's
    log goes to the run's console and train.log). ``tensors``: names, or {label: name}; None: loss
    and accuracy."""
    return tf1.train.LoggingTensorHook(_tensor_map(["loss", "accuracy"] if tensors is None else tensors), every_n_iter=every_n_iter, every_n_secs=every_n_secs, at_end=at_end)


def nan_tensor(loss: str = "loss", fail_on_nan_loss: bool = True):
    """NanTensorHook: stop (or raise) when the named loss is NaN."""
    return tf1.train.NanTensorHook(tensor(loss), fail_on_nan_loss=fail_on_nan_loss)


def stop_at_step(num_steps: Optional[int] = None, last_step: Optional[int] = None):
    """StopAtStepHook. ``num_steps`` counts from each (re)start; ``last_step`` is absolute."""
    return tf1.train.StopAtStepHook(num_steps=num_steps, last_step=last_step)


def summary_saver(output_dir: str, save_steps: Optional[int] = None, save_secs: Optional[float] = None):
    """SummarySaverHook over the model's training summaries, or the training loss when it has none
    (evaluation summaries would pull the eval input)."""
    found = tf1.get_collection(TRAIN_SUMMARY_COLLECTION)
    summary_op = found[0] if found else tf1.summary.scalar("loss", tensor("loss"))
    return tf1.train.SummarySaverHook(save_steps=save_steps, save_secs=save_secs, output_dir=output_dir, summary_op=summary_op)


def checkpoint_saver(checkpoint_dir: str, save_steps: Optional[int] = None, save_secs: Optional[float] = None,
                     checkpoint_basename: str = "model.ckpt", listeners: Optional[Dict] = None):
    """CheckpointSaverHook with the graph's Saver and CheckpointSaverListeners given by ``_target_``."""
    saver = tf1.get_collection(tf1.GraphKeys.SAVERS)[0]
    return tf1.train.CheckpointSaverHook(checkpoint_dir, save_secs=save_secs, save_steps=save_steps, saver=saver,
                                         checkpoint_basename=checkpoint_basename, listeners=make_listeners(listeners))


def profiler(output_dir: str, save_steps: Optional[int] = None, save_secs: Optional[float] = None,
             show_dataflow: bool = True, show_memory: bool = False):
    """ProfilerHook: a Chrome-trace timeline ``timeline-STEP.json`` in ``output_dir`` every N steps."""
    return tf1.train.ProfilerHook(save_steps=save_steps, save_secs=save_secs, output_dir=output_dir,
                                  show_dataflow=show_dataflow, show_memory=show_memory)


class FinalOpsHook(tf1.train.FinalOpsHook):
    def end(self, session):
        super().end(session)
        values = self.final_ops_values
        if isinstance(values, dict):
            values = {k: getattr(v, "tolist", lambda: v)() for k, v in values.items()}
        log.info("final ops: %s", values)


def final_ops(ops):
    """FinalOpsHook: evaluate the named tensors once at the end and log them."""
    return FinalOpsHook(_tensor_map(ops))


def global_step_waiter(wait_until_step: int):
    """GlobalStepWaiterHook: this worker waits until the global step reaches ``wait_until_step``."""
    return tf1.train.GlobalStepWaiterHook(wait_until_step)


def feed_fn(fn: str):
    """FeedFnHook: ``fn`` (a dotted path) returns ``{tensor_name: value}`` to feed every step."""
    user_fn = load_callable(fn, "fn")
    graph = tf1.get_default_graph()

    def feeds():
        with graph.as_default():
            return {tensor(name): value for name, value in user_fn().items()}

    return tf1.train.FeedFnHook(feeds)


class LogCheckpointListener(tf1.train.CheckpointSaverListener):
    """Logs every checkpoint save with its step and path."""

    def after_save(self, session, global_step_value):
        log.info("saved checkpoint at step %d", global_step_value)
