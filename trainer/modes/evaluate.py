"""``mode=evaluate``: the model's eval_metric_ops (and loss) over the whole test split, for one checkpoint,
with the model's evaluation_hooks. Writes ``eval_metrics.json`` in the run dir."""

import json
import logging
import os
from typing import Dict

import tensorflow as tf

from trainer.data.sources import load_arrays
from trainer.hooks.evaluation import evaluate_once, format_metrics
from trainer.model.graph import build_graph, single_process
from trainer.modes.checkpoint import checkpoint_to_read
from trainer.records import write_json
from trainer.session.device import resolve_device, session_config

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def evaluate(cfg, workdir: str) -> Dict:
    """Evaluate ``eval.checkpoint`` (default: the newest in ``checkpoint.dir``); returns the record."""
    device = resolve_device(cfg.device)
    graph = build_graph(cfg, load_arrays(cfg.data), single_process(device))
    path = checkpoint_to_read(cfg, cfg.eval.checkpoint)
    with graph.graph.as_default():
        creator = tf1.train.ChiefSessionCreator(scaffold=graph.scaffold, config=session_config(cfg.device, device),
                                                checkpoint_filename_with_path=path)
        with tf1.train.MonitoredSession(session_creator=creator, hooks=list(graph.eval_spec.evaluation_hooks)) as sess:
            def one_pass(step_context):
                values = evaluate_once(step_context.session, graph, run_update=step_context.run_with_hooks)
                return values, int(step_context.session.run(graph.global_step))

            values, step = sess.run_step_fn(one_pass)
    result = {"checkpoint": path, "global_step": step, "metrics": values,
              "objective": cfg.eval.objective, "objective_value": values.get(cfg.eval.objective)}
    os.makedirs(workdir, exist_ok=True)
    write_json(os.path.join(workdir, "eval_metrics.json"), result)
    print(json.dumps(result, sort_keys=True), flush=True)
    log.info("evaluated %s: %s", path, format_metrics(values))
    return result
