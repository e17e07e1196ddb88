"""A cluster task's gRPC server, and how the ps tasks learn that training is done: a done token
from each training task in a queue hosted on every ps."""

import logging
import os
import queue
import threading
import time
from typing import Dict

import tensorflow as tf

from trainer.dist.roles import Role, port_in_use, unreachable
from trainer.dist.watchdog import Watchdog
from trainer.errors import ClusterError, PortInUseError
from trainer.process import quiet_stderr

tf1 = tf.compat.v1
log = logging.getLogger("trainer")

DONE_QUEUE = "trainer_done_queue_ps{}"
PS_LINGER_SECS = 1.0


def start_server(role: Role, config=None, quiet: bool = True):
    """This task's ``tf.compat.v1.train.Server``.

    Raises:
      PortInUseError: another process holds this task's port.
    """
    address = role.address
    port = int(address.rsplit(":", 1)[1])
    in_use = (f"{role.name} cannot listen on port {port} (its address {address} in the cluster): the port is in use; "
              "stop what holds it or give this task another port")
    if port_in_use(port):
        raise PortInUseError(in_use)
    log.warning("%s: TensorFlow's gRPC server listens on all interfaces (*:%d), not only %s, and does not "
                "authenticate: keep the cluster on a private network", role.name, port, address.rsplit(":", 1)[0])
    try:
        with quiet_stderr(quiet):  # CUDA's probing and gRPC's bind errors: reported here instead
            server = tf1.train.Server(tf1.train.ClusterSpec({j: list(a) for j, a in role.cluster.items()}),
                                      job_name=role.job, task_index=role.index, config=config, start=True)
    except tf.errors.UnknownError as e:
        if "Could not start gRPC server" in str(e):
            raise PortInUseError(in_use) from None
        raise
    log.info("%s: server started at %s", role.name, server.target)
    return server


def _done_queue(index: int):
    """Ps task ``index``'s queue of done tokens, shared by name across the tasks' graphs; capacity for
    restarted workers' tokens."""
    with tf.device(f"/job:ps/task:{index}"):
        return tf1.FIFOQueue(1024, tf.string, shapes=[[]], shared_name=DONE_QUEUE.format(index),
                             name=f"done_queue_ps{index}")


def _done_queues(role: Role):
    """Every ps task's queue (a training task tells each)."""
    return [_done_queue(i) for i in range(len(role.cluster["ps"]))]


def signal_done(role: Role, target: str, watchdog: Watchdog, max_wait_secs: float) -> None:
    """Put this training task's done token on every ps queue."""
    watchdog.expect(max_wait_secs, "telling the ps tasks this task is done")
    graph = tf.Graph()
    with graph.as_default():
        enqueue = tf.group(*[q.enqueue(tf.constant(role.name)) for q in _done_queues(role)])
        config = tf1.ConfigProto(device_filters=["/job:ps", role.device()])
        # Not closed: the last token ends the ps, so a close would only log a failed
        # CleanupGraph on it; the process exits right after.
        try:
            tf1.Session(target, config=config).run(enqueue)
        except tf.errors.UnavailableError as e:
            # The last token ends the ps; its answer to this call can be lost as it goes.
            log.warning("%s: a ps task went away as this task's done token was sent (%s); it stops once it "
                        "has every token", role.name, (str(e.message).splitlines() or [""])[0])
            return
    log.info("%s: done; told %d ps task(s)", role.name, len(role.cluster["ps"]))


def serve_ps(role: Role, server, progress_timeout_secs: float) -> Dict:
    """Serve the variables until every training task is done; fail when all of those not done yet
    are unreachable for ``progress_timeout_secs``."""
    waiting = {f"{job}-{i}" for job, i in role.training_tasks}
    graph = tf.Graph()
    with graph.as_default():
        # Only this ps's own queue: a session that sees only this task's devices places its whole
        # graph, and another ps's queue there cannot be placed (with 2 ps tasks every ps failed so).
        dequeue = _done_queue(role.index).dequeue()
    sess = tf1.Session(server.target, graph=graph, config=tf1.ConfigProto(device_filters=[role.device()]))
    # A blocking dequeue in its own thread: a step timeout (RunOptions) would make the master
    # abort a step every few seconds, and aborted steps stall the ps for everyone.
    done = queue.Queue()

    def take_tokens():
        while True:
            done.put(sess.run(dequeue).decode())

    threading.Thread(target=take_tokens, name="trainer-done-tokens", daemon=True).start()
    log.info("%s: serving until %s are done", role.name, ", ".join(sorted(waiting)))
    gone_since = None
    while waiting:
        try:
            name = done.get(timeout=2.0)
        except queue.Empty:
            pending = [tuple(n.rsplit("-", 1)) for n in sorted(waiting)]
            gone = unreachable(role, [(job, int(i)) for job, i in pending])
            if len(gone) < len(pending):
                gone_since = None
            elif gone_since is None:
                gone_since = time.monotonic()
            elif time.monotonic() - gone_since > progress_timeout_secs:
                raise ClusterError(
                    f"{role.name}: every training task not done yet has been unreachable for "
                    f"{progress_timeout_secs:.0f}s ({'; '.join(gone)}); the ps stops. Restart them and this ps"
                ) from None
            continue
        if name in waiting:
            waiting.discard(name)
            log.info("%s: %s is done%s", role.name, name,
                     f"; waiting for {', '.join(sorted(waiting))}" if waiting else "")
    log.info("%s: every training task is done; stopping", role.name)
    time.sleep(PS_LINGER_SECS)  # the last token's sender gets the answer to its call before this ps goes
    return {"status": "finished", "role": role.name, "pid": os.getpid(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
