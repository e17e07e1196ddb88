"""Estimator's canned models from config (``model=dnn_classifier``, ``linear_classifier``,
``dnn_linear_combined_classifier``, ``baseline_classifier`` and their ``_regressor`` twins, which
read float32 labels): the logits and heads of
``trainer.estimator``'s canned models, with Estimator's variable names, prediction keys and eval
metrics, over feature columns declared in ``model.params`` (``trainer.estimator.canned.columns``) or,
where a list is null, read off the table (``trainer.data.columns``).

The runner trains them with the ``optimizer`` config (so optimizers, schedules and clipping are
swept like any other key); ``trainer.estimator.DNNClassifier`` and its siblings are the Python API
with Estimator's own optimizers.
"""

import tensorflow as tf

from trainer.estimator import BinaryClassHead, EstimatorSpec, ModeKeys, MultiClassHead, RegressionHead
from trainer.data.columns import fill_table_columns
from trainer.estimator.canned import family as canned_family
from trainer.estimator.canned.columns import build_columns
from trainer.errors import ConfigError


def model_fn(features, labels, mode, params):
    head = _head(params, labels)
    vocabulary = params.get("label_vocabulary") if params.get("head") != "regressor" else None
    if vocabulary and labels is not None and labels.dtype.is_integer:
        labels = tf.gather(tf.constant(list(vocabulary)), labels)  # the data's class ids as the names the head reads
    logits = _logits(features, mode, params, head.logits_dimension)
    if mode != ModeKeys.TRAIN:
        return head.create_estimator_spec(features, mode, logits, labels)
    # no train_op: the runner adds one from the optimizer config
    return EstimatorSpec(mode, predictions=head.predictions(logits), loss=head.loss(labels, logits, features))


def _head(params, labels):
    weight = params.get("weight_column")
    if params.get("head") == "regressor":
        if labels is not None and labels.dtype.is_integer:
            raise ConfigError("model.params.head=regressor: the labels are integer class ids; declare the label column "
                              "as float32 (data.features.<label_key>.dtype=float32) to regress on its values")
        return RegressionHead(1, weight)
    if params.get("head") != "classifier":
        raise ConfigError(f"model.params.head={params.get('head')!r}: classifier or regressor")
    classes = int(params["num_classes"])
    if classes < 2:
        raise ConfigError(f"model.params.num_classes={classes}: a classifier needs 2 or more classes (float32 labels "
                          f"are numbers: use a regressor, e.g. model=dnn_regressor)")
    vocabulary = list(params["label_vocabulary"]) if params.get("label_vocabulary") else None
    if vocabulary is not None and len(vocabulary) != classes:
        raise ConfigError(f"model.params.label_vocabulary={vocabulary}: {len(vocabulary)} name(s) for {classes} classes; "
                          "give one name per class, in class order (or null for the data's)")
    if classes == 2:
        return BinaryClassHead(weight, label_vocabulary=vocabulary)
    return MultiClassHead(classes, weight, label_vocabulary=vocabulary)


def _logits(features, mode, params, units: int):
    """The logits of ``model.params.kind``'s family (``trainer.estimator.canned``), over the columns it reads."""
    family = canned_family(params["kind"])
    lists = {f"model.params.{k}": params[k] for k in family.COLUMN_LISTS if params.get(k) is not None}
    try:
        columns = build_columns(lists)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return family.logits_from_params(_checked_features(features, lists), mode, params, units, columns)


def complete_params(params, data, ignore) -> None:
    """``trainer.model.model_fn.load_data_for``: the null column lists of ``model.params.kind``'s family
    read off the table, and a null ``label_vocabulary`` from the data's string labels."""
    fill_table_columns(params, data, canned_family(params["kind"]).COLUMN_LISTS, ignore)


def _checked_features(features, lists) -> dict:
    """Every feature a column reads is in the data (else one line naming it); a categorical value
    outside a vocabulary without ``oov_buckets`` fails the step naming the column (TensorFlow would
    give it no weight without a word)."""
    for key, specs in lists.items():
        for index, spec in enumerate(specs):
            for name in _raw_keys(spec):
                if name not in features:
                    raise ConfigError(f"{key}[{index}]: the data has no feature {name!r} (it has "
                                      f"{', '.join(sorted(features))}); fix the column or data.features")
            _check_dtype(spec, features, f"{key}[{index}]")
            if spec.get("categorical") is not None and spec.get("vocabulary") and not spec.get("oov_buckets"):
                name = spec["categorical"]
                features = {**features, name: _vocabulary_checked(features[name], list(spec["vocabulary"]),
                                                                  f"{key}[{index}]", name)}
            if spec.get("categorical") is not None and spec.get("identity") is not None:
                name = spec["categorical"]
                features = {**features, name: _identity_checked(features[name], int(spec["identity"]),
                                                                f"{key}[{index}]", name)}
    return features


def _check_dtype(spec: dict, features, where: str) -> None:
    """A numeric or bucketized column reads numbers, an identity column integers: a feature of strings is
    refused naming the entry and the column kind that reads it."""
    for kind in ("numeric", "bucketized", "categorical"):
        name = spec.get(kind)
        if name is None or (kind == "categorical" and spec.get("identity") is None):
            continue
        values = features[name]
        dtype = values.dtype
        if dtype == tf.string or (kind == "categorical" and not dtype.is_integer):
            reads = "integers" if kind == "categorical" else "numbers"
            raise ConfigError(f"{where}: {{{kind}: {name}{', identity: N' if kind == 'categorical' else ''}}} reads "
                              f"{reads}, and the feature {name!r} holds {dtype.name}; use {{categorical: {name}, "
                              "vocabulary: [...]}} (or hash_buckets: N) for values that are names")


def _identity_checked(values, buckets: int, where: str, name: str):
    """``values``, once checked to lie in [0, ``buckets``) (TensorFlow's own failure names no column)."""
    flat = tf.reshape(values.values if isinstance(values, tf.SparseTensor) else values, [-1])
    inside = tf.logical_and(flat >= 0, flat < buckets)
    check = tf.debugging.Assert(tf.reduce_all(inside), [
        f"{where}: a value of {name} is outside its identity: {buckets} buckets (0..{buckets - 1}), e.g.",
        tf.boolean_mask(flat, ~inside)[:1], "; set identity to the largest value plus one"],
        name=f"identity_check_{name}")
    with tf.control_dependencies([check]):
        if isinstance(values, tf.SparseTensor):
            return tf.SparseTensor(values.indices, tf.identity(values.values), values.dense_shape)
        return tf.identity(values)


def _raw_keys(spec: dict):
    for kind in ("numeric", "bucketized", "categorical"):
        if spec.get(kind) is not None:
            yield str(spec[kind])
    if spec.get("weighted") is not None and spec.get("weight") is not None:
        yield str(spec["weight"])
    for key in spec.get("crossed") or ():
        if not str(key).endswith("_bucketized"):
            yield str(key)


def _vocabulary_checked(values, vocabulary, where: str, name: str):
    """``values``, once checked to lie in ``vocabulary``."""
    flat = tf.reshape(values.values if isinstance(values, tf.SparseTensor) else values, [-1, 1])
    if flat.dtype != tf.string:
        flat = tf.strings.as_string(flat)
    known = tf.reduce_any(tf.equal(flat, tf.constant([str(v) for v in vocabulary])), axis=1)
    check = tf.debugging.Assert(tf.reduce_all(known), [
        f"{where}: a value of {name} is not in its vocabulary, e.g.", tf.boolean_mask(flat[:, 0], ~known)[:1],
        "; add it to the vocabulary or set oov_buckets: 1"], name=f"vocabulary_check_{name}")
    with tf.control_dependencies([check]):
        if isinstance(values, tf.SparseTensor):
            return tf.SparseTensor(values.indices, tf.identity(values.values), values.dense_shape)
        return tf.identity(values)
