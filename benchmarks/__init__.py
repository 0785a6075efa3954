"""Benchmarks and the sampling study, run from the repository root as `python -m benchmarks.NAME`."""
