"""A run's records on disk: JSON files written atomically, and the metrics log (``metrics.jsonl``)."""

import json
import os
import time
from typing import Dict, Optional


def write_json(path: str, payload: Dict, indent: int = 2) -> None:
    """Write ``payload`` to ``path`` through a temporary file, so a reader never sees half of it."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=indent, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path: str) -> Dict:
    """The JSON object in ``path``; {} when it is missing or does not parse."""
    try:
        with open(path) as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


class MetricsLog:
    """Training and evaluation records: the last of each, and a JSON-lines file of all."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self.train: Dict[str, float] = {}
        self.eval: Dict[str, float] = {}

    def record(self, kind: str, step: int, values: Dict[str, float]) -> None:
        row = {"kind": kind, "step": int(step), "time": round(time.time(), 3)}
        row.update({k: float(v) for k, v in values.items()})
        if kind == "eval":
            self.eval = dict(row)
        else:
            self.train = dict(row)
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(row) + "\n")
