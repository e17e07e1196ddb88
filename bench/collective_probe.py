"""Why two ``MultiWorkerMirroredStrategy`` workers hang in graph mode, and what makes them train.

Two worker processes on 127.0.0.1, each building the same graph mode program as a TF 1.x era
program did: the strategy made inside a ``tf.Graph`` (so no eager coordination service), a
``tf.compat.v1.train.Server`` with the strategy's session config, the model under
``strategy.scope()`` through ``call_for_each_replica``, then a ``MonitoredTrainingSession``:

  --init chief   only worker 0 is the chief (``is_chief=index == 0``): the usual ps-era pattern.
  --init every   every worker initialises its own session (``is_chief=True`` on each), as the
                 distribute coordinator made Estimator do for collective strategies
                 (``strategy.extended.experimental_should_init`` is true on every worker).

Under ``--init chief`` the two deadlock: the variables are mirrored on each worker, so the chief's
initialisation does not initialise worker 1's copies, and worker 1 waits for them to be ready,
while the chief's initialisers (a collective broadcast of the initial values) wait for worker 1's
matching receive. Under ``--init every`` both train and end with the same weights.

    python -m bench.collective_probe --init every
    python -m bench.collective_probe --init chief --timeout 60
"""

import argparse
import json
import os
import subprocess
import sys
import time

from trainer.dist.roles import free_ports


def worker(index: int, ports, init: str, steps: int) -> None:
    import tensorflow as tf

    tf1 = tf.compat.v1
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    with tf.Graph().as_default():
        strategy = tf1.distribute.experimental.MultiWorkerMirroredStrategy()
        config = strategy.update_config_proto(tf1.ConfigProto())
        server = tf1.train.Server(tf1.train.ClusterSpec(cluster), job_name="worker", task_index=index, config=config)
        with strategy.scope():
            global_step = tf1.train.get_or_create_global_step()
            # Each worker its own half of a batch of 8: y = x . [1, 1]
            x = tf.constant([[1.0, 2.0], [2.0, 1.0], [0.5, 1.5], [1.5, 0.5]]) * (1.0 + index)
            y = tf.reduce_sum(x, axis=1, keepdims=True)

            def step(x, y):
                w = tf1.get_variable("w", [2, 1], initializer=tf1.zeros_initializer())
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
                return loss, tf1.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)

            loss, train = strategy.extended.call_for_each_replica(step, args=(x, y))
            train = strategy.group(train)
            weights = tf1.global_variables("w")[0]
        started = time.time()
        with tf1.train.MonitoredTrainingSession(master=server.target, is_chief=init == "every" or index == 0,
                                                config=config,
                                                hooks=[tf1.train.StopAtStepHook(last_step=steps)]) as sess:
            print(f"worker {index}: session after {time.time() - started:.1f}s", flush=True)
            while not sess.should_stop():
                last, _ = sess.run([loss, train])
            w = sess.run_step_fn(lambda step_context: step_context.session.run(weights))
        print(json.dumps({"worker": index, "loss": float(last), "w": [float(v) for v in w.ravel()]}), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init", choices=["chief", "every"], default="every")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.ports.split(","), args.init, args.steps)
        return 0
    ports = ",".join(str(p) for p in free_ports("127.0.0.1", 2))
    command = [sys.executable, "-m", "bench.collective_probe", "--init", args.init, "--steps", str(args.steps),
               "--ports", ports]
    procs = [subprocess.Popen(command + ["--worker", str(i)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True) for i in range(2)]
    deadline, outcome = time.time() + args.timeout, "trained"
    for proc in procs:
        try:
            proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            outcome = f"hung: no worker done after {args.timeout:g}s"
            break
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        print(proc.stdout.read().strip())
    print(f"--init {args.init}: {outcome}")
    return 0 if outcome == "trained" else 1


if __name__ == "__main__":
    sys.exit(main())
