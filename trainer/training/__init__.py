"""A training run: its orchestration (train), the loop and its error policy (loop), its result record
(result), and signal handling (preemption)."""
