"""The ``train`` command: Hydra's entry point, the checks before a job starts, run-dir names, ``resume=``."""
