"""``mode=predict``: a checkpoint's predictions for the test split, an input_fn or ``predict.input``,
saved as an ``.npz`` of arrays (``predictions.npz`` in the run dir by default)."""

import logging
import os
from typing import Dict, Iterator

import numpy as np
import tensorflow as tf

from trainer.config.targets import load_callable
from trainer.errors import ConfigError
from trainer.contract import BareTensor, ModeKeys
from trainer.data.files import FileSource
from trainer.data.pipelines import make_eval_input, make_input_fn_pipeline, make_pipeline
from trainer.data.predict_input import load_prediction_input
from trainer.hooks.builtin import InputInitHook
from trainer.model.graph import build_predict_part
from trainer.model.model_fn import load_data_for, model_params
from trainer.plan import graph_recipe, make_run_config
from trainer.modes.checkpoint import checkpoint_to_read
from trainer.session.device import resolve_device, session_config

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def _prediction_pipeline(predict_cfg, model_cfg, data_cfg, batch_size: int, data, run_config):
    """``predict.input_fn`` (called in mode ``infer``), else ``predict.input``, else the eval input."""
    params = dict(model_params(model_cfg), batch_size=batch_size)
    if predict_cfg.input_fn:
        if predict_cfg.input:
            raise ConfigError("predict.input and predict.input_fn are both set; set one of them")
        fn = load_callable(predict_cfg.input_fn, "predict.input_fn")
        return make_input_fn_pipeline(fn, predict_cfg.input_fn, ModeKeys.PREDICT, params, run_config)
    if data_cfg.name == "input_fn" and not predict_cfg.input:
        fn = load_callable(data_cfg.eval_fn, "data.eval_fn")
        return make_input_fn_pipeline(fn, data_cfg.eval_fn, ModeKeys.EVAL, params, run_config)
    if not predict_cfg.input:
        return make_eval_input(data_cfg, batch_size, data, params, run_config)
    if isinstance(data, FileSource):
        if "feature_key" not in model_cfg.params:
            raise ConfigError(f"predict.input: one array cannot give model.fn={model_cfg.fn} the features of "
                              f"data={data_cfg.name} by name; set predict.input_fn")
        like = data.packed_like(tuple(data_cfg.ignore))
    else:
        like = None if data is None else data.train_x
    images = load_prediction_input(predict_cfg.input, like)
    return make_pipeline(images, np.zeros(len(images), np.int64), batch_size, data_cfg.feature_key, train=False)


def _files_read(predict_cfg, data_cfg, data) -> set:
    """The files this run reads its data from (their real paths)."""
    paths = [predict_cfg.input, data_cfg.get("path")]
    if isinstance(data, FileSource):
        paths += data.train_files + data.eval_files
    return {os.path.realpath(os.path.expanduser(str(p))) for p in paths if p}


def _output_path(predict_cfg, data_cfg, workdir: str, data) -> str:
    """Where the predictions go: ``predict.output``, or the run dir's own ``predictions.npz`` (which a
    later prediction replaces). A file the run reads is never written; another existing file only
    with ``predict.overwrite=true``.

    Raises:
      ConfigError: naming ``predict.output`` and the fix.
    """
    default = os.path.join(workdir, "predictions.npz")
    out = os.path.abspath(os.path.expanduser(predict_cfg.output or default))
    if os.path.realpath(out) in _files_read(predict_cfg, data_cfg, data):
        raise ConfigError(f"predict.output={out} is a file this run reads its data from; write the predictions "
                          "elsewhere")
    if os.path.isdir(out):
        raise ConfigError(f"predict.output={out} is a directory; name a file, e.g. {os.path.join(out, 'predictions.npz')}")
    if os.path.exists(out) and out != os.path.abspath(default) and not predict_cfg.overwrite:
        raise ConfigError(f"predict.output={out} exists; set predict.overwrite=true to replace it, or name another file")
    return out


def predicted_batches(cfg, path: str, data=None) -> Iterator[Dict[str, np.ndarray]]:
    """The predictions of checkpoint ``path`` (a prefix) over the prediction input, batch by batch, in
    input order: a dict of arrays (a ``BareTensor`` for a model_fn giving one tensor). ``data`` is
    what ``load_data_for(cfg.model, cfg.data)`` gave (loaded here when None)."""
    device = resolve_device(cfg.device)
    run_config = make_run_config(cfg)
    data = load_data_for(cfg.model, cfg.data) if data is None else data
    with tf.Graph().as_default():
        pipeline = _prediction_pipeline(cfg.predict, cfg.model, cfg.data, cfg.eval.batch_size, data, run_config)
        spec, saver, global_step = build_predict_part(graph_recipe(cfg), pipeline.features, device, run_config)
        bare = not isinstance(spec.predictions, dict)
        predictions = {"predictions": spec.predictions} if bare else spec.predictions
        creator = tf1.train.ChiefSessionCreator(scaffold=tf1.train.Scaffold(saver=saver),
                                                config=session_config(cfg.device, device),
                                                checkpoint_filename_with_path=path)
        hooks = [InputInitHook(pipeline, global_step), *spec.prediction_hooks]
        with tf1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():
                batch = sess.run(predictions)
                yield BareTensor(batch) if bare else batch


def predict(cfg, workdir: str) -> Dict:
    """Predict with ``predict.checkpoint`` (default: the newest in ``checkpoint.dir``); returns the record."""
    path = checkpoint_to_read(cfg.checkpoint.dir, cfg.predict.checkpoint)
    data = load_data_for(cfg.model, cfg.data)
    out = _output_path(cfg.predict, cfg.data, workdir, data)
    batches = list(predicted_batches(cfg, path, data))
    arrays = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]} if batches else {}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = f"{out}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:  # a file object: np.savez adds no .npz to the name
            np.savez(f, **arrays)
        os.replace(tmp, out)  # a reader, or a killed run, never leaves half a file at the output
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    count = len(next(iter(arrays.values()))) if arrays else 0
    log.info("predicted %d examples with %s: %s", count, path, out)
    result = {"checkpoint": path, "predictions": out, "count": count, "keys": sorted(arrays)}
    return result
