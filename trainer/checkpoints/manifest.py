"""Whether a checkpoint dir fits the graph: ``manifest.json`` (the model, the graph-shaping config,
every variable) and the checkpoint's own variables, compared with the graph's."""

import logging
import os
from typing import Dict, List

import tensorflow as tf

from trainer.compat import saved_name_and_shape
from trainer.errors import CheckpointError
from trainer.records import read_json, write_json

log = logging.getLogger("trainer")

MANIFEST = "manifest.json"


def graph_variables(graph) -> Dict[str, List]:
    found = {}
    with graph.as_default():
        for v in tf.compat.v1.global_variables():
            name, shape = saved_name_and_shape(v)
            found[name] = [shape, v.dtype.base_dtype.name]
    return found


# Variables that hooks of tf.estimator made in the checkpoints they saved, not the model's: a model_dir
# trained by Estimator with them resumes here without them (they are not restored).
_ESTIMATOR_HOOK_VARIABLES = ("signal_early_stopping/STOP",)


def _diff(stored: Dict[str, List], wanted: Dict[str, List]) -> List[str]:
    """What differs between the checkpoint's variables (``stored``: name -> shape) and the graph's
    (``wanted``: name -> [shape, dtype]). A checkpoint's index gives no dtypes: only shapes compare."""
    missing = sorted(set(wanted) - set(stored))
    unexpected = sorted(set(stored) - set(wanted) - set(_ESTIMATOR_HOOK_VARIABLES))
    reshaped = sorted(f"{n} {stored[n]} -> {wanted[n][0]}" for n in set(wanted) & set(stored) if list(stored[n]) != wanted[n][0])
    parts = []
    for label, items in (("missing", missing), ("reshaped", reshaped), ("unexpected", unexpected)):
        if items:
            parts.append(f"{label} {items[:5]}{' ...' if len(items) > 5 else ''}")
    return parts


def check_compatible(path: str, graph, checkpoint_dir: str, model_name: str, graph_config: Dict) -> None:
    """Refuse a checkpoint dir of another model: the manifest and the checkpoint's variables must fit.

    Config changes that do not shape the graph are allowed and logged.

    Raises:
      CheckpointError: another model or optimizer: variables missing, unexpected or reshaped (a readable diff).
    """
    wanted = graph_variables(graph)
    hint = "use init_from.checkpoint to warm start from it, or another checkpoint.dir"
    manifest = read_manifest(checkpoint_dir)
    if manifest:
        if manifest.get("model") != model_name:
            raise CheckpointError(
                f"checkpoint.dir={checkpoint_dir} belongs to model={manifest.get('model')}, not model={model_name}; {hint}"
            )
        changed = {k: (manifest.get("graph_config", {}).get(k), v) for k, v in graph_config.items()
                   if manifest.get("graph_config", {}).get(k) != v}
        if changed:
            log.info("graph config changed since the checkpoint: %s",
                     ", ".join(f"{k} {a} -> {b}" for k, (a, b) in sorted(changed.items())))
    try:
        stored = dict(tf.train.list_variables(path))
    # broad: TensorFlow's checkpoint reader raises OpError, IndexError (a cut data file) and
    # others: any of them means unreadable
    except Exception as e:
        raise CheckpointError(f"checkpoint {path} is unreadable ({type(e).__name__}); restore its files or use another checkpoint.dir") from None
    problems = _diff(stored, wanted)
    if not problems:
        return
    was = (manifest.get("graph_config") or {}).get("optimizer._target_") if manifest else None
    now = graph_config.get("optimizer._target_")
    if was and now and was != now:
        # The checkpoint holds the old optimizer's state (slots, step counters): resuming with another
        # would drop it and save over the checkpoint without it.
        raise CheckpointError(
            f"checkpoint.dir={checkpoint_dir} was trained with optimizer._target_={was}, this run has {now} "
            f"({'; '.join(problems)}); a resumed run keeps its optimizer: set it back, or {hint}")
    raise CheckpointError(f"checkpoint.dir={checkpoint_dir} holds another model ({'; '.join(problems)}); {hint}")


def check_same_data(checkpoint_dir: str, data: Dict) -> None:
    """Refuse to resume on data that would give the checkpoint's classes or inputs another meaning:
    string labels in another order or set (a class id would name another label), another label
    key, or inputs of another dtype, shape or encoding.

    Raises:
      CheckpointError: naming what changed.
    """
    stored = (read_manifest(checkpoint_dir) or {}).get("data")
    if not stored or not data:
        return
    changed = [k for k in sorted(set(stored) | set(data)) if stored.get(k) != data.get(k)]
    if changed:
        what = "; ".join(f"{k}: {stored.get(k)} then, {data.get(k)} now" for k in changed)
        raise CheckpointError(f"checkpoint.dir={checkpoint_dir} was trained on other data ({what}): resuming would "
                              "give its classes or inputs another meaning; give the same data (data.label_vocabulary "
                              "fixes string labels' order), or start in another checkpoint.dir")


def read_manifest(checkpoint_dir: str) -> Dict:
    return read_json(os.path.join(checkpoint_dir, MANIFEST))


def write_manifest(checkpoint_dir: str, graph, model_name: str, graph_config: Dict, data: Dict = None) -> None:
    """Record what the checkpoints of this dir hold (kept when it exists: it describes the first run;
    a manifest written before data was recorded gains this run's ``data``)."""
    path = os.path.join(checkpoint_dir, MANIFEST)
    if os.path.exists(path):
        existing = read_json(path)
        if existing:
            if data and "data" not in existing:
                write_json(path, {**existing, "data": data}, indent=1)
            return
        log.warning("%s does not parse; written again from this run's graph (the checkpoint's variables were "
                    "checked against it)", path)
    payload = {"model": model_name, "graph_config": graph_config, "variables": graph_variables(graph)}
    if data:
        payload["data"] = data
    write_json(path, payload, indent=1)
