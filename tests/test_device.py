"""device.precision, device.xla and device.replicas, through the real run() on this machine's CPU."""

import numpy as np
import pytest
import tensorflow as tf

from helpers import read_jsonl, weights
from trainer import run
from trainer.config.rules import prepare
from trainer.errors import ConfigError
from trainer.session import device as device_module
from trainer.session.device import cpu_bf16_flags, cpu_bf16_rewrite_runs, resolve_precision, session_config

tf1 = tf.compat.v1
BF16_RUNS = cpu_bf16_rewrite_runs()
needs_bf16 = pytest.mark.skipif(not BF16_RUNS, reason="TensorFlow's oneDNN bfloat16 rewrite does not run on this CPU")


def _recorded(make_cfg, out, *overrides):
    out.mkdir()
    cfg = make_cfg("device=cpu", "train.deterministic=true",
                   f"+hooks.recorder={{_target_: user_hooks.LossRecorder, path: {out / 'losses.jsonl'}}}", *overrides)
    metrics = run(cfg, str(out))
    return metrics, read_jsonl(out / "losses.jsonl"), weights(str(out / "checkpoints"))


@pytest.mark.slow
@pytest.mark.parametrize("session", ["plain", "monitored"])
def test_two_towers_give_the_loss_and_weights_of_one(make_cfg, tmp_path, session):
    """replicas=2 on two logical CPUs: each tower takes half the batch, the averaged gradient is the
    whole batch's, so every step's loss and the final weights match one tower to float tolerance."""
    one = _recorded(make_cfg, tmp_path / "one", f"session={session}", "model.params.hidden_units=[16,16]")
    two = _recorded(make_cfg, tmp_path / "two", f"session={session}", "model.params.hidden_units=[16,16]",
                    "device.replicas=2")
    (_, one_losses, one_weights), (two_metrics, two_losses, two_weights) = one, two
    assert len(one_losses) == 20 and [r["step"] for r in two_losses] == [r["step"] for r in one_losses]
    np.testing.assert_allclose([r["loss"] for r in two_losses], [r["loss"] for r in one_losses], rtol=1e-5)
    assert one_losses[-1]["loss"] < one_losses[0]["loss"]  # it trained: the comparison is not of constants
    assert two_weights.keys() == one_weights.keys()  # the same checkpoint variables: interchangeable
    for name in one_weights:
        np.testing.assert_allclose(two_weights[name], one_weights[name], rtol=1e-4, atol=1e-6, err_msg=name)
    assert two_metrics["eval_examples"] == 128 and two_metrics["global_step"] == 20


def test_two_towers_place_their_ops_on_two_devices(make_cfg, tmp_path):
    from trainer.model.graph import build_graph, single_process
    from trainer.plan import graph_recipe

    cfg = prepare(make_cfg("device=cpu", "device.replicas=2"), str(tmp_path))
    graph = build_graph(graph_recipe(cfg), None if cfg.data.name == "input_fn" else _arrays(cfg), single_process("cpu", 2))
    devices = {op.device for op in graph.graph.get_operations() if op.type == "MatMul"}
    assert {"/device:CPU:0", "/device:CPU:1"} <= devices
    names = {v.op.name for v in graph.graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)}
    assert not any(n.startswith("tower_") for n in names)  # one set of weights, shared by the towers
    assert {v.op.device for v in graph.graph.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES)} == {"/device:CPU:0"}
    with graph.graph.as_default(), tf1.Session(config=session_config(cfg.device, "cpu")) as sess:
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        sess.run(graph.train_input.initializer, feed_dict=graph.train_input.feeds(0))
        metadata = tf1.RunMetadata()
        sess.run(graph.train_op, options=tf1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    # "MatMul" or, with oneDNN's kernels, its rewrite ("_MklMatMul", "_MklFusedMatMul").
    ran_on = {node.device.rsplit("/", 1)[-1] for g in metadata.partition_graphs for node in g.node if "MatMul" in node.op}
    assert ran_on == {"device:CPU:0", "device:CPU:1"}  # the session has both logical CPUs: nothing fell back


def _arrays(cfg):
    from trainer.data.sources import load_arrays

    return load_arrays(cfg.data)


@pytest.mark.slow
def test_a_run_resumes_with_another_number_of_towers(make_cfg, tmp_path):
    run(make_cfg("device=cpu", "device.replicas=2", "train.max_steps=10"), str(tmp_path))
    metrics = run(make_cfg("device=cpu", "train.max_steps=20"), str(tmp_path))
    assert metrics["start_step"] == 10 and metrics["global_step"] == 20


def test_towers_refuse_a_model_fn_that_makes_its_variables_each_call(make_cfg, tmp_path):
    cfg = make_cfg("model=model_fn", "model.fn=user_models.keras_in_model_fn", "device=cpu", "device.replicas=2")
    with pytest.raises(ConfigError, match=r"device.replicas=2: .*new variables on each call"):
        run(cfg, str(tmp_path))
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("overrides,message", [
    (["device.replicas=3"], r"device.replicas=3: train.batch_size=32 does not divide into 3 equal towers"),
    (["device.replicas=0"], r"device.replicas=0: must be > 0"),
    (["device.replicas=2", "distributed=local"], r"device.replicas=2 with distributed=local: towers inside a cluster"),
    (["device=cpu", "device.precision=fp16"], r"device.precision=fp16: CPUs have no fast float16"),
    (["device=gpu", "device.precision=bf16"], r"device.precision=bf16: .* converts to float16 only"),
])
def test_bad_replicas_are_refused_in_one_line(make_cfg, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message) as e:
        prepare(make_cfg(*overrides), str(tmp_path))
    assert "\n" not in str(e.value)


def test_precision_rewrites_and_refusals(make_cfg):
    cpu = make_cfg("device=cpu", "device.precision=bf16").device
    rewrites = session_config(cpu, "cpu", precision="bf16").graph_options.rewrite_options
    assert rewrites.auto_mixed_precision_onednn_bfloat16 == rewrites.ON
    assert session_config(cpu, "cpu").graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 != rewrites.ON
    gpu = make_cfg("device=gpu", "device.precision=fp16").device
    assert session_config(gpu, "gpu", precision="fp16").graph_options.rewrite_options.auto_mixed_precision == rewrites.ON
    with pytest.raises(ConfigError, match=r"device.precision=fp16: CPUs have no fast float16"):
        resolve_precision(make_cfg("device.precision=fp16").device, "cpu")
    with pytest.raises(ConfigError, match=r"device.precision=bf16: .* GPUs converts to float16 only"):
        resolve_precision(cpu, "gpu")
    auto = resolve_precision(make_cfg("device.precision=auto").device, "cpu")
    assert auto == ("bf16" if cpu_bf16_flags() and BF16_RUNS else "fp32")


def test_bf16_is_refused_where_the_rewrite_does_not_run(make_cfg, tmp_path, monkeypatch):
    """Without AVX-512 grappler skips the rewrite: a run labelled bf16 would be fp32, so it is refused
    (the probe's answer set to what such a CPU gives)."""
    monkeypatch.setitem(device_module._probe, "bf16", False)
    with pytest.raises(ConfigError, match=r"device.precision=bf16: TensorFlow's oneDNN bfloat16 rewrite does not run"):
        run(make_cfg("device=cpu", "device.precision=bf16"), str(tmp_path))
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "metrics.json").exists()


@pytest.mark.slow
@needs_bf16
def test_bf16_trains_keeps_float32_checkpoints_and_resumes_across_precisions(make_cfg, tmp_path):
    model = ["model=mnist", "model.params.dropout_rate=0.0", "data.train_examples=256", "data.test_examples=64",
             "train.batch_size=16", "eval.every_steps=0"]
    bf16 = run(make_cfg(*model, "device=cpu", "device.precision=bf16", "train.max_steps=10"), str(tmp_path))
    assert bf16["precision"] == "bf16" and np.isfinite(bf16["loss"])
    saved = weights(str(tmp_path / "checkpoints"))
    assert {v.dtype for name, v in saved.items() if name != "global_step"} == {np.dtype("float32")}
    fp32 = run(make_cfg(*model, "device=cpu", "train.max_steps=20"), str(tmp_path))
    assert fp32["precision"] == "fp32" and fp32["start_step"] == 10 and fp32["global_step"] == 20


def test_the_bf16_probe_agrees_with_the_runners_own_step(make_cfg, tmp_path):
    """The one-line probe that allows or refuses bf16 gives the answer the CNN's real training step
    gives (bfloat16 kernels in its partition graphs or not), and a CPU with native bfloat16 runs it."""
    from trainer.model.graph import build_graph, single_process
    from trainer.plan import graph_recipe

    cfg = prepare(make_cfg("model=mnist", "device=cpu"), str(tmp_path))
    graph = build_graph(graph_recipe(cfg), _arrays(cfg), single_process("cpu"))
    with graph.graph.as_default(), tf1.Session(config=session_config(cfg.device, "cpu", precision="bf16")) as sess:
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        sess.run(graph.train_input.initializer, feed_dict=graph.train_input.feeds(0))
        metadata = tf1.RunMetadata()
        sess.run(graph.train_op, options=tf1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    dtypes = {node.attr["T"].type for g in metadata.partition_graphs for node in g.node
              if "Conv2D" in node.op or "MatMul" in node.op}
    assert (tf.bfloat16.as_datatype_enum in dtypes) == BF16_RUNS
    if cpu_bf16_flags():
        assert BF16_RUNS, f"this CPU has {cpu_bf16_flags()} but the probe says the bfloat16 rewrite does not run"


def test_fp16_loss_scaling_keeps_checkpoints_float32_and_its_state_local(make_cfg, tmp_path):
    """fp16's dynamic loss scaling (built here on the CPU in fp32, as a GPU run builds it): its state is a
    local variable, so the checkpoint has the same variables as fp32's and restores under any precision."""
    from trainer.model.graph import Placement, build_graph
    from trainer.plan import graph_recipe

    cfg = prepare(make_cfg("device=cpu"), str(tmp_path))
    scaled = build_graph(graph_recipe(cfg), _arrays(cfg), Placement(loss_scale=True))
    plain = build_graph(graph_recipe(cfg), _arrays(cfg), Placement())
    names = lambda g: sorted(v.op.name for v in g.graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES))  # noqa: E731
    assert names(scaled) == names(plain)
    local = [v.op.name for v in scaled.graph.get_collection(tf1.GraphKeys.LOCAL_VARIABLES)]
    assert any("loss_scale" in n or "current_loss_scale" in n for n in local), local
    with scaled.graph.as_default(), tf1.Session() as sess:
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        sess.run(scaled.train_input.initializer, feed_dict=scaled.train_input.feeds(0))
        first = sess.run(scaled.loss)
        for _ in range(30):
            sess.run(scaled.train_op)
        assert sess.run(scaled.global_step) == 30 and sess.run(scaled.loss) < first


@pytest.mark.slow
def test_xla_compiles_the_step_and_a_run_completes(make_cfg, tmp_path):
    from trainer.model.graph import build_graph, single_process
    from trainer.plan import graph_recipe

    cfg = prepare(make_cfg("device=cpu", "device.xla=true"), str(tmp_path / "graph"))
    graph = build_graph(graph_recipe(cfg), _arrays(cfg), single_process("cpu"))
    with graph.graph.as_default(), tf1.Session(config=session_config(cfg.device, "cpu")) as sess:
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        sess.run(graph.train_input.initializer, feed_dict=graph.train_input.feeds(0))
        metadata = tf1.RunMetadata()
        sess.run(graph.train_op, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
    ran = {n.node_name for d in metadata.step_stats.dev_stats for n in d.node_stats}
    assert any(name.endswith("/xla_run") for name in ran)  # auto-clustering compiled part of the step
    metrics = run(make_cfg("device=cpu", "device.xla=true", "train.max_steps=10", "eval.every_steps=0"), str(tmp_path))
    assert metrics["global_step"] == 10 and np.isfinite(metrics["loss"])
