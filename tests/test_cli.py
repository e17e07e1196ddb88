"""The real ``train`` command in subprocesses: runs, resumes, and refuses bad input in one line."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from trainer.cli.paths import short_name

pytestmark = pytest.mark.cli

# Beside the interpreter when PATH lacks it; a missing script fails the tests that run it, not the collection.
TRAIN = shutil.which("train") or os.path.join(os.path.dirname(sys.executable), "train")
SMALL = [
    "data=synthetic", "data.train_examples=256", "data.test_examples=64", "model=linear",
    "train.batch_size=32", "log.progress=off", "eval.every_steps=0", "checkpoint.every_steps=5",
]
# The run dir: the experiment overrides (not the cadences), shortened (trainer/cli/paths.py).
RUN_NAME = "outputs/" + short_name([o for o in SMALL if not o.startswith(("log.", "eval.every", "checkpoint.every"))])


def train(cwd, *args, env=None):
    if not os.access(TRAIN, os.X_OK):
        pytest.fail("the train console script is not installed (pip install -e .)")
    full_env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    full_env.update(env or {})
    return subprocess.run([TRAIN, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=full_env)


def error_line(proc):
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert lines and lines[-1].startswith("error: "), proc.stderr
    return lines[-1]


def test_train_runs_resumes_and_continues(tmp_path):
    first = train(tmp_path, *SMALL, "train.max_steps=10")
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / RUN_NAME
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["global_step"] == 10 and metrics["model"] == "linear"
    assert (run_dir / "checkpoints" / "model.ckpt-10.index").exists()
    assert (run_dir / ".hydra" / "config.yaml").exists() and (run_dir / "train.log").exists()
    assert (tmp_path / "outputs" / ".latest").read_text().strip() == run_dir.name  # the newest run, by name
    # TensorBoard lists the run once (outputs/.latest is a file, not a link to follow)
    from tensorboard.backend.event_processing.io_wrapper import GetLogdirSubdirectories

    outputs = str(tmp_path / "outputs")
    logdirs = sorted(os.path.relpath(d, outputs) for d in GetLogdirSubdirectories(outputs))
    assert logdirs and all(d.split(os.sep)[0] == run_dir.name for d in logdirs)

    # The same command again: already done, exit 0, nothing trained.
    again = train(tmp_path, *SMALL, "train.max_steps=10")
    assert again.returncode == 0, again.stderr
    assert "already at step 10" in (run_dir / "train.log").read_text()

    # A higher target on the same command continues from the checkpoint.
    more = train(tmp_path, *SMALL, "train.max_steps=20", "session=plain")
    assert more.returncode == 0, more.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["start_step"], metrics["global_step"], metrics["session"]) == (10, 20, "plain")

    # resume=RUN_DIR: its saved config plus these overrides.
    resumed = train(tmp_path, f"resume={RUN_NAME}", "train.max_steps=30")
    assert resumed.returncode == 0, resumed.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["start_step"], metrics["global_step"], metrics["model"]) == (20, 30, "linear")

    # resume=outputs/latest continues the newest run; train-report lists the runs (the link not twice).
    latest = train(tmp_path, "resume=outputs/latest", "train.max_steps=35")
    assert latest.returncode == 0, latest.stderr
    assert json.loads((run_dir / "metrics.json").read_text())["global_step"] == 35
    report = subprocess.run([shutil.which("train-report"), "outputs", "--no-plot"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    rows = [line for line in report.stdout.splitlines() if line.startswith("| ") and "finished" in line]
    assert len(rows) == 1 and run_dir.name in rows[0] and "| 35 |" in rows[0]
    assert report.stdout.startswith("# Runs in ") and "1 runs, 0 failed" in report.stdout
    assert not list((tmp_path / "outputs").glob("summary.*"))  # a dir of runs is only read, unless --write


@pytest.mark.parametrize("args,fragment", [
    (["model=foo"], "model=foo: no such option; choose one of baseline_classifier, baseline_regressor, census_wide_deep"),
    (["session=fast"], "session=fast"),
    (["train.max_steps=abc"], "train.max_steps"),
    (["train.max_steps=-5"], "train.max_steps=-5"),
    (["train.max_stepz=3"], "train.max_stepz: no such key (did you mean train.max_steps?)"),
    (["+train.max_step=10"], "train.max_step: no such key (did you mean train.max_steps?)"),
    (["+eval.foo=1"], "eval.foo: no such key; the keys of eval are batch_size, checkpoint,"),
    (["checkpoint.every_secs=10"], "set only one"),
    (["resume=outputs/nonexistent"], "resume=outputs/nonexistent: no such directory"),
    (["model=mlp", "model.params.hidden_units=[abc]"], "model.params.hidden_units"),
    (["model=mlp", "+model.params.hiden=3"], "model.params.hiden: model=mlp has no such param"),
    (["resume=."], "not a run dir"),
    (["model.fn=a", "b"], "'b' is not a key=value override: a value with spaces must be quoted"),
    (["train.batch_size=1.5"], "could not be converted to Integer"),
    (["train.batch_size=${oc.env:HOME}"], "train.batch_size: While dereferencing interpolation '${oc.env:HOME}'"),
])
def test_bad_config_is_one_line_exit_2(tmp_path, args, fragment):
    proc = train(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert fragment in error_line(proc) and "$VALUE" not in error_line(proc)
    assert sorted(os.listdir(tmp_path)) == []  # no dir made, no .hydra written into a dir that is not a run


def test_version_is_the_runners_with_what_it_runs_on(tmp_path):
    from importlib import metadata

    proc = train(tmp_path, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(f"tf-graph-trainer {metadata.version('tf-graph-trainer')} (TensorFlow "
                                          f"{metadata.version('tensorflow')}, ")


def test_a_config_dir_with_a_python_tag_is_one_line_exit_2(tmp_path):
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "mine.yaml").write_text(
        "defaults: [mlp, _self_]\nx: !!python/object/apply:os.system ['touch pwned']\n")
    proc = train(tmp_path, "--config-dir", str(tmp_path / "conf"), "model=mine", "data=synthetic")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "conf/model/mine.yaml line 2: could not determine a constructor" in error_line(proc)
    assert not (tmp_path / "pwned").exists()


def test_a_refused_resume_leaves_the_run_dir_record_as_it_was(tmp_path):
    assert train(tmp_path, *SMALL, "train.max_steps=5").returncode == 0
    record = tmp_path / RUN_NAME / ".hydra"
    before = {name: (record / name).read_text() for name in ("overrides.yaml", "config.yaml")}
    refused = train(tmp_path, f"resume={RUN_NAME}", "model=mlp", "train.max_steps=10")  # another model: exit 3
    assert refused.returncode == 3, refused.stderr
    assert {name: (record / name).read_text() for name in before} == before
    assert train(tmp_path, f"resume={RUN_NAME}", "train.max_steps=10").returncode == 0  # the plain resume still works


def test_resume_keeps_every_added_hook(tmp_path):
    hooks = ["+hook@hooks.nan=nan_tensor", "+hook@hooks.log=logging_tensor", "hooks.log.every_n_iter=2"]
    assert train(tmp_path, *SMALL, *hooks, "train.max_steps=5").returncode == 0
    resumed = train(tmp_path, f"resume={RUN_NAME}", "train.max_steps=10")
    assert resumed.returncode == 0, resumed.stderr
    hook_line = next(line for line in resumed.stdout.splitlines() if "hooks (all):" in line)
    assert "NanTensorHook" in hook_line and "LoggingTensorHook" in hook_line, hook_line


def test_resume_checks_new_overrides_against_the_runs_own_config(tmp_path):
    """A key that only the run's model has (the MLP's dropout) is set on resume: composed onto the
    run's saved config, not onto the default model's."""
    mlp = [o for o in SMALL if o != "model=linear"] + ["model=mlp", "model.params.hidden_units=[8]"]
    first = train(tmp_path, *mlp, "train.max_steps=5", "hydra.run.dir=outputs/mlp")
    assert first.returncode == 0, first.stderr
    resumed = train(tmp_path, "resume=outputs/mlp", "model.params.dropout_rate=0.1", "train.max_steps=10")
    assert resumed.returncode == 0, resumed.stderr
    saved = (tmp_path / "outputs/mlp/.hydra/overrides.yaml").read_text()
    assert "model.params.dropout_rate=0.1" in saved and "model=mlp" in saved


def test_a_hook_added_to_a_run_can_be_removed_on_resume(tmp_path):
    added = ["+hook@hooks.log=logging_tensor", "hooks.log.every_n_iter=2"]
    assert train(tmp_path, *SMALL, *added, "train.max_steps=5").returncode == 0
    resumed = train(tmp_path, f"resume={RUN_NAME}", "~hooks.log", "train.max_steps=10")
    assert resumed.returncode == 0, resumed.stderr
    hook_line = next(line for line in resumed.stdout.splitlines() if "hooks (all):" in line)
    assert "LoggingTensorHook" not in hook_line, hook_line
    again = train(tmp_path, f"resume={RUN_NAME}", "train.max_steps=15")  # the removal was recorded
    assert again.returncode == 0, again.stderr
    assert "LoggingTensorHook" not in next(line for line in again.stdout.splitlines() if "hooks (all):" in line)


def test_only_a_run_that_trains_rewrites_the_run_dirs_record(tmp_path):
    """A second command on a run dir (by hydra.run.dir) that is refused by the lock, or that finds the
    run finished, leaves .hydra/ as the training run wrote it; nothing is left staged."""
    from test_reliability import hold_lock

    first = train(tmp_path, *SMALL, "train.max_steps=5", "hydra.run.dir=outputs/r")
    assert first.returncode == 0, first.stderr
    record = tmp_path / "outputs/r/.hydra"
    before = {name: (record / name).read_text() for name in ("overrides.yaml", "config.yaml")}
    finished = train(tmp_path, *SMALL, "train.max_steps=5", "log.every_steps=1", "hydra.run.dir=outputs/r")
    assert finished.returncode == 0, finished.stderr  # nothing to do: finished at step 5
    holder = hold_lock(tmp_path / "outputs/r/checkpoints/train.lock")
    try:
        locked = train(tmp_path, *SMALL, "train.max_steps=9", "hydra.run.dir=outputs/r")
    finally:
        holder.kill()
        holder.wait()
    assert locked.returncode != 0 and "in use by pid" in error_line(locked)
    assert {name: (record / name).read_text() for name in before} == before
    assert not [p.name for p in record.iterdir() if p.name.startswith("staged-")]
    again = train(tmp_path, *SMALL, "train.max_steps=9", "hydra.run.dir=outputs/r")  # trains: recorded
    assert again.returncode == 0, again.stderr
    assert "train.max_steps=9" in (record / "overrides.yaml").read_text()


def test_a_run_dir_given_by_hand_that_holds_other_files_is_refused(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "metrics.json").write_text('{"my": "own results"}')
    (mine / "train.log").write_text("my own log\n")
    proc = train(tmp_path, *SMALL, "train.max_steps=2", f"hydra.run.dir={mine}")
    assert proc.returncode == 2 and "not a run dir" in error_line(proc) and "metrics.json" in error_line(proc)
    assert sorted(p.name for p in mine.iterdir()) == ["metrics.json", "train.log"]
    assert (mine / "metrics.json").read_text() == '{"my": "own results"}'
    assert (mine / "train.log").read_text() == "my own log\n"


def test_missing_data_file_exit_2(tmp_path):
    proc = train(tmp_path, *SMALL, "data=mnist", f"data.path={tmp_path}/missing.npz")
    assert proc.returncode == 2
    assert "data.path" in error_line(proc) and "missing.npz" in error_line(proc)


def test_gpu_requested_without_gpu_exit_2(tmp_path):
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) is None and shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    proc = train(tmp_path, *SMALL, "device=gpu")
    assert proc.returncode == 2
    assert "device=gpu" in error_line(proc)


def test_unreadable_checkpoint_exit_3_and_untouched(tmp_path):
    ckpt = tmp_path / "ckpt"
    ok = train(tmp_path, *SMALL, "train.max_steps=5", f"checkpoint.dir={ckpt}")
    assert ok.returncode == 0, ok.stderr
    for index in ckpt.glob("model.ckpt-*.index"):
        index.write_bytes(index.read_bytes()[:20])
    before = {p.name: p.read_bytes() for p in ckpt.iterdir() if p.is_file()}
    proc = train(tmp_path, *SMALL, "train.max_steps=10", f"checkpoint.dir={ckpt}")
    assert proc.returncode == 3
    assert "no intact checkpoint" in error_line(proc) and "model.ckpt-5" in error_line(proc)
    assert {p.name: p.read_bytes() for p in ckpt.iterdir() if p.is_file()} == before


def test_locked_dir_exit_4(tmp_path):
    from test_reliability import hold_lock

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    holder = hold_lock(ckpt / "train.lock")
    try:
        proc = train(tmp_path, *SMALL, "train.max_steps=5", f"checkpoint.dir={ckpt}")
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 4
    assert f"in use by pid {holder.pid}" in error_line(proc)


def test_full_error_shows_traceback(tmp_path):
    proc = train(tmp_path, *SMALL, "data=mnist", f"data.path={tmp_path}/missing.npz", env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.mark.parametrize("where, fragment", [
    ("/proc/ckpt", "inside a kernel file system"),
    ("{file}/ckpt", "lies under the file"),
    ("{tmp}/" + "n" * 300, "too long"),
])
def test_a_checkpoint_dir_that_cannot_be_written_is_one_line_exit_2(tmp_path, where, fragment):
    (tmp_path / "afile").write_text("x")
    where = where.format(file=tmp_path / "afile", tmp=tmp_path)
    proc = train(tmp_path, *SMALL, "train.max_steps=2", f"checkpoint.dir={where}")
    assert proc.returncode == 2 and fragment in error_line(proc)
    assert not (tmp_path / "outputs").exists()  # refused before the run dir was made


def _wait_for_library(proc, name: str, timeout: float = 60.0) -> None:
    """Until ``proc`` has mapped a shared library whose path holds ``name``."""
    import time

    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/maps") as maps:
                if name in maps.read():
                    return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"{name} was not loaded within {timeout:.0f}s (exit status {proc.poll()})")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
def test_ctrl_c_at_any_moment_is_never_a_traceback(tmp_path):
    import signal
    import time

    # Timed from the moment the command's main() has started loading TensorFlow's libraries (before
    # that, Python's own start runs none of the command's code, and a Ctrl-C is Python's traceback):
    # while the config is composed, while TensorFlow imports, while the session starts, while training.
    # The outcome is asserted, not the moment: a loaded machine shifts the phases, never the result.
    for delay in (0.0, 0.4, 1.6, 3.6):
        proc = subprocess.Popen([TRAIN, *SMALL, "train.max_steps=100000"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        _wait_for_library(proc, "libtensorflow_framework")
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, (delay, err)
        # Interrupted while starting ("error: interrupted"), or stopped as a preemption once training: 130
        # either way, never another error (OmegaConf turned a Ctrl-C inside its work into an AttributeError).
        last = err.strip().splitlines()[-1]
        assert proc.returncode == 130 and (last == "error: interrupted" or "SIGINT" in last), (delay, err)


_CTRL_C_WHILE_COMPOSING = """
import os, signal, sys
from omegaconf import OmegaConf
from trainer.cli import main

def ctrl_c():  # a resolver: runs inside OmegaConf while the config is composed and checked
    os.kill(os.getpid(), signal.SIGINT)
    return 32

OmegaConf.register_new_resolver("ctrl_c", ctrl_c)
sys.argv = ["train"] + sys.argv[1:]
main()
"""


def test_ctrl_c_while_the_config_is_composed_is_held_until_it_is_built(tmp_path):
    """A Ctrl-C that lands inside Hydra's and OmegaConf's work is raised once the config is built, before
    TensorFlow loads: the run never started, so the run dir holds no record of it (nothing staged left),
    no checkpoint and no metrics, and the command says so in one line."""
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_WHILE_COMPOSING, *SMALL, "train.batch_size=${ctrl_c:}",
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 130 and error_line(proc) == "error: interrupted", proc.stderr
    assert not (tmp_path / "run" / ".hydra" / "config.yaml").exists()
    assert not [p for p in (tmp_path / "run" / ".hydra").iterdir() if p.name.startswith("staged-")]
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "metrics.json").exists()


def test_held_ctrl_c_is_raised_at_release_and_an_error_goes_first():
    import signal
    import time

    from trainer import interrupts
    from trainer.interrupts import ctrl_c_pressed, hold_ctrl_c, release_ctrl_c

    handler = signal.getsignal(signal.SIGINT)
    # After the release: Python's own handler, remembering the Ctrl-C (a KeyboardInterrupt may be dropped).
    after = interrupts._interrupt if handler is signal.default_int_handler else handler
    try:
        release_ctrl_c()  # nothing held: nothing happens
        assert signal.getsignal(signal.SIGINT) is handler
        hold_ctrl_c()
        os.kill(os.getpid(), signal.SIGINT)  # recorded, not raised
        with pytest.raises(KeyboardInterrupt):
            release_ctrl_c()
        assert signal.getsignal(signal.SIGINT) is after and not ctrl_c_pressed()
        hold_ctrl_c()
        os.kill(os.getpid(), signal.SIGINT)
        release_ctrl_c(raise_pending=False)  # an error already on its way is the one reported
        assert signal.getsignal(signal.SIGINT) is after
        hold_ctrl_c()
        release_ctrl_c()  # held, no Ctrl-C: nothing raised
        assert signal.getsignal(signal.SIGINT) is after and not ctrl_c_pressed()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert ctrl_c_pressed() == (after is interrupts._interrupt)
    finally:
        signal.signal(signal.SIGINT, handler)
        interrupts._pressed.clear()


_PRELOAD = """
import sys
from trainer.process import import_tensorflow, preload_libraries, quiet_stderr, set_environment, _preloaded

set_environment()  # as the command does first
preload_libraries()
print("an error while they load", file=sys.stderr)  # the command's own lines still show
_preloaded()
maps = open("/proc/self/maps").read()
print("loaded before the import:", "libtensorflow_cc.so.2" in maps and "tensorflow" not in sys.modules)
tf = import_tensorflow()
with quiet_stderr():  # CUDA's probing when the first session starts, as the runner does
    tf.config.list_logical_devices()
with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    print("a session runs:", sess.run(tf.constant(2.0) * 3.0))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the libraries are loaded ahead on Linux only")
def test_tensorflows_libraries_load_ahead_quietly_and_the_import_uses_them():
    """preload_libraries: TensorFlow's C++ libraries are in the process before its import, their start-up
    lines (which absl prints whatever TF_CPP_MIN_LOG_LEVEL says) stay off the terminal, Python's stderr
    reaches it meanwhile, and TensorFlow imports and runs on the loaded libraries."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-c", _PRELOAD], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["loaded before the import: True", "a session runs: 6.0"]
    assert proc.stderr == "an error while they load\n"


_NO_EXTENSIONS_WHILE_LOADING = """
import sys

import trainer.cli as cli
import trainer.process as environment


def extension_modules():
    return {name for name, module in list(sys.modules.items()) if (getattr(module, "__file__", None) or "").endswith(".so")}


seen = {}
preload, import_tensorflow = cli.preload_libraries, environment.import_tensorflow


def preloading():
    seen["started"] = extension_modules()
    preload()


def importing(*args, **kwargs):
    seen.setdefault("import", extension_modules())
    return import_tensorflow(*args, **kwargs)


cli.preload_libraries, environment.import_tensorflow = preloading, importing
sys.argv = ["train", *sys.argv[1:]]
cli.main()
print("preloaded:", "started" in seen)
print("extension modules loaded meanwhile:", sorted(seen["import"] - seen["started"]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the libraries are loaded ahead on Linux only")
@pytest.mark.parametrize("data", ["synthetic", "fashion_mnist"])
def test_no_extension_module_waits_for_the_libraries_loading(tmp_path, data):
    """From the moment TensorFlow's libraries start loading (which holds the dynamic loader's lock
    for 0.4 s) until TensorFlow's import, the command loads no extension module: importing Hydra,
    composing the config, making the run dir and reading the data ahead would otherwise wait."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "HYDRA_FULL_ERROR")}
    args = [*SMALL, f"data={data}", "train.max_steps=1", f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.run([sys.executable, "-c", _NO_EXTENSIONS_WHILE_LOADING, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("preloaded:", "extension modules"))]
    assert lines == ["preloaded: True", "extension modules loaded meanwhile: []"], proc.stdout


_COLLECTOR_AT_START_UP = """
import gc
import sys

import trainer.cli as cli
import trainer.process as environment

phase, collections, seen = ["command"], {"command": [], "import": [], "run": []}, {}
import_tensorflow = environment.import_tensorflow


def importing(*args, **kwargs):
    phase[0] = "import"
    try:
        return import_tensorflow(*args, **kwargs)
    finally:
        phase[0] = "run"
        seen["enabled"], seen["frozen"] = gc.isenabled(), gc.get_freeze_count()


environment.import_tensorflow = importing
gc.callbacks.append(lambda stage, info: collections[phase[0]].append(info["generation"]) if stage == "start" else None)
sys.argv = ["train", *sys.argv[1:]]
cli.main()
print("collections before the run:", collections["command"] + collections["import"])
print("after the import: collector on", seen["enabled"], "frozen", seen["frozen"] > 100000)
"""


def test_the_collector_is_off_until_tensorflow_is_imported(tmp_path):
    """Python's cyclic garbage collector does not run from the command's start to the end of TensorFlow's
    import (each full pass walks some 455,000 objects that live as long as the process: 0.4-0.5 s of the
    import), and is back on, without those objects, for the run."""
    args = [*SMALL, "train.max_steps=1", f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.run([sys.executable, "-c", _COLLECTOR_AT_START_UP, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("collections", "after the import"))]
    assert lines == ["collections before the run: []", "after the import: collector on True frozen True"], proc.stdout


def test_a_run_prints_nothing_on_stderr(tmp_path):
    """TensorFlow's C++ start-up lines, from the libraries loaded ahead or from the import, stay off the terminal."""
    proc = train(tmp_path, *SMALL, "train.max_steps=2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_the_console_shows_one_line_per_checkpoint_and_train_log_keeps_tensorflows_chatter(tmp_path):
    proc = train(tmp_path, *SMALL, "train.max_steps=30", "checkpoint.every_steps=10", "log.progress=off")
    assert proc.returncode == 0, proc.stderr
    console = proc.stdout + proc.stderr
    assert [line.split("Saving checkpoints for ")[1].split()[0] for line in console.splitlines()
            if "Saving checkpoints for" in line] == ["0", "10", "20", "30"]
    assert "Calling checkpoint listeners" not in console and "Graph was finalized" not in console
    assert re.search(r"model linear: [\d,]+ trainable parameters \([\d.]+ MiB\)", console), console
    log = (tmp_path / RUN_NAME / "train.log").read_text()
    assert log.count("Calling checkpoint listeners before saving") == 4 and "Graph was finalized" in log


def _on_a_pty(tmp_path, args, columns=None) -> str:
    """What ``train ARGS`` prints to a pseudo-terminal (``columns`` wide; None: of no known size, as
    under ``script`` or some CI runners), once it exits 0."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: train on the pty, as a user at a terminal runs it
        os.chdir(tmp_path)
        os.execv(TRAIN, [TRAIN, *args])
    if columns:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the pty
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return b"".join(chunks).decode(errors="replace")


def test_log_lines_print_above_the_progress_bar_on_a_terminal(tmp_path):
    """On a terminal (a pty here) the bar is redrawn below each log line, never cut by one."""
    # The CNN: slow enough (about 8 steps/s) for the bar to be on screen when an evaluation logs.
    screen = _on_a_pty(tmp_path, [*SMALL, "model=mnist", "train.max_steps=45", "eval.every_steps=15",
                                  "log.progress=bar", "log.every_steps=3"], columns=160)
    # What stays on screen of each line: the text after its last carriage return.
    shown = [line.rstrip("\r").split("\r")[-1] for line in screen.split("\n")]
    logged = [line for line in shown if "][INFO] - " in line]
    assert sum("eval at step" in line for line in logged) == 3 and "%|" in screen, screen[-3000:]
    cut = [line for line in logged if not line.startswith("[")]  # a bar fragment left before a log line
    assert not cut, cut[:3]


def test_a_terminal_of_no_known_size_gets_progress_lines_not_a_bar(tmp_path):
    screen = _on_a_pty(tmp_path, [*SMALL, "train.max_steps=20", "log.progress=auto", "log.every_steps=5"])
    assert "step 10/20 loss" in screen and "step 20/20 loss" in screen and "%|" not in screen, screen[-2000:]


@pytest.mark.parametrize("flag", ["hydra.run.dir", "hydra.sweep.dir"])
def test_a_run_dir_that_cannot_be_made_is_one_line_exit_2(tmp_path, flag):
    (tmp_path / "afile").write_text("x")
    args = ["-m", "model=mlp,linear"] if flag == "hydra.sweep.dir" else []
    proc = train(tmp_path, *SMALL, *args, f"{flag}={tmp_path / 'afile' / 'run'}")
    assert proc.returncode == 2 and f"{flag}={tmp_path / 'afile' / 'run'} lies under the file" in error_line(proc)


def test_help_is_the_runners_own_and_names_every_option(tmp_path):
    proc = train(tmp_path, "--help")
    assert proc.returncode == 0 and "Usage:" in proc.stdout and "powered by Hydra" not in proc.stdout
    conf = os.path.join(os.path.dirname(__file__), "..", "conf")
    for group in ("model", "data", "optimizer", "session", "device", "hooks", "hook", "distributed", "sweep", "budget",
                  "recipe"):
        for option in sorted(f[:-5] for f in os.listdir(os.path.join(conf, group)) if f.endswith(".yaml")):
            assert option in proc.stdout, f"{group}={option} is missing from train --help"
    assert "base_" not in proc.stdout  # the schemas are not options


def test_a_sweep_needing_a_download_it_cannot_make_fails_once_before_any_job(tmp_path):
    from trainer.data.download import KERAS_BASE_URL, unreachable

    if unreachable(KERAS_BASE_URL) is None:
        pytest.skip("the download host is reachable from here")
    proc = train(tmp_path, "-m", "data=mnist", f"data.download_dir={tmp_path / 'cache'}", "train.max_steps=2",
                 "optimizer.learning_rate=0.1,0.01")
    assert proc.returncode == 2, proc.stderr
    assert "data=mnist: its files are not here and must be downloaded, but " in error_line(proc)
    assert "use data=fashion_mnist" in error_line(proc) and "Launching" not in proc.stdout + proc.stderr
    assert not (tmp_path / "outputs").exists()


def test_a_gpu_sweep_on_a_machine_without_one_fails_once_before_any_job(tmp_path):
    from trainer.session.device import visible_gpus

    if visible_gpus():
        pytest.skip("this machine has a GPU")
    proc = train(tmp_path, "-m", *SMALL, "device=gpu", "train.max_steps=2", "optimizer.learning_rate=0.1,0.01")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [error_line(proc)]  # one line: no TensorFlow chatter, no traceback
    assert error_line(proc).startswith("error: device=gpu: TensorFlow sees no GPU")
    assert not (tmp_path / "outputs").exists()


def test_the_slurm_launcher_without_slurm_is_one_line(tmp_path):
    if shutil.which("srun"):
        pytest.skip("this machine has SLURM")
    proc = train(tmp_path, "-m", "hydra/launcher=submitit_slurm", *SMALL, "train.max_steps=2")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [error_line(proc)]
    assert "hydra/launcher=submitit_slurm: no srun on this machine's PATH" in error_line(proc)
