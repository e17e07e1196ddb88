"""Multirun sweeps: isolated jobs, summaries, resumable and failure-tolerant sweeps, launchers, Optuna."""

import csv
import gc
import json
import os
import shutil
import subprocess

import pytest
import tensorflow as tf

from trainer import run

pytestmark = pytest.mark.cli

TRAIN = shutil.which("train")
TINY = ["data=synthetic", "data.train_examples=256", "data.test_examples=64", "model=mlp",
        "model.params.hidden_units=[16]", "train.batch_size=32", "train.max_steps=20", "log.progress=off",
        "eval.every_steps=10", "checkpoint.every_steps=10"]


def sweep(tmp_path, *args, env=None):
    return subprocess.run([TRAIN, "-m", *TINY, f"hydra.sweep.dir={tmp_path / 'sweep'}", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=os.path.dirname(__file__), **(env or {})))


def jobs(sweep_dir):
    return {d: json.loads((sweep_dir / d / "metrics.json").read_text()) if (sweep_dir / d / "metrics.json").exists() else None
            for d in os.listdir(sweep_dir) if (sweep_dir / d / ".hydra").is_dir()}


def summary_rows(sweep_dir):
    with open(sweep_dir / "summary.csv") as f:
        return list(csv.DictReader(f))


def job_hparams(job_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    events = EventAccumulator(str(job_dir / "checkpoints" / "eval"))  # the session is the job's eval run
    events.Reload()
    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    info = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    return {k: (v.number_value if v.WhichOneof("kind") == "number_value" else v.string_value)
            for k, v in info.hparams.items()}


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_jobs_in_one_process_leave_nothing_behind(make_cfg, tmp_path):
    """Six jobs in one process, as Hydra's basic launcher runs them: no graph or memory growth."""
    live_graphs, rss = [], []
    for job in range(6):
        run(make_cfg(f"optimizer.learning_rate={0.01 / (job + 1)}"), str(tmp_path / str(job)))
        gc.collect()
        live_graphs.append(sum(isinstance(o, tf.Graph) for o in gc.get_objects()))
        rss.append(rss_mb())
    assert live_graphs == [live_graphs[0]] * 6, live_graphs
    assert rss[-1] - rss[1] < 40, rss  # MB: after the first job warms the caches, no growth per job


def test_2x2_sweep_makes_4_jobs_and_a_summary(tmp_path):
    proc = sweep(tmp_path, "optimizer.learning_rate=0.01,0.001", "session=plain,monitored")
    assert proc.returncode == 0, proc.stderr
    sweep_dir = tmp_path / "sweep"
    found = jobs(sweep_dir)
    assert len(found) == 4 and all(m["status"] == "finished" and m["global_step"] == 20 for m in found.values())
    assert {m["session"] for m in found.values()} == {"plain", "monitored"}
    rows = summary_rows(sweep_dir)
    assert len(rows) == 4 and all(r["status"] == "finished" for r in rows)
    accuracies = [float(r["eval_accuracy"]) for r in rows]
    assert accuracies == sorted(accuracies, reverse=True)  # best first
    assert (sweep_dir / "summary.md").exists() and (sweep_dir / "summary.png").stat().st_size > 1000
    # TensorBoard's HParams: each job's swept values as its hparams, read with TensorBoard's reader,
    # in its eval run (no event file of its own at the job's root: no empty run per job).
    for name in found:
        assert job_hparams(sweep_dir / name)["optimizer.learning_rate"] in (0.01, 0.001)
        assert sorted(job_hparams(sweep_dir / name)) == ["optimizer.learning_rate", "session"]
        assert not list((sweep_dir / name).glob("events.out.tfevents*"))
    # The experiment at the sweep's root: the swept keys, and the eval metrics as the only metrics.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    root = EventAccumulator(str(sweep_dir))
    root.Reload()
    experiment = plugin_data_pb2.HParamsPluginData.FromString(
        root.PluginTagToContent("hparams")["_hparams_/experiment"]).experiment
    assert sorted(h.name for h in experiment.hparam_infos) == ["optimizer.learning_rate", "session"]
    assert sorted(m.name.tag for m in experiment.metric_infos) == ["accuracy", "loss"]
    # Same lr, either backend: the same result.
    by_lr = {}
    for name, m in found.items():
        by_lr.setdefault(job_hparams(sweep_dir / name)["optimizer.learning_rate"], set()).add(m["eval_accuracy"])
    assert len(by_lr) == 2 and all(len(v) == 1 for v in by_lr.values())
    assert all(len(name) <= 80 and "learning_rate-0.0" in name for name in found)  # short job dir names


def test_rerun_skips_finished_and_resumes_unfinished_jobs(tmp_path):
    args = ["optimizer.learning_rate=0.03,0.02,0.01"]
    assert sweep(tmp_path, *args).returncode == 0
    sweep_dir = tmp_path / "sweep"
    names = sorted(jobs(sweep_dir))
    done, half, never = (sweep_dir / n for n in names)
    done_mtime = (done / "metrics.json").stat().st_mtime_ns
    from helpers import dir_state

    done_files = {k: v for k, v in dir_state(done).items() if k != "train.log"}
    # `half` was interrupted after its step-10 checkpoint; `never` had not started.
    (half / "metrics.json").unlink()
    for p in (half / "checkpoints").glob("model.ckpt-20.*"):
        p.unlink()
    shutil.rmtree(never)

    proc = sweep(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    after = jobs(sweep_dir)
    assert (done / "metrics.json").stat().st_mtime_ns == done_mtime  # skipped, untouched
    # Nothing written but the skip's log line: no second HParams event file either.
    assert {k: v for k, v in dir_state(done).items() if k != "train.log"} == done_files
    assert "finished already at step 20: skipped" in proc.stderr + proc.stdout
    assert (after[half.name]["start_step"], after[half.name]["global_step"]) == (10, 20)
    assert (after[never.name]["start_step"], after[never.name]["global_step"]) == (0, 20)

    forced = sweep(tmp_path, *args, "sweep.rerun_finished=true")
    assert forced.returncode == 0, forced.stderr
    forced_jobs = jobs(sweep_dir)
    assert sorted(forced_jobs) == names  # the same job dirs
    assert all(m["start_step"] == 0 and m["global_step"] == 20 for m in forced_jobs.values())
    assert all(list((sweep_dir / n).glob("checkpoints.replaced-*")) for n in names)


def test_sigterm_stops_the_whole_sweep_and_the_rerun_resumes_it(tmp_path):
    """SIGTERM during the first of three jobs: the sweep exits 143 at once, the job is recorded
    `preempted` with its step and a checkpoint, no other job starts; running the sweep again
    resumes that job and runs the others."""
    import signal
    import time

    from helpers import wait_for_step

    args = [*TINY, "train.max_steps=3000", "data.train_examples=4096", "checkpoint.every_steps=null",
            "eval.every_steps=100000", "optimizer.learning_rate=0.03,0.02,0.01", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    proc = subprocess.Popen([TRAIN, "-m", *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline, first = time.time() + 120, None
        while time.time() < deadline and first is None:
            started_jobs = [d for d in (tmp_path / "sweep").glob("*") if d.is_dir()]
            first = started_jobs[0] if started_jobs else None
            time.sleep(0.1)
        wait_for_step(first, 20, proc)
        proc.send_signal(signal.SIGTERM)
        started = time.time()
        out, err = proc.communicate(timeout=60)
        took = time.time() - started
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert took < 10, took
    found = jobs(tmp_path / "sweep")
    assert list(found) == [first.name], found  # no job after it started
    record = found[first.name]
    assert record["status"] == "preempted" and 20 <= record["global_step"] < 3000, record
    assert tf.train.latest_checkpoint(str(first / "checkpoints")).endswith(f"-{record['global_step']}")
    again = subprocess.run([TRAIN, "-m", *args], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    after = jobs(tmp_path / "sweep")
    assert len(after) == 3 and all(m["status"] == "finished" for m in after.values())
    assert after[first.name]["start_step"] == record["global_step"]


def test_a_failing_job_does_not_stop_the_others(tmp_path):
    proc = sweep(tmp_path, "model.fn=trainer.models.mlp.model_fn,user_models.nan_after_5")
    # The sweep reports the failure after every job ran: one line, no traceback.
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[-1].startswith("error: 1 of 2 sweep jobs failed") and "step 6" in lines[-1], lines[-1]
    found = jobs(tmp_path / "sweep")
    statuses = sorted(m["status"] for m in found.values())
    assert statuses == ["failed", "finished"]
    failed = next(m for m in found.values() if m["status"] == "failed")
    assert "NaN" in failed["error"] and "step 6" in failed["error"]
    rows = summary_rows(tmp_path / "sweep")
    assert [r["status"] for r in rows] == ["finished", "failed"]


def test_fail_fast_stops_at_the_first_failure(tmp_path):
    proc = sweep(tmp_path, "model.fn=user_models.nan_after_5,trainer.models.mlp.model_fn", "sweep.fail_fast=true")
    assert proc.returncode != 0
    assert [m["status"] for m in jobs(tmp_path / "sweep").values() if m] == ["failed"]


def test_a_bad_value_in_a_sweep_is_one_line_before_any_job(tmp_path):
    proc = sweep(tmp_path, "optimizer.learning_rate=0.01,-1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: optimizer.learning_rate=-1")
    assert not (tmp_path / "sweep").exists()


def test_a_shared_checkpoint_dir_is_refused(tmp_path):
    proc = sweep(tmp_path, f"checkpoint.dir={tmp_path / 'shared'}", "optimizer.learning_rate=0.01,0.001")
    assert proc.returncode != 0
    found = jobs(tmp_path / "sweep")
    assert all(m["status"] == "failed" and "would share it" in m["error"] for m in found.values())
    assert not (tmp_path / "shared").exists()
    ok = sweep(tmp_path, f"checkpoint.dir={tmp_path / 'own'}/" + "${hydra:job.num}", "optimizer.learning_rate=0.01,0.001")
    assert ok.returncode == 0, ok.stderr
    assert sorted(os.listdir(tmp_path / "own")) == ["0", "1"]


def test_joblib_launcher_runs_jobs_in_parallel_processes(tmp_path):
    proc = sweep(tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "optimizer.learning_rate=0.01,0.001")
    assert proc.returncode == 0, proc.stderr
    found = list(jobs(tmp_path / "sweep").values())
    assert len(found) == 2 and all(m["status"] == "finished" for m in found)
    assert len({m["pid"] for m in found}) == 2
    first, second = sorted(found, key=lambda m: m["started_at"])
    assert second["started_at"] <= first["finished_at"]  # their runs overlapped


def test_submitit_launcher_runs_each_job_in_its_own_process_and_skips_finished_ones(tmp_path):
    """The documented SLURM path (hydra/launcher=submitit_slurm), through submitit's local executor:
    the same plugin, job dirs, summary and skip-on-rerun as the other launchers."""
    args = ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10", "optimizer.learning_rate=0.01,0.001"]
    proc = sweep(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    sweep_dir = tmp_path / "sweep"
    found = jobs(sweep_dir)
    from trainer.cli.paths import job_dir

    # The job dirs every launcher gives: named from the job's own overrides, nothing of the launcher's.
    assert sorted(found) == sorted(job_dir([*TINY, f"optimizer.learning_rate={lr}"], str(sweep_dir)) for lr in ("0.01", "0.001"))
    assert all(name.startswith("learning_rate-0.0") for name in found)  # the swept key first
    assert len(found) == 2 and all(m["status"] == "finished" and m["global_step"] == 20 for m in found.values())
    assert len({m["pid"] for m in found.values()}) == 2  # a process per job
    assert {r["status"] for r in summary_rows(sweep_dir)} == {"finished"} and len(summary_rows(sweep_dir)) == 2
    mtimes = {n: (sweep_dir / n / "metrics.json").stat().st_mtime_ns for n in found}
    again = sweep(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert {n: (sweep_dir / n / "metrics.json").stat().st_mtime_ns for n in found} == mtimes  # skipped, untouched


def test_optuna_sweeper_runs_three_trials(tmp_path):
    proc = sweep(tmp_path, "+sweep=mnist_lr", "hydra.sweeper.n_trials=3")
    assert proc.returncode == 0, proc.stderr
    found = jobs(tmp_path / "sweep")
    assert len(found) == 3 and all(m["status"] == "finished" for m in found.values())
    results = (tmp_path / "sweep" / "optimization_results.yaml").read_text()
    best = max(m["objective_value"] for m in found.values())
    assert f"best_value: {best}" in results
    # Optuna's sweeper writes no multirun.yaml: the command recorded its params for the job names
    # (the swept values first and in full) and the HParams (those keys only).
    swept = ["optimizer", "optimizer.learning_rate", "train.batch_size"]
    assert (tmp_path / "sweep" / ".swept_keys").read_text().split() == swept
    for name in found:
        assert name.startswith("optimizer-") and "+learning_rate-" in name.split("--")[0]
        assert sorted(job_hparams(tmp_path / "sweep" / name)) == swept


def test_train_report_rebuilds_a_summary(tmp_path):
    assert sweep(tmp_path, "optimizer.learning_rate=0.01,0.001").returncode == 0
    for name in ("summary.csv", "summary.md", "summary.png"):
        (tmp_path / "sweep" / name).unlink()
    proc = subprocess.run([shutil.which("train-report"), str(tmp_path / "sweep")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "| finished |" in proc.stdout and len(summary_rows(tmp_path / "sweep")) == 2
    missing = subprocess.run([shutil.which("train-report"), str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 2 and "no such dir" in missing.stderr


def test_a_job_whose_objective_is_nan_or_not_a_number_is_never_best(tmp_path):
    """metrics.json written NaN as null (with non_finite), or a hand-edited string: such jobs sort after
    every job with a number, and the report does not fail on them."""
    import json

    from trainer.sweep.report import collect

    for name, value in (("a-nan", None), ("b-text", "0.99"), ("c-good", 0.8), ("d-better", 0.9)):
        job = tmp_path / name
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(f"- train.seed={len(name)}\n")
        record = {"status": "finished", "objective": "accuracy", "eval_accuracy": value}
        if value is None:
            record["non_finite"] = ["eval_accuracy"]
        (job / "metrics.json").write_text(json.dumps(record))
    assert [r["job"] for r in collect(str(tmp_path))][:2] == ["d-better", "c-good"]


def test_train_report_on_odd_files_reports_each_job_and_never_fails(tmp_path):
    """Job dirs edited by hand or cut short: overrides.yaml a dict or a scalar, an objective that is a
    number, a config whose eval group is a scalar, a metric that is a string, metrics.json a list, a
    metrics.jsonl line that is not an object. Each job gets a row (an odd file says so in its error
    column), the good job is best, the plot is drawn; a summary that cannot be written is one line, exit 1,
    with the summary still printed."""
    import json

    from trainer.sweep.report import collect

    jobs = {
        "a-overrides-dict": {"overrides": "lr: 0.1\n"},
        "b-overrides-scalar": {"overrides": "7\n"},
        "c-numeric-objective": {"metrics": {"status": "finished", "objective": 5, "eval_accuracy": 0.5}},
        "d-eval-group-scalar": {"config": "eval: 3\n"},
        "e-string-metric": {"metrics": {"status": "finished", "objective": "accuracy", "eval_accuracy": "high"}},
        "f-metrics-list": {"metrics": [1, 2]},
        "g-jsonl-not-an-object": {"jsonl": '{"kind": "eval", "step": 1, "accuracy": 0.5}\n[1, 2]\n'},
        "h-good": {"metrics": {"status": "finished", "objective": "accuracy", "eval_accuracy": 0.95}},
    }
    for name, files in jobs.items():
        job = tmp_path / "sweep" / name
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(files.get("overrides", f"- train.seed={len(name)}\n"))
        (job / ".hydra" / "config.yaml").write_text(files.get("config", "eval:\n  objective: accuracy\n"))
        metrics = files.get("metrics", {"status": "finished", "objective": "accuracy", "eval_accuracy": 0.9})
        (job / "metrics.json").write_text(json.dumps(metrics))
        (job / "metrics.jsonl").write_text(files.get("jsonl", '{"kind": "eval", "step": 1, "accuracy": 0.9}\n'))
    (tmp_path / "sweep" / "multirun.yaml").write_text("hydra: {}\n")
    rows = collect(str(tmp_path / "sweep"))
    assert len(rows) == len(jobs) and rows[0]["job"] == "h-good"
    odd = {r["job"]: r["error"] for r in rows}
    assert "overrides.yaml is not a list of overrides" in odd["a-overrides-dict"]
    assert "overrides.yaml is not a list of overrides" in odd["b-overrides-scalar"]
    report = [shutil.which("train-report"), str(tmp_path / "sweep")]
    done = subprocess.run(report, capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "sweep" / "summary.png").exists() and len(summary_rows(tmp_path / "sweep")) == len(jobs)
    (tmp_path / "sweep" / "summary.csv").unlink()
    (tmp_path / "sweep" / "summary.csv").mkdir()  # a summary that cannot be written (as root can write anywhere)
    done = subprocess.run(report, capture_output=True, text=True)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1 and len(errors) == 1 and "cannot write the summary" in errors[0], done.stderr
    assert "| h-good |" in done.stdout and "Traceback" not in done.stderr
    assert not list((tmp_path / "sweep").glob("*.tmp"))
