"""``train-estimator PROGRAM.py [ARGS]`` (or ``python -m trainer.estimator.launch PROGRAM.py [ARGS]``):
run an Estimator-era program unedited, as ``__main__``, with ``tf.estimator``,
``tf.compat.v1.estimator`` (with ``.tpu``), ``tensorflow.compat.v1.estimator`` and
``tensorflow_estimator`` resolving to ``trainer.estimator``. Its flags (absl or argparse) parse as
usual. A name the runner does not provide (``tf.contrib``) fails in one line naming it.
"""

import os
import runpy
import sys


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    program = argv[0]
    if not os.path.isfile(program):
        raise SystemExit(f"error: {program}: no such program; give the path of a Python file")
    from trainer.process import alias_estimator, set_environment

    set_environment()
    alias_estimator()
    sys.argv = [program, *argv[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
    runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":
    main()
