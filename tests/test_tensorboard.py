"""The event files, read with TensorBoard's own reader: the training scalars and every eval metric
at the steps they were written, under both backends and across a resume; HParams for sweeps."""

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from trainer import run

BACKENDS = ["plain", "monitored"]


def scalars(folder):
    """{tag: [steps]} of the event files in ``folder`` (not its subfolders), as TensorBoard reads them."""
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.slow
@pytest.mark.parametrize("session", BACKENDS)
def test_training_and_eval_scalars_at_their_steps_across_a_resume(make_cfg, tmp_path, session):
    common = [f"session={session}", "summary.every_steps=5", "eval.every_steps=10", "optimizer=momentum"]
    run(make_cfg(*common), str(tmp_path))
    run(make_cfg(*common, "train.max_steps=30"), str(tmp_path))  # resumed from step 20
    train = scalars(tmp_path / "checkpoints")
    every_5 = [5, 10, 15, 20, 25, 30]
    # Each tag once per step, in order: the resumed run appends after step 20, nothing twice.
    assert train["loss"] == every_5 and train["learning_rate"] == every_5, train
    assert train["global_step/sec"] == every_5, train
    assert train["accuracy"] == every_5, train  # the training batch's, beside the loss
    evals = scalars(tmp_path / "checkpoints" / "eval")
    assert evals["accuracy"] == [10, 20, 30] and evals["loss"] == [10, 20, 30], evals


@pytest.mark.slow
def test_a_model_with_its_own_summaries_still_gets_the_fixed_tags(make_cfg, tmp_path):
    run(make_cfg("model=model_fn", "model.fn=user_models.large_classifier_style", "summary.every_steps=5"),
        str(tmp_path))
    train = scalars(tmp_path / "checkpoints")
    assert train["loss"] == [5, 10, 15, 20] and "learning_rate" not in train  # its own optimizer: no rate known
    assert scalars(tmp_path / "checkpoints" / "eval")["eval_accuracy"] == [10, 20]


@pytest.mark.slow
@pytest.mark.parametrize("session", BACKENDS)
def test_the_graph_files_and_the_first_checkpoint_are_written(make_cfg, tmp_path, session):
    """graph.pbtxt and the events file's graph and meta graph (written by a thread while training
    starts) hold the whole graph; the starting step's checkpoint is there too."""
    from google.protobuf import text_format
    from tensorflow.core.framework.graph_pb2 import GraphDef

    run(make_cfg(f"session={session}"), str(tmp_path))
    ckpt = tmp_path / "checkpoints"
    events = EventAccumulator(str(ckpt))
    events.Reload()
    assert events.Tags()["graph"] and events.Tags()["meta_graph"]
    in_events = {node.name for node in events.Graph().node}
    in_meta = {node.name for node in events.MetaGraph().graph_def.node}
    in_pbtxt = {node.name for node in text_format.Parse((ckpt / "graph.pbtxt").read_text(), GraphDef()).node}
    assert "global_step" in in_events and in_events == in_meta == in_pbtxt
    assert (ckpt / "model.ckpt-0.index").exists() and (ckpt / "model.ckpt-0.meta").exists()


def test_writers_opened_in_one_dir_within_the_same_second_keep_their_events(tmp_path):
    """TensorFlow names an events file after the second it opens and the host: a second writer opened in
    the same dir within that second (a run resumed right after a short one) would take the same name and
    truncate the first one's events. The runner's writers have names of their own, in opening order."""
    import time

    import tensorflow as tf

    from trainer.hooks.builtin import open_event_writers

    tf1 = tf.compat.v1
    while time.time() % 1 > 0.5:  # both writers open within one second
        time.sleep(0.02)
    with tf.Graph().as_default() as graph:
        for step in (5, 25):
            open_event_writers({str(tmp_path): graph})
            writer = tf1.summary.FileWriterCache.get(str(tmp_path))
            writer.add_summary(tf1.Summary(value=[tf1.Summary.Value(tag="loss", simple_value=float(step))]), step)
            tf1.summary.FileWriterCache.clear()
    assert len(list(tmp_path.iterdir())) == 2
    assert scalars(tmp_path) == {"loss": [5, 25]}
