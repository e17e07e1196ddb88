"""``train-estimator PROGRAM.py [ARGS]`` (or ``python -m trainer.estimator.launch PROGRAM.py [ARGS]``):
run an Estimator-era program unedited, as ``__main__``, with ``tf.estimator``,
``tf.compat.v1.estimator`` (with ``.tpu``), ``tensorflow.compat.v1.estimator`` and
``tensorflow_estimator`` resolving to ``trainer.estimator``. Its flags (absl or argparse) parse as
usual. A name the runner does not provide (``tf.contrib``) fails in one line naming it.
"""

import os
import runpy
import sys
import types


class _Missing(types.ModuleType):
    """A module of names the runner does not provide: touching one fails in one line naming it."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise SystemExit(f"error: {self.__name__}.{name} is not provided by trainer.estimator (TensorFlow 2.16 removed "
                         f"it with tf.estimator); port that part of the program")


def install() -> None:
    """Make the Estimator names resolve to ``trainer.estimator`` (process-wide: the launcher's one effect)."""
    import tensorflow as tf

    import trainer.estimator as api
    from trainer.estimator import tpu
    for name in ("tensorflow.estimator", "tensorflow.compat.v1.estimator", "tensorflow.compat.v2.estimator",
                 "tensorflow_estimator", "tensorflow_estimator.estimator", "tensorflow.python.estimator"):
        sys.modules[name] = api
    sys.modules["tensorflow.compat.v1.estimator.tpu"] = tpu
    sys.modules["tensorflow_estimator.python.estimator.estimator_lib"] = api
    for module in (tf, tf.compat.v1, tf.compat.v2):
        setattr(module, "estimator", api)
    if not hasattr(tf.compat.v1, "contrib"):
        setattr(tf.compat.v1, "contrib", _Missing("tf.contrib"))


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    program = argv[0]
    if not os.path.isfile(program):
        raise SystemExit(f"error: {program}: no such program; give the path of a Python file")
    from trainer.process import set_environment

    set_environment()
    install()
    sys.argv = [program, *argv[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
    runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":
    main()
