"""``mode=evaluate``: the model's eval_metric_ops (and loss) over the whole eval input, for one checkpoint,
with the model's evaluation_hooks. Builds only the EVAL graph; writes ``eval_metrics.json`` in the run dir."""

import logging
import os
from typing import Dict

import tensorflow as tf

from trainer.data.sources import eval_source
from trainer.errors import CheckpointError
from trainer.hooks.evaluation import check_examples, evaluate_once, format_metrics, objective_metric
from trainer.model.graph import build_eval_graph
from trainer.model.model_fn import load_data_for
from trainer.plan import graph_recipe, make_run_config
from trainer.modes.checkpoint import checkpoint_to_read
from trainer.records import write_json
from trainer.session.device import resolve_device, session_config
from trainer.training.preemption import signal_received

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def evaluate(cfg, workdir: str) -> Dict:
    """Evaluate ``eval.checkpoint`` (default: the newest in ``checkpoint.dir``); returns the record."""
    device = resolve_device(cfg.device)
    path = checkpoint_to_read(cfg.checkpoint.dir, cfg.eval.checkpoint)
    arrays = load_data_for(cfg.model, cfg.data)
    evaluation = build_eval_graph(graph_recipe(cfg), arrays, device, make_run_config(cfg))
    objective = objective_metric(cfg.eval.objective, evaluation.metrics)
    with evaluation.graph.as_default():
        scaffold = tf1.train.Scaffold(saver=evaluation.saver)
        creator = tf1.train.ChiefSessionCreator(scaffold=scaffold, config=session_config(cfg.device, device),
                                                checkpoint_filename_with_path=path)
        try:
            with tf1.train.MonitoredSession(session_creator=creator,
                                            hooks=list(evaluation.spec.evaluation_hooks)) as sess:
                def one_pass(step_context):
                    found = evaluate_once(step_context.session, evaluation, run_update=step_context.run_with_hooks,
                                          steps=cfg.eval.steps, stopped=signal_received)  # nested in training
                    return found, int(step_context.session.run(evaluation.global_step))

                (values, examples), step = sess.run_step_fn(one_pass)
        except tf.errors.NotFoundError as e:
            raise CheckpointError(f"checkpoint {path} lacks variables the EVAL graph has ({e.message.splitlines()[0]}); "
                                  "evaluate a checkpoint of this model") from None
    check_examples(examples, eval_source(cfg.data, arrays))
    result = {"checkpoint": path, "global_step": step, "metrics": values, "examples": examples,
              "objective": objective, "objective_value": values[objective]}
    os.makedirs(workdir, exist_ok=True)
    write_json(os.path.join(workdir, "eval_metrics.json"), result)
    log.info("evaluated %s on %d examples: %s", path, examples, format_metrics(values))
    return result
