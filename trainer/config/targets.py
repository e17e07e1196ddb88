"""User code named in the config: functions by dotted path, objects by ``_target_``.

Every import of user code goes through :func:`load_callable` and every
instantiation through :func:`instantiate`, so a bad path or a failing constructor
is a one-line ConfigError naming the key, and user code always receives plain
Python containers (dicts and lists), never OmegaConf nodes.
"""

from typing import Any, Callable

import hydra.utils
from omegaconf import OmegaConf

from trainer.errors import ConfigError


def plain(value: Any) -> Any:
    """``value`` with OmegaConf containers turned into dicts and lists (interpolations resolved)."""
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def load_callable(path: str, key: str) -> Callable:
    """The function or class at dotted ``path``, given as config ``key``.

    Raises:
      ConfigError: it cannot be imported, or is not callable.
    """
    try:
        found = hydra.utils.get_method(path) if "." in str(path) else None
    except Exception as e:
        cause = e.__cause__ or e
        raise ConfigError(f"{key}={path}: cannot import it ({type(cause).__name__}: {cause}); "
                          "give a dotted path such as my_pkg.my_module.fn, importable from the working dir") from None
    if found is None or not callable(found):
        raise ConfigError(f"{key}={path}: not a dotted path to a function; give one such as my_pkg.my_module.fn")
    return found


def instantiate(entry: Any, key: str) -> Any:
    """Build ``entry`` (a mapping with ``_target_`` and its arguments) with plain-Python arguments.

    Raises:
      ConfigError: no ``_target_``, or building it failed (the message names ``key``).
    """
    entry = plain(entry)
    if not isinstance(entry, dict) or "_target_" not in entry:
        raise ConfigError(f"{key}: no _target_; give the class or factory to build, e.g. {{_target_: my_pkg.MyHook}}")
    try:
        return hydra.utils.instantiate(entry, _convert_="all")
    except Exception as e:
        cause = e.__cause__ or e
        if isinstance(cause, ConfigError):
            raise ConfigError(f"{key}: {cause}") from None
        raise ConfigError(f"{key}: cannot build {entry['_target_']} ({type(cause).__name__}: {cause})") from None
