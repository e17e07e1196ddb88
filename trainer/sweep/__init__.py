"""Multirun sweeps: one job's wrapper around ``trainer.run`` (job), and sweep summaries with ``train-report`` (report)."""
