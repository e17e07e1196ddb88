"""``mode=export``: a SavedModel (tag ``serve``) for TensorFlow Serving, from the spec's export_outputs
or a default ``serving_default`` predict signature of all predictions."""

import json
import logging
import os
from typing import Dict

import tensorflow as tf

from trainer.checkpoints.intact import checkpoint_step
from trainer.config.targets import load_callable
from trainer.errors import ConfigError
from trainer.model.graph import build_predict_part
from trainer.modes.checkpoint import checkpoint_to_read
from trainer.session.device import resolve_device, session_config

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def _serving_input(cfg):
    """(receiver tensors, features): ``export.serving_input_fn``'s, or a float image placeholder."""
    if cfg.export.serving_input_fn:
        return load_callable(cfg.export.serving_input_fn, "export.serving_input_fn")()
    image = tf1.placeholder(tf.float32, [None, 28, 28, 1], name=cfg.data.feature_key)
    return {cfg.data.feature_key: image}, {cfg.data.feature_key: image}


def export(cfg, workdir: str) -> Dict:
    """Export ``export.checkpoint`` (default: the newest in ``checkpoint.dir``) to ``export.dir``
    (default ``export/<global step>`` in the run dir, never overwritten); returns the record."""
    device = resolve_device(cfg.device)
    path = checkpoint_to_read(cfg, cfg.export.checkpoint)
    step = checkpoint_step(path)
    export_dir = os.path.abspath(os.path.expanduser(cfg.export.dir or os.path.join(workdir, "export", str(step))))
    if os.path.exists(export_dir):
        raise ConfigError(f"export.dir={export_dir} exists; give a new export.dir (an export is never overwritten)")
    with tf.Graph().as_default():
        receivers, features = _serving_input(cfg)
        spec, saver, _ = build_predict_part(cfg, features, device)
        if spec.export_outputs:
            signatures = {name: out.as_signature_def(receivers) for name, out in spec.export_outputs.items()}
        else:
            outputs = spec.predictions if isinstance(spec.predictions, dict) else {"predictions": spec.predictions}
            signatures = {"serving_default": tf1.saved_model.predict_signature_def(inputs=receivers, outputs=outputs)}
        with tf1.Session(config=session_config(cfg.device, device)) as sess:
            saver.restore(sess, path)
            builder = tf1.saved_model.Builder(export_dir)
            builder.add_meta_graph_and_variables(sess, [tf1.saved_model.tag_constants.SERVING],
                                                 signature_def_map=signatures, strip_default_attrs=True)
            builder.save()
    log.info("exported %s (step %d) to %s; signatures: %s", path, step, export_dir, ", ".join(sorted(signatures)))
    result = {"checkpoint": path, "global_step": step, "export_dir": export_dir, "signatures": sorted(signatures)}
    print(json.dumps(result, sort_keys=True), flush=True)
    return result
