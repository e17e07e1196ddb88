import os
import signal
import sys

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

import trainer.process
from trainer.cli.paths import register_resolvers
from trainer.config.schema import register_configs

trainer.process.set_environment()  # as the command does, before any test module imports TensorFlow
# A suite started in the background by a shell without job control inherits SIGINT ignored, and so would
# every train command it starts (no KeyboardInterrupt anywhere): the Ctrl-C tests need Python's own handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
# tests/ holds user-style modules (hooks given by _target_) that live outside the package.
sys.path.insert(0, TESTS_DIR)

# Small and fast: tiny synthetic data, no progress output.
# A 16-unit MLP unless a test picks another model.
TINY_MODEL = ["model=mlp", "model.params.hidden_units=[16]"]
TINY = [
    "data=synthetic",
    "data.train_examples=512",
    "data.test_examples=128",
    "train.batch_size=32",
    "train.max_steps=20",
    "eval.every_steps=10",
    "eval.batch_size=64",
    "log.progress=off",
    "log.every_steps=5",
    "checkpoint.every_steps=10",
    "summary.every_steps=5",
]


@pytest.fixture
def make_cfg():
    """Compose the real config with TINY defaults plus ``overrides`` (later ones win)."""
    register_configs()
    register_resolvers()

    def _make(*overrides):
        GlobalHydra.instance().clear()
        with initialize_config_module(config_module="trainer.conf", version_base="1.3"):
            picks_model = any(o.startswith("model=") for o in overrides)
            return compose("config", overrides=TINY + ([] if picks_model else TINY_MODEL) + list(overrides))

    yield _make
    GlobalHydra.instance().clear()


_COSTLY = ("cli", "cluster", "bench", "slow")


def pytest_collection_modifyitems(config, items):
    """The quick tier (``-m quick``, about a minute): every test without a cost marker."""
    for item in items:
        if not any(item.get_closest_marker(name) for name in _COSTLY):
            item.add_marker(pytest.mark.quick)
