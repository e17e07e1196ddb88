"""Feature columns from plain specs (YAML, JSON): what ``model=dnn_classifier`` and its siblings read
from ``model.params.feature_columns``. One dict per column, its kind as the key:

    {numeric: age}                                   # shape: [2] for a vector, default: a fill value
    {bucketized: age, boundaries: [18, 25, 30]}      # of a numeric column
    {categorical: education, vocabulary: [a, b]}     # or vocabulary_file: PATH, identity: N,
                                                     # hash_buckets: N; oov_buckets: N (lists, files)
    {crossed: [education, occupation], hash_buckets: 1000}
    {embedding: occupation, dimension: 8}            # of a declared categorical column
    {indicator: workclass}                           # one-hot of a declared categorical column
    {weighted: terms, weight: term_weights}          # a categorical column weighted by a feature

A categorical column wrapped by an ``embedding``, ``indicator`` or ``weighted`` entry of the same list
is not also a column of that list by itself. A column named by ``embedding``, ``indicator``,
``weighted`` or ``crossed`` is one declared as ``categorical`` (or ``bucketized``, as ``<key>_bucketized``) in any of the model's column lists; a
``crossed`` entry crosses bucketized columns by that name and raw features by their keys (as
Estimator's tutorials crossed ``["education", "occupation"]``). Errors name the list, the entry and the fix.
"""

from typing import Dict, List, Sequence, Tuple

import tensorflow as tf

fc = tf.feature_column
KINDS = ("numeric", "bucketized", "categorical", "crossed", "embedding", "indicator", "weighted")


def build_columns(lists: Dict[str, Sequence[dict]]) -> Dict[str, List]:
    """``{list key: [spec, ...]}`` -> ``{list key: [feature column, ...]}``; categorical and bucketized
    columns declared in one list may be referred to from any."""
    declared = {}
    for key, specs in lists.items():
        for index, spec in enumerate(specs or ()):
            kind, name = _kind(spec, f"{key}[{index}]")
            if kind == "categorical":
                declared[name] = _categorical(spec, name, f"{key}[{index}]")
            elif kind == "bucketized":
                declared[f"{name}_bucketized"] = _bucketized(spec, name, f"{key}[{index}]")
    built = {}
    for key, specs in lists.items():
        wrapped = {spec.get(k) for spec in specs or () for k in ("embedding", "indicator", "weighted")
                   if isinstance(spec, dict)}
        columns = [_column(spec, f"{key}[{i}]", declared) for i, spec in enumerate(specs or ())
                   if not ("categorical" in spec and spec["categorical"] in wrapped)]  # a declaration only
        names = [c.name for c in columns]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"{key} declares {repeated} more than once; give each column once")
        built[key] = columns
    return built


def _kind(spec, where: str) -> Tuple[str, object]:
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: a column is a dict such as {{numeric: age}}, got {spec!r}")
    kinds = [k for k in spec if k in KINDS]
    if len(kinds) != 1:
        raise ValueError(f"{where}: give exactly one of {', '.join(KINDS)} (got {sorted(spec)})")
    return kinds[0], spec[kinds[0]]


def _column(spec: dict, where: str, declared: dict):
    kind, name = _kind(spec, where)
    if kind == "numeric":
        _only(spec, where, ("numeric", "shape", "default"))
        return fc.numeric_column(name, shape=tuple(spec.get("shape") or (1,)), default_value=spec.get("default"))
    if kind == "bucketized":
        return declared[f"{name}_bucketized"]
    if kind == "categorical":
        return declared[name]
    if kind == "crossed":
        _only(spec, where, ("crossed", "hash_buckets"))
        # a declared bucketized column by its name (age_bucketized); anything else crosses the raw feature
        keys = [declared[k] if str(k).endswith("_bucketized") and k in declared else str(k) for k in name]
        return fc.crossed_column(keys, hash_bucket_size=int(_required(spec, "hash_buckets", where)))
    categorical = _declared(name, declared, where, kind)
    if kind == "embedding":
        _only(spec, where, ("embedding", "dimension", "combiner"))
        return fc.embedding_column(categorical, dimension=int(_required(spec, "dimension", where)),
                                   combiner=spec.get("combiner", "mean"))
    if kind == "indicator":
        _only(spec, where, ("indicator",))
        return fc.indicator_column(categorical)
    _only(spec, where, ("weighted", "weight"))
    return fc.weighted_categorical_column(categorical, str(_required(spec, "weight", where)))


def _categorical(spec: dict, name: str, where: str):
    _only(spec, where, ("categorical", "vocabulary", "vocabulary_file", "identity", "hash_buckets", "oov_buckets"))
    ways = [k for k in ("vocabulary", "vocabulary_file", "identity", "hash_buckets") if spec.get(k) is not None]
    if len(ways) != 1:
        raise ValueError(f"{where}: categorical column {name!r} needs exactly one of vocabulary, vocabulary_file, "
                         f"identity, hash_buckets (got {ways or 'none'})")
    oov = int(spec.get("oov_buckets") or 0)
    if ways[0] == "vocabulary":
        vocabulary = list(spec["vocabulary"])
        repeated = sorted({str(v) for v in vocabulary if vocabulary.count(v) > 1})
        if repeated:
            raise ValueError(f"{where}: the vocabulary of {name!r} repeats {repeated}; give each value once")
        return fc.categorical_column_with_vocabulary_list(name, vocabulary, num_oov_buckets=oov)
    if ways[0] == "vocabulary_file":
        return fc.categorical_column_with_vocabulary_file(name, str(spec["vocabulary_file"]), num_oov_buckets=oov)
    if ways[0] == "identity":
        return fc.categorical_column_with_identity(name, int(spec["identity"]))
    return fc.categorical_column_with_hash_bucket(name, int(spec["hash_buckets"]))


def _bucketized(spec: dict, name: str, where: str):
    _only(spec, where, ("bucketized", "boundaries"))
    boundaries = [float(b) for b in _required(spec, "boundaries", where)]
    if boundaries != sorted(set(boundaries)):
        raise ValueError(f"{where}: the boundaries of {name!r} must increase, got {boundaries}")
    return fc.bucketized_column(fc.numeric_column(name), boundaries)


def _declared(name, declared: dict, where: str, kind: str):
    if name not in declared:
        raise ValueError(f"{where}: {{{kind}: {name}}} refers to {name!r}, which no list declares; add "
                         f"{{categorical: {name}, vocabulary: [...]}} (or hash_buckets/identity) to one of them")
    return declared[name]


def _required(spec: dict, key: str, where: str):
    if spec.get(key) is None:
        raise ValueError(f"{where}: {sorted(spec)} needs {key}")
    return spec[key]


def _only(spec: dict, where: str, allowed: Sequence[str]) -> None:
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (this kind takes {', '.join(allowed)})")
