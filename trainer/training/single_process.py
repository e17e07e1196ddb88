"""What differs between a process that trains alone and one training task of a cluster, behind one
small interface; ``trainer.training.train`` is written once against it.

:class:`SingleProcess` is the one-process implementation; ``trainer.dist.task.ClusterTask`` is the
other (a chief or a worker of between-graph replication). The interface, in the order a run uses it::

    placement(device, replicas, precision)  where the graph's parts go
    cluster_role                            the cluster role for the model_fn's RunConfig (None: none)
    objective(name, evaluation)             eval.objective, checked where this process evaluates
    claim(request, graph, workdir, data)    the checkpoint dir held while training: a ``Claim``
    hooks                                   hooks of its own, added to every task's
    session_config(config)                  the ConfigProto, narrowed for a cluster
    session_options(options, graph)         the master, chief-ness and waits of session creation
    checkpoint_dir(ckpt_dir)                the dir the session restores and saves (None: never)
    open_session(opener)                    session creation, under a cluster's deadline
    fetches(graph)                          what each step runs
    at_normal_end(session)                  before the hooks' end() when training ends normally
    record(run, start_step, metrics, stats, preemption)   the result record (metrics.json)
    report(result, workdir)                 the closing log line
"""

import contextlib
import logging
import os
from typing import Dict, List, Optional

from trainer.checkpoints.guard import Claim, claim as claim_dir, metrics_path
from trainer.hooks.evaluation import format_metrics, objective_metric
from trainer.model.graph import Placement, single_process
from trainer.training.result import chief_record, final_step

log = logging.getLogger("trainer")


class SingleProcess:
    """This process trains alone: it holds the checkpoint dir, evaluates and records the result."""

    is_chief = True
    cluster_role = None
    hooks: List = []
    name = "single process"

    @staticmethod
    def placement(device: str, replicas: int, precision: str) -> Placement:
        return single_process(device, int(replicas), precision)

    @staticmethod
    def objective(name: str, evaluation) -> Optional[str]:
        """The eval metric ``name`` resolves to; None for a run without evaluation."""
        return None if evaluation is None else objective_metric(name, evaluation.metric_names())

    @staticmethod
    def claim(request, graph, workdir: str, data=None):
        """The checkpoint dir held (``trainer.checkpoints.guard.claim``); a finished run yields its record."""
        return claim_dir(request, graph, workdir, data)

    @staticmethod
    def session_config(config):
        return config

    @staticmethod
    def session_options(options, graph):
        return options

    @staticmethod
    def checkpoint_dir(ckpt_dir: str) -> Optional[str]:
        return ckpt_dir

    @staticmethod
    def open_session(opener):
        return opener()

    @staticmethod
    def fetches(graph):
        return graph.train_op

    @staticmethod
    def at_normal_end(session) -> None:
        """Nothing: the session closes as usual."""

    @staticmethod
    def record(run, start_step: int, metrics, stats, preemption) -> Dict:
        return chief_record(run, start_step, metrics, stats, preemption, final_step(metrics, start_step))

    @staticmethod
    def report(result: Dict, workdir: str) -> None:
        report_chief(result, workdir)


def report_chief(result: Dict, workdir: str) -> None:
    """The closing line of a run that evaluated: its step, loss and eval metrics."""
    loss = "n/a" if result["loss"] is None else f"{result['loss']:.4f}"
    evals = {k[len("eval_"):]: v for k, v in result.items() if k.startswith("eval_") and k != "eval_examples"}
    shown = f"loss {loss}" + (f", {format_metrics(evals)}" if evals else "")
    log.info("done at step %d: %s; metrics in %s", result["global_step"], shown, metrics_path(workdir))


@contextlib.contextmanager
def own_dir(workdir: str):
    """A task that never touches the chief's checkpoint dir: its own dir, no restore step of its own."""
    os.makedirs(workdir, exist_ok=True)
    log.info("task dir %s", workdir)
    yield Claim(None, None)
