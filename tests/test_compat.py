"""Each private internal in ``trainer.compat`` against the installed TensorFlow, tf_keras and Hydra:
an upgrade that moves or changes one fails here, by name."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import compat

tf1 = tf.compat.v1


def test_add_control_inputs_orders_an_existing_op():
    with tf.Graph().as_default():
        v = tf1.get_variable("v", initializer=1.0, use_resource=True)
        read = tf.identity(v.read_value(), name="read")
        update = tf1.assign_add(v, 1.0, name="update")
        compat.add_control_inputs(update.op, [read.op])
        assert read.op in update.op.control_inputs
        with tf1.Session() as sess:
            sess.run(v.initializer)
            assert sess.run([read, update]) == [1.0, 2.0]  # the read ran first


@pytest.mark.parametrize("make, expected", [
    (lambda: tf1.train.GradientDescentOptimizer(0.25), 0.25),
    (lambda: tf1.train.AdamOptimizer(0.125), 0.125),
    (lambda: tf1.train.MomentumOptimizer(0.5, momentum=0.9), 0.5),
    (lambda: tf1.train.RMSPropOptimizer(0.75), 0.75),
])
def test_optimizer_learning_rate_is_the_constructor_argument(make, expected):
    with tf.Graph().as_default():
        assert compat.optimizer_learning_rate(make()) == expected


def _initial_kernel(seed):
    with tf.Graph().as_default():
        compat.seed_tf_keras(seed)
        x = tf1.placeholder(tf.float32, [None, 3])
        tf1.layers.dense(x, 4, name="d")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            return sess.run(tf1.trainable_variables("d/kernel")[0])


def test_seed_tf_keras_makes_layers_repeatable_and_leaves_the_global_generators_alone():
    import random

    np.random.seed(123)
    random.seed(123)
    np_before, py_before = np.random.get_state()[1].copy(), random.getstate()
    first, again, other = _initial_kernel(7), _initial_kernel(7), _initial_kernel(8)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    np.testing.assert_array_equal(np.random.get_state()[1], np_before)
    assert random.getstate() == py_before


@pytest.mark.slow
@pytest.mark.parametrize("env, enabled", [("0", False), ("1", True)])
def test_onednn_flag_reads_the_environment_tensorflow_imported_with(env, enabled):
    """metrics.json's ``onednn``: off with TF_ENABLE_ONEDNN_OPTS=0, on with =1 (x86 and aarch64 builds
    of TensorFlow ship oneDNN)."""
    code = "import tensorflow; from trainer import compat; print(compat.onednn_enabled())"
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS=env),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(enabled)


def test_determinism_flags():
    assert not compat.op_determinism_enabled()
    tf.config.experimental.enable_op_determinism()
    try:
        assert compat.op_determinism_enabled()
    finally:
        compat.disable_op_determinism()
    assert not compat.op_determinism_enabled()


def test_cache_file_writer_is_what_file_writer_cache_returns(tmp_path):
    made = []

    def make():
        made.append(tf1.summary.FileWriter(str(tmp_path), filename_suffix=".mine"))
        return made[-1]

    with tf.Graph().as_default():
        compat.cache_file_writer(str(tmp_path), make)
        compat.cache_file_writer(str(tmp_path), make)  # already there: not made again
        assert len(made) == 1
        assert tf1.summary.FileWriterCache.get(str(tmp_path)) is made[0]
    tf1.summary.FileWriterCache.clear()
    assert any(name.endswith(".mine") for name in os.listdir(tmp_path))


def test_keep_session_open_leaves_the_monitored_sessions_session_open():
    with tf.Graph().as_default():
        tf1.train.get_or_create_global_step()
        sess = tf1.train.MonitoredSession()
        raw = sess._tf_sess()
        compat.keep_session_open(sess)
        sess.close()
        assert raw.run(tf.constant(3)) == 3  # still usable: close() was not passed on
        tf1.Session.close(raw)


def test_saver_hook_internals(tmp_path):
    class Listener(tf1.train.CheckpointSaverListener):
        saved = []

        def after_save(self, session, global_step_value):
            self.saved.append(global_step_value)

    with tf.Graph().as_default():
        tf1.train.get_or_create_global_step()
        tf1.get_variable("w", [2])
        hook = tf1.train.CheckpointSaverHook(str(tmp_path), save_steps=10, saver=tf1.train.Saver(),
                                             listeners=[Listener()])
        internals = compat.SaverHookInternals(hook)
        assert internals.checkpoint_dir == str(tmp_path)
        assert internals.save_path == os.path.join(str(tmp_path), "model.ckpt")
        assert internals.writes_graph_def is True
        hook.begin()
        assert internals.summary_writer is not None
        assert internals.saver() is hook._saver
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            internals.save(sess, 0)
            internals.mark_triggered(0)
            assert hook._timer.last_triggered_step() == 0
        assert Listener.saved == [0]
        assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-0")
    tf1.summary.FileWriterCache.clear()


def test_meta_graph_def_holds_the_graph_and_saver():
    with tf.Graph().as_default() as graph:
        tf1.get_variable("w", [2])
        saver = tf1.train.Saver()
        meta = compat.meta_graph_def(graph.as_graph_def(), saver.saver_def)
    assert any(node.name == "w" for node in meta.graph_def.node)
    assert meta.saver_def.filename_tensor_name == saver.saver_def.filename_tensor_name
    assert "variables" in meta.collection_def


def test_hydra_callbacks_calls_the_configured_callback(tmp_path):
    from omegaconf import OmegaConf

    mark = tmp_path / "started"
    cfg = OmegaConf.create({"hydra": {"callbacks": {"mine": {"_target_": "tests.test_compat.MarkingCallback",
                                                             "path": str(mark)}}}})
    compat.hydra_callbacks(cfg).on_run_start(config=cfg, config_name="config")
    assert mark.read_text() == "config"


class MarkingCallback:
    def __init__(self, path):
        self.path = path

    def on_run_start(self, config, config_name, **kwargs):
        with open(self.path, "w") as f:
            f.write(config_name)
