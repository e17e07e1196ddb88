"""Distributed roles: config and TF_CONFIG parsing, and real gRPC clusters on 127.0.0.1.

Cluster tests start real ``train`` processes (or a real local launcher) and check that every
task exits, the chief's checkpoint reaches ``train.max_steps`` and no process is left behind.
"""

import glob
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import TINY
from helpers import TESTS_DIR, TRAIN, ckpt_steps as _ckpt_steps, wait_for_step
from trainer import run as execute
from trainer.dist.roles import Role, free_ports, port_in_use, probe, resolve_role
from trainer.errors import ClusterError, ConfigError, PortInUseError

pytestmark = pytest.mark.cluster
# Steps are quick here: the work is in starting processes and in recovering.
CLUSTER_TINY = [o for o in TINY if not o.startswith(("train.max_steps", "checkpoint.every_steps", "eval.every_steps",
                                                       "summary.every_steps"))] + [
    "eval.every_steps=1000", "summary.every_steps=100", "model=mlp", "model.params.hidden_units=[16]", "distributed.ready_poll_secs=0.5",
    "distributed.max_wait_secs=60", "distributed.progress_timeout_secs=60",
]


# Asynchronous workers finish the steps they have in flight when the global step reaches the
# target (and read it racing the other workers' updates): the end can pass it by a few steps.
ASYNC_OVERSHOOT = 4


class Dist:
    """A stand-in for the ``distributed`` config node."""

    def __init__(self, **kw):
        defaults = dict(kind="cluster", cluster=None, job_name=None, task_index=0, num_ps=1, num_workers=2, strategy="ps",
                        port_base=8888)
        self.__dict__.update(defaults, **kw)


CLUSTER = {"chief": ["h0:2000"], "worker": ["h1:2000", "h2:2000"], "ps": ["h3:2000", "h4:2000"]}


# --- roles -------------------------------------------------------------------------------


@pytest.mark.parametrize("task_type,index,is_chief,replica", [
    ("chief", 0, True, 0), ("worker", 0, False, 1), ("worker", 1, False, 2), ("ps", 1, False, 0),
    ("evaluator", 0, False, 0),
])
def test_tf_config_each_task_type(task_type, index, is_chief, replica):
    env = {"TF_CONFIG": json.dumps({"cluster": CLUSTER, "task": {"type": task_type, "index": index}})}
    role = resolve_role(Dist(kind="tf_config"), env)
    assert (role.job, role.index, role.is_chief) == (task_type, index, is_chief)
    assert role.num_replicas == 3 and role.replica_index == replica
    assert role.cluster["ps"] == ("h3:2000", "h4:2000")


def test_collective_cluster_has_no_ps_task():
    role = resolve_role(Dist(cluster={"worker": ["a:1", "b:1"]}, job_name="worker", task_index=1, strategy="collective"), {})
    assert (role.num_replicas, role.replica_index, role.is_chief) == (2, 1, False)


def test_worker_0_is_chief_without_chief_job():
    cluster = {"worker": ["a:1", "b:1"], "ps": ["c:1"]}
    assert resolve_role(Dist(cluster=cluster, job_name="worker", task_index=0)).is_chief
    assert not resolve_role(Dist(cluster=cluster, job_name="worker", task_index=1)).is_chief
    assert resolve_role(Dist(kind="none")).is_chief


@pytest.mark.parametrize("kw,env,fragment", [
    (dict(job_name="bogus"), None, "distributed.job_name=bogus: unknown job"),
    (dict(job_name="worker", task_index=2), None, "distributed.task_index=2: job worker has 2 task(s), so the index must be 0..1"),
    (dict(job_name="chief"), None, "distributed.job_name=chief: the cluster has no chief job"),
    (dict(job_name=None), None, "distributed.job_name is not set"),
    (dict(cluster={"worker": ["a:1"]}, job_name="worker"), None, "has no ps task"),
    (dict(cluster={"worker": ["a"], "ps": ["b:1"]}, job_name="worker"), None, "'a' is not host:port"),
    (dict(cluster={"worker": ["a:1"], "ps": ["a:1"]}, job_name="worker"), None, "a:1 is given to more than one task"),
    (dict(cluster={"master": ["a:1"], "ps": ["b:1"]}, job_name="ps"), None, "distributed.cluster.master: unknown job"),
    (dict(cluster=None, job_name="ps"), None, "distributed.cluster is not set"),
    (dict(cluster={"worker": ["a:1", "b:1"], "ps": ["c:1"]}, job_name="worker", strategy="collective"), None,
     "distributed.strategy=collective keeps the variables on every worker"),
    (dict(kind="tf_config"), {}, "the TF_CONFIG environment variable is not set"),
    (dict(kind="tf_config"), {"TF_CONFIG": "{bad"}, "TF_CONFIG is not valid JSON"),
    (dict(kind="tf_config"), {"TF_CONFIG": json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 5}})},
     "TF_CONFIG task.index=5: job worker has 2 task(s)"),
])
def test_bad_cluster_specs(kw, env, fragment):
    kw = dict(dict(cluster={"worker": ["a:1", "b:1"], "ps": ["c:1"]}), **kw)
    with pytest.raises(ConfigError) as e:
        resolve_role(Dist(**kw), env if env is not None else {})
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("overrides,fragment", [
    (["session=plain"], "session=plain: a cluster needs MonitoredTrainingSession"),
    (["mode=evaluate"], "mode=evaluate: a cluster only trains"),
    (["distributed.sync_replicas=true", "train.on_nan=skip_step"], "train.on_nan=skip_step: SyncReplicasOptimizer"),
    (["distributed.replicas_to_aggregate=3"], "distributed.replicas_to_aggregate=3: must be 1..2"),
    (["distributed.max_wait_secs=0"], "distributed.max_wait_secs=0: must be > 0"),
    (["distributed.strategy=collective", "distributed.sync_replicas=true"],
     "every step is already synchronous"),
])
def test_cluster_config_rules(make_cfg, overrides, fragment):
    from trainer.config.rules import validate

    cluster = "{worker:['127.0.0.1:2','127.0.0.1:3']}" if "distributed.strategy=collective" in overrides else \
        "{ps:['127.0.0.1:1'],worker:['127.0.0.1:2','127.0.0.1:3']}"
    cfg = make_cfg("distributed=cluster", f"+distributed.cluster={cluster}", "distributed.job_name=worker", *overrides)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert fragment in str(e.value)


def test_run_dir_leaves_out_distributed_and_tasks_keep_their_own_hydra_dir():
    from trainer.cli.paths import log_name, output_subdir, run_dir

    overrides = ["model=mlp", "distributed=cluster", "distributed.job_name=worker", "distributed.task_index=1"]
    assert run_dir(overrides) == run_dir(["model=mlp"]) == "outputs/model-mlp"
    worker1 = Dist(cluster={"worker": ["a:1", "b:1"], "ps": ["c:1"]}, job_name="worker", task_index=1)
    chief = Dist(cluster={"worker": ["a:1", "b:1"], "ps": ["c:1"]}, job_name="worker", task_index=0)
    assert output_subdir(overrides, worker1) == ".hydra/worker-1" and log_name(worker1) == "train-worker-1.log"
    assert output_subdir(overrides, chief) == ".hydra" and log_name(chief) == "train.log"


# --- pieces with TensorFlow, in process --------------------------------------------------


def test_port_in_use_names_the_port():
    from trainer.dist.server import start_server

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        role = Role("cluster", {"ps": (f"127.0.0.1:{port}",), "worker": ("127.0.0.1:1",)}, "ps", 0)
        with pytest.raises(PortInUseError) as e:
            start_server(role)
    assert f"ps-0 cannot listen on port {port}" in str(e.value) and "in use" in str(e.value)


def test_watchdog_exits_naming_the_unreachable_task(capsys):
    from trainer.dist.watchdog import Watchdog

    ps_port, me = free_ports("127.0.0.1", 2)
    role = Role("cluster", {"ps": (f"127.0.0.1:{ps_port}",), "worker": (f"127.0.0.1:{me}",)}, "worker", 0)
    codes = []
    dog = Watchdog(role, exit=codes.append)
    dog.expect(1.0, "waiting for the ps tasks")
    deadline = time.time() + 10
    while not codes and time.time() < deadline:
        time.sleep(0.1)
    dog.stop()
    assert codes == [ClusterError.exit_code]
    err = capsys.readouterr().err
    assert f"ps 0 at 127.0.0.1:{ps_port}" in err and "waiting for the ps tasks" in err


def test_watchdog_beats_keep_it_quiet():
    from trainer.dist.watchdog import Watchdog

    codes = []
    dog = Watchdog(Role("cluster", {"ps": ("127.0.0.1:1",), "worker": ("127.0.0.1:2",)}, "worker", 0), exit=codes.append)
    dog.expect(1.0, "training")
    for _ in range(20):
        time.sleep(0.1)
        dog.beat()
    dog.stop()
    assert codes == []


# --- real clusters ------------------------------------------------------------------------


def _cluster_arg(ps, workers):
    quoted = lambda addrs: ",".join(f"'127.0.0.1:{p}'" for p in addrs)  # noqa: E731
    return f"+distributed.cluster={{ps:[{quoted(ps)}],worker:[{quoted(workers)}]}}"


def _start(cwd, job, index, cluster_arg, *extra):
    log = open(os.path.join(cwd, f"{job}-{index}.out"), "ab")
    args = [TRAIN, *CLUSTER_TINY, "distributed=cluster", cluster_arg, f"distributed.job_name={job}",
            f"distributed.task_index={index}", *extra]
    return subprocess.Popen(args, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)


def _wait_all(procs, timeout=240):
    deadline = time.time() + timeout
    codes = {}
    for name, proc in procs.items():
        try:
            codes[name] = proc.wait(max(deadline - time.time(), 1))
        except subprocess.TimeoutExpired:
            for p in procs.values():
                p.kill()
            raise AssertionError(f"{name} did not end in time")
    return codes


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has ended
        return f.read().split(") ")[-1][0] != "Z"


def _run_dir(cwd, timeout=120):
    """The chief's run dir, once it exists."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = [d for d in glob.glob(os.path.join(cwd, "outputs", "*"))
                 if not os.path.islink(d) and os.path.exists(os.path.join(d, "checkpoints"))]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no run dir under {cwd}/outputs")


def _output(cwd, name):
    with open(os.path.join(cwd, f"{name}.out"), errors="replace") as f:
        return f.read()


def test_local_cluster_trains_to_max_steps(tmp_path):
    """One command: 1 ps + 2 workers on sharded TFRecord files, each worker reading its own files;
    the chief's checkpoint reaches max_steps, every task exits 0."""
    from test_files import write_tfrecords

    data = tmp_path / "data"
    data.mkdir()
    write_tfrecords(str(data), "train", shards=4, per_shard=50)
    write_tfrecords(str(data), "eval", shards=1, per_shard=40, seed=1)
    command = [TRAIN, *(o for o in CLUSTER_TINY if not o.startswith("data")), "data=tfrecord",
               f"data.train_files={data}/train-*", f"data.eval_files={data}/eval-*", "data.label_key=label",
               "data.features.image={shape: [32, 32, 3], dtype: uint8, encoding: raw}", "distributed=local"]
    max_steps = 300
    proc = subprocess.run([*command, f"train.max_steps={max_steps}", "checkpoint.every_steps=100"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    (run,) = [d for d in glob.glob(str(tmp_path / "outputs" / "*")) if not os.path.islink(d)]  # not outputs/latest
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    assert metrics["status"] == "finished" and metrics["role"] == "worker-0"
    assert max_steps <= metrics["global_step"] <= max_steps + ASYNC_OVERSHOOT
    assert _ckpt_steps(os.path.join(run, "checkpoints"))[-1] == metrics["global_step"]
    worker1 = json.load(open(os.path.join(run, "tasks", "worker-1", "metrics.json")))
    ps0 = json.load(open(os.path.join(run, "tasks", "ps-0", "metrics.json")))
    assert worker1["status"] == "finished" and worker1["local_steps"] > 0 and ps0["status"] == "finished"
    assert metrics["local_steps"] + worker1["local_steps"] >= max_steps
    assert sorted(os.listdir(os.path.join(run, "logs"))) == [
        "cluster-config.yaml", "ps-0.log", "worker-0.log", "worker-1.log"]
    assert "[worker-1]" in proc.stdout and "[    ps-0]" in proc.stdout  # the combined view
    worker1_log = open(os.path.join(run, "logs", "worker-1.log")).read()
    assert "hooks (all): WatchdogHook" in worker1_log and "hooks (chief)" not in worker1_log
    worker0_log = open(os.path.join(run, "logs", "worker-0.log")).read()
    assert "CheckpointSaverHook" in worker0_log
    # Each training task reads its own half of the files (4 files, 2 tasks); the chief evaluates all.
    assert f"training task 0 of 2 reads 2 of the 4 training files: {data}/train-00000-of-00004.tfrecord, " \
           f"{data}/train-00002-of-00004.tfrecord" in worker0_log
    assert f"training task 1 of 2 reads 2 of the 4 training files: {data}/train-00001-of-00004.tfrecord, " \
           f"{data}/train-00003-of-00004.tfrecord" in worker1_log
    assert metrics["eval_examples"] == 40
    for record in (metrics, worker1, ps0):
        assert not _alive(record["pid"])

    # The same command again: nothing to do.
    again = subprocess.run([*command, f"train.max_steps={max_steps}", "checkpoint.every_steps=100"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "nothing to do" in again.stderr + again.stdout


@pytest.mark.parametrize("sync", [False, True])
def test_local_cluster_with_two_ps_tasks_ends(tmp_path, sync):
    """2 ps tasks (the variables split between them): every task exits 0 once the chief is done.
    Each ps used to fail placing the other ps's done queue and the command never ended."""
    command = [TRAIN, *CLUSTER_TINY, "distributed=local", "distributed.num_ps=2", f"distributed.sync_replicas={sync}",
               "train.max_steps=40", "checkpoint.every_steps=null"]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    (run,) = [d for d in glob.glob(str(tmp_path / "outputs" / "*")) if not os.path.islink(d)]
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    assert metrics["status"] == "finished" and metrics["global_step"] >= 40
    for ps in ("ps-0", "ps-1"):
        record = json.load(open(os.path.join(run, "tasks", ps, "metrics.json")))
        assert record["status"] == "finished" and not _alive(record["pid"])
    assert "Cannot assign a device" not in proc.stdout + proc.stderr


def test_local_cluster_sync_replicas_and_a_taken_port(tmp_path, make_cfg, monkeypatch):
    """sync_replicas: every update averages both workers' gradients and the chief stops exactly at
    max_steps. The first ports picked include one another process holds: the cluster starts again."""
    from trainer.dist import local as local_cluster

    busy = socket.socket()
    busy.bind(("", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    picks = []

    def ports(host, count):
        picks.append(count)
        found = free_ports(host, count)
        return [taken] + found[1:] if len(picks) == 1 else found

    monkeypatch.setattr(local_cluster, "free_ports", ports)
    cfg = make_cfg(*CLUSTER_TINY, "distributed=local", "distributed.sync_replicas=true", "train.max_steps=60",
                   "checkpoint.every_steps=null")
    try:
        metrics = execute(cfg, str(tmp_path / "run"))
    finally:
        busy.close()
    assert len(picks) == 2  # started again on other ports
    assert metrics["status"] == "finished" and metrics["global_step"] == 60
    assert _ckpt_steps(str(tmp_path / "run" / "checkpoints"))[-1] == 60
    worker1 = json.load(open(tmp_path / "run" / "tasks" / "worker-1" / "metrics.json"))
    assert worker1["status"] == "finished" and worker1["local_steps"] > 0
    assert f"port {taken}" in open(tmp_path / "run" / "logs" / "ps-0.log").read()


def _kill_and_restart(tmp_path, victim, max_steps, every_steps, kill_at):
    """Start ps 0, worker 0 and worker 1 as separate ``train`` processes; once the chief logs step
    ``kill_at``, kill ``victim`` ("ps" or "worker-1") with SIGKILL and start it again with the same
    role. Returns the exit codes and the run dir."""
    ps, w0, w1 = free_ports("127.0.0.1", 3)
    cluster = _cluster_arg([ps], [w0, w1])
    extra = [f"train.max_steps={max_steps}", f"checkpoint.every_steps={every_steps}", "log.every_steps=50"]
    roles = {"ps": ("ps", 0), "worker-0": ("worker", 0), "worker-1": ("worker", 1)}
    procs = {name: _start(tmp_path, job, index, cluster, *extra) for name, (job, index) in roles.items()}
    try:
        run = _run_dir(tmp_path)
        wait_for_step(run, kill_at)
        procs[victim].kill()
        procs[victim].wait()
        time.sleep(1)
        procs[victim] = _start(tmp_path, *roles[victim], cluster, *extra)
        return _wait_all(procs), run
    finally:
        for p in procs.values():
            p.kill()


def test_worker_killed_and_restarted_rejoins(tmp_path):
    """Separately started tasks (distributed=cluster); worker 1 is killed mid-run and started again."""
    max_steps = 3000
    codes, run = _kill_and_restart(tmp_path, "worker-1", max_steps, every_steps=500, kill_at=300)
    assert codes == {"ps": 0, "worker-0": 0, "worker-1": 0}, {n: _output(tmp_path, n)[-1500:] for n in ("ps-0", "worker-1")}
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    assert metrics["status"] == "finished" and max_steps <= metrics["global_step"] <= max_steps + ASYNC_OVERSHOOT
    assert json.load(open(os.path.join(run, "tasks", "worker-1", "metrics.json")))["status"] == "finished"
    assert "worker-1 is done" in _output(tmp_path, "ps-0")
    assert os.path.exists(os.path.join(run, ".hydra", "config.yaml"))
    assert os.path.exists(os.path.join(run, ".hydra", "worker-1", "config.yaml"))


def test_ps_killed_and_restarted_workers_recover_from_the_checkpoint(tmp_path):
    max_steps = 2500
    codes, run = _kill_and_restart(tmp_path, "ps", max_steps, every_steps=200, kill_at=500)
    assert codes == {"ps": 0, "worker-0": 0, "worker-1": 0}, {n: _output(tmp_path, n)[-1500:] for n in ("worker-0", "worker-1")}
    assert "recovered: training continues from step" in _output(tmp_path, "worker-0")
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    assert metrics["status"] == "finished" and max_steps <= metrics["global_step"] <= max_steps + ASYNC_OVERSHOOT


def test_unreachable_ps_fails_within_the_wait_naming_it(tmp_path):
    ps, w0 = free_ports("127.0.0.1", 2)
    started = time.time()
    proc = subprocess.run(
        [TRAIN, *CLUSTER_TINY, "distributed=cluster", _cluster_arg([ps], [w0]), "distributed.job_name=worker",
         "distributed.max_wait_secs=5"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == ClusterError.exit_code, proc.stderr[-2000:]
    assert time.time() - started < 60
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert error and f"ps 0 at 127.0.0.1:{ps} (Connection refused)" in error[-1]


def test_local_cluster_stops_everything_when_a_task_dies(tmp_path):
    proc = subprocess.Popen([TRAIN, *CLUSTER_TINY, "distributed=local", "train.max_steps=100000"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        victim = None
        while victim is None and time.time() < deadline:
            time.sleep(0.5)
            found = subprocess.run(["pgrep", "-f", f"trainer.cli.local_task .*{tmp_path}.* worker 1 "],
                                   capture_output=True, text=True).stdout.split()
            run = glob.glob(str(tmp_path / "outputs" / "*" / "metrics.jsonl"))
            if found and run:  # training has begun
                victim = int(found[0])
        assert victim, "worker 1 did not start"
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == ClusterError.exit_code
    assert re.search(r"error: worker-1 failed \(exit status -9\).*the other tasks were stopped", err), err[-2000:]
    others = subprocess.run(["pgrep", "-f", f"trainer.cli.local_task .*{tmp_path}"], capture_output=True, text=True)
    assert others.stdout.strip() == ""


def test_tf_config_with_distributed_none_is_logged(make_cfg, tmp_path, monkeypatch, caplog):
    import logging

    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}}))
    with caplog.at_level(logging.INFO, logger="trainer"):
        metrics = execute(make_cfg("train.max_steps=5"), str(tmp_path))
    assert metrics["status"] == "finished"
    assert "TF_CONFIG is set but distributed=none: running as a single process" in caplog.text


def test_evaluator_evaluates_the_chiefs_checkpoints_until_max_steps(make_cfg, tmp_path, monkeypatch):
    """The TF_CONFIG evaluator reads the chief's checkpoint dir (a shared file system) and stops
    after the checkpoint at train.max_steps."""
    run = str(tmp_path / "run")
    trained = execute(make_cfg("train.max_steps=20"), run)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": {"type": "evaluator", "index": 0}}))
    result = execute(make_cfg("train.max_steps=20", "distributed=tf_config", "distributed.progress_timeout_secs=30"), run)
    assert result["global_step"] == 20 and result["checkpoint"].endswith("model.ckpt-20")
    assert result["metrics"]["accuracy"] == pytest.approx(trained["eval_accuracy"])
    saved = json.load(open(tmp_path / "run" / "tasks" / "evaluator-0" / "eval_metrics.json"))
    assert saved["global_step"] == 20


def test_probe():
    (port,) = free_ports("127.0.0.1", 1)
    assert probe(f"127.0.0.1:{port}") is not None
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert probe(f"127.0.0.1:{port}") is None


@pytest.mark.parametrize("cluster,saved,evaluated", [(True, 300, 301), (True, 301, 300), (False, 300, 300)])
def test_the_record_ends_at_the_final_checkpoint_when_a_late_update_landed(tmp_path, cluster, saved, evaluated):
    """Asynchronous workers: another worker's last update can land between the chief's final checkpoint
    and its final evaluation, either way round. ``global_step`` in metrics.json is then the checkpoint's (a
    restart continues from it) and ``eval_step`` the evaluation's; a single process has no other writer and
    no ``eval_step``."""
    import types

    import tensorflow as tf
    from omegaconf import OmegaConf

    from trainer.records import MetricsLog
    from trainer.training.loop import LoopStats
    from trainer.training.preemption import PreemptionHandler
    from trainer.dist.task import ClusterTask
    from trainer.training.single_process import SingleProcess

    tf1 = tf.compat.v1
    ckpt = tmp_path / "checkpoints"
    with tf.Graph().as_default():
        step = tf1.train.get_or_create_global_step()
        tf1.get_variable("w", [2])
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(step.assign(saved))
            saver.save(sess, str(ckpt / "model.ckpt"), global_step=saved)
    metrics = MetricsLog(None)
    metrics.record("train", 300, {"loss": 0.5})
    metrics.record("eval", evaluated, {"accuracy": 0.9, "loss": 0.4})
    cfg = OmegaConf.create({"session": {"kind": "monitored"}, "model": {"name": "mlp"}, "data": {"name": "synthetic"},
                            "optimizer": {"_target_": "tensorflow.compat.v1.train.GradientDescentOptimizer"},
                            "checkpoint": {"dir": str(ckpt)}, "train": {"max_steps": 300}})
    role = Role("cluster", {"ps": ("127.0.0.1:1",), "worker": ("127.0.0.1:2", "127.0.0.1:3")}, "worker", 0)
    run = types.SimpleNamespace(cfg=cfg, device="cpu", timings={}, precision="fp32", objective="accuracy")
    task = ClusterTask(role, "", watchdog=None) if cluster else SingleProcess()
    record = task.record(run, 0, metrics, LoopStats(steps=150, train_secs=10.0), PreemptionHandler())
    assert (record["global_step"], record["stop_reason"], record["eval_accuracy"]) == (saved, "max_steps", 0.9)
    assert record.get("eval_step") == (evaluated if saved != evaluated else None)


# --- collective all-reduce (distributed.strategy=collective) -------------------------------


def _eval_loss(run_dir) -> float:
    return json.load(open(os.path.join(run_dir, "metrics.json")))["eval_loss"]


@pytest.mark.parametrize("model", [["model=mlp", "model.params.hidden_units=[16]"],
                                   ["model=model_fn", "model.fn=user_models.own_momentum_classifier"]],
                         ids=["runner_train_op", "model_fns_own_train_op"])
def test_collective_workers_train_as_one_process_with_their_global_batch(tmp_path, model):
    """Two workers, each a batch of 32 from its half of the data, all-reducing their gradients, give the
    weights of one process with a batch of 64 (an unshuffled stream: each global batch is then the
    same 64 examples); stopped at step 40 and resumed by the same command, it ends where the one
    process does, and no ps task runs. A model_fn's own optimizer (``minimize``) is all-reduced too."""
    common = [*model, "data=synthetic", "data.shuffle_buffer=1",
              "checkpoint.every_steps=null", "eval.every_steps=1000", "log.progress=off"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))  # user_models
    one = subprocess.run([TRAIN, *common, "train.batch_size=64", "train.max_steps=60", "hydra.run.dir=one"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert one.returncode == 0, one.stderr[-3000:]
    two = [TRAIN, *common, "train.batch_size=32", "distributed=local", "distributed.strategy=collective",
           "distributed.num_workers=2", "distributed.progress_timeout_secs=60", "hydra.run.dir=two"]
    for max_steps in (40, 60):
        proc = subprocess.run([*two, f"train.max_steps={max_steps}"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    record = json.load(open(tmp_path / "two" / "metrics.json"))
    assert (record["status"], record["role"], record["global_step"], record["start_step"]) == \
        ("finished", "worker-0", 60, 40)
    assert _ckpt_steps(str(tmp_path / "two" / "checkpoints"))[-1] == 60
    worker1 = json.load(open(tmp_path / "two" / "tasks" / "worker-1" / "metrics.json"))
    assert worker1["status"] == "finished" and worker1["local_steps"] == 20  # the resumed run's steps
    assert sorted(os.listdir(tmp_path / "two" / "logs")) == ["cluster-config.yaml", "worker-0.log", "worker-1.log"]
    assert "the chief's variables are on every worker" in open(tmp_path / "two" / "logs" / "worker-1.log").read()
    assert _eval_loss(tmp_path / "two") == pytest.approx(_eval_loss(tmp_path / "one"), rel=1e-5)


def test_collective_refuses_a_train_op_that_no_optimizer_applied(make_cfg, tmp_path):
    """Weights moved by hand (no optimizer's apply_gradients) cannot be all-reduced: refused before
    training, naming the model_fn, instead of workers drifting apart."""
    from trainer.model.model_fn import load_data_for
    from trainer.dist.task import ClusterTask
    from trainer.model.graph import build_graph
    from trainer.plan import graph_recipe

    cfg = make_cfg("model=model_fn", "model.fn=user_models.assigns_its_update", "data=synthetic")
    role = Role("cluster", {"worker": ("127.0.0.1:1", "127.0.0.1:2")}, "worker", 0)
    placement = ClusterTask(role, "", watchdog=None, collective=True).placement("cpu", 1, "fp32")
    with pytest.raises(ConfigError, match="user_models.assigns_its_update returns a train_op that updates the "
                                          "weights without an optimizer"):
        build_graph(graph_recipe(cfg), load_data_for(cfg.model, cfg.data), placement)


def _collective_pair(tmp_path, *overrides):
    """``start(index, max_steps)``: worker ``index`` of a two-worker collective cluster on 127.0.0.1 (the
    same ports for every start), run dir ``tmp_path/run``, with ``overrides``."""
    hosts = [f"127.0.0.1:{p}" for p in free_ports("127.0.0.1", 2)]
    command = [TRAIN, "model=mlp", "model.params.hidden_units=[16]", "data=synthetic", "eval.every_steps=100000",
               "log.progress=off", "log.every_steps=10", "distributed=cluster", "distributed.strategy=collective",
               f"distributed.cluster={{worker:[{hosts[0]},{hosts[1]}]}}", "hydra.run.dir=run", *overrides]

    def start(index, max_steps):
        return subprocess.Popen([*command, f"train.max_steps={max_steps}", "distributed.job_name=worker",
                                 f"distributed.task_index={index}"], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return start


def test_collective_signal_to_one_worker_stops_every_worker_after_the_same_step(tmp_path):
    """SIGTERM to worker 1 of a collective cluster (its machine being preempted): both workers stop
    after the same step (the signal rides on an all-reduced flag), the chief saves that step, both
    exit 143; the same two commands resume from it and finish."""
    start = _collective_pair(tmp_path, "checkpoint.every_steps=null", "distributed.progress_timeout_secs=60")

    procs = [start(0, 1_000_000), start(1, 1_000_000)]
    try:
        wait_for_step(tmp_path / "run", 20, procs[0])
        procs[1].send_signal(signal.SIGTERM)
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [143, 143], outputs[0][1][-2000:] + outputs[1][1][-2000:]
    assert "another worker was stopped by a signal" in open(tmp_path / "run" / "train.log").read()  # the chief's
    record = json.load(open(tmp_path / "run" / "metrics.json"))
    stopped = record["global_step"]
    assert record["status"] == "preempted" and _ckpt_steps(str(tmp_path / "run" / "checkpoints"))[-1] == stopped
    _resume_pair_to(start, tmp_path, stopped)


def _resume_pair_to(start, tmp_path, step: int) -> None:
    """The same two commands again (``start(index, max_steps)``): they resume from ``step`` and finish 20 later."""
    procs = [start(0, step + 20), start(1, step + 20)]
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outputs[0][1][-2000:] + outputs[1][1][-2000:]
    record = json.load(open(tmp_path / "run" / "metrics.json"))
    assert (record["status"], record["start_step"], record["global_step"]) == ("finished", step, step + 20)


# --- SLURM (distributed=slurm) -------------------------------------------------------------


def _slurm(procid, tasks, nodelist, per_node):
    return {"SLURM_PROCID": str(procid), "SLURM_STEP_NUM_TASKS": str(tasks), "SLURM_STEP_NODELIST": nodelist,
            "SLURM_STEP_TASKS_PER_NODE": per_node}


@pytest.mark.parametrize("procid,strategy,job,index", [(0, "ps", "ps", 0), (1, "ps", "worker", 0), (2, "ps", "worker", 1),
                                                       (0, "collective", "worker", 0), (2, "collective", "worker", 2)])
def test_slurm_roles_come_from_tensorflows_resolver(procid, strategy, job, index):
    """Three tasks on node01 (2) and node02 (1), as srun sets them: ranks in order, the first the ps
    (none under collective); each node's tasks on port_base, port_base + 1."""
    dist = Dist(kind="slurm", strategy=strategy, port_base=7000)
    role = resolve_role(dist, _slurm(procid, 3, "node[01-02]", "2,1"))
    assert (role.kind, role.job, role.index) == ("slurm", job, index)
    hosts = ["node01:7000", "node01:7001", "node02:7000"]
    assert role.cluster == ({"ps": (hosts[0],), "worker": tuple(hosts[1:])} if strategy == "ps" else
                            {"worker": tuple(hosts)})
    assert role.is_chief == (job == "worker" and index == 0) and role.distributed


@pytest.mark.parametrize("env,fragment", [
    ({}, "distributed=slurm: SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE "
         "not set; run each task under srun"),
    (_slurm(0, 1, "node01", "1"), "distributed.num_ps=1: the SLURM step has 1 task(s), none left to train"),
])
def test_slurm_outside_a_job_step_or_without_a_worker_is_refused(env, fragment):
    with pytest.raises(ConfigError) as e:
        resolve_role(Dist(kind="slurm", port_base=7000), env)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_slurm_job_step_of_two_tasks_trains(tmp_path):
    """Two tasks with the environment srun gives them (one node, 127.0.0.1), the collective strategy:
    both exit 0 and the chief's checkpoint reaches max_steps."""
    port = free_ports("127.0.0.1", 1)[0]
    while port_in_use(port + 1):
        port = free_ports("127.0.0.1", 1)[0]
    command = [TRAIN, "model=mlp", "model.params.hidden_units=[16]", "data=synthetic", "train.max_steps=30",
               "checkpoint.every_steps=null", "eval.every_steps=1000", "log.progress=off", "distributed=slurm",
               "distributed.strategy=collective", f"distributed.port_base={port}", "hydra.run.dir=run"]
    procs = [subprocess.Popen(command, cwd=tmp_path, env=dict(os.environ, **_slurm(i, 2, "127.0.0.1", "2")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        outputs = [p.communicate(timeout=180) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outputs[0][1][-2000:] + outputs[1][1][-2000:]
    record = json.load(open(tmp_path / "run" / "metrics.json"))
    assert (record["status"], record["role"], record["global_step"]) == ("finished", "worker-0", 30)
    assert record["cluster"] == {"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]}
    assert _ckpt_steps(str(tmp_path / "run" / "checkpoints"))[-1] == 30


def test_collective_worker_killed_fails_the_others_naming_it_and_the_cluster_resumes(tmp_path):
    """kill -9 of worker 1 (no signal to pass on): the chief waits in the next all-reduce until its
    watchdog, then exits 5 naming the task that does not answer; the checkpoints stay, and the same
    two commands resume from the newest."""
    start = _collective_pair(tmp_path, "checkpoint.every_steps=20", "distributed.progress_timeout_secs=8")

    procs = [start(0, 1_000_000), start(1, 1_000_000)]
    try:
        wait_for_step(tmp_path / "run", 40, procs[0])
        procs[1].kill()
        out, err = procs[0].communicate(timeout=120)
    finally:
        for p in procs:
            p.kill()
    assert procs[0].returncode == ClusterError.exit_code, err[-2000:]
    assert re.search(r"no progress for 8s.*worker 1 at 127\.0\.0\.1:\d+ \(", err), err[-2000:]
    saved = _ckpt_steps(str(tmp_path / "run" / "checkpoints"))[-1]
    assert saved >= 40
    _resume_pair_to(start, tmp_path, saved)
