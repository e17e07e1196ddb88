"""A program whose own package is named ``trainer`` (the Cloud ML Engine layout: ``trainer/__init__.py``,
``trainer/task.py``, ``trainer/model.py``) next to the runner's package of the same name.

Python keeps one module per name, so the runner imports all of its own modules first and then gives
the name ``trainer`` (and any ``trainer.<sub>`` the program's package also has) to the program; the
runner's modules stay in ``sys.modules`` under their dotted names, which is where its own
``from trainer.<module> import ...`` statements find them, and ``trainer.estimator.core`` holds the
package object it calls (``trainer.run``).
"""

import importlib
import logging
import os
import pkgutil
import sys

log = logging.getLogger(__name__)

_OPTIONAL = ("trainer.sweep", "trainer.tracking")  # need the extras; the Estimator API never imports them


def user_package(root: str):
    """The dir of a package named ``trainer`` under ``root`` that is not the runner's, or None."""
    import trainer

    path = os.path.join(root, "trainer")
    if not os.path.isfile(os.path.join(path, "__init__.py")):
        return None
    ours = {os.path.realpath(p) for p in trainer.__path__}
    return None if os.path.realpath(path) in ours else path


def keep_runner_apart(root: str) -> None:
    """Give the name ``trainer`` to the program's package under ``root``, if it has one."""
    path = user_package(root)
    if path is None:
        return
    import trainer

    for info in pkgutil.walk_packages(trainer.__path__, "trainer."):
        if info.name.startswith(_OPTIONAL) or info.name.endswith((".launch", ".__main__")):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as e:  # an optional dependency the program does not need
            log.debug("not imported: %s (%s)", info.name, e)
    theirs = {os.path.splitext(entry)[0] for entry in os.listdir(path)}
    for name in [n for n in sys.modules if n == "trainer" or (n.count(".") == 1 and n.split(".")[1] in theirs)]:
        del sys.modules[name]
