"""``mode=predict``: a checkpoint's predictions for the test split, an input_fn or ``predict.input``,
saved as an ``.npz`` of arrays (``predictions.npz`` in the run dir by default)."""

import json
import logging
import os
from typing import Dict

import numpy as np
import tensorflow as tf

from trainer.config.targets import load_callable
from trainer.errors import ConfigError
from trainer.estimator import ModeKeys
from trainer.data.files import FileSource
from trainer.data.pipelines import make_eval_input, make_input_fn_pipeline, make_pipeline
from trainer.data.sources import load_data, load_prediction_input
from trainer.hooks.runner import InputInitHook
from trainer.model.graph import build_predict_part
from trainer.model.model_fn import make_run_config, model_params
from trainer.modes.checkpoint import checkpoint_to_read
from trainer.session.device import resolve_device, session_config

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def _prediction_pipeline(cfg, data, run_config):
    """``predict.input_fn`` (called in mode ``infer``), else ``predict.input``, else the eval input."""
    params = dict(model_params(cfg), batch_size=cfg.eval.batch_size)
    if cfg.predict.input_fn:
        if cfg.predict.input:
            raise ConfigError("predict.input and predict.input_fn are both set; set one of them")
        fn = load_callable(cfg.predict.input_fn, "predict.input_fn")
        return make_input_fn_pipeline(fn, cfg.predict.input_fn, ModeKeys.PREDICT, params, run_config)
    if cfg.data.name == "input_fn" and not cfg.predict.input:
        fn = load_callable(cfg.data.eval_fn, "data.eval_fn")
        return make_input_fn_pipeline(fn, cfg.data.eval_fn, ModeKeys.EVAL, params, run_config)
    if not cfg.predict.input:
        return make_eval_input(cfg, data, params, run_config)
    if isinstance(data, FileSource):
        if "feature_key" not in cfg.model.params:
            raise ConfigError(f"predict.input: one array cannot give model.fn={cfg.model.fn} the features of "
                              f"data={cfg.data.name} by name; set predict.input_fn")
        like = data.packed_like(tuple(cfg.data.ignore))
    else:
        like = None if data is None else data.train_x
    images = load_prediction_input(cfg.predict.input, like)
    return make_pipeline(images, np.zeros(len(images), np.int64), cfg.eval.batch_size, cfg.data.feature_key, train=False)


def predict(cfg, workdir: str) -> Dict:
    """Predict with ``predict.checkpoint`` (default: the newest in ``checkpoint.dir``); returns the record."""
    device = resolve_device(cfg.device)
    path = checkpoint_to_read(cfg, cfg.predict.checkpoint)
    run_config = make_run_config(cfg)
    with tf.Graph().as_default():
        pipeline = _prediction_pipeline(cfg, load_data(cfg), run_config)
        spec, saver, global_step = build_predict_part(cfg, pipeline.features, device, run_config)
        predictions = spec.predictions if isinstance(spec.predictions, dict) else {"predictions": spec.predictions}
        creator = tf1.train.ChiefSessionCreator(scaffold=tf1.train.Scaffold(saver=saver),
                                                config=session_config(cfg.device, device),
                                                checkpoint_filename_with_path=path)
        hooks = [InputInitHook(pipeline, global_step), *spec.prediction_hooks]
        batches = []
        with tf1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():
                batches.append(sess.run(predictions))
    arrays = {k: np.concatenate([b[k] for b in batches]) for k in predictions} if batches else {}
    out = os.path.abspath(os.path.expanduser(cfg.predict.output or os.path.join(workdir, "predictions.npz")))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    np.savez(out, **arrays)
    count = len(next(iter(arrays.values()))) if arrays else 0
    log.info("predicted %d examples with %s: %s", count, path, out)
    result = {"checkpoint": path, "predictions": out, "count": count, "keys": sorted(arrays)}
    print(json.dumps(result, sort_keys=True), flush=True)
    return result
