"""Speed benchmarks, run from the repository root as `python -m benchmarks.NAME` (quality: the evals package)."""
