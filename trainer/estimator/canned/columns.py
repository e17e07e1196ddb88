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

import os
from collections.abc import Sequence as SequenceType
from typing import Dict, List, Sequence, Tuple

import tensorflow as tf

fc = tf.feature_column
KINDS = ("numeric", "bucketized", "categorical", "crossed", "embedding", "indicator", "weighted")


def build_columns(lists: Dict[str, Sequence[dict]]) -> Dict[str, List]:
    """``{list key: [spec, ...]}`` -> ``{list key: [feature column, ...]}``; categorical and bucketized
    columns declared in one list may be referred to from any."""
    declared = {}
    for key, specs in lists.items():
        if isinstance(specs, (str, dict)) or not isinstance(specs, SequenceType):
            raise ValueError(f"{key} takes a list of column specs, e.g. [{{numeric: age}}]; got {specs!r}")
        for index, spec in enumerate(specs or ()):
            kind, name = _kind(spec, f"{key}[{index}]")
            if kind == "categorical":
                declared[name] = _categorical(spec, name, f"{key}[{index}]")
            elif kind == "bucketized":
                declared[f"{name}_bucketized"] = _bucketized(spec, name, f"{key}[{index}]")
    built = {}
    for key, specs in lists.items():
        wrapped = {spec.get(k) for spec in specs or () for k in ("embedding", "indicator", "weighted")
                   if isinstance(spec, dict) and isinstance(spec.get(k), str)}
        columns = [_column(spec, f"{key}[{i}]", declared) for i, spec in enumerate(specs or ())
                   if not (isinstance(spec.get("categorical"), str) and spec["categorical"] in wrapped)]  # a declaration only
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
    kind, name = kinds[0], spec[kinds[0]]
    if kind == "crossed":
        names = _list(spec, "crossed", where, "feature names")
        if len(names) < 2 or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"{where}: crossed takes a list of two or more feature names, e.g. {{crossed: [education, "
                             f"occupation], hash_buckets: 1000}}; got {name!r}")
        return kind, [str(n) for n in names]
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: {kind} takes one feature name, e.g. {{{kind}: age}}; got {name!r}")
    return kind, name


def _column(spec: dict, where: str, declared: dict):
    kind, name = _kind(spec, where)
    if kind == "numeric":
        _only(spec, where, ("numeric", "shape", "default"))
        return fc.numeric_column(name, shape=_shape(spec, where), default_value=_default(spec, where))
    if kind == "bucketized":
        return declared[f"{name}_bucketized"]
    if kind == "categorical":
        return declared[name]
    if kind == "crossed":
        _only(spec, where, ("crossed", "hash_buckets"))
        # a declared bucketized column by its name (age_bucketized); anything else crosses the raw feature
        keys = [declared[k] if str(k).endswith("_bucketized") and k in declared else str(k) for k in name]
        return fc.crossed_column(keys, hash_bucket_size=_count(spec, "hash_buckets", where, required=True))
    categorical = _declared(name, declared, where, kind)
    if kind == "embedding":
        _only(spec, where, ("embedding", "dimension", "combiner"))
        combiner = spec.get("combiner", "mean")
        if combiner not in ("mean", "sqrtn", "sum"):
            raise ValueError(f"{where}: combiner={combiner!r}; use mean, sqrtn or sum")
        return fc.embedding_column(categorical, dimension=_count(spec, "dimension", where, required=True),
                                   combiner=combiner)
    if kind == "indicator":
        _only(spec, where, ("indicator",))
        return fc.indicator_column(categorical)
    _only(spec, where, ("weighted", "weight"))
    weight = _required(spec, "weight", where)
    if not isinstance(weight, str) or not weight:
        raise ValueError(f"{where}: weight takes the name of the feature holding the weights; got {weight!r}")
    return fc.weighted_categorical_column(categorical, weight)


def _categorical(spec: dict, name: str, where: str):
    _only(spec, where, ("categorical", "vocabulary", "vocabulary_file", "identity", "hash_buckets", "oov_buckets"))
    ways = [k for k in ("vocabulary", "vocabulary_file", "identity", "hash_buckets") if spec.get(k) is not None]
    if len(ways) != 1:
        raise ValueError(f"{where}: categorical column {name!r} needs exactly one of vocabulary, vocabulary_file, "
                         f"identity, hash_buckets (got {ways or 'none'})")
    oov = _count(spec, "oov_buckets", where, minimum=0) or 0
    if ways[0] == "vocabulary":
        vocabulary = _list(spec, "vocabulary", where, "values")
        if not vocabulary or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in vocabulary):
            raise ValueError(f"{where}: the vocabulary of {name!r} is a list of strings (or integers), e.g. [a, b]; "
                             f"got {spec['vocabulary']!r}")
        repeated = sorted({str(v) for v in vocabulary if vocabulary.count(v) > 1})
        if repeated:
            raise ValueError(f"{where}: the vocabulary of {name!r} repeats {repeated}; give each value once")
        return fc.categorical_column_with_vocabulary_list(name, vocabulary, num_oov_buckets=oov)
    if ways[0] == "vocabulary_file":
        path = spec["vocabulary_file"]
        if not isinstance(path, str) or not os.path.isfile(path):
            raise ValueError(f"{where}: vocabulary_file={path!r} is not a file; give the path of a file with one value "
                             "per line")
        return fc.categorical_column_with_vocabulary_file(name, path, num_oov_buckets=oov)
    if ways[0] == "identity":
        return fc.categorical_column_with_identity(name, _count(spec, "identity", where))
    return fc.categorical_column_with_hash_bucket(name, _count(spec, "hash_buckets", where))


def _bucketized(spec: dict, name: str, where: str):
    _only(spec, where, ("bucketized", "boundaries"))
    given = _required(spec, "boundaries", where)
    boundaries = _list(spec, "boundaries", where, "numbers")
    if not boundaries or not all(_is_number(b) for b in boundaries):
        raise ValueError(f"{where}: the boundaries of {name!r} are a list of increasing numbers, e.g. [18, 25, 30]; "
                         f"got {given!r}")
    boundaries = [float(b) for b in boundaries]
    if boundaries != sorted(set(boundaries)):
        raise ValueError(f"{where}: the boundaries of {name!r} must increase, got {boundaries}")
    return fc.bucketized_column(fc.numeric_column(name), boundaries)


def _declared(name, declared: dict, where: str, kind: str):
    if name not in declared:
        raise ValueError(f"{where}: {{{kind}: {name}}} refers to {name!r}, which no list declares; add "
                         f"{{categorical: {name}, vocabulary: [...]}} (or hash_buckets/identity) to one of them")
    return declared[name]


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _list(spec: dict, key: str, where: str, of: str) -> list:
    """``spec[key]`` as a list; a string or a scalar is refused (a string would be read letter by letter)."""
    value = spec.get(key)
    if isinstance(value, str) or not isinstance(value, SequenceType):
        raise ValueError(f"{where}: {key} takes a list of {of}, e.g. {key}: [...]; got {value!r}")
    return list(value)


def _count(spec: dict, key: str, where: str, minimum: int = 1, required: bool = False):
    """``spec[key]``, an integer >= ``minimum`` (None when absent and not required)."""
    value = _required(spec, key, where) if required else spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}: {key}={value!r}; it takes an integer >= {minimum}")
    return value


def _shape(spec: dict, where: str) -> tuple:
    """A numeric column's shape: a list of positive sizes, or one size (as Estimator took it); default (1,)."""
    shape = spec.get("shape")
    if shape is None:
        return (1,)
    sizes = [shape] if isinstance(shape, int) and not isinstance(shape, bool) else shape
    if isinstance(sizes, str) or not isinstance(sizes, SequenceType) or not sizes or \
            not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
        raise ValueError(f"{where}: shape={shape!r}; it takes a list of positive sizes, e.g. [3] (or one size, 3)")
    return tuple(sizes)


def _default(spec: dict, where: str):
    default = spec.get("default")
    values = default if isinstance(default, SequenceType) and not isinstance(default, str) else [default]
    if default is not None and not all(_is_number(v) for v in values):
        raise ValueError(f"{where}: default={default!r}; it takes a number (or a list of them, one per value)")
    return default if default is None or _is_number(default) else tuple(values)


def _required(spec: dict, key: str, where: str):
    if spec.get(key) is None:
        raise ValueError(f"{where}: {sorted(spec)} needs {key}")
    return spec[key]


def _only(spec: dict, where: str, allowed: Sequence[str]) -> None:
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (this kind takes {', '.join(allowed)})")
