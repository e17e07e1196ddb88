"""A census-style table, generated: the shape of the UCI Adult data the wide-and-deep tutorials used,
with numbers this module makes up (no download). Columns:

- ``age``, ``education_num``, ``hours_per_week``: numeric;
- ``workclass`` (6 values), ``education`` (12), ``relationship`` (5): categorical strings;
- ``occupation``: a high-cardinality string (300 values), the column one hashes;
- ``fnlwgt``: an example weight;
- ``income_bracket``: the label, ``"<=50K"`` or ``">50K"``, from a noisy logistic rule over the
  other columns (an interaction of education and hours included), so models can learn it, and a
  model that uses the categorical columns learns it better than one that does not.

``python -m bench.census DIR`` writes ``DIR/train.csv`` and ``DIR/test.csv``; ``write_csv(path, rows, seed)`` writes one
table with a header line; ``table(rows, seed)`` returns the
columns as numpy arrays. Both are deterministic in ``seed``. Numpy only, so programs run under
other TensorFlow versions can import it too.
"""

import csv

import numpy as np

WORKCLASS = ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov"]
EDUCATION = ["Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college", "Assoc-acdm", "Assoc-voc",
             "7th-8th", "Doctorate", "Prof-school", "10th"]
RELATIONSHIP = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative"]
COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "relationship", "occupation",
           "hours_per_week", "income_bracket"]
LABELS = ["<=50K", ">50K"]

_EDUCATION_EFFECT = np.linspace(-1.2, 1.5, len(EDUCATION))
_RELATIONSHIP_EFFECT = np.array([0.6, -1.5, 0.8, -0.4, -0.8])
_WORKCLASS_EFFECT = np.array([0.0, 0.3, 0.9, 0.4, 0.1, 0.0])


def table(rows: int, seed: int = 0) -> dict:
    """The columns, as numpy arrays (strings as ``object`` arrays)."""
    rng = np.random.RandomState(seed)
    age = rng.randint(17, 80, rows)
    education = rng.randint(0, len(EDUCATION), rows)
    education_num = np.clip(education + rng.randint(-1, 2, rows) + 4, 1, 16)
    workclass = rng.randint(0, len(WORKCLASS), rows)
    relationship = rng.randint(0, len(RELATIONSHIP), rows)
    occupation = rng.zipf(1.6, rows) % 300
    hours = np.clip(rng.normal(40, 12, rows), 1, 99).round().astype(int)
    occupation_effect = np.sin(occupation * 1.7) * 0.8
    score = (0.04 * (age - 40) - 0.0006 * (age - 45) ** 2 + _EDUCATION_EFFECT[education]
             + _RELATIONSHIP_EFFECT[relationship] + _WORKCLASS_EFFECT[workclass] + occupation_effect
             + 0.03 * (hours - 40) * (education > 6) - 0.6)
    label = (score + rng.logistic(0, 0.7, rows) > 0).astype(int)
    return {
        "age": age.astype(np.float64),
        "workclass": np.array(WORKCLASS, dtype=object)[workclass],
        "fnlwgt": rng.uniform(0.5, 1.5, rows).round(3),
        "education": np.array(EDUCATION, dtype=object)[education],
        "education_num": education_num.astype(np.float64),
        "relationship": np.array(RELATIONSHIP, dtype=object)[relationship],
        "occupation": np.array([f"occ-{o:03d}" for o in occupation], dtype=object),
        "hours_per_week": hours.astype(np.float64),
        "income_bracket": np.array(LABELS, dtype=object)[label],
    }


def write_csv(path: str, rows: int, seed: int = 0) -> str:
    """Writes ``rows`` rows with a header line to ``path``; returns ``path``."""
    columns = table(rows, seed)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for i in range(rows):
            writer.writerow([_cell(columns[name][i]) for name in COLUMNS])
    return path


def _cell(value):
    return f"{value:g}" if isinstance(value, float) else value


def main(argv=None):
    import argparse
    import os

    parser = argparse.ArgumentParser(description="Write a census-style table: DIR/train.csv and DIR/test.csv.")
    parser.add_argument("dir")
    parser.add_argument("--rows", type=int, default=8000, help="training rows (the test table has a quarter)")
    args = parser.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    for name, rows, seed in (("train.csv", args.rows, 0), ("test.csv", args.rows // 4, 1)):
        print(write_csv(os.path.join(args.dir, name), rows, seed))


if __name__ == "__main__":
    main()
