"""What the ``mode`` key selects, as Estimator's methods did: train (and train_and_evaluate),
evaluate, predict, export. ``execute(cfg, output_dir)`` is the one dispatch.

evaluate / predict / export read a checkpoint and never write to the checkpoint dir.
"""

import json
import logging
import os
from typing import Dict, Optional

import numpy as np
from omegaconf import OmegaConf

from trainer.errors import CheckpointError, ConfigError, DataError
from trainer.train import write_json, prepare_config, run

log = logging.getLogger("trainer")


def execute(cfg, output_dir: str) -> Dict:
    """Run ``cfg.mode``; returns its result record (metrics for train and evaluate)."""
    from trainer.cluster import resolve_role

    role = resolve_role(cfg.distributed)
    if role.kind == "local":
        from trainer.local_cluster import launch

        return launch(cfg, output_dir)
    if role.distributed:
        from trainer.distributed import run_task

        return run_task(cfg, output_dir, role)
    if os.environ.get("TF_CONFIG"):
        log.info("TF_CONFIG is set but distributed=none: running as a single process; "
                 "use distributed=tf_config to join the cluster it describes")
    mode = getattr(cfg.mode, "value", cfg.mode)
    if mode in ("train", "train_and_evaluate"):
        return run(cfg, output_dir)
    elif mode == "evaluate":
        return evaluate(cfg, output_dir)
    elif mode == "predict":
        return predict(cfg, output_dir)
    elif mode == "export":
        return export(cfg, output_dir)
    raise NotImplementedError(f"mode={mode}; use train, train_and_evaluate, evaluate, predict or export")


def _setup(cfg, output_dir):
    from trainer.tfenv import import_tensorflow, resolve_device, session_config

    output_dir = os.path.abspath(output_dir)
    cfg = prepare_config(cfg, output_dir)
    tf = import_tensorflow(cfg.log.tf_verbose)
    device = resolve_device(tf, cfg.device)
    return cfg, output_dir, tf, device, session_config(tf, cfg.device, device)


def _checkpoint(cfg, explicit: Optional[str]) -> str:
    """``explicit`` (a prefix or a dir), else the newest intact checkpoint of ``checkpoint.dir``."""
    from trainer import checkpoints

    if explicit:
        path = os.path.expanduser(explicit)
        if os.path.isdir(path):
            found = checkpoints.find_intact(path)
            path = found.path if found else None
        if not path or not os.path.exists(path + ".index"):
            raise CheckpointError(f"checkpoint {explicit}: not found; give a checkpoint prefix such as DIR/model.ckpt-1000")
        return path
    found = checkpoints.find_intact(os.path.abspath(os.path.expanduser(cfg.checkpoint.dir)))
    if not found:
        raise CheckpointError(f"checkpoint.dir={cfg.checkpoint.dir} has no checkpoint; train first or set checkpoint.dir")
    return found.path


def evaluate(cfg, output_dir: str) -> Dict:
    """Evaluate a checkpoint on the test split: the model's eval_metric_ops (and loss), with its evaluation_hooks."""
    cfg, output_dir, tf, device, config = _setup(cfg, output_dir)
    from trainer.data import load_arrays
    from trainer.graph import build_graph
    from trainer.hooks import InputInitHook

    tf1 = tf.compat.v1
    arrays = load_arrays(cfg.data)
    graph = build_graph(tf, cfg, device, arrays)
    path = _checkpoint(cfg, cfg.eval.checkpoint)
    with graph.graph.as_default():
        final = tf1.train.FinalOpsHook({"metrics": graph.eval_metrics, "step": graph.global_step})
        hooks = [InputInitHook(graph.eval_input, graph.global_step), *graph.eval_spec.evaluation_hooks, final]
        creator = tf1.train.ChiefSessionCreator(scaffold=graph.scaffold, config=config, checkpoint_filename_with_path=path)
        with tf1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():  # one pass: the end of the eval input stops it
                sess.run(graph.eval_update_op)
    values = {k: float(v) for k, v in final.final_ops_values["metrics"].items()}
    result = {"checkpoint": path, "global_step": int(final.final_ops_values["step"]), "metrics": values,
              "objective": cfg.eval.objective, "objective_value": values.get(cfg.eval.objective)}
    os.makedirs(output_dir, exist_ok=True)
    write_json(os.path.join(output_dir, "eval_metrics.json"), result)
    print(json.dumps(result, sort_keys=True), flush=True)
    log.info("evaluated %s: %s", path, " ".join(f"{k} {v:.4f}" for k, v in sorted(values.items())))
    return result


def _prediction_images(cfg, arrays) -> np.ndarray:
    from trainer.data import read_idx

    path = cfg.predict.input
    if not path:
        return arrays.test_x
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise DataError(f"predict.input={path}: no such file; give an .npz (key x, images or x_test) or an IDX images file")
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as f:
            for key in ("x", "images", "x_test"):
                if key in f.files:
                    images = f[key]
                    break
            else:
                raise DataError(f"predict.input={path}: no array named x, images or x_test; it has {f.files}")
    else:
        images = read_idx(path)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if images.shape[1:] != (28, 28):
        raise DataError(f"predict.input={path}: images of shape {images.shape[1:]}, expected 28x28")
    return images.astype(np.uint8)


def _predict_graph(tf, cfg, features, device):
    """A PREDICT-mode graph of the model around ``features``; returns (spec, saver, global_step)."""
    from trainer.estimator import ModeKeys
    from trainer.graph import _as_spec, load_model_fn

    tf1 = tf.compat.v1
    model_fn = load_model_fn(cfg.model.fn)
    params = OmegaConf.to_container(cfg.model.params, resolve=True)
    global_step = tf1.train.get_or_create_global_step()
    with tf.device("/device:GPU:0" if device == "gpu" else None), tf1.variable_scope(tf1.get_variable_scope()):
        spec = _as_spec(model_fn(features, None, ModeKeys.PREDICT, params), "predict", cfg.model.fn)
    if spec.predictions is None:
        raise ConfigError(f"model.fn={cfg.model.fn} returned no predictions for mode predict")
    saver = tf1.train.Saver(save_relative_paths=True)
    return spec, saver, global_step


def predict(cfg, output_dir: str) -> Dict:
    """Predictions of a checkpoint for the test split or ``predict.input``, saved as an .npz of arrays."""
    cfg, output_dir, tf, device, config = _setup(cfg, output_dir)
    from trainer.data import load_arrays, make_input_fn_pipeline, make_pipeline

    tf1 = tf.compat.v1
    path = _checkpoint(cfg, cfg.predict.checkpoint)
    graph = tf.Graph()
    with graph.as_default():
        if cfg.data.name == "input_fn" and not cfg.predict.input:
            import hydra.utils

            fn = hydra.utils.get_method(cfg.data.eval_fn)
            params = dict(OmegaConf.to_container(cfg.model.params, resolve=True), batch_size=cfg.eval.batch_size)
            pipeline = make_input_fn_pipeline(tf, fn, False, cfg.data.feature_key, params)
        else:
            images = _prediction_images(cfg, load_arrays(cfg.data) if not cfg.predict.input else None)
            pipeline = make_pipeline(tf, images, np.zeros(len(images), np.int64), cfg.eval.batch_size,
                                     cfg.data.feature_key, train=False)
        spec, saver, global_step = _predict_graph(tf, cfg, pipeline.features, device)
        predictions = spec.predictions if isinstance(spec.predictions, dict) else {"predictions": spec.predictions}
        from trainer.hooks import InputInitHook

        scaffold = tf1.train.Scaffold(saver=saver)
        creator = tf1.train.ChiefSessionCreator(scaffold=scaffold, config=config, checkpoint_filename_with_path=path)
        hooks = [InputInitHook(pipeline, global_step), *spec.prediction_hooks]
        batches = []
        with tf1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():
                batches.append(sess.run(predictions))
    arrays = {k: np.concatenate([b[k] for b in batches]) for k in predictions} if batches else {}
    out = os.path.abspath(os.path.expanduser(cfg.predict.output or os.path.join(output_dir, "predictions.npz")))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    np.savez(out, **arrays)
    count = len(next(iter(arrays.values()))) if arrays else 0
    log.info("predicted %d examples with %s: %s", count, path, out)
    result = {"checkpoint": path, "predictions": out, "count": count, "keys": sorted(arrays)}
    print(json.dumps(result, sort_keys=True), flush=True)
    return result


def export(cfg, output_dir: str) -> Dict:
    """A SavedModel (tag ``serve``) for TensorFlow Serving, from the spec's export_outputs or a default
    ``serving_default`` predict signature of all predictions."""
    cfg, output_dir, tf, device, config = _setup(cfg, output_dir)
    import hydra.utils

    tf1 = tf.compat.v1
    path = _checkpoint(cfg, cfg.export.checkpoint)
    step = int(tf.train.load_variable(path, "global_step"))
    export_dir = os.path.abspath(os.path.expanduser(cfg.export.dir or os.path.join(output_dir, "export", str(step))))
    if os.path.exists(export_dir):
        raise ConfigError(f"export.dir={export_dir} exists; give a new export.dir (an export is never overwritten)")
    graph = tf.Graph()
    with graph.as_default():
        if cfg.export.serving_input_fn:
            receivers, features = hydra.utils.get_method(cfg.export.serving_input_fn)()
        else:
            image = tf1.placeholder(tf.float32, [None, 28, 28, 1], name=cfg.data.feature_key)
            receivers, features = {cfg.data.feature_key: image}, {cfg.data.feature_key: image}
        spec, saver, _ = _predict_graph(tf, cfg, features, device)
        if spec.export_outputs:
            signatures = {name: out.as_signature_def(receivers) for name, out in spec.export_outputs.items()}
        else:
            outputs = spec.predictions if isinstance(spec.predictions, dict) else {"predictions": spec.predictions}
            signatures = {"serving_default": tf1.saved_model.predict_signature_def(inputs=receivers, outputs=outputs)}
        with tf1.Session(config=config) as sess:
            saver.restore(sess, path)
            builder = tf1.saved_model.Builder(export_dir)
            builder.add_meta_graph_and_variables(sess, [tf1.saved_model.tag_constants.SERVING],
                                                 signature_def_map=signatures, strip_default_attrs=True)
            builder.save()
    log.info("exported %s (step %d) to %s; signatures: %s", path, step, export_dir, ", ".join(sorted(signatures)))
    result = {"checkpoint": path, "global_step": step, "export_dir": export_dir, "signatures": sorted(signatures)}
    print(json.dumps(result, sort_keys=True), flush=True)
    return result
