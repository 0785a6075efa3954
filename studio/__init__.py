"""What the speed benchmarks (benchmarks/) and the quality evals (evals/) share, so that neither imports the other:

common.py   the repository's paths, flags, the models and the reveal-rule grid
rules.py    the named sampler rules (the structure suite's, which the benchmarks time too)
"""
