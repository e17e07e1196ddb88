"""User code named in the config: functions by dotted path, objects by ``_target_``.

Every import of user code goes through :func:`load_callable` and every
instantiation through :func:`instantiate`, so a bad path or a failing constructor
is a one-line ConfigError naming the key, and user code always receives plain
Python containers (dicts and lists), never OmegaConf nodes.
"""

import inspect
import os
from typing import Any, Callable, FrozenSet

import hydra.utils
from omegaconf import OmegaConf

from trainer.errors import ConfigError


def plain(value: Any) -> Any:
    """``value`` with OmegaConf containers turned into dicts and lists (interpolations resolved)."""
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def load_callable(path: Any, key: str) -> Callable:
    """The function or class at dotted ``path``, given as config ``key``; a callable object is itself
    (a program's own function, which the Estimator API puts in the config as it is).

    Raises:
      ConfigError: it cannot be imported, or is not callable.
    """
    if callable(path) and not isinstance(path, str):
        return path
    try:
        found = hydra.utils.get_method(path) if "." in str(path) else None
    # broad: importing the user's module runs its code, which may raise anything
    except Exception as e:
        cause = e.__cause__ or e
        raise ConfigError(f"{key}={path}: cannot import it ({type(cause).__name__}: {cause}); "
                          "give a dotted path such as my_pkg.my_module.fn, importable from the working dir") from None
    if found is None or not callable(found):
        raise ConfigError(f"{key}={path}: not a dotted path to a function; give one such as my_pkg.my_module.fn")
    return found


def target_name(value: Any) -> str:
    """A config value naming user code, as records write it: the dotted path itself, or for a program's
    own object (what its ``stands_for`` holds) the module and qualified name it was defined under."""
    if isinstance(value, str) or value is None:
        return value
    target = getattr(value, "stands_for", value)
    target = getattr(target, "func", target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', type(target).__name__)}"


def callable_name(key: str, path: Any, fn: Any) -> str:
    """How a message names a user's function: ``key=path`` where the config named it by that path;
    else (an object a program handed to the Estimator API) where it was defined, such as
    ``the model_fn model_fn (program.py:22)``. A wrapper names the function its ``stands_for`` holds."""
    target = getattr(fn, "stands_for", fn)
    target = getattr(target, "func", target)
    qualname = getattr(target, "__qualname__", type(target).__name__)
    if path == f"{getattr(target, '__module__', '')}.{qualname}":
        return f"{key}={path}"
    code = getattr(target, "__code__", None)
    where = f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})" if code is not None else ""
    kind = {"model.fn": "model_fn", "export.serving_input_fn": "serving_input_receiver_fn"}.get(
        key, "input_fn" if key.endswith("_fn") else "function")
    return f"the {kind} {qualname}{where}"


def instantiate(entry: Any, key: str) -> Any:
    """Build ``entry`` (a mapping with ``_target_`` and its arguments) with plain-Python arguments.

    Raises:
      ConfigError: no ``_target_``, or building it failed (the message names ``key``).
    """
    entry = plain(entry)
    if not isinstance(entry, dict) or "_target_" not in entry:
        raise ConfigError(f"{key}: no _target_; give the class or factory to build, e.g. {{_target_: my_pkg.MyHook}}")
    if callable(entry["_target_"]):  # a program's own factory (the Estimator API), which has no dotted path
        return entry["_target_"](**{k: v for k, v in entry.items() if k != "_target_"})
    try:
        return hydra.utils.instantiate(entry, _convert_="all")
    # broad: instantiating runs the user's class or factory, which may raise anything
    except Exception as e:
        cause = e.__cause__ or e
        if isinstance(cause, ConfigError):
            raise ConfigError(f"{key}: {cause}") from None
        raise ConfigError(f"{key}: cannot build {entry['_target_']} ({_innermost(e)})") from None


def _has_target(value: Any) -> bool:
    if isinstance(value, dict):
        return "_target_" in value or any(_has_target(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_target(v) for v in value)
    return False


def _innermost(exc: BaseException) -> str:
    """``Type: message`` of the innermost cause, on one line (Hydra wraps import errors in three)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}"


def instantiate_params(params: Any, key: str) -> dict:
    """``params`` as plain Python with every nested ``_target_`` entry built (feature columns, layers,
    initializers given in the config), as the model_fn expects its ``params``."""
    params = plain(params) or {}
    if not _has_target(params):
        return params
    try:
        return hydra.utils.instantiate(params, _convert_="all")
    # broad: instantiating runs the user's class or factory, which may raise anything
    except Exception as e:
        raise ConfigError(f"{key}: cannot build an entry with _target_ ({_innermost(e)})") from None


def declared_args(fn: Callable, key: str, path: str, allowed, required=()) -> FrozenSet[str]:
    """The argument names ``fn`` declares, checked against what the runner can pass (``allowed``).

    Raises:
      ConfigError: ``fn`` requires an argument outside ``allowed``, or lacks one of ``required``.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={path}: cannot read its arguments; give a plain Python function") from None
    named = [p for p in signature.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [p.name for p in named if p.name not in allowed and p.default is p.empty]
    missing = [name for name in required if name not in {p.name for p in named}]
    if unknown or missing or any(p.kind == p.POSITIONAL_ONLY for p in named):
        raise ConfigError(f"{key}={path} takes {signature}; it may take {', '.join(allowed)} (by these names"
                          f"{', ' + ' and '.join(required) + ' required' if required else ''}), as Estimator passed them")
    return frozenset(p.name for p in named if p.name in allowed)
