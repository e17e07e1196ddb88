"""The ``model_dir``'s record for the ``train`` command, so that ``train resume=MODEL_DIR`` continues a
model_dir a program trained through this API.

After a training call is accepted, the model_dir gets the record the ``train`` command keeps in a
run dir (``.hydra/overrides.yaml``): the call's config as overrides, with the program's model_fn and
input_fn under their import paths. A callable the ``train`` command cannot import (a lambda, a
closure, a function of a script run as ``__main__``) is listed in ``.hydra/program.yaml`` instead:
``train resume=MODEL_DIR`` then asks for it by key (``model.fn=...``, ``data.train_fn=...``) in one
line, naming where the program defined it.
"""

import importlib
import json
import os
import sys
from typing import Any, Dict, Optional

from omegaconf import OmegaConf

from trainer.estimator.plan import Call
from trainer.records import PROGRAM_RECORD

_DROPPED = ("checkpoint.listeners.",)  # a call's saving listeners: Python objects of that call only


def importable_name(obj: Any) -> Optional[str]:
    """The dotted path under which a new process imports ``obj`` itself, or None (a lambda, a closure,
    a partial, a function of a script run as ``__main__``)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        return None
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)  # python -m pkg.module: importable
        module = spec.name if spec is not None and spec.name != "__main__" else None
        if module is None:
            return None
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    # broad: importing the program's module runs its code: any error means not importable
    except Exception:
        return None
    return f"{module}.{qualname}" if found is obj else None


def describe(obj: Any) -> str:
    """Where the program defined ``obj``: ``make_model_fn.<locals>.model_fn (estimator_main.py:37)``."""
    target = getattr(obj, "func", obj)
    code = getattr(target, "__code__", None)
    where = f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})" if code is not None else ""
    return f"{getattr(target, '__qualname__', type(target).__name__)}{where}"


def _yaml_value(value: Any) -> Optional[str]:
    """``value`` as a Hydra override value, or None when it is not plain data."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        items = [_yaml_value(v) for v in value]
        return None if None in items else "[" + ",".join(items) + "]"
    if isinstance(value, dict):
        if not all(isinstance(k, str) and k.isidentifier() for k in value):
            return None
        items = {k: _yaml_value(v) for k, v in value.items()}
        return None if None in items.values() else "{" + ",".join(f"{k}:{v}" for k, v in items.items()) + "}"
    return None


def _round_trips(key: str, value: str, expected: Any) -> bool:
    """Whether ``key=value``, read back as ``train resume=`` reads it (Hydra's override parser, then
    OmegaConf resolving interpolations), gives ``expected`` exactly: a string holding ``${...}``, a
    backslash, a newline or a NaN would not, and is then asked for by key rather than changed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_override(f"{key}={value}").value()
        back = OmegaConf.to_container(OmegaConf.create({"p": parsed}), resolve=True)["p"]
    except Exception:  # any failure to read it back means it would not come back as it was
        return False
    return _same(back, expected)


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in b)
    if isinstance(b, (list, tuple)):
        return isinstance(a, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _recorded(key: str, value: Any) -> Optional[str]:
    """``key=value`` as an override the train command reads back as ``value``, or None."""
    text = _yaml_value(value)
    return text if text is not None and _round_trips(key, text, value) else None


def write_record(model_dir: str, call: Call, callables: Dict[str, Any], params: Dict) -> None:
    """Write the train command's record of a training ``call`` into ``model_dir``: its config groups and
    keys as overrides, each key of ``callables`` (``model.fn``, ``data.train_fn``: the user's objects)
    under its import path, ``model.params`` from ``params``; what cannot be recorded is listed in
    ``program.yaml``, to be given by key."""
    kept = [f"{group}={option}" for group, option in call.choices().items()]
    needs = {}
    for key, value in call.settings.items():
        if key.startswith(_DROPPED):
            continue
        if key in callables:
            value = importable_name(callables[key])
            if value is None:
                needs[key] = describe(callables[key])
                continue
        text = _recorded(key, value)
        if text is None:
            needs[key] = "value, which an override cannot hold as the program gave it"
            continue
        kept.append(f"{key}={text}")
    value = _recorded("+model.params", params) if isinstance(params, dict) else None
    if value is None:
        needs["model.params"] = "params (values that are not plain data)"
    elif params:
        kept.append(f"+model.params={value}")
    record = os.path.join(model_dir, ".hydra")
    os.makedirs(record, exist_ok=True)
    OmegaConf.save(OmegaConf.create(kept), os.path.join(record, "overrides.yaml"))
    program = getattr(sys.modules.get("__main__"), "__file__", None)
    OmegaConf.save(OmegaConf.create({"program": os.path.abspath(program) if program else None, "needs": needs}),
                   os.path.join(record, PROGRAM_RECORD))
