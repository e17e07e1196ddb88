"""A checkpoint dir: its intact checkpoints, whether they fit the graph (manifest), one writer at a time
(lock), and the protocol a training run follows before it writes there (guard)."""
