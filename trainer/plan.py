"""The run's config cut into the parts each layer takes, in one place.

The runner's entry points (the modes, the cluster roles) call these; below them no layer sees the whole
config: the graph takes its :class:`~trainer.model.graph.Recipe`, the hooks their
:class:`~trainer.hooks.assembly.Cadence`, the checkpoint claim its
:class:`~trainer.checkpoints.guard.Request`, the model_fn its :class:`~trainer.contract.RunConfig`.
"""

from trainer.checkpoints.guard import Request, graph_config
from trainer.contract import RunConfig
from trainer.hooks.assembly import Cadence
from trainer.model.graph import Recipe


def graph_recipe(cfg) -> Recipe:
    """What the graph layer reads (``trainer.model.graph``)."""
    return Recipe(cfg.model, cfg.optimizer, cfg.train, cfg.data, cfg.eval, cfg.checkpoint, cfg.scaffold, cfg.init_from)


def hook_cadence(cfg) -> Cadence:
    """When and where the runner's hooks act (``trainer.hooks.assembly``)."""
    ckpt, train = cfg.checkpoint, cfg.train
    return Cadence(ckpt.dir, ckpt.every_steps, ckpt.every_secs, train.max_steps, str(train.on_nan),
                   train.max_skipped_steps, train.stalled_steps_limit, cfg.eval.every_steps, cfg.eval.steps,
                   cfg.log.every_steps, cfg.summary.every_steps)


def checkpoint_request(cfg) -> Request:
    """What this run asks of its checkpoint dir (``trainer.checkpoints.guard.claim``)."""
    return Request(cfg.checkpoint.dir, cfg.model.name, graph_config(cfg.model, cfg.optimizer), cfg.train.max_steps,
                   cfg.checkpoint.restore_step, cfg.sweep.rerun_finished)


def make_run_config(cfg, role=None, session_config=None) -> RunConfig:
    """The RunConfig a model_fn gets in this process: the config's schedule, and its cluster role (None:
    one process)."""
    base = dict(
        model_dir=cfg.checkpoint.dir, tf_random_seed=cfg.train.seed, save_summary_steps=cfg.summary.every_steps,
        save_checkpoints_steps=cfg.checkpoint.every_steps, save_checkpoints_secs=cfg.checkpoint.every_secs,
        keep_checkpoint_max=cfg.checkpoint.keep, keep_checkpoint_every_n_hours=cfg.checkpoint.keep_every_n_hours,
        log_step_count_steps=cfg.log.every_steps, session_config=session_config,
    )
    if role is None or not role.cluster:
        return RunConfig(**base)
    return RunConfig(
        **base, cluster_spec={job: list(a) for job, a in role.cluster.items()}, task_type=role.job,
        task_id=role.index, is_chief=role.is_chief, num_ps_replicas=len(role.cluster.get("ps", ())),
        num_worker_replicas=role.num_replicas, global_id_in_cluster=role.replica_index,
    )
