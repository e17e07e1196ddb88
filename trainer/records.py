"""A run's records on disk: JSON files written atomically, and the metrics log (``metrics.jsonl``)."""

import contextlib
import csv
import json
import math
import logging
import os
import time
from typing import Dict, List, Optional, Tuple

from trainer.errors import RecordError

log = logging.getLogger(__name__)

# Beside a run dir's ``.hydra/overrides.yaml``, written by a Python program's training call
# (``trainer.estimator.resume_record``): the callables the train command must be given to resume it.
PROGRAM_RECORD = "program.yaml"


def _json_safe(value, path: str, found: List[str]):
    """``value`` with each NaN or infinite float made null (JSON has neither), its key path in ``found``."""
    if isinstance(value, float) and not math.isfinite(value):
        found.append(path)
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def json_safe(payload: Dict) -> Dict:
    """``payload`` as valid JSON: a NaN or infinite number becomes null, and ``non_finite`` lists
    where each one was (a reader sees why the value is missing; ``json`` would write bare NaN)."""
    found: List[str] = []
    safe = _json_safe(payload, "", found)
    if found:
        safe["non_finite"] = found
    return safe


def write_json(path: str, payload: Dict, indent: int = 2) -> None:
    """Write ``payload`` to ``path`` through a temporary file, so a reader never sees half of it;
    valid JSON whatever its numbers (:func:`json_safe`)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(json_safe(payload), f, indent=indent, sort_keys=True, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise unwritable(path, e) from None


def unwritable(path: str, error: OSError) -> RecordError:
    """The one-line error for a record file that cannot be written."""
    return RecordError(f"cannot write {path} ({error.strerror or error}); free space there or make it writable, "
                       "then run the same command: it resumes from the last checkpoint")


def read_json(path: str) -> Dict:
    """The JSON object in ``path``; {} when it is missing or does not parse."""
    try:
        with open(path) as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def read_rows(path: str) -> List[Dict]:
    """The rows of a metrics log (``metrics.jsonl``); [] when it is missing. A last line with no newline
    at its end (what a kill in the middle of an append leaves) is not a row and is left out; any other
    line that is not a JSON object fails in one line naming the file and the line.

    Raises:
      RecordError: a complete line that is not a JSON object.
    """
    try:
        with open(path) as f:
            lines = f.read().split("\n")[:-1]  # the last piece is "" or a cut-off line
    except FileNotFoundError:
        return []
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            raise RecordError(f"{path}:{number}: not a row of the metrics log ({line[:60]!r}); delete that line "
                              f"(or restore the file) and run the same command")
        rows.append(row)
    return rows


def drop_cut_off_line(path: str) -> None:
    """Cuts a last line that has no newline (a kill in the middle of an append) off ``path``, so that the
    next row starts on a line of its own; logs what was dropped."""
    try:
        with open(path, "rb+") as f:
            data = f.read()
            if not data or data.endswith(b"\n"):
                return
            keep = data.rfind(b"\n") + 1
            f.truncate(keep)
    except FileNotFoundError:
        return
    log.warning("%s: its last line was cut off (the process was killed while writing it); dropped it: %r", path,
                data[keep:keep + 80].decode("utf-8", "replace"))


class MetricsLog:
    """Training and evaluation records: the last of each, a JSON-lines file of all (``path``), and
    the same rows as CSV beside it (``metrics.csv``, for spreadsheets: one column per key, empty
    where a row has none; rewritten with the wider header when a new key appears)."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self.train: Dict[str, float] = {}
        self.eval: Dict[str, float] = {}
        self._header: Optional[List[str]] = None
        self._checked = False

    def record(self, kind: str, step: int, values: Dict[str, float]) -> None:
        row = {"kind": kind, "step": int(step), "time": round(time.time(), 3)}
        row.update({k: v if isinstance(v, int) else float(v) for k, v in values.items()})
        if kind == "eval":
            self.eval = dict(row)
        else:
            self.train = dict(row)
        if self.path:
            try:
                if not self._checked:
                    drop_cut_off_line(self.path)
                    self._checked = True
                with open(self.path, "a") as f:
                    f.write(json.dumps(json_safe(row), allow_nan=False) + "\n")
            except OSError as e:
                raise unwritable(self.path, e) from None
            path = os.path.splitext(self.path)[0] + ".csv"
            try:
                self._write_csv(path, json_safe(row))
            except OSError as e:
                raise unwritable(path, e) from None

    def _write_csv(self, path: str, row: Dict) -> None:
        if self._header is None and os.path.exists(path):
            with open(path, newline="") as f:
                self._header = next(csv.reader(f), None)
        if self._header is not None and set(row) <= set(self._header):
            with open(path, "a", newline="") as f:
                csv.DictWriter(f, self._header).writerow(row)
            return
        rows = read_rows(self.path)  # every row so far, this one included
        keys = {key for r in rows for key in r} - {"kind", "step", "time"}
        self._header = ["kind", "step", "time", *sorted(keys)]
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            with open(temporary, "w", newline="") as f:
                writer = csv.DictWriter(f, self._header)
                writer.writeheader()
                writer.writerows(rows)
            os.replace(temporary, path)
        except OSError:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise


def failure_record(model_name: str, session_kind, error: str, **fields) -> Dict:
    """``metrics.json`` of a run that failed: the one line of its error, what ran, this process, when."""
    return {"status": "failed", "error": error, "model": model_name, "session": str(session_kind), **fields,
            "pid": os.getpid(), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def eval_key(metric: str) -> str:
    """The ``metrics.json`` key of eval metric ``metric``: ``eval_`` prefixed once (a model's own
    ``eval_accuracy`` stays ``eval_accuracy``)."""
    return metric if metric.startswith("eval_") else f"eval_{metric}"


def resolve_objective(objective: str, metrics, default: str = "accuracy") -> Tuple[str, Optional[str]]:
    """The eval metric ``eval.objective`` names among the model's ``metrics``, and a warning or None.

    ``accuracy`` also finds ``eval_accuracy`` (and the reverse). When the default objective is not
    a metric of the model, the first metric with ``accuracy`` in its name stands in, else the loss.

    Raises:
      ValueError: ``objective`` (not the default) names no metric of the model.
    """
    names = sorted(metrics)
    for candidate in (objective, eval_key(objective), objective[len("eval_"):] if objective.startswith("eval_") else None):
        if candidate in names:
            return candidate, None
    if objective == default:
        stand_in = next((n for n in names if "accuracy" in n), None) or next((n for n in names if "loss" in n), None)
        if stand_in is not None:
            return stand_in, (f"eval.objective={objective}: the model has no such eval metric; using {stand_in} "
                              f"(set eval.objective to one of {names})")
    raise ValueError(f"eval.objective={objective}: the model has no such eval metric; use one of {names}")
