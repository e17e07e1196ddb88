"""Feature column specs read off a table, for the canned models when ``model.params`` declares none
(``trainer.estimator.canned.columns`` builds them). Numeric columns become ``{numeric: name}``; string
columns categorical, with the vocabulary the training files hold (plus one out-of-vocabulary bucket
for values only later data has). For a deep model a categorical column is one-hot up to
``ONE_HOT_LIMIT`` values and an embedding above (dimension about 6 x the 4th root of its size); for a
linear one it is used as is. No TensorFlow here."""

from typing import Dict, List, Sequence

from trainer.data.csv_files import csv_rows
from trainer.data.files import FileSource
from trainer.errors import DataError

ONE_HOT_LIMIT = 50
VOCABULARY_LIMIT = 100_000


def fill_table_columns(params, data, lists: Dict[str, str], ignore: Sequence[str] = ()) -> None:
    """A canned model's null column lists (``lists``: ``model.params`` key -> ``"dnn"`` or ``"linear"``)
    filled with the table's columns, and its null ``label_vocabulary`` with the data's (the names of
    string labels)."""
    if params.get("label_vocabulary") is None and getattr(data, "label_vocabulary", None):
        params["label_vocabulary"] = list(data.label_vocabulary)  # string labels: the classes keep their names
    skip = [*ignore, *([params.weight_column] if params.get("weight_column") else [])]
    for key, role in lists.items():
        if params.get(key) is None:
            params[key] = table_columns(data, role, skip)


def table_columns(source, role: str, skip: Sequence[str] = ()) -> List[dict]:
    """Column specs for ``role`` (``"dnn"`` or ``"linear"``) over every input of ``source`` but ``skip``."""
    if not isinstance(source, FileSource):
        raise DataError("model.params: the feature columns can be read off data=csv or data=tfrecord only; declare "
                        "them (e.g. feature_columns: [{numeric: x}])")
    inputs = {name: f for name, f in source.inputs.items() if name not in set(skip)}
    strings = [name for name, f in inputs.items() if f.dtype == "string" and not f.var_len]
    vocabularies = _vocabularies(source, strings) if strings else {}
    specs = []
    for name, feature in inputs.items():
        if feature.var_len or feature.encoding:
            raise DataError(f"data.features.{name} is {'of variable length' if feature.var_len else 'an image'}; "
                            f"declare the model's feature columns, or add {name} to data.ignore")
        if name in vocabularies:
            specs.extend(_categorical(name, vocabularies[name], role))
        else:
            specs.append({"numeric": name, **({"shape": list(feature.shape)} if feature.shape else {})})
    if not specs:
        raise DataError("data: no feature is left for the model (all ignored); ignore fewer")
    return specs


def _categorical(name: str, vocabulary: List[str], role: str) -> List[dict]:
    column = {"categorical": name, "vocabulary": vocabulary, "oov_buckets": 1}
    if role == "linear":
        return [column]
    if len(vocabulary) + 1 <= ONE_HOT_LIMIT:
        return [column, {"indicator": name}]
    return [column, {"embedding": name, "dimension": max(2, int(round(6 * (len(vocabulary) + 1) ** 0.25)))}]


def _vocabularies(source: FileSource, names: List[str]) -> Dict[str, List[str]]:
    """The sorted distinct values of each string column over the training files."""
    if source.kind != "csv":
        raise DataError(f"data=tfrecord: string features {names} need declared feature columns (their vocabulary is "
                        f"not read off TFRecord files); declare them in model.params")
    seen = {name: set() for name in names}
    for path in source.train_files:
        with csv_rows(path) as rows:
            header = next(rows, [])
            where = {name: header.index(name) for name in names}
            for row in rows:
                for name, index in where.items():
                    if index < len(row):
                        seen[name].add(row[index])
            for name, values in seen.items():
                if len(values) > VOCABULARY_LIMIT:
                    raise DataError(f"data.features.{name}: more than {VOCABULARY_LIMIT:,} distinct strings; declare it "
                                    f"as {{categorical: {name}, hash_buckets: N}} in model.params")
    return {name: sorted(values - {""}) for name, values in seen.items()}


__all__ = ["ONE_HOT_LIMIT", "table_columns"]
