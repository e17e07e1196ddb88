"""``train-estimator [--tf1 | --tf2] PROGRAM.py [ARGS]`` or ``train-estimator [--tf1 | --tf2] -m MODULE [ARGS]``
(``python -m trainer.estimator.launch ...`` alike): run an Estimator-era program unedited, as
``__main__``, its flags (absl, ``tf.flags``, argparse) parsed as usual.

- ``tf.estimator``, ``tf.compat.v1.estimator`` (with ``.tpu``), ``tensorflow_estimator`` and Estimator's
  private module paths resolve to ``trainer.estimator``: the v1 paths to the v1 canned family (TF 1.x's
  defaults and numbers), ``tf.estimator`` to the v2 family in a TF 2.x program and to the v1 family in
  a TF 1.x one.
- TF 1.x programs: the program and the modules it imports from its own directory (or package) are
  converted in memory as they are imported, by TensorFlow's own upgrader (``tf_upgrade_v2``'s tables),
  with ``tf.compat.v1`` names where TensorFlow 2 dropped a name it still has, and the most used
  ``tf.contrib`` pieces (``layers.layer_norm``, ``training.HParams``, ``tpu``, ``cluster_resolver``,
  ``lookup``, ``framework``); the files are never changed. A TPU cluster resolver built with no TPU
  name resolves to this process. A TF 1.x program runs with TF 1.x behaviour (graph mode, v2 behaviour off).
  Whether a program is TF 1.x is read off its sources (the upgrader changes something in it or in a
  module beside it); ``--tf1`` or ``--tf2`` says it instead.
- A name neither TensorFlow 2 nor ``tf.compat.v1`` has fails, when the program reaches it, in one line
  naming the file, the line and the upgrader's message.
- A program whose own package is named ``trainer`` (the Cloud ML Engine layout: ``trainer/task.py``,
  ``trainer/model.py``) gets its own package: the runner keeps its modules apart.
"""

import os
import sys
from typing import List, Optional, Tuple


def _usage(code: int) -> None:
    print(__doc__.strip())
    raise SystemExit(code)


def _parse(argv: List[str]) -> Tuple[Optional[bool], Optional[str], Optional[str], List[str]]:
    """(tf1 or None for detect, program path, module name, the program's own args)."""
    tf1 = None
    while argv and argv[0] in ("--tf1", "--tf2"):
        tf1 = argv.pop(0) == "--tf1"
    if not argv or argv[0] in ("-h", "--help"):
        _usage(0 if argv else 2)
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("error: -m needs a module name, e.g. train-estimator -m trainer.task")
        return tf1, None, argv[1], argv[2:]
    program = argv[0]
    if not os.path.isfile(program):
        raise SystemExit(f"error: {program}: no such program; give the path of a Python file (or -m MODULE)")
    return tf1, os.path.abspath(program), None, argv[1:]


def _package_root(path: str) -> Tuple[str, Optional[str]]:
    """The dir to import from, and the module name of ``path`` when it sits in a package (run as
    ``python -m`` would, so that its package's relative and absolute imports work)."""
    directory, name = os.path.split(path)
    parts = [os.path.splitext(name)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return directory, ".".join(parts) if len(parts) > 1 else None


def _sources(root: str, program: Optional[str]) -> List[str]:
    """The program and the Python files beside it and in its packages (one level down)."""
    found = [program] if program else []
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        if entry.endswith(".py"):
            found.append(path)
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            found.extend(os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".py"))
    return list(dict.fromkeys(found))[:200]


def main(argv=None) -> None:
    tf1, program, module, args = _parse(list(sys.argv[1:] if argv is None else argv))
    root, as_module = _package_root(program) if program else (os.getcwd(), module)
    from trainer.estimator.alias import alias_estimator, resolve_tpu_locally
    from trainer.process import set_environment

    set_environment()
    from trainer.estimator import upgrade

    import tensorflow as tf

    alias_estimator()  # first, so that reading the sources finds tf.estimator and tf.contrib's pieces
    if tf1 is None:
        tf1 = upgrade.uses_tf1(_sources(root, program))
    if tf1:
        tf.compat.v1.disable_v2_behavior()
        alias_estimator(tf1=True)
    resolve_tpu_locally()
    sys.path.insert(0, root)
    from trainer.estimator.shadow import keep_runner_apart

    keep_runner_apart(root)
    upgrade.install([root], upgrade=tf1)
    from trainer.errors import TrainerError, fail

    try:
        _run(program, as_module, args, tf1)
    except TrainerError as e:  # the runner's own failures are one line, as under the train command;
        fail(str(e), e.exit_code)  # the program's own errors keep their tracebacks


def _run(program: Optional[str], module: Optional[str], args: List[str], tf1: bool) -> None:
    import runpy

    sys.argv = [program or module, *args]
    if module:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    from trainer.estimator.upgrade import MISSING, convert, missing_name

    with open(program, encoding="utf-8") as handle:
        code = convert(handle.read(), program, upgrade=tf1).code
    import types

    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(__file__=program, __builtins__=__builtins__, __cached__=None, __spec__=None,
                                **{MISSING: missing_name})
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main_module
    try:
        exec(code, main_module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


if __name__ == "__main__":
    main()
