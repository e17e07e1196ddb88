"""``mode=export``: a SavedModel (tag ``serve``) for TensorFlow Serving, from the spec's export_outputs
or a default ``serving_default`` predict signature of all predictions; the serving input is
``export.serving_input_fn``'s, or placeholders shaped like the eval input's features."""

import contextlib
import logging
import os
import shutil
from typing import Dict

import tensorflow as tf

from trainer.checkpoints.intact import checkpoint_step
from trainer.config.targets import callable_name, load_callable
from trainer.data.pipelines import make_eval_input
from trainer.errors import ConfigError, ContractError
from trainer.model.graph import build_predict_part
from trainer.model.model_fn import load_data_for, model_params
from trainer.plan import graph_recipe, make_run_config
from trainer.modes.checkpoint import checkpoint_to_read
from trainer.session.device import resolve_device, session_config

tf1 = tf.compat.v1
log = logging.getLogger("trainer")


def _receiver(result, key: str):
    """(receiver tensors as a dict, features) from a ServingInputReceiver or a (receivers, features) pair."""
    if hasattr(result, "features") and hasattr(result, "receiver_tensors"):
        receivers, features = result.receiver_tensors, result.features
    elif isinstance(result, (tuple, list)) and len(result) == 2:
        receivers, features = result
    else:
        raise ContractError(f"{key} returned {type(result).__name__}; return a tf.estimator.export."
                            "ServingInputReceiver(features, receiver_tensors) or (receiver_tensors, features)")
    if not isinstance(receivers, dict):
        receivers = {"input": receivers}
    return receivers, features


def _eval_features(data_cfg, batch_size: int, model_cfg, data, run_config):
    """The eval input's features, built in a scratch graph (for their names, dtypes and shapes)."""
    with tf.Graph().as_default():
        return make_eval_input(data_cfg, batch_size, data, model_params(model_cfg), run_config).features


def _placeholder_like(tensor, name: str):
    if not isinstance(tensor, tf.Tensor) or tensor.shape.rank is None:
        raise ConfigError(f"cannot derive a serving input from the eval feature {name!r} ({type(tensor).__name__}, "
                          "no known rank); set export.serving_input_fn (e.g. trainer.estimator.export."
                          "build_parsing_serving_input_receiver_fn)")
    return tf1.placeholder(tensor.dtype, [None] + tensor.shape.as_list()[1:], name=name)


def _serving_input(serving_input_fn, like_eval_input):
    """(receiver tensors, features): ``export.serving_input_fn``'s, else placeholders shaped like the
    eval input's features (``like_eval_input()``; batch dimension open)."""
    if serving_input_fn:
        fn = load_callable(serving_input_fn, "export.serving_input_fn")
        return _receiver(fn(), callable_name("export.serving_input_fn", serving_input_fn, fn))
    like = like_eval_input()
    if isinstance(like, dict):
        features = {name: _placeholder_like(t, name) for name, t in sorted(like.items())}
        return dict(features), features
    features = _placeholder_like(like, "input")
    return {"input": features}, features


def _signatures(spec, receivers) -> Dict:
    """The spec's export_outputs (a single one is also ``serving_default``, as Estimator made it),
    else one ``serving_default`` predict signature of every prediction."""
    if spec.export_outputs:
        signatures = {name: out.as_signature_def(receivers) for name, out in spec.export_outputs.items()}
        if len(signatures) == 1:
            signatures["serving_default"] = next(iter(signatures.values()))
        return signatures
    outputs = spec.predictions if isinstance(spec.predictions, dict) else {"predictions": spec.predictions}
    return {"serving_default": tf1.saved_model.predict_signature_def(inputs=receivers, outputs=outputs)}


_TEMP = "temp-"  # TensorFlow Serving loads only dirs named by a number: it never sees one of these


def _clean_leftovers(parent: str) -> None:
    """Temporary export dirs of processes that are gone (killed mid-export) are removed."""
    for name in os.listdir(parent) if os.path.isdir(parent) else ():
        pid = name.rsplit("-", 1)[-1]
        if name.startswith(_TEMP) and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
            log.info("removed %s, left by an export that did not finish", os.path.join(parent, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _staged(export_dir: str):
    """A temporary dir beside ``export_dir``, renamed to it once the SavedModel is complete (as Estimator
    exported): a kill mid-export leaves no partial SavedModel at the final path, and the next export
    removes the leftover."""
    parent = os.path.dirname(export_dir)
    _clean_leftovers(parent)
    staged = os.path.join(parent, f"{_TEMP}{os.path.basename(export_dir)}-{os.getpid()}")
    shutil.rmtree(staged, ignore_errors=True)
    try:
        yield staged
        os.rename(staged, export_dir)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def export(cfg, workdir: str) -> Dict:
    """Export ``export.checkpoint`` (default: the newest in ``checkpoint.dir``) to ``export.dir``
    (default ``export/<global step>`` in the run dir, never overwritten); returns the record."""
    device = resolve_device(cfg.device)
    path = checkpoint_to_read(cfg.checkpoint.dir, cfg.export.checkpoint)
    step = checkpoint_step(path)
    export_dir = os.path.abspath(os.path.expanduser(cfg.export.dir or os.path.join(workdir, "export", str(step))))
    if os.path.exists(export_dir):
        raise ConfigError(f"export.dir={export_dir} exists; give a new export.dir (an export is never overwritten)")
    run_config = make_run_config(cfg)
    data = load_data_for(cfg.model, cfg.data)  # the features' shapes, and the classes of a model whose num_classes is null
    with tf.Graph().as_default():
        eval_features = lambda: _eval_features(cfg.data, cfg.eval.batch_size, cfg.model, data, run_config)  # noqa: E731
        receivers, features = _serving_input(cfg.export.serving_input_fn, eval_features)
        spec, saver, _ = build_predict_part(graph_recipe(cfg), features, device, run_config)
        signatures = _signatures(spec, receivers)
        with tf1.Session(config=session_config(cfg.device, device)) as sess, _staged(export_dir) as staged:
            saver.restore(sess, path)
            builder = tf1.saved_model.Builder(staged)
            builder.add_meta_graph_and_variables(sess, [tf1.saved_model.tag_constants.SERVING],
                                                 signature_def_map=signatures, strip_default_attrs=True)
            builder.save()
    log.info("exported %s (step %d) to %s; signatures: %s", path, step, export_dir, ", ".join(sorted(signatures)))
    result = {"checkpoint": path, "global_step": step, "export_dir": export_dir, "signatures": sorted(signatures)}
    return result
