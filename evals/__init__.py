"""Quality evaluations of the model and its samplers, run from the repository root as `python -m evals.NAME`."""
