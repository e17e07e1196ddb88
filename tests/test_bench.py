"""The benchmark script runs end to end for a few steps (its numbers are in BENCHMARKS.md, not asserted)."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.bench
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


def test_overhead_script_measures_both_backends(tmp_path):
    from hydra.core.global_hydra import GlobalHydra

    from bench.overhead import main

    GlobalHydra.instance().clear()
    out = tmp_path / "overhead.json"
    results = main(["--model", "mlp", "--steps", "5", "--blocks", "2", "--warmup", "2", "--examples", "500",
                    "--json", str(out)])
    assert [r["session"] for r in results] == ["plain", "monitored"]
    for r in results:
        assert r["runner_ms"] > 0 and r["bare_ms"] > 0 and len(r["blocks"]["runner"]) == 2
    assert json.loads(out.read_text())["results"][1]["session"] == "monitored"


def test_curves_script_records_each_evaluation_of_a_train_command(tmp_path):
    out = tmp_path / "curves.json"
    tiny = ("TF_ENABLE_ONEDNN_OPTS=0 model=mlp data=synthetic data.train_examples=256 data.test_examples=64 "
            "train.batch_size=32 train.max_steps=10 eval.every_steps=5 log.progress=off")
    proc = subprocess.run([sys.executable, "-m", "bench.curves", "--target", "0.0", "--run", "tiny", tiny,
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(out.read_text())["runs"]["tiny"]
    assert [point["step"] for point in run["curve"]] == [5, 10] and run["reached"]["step"] == 5
    assert run["onednn"] is False  # the environment word reached the train process
    assert 0 < run["first_step_secs"] <= run["curve"][0]["secs"]


def test_graph_cost_script_runs_the_users_loop_beside_every_runner_contender(tmp_path):
    out = tmp_path / "graph_cost.json"
    proc = subprocess.run([sys.executable, "-m", "bench.graph_cost", "--steps", "2", "--blocks", "2", "--warmup", "1",
                           "--batch", "16", "--examples", "256", "--json", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert list(results) == ["user", "plain", "monitored", "runner_graph", "guarded", "no_gradient_norm",
                             "stateful_dropout"]
    assert results["user"]["vs_user"] == 1.0
    for r in results.values():
        assert r["ms"] > 0 and len(r["blocks_ms"]) == 2


def test_public_programs_edits_are_counted_and_each_targets_a_file_of_its_program(tmp_path):
    """The Estimator side's edits (bench/public_programs.py) change only the program's own files, and
    an edit that no longer matches its file stops the bench instead of comparing an unedited copy."""
    from bench.public_programs import PROGRAMS, edited

    for program in PROGRAMS:
        files = {p.partition("@")[0] for p in program.files}
        prefix = program.run_dir + "/" if program.run_dir else ""
        assert all(prefix + name in files for name in program.edits), program.name
    (tmp_path / "p.py").write_text("import tensorflow as tf\nx = tf.contrib.lookup.index_table_from_tensor(v)\n")
    rules = {"p.py": [(r"^import tensorflow as tf$", "import tensorflow.compat.v1 as tf"),
                      (r"tf\.contrib\.lookup\.", "lookup_ops.")]}
    assert edited(str(tmp_path), rules) == 2
    assert (tmp_path / "p.py").read_text().splitlines() == ["import tensorflow.compat.v1 as tf",
                                                           "x = lookup_ops.index_table_from_tensor(v)"]
    with pytest.raises(SystemExit, match="matches nothing in p.py"):
        edited(str(tmp_path), rules)


def test_collective_probe_trains_when_every_worker_initialises():
    """bench.collective_probe: two graph-mode MultiWorkerMirroredStrategy workers on loopback train to
    the same weights once every worker initialises its own session (the deadlock's way out)."""
    proc = subprocess.run([sys.executable, "-m", "bench.collective_probe", "--init", "every", "--steps", "40",
                           "--timeout", "120"], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["worker"] for r in records) == [0, 1]
    assert records[0]["w"] == records[1]["w"]  # one model: the all-reduced update on both
    assert all(abs(v - 1.0) < 1e-3 for v in records[0]["w"])  # y = x . [1, 1], learnt


def test_scaling_bench_runs_and_counts_the_bytes(tmp_path):
    """bench.scaling end to end on one small configuration; the bytes moved are the model's."""
    out = tmp_path / "scaling.json"
    proc = subprocess.run([sys.executable, "-m", "bench.scaling", "--workers", "2", "--strategies", "collective",
                           "--steps", "10", "--rounds", "1", "--global-batch", "32", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.load(open(out))["medians"]
    assert (row["strategy"], row["workers"]) == ("collective", 2)
    assert row["bytes_per_worker_step"] == row["params"] * 4  # a ring of 2: 2 x 1/2 x P x 4 bytes
    assert row["examples_per_sec"] > 0
