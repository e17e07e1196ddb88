"""The modes other than training, as Estimator's methods: evaluate, predict, export.

Each reads a checkpoint and never writes to the checkpoint dir.
"""
