"""One task of a local cluster, as a child process of ``distributed=local``:

    python -m trainer.cli.local_task CONFIG.yaml JOB INDEX RUN_DIR

The config is the launcher's, saved as YAML with ``distributed=cluster``; the task runs
:func:`trainer.run` as a task of a real cluster would.
"""

import logging
import sys

from omegaconf import OmegaConf

import trainer
from trainer.errors import exit_now, exit_on_error


def main(argv=None) -> None:
    config_path, job, index, workdir = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    cfg = OmegaConf.load(config_path)
    cfg.distributed.job_name, cfg.distributed.task_index = job, int(index)
    exit_on_error(lambda: trainer.run(cfg, workdir))
    exit_now(0)


if __name__ == "__main__":
    main()
