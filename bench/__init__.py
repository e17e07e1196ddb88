"""Benchmarks of the runner against a hand-written loop and Model.fit (see BENCHMARKS.md)."""
