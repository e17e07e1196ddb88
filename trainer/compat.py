"""Every private internal of TensorFlow, tf_keras and Hydra that the runner relies on, each behind one
named function here and nowhere else. No public API does these jobs; ``tests/test_compat.py`` checks
each against the installed versions, so an upgrade that changes one fails there, by name, rather
than somewhere in a training run.

Nothing here imports TensorFlow or Hydra at module level: each function imports what it touches,
so that the command can import this module before TensorFlow is loaded.
"""

from typing import Callable, Optional


# --- TensorFlow graphs -------------------------------------------------------------------------

def add_control_inputs(op, inputs) -> None:
    """Make the existing ``op`` run after ``inputs`` (ops). TF1 graphs only allow control inputs at
    creation; the model_fn built its update ops before the runner's state snapshot existed.

    Raises:
      ValueError, TypeError: ``op`` sits inside a control-flow context.
    """
    op._add_control_inputs(inputs)  # noqa: SLF001


def optimizer_learning_rate(optimizer):
    """A ``tf.compat.v1.train.Optimizer``'s learning rate as given to its constructor (a float, a
    tensor or a callable), or None: ``_learning_rate`` for most, ``_lr`` for Adam."""
    rate = getattr(optimizer, "_learning_rate", None)
    return getattr(optimizer, "_lr", None) if rate is None else rate


def seed_tf_keras(seed: int) -> None:
    """Seed the graph and tf_keras' own generator of initializer seeds (``tf.compat.v1.layers`` draws
    from it, not from the graph seed), leaving Python's and NumPy's global generators alone (which
    ``tf_keras.utils.set_random_seed`` would reseed for the whole process)."""
    import random

    import tensorflow as tf
    from tf_keras.src import backend

    tf.compat.v1.set_random_seed(int(seed))
    backend._SEED_GENERATOR.generator = random.Random(int(seed))  # noqa: SLF001  (per thread)


def meta_graph_def(graph_def, saver_def):
    """The MetaGraphDef of ``graph_def``, ``saver_def`` and the default graph's collections, as
    TensorFlow's CheckpointSaverHook writes it to the events file."""
    from tensorflow.python.framework import meta_graph

    return meta_graph.create_meta_graph_def(graph_def=graph_def, saver_def=saver_def)


# --- TensorFlow's process state ------------------------------------------------------------------

def onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN CPU kernels in this process (``TF_ENABLE_ONEDNN_OPTS`` as
    read at import, and the CPU)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def op_determinism_enabled() -> bool:
    from tensorflow.python.framework import config

    return bool(config.is_op_determinism_enabled())


def disable_op_determinism() -> None:
    """The inverse of the public ``tf.config.experimental.enable_op_determinism``."""
    from tensorflow.python.framework import config

    config.disable_op_determinism()


# --- TensorFlow's session machinery ------------------------------------------------------------

def cache_file_writer(logdir: str, make: Callable) -> None:
    """Put ``make()`` (a ``tf.compat.v1.summary.FileWriter``) in TensorFlow's ``FileWriterCache`` for
    ``logdir`` unless one is there: hooks find their writers there by dir."""
    import tensorflow as tf

    cache = tf.compat.v1.summary.FileWriterCache
    with cache._lock:  # noqa: SLF001
        if logdir not in cache._cache:  # noqa: SLF001
            cache._cache[logdir] = make()  # noqa: SLF001


def keep_session_open(sess) -> None:
    """Make closing ``sess``, a MonitoredSession, leave its underlying ``tf.compat.v1.Session`` open
    (its hooks' ``end()`` still run). Any other session is left as it is."""
    raw = sess._tf_sess() if hasattr(sess, "_tf_sess") else None  # noqa: SLF001
    if raw is not None:
        raw.close = lambda: None


class SaverHookInternals:
    """The private parts of ``tf.compat.v1.train.CheckpointSaverHook`` that the runner's subclass uses."""

    def __init__(self, hook):
        self._hook = hook

    @property
    def checkpoint_dir(self) -> str:
        return self._hook._checkpoint_dir  # noqa: SLF001

    @property
    def save_path(self) -> str:
        return self._hook._save_path  # noqa: SLF001

    @property
    def writes_graph_def(self) -> bool:
        return self._hook._save_graph_def  # noqa: SLF001

    @property
    def summary_writer(self):
        return self._hook._summary_writer  # noqa: SLF001

    def saver(self) -> Optional[object]:
        return self._hook._get_saver()  # noqa: SLF001

    def save(self, session, step: int) -> None:
        """Save (listeners called) without the hook's timer deciding."""
        self._hook._save(session, step)  # noqa: SLF001

    def steps_ahead(self, steps: int) -> None:
        """How far the step fetched before a run may be behind the step after it: TensorFlow's hook
        reads the real step in another run whenever a save could be due within that many steps."""
        self._hook._set_steps_per_run(steps)  # noqa: SLF001

    def mark_triggered(self, step: int) -> None:
        """The next timed save counts from ``step``."""
        self._hook._timer.update_last_triggered_step(step)  # noqa: SLF001


# --- Hydra -----------------------------------------------------------------------------------------

def hydra_callbacks(cfg):
    """Hydra's callbacks object for ``cfg`` (its ``hydra.callbacks``), as ``Hydra.run`` makes it."""
    from hydra._internal.callbacks import Callbacks

    return Callbacks(cfg)


def hydra_run(app, cfg, task_function):
    """``Hydra.run``'s job on a config already composed (``app``: the initialised Hydra): the run
    dir, ``.hydra/`` files, logging and callbacks as ``@hydra.main`` makes them, without composing the
    config again. Returns the task's return value; raises its exception."""
    from hydra.core.utils import configure_log, run_job
    from hydra.types import HydraContext

    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
    callbacks = hydra_callbacks(cfg)
    callbacks.on_run_start(config=cfg, config_name="config")
    ret = run_job(hydra_context=HydraContext(config_loader=app.config_loader, callbacks=callbacks),
                  task_function=task_function, config=cfg, job_dir_key="hydra.run.dir", job_subdir_key=None,
                  configure_logging=True)
    callbacks.on_run_end(config=cfg, config_name="config", job_return=ret)
    return ret.return_value


def saved_name_and_shape(variable):
    """The name and shape a Saver writes ``variable`` under: a part of a partitioned variable (TF 1.x's
    canned models under a ps partitioner, one part even without ps tasks) is saved as its whole, under
    the full name and shape of its ``_save_slice_info`` (private), not under its op name."""
    info = getattr(variable, "_save_slice_info", None)
    if info is not None:
        return info.full_name, list(info.full_shape)
    return variable.op.name, variable.shape.as_list()
