"""Importing the package changes no process state; ``trainer.process`` is where the command makes its
process-wide effects."""

import subprocess
import sys
import textwrap

import pytest


_IMPORT_EVERYTHING = textwrap.dedent("""
    import gc, os, random, sys, threading
    import numpy as np
    import tensorflow  # what TensorFlow itself does to the process is not ours
    def state():
        return {"env": dict(os.environ), "excepthook": sys.excepthook, "threading": threading.excepthook,
                "gc": gc.isenabled(), "stderr": sys.stderr, "random": random.getstate(),
                "numpy": np.random.get_state()[1].tobytes(), "fd2": os.fstat(2).st_ino}
    before = state()
    import importlib, pkgutil, trainer
    names = [m.name for m in pkgutil.walk_packages(trainer.__path__, "trainer.")]
    for name in names:
        importlib.import_module(name)
    after = state()
    after["env"].pop("TF_USE_LEGACY_KERAS", None)
    before["env"].pop("TF_USE_LEGACY_KERAS", None)
    changed = sorted(k for k in before if before[k] != after[k])
    env = sorted(set(before["env"].items()) ^ set(after["env"].items()))
    print(len(names), changed, env)
""")


@pytest.mark.slow
def test_importing_every_module_changes_no_process_state():
    done = subprocess.run([sys.executable, "-c", _IMPORT_EVERYTHING], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    count, changed, env = done.stdout.strip().split(" ", 2)
    assert int(count) > 60  # every module was imported
    assert (changed, env) == ("[]", "[]")


def test_set_environment_keeps_what_the_user_set(monkeypatch):
    from trainer.process import set_environment

    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=2")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    set_environment()
    import os

    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert os.environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
    set_environment()
    assert os.environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"  # not added twice


def test_every_package_of_the_source_tree_is_installed():
    """pyproject.toml lists its packages one by one: a package dir missing there is missing from a wheel."""
    import os

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {"trainer.conf", "trainer.models"}
    for folder, _, files in os.walk(os.path.join(root, "trainer")):
        if "__init__.py" in files:
            found.add(os.path.relpath(folder, root).replace(os.sep, "."))
    assert found == listed
