"""The benchmark script runs end to end for a few steps (its numbers are in BENCHMARKS.md, not asserted)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_quick_runs_every_contender(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| train:monitored |" in proc.stdout and "input pipeline alone" in proc.stdout
    numbers = json.loads(out.read_text())["summary"]
    for name in ("hand_loop", "train:plain", "train:monitored", "tf_keras_fit", "keras3_fit"):
        assert numbers["steps_per_sec"][name] > 0
        assert numbers["first_step_secs"][name] > 0
    assert 0 < numbers["meta_bytes"] < 1_000_000
    assert numbers["input_examples_per_sec"] > 0
