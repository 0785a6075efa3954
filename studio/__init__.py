"""What the speed benchmarks (benchmarks/) and the quality evals (evals/) share, so that neither imports the other:

common.py   the repository's paths, the --threads flag's type, the model loaders
rules.py    the named sampler rules (the structure suite's, which the benchmarks time too)
"""
