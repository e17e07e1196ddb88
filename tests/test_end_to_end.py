"""The real command on real data: the layers-tutorial CNN on Fashion-MNIST (minutes: marked slow)."""

import json
import os
import shutil
import subprocess

import pytest

FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(FASHION), reason="apt-get install dataset-fashion-mnist")
def test_mnist_cnn_on_fashion_mnist_reaches_090(tmp_path):
    proc = subprocess.run(
        [shutil.which("train"), "model=mnist", "data=fashion_mnist", "session=monitored", "log.progress=off",
         "eval.every_steps=0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tmp_path / "outputs" / "data-fashion_mnist+model-mnist" / "metrics.json").read_text())
    assert metrics["global_step"] == 2000
    assert metrics["eval_accuracy"] >= 0.90, metrics
