"""Training, evaluation and export of mdlm_hf models: `python -m training.train` (or `torchrun -m training.train`)."""
