"""Python objects of a program (model_fns, input_fns, hooks: closures, partials, bound methods,
lambdas) under dotted names, so that the runner, which takes user code by dotted path, calls them.

A name is made from the user's object's module and qualified name, so the same function gets the
same name in every process of a program (a cluster's tasks run the same program) and from one call
to the next (the checkpoint dir's manifest records it); another object that would take a name
already held gets a numbered one. Entries live as long as the process.
"""

import hashlib
import re
from typing import Any, Dict

_PREFIX = __name__ + "."
_owners: Dict[str, int] = {}  # name -> id() of the user's object it was made for


def register(obj: Any, kind: str, owner: Any = None) -> str:
    """The dotted path under which ``load_callable`` finds ``obj``, named after ``owner`` (the user's
    object that ``obj`` wraps; ``obj`` itself by default)."""
    owner = obj if owner is None else owner
    target = getattr(owner, "func", owner)  # functools.partial: named after the function it wraps
    where = f"{getattr(target, '__module__', '') or ''}.{getattr(target, '__qualname__', type(target).__name__)}"
    short = re.sub(r"[^0-9A-Za-z_]", "_", where.rsplit(".", 1)[-1])
    base = f"{kind}_{short}_{hashlib.sha1(where.encode()).hexdigest()[:8]}"
    name, number = base, 1
    while name in _owners and _owners[name] != id(owner):
        number += 1
        name = f"{base}_{number}"
    _owners[name] = id(owner)
    globals()[name] = obj
    return _PREFIX + name
