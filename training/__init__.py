"""Training, evaluation and export of mdlm_hf models: `python -m training.train` (or `torchrun -m training.train`)."""


class RunError(RuntimeError):
    """A failure the user can act on (no network, no credentials, a full disk): the command lines print it as one
    line. It lives here rather than in train.py because `python -m training.train` runs that file as `__main__`, a
    second copy of the module whose classes differ from those export.py imports."""
